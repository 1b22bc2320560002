/*
 * alignd's usage side: the process table (hashing, deletion, sweeps) and the
 * usage deltas: lost messages, first-seen processes, exits, pid reuse, node
 * CPU totals and the cgroups and executables a slot carries.
 */
#include "../../alignd/alignd.h"
#include "unit.h"

#define S 1000000000ull

/* A table checked against a plain array under many random inserts and removals. */
static void churn(int nkeys, int rounds)
{
	struct proctab pt;
	proctab_init(&pt, 100000);
	static bool in[5000];
	memset(in, 0, sizeof(in));
	uint64_t x = 88172645463325252ull;
	for (int round = 0; round < rounds; round++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		int k = (int)(x % (uint64_t)nkeys);
		/* start_ns varies so that equal pids with other starts are other keys */
		uint64_t pid = (uint64_t)(k % 1000), start = (uint64_t)(k / 1000) * 7919;
		struct proc_entry *e = proctab_find(&pt, pid, start);
		CHECK((e != NULL) == in[k]);
		if (e) {
			CHECK_U64(e->cpu_ns, (uint64_t)k);
			proctab_remove(&pt, e);
			in[k] = false;
		} else {
			e = proctab_insert(&pt, pid, start);
			CHECK(e != NULL);
			if (e)
				e->cpu_ns = (uint64_t)k;
			in[k] = true;
		}
	}
	size_t n = 0;
	for (int k = 0; k < nkeys; k++) {
		n += in[k];
		struct proc_entry *e =
		    proctab_find(&pt, (uint64_t)(k % 1000), (uint64_t)(k / 1000) * 7919);
		CHECK((e != NULL) == in[k]);
	}
	CHECK_U64(pt.n, n);
	proctab_free(&pt);
}

static void proctab_matches_reference(void)
{
	churn(5000, 200000);
	churn(127, 200000); /* a small table */
}

/* A probe run across the end of the table, then the deletion of its head. */
static void proctab_remove_across_the_end(void)
{
	uint64_t pids[3];
	size_t found = 0;
	for (uint64_t pid = 1; found < 3 && pid < 1000000; pid++) {
		struct proctab t;
		proctab_init(&t, 10);
		struct proc_entry *e = proctab_insert(&t, pid, 0);
		if (e && (size_t)(e - t.slots) == t.cap - 1)
			pids[found++] = pid;
		proctab_free(&t);
	}
	CHECK_U64(found, 3);
	struct proctab pt;
	proctab_init(&pt, 10);
	for (size_t i = 0; i < 3; i++)
		proctab_insert(&pt, pids[i], 0)->cpu_ns = i; /* slots cap-1, 0, 1 */
	CHECK(proctab_find(&pt, pids[2], 0) == &pt.slots[1]);
	proctab_remove(&pt, proctab_find(&pt, pids[0], 0));
	CHECK(proctab_find(&pt, pids[0], 0) == NULL);
	CHECK(proctab_find(&pt, pids[1], 0) && proctab_find(&pt, pids[1], 0)->cpu_ns == 1);
	CHECK(proctab_find(&pt, pids[2], 0) && proctab_find(&pt, pids[2], 0)->cpu_ns == 2);
	proctab_free(&pt);
}

static void proctab_sweep_and_cap(void)
{
	struct proctab pt;
	proctab_init(&pt, 10);
	pt.gen = 1;
	for (uint64_t i = 0; i < 10; i++)
		CHECK(proctab_insert(&pt, i, 0) != NULL);
	CHECK(proctab_insert(&pt, 99, 0) == NULL); /* full */
	pt.gen = 2;
	for (uint64_t i = 0; i < 10; i += 2)
		proctab_find(&pt, i, 0)->gen = 2;
	CHECK_U64(proctab_sweep(&pt, 2), 5);
	CHECK_U64(pt.n, 5);
	CHECK(proctab_find(&pt, 4, 0) != NULL);
	CHECK(proctab_find(&pt, 5, 0) == NULL);
	proctab_free(&pt);
}

static void idtab_put_find_sweep(void)
{
	struct idtab t;
	idtab_init(&t, sizeof(struct wb_cgroup), offsetof(struct wb_cgroup, id), 3);
	struct wb_cgroup a = {
	    .id = 11, .path = "system.slice/nginx.service", .service = "nginx.service"};
	struct wb_cgroup b = {.id = 12, .path = "kubepods/pod1/abc", .container_id = "abc"};
	CHECK(idtab_put(&t, a.id, &a) != NULL);
	CHECK(idtab_put(&t, b.id, &b) != NULL);
	snprintf(a.service, sizeof(a.service), "nginx2.service");
	CHECK(idtab_put(&t, a.id, &a) != NULL); /* update in place */
	CHECK_U64(t.tab.n, 2);
	const struct wb_cgroup *got = idtab_find(&t, 11);
	CHECK(got && strcmp(got->service, "nginx2.service") == 0);
	got = idtab_find(&t, 12);
	CHECK(got && strcmp(got->container_id, "abc") == 0 && got->id == 12);
	struct wb_cgroup c = {.id = 13}, d = {.id = 14};
	CHECK(idtab_put(&t, c.id, &c) != NULL);
	CHECK(idtab_put(&t, d.id, &d) == NULL); /* max 3 */
	t.gen = 5;
	idtab_put(&t, b.id, &b);
	CHECK_U64(idtab_sweep(&t, 5), 2);
	CHECK(idtab_find(&t, 12) != NULL && idtab_find(&t, 11) == NULL);
	idtab_free(&t);
}

/* ---- usage deltas ---- */

struct umsg {
	struct wb_usage u;
	struct wb_proc procs[16];
	struct wb_cgroup cgroups[4];
	struct wb_exe exes[4];
};

static void umsg_init(struct umsg *m, uint64_t t, uint64_t busy_ns, bool full)
{
	memset(m, 0, sizeof(*m));
	m->u.t = t;
	m->u.ncpu = 2;
	m->u.full = full;
	m->u.cpu.user_ns = busy_ns;
	m->u.cpu.idle_ns = 2 * t - busy_ns;
	m->u.procs = m->procs;
	m->u.cgroups = m->cgroups;
	m->u.exes = m->exes;
}

static void add_proc(struct umsg *m, uint64_t pid, uint64_t start_ns, uint64_t cpu_ns, uint64_t cg,
		     bool exited)
{
	struct wb_proc *p = &m->procs[m->u.n_procs++];
	*p = (struct wb_proc){.pid = pid,
			      .start_ns = start_ns,
			      .cpu_ns = cpu_ns,
			      .cgroup_id = cg,
			      .exited = exited,
			      .instructions = cpu_ns / 2};
	snprintf(p->comm, sizeof(p->comm), "p%llu", (unsigned long long)pid);
}

static const struct wb_slot_proc *find(const struct wb_aligned *a, uint64_t pid)
{
	for (size_t i = 0; i < a->n_procs; i++)
		if (a->procs[i].pid == pid)
			return &a->procs[i];
	return NULL;
}

static void slot(struct usage_state *us, struct umsg *m, uint64_t t0, uint64_t lost,
		 struct wb_aligned *out, struct usage_counts *cnt)
{
	memset(out, 0, sizeof(*out));
	CHECK(usage_slot(us, &m->u, t0, lost, out, cnt) == 0);
}

static void aligned_clear(struct wb_aligned *a)
{
	struct wb_msg m = {.kind = WB_ALIGNED, .aligned = *a};
	wb_msg_clear(&m);
}

static void deltas_against_last_seen(void)
{
	struct usage_state us;
	struct usage_counts cnt = {0};
	struct umsg m;
	struct wb_aligned a;
	usage_init(&us, 1000, 100, 100, NULL);
	umsg_init(&m, 10 * S, 4 * S, true);
	add_proc(&m, 100, 5, 1000, 0, false);
	add_proc(&m, 200, 6, 5000, 0, false);
	usage_baseline(&us, &m.u, &cnt);
	CHECK(us.complete);

	/* 11 s: 100 ran 300 ns, 200 did not run (still listed), node busy +0.5 s. */
	umsg_init(&m, 11 * S, 4 * S + S / 2, false);
	add_proc(&m, 100, 5, 1300, 0, false);
	add_proc(&m, 200, 6, 5000, 0, false);
	slot(&us, &m, 10 * S, 0, &a, &cnt);
	CHECK_U64(a.n_procs, 1);
	CHECK_U64(find(&a, 100)->cpu_ns, 300);
	CHECK_U64(find(&a, 100)->instructions, 150);
	CHECK_U64(a.cpu.user_ns, S / 2);
	CHECK_U64(a.cpu.idle_ns, 2 * S - S / 2);
	aligned_clear(&a);

	/* 12 and 13 lost; at 14, 100 is not listed (idle) and 200 ran: its delta covers 12..14. */
	umsg_init(&m, 14 * S, 6 * S, false);
	add_proc(&m, 200, 6, 9000, 0, false);
	slot(&us, &m, 11 * S, 2, &a, &cnt);
	CHECK_U64(a.n_procs, 1);
	CHECK_U64(find(&a, 200)->cpu_ns, 4000);
	CHECK(!us.complete); /* a loss: not sure we saw every process any more */
	aligned_clear(&a);

	/* 15: 100 reappears after its gap: delta against its last value, not its total. */
	umsg_init(&m, 15 * S, 6 * S + 10, false);
	add_proc(&m, 100, 5, 1400, 0, false);
	slot(&us, &m, 14 * S, 0, &a, &cnt);
	CHECK_U64(find(&a, 100)->cpu_ns, 100);
	aligned_clear(&a);
	CHECK_U64(cnt.procs_backwards, 0);
	usage_free(&us);
}

static void first_seen_rules(void)
{
	struct usage_state us;
	struct usage_counts cnt = {0};
	struct umsg m;
	struct wb_aligned a;
	usage_init(&us, 1000, 100, 100, NULL);

	/* Baseline from a partial message: the table may miss idle processes. */
	umsg_init(&m, 10 * S, 0, false);
	add_proc(&m, 1, 1, 50, 0, false);
	usage_baseline(&us, &m.u, &cnt);
	CHECK(!us.complete);

	/* 2 is first seen: it may have run before t0, so it counts from here. */
	umsg_init(&m, 11 * S, 0, false);
	add_proc(&m, 2, 2, 7000, 0, false);
	slot(&us, &m, 10 * S, 0, &a, &cnt);
	CHECK(find(&a, 2) == NULL);
	CHECK_U64(cnt.procs_baselined, 1);
	aligned_clear(&a);

	/* With boot_ns the start decides: 3 started at 11.5 s (after t0 = 11 s), 4 at 9 s. */
	umsg_init(&m, 12 * S, 0, false);
	m.u.boot_ns = 1 * S; /* start_ns is since boot, boot at 1 s */
	add_proc(&m, 2, 2, 7100, 0, false);
	add_proc(&m, 3, 11 * S - 1 * S + S / 2, 800, 0, false);
	add_proc(&m, 4, 8 * S, 900, 0, false);
	slot(&us, &m, 11 * S, 0, &a, &cnt);
	CHECK_U64(find(&a, 2)->cpu_ns, 100);
	CHECK(find(&a, 3) && find(&a, 3)->cpu_ns == 800);
	CHECK(find(&a, 4) == NULL);
	CHECK_U64(cnt.procs_new, 1);
	CHECK_U64(cnt.procs_baselined, 2);
	aligned_clear(&a);

	/* A full message makes the table complete: every live process is known. */
	umsg_init(&m, 13 * S, 0, true);
	add_proc(&m, 2, 2, 7100, 0, false);
	add_proc(&m, 3, 10 * S + S / 2, 800, 0, false);
	add_proc(&m, 4, 8 * S, 900, 0, false);
	slot(&us, &m, 12 * S, 0, &a, &cnt);
	CHECK(us.complete);
	CHECK_U64(a.n_procs, 0);
	CHECK(proctab_find(&us.procs, 1, 1) == NULL); /* not in the full message: gone */
	aligned_clear(&a);

	/* Complete at t0 and no boot_ns: an unknown process started in the slot, counted in full.
	 */
	umsg_init(&m, 14 * S, 0, false);
	add_proc(&m, 5, 77, 333, 0, false);
	slot(&us, &m, 13 * S, 3, &a, &cnt); /* losses inside the slot do not matter for it */
	CHECK(find(&a, 5) && find(&a, 5)->cpu_ns == 333);
	CHECK(!us.complete); /* but they do for the next slot */
	aligned_clear(&a);

	/* Now incomplete: 6 is first seen, counts from here. */
	umsg_init(&m, 15 * S, 0, false);
	add_proc(&m, 6, 78, 444, 0, false);
	slot(&us, &m, 14 * S, 0, &a, &cnt);
	CHECK(find(&a, 6) == NULL);
	aligned_clear(&a);
	usage_free(&us);
}

static void exits_and_pid_reuse(void)
{
	struct usage_state us;
	struct usage_counts cnt = {0};
	struct umsg m;
	struct wb_aligned a;
	usage_init(&us, 1000, 100, 100, NULL);
	umsg_init(&m, 10 * S, 0, true);
	add_proc(&m, 42, 1000, 500, 0, false);
	usage_baseline(&us, &m.u, &cnt);

	/* 42 exits with its final values; a new 42 (other start) appears, counted in full. */
	umsg_init(&m, 11 * S, 0, false);
	add_proc(&m, 42, 1000, 650, 0, true);
	add_proc(&m, 42, 2000, 70, 0, false);
	slot(&us, &m, 10 * S, 0, &a, &cnt);
	CHECK_U64(a.n_procs, 2);
	CHECK(a.procs[0].exited && a.procs[0].cpu_ns == 150 && a.procs[0].start_ns == 1000);
	CHECK(!a.procs[1].exited && a.procs[1].cpu_ns == 70 && a.procs[1].start_ns == 2000);
	CHECK(proctab_find(&us.procs, 42, 1000) == NULL);
	CHECK_U64(us.procs.n, 1);
	aligned_clear(&a);

	/* A value that went down gives 0, and the next delta starts from it. */
	umsg_init(&m, 12 * S, 0, false);
	add_proc(&m, 42, 2000, 60, 0, false);
	slot(&us, &m, 11 * S, 0, &a, &cnt);
	CHECK_U64(a.n_procs, 0);
	CHECK_U64(cnt.procs_backwards, 1);
	aligned_clear(&a);
	umsg_init(&m, 13 * S, 0, false);
	add_proc(&m, 42, 2000, 90, 0, false);
	slot(&us, &m, 12 * S, 0, &a, &cnt);
	CHECK_U64(find(&a, 42)->cpu_ns, 30);
	aligned_clear(&a);
	usage_free(&us);
}

/* A process listed twice in one message, exited on the first: its CPU counts once. */
static void exited_listed_twice(void)
{
	struct usage_state us;
	struct usage_counts cnt = {0};
	struct umsg m;
	struct wb_aligned a;
	usage_init(&us, 1000, 100, 100, NULL);
	umsg_init(&m, 10 * S, 0, true);
	add_proc(&m, 42, 1000, 500, 0, false);
	usage_baseline(&us, &m.u, &cnt);

	umsg_init(&m, 11 * S, 0, false);
	m.u.boot_ns = 10 * S; /* the repeat would look fresh: counted again in full */
	add_proc(&m, 42, 1000, 650, 0, true);
	add_proc(&m, 42, 1000, 650, 0, false);
	slot(&us, &m, 10 * S, 0, &a, &cnt);
	uint64_t cpu_ns = 0;
	for (size_t i = 0; i < a.n_procs; i++)
		if (a.procs[i].pid == 42)
			cpu_ns += a.procs[i].cpu_ns;
	CHECK_U64(cpu_ns, 150);
	CHECK_U64(a.n_procs, 1);
	CHECK(a.procs[0].exited);
	CHECK(proctab_find(&us.procs, 42, 1000) == NULL);
	aligned_clear(&a);

	/* Without boot_ns on a complete table the repeat would be "new": counted in full. */
	umsg_init(&m, 20 * S, 0, true);
	add_proc(&m, 7, 1000, 500, 0, false);
	usage_baseline(&us, &m.u, &cnt);
	umsg_init(&m, 21 * S, 0, true);
	add_proc(&m, 7, 1000, 700, 0, true);
	add_proc(&m, 7, 1000, 700, 0, true);
	slot(&us, &m, 20 * S, 0, &a, &cnt);
	cpu_ns = 0;
	for (size_t i = 0; i < a.n_procs; i++)
		if (a.procs[i].pid == 7)
			cpu_ns += a.procs[i].cpu_ns;
	CHECK_U64(cpu_ns, 200);
	CHECK_U64(a.n_procs, 1);
	CHECK(proctab_find(&us.procs, 7, 1000) == NULL);
	aligned_clear(&a);
	usage_free(&us);
}

static void node_totals_and_reboot(void)
{
	struct usage_state us;
	struct usage_counts cnt = {0};
	struct umsg m;
	struct wb_aligned a;
	usage_init(&us, 10, 10, 10, NULL);
	umsg_init(&m, 100 * S, 30 * S, true);
	m.u.cpu.steal_ns = 5;
	usage_baseline(&us, &m.u, &cnt);
	umsg_init(&m, 101 * S, 31 * S, false);
	m.u.cpu.steal_ns = 9;
	slot(&us, &m, 100 * S, 0, &a, &cnt);
	CHECK_U64(a.cpu.user_ns, 1 * S);
	CHECK_U64(a.cpu.idle_ns, 1 * S);
	CHECK_U64(a.cpu.steal_ns, 4);
	aligned_clear(&a);
	/* Totals lower: the host rebooted, they count from zero. */
	umsg_init(&m, 102 * S, 0, false);
	m.u.cpu.user_ns = 7;
	m.u.cpu.idle_ns = 11;
	slot(&us, &m, 101 * S, 0, &a, &cnt);
	CHECK_U64(a.cpu.user_ns, 7);
	CHECK_U64(a.cpu.idle_ns, 11);
	CHECK_U64(cnt.cpu_resets, 1);
	aligned_clear(&a);
	usage_free(&us);
}

static void cgroups_of_the_slot(void)
{
	struct usage_state us;
	struct usage_counts cnt = {0};
	struct umsg m;
	struct wb_aligned a;
	usage_init(&us, 100, 100, 100, NULL);
	umsg_init(&m, 10 * S, 0, true);
	m.cgroups[0] =
	    (struct wb_cgroup){.id = 500, .path = "system.slice/a.service", .service = "a.service"};
	m.cgroups[1] = (struct wb_cgroup){.id = 600, .path = "kubepods/x/c1", .container_id = "c1"};
	m.u.n_cgroups = 2;
	add_proc(&m, 1, 1, 0, 500, false);
	add_proc(&m, 2, 1, 0, 500, false);
	add_proc(&m, 3, 1, 0, 600, false);
	usage_baseline(&us, &m.u, &cnt);
	/* Only 1 and 2 run: one cgroup, once. A new cgroup comes with its first process. */
	umsg_init(&m, 11 * S, 0, false);
	m.cgroups[0] = (struct wb_cgroup){.id = 700, .path = "machine.slice/vm1", .vm = "vm1"};
	m.u.n_cgroups = 1;
	add_proc(&m, 1, 1, 10, 500, false);
	add_proc(&m, 2, 1, 10, 500, false);
	add_proc(&m, 4, 9, 10, 700, false);
	add_proc(&m, 5, 9, 10, 999, false); /* unknown cgroup: not attached */
	slot(&us, &m, 10 * S, 0, &a, &cnt);
	CHECK_U64(a.n_cgroups, 2);
	CHECK_U64(a.cgroups[0].id, 500);
	CHECK_STR(a.cgroups[0].service, "a.service");
	CHECK_U64(a.cgroups[1].id, 700);
	CHECK_STR(a.cgroups[1].vm, "vm1");
	aligned_clear(&a);
	usage_free(&us);
}

/* Executables travel as cgroups do: remembered per host, attached once per slot, forgotten when a
 * full message no longer names them. */
static void exes_of_the_slot(void)
{
	struct usage_state us;
	struct usage_counts cnt = {0};
	struct umsg m;
	struct wb_aligned a;
	usage_init(&us, 100, 100, 100, NULL);
	umsg_init(&m, 10 * S, 0, true);
	m.exes[0] = (struct wb_exe){.id = 41, .path = "/usr/bin/sleep"};
	m.exes[1] = (struct wb_exe){.id = 42, .path = "/usr/sbin/nginx (deleted)"};
	m.u.n_exes = 2;
	add_proc(&m, 1, 1, 0, 0, false);
	add_proc(&m, 2, 1, 0, 0, false);
	add_proc(&m, 3, 1, 0, 0, false);
	m.procs[0].exe_id = m.procs[1].exe_id = 41;
	m.procs[2].exe_id = 42;
	usage_baseline(&us, &m.u, &cnt);
	/* 1 and 2 run sleep, 4 is new with a new path, 5 names a path never sent. */
	umsg_init(&m, 11 * S, 0, false);
	m.exes[0] = (struct wb_exe){.id = 43, .path = "/opt/x"};
	m.u.n_exes = 1;
	add_proc(&m, 1, 1, 10, 0, false);
	add_proc(&m, 2, 1, 10, 0, false);
	add_proc(&m, 4, 9, 10, 0, false);
	add_proc(&m, 5, 9, 10, 0, false);
	m.procs[0].exe_id = m.procs[1].exe_id = 41;
	m.procs[2].exe_id = 43;
	m.procs[3].exe_id = 999;
	slot(&us, &m, 10 * S, 0, &a, &cnt);
	CHECK_U64(find(&a, 1)->exe_id, 41);
	CHECK_U64(find(&a, 5)->exe_id, 999); /* the id goes on; receivers leave the label empty */
	CHECK_U64(a.n_exes, 2);
	CHECK(a.n_exes == 2 && a.exes[0].id == 41 && strcmp(a.exes[0].path, "/usr/bin/sleep") == 0);
	CHECK(a.n_exes == 2 && a.exes[1].id == 43 && strcmp(a.exes[1].path, "/opt/x") == 0);
	aligned_clear(&a);
	/* A full message without 42: forgotten. */
	umsg_init(&m, 12 * S, 0, true);
	m.exes[0] = (struct wb_exe){.id = 41, .path = "/usr/bin/sleep"};
	m.u.n_exes = 1;
	add_proc(&m, 1, 1, 20, 0, false);
	m.procs[0].exe_id = 41;
	slot(&us, &m, 11 * S, 0, &a, &cnt);
	CHECK(idtab_find(&us.exes, 42) == NULL && idtab_find(&us.exes, 41) != NULL);
	aligned_clear(&a);
	usage_free(&us);
}

static const struct unit_case cases[] = {
    {"proctab agrees with a reference under churn", proctab_matches_reference},
    {"proctab deletion across the table's end", proctab_remove_across_the_end},
    {"proctab sweep and cap", proctab_sweep_and_cap},
    {"idtab put, update, cap, sweep", idtab_put_find_sweep},
    {"deltas against the last value seen", deltas_against_last_seen},
    {"first-seen processes: boot_ns, completeness, losses", first_seen_rules},
    {"exits and pid reuse", exits_and_pid_reuse},
    {"a process listed twice, exited first, counts once", exited_listed_twice},
    {"node CPU deltas and reboot", node_totals_and_reboot},
    {"cgroups attached once per slot", cgroups_of_the_slot},
    {"executables attached once per slot", exes_of_the_slot},
};

UNIT_MAIN(cases)
