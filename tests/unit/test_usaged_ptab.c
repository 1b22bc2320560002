/* usaged/ptab.c: the loss-tolerance scheme (which processes each message lists) and the table
 * itself. */
#include <stdlib.h>

#include "../../usaged/usaged.h"
#include "codec.h"
#include "unit.h"

static struct usaged_sample S(uint32_t pid, uint64_t start, uint64_t cpu) {
	struct usaged_sample s = {.pid = pid, .start_ns = start, .cpu_ns = cpu};
	snprintf(s.comm, sizeof(s.comm), "p%u", pid);
	return s;
}

/* One message: scan the given samples (complete), build, and return it; the caller clears it. */
static struct wb_usage
scan(struct ptab *t, uint64_t msgno, bool full, uint64_t retire_after,
     const struct usaged_sample *s, size_t n)
{
	struct wb_usage u = {0};
	ptab_begin(t, msgno);
	for (size_t i = 0; i < n; i++)
		ptab_put(t, &s[i]);
	ptab_end(t, true, NULL, NULL);
	CHECK(ptab_build(t, full, retire_after, &u) == 0);
	return u;
}

static const struct wb_proc *find(const struct wb_usage *u, uint32_t pid)
{
	for (size_t i = 0; i < u->n_procs; i++)
		if (u->procs[i].pid == pid)
			return &u->procs[i];
	return NULL;
}

static void clear(struct wb_usage *u)
{
	struct wb_msg m = {.kind = WB_USAGE, .usage = *u};
	wb_msg_clear(&m);
}

static void test_retire_window(void)
{
	struct ptab *t = ptab_new(100, false);
	struct usaged_sample a[] = {S(1, 10, 100), S(2, 20, 200)};
	struct wb_usage u = scan(t, 0, false, 3, a, 2);
	CHECK_U64(u.n_procs, 2);
	CHECK(!u.full);
	clear(&u);
	/* pid 1 keeps running, pid 2 goes idle: listed for 3 messages in all, then not. */
	for (uint64_t m = 1; m <= 4; m++) {
		a[0].cpu_ns += 100;
		u = scan(t, m, false, 3, a, 2);
		CHECK(find(&u, 1) != NULL);
		CHECK_U64(find(&u, 1)->cpu_ns, 100 + 100 * m);
		CHECK((find(&u, 2) != NULL) == (m < 3));
		clear(&u);
	}
	/* a full snapshot lists it again, with its cumulative value */
	u = scan(t, 5, true, 3, a, 2);
	CHECK(u.full);
	CHECK(find(&u, 2) && find(&u, 2)->cpu_ns == 200);
	clear(&u);
	/* and it is back as soon as it runs */
	a[1].cpu_ns = 250;
	u = scan(t, 6, false, 3, a, 2);
	CHECK(find(&u, 2) && find(&u, 2)->cpu_ns == 250);
	clear(&u);
	ptab_destroy(&t);
	CHECK(t == NULL);
}

static void test_lost_message_recovered(void)
{
	/* Whatever message a consumer loses, the next one it gets carries the cumulative value. */
	struct ptab *t = ptab_new(100, false);
	struct usaged_sample a[] = {S(1, 10, 0)};
	uint64_t consumer = 0, truth = 0;
	for (uint64_t m = 0; m < 40; m++) {
		if (m % 7 < 3) /* runs in bursts */
			a[0].cpu_ns += 1000 + m;
		truth = a[0].cpu_ns;
		struct wb_usage u = scan(t, m, m % 10 == 0, 3, a, 1);
		if (m % 3 != 1 && find(&u, 1)) /* every third message lost */
			consumer = find(&u, 1)->cpu_ns;
		clear(&u);
	}
	CHECK_U64(consumer, truth);
	ptab_destroy(&t);
}

static struct {
	int n;
	uint32_t pid[4];
} gone;

static void note_gone(void *arg, uint32_t pid, uint64_t start_ns)
{
	if (gone.n < 4)
		gone.pid[gone.n++] = pid;
	CHECK_U64(start_ns, pid * 10);
}

static void test_exit_once(void)
{
	struct ptab *t = ptab_new(100, false);
	struct usaged_sample a[] = {S(1, 10, 100), S(2, 20, 200), S(3, 30, 0)};
	struct wb_usage u = scan(t, 0, true, 5, a, 3);
	CHECK_U64(u.n_procs, 2); /* pid 3 never ran: nothing to say */
	clear(&u);
	CHECK_U64(ptab_retire(t, NULL, NULL), 0);

	/* pid 1 reports its exit with final values; pid 2 and 3 vanish from a complete scan */
	a[0].cpu_ns = 150;
	a[0].exited = true;
	u = scan(t, 1, false, 5, a, 1);
	CHECK_U64(u.n_procs, 2);
	CHECK(find(&u, 1) && find(&u, 1)->exited && find(&u, 1)->cpu_ns == 150);
	CHECK(find(&u, 2) && find(&u, 2)->exited && find(&u, 2)->cpu_ns == 200);
	clear(&u);

	gone.n = 0;
	CHECK_U64(ptab_retire(t, note_gone, NULL), 3);
	CHECK(gone.n == 3);
	CHECK_U64(ptab_count(t), 0);
	/* never listed again, not even in a full snapshot */
	u = scan(t, 2, true, 5, NULL, 0);
	CHECK_U64(u.n_procs, 0);
	clear(&u);
	ptab_destroy(&t);
}

static void test_incomplete_scan(void)
{
	struct ptab *t = ptab_new(100, false);
	struct usaged_sample a[] = {S(1, 10, 100)};
	struct wb_usage u = scan(t, 0, false, 5, a, 1);
	clear(&u);
	ptab_begin(t, 1);
	ptab_end(t, false, NULL, NULL); /* saw nothing, but the scan failed: no one exited */
	CHECK(ptab_build(t, false, 5, &u) == 0);
	CHECK(find(&u, 1) && !find(&u, 1)->exited);
	clear(&u);
	CHECK_U64(ptab_retire(t, NULL, NULL), 0);
	ptab_destroy(&t);
}

static bool alive_7(void *arg, uint32_t pid, uint64_t start_ns)
{
	return pid == 7;
}

static void test_transient(void)
{
	/* Seen only running (not kept by the source): gone from a scan is an exit only if it no
	 * longer runs. */
	struct ptab *t = ptab_new(100, false);
	struct usaged_sample a[] = {S(7, 70, 100), S(8, 80, 100)};
	a[0].transient = a[1].transient = true;
	struct wb_usage u = scan(t, 0, false, 5, a, 2);
	clear(&u);
	ptab_begin(t, 1);
	ptab_end(t, true, alive_7, NULL);
	CHECK(ptab_build(t, false, 5, &u) == 0);
	CHECK(find(&u, 7) && !find(&u, 7)->exited);
	CHECK(find(&u, 8) && find(&u, 8)->exited);
	clear(&u);
	CHECK_U64(ptab_retire(t, NULL, NULL), 1);
	/* once the source keeps it, absence is an exit again */
	a[0].transient = false;
	a[0].cpu_ns = 150;
	u = scan(t, 2, false, 5, a, 1);
	clear(&u);
	ptab_begin(t, 3);
	ptab_end(t, true, alive_7, NULL);
	CHECK(ptab_build(t, false, 5, &u) == 0);
	CHECK(find(&u, 7) && find(&u, 7)->exited && find(&u, 7)->cpu_ns == 150);
	clear(&u);
	ptab_destroy(&t);
}

static void test_monotonic(void)
{
	struct ptab *t = ptab_new(100, false);
	struct usaged_sample a[] = {S(1, 10, 1000)};
	a[0].counters[USAGED_CYCLES] = 5000;
	struct wb_usage u = scan(t, 0, false, 5, a, 1);
	clear(&u);
	/* A source that read a little too much once (a run counted twice in a race) never makes it
	 * go back. */
	a[0].cpu_ns = 900;
	a[0].counters[USAGED_CYCLES] = 4000;
	u = scan(t, 1, false, 5, a, 1);
	CHECK_U64(find(&u, 1)->cpu_ns, 1000);
	CHECK_U64(find(&u, 1)->cycles, 5000);
	clear(&u);
	a[0].cpu_ns = 1200;
	a[0].counters[USAGED_CYCLES] = 6000;
	a[0].counters[USAGED_INSTRUCTIONS] = 7;
	u = scan(t, 2, false, 5, a, 1);
	CHECK_U64(find(&u, 1)->cpu_ns, 1200);
	CHECK_U64(find(&u, 1)->cycles, 6000);
	CHECK_U64(find(&u, 1)->instructions, 7);
	CHECK_U64(find(&u, 1)->cache_misses, 0);
	clear(&u);
	ptab_destroy(&t);
}

static void test_baseline(void)
{
	/* /proc counts from the process start: what ran before usaged's first scan is not ours. */
	struct ptab *t = ptab_new(100, true);
	struct usaged_sample a[] = {S(1, 10, 5000), S(2, 20, 7000)};
	struct wb_usage u = scan(t, 0, true, 5, a, 2);
	CHECK_U64(u.n_procs, 0);
	clear(&u);
	a[0].cpu_ns = 5300;
	struct usaged_sample b[] = {a[0], a[1],
				    S(3, 30, 400)}; /* pid 3 started since: all of it counts */
	u = scan(t, 1, false, 5, b, 3);
	CHECK_U64(u.n_procs, 2);
	CHECK(find(&u, 1) && find(&u, 1)->cpu_ns == 300);
	CHECK(find(&u, 3) && find(&u, 3)->cpu_ns == 400);
	CHECK(find(&u, 2) == NULL);
	clear(&u);
	ptab_destroy(&t);
}

static void test_pid_reuse(void)
{
	struct ptab *t = ptab_new(100, false);
	struct usaged_sample a[] = {S(7, 100, 50)};
	struct wb_usage u = scan(t, 0, false, 5, a, 1);
	clear(&u);
	/* pid 7 exited and a new process got its pid: two processes, the old one exited */
	struct usaged_sample b[] = {S(7, 900, 20)};
	u = scan(t, 1, false, 5, b, 1);
	CHECK_U64(u.n_procs, 2);
	for (size_t i = 0; i < u.n_procs; i++) {
		CHECK_U64(u.procs[i].pid, 7);
		if (u.procs[i].start_ns == 100)
			CHECK(u.procs[i].exited && u.procs[i].cpu_ns == 50);
		else
			CHECK(!u.procs[i].exited && u.procs[i].start_ns == 900 &&
			      u.procs[i].cpu_ns == 20);
	}
	clear(&u);
	CHECK_U64(ptab_retire(t, NULL, NULL), 1);
	CHECK_U64(ptab_count(t), 1);
	ptab_destroy(&t);
}

static void test_comm(void)
{
	struct ptab *t = ptab_new(100, false);
	struct usaged_sample a[] = {S(1, 10, 100)};
	snprintf(a[0].comm, sizeof(a[0].comm), "bad\xff\xfe");
	struct wb_usage u = scan(t, 0, false, 5, a, 1);
	CHECK_STR(find(&u, 1)->comm, "bad??");
	clear(&u);
	snprintf(a[0].comm, sizeof(a[0].comm), "true"); /* exec */
	a[0].cpu_ns = 101;
	u = scan(t, 1, false, 5, a, 1);
	CHECK_STR(find(&u, 1)->comm, "true");
	clear(&u);
	ptab_destroy(&t);
}

static uint64_t calls;
static uint64_t resolver(void *arg, uint32_t pid, uint64_t kcg)
{
	calls++;
	if (pid == 99)
		return 0; /* gone */
	return kcg ? kcg + 1000 : pid * 10;
}

static void test_resolve(void)
{
	struct ptab *t = ptab_new(100, false);
	struct usaged_sample a[] = {S(1, 10, 100), S(2, 20, 100), S(99, 30, 100)};
	a[0].kcgroup_id = 5;
	ptab_begin(t, 0);
	for (int i = 0; i < 3; i++)
		ptab_put(t, &a[i]);
	ptab_end(t, true, NULL, NULL);
	calls = 0;
	ptab_resolve(t, false, resolver, NULL);
	CHECK_U64(calls, 3); /* all new */
	struct wb_usage u = {0};
	CHECK(ptab_build(t, false, 5, &u) == 0);
	CHECK_U64(find(&u, 1)->cgroup_id, 1005);
	CHECK_U64(find(&u, 2)->cgroup_id, 20);
	CHECK_U64(find(&u, 99)->cgroup_id, 0);
	clear(&u);

	/* next scan: nothing new, pid 1 moved (kernel id changed), pid 2 ran */
	a[0].kcgroup_id = 6;
	a[1].cpu_ns = 200;
	ptab_begin(t, 1);
	for (int i = 0; i < 3; i++)
		ptab_put(t, &a[i]);
	ptab_end(t, true, NULL, NULL);
	calls = 0;
	ptab_resolve(t, false, resolver, NULL);
	CHECK_U64(calls, 1);
	calls = 0;
	ptab_resolve(t, false, resolver, NULL);
	CHECK_U64(calls, 0);
	ptab_resolve(t, true, resolver, NULL); /* all that ran (the /proc source) */
	CHECK_U64(calls, 1);
	CHECK(ptab_build(t, false, 5, &u) == 0);
	CHECK_U64(find(&u, 1)->cgroup_id, 1006);
	clear(&u);
	ptab_destroy(&t);
}

static uint64_t exe_calls, exe_gen = 1; /* exe_gen: which binary the pids run now */
static uint64_t exe_of(void *arg, uint32_t pid)
{
	(void)arg;
	exe_calls++;
	return pid == 7 ? 0 : pid * 100 + exe_gen; /* 7: a kernel thread */
}

/* The executable is read once a process has something to report, then again only after an exec. */
static void test_resolve_exes(void)
{
	struct ptab *t = ptab_new(100, false);
	struct usaged_sample a[] = {S(1, 10, 100), S(2, 20, 0), S(7, 30, 100)};
	ptab_begin(t, 0);
	for (int i = 0; i < 3; i++)
		ptab_put(t, &a[i]);
	ptab_end(t, true, NULL, NULL);
	exe_calls = 0;
	ptab_resolve_exes(t, exe_of, NULL);
	CHECK_U64(exe_calls, 2); /* 1 and 7; 2 has not run */
	struct wb_usage u = {0};
	CHECK(ptab_build(t, false, 5, &u) == 0);
	CHECK_U64(find(&u, 1)->exe_id, 101);
	CHECK_U64(find(&u, 7)->exe_id, 0);
	clear(&u);

	/* Ten intervals of running, no exec: no further reads (not once per interval). */
	for (uint64_t m = 1; m <= 10; m++) {
		for (int i = 0; i < 3; i++)
			a[i].cpu_ns += 100;
		ptab_begin(t, m);
		for (int i = 0; i < 3; i++)
			ptab_put(t, &a[i]);
		ptab_end(t, true, NULL, NULL);
		exe_calls = 0;
		ptab_resolve_exes(t, exe_of, NULL);
		CHECK_U64(exe_calls, m == 1 ? 1 : 0); /* 2 ran for the first time in message 1 */
	}

	/* Process 1 execs: its comm changes, and its executable is read again. */
	snprintf(a[0].comm, sizeof(a[0].comm), "after-exec");
	ptab_begin(t, 11);
	for (int i = 0; i < 3; i++)
		ptab_put(t, &a[i]);
	ptab_end(t, true, NULL, NULL);
	exe_calls = 0;
	exe_gen = 2;
	ptab_resolve_exes(t, exe_of, NULL);
	CHECK_U64(exe_calls, 1);
	CHECK(ptab_build(t, true, 5, &u) == 0);
	CHECK_U64(find(&u, 1)->exe_id, 102);
	CHECK_U64(find(&u, 2)->exe_id, 201); /* no exec: still the first reading */
	CHECK_STR(find(&u, 1)->comm, "after-exec");
	clear(&u);

	/* An exited process is not read: its pid may be another process's by now. */
	snprintf(a[1].comm, sizeof(a[1].comm), "renamed");
	a[1].exited = true;
	ptab_begin(t, 12);
	for (int i = 0; i < 3; i++)
		ptab_put(t, &a[i]);
	ptab_end(t, true, NULL, NULL);
	exe_calls = 0;
	ptab_resolve_exes(t, exe_of, NULL);
	CHECK_U64(exe_calls, 0);
	ptab_destroy(&t);
}

static void test_full_table(void)
{
	struct ptab *t = ptab_new(3, false);
	ptab_begin(t, 0);
	for (uint32_t p = 1; p <= 5; p++) {
		struct usaged_sample s = S(p, p, 1);
		CHECK(ptab_put(t, &s) == (p <= 3 ? 0 : -1));
	}
	CHECK_U64(ptab_count(t), 3);
	CHECK_U64(ptab_dropped(t), 2);
	ptab_destroy(&t);
}

static void test_churn(void)
{
	/* Many processes come and go; the table must agree with a plain model throughout. */
	enum { N = 20000, LIVE = 3000 };
	struct ptab *t = ptab_new(N, false);
	static uint64_t cpu[N];
	static bool alive[N];
	uint64_t msgno = 0;
	srand(7);
	for (int round = 0; round < 30; round++) {
		ptab_begin(t, msgno);
		int live = 0;
		for (uint32_t p = 0; p < N; p++) {
			if (!alive[p] && live < LIVE && rand() % 5 == 0)
				alive[p] = true, cpu[p] = 0;
			else if (alive[p] && rand() % 4 == 0)
				alive[p] = false;
			if (!alive[p])
				continue;
			live++;
			cpu[p] += (uint64_t)(rand() % 3);
			struct usaged_sample s = S(p + 1, (uint64_t)p * 7 + 1, cpu[p]);
			CHECK(ptab_put(t, &s) == 0);
		}
		ptab_end(t, true, NULL, NULL);
		struct wb_usage u = {0};
		CHECK(ptab_build(t, true, 1, &u) == 0);
		size_t listed_alive = 0;
		for (size_t i = 0; i < u.n_procs; i++) {
			uint32_t p = (uint32_t)u.procs[i].pid - 1;
			if (!u.procs[i].exited) {
				listed_alive++;
				CHECK(alive[p]);
				CHECK_U64(u.procs[i].cpu_ns, cpu[p]);
			}
		}
		size_t want = 0;
		for (uint32_t p = 0; p < N; p++)
			want += alive[p] && cpu[p] > 0;
		CHECK_U64(listed_alive, want);
		clear(&u);
		ptab_retire(t, NULL, NULL);
		CHECK_U64(ptab_count(t), (uint64_t)live);
		msgno++;
	}
	ptab_destroy(&t);
}

static const struct unit_case cases[] = {
    {"a process stays listed retire_after messages after it ran", test_retire_window},
    {"lost messages cost no CPU time", test_lost_message_recovered},
    {"an exited process is listed once with its final values, then retired", test_exit_once},
    {"a failed scan retires no one", test_incomplete_scan},
    {"published values never decrease", test_monotonic},
    {"a process seen only running is not taken for exited while it runs", test_transient},
    {"/proc values count from usaged's first scan", test_baseline},
    {"a reused pid is another process", test_pid_reuse},
    {"comm is valid UTF-8 and follows exec", test_comm},
    {"cgroup resolution: new, moved, and ran", test_resolve},
    {"executables: read once per process and again after an exec", test_resolve_exes},
    {"a full table drops and counts", test_full_table},
    {"churn of 20,000 pids against a model", test_churn},
};

UNIT_MAIN(cases)
