/*
 * estimd attribution: exact largest-remainder splits, shares of known truth,
 * and conservation per zone and slot over thousands of random slots.
 */
#include <math.h>

#include "codec.h"
#include "../../estimd/estimd.h"
#include "unit.h"

#include "estimd_unit.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	/* xorshift64*: deterministic, so a failure reproduces. */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 2685821657736338717ull;
}

static uint64_t rnd_below(uint64_t n)
{
	return n ? rnd() % n : 0;
}

static struct wb_msg *slot_new(size_t nprocs, size_t nzones, size_t ncgroups)
{
	struct wb_msg *m = calloc(1, sizeof(*m));
	m->kind = WB_ALIGNED;
	struct wb_aligned *a = &m->aligned;
	snprintf(a->env.host, sizeof(a->env.host), "h1");
	a->t0 = 1700000000ull * 1000000000ull;
	a->t1 = a->t0 + 1000000000ull;
	a->ncpu = 4;
	a->procs = wb_array_new(nprocs, sizeof(*a->procs));
	a->n_procs = nprocs;
	a->zones = wb_array_new(nzones, sizeof(*a->zones));
	a->n_zones = nzones;
	a->cgroups = wb_array_new(ncgroups, sizeof(*a->cgroups));
	a->n_cgroups = ncgroups;
	for (size_t z = 0; z < nzones; z++) {
		snprintf(a->zones[z].name, sizeof(a->zones[z].name), "%s-0",
			 z % 2 ? "dram" : "package");
		snprintf(a->zones[z].zone, sizeof(a->zones[z].zone), "%s",
			 z % 2 ? "dram" : "package");
		if (z >= 2)
			a->zones[z].name[strlen(a->zones[z].name) - 1] = (char)('0' + z / 2);
	}
	for (size_t i = 0; i < nprocs; i++) {
		a->procs[i].pid = 100 + i;
		snprintf(a->procs[i].comm, sizeof(a->procs[i].comm), "p%zu", i);
	}
	return m;
}

static void slot_free(struct wb_msg *m)
{
	wb_msg_clear(m);
	free(m);
}

static void test_split_exact_and_ties(void)
{
	struct attrib_scratch s = {0};
	uint64_t w[3] = {1, 1, 1}, out[3], rest;
	/* 10 over three equal parts: 3.33 each, the leftover µJ goes to the lowest index. */
	CHECK(attrib_split(10, w, 3, 0, out, &rest, &s) == 0);
	CHECK_U64(out[0], 4);
	CHECK_U64(out[1], 3);
	CHECK_U64(out[2], 3);
	CHECK_U64(rest, 0);

	/* Largest remainder wins: 100 µJ by 1:2:4 of 10 -> 10, 20, 40 exactly, rest 30. */
	uint64_t w2[3] = {1, 2, 4};
	CHECK(attrib_split(100, w2, 3, 10, out, &rest, &s) == 0);
	CHECK_U64(out[0], 10);
	CHECK_U64(out[1], 20);
	CHECK_U64(out[2], 40);
	CHECK_U64(rest, 30);

	/* 7 by 1:1:1 of 4 (rest share 1/4): exact 1.75 each, rest 1.75; floors 1,1,1,1, three
	 * leftovers. */
	CHECK(attrib_split(7, w, 3, 4, out, &rest, &s) == 0);
	CHECK_U64(out[0] + out[1] + out[2] + rest, 7);
	CHECK_U64(out[0], 2);
	CHECK_U64(out[1], 2);
	CHECK_U64(out[2], 2);
	CHECK_U64(rest, 1);

	/* A denominator below the weights' sum means the sum: nothing to the rest. */
	CHECK(attrib_split(1000, w2, 3, 1, out, &rest, &s) == 0);
	CHECK_U64(rest, 0);
	CHECK_U64(out[0] + out[1] + out[2], 1000);
	attrib_scratch_free(&s);
}

static void test_split_degenerate(void)
{
	struct attrib_scratch s = {0};
	uint64_t w[2] = {0, 0}, out[2] = {9, 9}, rest = 9;
	/* Zero weights and no denominator: no division, everything to the rest. */
	CHECK(attrib_split(500, w, 2, 0, out, &rest, &s) == 0);
	CHECK_U64(out[0], 0);
	CHECK_U64(out[1], 0);
	CHECK_U64(rest, 500);
	/* Zero energy. */
	uint64_t w1[1] = {5};
	CHECK(attrib_split(0, w1, 1, 10, out, &rest, &s) == 0);
	CHECK_U64(out[0], 0);
	CHECK_U64(rest, 0);
	/* No parts at all. */
	CHECK(attrib_split(77, NULL, 0, 0, out, &rest, &s) == 0);
	CHECK_U64(rest, 77);
	/* Huge values need 128-bit products and must still add up. */
	uint64_t big[3] = {UINT64_MAX / 3, UINT64_MAX / 5, 12345}, out3[3];
	CHECK(attrib_split(UINT64_MAX / 2, big, 3, 0, out3, &rest, &s) == 0);
	unsigned __int128 sum = (unsigned __int128)out3[0] + out3[1] + out3[2] + rest;
	CHECK(sum == UINT64_MAX / 2);
	CHECK_U64(rest, 0);
	/* Weights summing past 2^64 are scaled down together: shares kept, total exact. */
	uint64_t huge[3] = {UINT64_MAX / 2, UINT64_MAX / 2, UINT64_MAX / 4};
	CHECK(attrib_split(1000000, huge, 3, 0, out3, &rest, &s) == 0);
	CHECK_U64(out3[0] + out3[1] + out3[2] + rest, 1000000);
	CHECK_U64(out3[0], 400000);
	CHECK_U64(out3[1], 400000);
	CHECK_U64(out3[2], 200000);
	attrib_scratch_free(&s);
}

/* Largest remainder: every part within one µJ of its exact real share, over random inputs. */
static void test_split_random_within_one(void)
{
	struct attrib_scratch s = {0};
	uint64_t w[500], out[500];
	for (int round = 0; round < 2000; round++) {
		size_t n = 1 + rnd_below(500);
		unsigned __int128 sum = 0;
		for (size_t i = 0; i < n; i++) {
			w[i] = rnd_below(4) == 0 ? 0 : rnd_below(2000000000ull);
			sum += w[i];
		}
		uint64_t denom = rnd_below(2) ? (uint64_t)sum + rnd_below(1000000000ull) : 0;
		uint64_t amount = rnd_below(3) == 0 ? rnd_below(1000) : rnd_below(500000000000ull);
		uint64_t rest;
		CHECK(attrib_split(amount, w, n, denom, out, &rest, &s) == 0);
		unsigned __int128 total = rest;
		double d = denom > sum ? (double)denom : (double)sum;
		int bad = 0;
		for (size_t i = 0; i < n; i++) {
			total += out[i];
			double exact = d > 0 ? (double)amount * (double)w[i] / d : 0;
			if (fabs((double)out[i] - exact) >= 1.0 + exact * 1e-12)
				bad++;
		}
		CHECK(total == amount);
		CHECK(bad == 0);
	}
	attrib_scratch_free(&s);
}

/* Known truth: E = 1000 J, busy 3/4 of the CPU time -> active 750 J; processes 1:2 of busy. */
static void test_shares_known_truth(void)
{
	struct wb_msg *m = slot_new(3, 1, 0);
	struct wb_aligned *a = &m->aligned;
	a->zones[0].energy_uj = 1000000000;
	a->cpu.user_ns = 2000000000;
	a->cpu.system_ns = 1000000000;
	a->cpu.idle_ns = 500000000;
	a->cpu.iowait_ns = 500000000; /* iowait counts as idle */
	a->procs[0].cpu_ns = 1000000000;
	a->procs[1].cpu_ns = 2000000000;
	a->procs[2].pid = 0; /* the idle task never gets energy */
	a->procs[2].cpu_ns = 900000000;
	struct est_conf c = estimd_unit_conf();
	struct estimator *e = estimator_new(&c);
	struct wb_estimate out;
	struct est_result res;
	char err[256];
	CHECK(estimator_slot(e, a, &out, &res, err, sizeof(err)) == 0);
	CHECK(res.measured);
	CHECK_STR(out.mode, "measured");
	CHECK_U64(out.n_zones, 1);
	CHECK_U64(out.zones[0].active_uj, 750000000);
	CHECK_U64(out.zones[0].idle_uj, 250000000);
	CHECK_NEAR(out.cpu_usage_ratio, 0.75, 1e-12);
	/* Busy time equals the processes' time: they get all of the active energy. */
	CHECK_U64(out.procs[0].energy_uj[0], 250000000);
	CHECK_U64(out.procs[1].energy_uj[0], 500000000);
	CHECK_U64(out.procs[2].energy_uj[0], 0);
	CHECK_U64(out.zones[0].unattributed_uj, 0);

	/* Kernel threads and short-lived processes: busy 4 s, listed 3 s -> a quarter unattributed.
	 */
	a->cpu.system_ns = 2000000000;
	CHECK(estimator_slot(e, a, &out, &res, err, sizeof(err)) == 0);
	uint64_t active = out.zones[0].active_uj; /* 1000 J * 4/5 */
	CHECK_U64(active, 800000000);
	CHECK_U64(out.procs[0].energy_uj[0], 200000000);
	CHECK_U64(out.procs[1].energy_uj[0], 400000000);
	CHECK_U64(out.zones[0].unattributed_uj, 200000000);

	/* share_base procs (Kepler): the listed processes share all of it. */
	c.base = EST_BASE_PROCS;
	estimator_set_conf(e, &c);
	CHECK(estimator_slot(e, a, &out, &res, err, sizeof(err)) == 0);
	CHECK_U64(out.procs[0].energy_uj[0], 266666667);
	CHECK_U64(out.procs[1].energy_uj[0], 533333333);
	CHECK_U64(out.zones[0].unattributed_uj, 0);

	/* By instructions (counters present): the CPU-time share of the listed processes, split
	 * 3:1. */
	c.base = EST_BASE_NODE;
	c.by = EST_BY_INSTRUCTIONS;
	estimator_set_conf(e, &c);
	a->procs[0].instructions = 3000;
	a->procs[1].instructions = 1000;
	CHECK(estimator_slot(e, a, &out, &res, err, sizeof(err)) == 0);
	CHECK_U64(out.procs[0].energy_uj[0], 450000000);
	CHECK_U64(out.procs[1].energy_uj[0], 150000000);
	CHECK_U64(out.zones[0].unattributed_uj, 200000000);
	/* Without counters it falls back to CPU time. */
	a->procs[0].instructions = a->procs[1].instructions = 0;
	CHECK(estimator_slot(e, a, &out, &res, err, sizeof(err)) == 0);
	CHECK_U64(out.procs[0].energy_uj[0], 200000000);
	estimator_destroy(&e);
	slot_free(m);
}

static void test_degenerate_slots(void)
{
	struct est_conf c = estimd_unit_conf();
	struct estimator *e = estimator_new(&c);
	struct wb_estimate out;
	struct est_result res;
	char err[256];

	/* Zero CPU time: all idle, nothing divided by zero. */
	struct wb_msg *m = slot_new(2, 2, 0);
	struct wb_aligned *a = &m->aligned;
	a->zones[0].energy_uj = 5000;
	a->zones[1].energy_uj = 7;
	CHECK(estimator_slot(e, a, &out, &res, err, sizeof(err)) == 0);
	CHECK_U64(out.zones[0].active_uj, 0);
	CHECK_U64(out.zones[0].idle_uj, 5000);
	CHECK_NEAR(out.cpu_usage_ratio, 0, 0);
	CHECK_U64(out.procs[0].energy_uj[0] + out.procs[1].energy_uj[0], 0);

	/* Zero energy with CPU time. */
	a->zones[0].energy_uj = a->zones[1].energy_uj = 0;
	a->cpu.user_ns = 1000;
	a->procs[0].cpu_ns = 1000;
	CHECK(estimator_slot(e, a, &out, &res, err, sizeof(err)) == 0);
	CHECK_U64(out.zones[0].energy_uj + out.zones[0].active_uj + out.procs[0].energy_uj[0], 0);
	slot_free(m);

	/* A single process gets every attributable µJ. */
	m = slot_new(1, 1, 0);
	a = &m->aligned;
	a->zones[0].energy_uj = 999999;
	a->cpu.user_ns = 333;
	a->procs[0].cpu_ns = 333;
	CHECK(estimator_slot(e, a, &out, &res, err, sizeof(err)) == 0);
	CHECK_U64(out.procs[0].energy_uj[0], 999999);
	/* No processes at all: the active energy is unattributed. */
	a->n_procs = 0;
	CHECK(estimator_slot(e, a, &out, &res, err, sizeof(err)) == 0);
	CHECK_U64(out.zones[0].unattributed_uj, 999999);
	a->n_procs = 1;
	/* A slot without length is refused. */
	a->t1 = a->t0;
	CHECK(estimator_slot(e, a, &out, &res, err, sizeof(err)) == -1);
	CHECK(strstr(err, "no length") != NULL);
	slot_free(m);

	/* Model mode without a model: no zones, processes listed with empty energy. */
	m = slot_new(1, 0, 0);
	m->aligned.procs[0].cpu_ns = 10;
	CHECK(estimator_slot(e, &m->aligned, &out, &res, err, sizeof(err)) == 0);
	CHECK(res.no_model);
	CHECK_U64(out.n_zones, 0);
	CHECK_U64(out.n_procs, 1);
	CHECK_STR(out.mode, "model");
	/* Forced measured mode refuses such a slot. */
	c.mode = EST_MEASURED;
	estimator_set_conf(e, &c);
	CHECK(estimator_slot(e, &m->aligned, &out, &res, err, sizeof(err)) == -1);
	slot_free(m);
	estimator_destroy(&e);
}

/* Containers, pods, VMs and services are the sums of their processes. */
static void test_groups(void)
{
	struct wb_msg *m = slot_new(4, 1, 3);
	struct wb_aligned *a = &m->aligned;
	a->zones[0].energy_uj = 1000000;
	a->cpu.user_ns = 10000;
	uint64_t cpu[4] = {1000, 2000, 3000, 4000};
	uint64_t cg[4] = {11, 11, 12, 13};
	for (int i = 0; i < 4; i++) {
		a->procs[i].cpu_ns = cpu[i];
		a->procs[i].cgroup_id = cg[i];
	}
	a->cgroups[0] = (struct wb_cgroup){
	    .id = 11, .runtime = "containerd", .container_id = "c1", .pod_uid = "pod-a"};
	a->cgroups[1] = (struct wb_cgroup){
	    .id = 12, .runtime = "containerd", .container_id = "c2", .pod_uid = "pod-a"};
	a->cgroups[2] = (struct wb_cgroup){.id = 13, .vm = "vm1", .service = "machine-qemu.scope"};
	struct est_conf c = estimd_unit_conf();
	struct estimator *e = estimator_new(&c);
	struct wb_estimate out;
	struct est_result res;
	char err[256];
	CHECK(estimator_slot(e, a, &out, &res, err, sizeof(err)) == 0);
	CHECK_U64(out.zones[0].active_uj, 1000000);
	CHECK_U64(out.n_containers, 2);
	CHECK_STR(out.containers[0].id, "c1");
	CHECK_STR(out.containers[0].pod_uid, "pod-a");
	CHECK_STR(out.containers[0].runtime, "containerd");
	CHECK_U64(out.containers[0].energy_uj[0], 300000);
	CHECK_U64(out.containers[0].cpu_ns, 3000);
	CHECK_U64(out.containers[1].energy_uj[0], 300000);
	CHECK_U64(out.n_pods, 1);
	CHECK_STR(out.pods[0].id, "pod-a");
	CHECK_U64(out.pods[0].energy_uj[0], 600000);
	CHECK_U64(out.n_vms, 1);
	CHECK_STR(out.vms[0].id, "vm1");
	CHECK_U64(out.vms[0].energy_uj[0], 400000);
	CHECK_U64(out.n_services, 1);
	CHECK_U64(out.services[0].energy_uj[0], 400000);
	CHECK_STR(out.procs[0].container_id, "c1");
	CHECK_STR(out.procs[3].vm, "vm1");
	CHECK_STR(out.procs[3].container_id, "");

	/*
	 * The next slot indexes its own cgroups and groups (none of the last slot's),
	 * more than the first index held, and a cgroup id listed twice goes by its last entry.
	 */
	struct wb_msg *m2 = slot_new(600, 1, 151);
	a = &m2->aligned;
	a->t0 += 1000000000ull;
	a->t1 += 1000000000ull;
	a->zones[0].energy_uj = 1000000;
	a->cpu.user_ns = 600 * 10;
	for (size_t i = 0; i < 600; i++) {
		a->procs[i].cpu_ns = 10;
		a->procs[i].cgroup_id = 1000 + i % 150;
	}
	for (size_t g = 0; g < 150; g++) {
		a->cgroups[g] = (struct wb_cgroup){.id = 1000 + g, .runtime = "crio"};
		snprintf(a->cgroups[g].container_id, sizeof(a->cgroups[g].container_id), "k%zu", g);
		snprintf(a->cgroups[g].pod_uid, sizeof(a->cgroups[g].pod_uid), "p%zu", g / 10);
	}
	a->cgroups[150] = (struct wb_cgroup){
	    .id = 1000, .runtime = "crio", .container_id = "last", .pod_uid = "p-last"};
	CHECK(estimator_slot(e, a, &out, &res, err, sizeof(err)) == 0);
	CHECK_U64(out.n_containers, 151);
	CHECK_U64(out.n_pods, 16);
	CHECK_U64(out.n_vms, 0);
	CHECK_U64(out.n_services, 0);
	uint64_t cpu_k0 = 1, cpu_last = 0, cpu_k7 = 0;
	for (size_t i = 0; i < out.n_containers; i++) {
		CHECK(strcmp(out.containers[i].id, "c1") != 0 &&
		      strcmp(out.containers[i].id, "c2") != 0);
		if (!strcmp(out.containers[i].id, "k0"))
			cpu_k0 = out.containers[i].cpu_ns;
		if (!strcmp(out.containers[i].id, "last"))
			cpu_last = out.containers[i].cpu_ns;
		if (!strcmp(out.containers[i].id, "k7"))
			cpu_k7 = out.containers[i].cpu_ns;
	}
	CHECK_U64(cpu_k0, 0); /* its id's processes went to the last entry of the id */
	CHECK_U64(cpu_last, 40);
	CHECK_U64(cpu_k7, 40);
	for (size_t i = 0; i < out.n_pods; i++)
		CHECK(strcmp(out.pods[i].id, "pod-a") != 0);
	CHECK_STR(out.procs[0].container_id, "last");
	CHECK_STR(out.procs[157].container_id, "k7");
	slot_free(m2);
	estimator_destroy(&e);
	slot_free(m);
}

/* Each process keeps its exe_id and the slot's paths go on with the estimate. */
static void test_exes(void)
{
	struct wb_msg *m = slot_new(2, 1, 0);
	struct wb_aligned *a = &m->aligned;
	a->zones[0].energy_uj = 1000;
	a->cpu.user_ns = 100;
	a->procs[0].cpu_ns = a->procs[1].cpu_ns = 50;
	a->procs[0].exe_id = 41;
	a->exes = wb_array_new(1, sizeof(*a->exes));
	a->exes[0] = (struct wb_exe){.id = 41, .path = "/usr/bin/sleep"};
	a->n_exes = 1;
	struct est_conf c = estimd_unit_conf();
	struct estimator *e = estimator_new(&c);
	struct wb_estimate out;
	struct est_result res;
	char err[256];
	CHECK(estimator_slot(e, a, &out, &res, err, sizeof(err)) == 0);
	CHECK_U64(out.procs[0].exe_id, 41);
	CHECK_U64(out.procs[1].exe_id, 0);
	CHECK_U64(out.n_exes, 1);
	CHECK(out.n_exes == 1 && out.exes[0].id == 41 &&
	      strcmp(out.exes[0].path, "/usr/bin/sleep") == 0);
	estimator_destroy(&e);
	slot_free(m);
}

/* Thousands of random slots: exact conservation per zone and slot, groups equal to their processes.
 */
static void test_conservation_random(void)
{
	struct est_conf c = estimd_unit_conf();
	struct estimator *e = estimator_new(&c);
	char err[256];
	int bad_split = 0, bad_cons = 0, bad_group = 0, bad_share = 0;
	for (int slot = 0; slot < 4000; slot++) {
		size_t n = rnd_below(300), nz = 1 + rnd_below(4), ncg = rnd_below(8);
		struct wb_msg *m = slot_new(n, nz, ncg);
		struct wb_aligned *a = &m->aligned;
		uint64_t sum_cpu = 0;
		for (size_t i = 0; i < n; i++) {
			struct wb_slot_proc *p = &a->procs[i];
			if (rnd_below(50) == 0)
				p->pid = 0;
			p->cpu_ns = rnd_below(5) == 0 ? 0 : rnd_below(1000000000ull);
			p->instructions = rnd_below(3) ? rnd_below(5000000000ull) : 0;
			p->cgroup_id = rnd_below(ncg + 2) + 1; /* some match no cgroup */
			if (p->pid)
				sum_cpu += p->cpu_ns;
		}
		for (size_t i = 0; i < ncg; i++) {
			struct wb_cgroup *g = &a->cgroups[i];
			g->id = i + 1;
			if (rnd_below(2))
				snprintf(g->container_id, sizeof(g->container_id), "ctr%zu",
					 rnd_below(4));
			if (rnd_below(2))
				snprintf(g->pod_uid, sizeof(g->pod_uid), "pod%zu", rnd_below(3));
			if (rnd_below(4) == 0)
				snprintf(g->vm, sizeof(g->vm), "vm%zu", rnd_below(2));
			if (rnd_below(3) == 0)
				snprintf(g->service, sizeof(g->service), "s%zu.service",
					 rnd_below(3));
		}
		for (size_t z = 0; z < nz; z++)
			a->zones[z].energy_uj = rnd_below(6) == 0 ? 0 : rnd_below(300000000ull);
		/* busy sometimes below the processes' sum (measurement skew), total sometimes 0 */
		a->cpu.user_ns =
		    rnd_below(3) == 0 ? sum_cpu / 2 : sum_cpu + rnd_below(2000000000ull);
		a->cpu.idle_ns = rnd_below(4000000000ull);
		a->cpu.iowait_ns = rnd_below(100000000ull);
		if (rnd_below(40) == 0)
			a->cpu = (struct wb_cpu_times){0};
		a->t1 = a->t0 + 100000000ull + rnd_below(2000000000ull);
		c.by = rnd_below(2) ? EST_BY_CPU : EST_BY_INSTRUCTIONS;
		c.base = rnd_below(2) ? EST_BASE_NODE : EST_BASE_PROCS;
		c.idle.method = (enum idle_method)rnd_below(3);
		c.idle.nfixed = 1;
		snprintf(c.idle.fixed[0].key, sizeof(c.idle.fixed[0].key), "package");
		c.idle.fixed[0].watts = (double)rnd_below(200);
		estimator_set_conf(e, &c);

		struct wb_estimate out;
		struct est_result res;
		if (estimator_slot(e, a, &out, &res, err, sizeof(err)) < 0) {
			CHECK(false);
			slot_free(m);
			continue;
		}
		for (size_t z = 0; z < out.n_zones; z++) {
			const struct wb_est_zone *ez = &out.zones[z];
			if (ez->active_uj + ez->idle_uj != ez->energy_uj ||
			    ez->energy_uj != a->zones[z].energy_uj)
				bad_split++;
			unsigned __int128 sum = ez->unattributed_uj;
			for (size_t i = 0; i < out.n_procs; i++)
				sum += out.procs[i].energy_uj[z];
			if (sum != ez->active_uj)
				bad_cons++;
			/* By CPU of the node: each process within 1 µJ of active * cpu / max(busy,
			 * sum). */
			if (c.by == EST_BY_CPU && c.base == EST_BASE_NODE) {
				double d =
				    (double)(a->cpu.user_ns > sum_cpu ? a->cpu.user_ns : sum_cpu);
				for (size_t i = 0; i < out.n_procs; i++) {
					double exact = a->procs[i].pid && d > 0
							   ? (double)ez->active_uj *
								 (double)a->procs[i].cpu_ns / d
							   : 0;
					if (fabs((double)out.procs[i].energy_uj[z] - exact) >=
					    1.0 + exact * 1e-12)
						bad_share++;
				}
			}
			/* Every group equals the sum of its processes, recomputed here. */
			struct wb_est_group *kinds[4] = {out.containers, out.pods, out.vms,
							 out.services};
			size_t nk[4] = {out.n_containers, out.n_pods, out.n_vms, out.n_services};
			for (int k = 0; k < 4; k++)
				for (size_t g = 0; g < nk[k]; g++) {
					uint64_t want = 0;
					for (size_t i = 0; i < out.n_procs; i++) {
						const struct wb_cgroup *cg = NULL;
						for (size_t j = 0; j < ncg; j++)
							if (a->cgroups[j].id ==
							    a->procs[i].cgroup_id)
								cg = &a->cgroups[j];
						if (!cg)
							continue;
						const char *key = k == 0   ? cg->container_id
								  : k == 1 ? cg->pod_uid
								  : k == 2 ? cg->vm
									   : cg->service;
						if (strcmp(key, kinds[k][g].id) == 0)
							want += out.procs[i].energy_uj[z];
					}
					if (want != kinds[k][g].energy_uj[z])
						bad_group++;
				}
		}
		slot_free(m);
	}
	CHECK(bad_split == 0);
	CHECK(bad_cons == 0);
	CHECK(bad_group == 0);
	CHECK(bad_share == 0);
	estimator_destroy(&e);
}

/* A platform zone (BMC power) beside a package zone: the package's active energy goes to the
 * processes, the platform's stays unattributed unless attribute_platform is set. */
static void test_platform_not_attributed(void)
{
	struct wb_msg *m = slot_new(2, 2, 0);
	struct wb_aligned *a = &m->aligned;
	snprintf(a->zones[1].name, sizeof(a->zones[1].name), "platform-0");
	snprintf(a->zones[1].zone, sizeof(a->zones[1].zone), "platform");
	a->zones[0].energy_uj = 100000000;
	a->zones[1].energy_uj = 300000000;
	a->cpu.user_ns = 3000000000;
	a->cpu.idle_ns = 1000000000;
	a->procs[0].cpu_ns = 1000000000;
	a->procs[1].cpu_ns = 2000000000;
	struct est_conf c = estimd_unit_conf();
	struct estimator *e = estimator_new(&c);
	struct wb_estimate out;
	struct est_result res;
	char err[256];
	CHECK(estimator_slot(e, a, &out, &res, err, sizeof(err)) == 0);
	CHECK_U64(out.n_zones, 2);
	CHECK_STR(out.zones[1].zone, "platform");
	/* the idle/active split is the same for both kinds; only attribution differs */
	CHECK_U64(out.zones[0].active_uj, 75000000);
	CHECK_U64(out.zones[1].active_uj, 225000000);
	CHECK_U64(out.procs[0].energy_uj[0], 25000000);
	CHECK_U64(out.procs[1].energy_uj[0], 50000000);
	CHECK_U64(out.procs[0].energy_uj[1], 0);
	CHECK_U64(out.procs[1].energy_uj[1], 0);
	CHECK_U64(out.zones[1].unattributed_uj, 225000000);
	c.attribute_platform = true;
	estimator_set_conf(e, &c);
	CHECK(estimator_slot(e, a, &out, &res, err, sizeof(err)) == 0);
	CHECK_U64(out.procs[0].energy_uj[1], 75000000);
	CHECK_U64(out.procs[1].energy_uj[1], 150000000);
	CHECK_U64(out.zones[1].unattributed_uj, 0);
	estimator_destroy(&e);
	slot_free(m);
}

static const struct unit_case cases[] = {
    {"exe_id and the slot's exes pass through", test_exes},
    {"platform zones stay unattributed unless attribute_platform", test_platform_not_attributed},
    {"split: exact, ties to the lower index", test_split_exact_and_ties},
    {"split: zero weights, zero energy, 128-bit values", test_split_degenerate},
    {"split: every part within 1 uJ of its exact share", test_split_random_within_one},
    {"shares of known truth (node, procs, instructions)", test_shares_known_truth},
    {"zero CPU, zero energy, one process, no model", test_degenerate_slots},
    {"containers, pods, VMs, services sum their processes", test_groups},
    {"conservation per zone over 4000 random slots", test_conservation_random},
};

UNIT_MAIN(cases)
