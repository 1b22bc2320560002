/*
 * usaged's kernel side: on-CPU time (and hardware counters where perf allows)
 * per process, charged at every context switch, plus process exits, so that
 * user space can publish a process's final values before it retires the entry.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "usaged.h"

#define E2BIG 7

char LICENSE[] SEC("license") = "GPL";

/* Which counters user space opened (bit per enum usaged_counter); set before load. */
const volatile __u32 counters_mask = 0;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, USAGED_MAX_PROCS); /* user space may resize before load */
	__type(key, struct usaged_key);
	__type(value, struct usaged_proc);
} procs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct usaged_cpu);
} cpus SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, USAGED_NSTATS);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct usaged_thread);
} threads SEC(".maps");

/* One perf event per CPU for each counter; libbpf sizes them to the CPU count. */
struct {
	__uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY);
	__type(key, __u32);
	__type(value, __u32);
} cycles SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY);
	__type(key, __u32);
	__type(value, __u32);
} instructions SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY);
	__type(key, __u32);
	__type(value, __u32);
} cache_misses SEC(".maps");

static __always_inline void stat_inc(__u32 slot)
{
	__u64 *v = bpf_map_lookup_elem(&stats, &slot);
	if (v)
		*v += 1; /* per-CPU slot: no other writer */
}

static __always_inline __u64 counter_read(void *map, __u32 which)
{
	struct bpf_perf_event_value v;

	if (!(counters_mask & (1u << which)))
		return 0;
	if (bpf_perf_event_read_value(map, BPF_F_CURRENT_CPU, &v, sizeof(v))) {
		stat_inc(USAGED_STAT_PERF_FAIL);
		return 0;
	}
	return v.counter;
}

static __always_inline void counters_read(__u64 out[USAGED_NCOUNTERS])
{
	out[USAGED_CYCLES] = counter_read(&cycles, USAGED_CYCLES);
	out[USAGED_INSTRUCTIONS] = counter_read(&instructions, USAGED_INSTRUCTIONS);
	out[USAGED_CACHE_MISSES] = counter_read(&cache_misses, USAGED_CACHE_MISSES);
}

static __always_inline void key_of(struct task_struct *task, struct usaged_key *key)
{
	key->tgid = BPF_CORE_READ(task, tgid);
	key->pad = 0;
	key->start_ns = BPF_CORE_READ(task, group_leader, start_boottime);
}

/* Make the entry of task's process (current must be task, for its cgroup). */
static __always_inline struct usaged_proc *proc_new(struct task_struct *task,
						    struct usaged_key *key, __u64 exit_ns)
{
	struct usaged_proc init = {};
	long err;

	BPF_CORE_READ_STR_INTO(&init.comm, task, group_leader, comm);
	init.cgroup_id = bpf_get_current_cgroup_id();
	init.exit_ns = exit_ns;
	err = bpf_map_update_elem(&procs, key, &init, BPF_NOEXIST);
	if (err == -E2BIG)
		stat_inc(USAGED_STAT_MAP_FULL);
	/* -EEXIST: another CPU made it first, which is as good. */
	return bpf_map_lookup_elem(&procs, key);
}

/*
 * Charge prev for what the scheduler counted since it was last charged (its
 * se.sum_exec_runtime, the count behind /proc/<pid>/stat), not for the wall
 * time since it switched in, which also holds the interrupts served meanwhile
 * and, in a VM, stolen time. Keeping the charged mark per thread makes this
 * hold even where a switch event was not seen (a thread charged at its next
 * switch-out for all it ran); the per-CPU slot is then only needed for a
 * thread's first charge, the hardware counters (per-CPU) and the current run.
 */
static __always_inline int account(struct task_struct *prev, struct task_struct *next,
				   const bool with_counters)
{
	__u64 reading[USAGED_NCOUNTERS] = {};
	struct usaged_thread *th;
	struct usaged_key key;
	struct usaged_proc *p;
	struct usaged_cpu *cur;
	__u32 zero = 0;
	__u64 now, runtime, from, delta;
	bool paired;

	cur = bpf_map_lookup_elem(&cpus, &zero);
	if (!cur)
		return 0;
	now = bpf_ktime_get_ns();
	if (with_counters)
		counters_read(reading);
	if (!BPF_CORE_READ(prev, pid))
		goto switch_in; /* the idle task */

	/* prev ran since cur->ts_ns, unless an event was missed (then cur names another thread). */
	paired = cur->ts_ns && cur->tid == (__u32)BPF_CORE_READ(prev, pid) &&
		 cur->key.tgid == (__u32)BPF_CORE_READ(prev, tgid);
	if (cur->ts_ns && !paired)
		stat_inc(USAGED_STAT_UNPAIRED);
	runtime = BPF_CORE_READ(prev, se.sum_exec_runtime);
	th = bpf_task_storage_get(&threads, prev, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (th && th->charged_ns) {
		from = th->charged_ns;
	} else {
		/* First charge since usaged started: from its switch-in, if seen. */
		if (!th)
			stat_inc(USAGED_STAT_NO_STORAGE);
		from = paired ? cur->runtime_ns : runtime;
	}
	if (th)
		th->charged_ns = runtime ? runtime : 1;
	delta = runtime > from ? runtime - from : 0;
	if (!delta && !(with_counters && paired))
		goto switch_in;

	key_of(prev, &key);
	p = bpf_map_lookup_elem(&procs, &key);
	if (!p) {
		/*
		 * The last thread of a dead process switching out for good:
		 * sched_process_exit made its entry, so a missing one was
		 * published and retired already. Do not make it again, or it
		 * would never be retired.
		 */
		if ((BPF_CORE_READ(prev, flags) & PF_EXITING) &&
		    BPF_CORE_READ(prev, signal, live.counter) == 0)
			goto switch_in;
		p = proc_new(prev, &key, 0);
		if (!p)
			goto switch_in;
	}
	if (delta)
		__sync_fetch_and_add(&p->cpu_ns, delta);
	p->cgroup_id = bpf_get_current_cgroup_id(); /* current is still prev */
	if (with_counters && paired) {
		for (int k = 0; k < USAGED_NCOUNTERS; k++)
			if (cur->counters[k] && reading[k] > cur->counters[k])
				__sync_fetch_and_add(&p->counters[k],
						     reading[k] - cur->counters[k]);
	}
switch_in:
	cur->ts_ns = now;
	cur->runtime_ns = BPF_CORE_READ(next, se.sum_exec_runtime);
	cur->tid = BPF_CORE_READ(next, pid);
	key_of(next, &cur->key);
	if (with_counters) {
		for (int k = 0; k < USAGED_NCOUNTERS; k++)
			cur->counters[k] = reading[k];
	}
	return 0;
}

/* Two variants of the switch program; user space autoloads the one it needs. */
SEC("tp_btf/sched_switch")
int BPF_PROG(on_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	return account(prev, next, false);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(on_switch_counters, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	return account(prev, next, true);
}

/* A process is gone when its last thread exits; mark its entry for user space to publish and
 * retire. */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(on_exit, struct task_struct *task)
{
	struct usaged_key key;
	struct usaged_proc *p;
	__u64 now;

	if (BPF_CORE_READ(task, signal, live.counter) != 0)
		return 0; /* other threads live on */
	now = bpf_ktime_get_ns();
	stat_inc(USAGED_STAT_EXITS);
	key_of(task, &key);
	p = bpf_map_lookup_elem(&procs, &key);
	if (p) {
		p->exit_ns = now;
		return 0;
	}
	/* It never switched out: make its entry now so its last run is charged and published. */
	proc_new(task, &key, now);
	return 0;
}

/* exec changes the command name. */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(on_exec, struct task_struct *task)
{
	struct usaged_key key;
	struct usaged_proc *p;

	key_of(task, &key);
	p = bpf_map_lookup_elem(&procs, &key);
	if (p)
		BPF_CORE_READ_STR_INTO(&p->comm, task, comm);
	return 0;
}
