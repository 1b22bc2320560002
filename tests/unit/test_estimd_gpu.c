/*
 * estimd's GPU zones: idle at the lowest power seen with no compute process (or configured),
 * active shared by SM time, equally without utilization samples, all to the one process of an
 * exclusive GPU, absent processes' shares unattributed, containers and pods as sums; CPU zones of
 * the same slot keep their CPU-time shares.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codec.h"
#include "../../estimd/estimd.h"
#include "unit.h"

#include "estimd_unit.h"

/* A 1 s slot: zone 0 a CPU package, zone 1 GPU gpu-0; three processes (pids 100..102). */
static struct wb_msg *slot_new(void)
{
	struct wb_msg *m = calloc(1, sizeof(*m));
	m->kind = WB_ALIGNED;
	struct wb_aligned *a = &m->aligned;
	snprintf(a->env.host, sizeof(a->env.host), "h1");
	a->t0 = 1700000000ull * 1000000000ull;
	a->t1 = a->t0 + 1000000000ull;
	a->ncpu = 4;
	/* measured whole, as alignd says of a slot between two samples */
	a->quality = (struct wb_quality){.coverage = 1, .interpolated = true};
	a->cpu.user_ns = 3000000000;
	a->cpu.idle_ns = 1000000000;
	a->zones = wb_array_new(2, sizeof(*a->zones));
	a->n_zones = 2;
	snprintf(a->zones[0].name, sizeof(a->zones[0].name), "package-0");
	snprintf(a->zones[0].zone, sizeof(a->zones[0].zone), "package");
	a->zones[0].energy_uj = 40000000;
	struct wb_slot_zone *g = &a->zones[1];
	snprintf(g->name, sizeof(g->name), "gpu-0");
	snprintf(g->zone, sizeof(g->zone), "gpu");
	snprintf(g->uuid, sizeof(g->uuid), "GPU-1");
	snprintf(g->vendor, sizeof(g->vendor), "nvidia");
	g->gpu_samples = 1;
	a->procs = wb_array_new(3, sizeof(*a->procs));
	a->n_procs = 3;
	for (size_t i = 0; i < 3; i++) {
		a->procs[i].pid = 100 + i;
		a->procs[i].cpu_ns = 1000000000;
		snprintf(a->procs[i].comm, sizeof(a->procs[i].comm), "p%zu", i);
	}
	return m;
}

static void gpu_procs(struct wb_slot_zone *g, size_t n, const uint64_t *pid, const uint64_t *sm)
{
	free(g->gpu_procs);
	g->gpu_procs = n ? wb_array_new(n, sizeof(*g->gpu_procs)) : NULL;
	g->n_gpu_procs = n;
	for (size_t i = 0; i < n; i++)
		g->gpu_procs[i] = (struct wb_gpu_proc){.pid = pid[i], .sm_ns = sm[i]};
}

/* Per zone: active + idle = energy, processes + unattributed = active. */
static void check_sums(const struct wb_estimate *out)
{
	for (size_t z = 0; z < out->n_zones; z++) {
		const struct wb_est_zone *ez = &out->zones[z];
		CHECK_U64(ez->active_uj + ez->idle_uj, ez->energy_uj);
		uint64_t s = ez->unattributed_uj;
		for (size_t i = 0; i < out->n_procs; i++)
			s += out->procs[i].energy_uj[z];
		CHECK_U64(s, ez->active_uj);
	}
}

static void test_idle_learned_and_sm_shares(void)
{
	struct wb_msg *m = slot_new();
	struct wb_aligned *a = &m->aligned;
	struct wb_slot_zone *g = &a->zones[1];
	struct est_conf c = estimd_unit_conf();
	struct estimator *e = estimator_new(&c);
	struct wb_estimate out;
	struct est_result res;
	char err[256];

	/* No idle seen yet: all active; SM 3:1 among 100 and 102; 101 is not on the GPU. */
	g->energy_uj = 200000000; /* 200 W over 1 s */
	gpu_procs(g, 2, (uint64_t[]){100, 102}, (uint64_t[]){750000000, 250000000});
	CHECK(estimator_slot(e, a, &out, &res, err, sizeof(err)) == 0);
	CHECK_STR(out.zones[1].uuid, "GPU-1");
	CHECK_U64(out.zones[1].idle_uj, 0);
	CHECK_U64(out.procs[0].energy_uj[1], 150000000);
	CHECK_U64(out.procs[1].energy_uj[1], 0);
	CHECK_U64(out.procs[2].energy_uj[1], 50000000);
	/* the CPU zone is still shared by CPU time (3 x 1 s of 3 s busy) */
	CHECK_U64(out.procs[1].energy_uj[0], 10000000);
	check_sums(&out);

	/* A slot with no compute process at 60 W: idle learned, its active (0) nobody's. */
	a->t0 += 1000000000ull;
	a->t1 += 1000000000ull;
	g->energy_uj = 60000000;
	gpu_procs(g, 0, NULL, NULL);
	CHECK(estimator_slot(e, a, &out, &res, err, sizeof(err)) == 0);
	CHECK_U64(out.zones[1].idle_uj, 60000000);
	CHECK_NEAR(out.zones[1].idle_w, 60, 1e-9);
	check_sums(&out);

	/* 200 W again: 60 W idle, 140 W shared 3:1. */
	a->t0 += 1000000000ull;
	a->t1 += 1000000000ull;
	g->energy_uj = 200000000;
	gpu_procs(g, 2, (uint64_t[]){100, 102}, (uint64_t[]){750000000, 250000000});
	CHECK(estimator_slot(e, a, &out, &res, err, sizeof(err)) == 0);
	CHECK_U64(out.zones[1].idle_uj, 60000000);
	CHECK_U64(out.zones[1].active_uj, 140000000);
	CHECK_U64(out.procs[0].energy_uj[1], 105000000);
	CHECK_U64(out.procs[2].energy_uj[1], 35000000);
	check_sums(&out);

	/* A higher idle slot does not raise the idle power; a lower one lowers it. */
	a->t0 += 1000000000ull;
	a->t1 += 1000000000ull;
	g->energy_uj = 80000000;
	gpu_procs(g, 0, NULL, NULL);
	CHECK(estimator_slot(e, a, &out, &res, err, sizeof(err)) == 0);
	CHECK_NEAR(out.zones[1].idle_w, 60, 1e-9);
	CHECK_U64(out.zones[1].unattributed_uj, 20000000);
	check_sums(&out);

	/* No sample in the slot listed processes (gpu_samples 0): idle is not learned from it. */
	a->t0 += 1000000000ull;
	a->t1 += 1000000000ull;
	g->energy_uj = 10000000;
	g->gpu_samples = 0;
	CHECK(estimator_slot(e, a, &out, &res, err, sizeof(err)) == 0);
	CHECK_NEAR(out.zones[1].idle_w, 60, 1e-9);
	CHECK_U64(out.zones[1].idle_uj, 10000000); /* idle is at most the slot's energy */
	check_sums(&out);
	estimator_destroy(&e);
	wb_msg_clear(m);
	free(m);
}

static void test_equal_exclusive_absent(void)
{
	struct wb_msg *m = slot_new();
	struct wb_aligned *a = &m->aligned;
	struct wb_slot_zone *g = &a->zones[1];
	struct est_conf c = estimd_unit_conf();
	char err[256];
	CHECK(idle_parse_fixed((const char *const[]){"gpu=50"}, 1, &c.gpu_idle, err, sizeof(err)) ==
	      0);
	struct estimator *e = estimator_new(&c);
	struct wb_estimate out;
	struct est_result res;

	/* Configured 50 W idle; no utilization sample: equal shares among the three. */
	g->energy_uj = 350000000;
	gpu_procs(g, 3, (uint64_t[]){100, 101, 102}, (uint64_t[]){0, 0, 0});
	CHECK(estimator_slot(e, a, &out, &res, err, sizeof(err)) == 0);
	CHECK_U64(out.zones[1].idle_uj, 50000000);
	CHECK_NEAR(out.zones[1].idle_w, 50, 0);
	for (int i = 0; i < 3; i++)
		CHECK_U64(out.procs[i].energy_uj[1], 100000000);
	check_sums(&out);

	/* Exclusive GPU, one process with no SM sample: it gets all of the active energy. */
	a->t0 += 1000000000ull;
	a->t1 += 1000000000ull;
	g->exclusive = true;
	gpu_procs(g, 1, (uint64_t[]){101}, (uint64_t[]){0});
	CHECK(estimator_slot(e, a, &out, &res, err, sizeof(err)) == 0);
	CHECK_U64(out.procs[1].energy_uj[1], 300000000);
	CHECK_U64(out.procs[0].energy_uj[1] + out.procs[2].energy_uj[1], 0);
	check_sums(&out);

	/* A GPU process the slot does not list (pid 999): its share stays unattributed. */
	a->t0 += 1000000000ull;
	a->t1 += 1000000000ull;
	g->exclusive = false;
	gpu_procs(g, 2, (uint64_t[]){999, 100}, (uint64_t[]){200000000, 100000000});
	CHECK(estimator_slot(e, a, &out, &res, err, sizeof(err)) == 0);
	CHECK_U64(out.procs[0].energy_uj[1], 100000000);
	CHECK_U64(out.zones[1].unattributed_uj, 200000000);
	check_sums(&out);
	estimator_destroy(&e);
	wb_msg_clear(m);
	free(m);
}

/*
 * A slot that powerd's restart cut (a gap: a power-only GPU's integral started again; extrapolated
 * past powerd's last sample; not interpolated at an end) holds part of a slot's energy: no idle is
 * learned from it, or the minimum would drop for good (66.3 -> 62.8 W on a real GPU, 0 W for a
 * power-only one). What was learned survives an estimd restart through the state file.
 */
static void test_idle_whole_slots_and_state(void)
{
	struct wb_msg *m = slot_new();
	struct wb_aligned *a = &m->aligned;
	struct wb_slot_zone *g = &a->zones[1];
	struct est_conf c = estimd_unit_conf();
	struct estimator *e = estimator_new(&c);
	struct wb_estimate out;
	struct est_result res;
	char err[256];
	g->energy_uj = 70000000; /* 70 W, no process */
	CHECK(estimator_slot(e, a, &out, &res, err, sizeof(err)) == 0);
	CHECK_NEAR(out.zones[1].idle_w, 70, 1e-9);
	/* a gap; extrapolated past the last sample; the first slot of a zone or one after power
	 * came back (not interpolated at an end) */
	struct {
		bool gap, extrapolated, interpolated;
	} cut[] = {{true, false, true}, {false, true, true}, {false, false, false}};
	for (size_t k = 0; k < sizeof(cut) / sizeof(cut[0]); k++) {
		a->t0 += 1000000000ull;
		a->t1 += 1000000000ull;
		a->quality.gap = cut[k].gap;
		a->quality.extrapolated = cut[k].extrapolated;
		a->quality.interpolated = cut[k].interpolated;
		g->energy_uj = 29000000; /* what was measured of the slot */
		CHECK(estimator_slot(e, a, &out, &res, err, sizeof(err)) == 0);
		CHECK_NEAR(out.zones[1].idle_w, 70, 1e-9);
		CHECK_U64(out.zones[1].idle_uj, 29000000); /* at most the slot's energy */
		check_sums(&out);
	}
	a->quality = (struct wb_quality){.coverage = 1, .interpolated = true};

	/* a slot whose end is past the last sample: 34.3 J measured over 0.49 of it is 70 W (the
	 * rest comes with the next slot), not 34.3 W; under half measured teaches nothing */
	a->t0 += 1000000000ull;
	a->t1 += 1000000000ull;
	a->quality.coverage = 0.49;
	g->energy_uj = 34300000;
	CHECK(estimator_slot(e, a, &out, &res, err, sizeof(err)) == 0);
	CHECK_NEAR(out.zones[1].idle_w, 70, 1e-9);
	a->t0 += 1000000000ull;
	a->t1 += 1000000000ull;
	a->quality.coverage = 0.98;
	g->energy_uj = 68110000; /* 69.5 W over 0.98 s */
	CHECK(estimator_slot(e, a, &out, &res, err, sizeof(err)) == 0);
	CHECK_NEAR(out.zones[1].idle_w, 69.5, 1e-9);
	a->quality.coverage = 1;
	check_sums(&out);

	char path[256];
	unit_tmpfile(path, sizeof(path), "test_estimd_gpu.XXXXXX");
	CHECK(estimd_state_save(e, path, a->t1, true, err, sizeof(err)) == 0);
	estimator_destroy(&e);
	/* restarted while a process runs on the GPU: no slot to learn from, the saved idle holds */
	e = estimator_new(&c);
	size_t nh, ngpu;
	CHECK(estimd_state_load(e, path, &nh, &ngpu, err, sizeof(err)) == 0);
	CHECK_U64(ngpu, 1);
	a->t0 += 1000000000ull;
	a->t1 += 1000000000ull;
	g->energy_uj = 100000000;
	gpu_procs(g, 1, (uint64_t[]){100}, (uint64_t[]){500000000});
	CHECK(estimator_slot(e, a, &out, &res, err, sizeof(err)) == 0);
	CHECK_NEAR(out.zones[1].idle_w, 69.5, 1e-9);
	CHECK_U64(out.procs[0].energy_uj[1], 30500000);
	check_sums(&out);
	estimator_destroy(&e);

	/* a planted power beyond the bound refuses the file as a whole */
	unit_write(path,
		   "{\"version\": 1, \"hosts\": [], \"gpu_idle\": {\"h1\": {\"gpu-0\": 1e9}}}");
	e = estimator_new(&c);
	CHECK(estimd_state_load(e, path, &nh, &ngpu, err, sizeof(err)) < 0);
	CHECK(strstr(err, "gpu_idle") != NULL);
	CHECK_U64(ngpu, 0);
	estimator_destroy(&e);
	unlink(path);
	wb_msg_clear(m);
	free(m);
}

/* Containers and pods hold the sums of their processes' GPU energy. */
static void test_groups(void)
{
	struct wb_msg *m = slot_new();
	struct wb_aligned *a = &m->aligned;
	struct wb_slot_zone *g = &a->zones[1];
	a->cgroups = wb_array_new(2, sizeof(*a->cgroups));
	a->n_cgroups = 2;
	a->cgroups[0] = (struct wb_cgroup){.id = 11, .container_id = "c1", .pod_uid = "pod-a"};
	a->cgroups[1] = (struct wb_cgroup){.id = 12, .container_id = "c2", .pod_uid = "pod-a"};
	a->procs[0].cgroup_id = 11;
	a->procs[1].cgroup_id = 11;
	a->procs[2].cgroup_id = 12;
	g->energy_uj = 90000000;
	gpu_procs(g, 3, (uint64_t[]){100, 101, 102}, (uint64_t[]){100, 200, 600});
	struct est_conf c = estimd_unit_conf();
	struct estimator *e = estimator_new(&c);
	struct wb_estimate out;
	struct est_result res;
	char err[256];
	CHECK(estimator_slot(e, a, &out, &res, err, sizeof(err)) == 0);
	CHECK_U64(out.n_containers, 2);
	CHECK_STR(out.containers[0].id, "c1");
	CHECK_U64(out.containers[0].energy_uj[1], 30000000);
	CHECK_U64(out.containers[1].energy_uj[1], 60000000);
	CHECK_U64(out.n_pods, 1);
	CHECK_U64(out.pods[0].energy_uj[1], 90000000);
	check_sums(&out);
	estimator_destroy(&e);
	wb_msg_clear(m);
	free(m);
}

static const struct unit_case cases[] = {
    {"GPU idle learned from slots without processes; active by SM time",
     test_idle_learned_and_sm_shares},
    {"GPU equal shares, exclusive mode, an absent process", test_equal_exclusive_absent},
    {"GPU energy of containers and pods", test_groups},
    {"GPU idle learned from whole slots only, kept across a restart",
     test_idle_whole_slots_and_state},
};

UNIT_MAIN(cases)
