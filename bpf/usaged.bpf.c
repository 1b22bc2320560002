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
/* CLOCK_MONOTONIC ns just before the programs were attached; set before load. */
const volatile __u64 attach_ns = 0;

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

/* Direct loads: tp_btf arguments are BTF pointers, cheaper to read than through bpf_probe_read. */
static __always_inline void key_of(struct task_struct *task, struct usaged_key *key)
{
	key->tgid = task->tgid;
	key->pad = 0;
	key->start_ns = task->group_leader->start_boottime;
}

/* Make the entry of task's process (current must be task, for its cgroup). */
static __always_inline struct usaged_proc *proc_new(struct task_struct *task,
						    struct usaged_key *key)
{
	struct usaged_proc init = {};
	long err;

	bpf_probe_read_kernel_str(init.comm, sizeof(init.comm), task->group_leader->comm);
	init.cgroup_id = bpf_get_current_cgroup_id();
	err = bpf_map_update_elem(&procs, key, &init, BPF_NOEXIST);
	if (err == -E2BIG)
		stat_inc(USAGED_STAT_MAP_FULL);
	/* -EEXIST: another CPU made it first, which is as good. */
	return bpf_map_lookup_elem(&procs, key);
}

/*
 * Whether t is switching out for the last time: do_task_dead() sets TASK_DEAD
 * with preemption off, right before that switch. The field is __state since
 * 5.14, state before; CO-RE keeps the one the kernel has.
 */
static __always_inline bool task_dead(struct task_struct *t)
{
	if (bpf_core_field_exists(t->__state))
		return BPF_CORE_READ(t, __state) & TASK_DEAD;
	return BPF_CORE_READ((struct task_struct___pre514 *)t, state) & TASK_DEAD;
}

/*
 * Charge prev for what the scheduler counted since it was last charged (its
 * se.sum_exec_runtime, the count behind /proc/<pid>/stat), not for the wall
 * time since it switched in, which also holds the interrupts served meanwhile
 * and, in a VM, stolen time. The charged mark is kept per thread, so a thread
 * whose switch-in was not seen is still charged in full at its next
 * switch-out; the per-CPU slot is needed only for a thread's first charge,
 * the hardware counters (per CPU) and, in user space, the current run.
 *
 * A switch costs what the benchmarks measure, so the hot path reads no clock
 * and touches the procs hash only once USAGED_FOLD_NS is pending for the
 * thread (or it exits): a thread switching every few microseconds pays for
 * the lookup once in dozens of switches.
 */
static __always_inline int account(struct task_struct *prev, struct task_struct *next,
				   const bool with_counters)
{
	__u64 reading[USAGED_NCOUNTERS] = {};
	__u64 runtime, from, delta, ctr[USAGED_NCOUNTERS] = {};
	struct usaged_thread *th;
	struct usaged_key key;
	struct usaged_proc *p;
	struct usaged_cpu *cur;
	__u32 zero = 0;
	bool paired, exiting, final = false;

	cur = bpf_map_lookup_elem(&cpus, &zero);
	if (!cur)
		return 0;
	if (with_counters)
		counters_read(reading);
	if (!prev->pid)
		goto switch_in; /* the idle task */

	/* prev ran since the last switch on this CPU, unless one was missed (the slot names another
	 * thread). */
	paired =
	    cur->switches && cur->tid == (__u32)prev->pid && cur->key.tgid == (__u32)prev->tgid;
	if (cur->switches && !paired)
		stat_inc(USAGED_STAT_UNPAIRED);
	runtime = prev->se.sum_exec_runtime;
	exiting = prev->flags & PF_EXITING;
	if (with_counters && paired) {
		for (int k = 0; k < USAGED_NCOUNTERS; k++)
			if (cur->counters[k] && reading[k] > cur->counters[k])
				ctr[k] = reading[k] - cur->counters[k];
	}

	th = bpf_task_storage_get(&threads, prev, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!th) {
		/* No storage (allocation failed or busy): charge this run by the slot alone. */
		stat_inc(USAGED_STAT_NO_STORAGE);
		delta = paired && runtime > cur->runtime_ns ? runtime - cur->runtime_ns : 0;
	} else {
		/*
		 * First charge: a thread forked since usaged started counts from 0;
		 * an older one from its switch-in, if seen, else from now.
		 */
		if (th->charged_ns)
			from = th->charged_ns;
		else if (prev->start_time > attach_ns)
			from = 0;
		else
			from = paired ? cur->runtime_ns : runtime;
		th->charged_ns = runtime ? runtime : 1;
		th->pending_ns += runtime > from ? runtime - from : 0;
		for (int k = 0; k < USAGED_NCOUNTERS; k++)
			th->pending[k] += ctr[k];
		if (th->pending_ns < USAGED_FOLD_NS && !exiting)
			goto switch_in;
		/* A thread on_exit counted in its entry: its last charge makes the values final. */
		final = th->dying && task_dead(prev);
		delta = th->pending_ns;
		th->pending_ns = 0;
		for (int k = 0; k < USAGED_NCOUNTERS; k++) {
			ctr[k] = th->pending[k];
			th->pending[k] = 0;
		}
	}
	if (!delta && !ctr[0] && !ctr[1] && !ctr[2] && !final)
		goto switch_in;

	if (paired)
		key = cur->key; /* made at switch-in */
	else
		key_of(prev, &key);
	p = bpf_map_lookup_elem(&procs, &key);
	if (!p) {
		/*
		 * The last thread of a dead process switching out for good:
		 * sched_process_exit made its entry, so a missing one was
		 * published and retired already. Do not make it again, or it
		 * would never be retired.
		 */
		if (exiting && prev->signal->live.counter == 0)
			goto switch_in;
		p = proc_new(prev, &key);
		if (!p)
			goto switch_in;
	}
	if (delta)
		__sync_fetch_and_add(&p->cpu_ns, delta);
	for (int k = 0; k < USAGED_NCOUNTERS; k++)
		if (ctr[k])
			__sync_fetch_and_add(&p->counters[k], ctr[k]);
	p->cgroup_id = bpf_get_current_cgroup_id(); /* current is still prev */
	if (final) {
		th->dying = 0;
		__sync_fetch_and_add(&p->dying,
				     -1); /* after the charge: user space reads it last */
	}
switch_in:
	cur->switches++;
	cur->runtime_ns = next->se.sum_exec_runtime;
	cur->tid = next->pid;
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

/*
 * Every exiting thread is counted in its process's entry (dying) until its
 * final switch-out charges its last run; a process is gone when its last
 * thread exits (signal->live is 0: do_exit() drops it before this tracepoint
 * on every kernel), which marks the entry with exit_ns. User space publishes
 * the process as exited, and retires its entry, once both hold: its values are
 * final then, however long the exit takes to reach that switch.
 */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(on_exit, struct task_struct *task)
{
	bool last = task->signal->live.counter == 0;
	struct usaged_thread *th;
	struct usaged_key key;
	struct usaged_proc *p;

	if (last)
		stat_inc(USAGED_STAT_EXITS);
	key_of(task, &key);
	p = bpf_map_lookup_elem(&procs, &key);
	if (!p) /* it never switched out (or not with enough to charge): its last run goes here */
		p = proc_new(task, &key);
	if (!p)
		return 0; /* a full map: user space sees it go from /proc, if it saw it run */
	th = bpf_task_storage_get(&threads, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (th && !th->dying) {
		th->dying = 1;
		__sync_fetch_and_add(&p->dying,
				     1); /* before exit_ns, which user space reads first */
	}
	if (last)
		p->exit_ns = bpf_ktime_get_ns();
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
		bpf_probe_read_kernel_str(p->comm, sizeof(p->comm), task->comm);
	return 0;
}
