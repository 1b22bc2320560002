/*
 * Types shared by usaged.bpf.c and usaged's user space (usaged/bpfsrc.c): the
 * per-process map value, the per-CPU "who runs now" slot and the stat slots.
 * Fixed-width types only; the includer provides __u32/__u64.
 */
#ifndef USAGED_BPF_H
#define USAGED_BPF_H

#define USAGED_COMM_LEN 16
#define USAGED_MAX_PROCS 100000 /* default size of the procs map */

/* Hardware counters, in the order of the perf event arrays. */
enum usaged_counter { USAGED_CYCLES, USAGED_INSTRUCTIONS, USAGED_CACHE_MISSES, USAGED_NCOUNTERS };

/*
 * Key of the procs map. The start time is part of it so that a pid reused
 * before user space retired the old entry never adds to the wrong process.
 */
struct usaged_key {
	__u32 tgid;
	__u32 pad;	/* always 0: hashed with the rest */
	__u64 start_ns; /* group leader's start_boottime, ns since boot */
};

/* Value of the procs map: cumulative since the entry was made. */
struct usaged_proc {
	__u64 cpu_ns;
	__u64 counters[USAGED_NCOUNTERS];
	__u64 cgroup_id; /* cgroup v2 id the process last ran in */
	__u64 exit_ns;	 /* bpf_ktime_get_ns() when its last thread exited; 0 while alive */
	char comm[USAGED_COMM_LEN];
	/* Threads past sched_process_exit whose final switch-out is not charged yet: with exit_ns,
	 * 0 says the values are final. */
	__u32 dying;
	__u32 pad;
};

/*
 * Per-thread storage: what of the thread's run time (se.sum_exec_runtime) is
 * charged, and what is counted but not yet added to its process's entry.
 */
struct usaged_thread {
	__u64 charged_ns; /* sum_exec_runtime up to which it is counted; 0: not yet */
	__u64 pending_ns; /* counted, not yet in the procs map */
	__u64 pending[USAGED_NCOUNTERS];
	__u32 dying; /* counted in its process's entry: uncount it at its final switch-out */
	__u32 pad;
};

/* A thread's counts go to the procs map once this much is pending, and at its exit. */
#define USAGED_FOLD_NS 100000

/* The cpus map (per-CPU array, one slot): what runs on this CPU now. */
struct usaged_cpu {
	__u64 switches;	  /* context switches seen on this CPU; 0 until the first */
	__u64 runtime_ns; /* the running thread's se.sum_exec_runtime at switch-in */
	__u32 tid;	  /* the running thread: runtimes are per thread */
	__u32 pad;
	struct usaged_key key;		  /* its process; tgid 0: the idle task */
	__u64 counters[USAGED_NCOUNTERS]; /* counter readings at switch-in */
};

/* Slots of the stats map (per-CPU array of __u64), summed by user space. */
enum usaged_stat {
	USAGED_STAT_MAP_FULL,	/* a new process found the procs map full */
	USAGED_STAT_EXITS,	/* processes whose last thread exited */
	USAGED_STAT_PERF_FAIL,	/* a counter read failed on switch */
	USAGED_STAT_UNPAIRED,	/* a task switched out whose switch-in was not seen */
	USAGED_STAT_NO_STORAGE, /* task storage unavailable (busy): charged by the CPU slot alone */
	USAGED_NSTATS
};

#endif
