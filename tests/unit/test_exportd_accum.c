/*
 * exportd's accumulators: slot energies add up per host, zone and workload;
 * replays and restarts never count twice; bad estimates change nothing;
 * retention and the series cap hold.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "unit.h"

#include "codec.h"
#include "../../exportd/exportd.h"

#define S 1000000000ull

static struct accum_limits lim_default(void)
{
	return (struct accum_limits){.levels = EX_LEVELS_ALL,
				     .max_series = 1000000,
				     .max_terminated = 500,
				     .terminated_ttl_ns = 600 * S,
				     .stale_after_ns = 300 * S,
				     .max_hosts = 8};
}

/* An estimate with nz zones named z0.. (zone "package" unless kinds given), np processes. */
static void est_init(struct wb_msg *m, const char *host, uint64_t t0, uint64_t t1, size_t nz,
		     size_t np)
{
	*m = (struct wb_msg){.kind = WB_ESTIMATE};
	struct wb_estimate *e = &m->estimate;
	snprintf(e->env.host, sizeof e->env.host, "%s", host);
	snprintf(e->env.kind, sizeof e->env.kind, "estimate");
	snprintf(e->env.src, sizeof e->env.src, "estimd");
	snprintf(e->mode, sizeof e->mode, "measured");
	e->t0 = t0;
	e->t1 = t1;
	e->ncpu = 4;
	e->cpu_usage_ratio = 0.25;
	e->n_zones = nz;
	e->zones = wb_array_new(nz, sizeof *e->zones);
	for (size_t z = 0; z < nz; z++) {
		snprintf(e->zones[z].name, sizeof e->zones[z].name, "zone-%zu", z);
		snprintf(e->zones[z].zone, sizeof e->zones[z].zone, "z%zu", z);
		snprintf(e->zones[z].path, sizeof e->zones[z].path,
			 "/sys/class/powercap/intel-rapl:%zu", z);
	}
	e->n_procs = np;
	e->procs = wb_array_new(np, sizeof *e->procs);
	for (size_t i = 0; i < np; i++) {
		e->procs[i].pid = 100 + i;
		e->procs[i].start_ns = 5000 + i;
		snprintf(e->procs[i].comm, sizeof e->procs[i].comm, "proc%zu", i);
		e->procs[i].n_energy_uj = nz;
		e->procs[i].energy_uj = wb_array_new(nz, sizeof(uint64_t));
	}
}

/* Zone z: energy total/active; idle is the rest. */
static void est_zone(struct wb_msg *m, size_t z, uint64_t total, uint64_t active)
{
	m->estimate.zones[z].energy_uj = total;
	m->estimate.zones[z].active_uj = active;
	m->estimate.zones[z].idle_uj = total - active;
}

static struct ex_work *find_proc(struct accum *a, const char *host, uint64_t pid, uint64_t start_ns)
{
	struct ex_host *h = accum_host(a, host);
	if (!h)
		return NULL;
	struct ex_wmap *m = &h->works[EX_PROCESS];
	for (size_t i = 0; i < m->cap; i++)
		if (m->slots[i].used && m->slots[i].w->pid == pid &&
		    m->slots[i].w->start_ns == start_ns)
			return m->slots[i].w;
	return NULL;
}

static void test_slots_add_up(void)
{
	struct accum_limits lim = lim_default();
	struct accum *a = accum_new(&lim);
	struct wb_msg m;
	est_init(&m, "h1", 10 * S, 11 * S, 1, 2);
	est_zone(&m, 0, 30000000, 20000000); /* 30 J in 1 s, 20 J active */
	m.estimate.procs[0].energy_uj[0] = 15000000;
	m.estimate.procs[1].energy_uj[0] = 4000000;
	m.estimate.procs[0].cpu_ns = 700000000;
	m.estimate.zones[0].unattributed_uj = 1000000;
	CHECK(accum_add(a, &m.estimate, NULL) == 0);
	wb_msg_clear(&m);

	est_init(&m, "h1", 11 * S, 13 * S, 1, 1);
	est_zone(&m, 0, 40000000, 10000000); /* 40 J in 2 s */
	m.estimate.procs[0].energy_uj[0] = 10000000;
	m.estimate.procs[0].cpu_ns = 300000000;
	CHECK(accum_add(a, &m.estimate, NULL) == 0);
	wb_msg_clear(&m);

	struct ex_host *h = accum_host(a, "h1");
	CHECK(h != NULL);
	CHECK_U64(h->nzones, 1);
	CHECK_U64(h->zones[0].total_uj, 70000000);
	CHECK_U64(h->zones[0].active_uj, 30000000);
	CHECK_U64(h->zones[0].idle_uj, 40000000);
	CHECK_U64(h->zones[0].slot_total_uj, 40000000);
	CHECK_U64(h->slot_ns, 2 * S);
	struct ex_work *p0 = find_proc(a, "h1", 100, 5000), *p1 = find_proc(a, "h1", 101, 5001);
	CHECK(p0 && p1);
	if (p0 && p1) {
		CHECK_U64(p0->uj[0], 25000000);
		CHECK_U64(p0->uj[p0->nz + 0], 10000000); /* its energy in the last slot */
		CHECK_U64(p0->cpu_ns, 1000000000);
		CHECK_U64(p1->uj[0], 4000000);
		CHECK(p1->last_t1 != h->last_t1); /* did not run in the last slot: 0 W */
	}
	CHECK_U64(a->version, 2);
	accum_destroy(&a);
	CHECK(a == NULL);
}

static void test_replay_and_restart(void)
{
	struct accum_limits lim = lim_default();
	struct accum *a = accum_new(&lim);
	struct wb_msg m;
	enum accum_reason why;
	for (uint64_t t = 0; t < 5; t++) {
		est_init(&m, "h1", (100 + t) * S, (101 + t) * S, 1, 0);
		m.estimate.env.epoch = 1;
		est_zone(&m, 0, 1000000, 0);
		CHECK(accum_add(a, &m.estimate, NULL) == 0);
		wb_msg_clear(&m);
	}
	/* estimd restarts (new epoch) and replays the last two slots, then goes on */
	for (uint64_t t = 3; t < 8; t++) {
		est_init(&m, "h1", (100 + t) * S, (101 + t) * S, 1, 0);
		m.estimate.env.epoch = 2;
		m.estimate.env.seq = t - 3;
		est_zone(&m, 0, 1000000, 0);
		int rc = accum_add(a, &m.estimate, &why);
		if (t < 5) {
			CHECK(rc == -1);
			CHECK(why == ACC_R_STALE);
		} else {
			CHECK(rc == 0);
		}
		wb_msg_clear(&m);
	}
	struct ex_host *h = accum_host(a, "h1");
	CHECK_U64(h->zones[0].total_uj, 8000000);
	CHECK_U64(a->rejected[ACC_R_STALE], 2);
	accum_destroy(&a);
}

static void test_overlap_is_clipped(void)
{
	struct accum_limits lim = lim_default();
	struct accum *a = accum_new(&lim);
	struct wb_msg m;
	est_init(&m, "h1", 10 * S, 12 * S, 1, 0);
	est_zone(&m, 0, 2000000, 1000000);
	CHECK(accum_add(a, &m.estimate, NULL) == 0);
	wb_msg_clear(&m);
	/* [11, 15] overlaps [10, 12] by 1 s of its 4: count 3/4 */
	est_init(&m, "h1", 11 * S, 15 * S, 1, 0);
	est_zone(&m, 0, 4000000, 2000000);
	CHECK(accum_add(a, &m.estimate, NULL) == 0);
	wb_msg_clear(&m);
	struct ex_host *h = accum_host(a, "h1");
	CHECK_U64(h->zones[0].total_uj, 5000000);
	CHECK_U64(h->zones[0].active_uj, 2500000);
	CHECK_U64(h->zones[0].idle_uj, 2500000);
	CHECK_U64(h->slot_ns, 3 * S);
	CHECK_U64(a->clipped, 1);
	accum_destroy(&a);
}

/* Estimate k of a producer with cumulative totals: zone z has (k + 1 + z) J, a quarter active. */
static void est_with_totals(struct wb_msg *m, uint64_t k, uint64_t epoch, uint64_t sum[2])
{
	est_init(m, "h1", (100 + k) * S, (101 + k) * S, 2, 0);
	m->estimate.env.epoch = 1;
	m->estimate.env.seq = k;
	m->estimate.total_epoch = epoch;
	for (size_t z = 0; z < 2; z++) {
		uint64_t e = (k + 1 + z) * 1000000;
		est_zone(m, z, e, e / 4);
		snprintf(m->estimate.zones[z].zone, sizeof m->estimate.zones[z].zone, "package");
		sum[z] += e;
		struct wb_est_zone *ez = &m->estimate.zones[z];
		ez->total_uj = sum[z];
		ez->active_total_uj = sum[z] / 4;
		ez->idle_total_uj = sum[z] - sum[z] / 4;
	}
}

/* Lost estimates: the node counters follow estimd's totals, so they hold every microjoule. */
static void test_node_totals_recover_lost(void)
{
	struct accum_limits lim = lim_default();
	struct accum *a = accum_new(&lim);
	struct wb_msg m;
	uint64_t sum[2] = {0, 0};
	for (uint64_t k = 0; k < 10; k++) {
		est_with_totals(&m, k, 555, sum);
		if (k != 3 && k != 4 && k != 7)
			CHECK(accum_add(a, &m.estimate, NULL) == 0);
		wb_msg_clear(&m);
	}
	struct ex_host *h = accum_host(a, "h1");
	CHECK(h && h->nzones == 1); /* two package zones: aggregated */
	if (!h)
		return;
	CHECK_STR(h->zones[0].path, "aggregated-package");
	CHECK_U64(h->zones[0].total_uj, sum[0] + sum[1]);
	CHECK_U64(h->zones[0].active_uj, sum[0] / 4 + sum[1] / 4);
	CHECK_U64(h->zones[0].idle_uj, h->zones[0].total_uj - h->zones[0].active_uj);
	/* The watts gauge is the last slot's own energy. */
	CHECK_U64(h->zones[0].slot_total_uj, 10000000 + 11000000);
	CHECK_U64(a->recovered, 2);
	CHECK_U64(a->recovered_uj, (4 + 5 + 5 + 6) * 1000000ull + (8 + 9) * 1000000ull);

	/* A new total_epoch (estimd restarted without its state): the slot's values. */
	uint64_t before = h->zones[0].total_uj;
	uint64_t sum2[2] = {0, 0};
	est_with_totals(&m, 12, 556, sum2);
	CHECK(accum_add(a, &m.estimate, NULL) == 0);
	wb_msg_clear(&m);
	CHECK_U64(h->zones[0].total_uj, before + 13000000 + 14000000);
	/* Another producer with the same total_epoch is not diffed with. */
	before = h->zones[0].total_uj;
	est_with_totals(&m, 13, 556, sum2); /* lost */
	wb_msg_clear(&m);
	est_with_totals(&m, 14, 556, sum2);
	snprintf(m.estimate.env.src, sizeof m.estimate.env.src, "estimd-b");
	CHECK(accum_add(a, &m.estimate, NULL) == 0);
	wb_msg_clear(&m);
	CHECK_U64(h->zones[0].total_uj, before + 15000000 + 16000000);
	/* Totals that do not add up are not used either. */
	before = h->zones[0].total_uj;
	est_with_totals(&m, 15, 556, sum2); /* lost */
	wb_msg_clear(&m);
	est_with_totals(&m, 16, 556, sum2);
	snprintf(m.estimate.env.src, sizeof m.estimate.env.src, "estimd-b");
	m.estimate.zones[0].idle_total_uj++;
	CHECK(accum_add(a, &m.estimate, NULL) == 0);
	wb_msg_clear(&m);
	/* zone-0 by its slot value (17 J); zone-1 by its totals: slot 16 (18 J) and lost 15 (17 J).
	 */
	CHECK_U64(h->zones[0].total_uj, before + 17000000 + 17000000 + 18000000);
	accum_destroy(&a);
}

/* Totals that step past the physical bound since the last slot applied (exportd restarted
 * beside a hostile estimd): the slot's own energy counts, and it is counted. */
static void test_node_totals_bounded(void)
{
	struct accum_limits lim = lim_default();
	lim.bound.max_zone_w = 5000;
	struct accum *a = accum_new(&lim);
	struct wb_msg m;
	uint64_t sum[2] = {0, 0};
	est_with_totals(&m, 0, 555, sum);
	CHECK(accum_add(a, &m.estimate, NULL) == 0);
	wb_msg_clear(&m);
	/* slot 1 lost, slot 2's zone 0 total 2^62 uJ further: 4.6e12 J in 2 s */
	est_with_totals(&m, 1, 555, sum);
	wb_msg_clear(&m);
	est_with_totals(&m, 2, 555, sum);
	struct wb_est_zone *ez = &m.estimate.zones[0];
	ez->total_uj += 1ull << 62;
	ez->idle_total_uj += 1ull << 62;
	CHECK(accum_add(a, &m.estimate, NULL) == 0);
	wb_msg_clear(&m);
	struct ex_host *h = accum_host(a, "h1");
	CHECK(h != NULL);
	if (!h)
		return;
	/* zone 0: slots 0 and 2 as sent (1 + 3 J); zone 1: its totals (2 + 3 + 4 J) */
	CHECK_U64(h->zones[0].total_uj, (1 + 3 + 2 + 3 + 4) * 1000000ull);
	CHECK_U64(a->totals_implausible, 1);
	accum_destroy(&a);
}

/*
 * estimd killed after publishing past its last checkpoint: its next estimate tells the
 * total again exactly, but with the part published since split otherwise (idle total
 * below the last one seen here). The node counter takes the whole difference; neither
 * active nor idle goes back.
 */
static void test_totals_resplit_after_kill(void)
{
	struct accum_limits lim = lim_default();
	struct accum *a = accum_new(&lim);
	struct wb_msg m;
	uint64_t sum[2] = {0, 0};
	for (uint64_t k = 0; k < 3; k++) {
		est_with_totals(&m, k, 777, sum);
		CHECK(accum_add(a, &m.estimate, NULL) == 0);
		wb_msg_clear(&m);
	}
	struct ex_host *h = accum_host(a, "h1");
	CHECK(h != NULL);
	if (!h)
		return;
	uint64_t tot0 = h->zones[0].total_uj, act0 = h->zones[0].active_uj,
		 idle0 = h->zones[0].idle_uj;
	/* slot 3 lost; slot 4 comes from a restarted estimd (new epoch, same total_epoch) whose
	 * idle totals are those of slot 1 and whose active totals hold the rest */
	est_with_totals(&m, 3, 777, sum);
	wb_msg_clear(&m);
	est_with_totals(&m, 4, 777, sum);
	m.estimate.env.epoch = 2;
	m.estimate.env.seq = 0;
	for (size_t z = 0; z < 2; z++) {
		struct wb_est_zone *ez = &m.estimate.zones[z];
		uint64_t idle1 = ((1 + z) + (2 + z)) * 1000000;
		idle1 -= idle1 / 4;
		ez->idle_total_uj = idle1;
		ez->active_total_uj = ez->total_uj - idle1;
	}
	CHECK(accum_add(a, &m.estimate, NULL) == 0);
	wb_msg_clear(&m);
	CHECK_U64(h->zones[0].total_uj, sum[0] + sum[1]); /* every microjoule, once */
	CHECK_U64(h->zones[0].total_uj - tot0, (4 + 5 + 5 + 6) * 1000000ull);
	CHECK(h->zones[0].active_uj >= act0);
	CHECK_U64(h->zones[0].idle_uj, idle0); /* idle was told lower: it stays */
	CHECK_U64(h->zones[0].active_uj + h->zones[0].idle_uj, h->zones[0].total_uj);
	accum_destroy(&a);
}

/* A host without zones (estimd in model mode without a model): processes count their CPU time. */
static void test_no_zones(void)
{
	struct accum_limits lim = lim_default();
	struct accum *a = accum_new(&lim);
	struct wb_msg m;
	for (uint64_t t = 0; t < 3; t++) {
		est_init(&m, "h1", (10 + t) * S, (11 + t) * S, 0, 2);
		m.estimate.procs[0].cpu_ns = 1000;
		CHECK(accum_add(a, &m.estimate, NULL) == 0);
		wb_msg_clear(&m);
	}
	struct ex_work *p = find_proc(a, "h1", 100, 5000);
	CHECK(p != NULL);
	if (p) {
		CHECK_U64(p->nz, 0);
		CHECK_U64(p->cpu_ns, 3000);
	}
	CHECK_U64(accum_host(a, "h1")->nzones, 0);
	accum_destroy(&a);
}

/* Each bad estimate is refused for its reason and changes no accumulator. */
static void test_bad_estimates_change_nothing(void)
{
	struct accum_limits lim = lim_default();
	struct accum *a = accum_new(&lim);
	struct wb_msg m;
	est_init(&m, "h1", 10 * S, 11 * S, 2, 1);
	est_zone(&m, 0, 1000, 500);
	est_zone(&m, 1, 1000, 500);
	CHECK(accum_add(a, &m.estimate, NULL) == 0);
	wb_msg_clear(&m);

	enum accum_reason why;
	for (int bad = 0; bad < 7; bad++) {
		est_init(&m, "h1", 20 * S, 21 * S, 2, 1);
		est_zone(&m, 0, 1000, 500);
		est_zone(&m, 1, 1000, 500);
		m.estimate.procs[0].energy_uj[0] = 100;
		enum accum_reason want = ACC_R_COUNT;
		switch (bad) {
		case 0:
			m.estimate.t1 = m.estimate.t0;
			want = ACC_R_SLOT;
			break;
		case 1:
			m.estimate.procs[0].n_energy_uj = 1;
			want = ACC_R_ARRAY;
			break;
		case 2:
			m.estimate.zones[1].idle_uj += 1;
			want = ACC_R_ZONE_SUM;
			break;
		case 3:
			m.estimate.procs[0].energy_uj[1] = 501;
			want = ACC_R_OVER;
			break;
		case 4:
			m.estimate.zones[1] = m.estimate.zones[0];
			want = ACC_R_DUP_ZONE;
			break;
		case 5: {
			/* a container whose array is short */
			m.estimate.n_containers = 1;
			m.estimate.containers = wb_array_new(1, sizeof *m.estimate.containers);
			snprintf(m.estimate.containers[0].id, sizeof m.estimate.containers[0].id,
				 "c1");
			want = ACC_R_ARRAY;
			break;
		}
		case 6:
			m.estimate.zones[0].unattributed_uj =
			    401; /* 100 to the process + 401 > 500 */
			want = ACC_R_OVER;
			break;
		}
		CHECK(accum_add(a, &m.estimate, &why) == -1);
		CHECK_STR(accum_reason_name(why), accum_reason_name(want));
		wb_msg_clear(&m);
	}
	struct ex_host *h = accum_host(a, "h1");
	CHECK_U64(h->zones[0].total_uj, 1000);
	CHECK_U64(h->zones[1].total_uj, 1000);
	CHECK_U64(h->last_t1, 11 * S);
	CHECK_U64(a->version, 1);
	CHECK_U64(find_proc(a, "h1", 100, 5000)->uj[0], 0);
	accum_destroy(&a);
}

static void test_sockets_aggregate(void)
{
	struct accum_limits lim = lim_default();
	struct accum *a = accum_new(&lim);
	struct wb_msg m;
	est_init(&m, "h1", 10 * S, 11 * S, 3, 1);
	snprintf(m.estimate.zones[0].zone, 16, "package");
	snprintf(m.estimate.zones[1].zone, 16, "package");
	snprintf(m.estimate.zones[2].zone, 16, "dram");
	est_zone(&m, 0, 1000, 600);
	est_zone(&m, 1, 3000, 400);
	est_zone(&m, 2, 500, 100);
	m.estimate.procs[0].energy_uj[0] = 600;
	m.estimate.procs[0].energy_uj[1] = 400;
	m.estimate.procs[0].energy_uj[2] = 50;
	CHECK(accum_add(a, &m.estimate, NULL) == 0);
	wb_msg_clear(&m);
	struct ex_host *h = accum_host(a, "h1");
	CHECK_U64(h->nzones, 2);
	CHECK_STR(h->zones[0].zone, "package");
	CHECK_STR(h->zones[0].path, "aggregated-package");
	CHECK_U64(h->zones[0].total_uj, 4000);
	CHECK_U64(h->zones[0].active_uj, 1000);
	CHECK_STR(h->zones[1].path, "/sys/class/powercap/intel-rapl:2");
	struct ex_work *p = find_proc(a, "h1", 100, 5000);
	CHECK_U64(p->uj[0], 1000);
	CHECK_U64(p->uj[1], 50);
	accum_destroy(&a);
}

static void test_terminated_retention(void)
{
	struct accum_limits lim = lim_default();
	lim.max_terminated = 2;
	lim.terminated_ttl_ns = 60 * S;
	lim.stale_after_ns = 30 * S;
	struct accum *a = accum_new(&lim);
	struct wb_msg m;
	/* slot 1: four processes run, three exit */
	est_init(&m, "h1", 10 * S, 11 * S, 1, 4);
	est_zone(&m, 0, 1000, 400);
	for (int i = 0; i < 4; i++)
		m.estimate.procs[i].energy_uj[0] = 100;
	m.estimate.procs[0].exited = true;
	m.estimate.procs[1].exited = true;
	m.estimate.procs[2].exited = true;
	CHECK(accum_add(a, &m.estimate, NULL) == 0);
	wb_msg_clear(&m);
	struct ex_host *h = accum_host(a, "h1");
	/* only the two newest terminated stay; the oldest (first in the list) went */
	CHECK_U64(h->nterm[EX_PROCESS], 2);
	CHECK_U64(a->evicted[EX_PROCESS], 1);
	CHECK(find_proc(a, "h1", 100, 5000) == NULL);
	CHECK(find_proc(a, "h1", 101, 5001) && find_proc(a, "h1", 101, 5001)->terminated);
	CHECK(find_proc(a, "h1", 103, 5003) && !find_proc(a, "h1", 103, 5003)->terminated);

	/* 40 s later process 103 has not run: stale, so terminated; 61 s after slot 1 the first two
	 * go */
	est_init(&m, "h1", 50 * S, 51 * S, 1, 0);
	est_zone(&m, 0, 1000, 0);
	CHECK(accum_add(a, &m.estimate, NULL) == 0);
	wb_msg_clear(&m);
	CHECK(find_proc(a, "h1", 103, 5003) && find_proc(a, "h1", 103, 5003)->terminated);
	est_init(&m, "h1", 71 * S, 72 * S, 1, 0);
	est_zone(&m, 0, 1000, 0);
	CHECK(accum_add(a, &m.estimate, NULL) == 0);
	wb_msg_clear(&m);
	CHECK(find_proc(a, "h1", 101, 5001) == NULL);
	CHECK(find_proc(a, "h1", 102, 5002) == NULL);
	CHECK(find_proc(a, "h1", 103, 5003) != NULL);
	CHECK_U64(h->nterm[EX_PROCESS], 1);
	CHECK_U64(a->series[EX_PROCESS], 3); /* 103: joules, watts, seconds */
	/* it runs again: back to running, its total kept */
	est_init(&m, "h1", 72 * S, 73 * S, 1, 4);
	est_zone(&m, 0, 1000, 400);
	m.estimate.procs[3].energy_uj[0] = 5;
	CHECK(accum_add(a, &m.estimate, NULL) == 0);
	wb_msg_clear(&m);
	struct ex_work *p = find_proc(a, "h1", 103, 5003);
	CHECK(p && !p->terminated);
	CHECK_U64(p ? p->uj[0] : 0, 105);
	accum_destroy(&a);
}

static void test_series_cap(void)
{
	struct accum_limits lim = lim_default();
	lim.max_series = 10; /* 1 zone: 3 series per process */
	struct accum *a = accum_new(&lim);
	struct wb_msg m;
	est_init(&m, "h1", 10 * S, 11 * S, 1, 4);
	est_zone(&m, 0, 1000, 400);
	CHECK(accum_add(a, &m.estimate, NULL) == 0);
	wb_msg_clear(&m);
	CHECK_U64(accum_series(a), 9);
	CHECK_U64(a->dropped[EX_PROCESS], 3);
	CHECK(find_proc(a, "h1", 103, 5003) == NULL);
	/* next slot: 100 exits, 103 runs again and takes the room of the terminated 100 */
	est_init(&m, "h1", 11 * S, 12 * S, 1, 2);
	est_zone(&m, 0, 1000, 400);
	m.estimate.procs[0].exited = true;
	m.estimate.procs[1].pid = 103;
	m.estimate.procs[1].start_ns = 5003;
	m.estimate.procs[1].energy_uj[0] = 9;
	CHECK(accum_add(a, &m.estimate, NULL) == 0);
	wb_msg_clear(&m);
	CHECK(find_proc(a, "h1", 100, 5000) == NULL);
	CHECK(find_proc(a, "h1", 103, 5003) != NULL);
	CHECK_U64(a->evicted[EX_PROCESS], 1);
	CHECK_U64(a->dropped[EX_PROCESS], 3);
	CHECK_U64(accum_series(a), 9);
	accum_destroy(&a);
}

/* A zone appearing later must not take the workloads past the cap either. */
static void test_new_zone_within_cap(void)
{
	struct accum_limits lim = lim_default();
	lim.max_series = 6;
	struct accum *a = accum_new(&lim);
	struct wb_msg m;
	est_init(&m, "h1", 10 * S, 11 * S, 1, 2);
	est_zone(&m, 0, 1000, 400);
	CHECK(accum_add(a, &m.estimate, NULL) == 0);
	wb_msg_clear(&m);
	CHECK_U64(accum_series(a), 6);
	est_init(&m, "h1", 11 * S, 12 * S, 2, 2);
	est_zone(&m, 0, 1000, 400);
	est_zone(&m, 1, 1000, 400);
	m.estimate.procs[0].energy_uj[0] = 7;
	m.estimate.procs[0].energy_uj[1] = 9;
	CHECK(accum_add(a, &m.estimate, NULL) == 0);
	wb_msg_clear(&m);
	CHECK_U64(accum_series(a), 6);
	CHECK_U64(a->dropped[EX_PROCESS], 4);
	struct ex_work *p = find_proc(a, "h1", 100, 5000);
	CHECK_U64(p->nz, 1);
	CHECK_U64(p->uj[0], 7);
	CHECK_U64(accum_host(a, "h1")->nzones, 2);
	accum_destroy(&a);
}

static void test_levels_and_pid_reuse(void)
{
	struct accum_limits lim = lim_default();
	lim.levels = 1u << EX_NODE | 1u << EX_CONTAINER;
	struct accum *a = accum_new(&lim);
	struct wb_msg m;
	est_init(&m, "h1", 10 * S, 11 * S, 1, 2);
	est_zone(&m, 0, 1000, 400);
	m.estimate.n_containers = 1;
	m.estimate.containers = wb_array_new(1, sizeof *m.estimate.containers);
	snprintf(m.estimate.containers[0].id, 128, "abc");
	snprintf(m.estimate.containers[0].runtime, 16, "cri-o");
	m.estimate.containers[0].n_energy_uj = 1;
	m.estimate.containers[0].energy_uj = wb_array_new(1, sizeof(uint64_t));
	m.estimate.containers[0].energy_uj[0] = 300;
	m.estimate.containers[0].cpu_ns = 2 * S;
	CHECK(accum_add(a, &m.estimate, NULL) == 0);
	wb_msg_clear(&m);
	CHECK_U64(a->series[EX_PROCESS], 0);
	CHECK_U64(a->series[EX_CONTAINER], 3);
	struct ex_host *h = accum_host(a, "h1");
	CHECK_U64(h->works[EX_CONTAINER].n, 1);

	/* processes on: a pid reused by a new process is a new workload */
	lim.levels = EX_LEVELS_ALL;
	accum_set_limits(a, &lim);
	est_init(&m, "h1", 11 * S, 12 * S, 1, 2);
	est_zone(&m, 0, 1000, 400);
	m.estimate.procs[1].pid = 100;
	m.estimate.procs[0].energy_uj[0] = 10;
	m.estimate.procs[1].energy_uj[0] = 20;
	CHECK(accum_add(a, &m.estimate, NULL) == 0);
	wb_msg_clear(&m);
	CHECK_U64(h->works[EX_PROCESS].n, 2);
	CHECK_U64(find_proc(a, "h1", 100, 5000)->uj[0], 10);
	CHECK_U64(find_proc(a, "h1", 100, 5001)->uj[0], 20);

	/* containers off: dropped at once */
	lim.levels = 1u << EX_NODE | 1u << EX_PROCESS;
	accum_set_limits(a, &lim);
	CHECK_U64(a->series[EX_CONTAINER], 0);
	CHECK_U64(h->works[EX_CONTAINER].n, 0);
	accum_destroy(&a);
}

/* One slot of process 100 (start 5000) naming exe_id, with exes {id: path} when path is set. */
static void exe_slot(struct accum *a, uint64_t t, uint64_t exe_id, const char *comm,
		     uint64_t exes_id, const char *path)
{
	struct wb_msg m;
	est_init(&m, "h", t * S, (t + 1) * S, 1, 1);
	est_zone(&m, 0, 1000, 400);
	snprintf(m.estimate.procs[0].comm, 16, "%s", comm);
	m.estimate.procs[0].exe_id = exe_id;
	if (path) {
		m.estimate.exes = wb_array_new(2, sizeof *m.estimate.exes);
		m.estimate.exes[0] = (struct wb_exe){.id = 9999, .path = "/not/this/one"};
		m.estimate.exes[1].id = exes_id;
		snprintf(m.estimate.exes[1].path, sizeof m.estimate.exes[1].path, "%s", path);
		m.estimate.n_exes = 2;
	}
	CHECK(accum_add(a, &m.estimate, NULL) == 0);
	wb_msg_clear(&m);
}

/* The exe label: the path of the process's exe_id from the estimate's exes, escaped; empty when
 * unknown; kept while later estimates lack the path of the same id; new after an exec. */
static void test_exe_label(void)
{
	struct accum_limits lim = lim_default();
	struct accum *a = accum_new(&lim);
	/* an exe_id with no matching entry: an empty label, not a rejection */
	exe_slot(a, 10, 41, "sleep", 0, NULL);
	CHECK(strstr(find_proc(a, "h", 100, 5000)->labels, ",exe=\"\",") != NULL);
	exe_slot(a, 11, 41, "sleep", 41, "/usr/bin/sl\"eep (deleted)");
	CHECK_STR(
	    find_proc(a, "h", 100, 5000)->labels,
	    "pid=\"100\",comm=\"sleep\",exe=\"/usr/bin/sl\\\"eep (deleted)\",type=\"regular\",container_id=\"\",vm_id=\"\"");
	/* a slot without the path of the same id keeps it */
	exe_slot(a, 12, 41, "sleep", 0, NULL);
	CHECK(strstr(find_proc(a, "h", 100, 5000)->labels,
		     "exe=\"/usr/bin/sl\\\"eep (deleted)\"") != NULL);
	/* exec: a new comm and a new exe */
	exe_slot(a, 13, 42, "python3", 42, "/usr/bin/python3.11");
	CHECK(strstr(find_proc(a, "h", 100, 5000)->labels,
		     "comm=\"python3\",exe=\"/usr/bin/python3.11\"") != NULL);
	/* an exec to a binary whose path has not come yet: empty, not the old one */
	exe_slot(a, 14, 43, "python3", 0, NULL);
	CHECK(strstr(find_proc(a, "h", 100, 5000)->labels, ",exe=\"\",") != NULL);
	accum_destroy(&a);
}

static void test_labels(void)
{
	struct accum_limits lim = lim_default();
	struct accum *a = accum_new(&lim);
	struct wb_msg m;
	est_init(&m, "h\"1", 10 * S, 11 * S, 1, 3);
	est_zone(&m, 0, 1000, 400);
	snprintf(m.estimate.procs[0].comm, 16, "a\"b\\c\nd\xff");
	snprintf(m.estimate.procs[1].container_id, 128, "c0ffee");
	snprintf(m.estimate.procs[2].vm, 128, "vm-1");
	m.estimate.n_pods = 1;
	m.estimate.pods = wb_array_new(1, sizeof *m.estimate.pods);
	snprintf(m.estimate.pods[0].id, 128, "uid-1");
	m.estimate.pods[0].n_energy_uj = 1;
	m.estimate.pods[0].energy_uj = wb_array_new(1, sizeof(uint64_t));
	m.estimate.n_containers = 1;
	m.estimate.containers = wb_array_new(1, sizeof *m.estimate.containers);
	snprintf(m.estimate.containers[0].id, 128, "0123456789abcdef0123");
	snprintf(m.estimate.containers[0].runtime, 16, "docker");
	m.estimate.containers[0].n_energy_uj = 1;
	m.estimate.containers[0].energy_uj = wb_array_new(1, sizeof(uint64_t));
	CHECK(accum_add(a, &m.estimate, NULL) == 0);
	wb_msg_clear(&m);
	struct ex_host *h = accum_host(a, "h\"1");
	struct ex_wmap *cm = &h->works[EX_CONTAINER];
	for (size_t i = 0; i < cm->cap; i++)
		if (cm->slots[i].used)
			CHECK_STR(
			    cm->slots[i].w->labels,
			    "container_id=\"0123456789abcdef0123\",container_name=\"0123456789ab\",runtime=\"docker\",pod_id=\"\"");
	CHECK_STR(h->node_label, "node_name=\"h\\\"1\"");
	CHECK_STR(
	    find_proc(a, "h\"1", 100, 5000)->labels,
	    "pid=\"100\",comm=\"a\\\"b\\\\c\\nd\xef\xbf\xbd\",exe=\"\",type=\"regular\",container_id=\"\",vm_id=\"\"");
	CHECK_STR(
	    find_proc(a, "h\"1", 101, 5001)->labels,
	    "pid=\"101\",comm=\"proc1\",exe=\"\",type=\"container\",container_id=\"c0ffee\",vm_id=\"\"");
	CHECK_STR(
	    find_proc(a, "h\"1", 102, 5002)->labels,
	    "pid=\"102\",comm=\"proc2\",exe=\"\",type=\"vm\",container_id=\"\",vm_id=\"vm-1\"");
	struct ex_wmap *pm = &h->works[EX_POD];
	for (size_t i = 0; i < pm->cap; i++)
		if (pm->slots[i].used)
			CHECK_STR(pm->slots[i].w->labels,
				  "pod_id=\"uid-1\",pod_name=\"uid-1\",pod_namespace=\"\"");

	/* the process execs: same pid and start, new comm, new labels, same totals */
	est_init(&m, "h\"1", 11 * S, 12 * S, 1, 1);
	est_zone(&m, 0, 1000, 400);
	snprintf(m.estimate.procs[0].comm, 16, "newname");
	m.estimate.procs[0].energy_uj[0] = 7;
	CHECK(accum_add(a, &m.estimate, NULL) == 0);
	wb_msg_clear(&m);
	struct ex_work *p = find_proc(a, "h\"1", 100, 5000);
	CHECK(strstr(p->labels, "comm=\"newname\"") != NULL);
	CHECK_U64(p->uj[0], 7);

	/* node_name from the config replaces the host on reload */
	lim.node_name = "node-a";
	accum_set_limits(a, &lim);
	CHECK_STR(h->node_label, "node_name=\"node-a\"");
	accum_destroy(&a);
}

/* Many workloads come and go: the map keeps finding the ones that stay. */
static void test_map_churn(void)
{
	struct accum_limits lim = lim_default();
	lim.max_terminated = 0;
	struct accum *a = accum_new(&lim);
	struct wb_msg m;
	uint64_t t = 10;
	for (int round = 0; round < 20; round++, t++) {
		est_init(&m, "h1", t * S, (t + 1) * S, 1, 500);
		est_zone(&m, 0, 1000000, 500000);
		for (size_t i = 0; i < 500; i++) {
			/* pids 0..249 live on; the rest are new each round and exit at once */
			m.estimate.procs[i].pid = i < 250 ? i : 1000 + (uint64_t)round * 1000 + i;
			m.estimate.procs[i].start_ns = m.estimate.procs[i].pid;
			m.estimate.procs[i].exited = i >= 250;
			m.estimate.procs[i].energy_uj[0] = 1;
		}
		CHECK(accum_add(a, &m.estimate, NULL) == 0);
		wb_msg_clear(&m);
	}
	struct ex_host *h = accum_host(a, "h1");
	CHECK_U64(h->works[EX_PROCESS].n, 250);
	CHECK_U64(a->evicted[EX_PROCESS], 20 * 250);
	size_t found = 0;
	for (uint64_t pid = 0; pid < 250; pid++) {
		struct ex_work *p = find_proc(a, "h1", pid, pid);
		found += p && p->uj[0] == 20;
	}
	CHECK_U64(found, 250);
	accum_destroy(&a);
}

static void test_hosts_cap(void)
{
	struct accum_limits lim = lim_default();
	lim.max_hosts = 2;
	struct accum *a = accum_new(&lim);
	struct wb_msg m;
	enum accum_reason why;
	const char *hosts[] = {"a", "b", "c"};
	for (int i = 0; i < 3; i++) {
		est_init(&m, hosts[i], 10 * S, 11 * S, 1, 0);
		est_zone(&m, 0, 1000, 400);
		CHECK(accum_add(a, &m.estimate, &why) == (i < 2 ? 0 : -1));
		wb_msg_clear(&m);
	}
	CHECK(why == ACC_R_HOSTS);
	CHECK_U64(a->nhosts, 2);
	/* Host a goes on; b falls silent. Once b is silent past forget_after, c takes its place. */
	uint64_t later =
	    10 * S + (lim.stale_after_ns > lim.terminated_ttl_ns ? lim.stale_after_ns
								 : lim.terminated_ttl_ns);
	est_init(&m, "a", later, later + S, 1, 0);
	est_zone(&m, 0, 1000, 400);
	CHECK(accum_add(a, &m.estimate, &why) == 0);
	wb_msg_clear(&m);
	est_init(&m, "c", later + 2 * S, later + 3 * S, 1, 0);
	est_zone(&m, 0, 1000, 400);
	CHECK(accum_add(a, &m.estimate, &why) == 0);
	wb_msg_clear(&m);
	CHECK_U64(a->nhosts, 2);
	CHECK_U64(a->evicted_hosts, 1);
	CHECK(accum_host(a, "b") == NULL && accum_host(a, "a") && accum_host(a, "c"));
	accum_destroy(&a);
}

/* A reused pid: the new process takes the pid's one entry over, so one label set means one series.
 */
static void test_pid_reuse_one_series(void)
{
	struct accum_limits lim = lim_default();
	struct accum *a = accum_new(&lim);
	struct wb_msg m;
	enum accum_reason why;
	est_init(&m, "h", 10 * S, 11 * S, 1, 1);
	est_zone(&m, 0, 1000, 400);
	m.estimate.procs[0].energy_uj[0] = 300;
	m.estimate.procs[0].exited = true;
	CHECK(accum_add(a, &m.estimate, &why) == 0);
	wb_msg_clear(&m);
	est_init(&m, "h", 11 * S, 12 * S, 1, 1);
	est_zone(&m, 0, 1000, 400);
	m.estimate.procs[0].start_ns = 777777; /* same pid 100, a new process */
	m.estimate.procs[0].energy_uj[0] = 50;
	CHECK(accum_add(a, &m.estimate, &why) == 0);
	wb_msg_clear(&m);
	CHECK_U64(accum_host(a, "h")->works[EX_PROCESS].n, 1);
	CHECK(find_proc(a, "h", 100, 5000) == NULL);
	struct ex_work *w = find_proc(a, "h", 100, 777777);
	CHECK(w != NULL);
	if (w)
		CHECK_U64(w->uj[0], 50);
	CHECK_U64(a->pid_reused, 1);
	accum_destroy(&a);
}

/* A host whose zone paths keep changing (hwmonN renumbered) is not locked out at EX_MAX_ZONES. */
static void test_zones_turn_over(void)
{
	struct accum_limits lim = lim_default();
	struct accum *a = accum_new(&lim);
	struct wb_msg m;
	enum accum_reason why;
	uint64_t step = (lim.stale_after_ns > lim.terminated_ttl_ns ? lim.stale_after_ns
								    : lim.terminated_ttl_ns) +
			S;
	for (int i = 0; i < EX_MAX_ZONES + 5; i++) {
		uint64_t t = 10 * S + (uint64_t)i * step;
		est_init(&m, "h", t, t + S, 1, 0);
		est_zone(&m, 0, 1000, 400);
		snprintf(m.estimate.zones[0].path, sizeof(m.estimate.zones[0].path),
			 "/sys/class/hwmon/hwmon%d", i);
		CHECK(accum_add(a, &m.estimate, &why) == 0);
		wb_msg_clear(&m);
	}
	CHECK_U64(a->evicted_zones, 5);
	CHECK_U64(accum_host(a, "h")->nzones, EX_MAX_ZONES);
	accum_destroy(&a);
}

/* One slot of host h's zone named name at t, in count total_epoch, with its cumulative total. */
static void add_named_total(struct accum *a, const char *name, uint64_t t, uint64_t total_epoch,
			    uint64_t total_uj)
{
	struct wb_msg m;
	est_init(&m, "h", t, t + S, 1, 0);
	snprintf(m.estimate.zones[0].name, sizeof m.estimate.zones[0].name, "%s", name);
	m.estimate.total_epoch = total_epoch;
	est_zone(&m, 0, 1000000, 250000);
	struct wb_est_zone *ez = &m.estimate.zones[0];
	ez->total_uj = total_uj;
	ez->active_total_uj = total_uj / 4;
	ez->idle_total_uj = total_uj - total_uj / 4;
	CHECK(accum_add(a, &m.estimate, NULL) == 0);
	wb_msg_clear(&m);
}

/* A host whose zone names change over its counts (each count its own meter) fills the table of
 * followed totals; the entries of older counts give way, so the newest zone still recovers a lost
 * slot from its totals. */
static void test_totals_table_turns_over(void)
{
	struct accum_limits lim = lim_default();
	struct accum *a = accum_new(&lim);
	uint64_t t = 10 * S;
	for (int i = 0; i < EX_MAX_TOTALS + 2; i++) {
		char name[32];
		snprintf(name, sizeof name, "meter-%d", i);
		add_named_total(a, name, t, (uint64_t)i + 1, 1000000);
		t += S;
	}
	CHECK_U64(a->recovered, 0);
	/* the last meter's count goes on: one slot lost, the next brings it in */
	add_named_total(a, "meter-65", t + S, EX_MAX_TOTALS + 2, 3000000);
	CHECK_U64(a->recovered, 1);
	CHECK_U64(a->recovered_uj, 1000000);
	accum_destroy(&a);
}

/* The lines of text starting with prefix, and the value of the last one. */
static int series_count(const char *text, const char *prefix, double *value)
{
	int n = 0;
	for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		if (strncmp(l, prefix, strlen(prefix)) != 0)
			continue;
		n++;
		const char *sp = strchr(l, ' ');
		*value = sp ? strtod(sp + 1, NULL) : -1;
	}
	return n;
}

/*
 * estimd falls back to its model for a slot whose power came late: zones of the
 * same kinds without paths. The host then has two exported "package" zones
 * (node series told apart by path); workload series have only zone="package",
 * so each process must keep one series per kind that counts both, and never a
 * second one with the same labels that a scraper reads as the counter going down.
 */
static void test_zone_kind_one_series(void)
{
	struct accum_limits lim = lim_default();
	lim.node_name = "n";
	struct accum *a = accum_new(&lim);
	struct wb_msg m;
	static const uint64_t pkg[] = {600, 50, 300}, dram[] = {100, 5, 60};
	for (int i = 0; i < 3; i++) {
		bool model = i == 1;
		est_init(&m, "h", (10 + (uint64_t)i) * S, (11 + (uint64_t)i) * S, 2, 1);
		snprintf(m.estimate.mode, sizeof m.estimate.mode, "%s",
			 model ? "model" : "measured");
		snprintf(m.estimate.zones[0].name, 64, "%s", model ? "package" : "package-0");
		snprintf(m.estimate.zones[0].zone, 16, "package");
		snprintf(m.estimate.zones[1].name, 64, "%s", model ? "dram" : "dram-0");
		snprintf(m.estimate.zones[1].zone, 16, "dram");
		if (model)
			m.estimate.zones[0].path[0] = m.estimate.zones[1].path[0] = '\0';
		est_zone(&m, 0, 1000, 800);
		est_zone(&m, 1, 200, 150);
		m.estimate.procs[0].energy_uj[0] = pkg[i];
		m.estimate.procs[0].energy_uj[1] = dram[i];
		CHECK(accum_add(a, &m.estimate, NULL) == 0);
		wb_msg_clear(&m);
	}
	CHECK_U64(accum_host(a, "h")->nzones, 4); /* node series: two paths per kind */
	struct ex_work *p = find_proc(a, "h", 100, 5000);
	CHECK(p != NULL);
	if (p)
		CHECK_U64(p->nz, 2);
	CHECK_U64(accum_series(a), 2 * 2 + 1);

	struct rbuf b = {0};
	struct render_filter all = {.levels = EX_LEVELS_ALL};
	struct render_input in = {.acc = a, .now_ns = 20 * S, .version = "0.1.0"};
	render_metrics(&in, &all, &b);
	rbuf_putc(&b, '\0');
	const char *proc = "kepler_process_cpu_joules_total{node_name=\"n\",pid=\"100\",";
	char one[512];
	double v = 0;
	CHECK(series_count(b.p, proc, &v) == 2);
	snprintf(
	    one, sizeof one, "%s%s", proc,
	    "comm=\"proc0\",exe=\"\",type=\"regular\",container_id=\"\",vm_id=\"\",state=\"running\",zone=\"package\"}");
	CHECK(series_count(b.p, one, &v) == 1);
	CHECK(v == 0.00095); /* 600 + 50 + 300 uJ */
	snprintf(
	    one, sizeof one, "%s%s", proc,
	    "comm=\"proc0\",exe=\"\",type=\"regular\",container_id=\"\",vm_id=\"\",state=\"running\",zone=\"dram\"}");
	CHECK(series_count(b.p, one, &v) == 1);
	CHECK(v == 0.000165);
	CHECK(series_count(b.p, "kepler_node_cpu_joules_total{node_name=\"n\",zone=\"package\"",
			   &v) == 2);
	rbuf_free(&b);
	accum_destroy(&a);
}

/* Zones of ever new kinds: a kind no zone has any more makes room, and workloads start it at 0. */
static void test_zone_kinds_turn_over(void)
{
	struct accum_limits lim = lim_default();
	struct accum *a = accum_new(&lim);
	struct wb_msg m;
	uint64_t step = (lim.stale_after_ns > lim.terminated_ttl_ns ? lim.stale_after_ns
								    : lim.terminated_ttl_ns) +
			S;
	for (int i = 0; i < EX_MAX_ZONES + 5; i++) {
		uint64_t t = 10 * S + (uint64_t)i * step;
		est_init(&m, "h", t, t + S, 1, 1);
		est_zone(&m, 0, 1000, 400);
		snprintf(m.estimate.zones[0].zone, sizeof m.estimate.zones[0].zone, "k%d", i);
		m.estimate.procs[0].energy_uj[0] = 10 + (uint64_t)i;
		CHECK(accum_add(a, &m.estimate, NULL) == 0);
		wb_msg_clear(&m);
	}
	struct ex_host *h = accum_host(a, "h");
	CHECK_U64(h->nzones, EX_MAX_ZONES);
	CHECK_U64(h->nkinds, EX_MAX_ZONES);
	struct ex_work *p = find_proc(a, "h", 100, 5000);
	CHECK(p != NULL);
	bool last = false;
	for (size_t k = 0; p && k < h->nkinds; k++) {
		int i = atoi(h->kinds[k].zone + 1);
		last |= i == EX_MAX_ZONES + 4;
		CHECK_U64(p->uj[k], 10 + (uint64_t)i); /* nothing of the kind before in its place */
	}
	CHECK(last);
	accum_destroy(&a);
}

/*
 * exportd restarted from its state file: killed after a checkpoint, with
 * estimates applied after it and others lost while it was down, the node
 * counters continue exactly from the totals; workloads start again.
 */
/* Two GPUs are two zones (never aggregated) and two workload kinds; their identity survives a
 * restart from the state file. */
static void test_gpus_and_state(void)
{
	char path[256];
	unit_tmp(path, sizeof(path), "exportd-gpu-XXXXXX");
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	close(fd);
	struct accum_limits lim = lim_default();
	struct accum *a = accum_new(&lim);
	struct wb_msg m;
	char err[256];
	est_init(&m, "g1", 10 * S, 11 * S, 3, 1);
	for (size_t z = 0; z < 3; z++) {
		struct wb_est_zone *ez = &m.estimate.zones[z];
		snprintf(ez->zone, sizeof ez->zone, "%s", z ? "gpu" : "package");
		if (z) {
			snprintf(ez->uuid, sizeof ez->uuid, "GPU-%zu", z);
			snprintf(ez->model, sizeof ez->model, "H100");
			snprintf(ez->vendor, sizeof ez->vendor, "nvidia");
			ez->index = z - 1;
			ez->idle_w = 20;
		}
		est_zone(&m, z, 1000000 * (z + 1), 500000);
		m.estimate.procs[0].energy_uj[z] = 100000 * (z + 1);
	}
	CHECK(accum_add(a, &m.estimate, NULL) == 0);
	wb_msg_clear(&m);
	struct ex_host *h = accum_host(a, "g1");
	CHECK(h && h->nzones == 3 && h->nkinds == 3);
	if (!h)
		goto out;
	CHECK_STR(h->zones[1].labels, "gpu=\"0\",gpu_uuid=\"GPU-1\",vendor=\"nvidia\"");
	CHECK_STR(h->zones[2].labels, "gpu=\"1\",gpu_uuid=\"GPU-2\",vendor=\"nvidia\"");
	CHECK(h->zones[2].gpu && !h->zones[0].gpu);
	CHECK_STR(h->kinds[2].zlabel, "gpu=\"1\",vendor=\"nvidia\"");
	CHECK(h->kinds[2].gpu);
	CHECK_U64(h->zones[2].total_uj, 3000000);
	struct ex_work *w = find_proc(a, "g1", 100, 5000);
	CHECK(w && w->uj[2] == 300000);
	CHECK(accum_save(a, path, true, err, sizeof err) == 0);
	accum_destroy(&a);

	a = accum_new(&lim);
	size_t n = 0;
	CHECK(accum_load(a, path, &n, err, sizeof err) == 0);
	h = accum_host(a, "g1");
	CHECK(h && h->nzones == 3);
	if (!h)
		goto out;
	CHECK(h->zones[1].gpu);
	CHECK_STR(h->zones[1].uuid, "GPU-1");
	CHECK_STR(h->zones[1].model, "H100");
	CHECK_STR(h->zones[2].labels, "gpu=\"1\",gpu_uuid=\"GPU-2\",vendor=\"nvidia\"");
	CHECK_U64(h->zones[2].total_uj, 3000000);
	CHECK(!h->zones[0].gpu);
out:
	accum_destroy(&a);
	unlink(path);
}

static void test_state_file_restart(void)
{
	char path[256];
	unit_tmp(path, sizeof(path), "exportd-state-XXXXXX");
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	close(fd);
	struct accum_limits lim = lim_default();
	struct accum *a = accum_new(&lim);
	struct wb_msg m;
	char err[256];
	uint64_t sum[2] = {0, 0};
	for (uint64_t k = 0; k < 5; k++) {
		est_with_totals(&m, k, 555, sum);
		CHECK(accum_add(a, &m.estimate, NULL) == 0);
		wb_msg_clear(&m);
	}
	CHECK(accum_save(a, path, true, err, sizeof err) == 0);
	for (uint64_t k = 5; k < 8; k++) { /* applied after the checkpoint, then killed */
		est_with_totals(&m, k, 555, sum);
		CHECK(accum_add(a, &m.estimate, NULL) == 0);
		wb_msg_clear(&m);
	}
	accum_destroy(&a);

	a = accum_new(&lim);
	size_t n = 0;
	CHECK(accum_load(a, path, &n, err, sizeof err) == 0);
	CHECK_U64(n, 1);
	struct ex_host *h = accum_host(a, "h1");
	CHECK(h && h->nzones == 1);
	if (!h)
		goto out;
	CHECK_STR(h->zones[0].labels, "zone=\"package\",path=\"aggregated-package\"");
	CHECK_U64(h->zones[0].total_uj,
		  (1 + 2 + 3 + 4 + 5) * 1000000ull + (2 + 3 + 4 + 5 + 6) * 1000000ull);
	/* a replay of a slot already saved is stale */
	est_with_totals(&m, 4, 555, (uint64_t[2]){0, 0});
	CHECK(accum_add(a, &m.estimate, NULL) < 0);
	wb_msg_clear(&m);
	for (uint64_t k = 8; k < 10; k++) { /* published while exportd was down */
		est_with_totals(&m, k, 555, sum);
		wb_msg_clear(&m);
	}
	est_with_totals(&m, 10, 555, sum);
	CHECK(accum_add(a, &m.estimate, NULL) == 0);
	wb_msg_clear(&m);
	CHECK_U64(h->zones[0].total_uj, sum[0] + sum[1]);
	CHECK_U64(h->zones[0].active_uj, sum[0] / 4 + sum[1] / 4);
	CHECK_U64(h->zones[0].idle_uj, h->zones[0].total_uj - h->zones[0].active_uj);
	CHECK_U64(accum_series(a), 0);

	/* a file that is not a state leaves the accumulators alone */
	FILE *f = fopen(path, "w");
	if (f) {
		fputs("{\"version\": 2, \"hosts\": []}", f);
		fclose(f);
	}
	struct accum *b = accum_new(&lim);
	CHECK(accum_load(b, path, &n, err, sizeof err) < 0);
	CHECK(strstr(err, "not an exportd state") != NULL);
	CHECK_U64(b->nhosts, 0);
	accum_destroy(&b);
out:
	accum_destroy(&a);
	unlink(path);
}

static const struct unit_case cases[] = {
    {"node totals step no further than the physical bound", test_node_totals_bounded},
    {"slot energies add up per zone and process", test_slots_add_up},
    {"replayed slots after a restart count once", test_replay_and_restart},
    {"an overlapping slot counts only its new part", test_overlap_is_clipped},
    {"lost estimates: node counters follow the totals", test_node_totals_recover_lost},
    {"totals re-split after an estimd kill: none goes back", test_totals_resplit_after_kill},
    {"a host without zones: processes count CPU time only", test_no_zones},
    {"bad estimates are refused by reason and change nothing", test_bad_estimates_change_nothing},
    {"zones of one kind on several sockets aggregate", test_sockets_aggregate},
    {"terminated workloads: max_terminated, ttl, stale_after, revival", test_terminated_retention},
    {"the series cap drops and evicts", test_series_cap},
    {"a new zone does not take workloads past the cap", test_new_zone_within_cap},
    {"levels and pid reuse", test_levels_and_pid_reuse},
    {"labels are escaped and follow exec and node_name", test_labels},
    {"the exe label follows the process's exe_id", test_exe_label},
    {"the workload map survives churn", test_map_churn},
    {"max_hosts, and silent hosts make room", test_hosts_cap},
    {"silent zones make room for new ones", test_zones_turn_over},
    {"the followed totals turn over with the host's counts", test_totals_table_turns_over},
    {"a reused pid keeps one series", test_pid_reuse_one_series},
    {"node counters continue from the state file", test_state_file_restart},
    {"GPUs: one zone and kind each, identity kept across a restart", test_gpus_and_state},
    {"zones of one kind on two paths: one workload series", test_zone_kind_one_series},
    {"silent zone kinds make room for new ones", test_zone_kinds_turn_over},
};

UNIT_MAIN(cases)
