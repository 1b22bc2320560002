/*
 * alignd and GPU zones: each slot carries the GPU's identity and the SM time of every process
 * the power samples in (t0, t1] listed, summed; the energy is the curve's, as for any zone.
 */
#include "../../alignd/alignd.h"
#include "unit.h"

#include "alignd_unit.h"

struct got {
	uint64_t t1, energy, samples;
	bool exclusive;
	char uuid[96], other_uuid[96];
	size_t n;
	struct wb_gpu_proc procs[8];
};

static struct got got[64];
static size_t ngot;

static void collect(struct wb_msg *m, void *arg)
{
	const struct wb_aligned *a = &m->aligned;
	if (ngot >= 64)
		return;
	struct got *g = &got[ngot++];
	memset(g, 0, sizeof(*g));
	g->t1 = a->t1;
	for (size_t i = 0; i < a->n_zones; i++) {
		const struct wb_slot_zone *z = &a->zones[i];
		if (strcmp(z->name, "gpu-0")) {
			snprintf(g->other_uuid, sizeof(g->other_uuid), "%s", z->uuid);
			CHECK_U64(z->n_gpu_procs, 0);
			continue;
		}
		g->energy = z->energy_uj;
		g->samples = z->gpu_samples;
		g->exclusive = z->exclusive;
		snprintf(g->uuid, sizeof(g->uuid), "%s", z->uuid);
		g->n = z->n_gpu_procs < 8 ? z->n_gpu_procs : 8;
		memcpy(g->procs, z->gpu_procs, g->n * sizeof(*g->procs));
	}
	alignd_unit_check_encodes(m);
}

/* Power every 500 ms: package-0 and gpu-0 (100 W); the GPU's processes per sample. */
static void power(struct align *a, uint64_t t, const struct wb_gpu_proc *procs, size_t n,
		  bool exclusive)
{
	struct wb_power_zone zones[2];
	memset(zones, 0, sizeof(zones));
	snprintf(zones[0].name, sizeof(zones[0].name), "package-0");
	snprintf(zones[0].zone, sizeof(zones[0].zone), "package");
	zones[0].energy_uj = t / 1000 * 30; /* 30 W */
	snprintf(zones[1].name, sizeof(zones[1].name), "gpu-0");
	snprintf(zones[1].zone, sizeof(zones[1].zone), "gpu");
	snprintf(zones[1].uuid, sizeof(zones[1].uuid), "GPU-77");
	snprintf(zones[1].vendor, sizeof(zones[1].vendor), "nvidia");
	zones[1].energy_uj = t / 1000 * 100; /* 100 W */
	zones[1].exclusive = exclusive;
	zones[1].gpu_procs = (struct wb_gpu_proc *)procs;
	zones[1].n_gpu_procs = n;
	struct wb_power p = {.t = t, .interval_ns = 500 * MS, .zones = zones, .n_zones = 2};
	snprintf(p.env.host, sizeof(p.env.host), "h");
	p.env.epoch = 1;
	align_power(a, &p, t + MS);
}

static void usage(struct align *a, uint64_t t)
{
	struct wb_proc procs[1] = {{.pid = 7, .cpu_ns = t / 2}};
	struct wb_usage u = {.t = t, .interval_ns = S, .ncpu = 1, .procs = procs, .n_procs = 1};
	snprintf(u.env.host, sizeof(u.env.host), "h");
	u.env.epoch = 1;
	u.cpu.user_ns = t / 2;
	align_usage(a, &u, 0, t + 2 * MS);
}

/* An engine for one host, with nothing collected yet; the runs start at base. */
static const uint64_t base = 1700000000ull * S;

static struct align *mk(void)
{
	struct align_conf c = alignd_unit_conf(4, 100, 16, 1024);
	ngot = 0;
	struct align *a = align_new(&c, collect, NULL);
	CHECK(a != NULL);
	return a;
}

static void test_slots_carry_gpu_weights(void)
{
	struct align *a = mk();
	struct wb_gpu_proc two[2] = {{.pid = 7, .sm_ns = 100 * MS}, {.pid = 8, .sm_ns = 300 * MS}};
	struct wb_gpu_proc one[1] = {{.pid = 8, .sm_ns = 200 * MS}};
	for (uint64_t k = 0; k <= 12; k++) {
		uint64_t t = base + k * 500 * MS;
		/* slot 1 (k 1, 2): two processes; slot 2 (k 3, 4): 7 leaves after one sample;
		 * slot 3 (k 5, 6): none; then exclusive, one process */
		if (k <= 3)
			power(a, t, two, 2, false);
		else if (k == 4)
			power(a, t, one, 1, false);
		else if (k <= 6)
			power(a, t, NULL, 0, false);
		else
			power(a, t, one, 1, true);
		if (k % 2 == 0)
			usage(a, t);
	}
	align_flush(a, base + 10 * S);
	CHECK(ngot >= 5);
	const struct got *g = &got[0];
	CHECK_U64(g->t1, base + S);
	CHECK_STR(g->uuid, "GPU-77");
	CHECK_STR(g->other_uuid, "");
	CHECK_U64(g->energy, 100000000);
	CHECK_U64(g->samples, 2);
	CHECK_U64(g->n, 2);
	CHECK_U64(g->procs[0].pid, 7);
	CHECK_U64(g->procs[0].sm_ns, 200 * MS);
	CHECK_U64(g->procs[1].pid, 8);
	CHECK_U64(g->procs[1].sm_ns, 600 * MS);
	g = &got[1];
	CHECK_U64(g->samples, 2);
	CHECK_U64(g->n, 2);
	CHECK_U64(g->procs[0].sm_ns, 100 * MS);
	CHECK_U64(g->procs[1].sm_ns, 500 * MS);
	g = &got[2];
	CHECK_U64(g->samples, 2);
	CHECK_U64(g->n, 0);
	CHECK(!g->exclusive);
	g = &got[3];
	CHECK(g->exclusive);
	CHECK_U64(g->n, 1);
	CHECK_U64(g->procs[0].sm_ns, 400 * MS);
	/* the GPU's energy over the run is exact, as for any zone */
	uint64_t sum = 0;
	for (size_t i = 0; i < ngot; i++)
		sum += got[i].energy;
	CHECK_U64(sum, (got[ngot - 1].t1 - base) / 1000 * 100);
	align_destroy(&a);
}

/* Usage stamped a quarter second off the power grid: each sample's SM time goes to the slots in
 * proportion to the part of its interval they cover, as its energy does; a process that first
 * shows in the sample after a slot's end still has its share of that slot. */
static void test_off_grid_shares(void)
{
	struct align *a = mk();
	struct wb_gpu_proc one[1] = {{.pid = 7, .sm_ns = 400 * MS}};
	for (uint64_t k = 0; k <= 8; k++) {
		uint64_t t = base + k * 500 * MS;
		power(a, t, k >= 3 ? one : NULL, k >= 3 ? 1 : 0, false);
		if (k % 2 == 1)
			usage(a, t - 250 * MS); /* base + 0.25 s, 1.25 s, ... */
	}
	align_flush(a, base + 10 * S);
	CHECK(ngot >= 3);
	/* (0.25, 1.25]: samples 0.5, 1.0 list nobody; 1.5 lists pid 7, half of its interval in */
	CHECK_U64(got[0].t1, base + 1250 * MS);
	CHECK_U64(got[0].samples, 3);
	CHECK_U64(got[0].n, 1);
	CHECK_U64(got[0].procs[0].sm_ns, 200 * MS);
	/* (1.25, 2.25]: half of 1.5, all of 2.0, half of 2.5 */
	CHECK_U64(got[1].samples, 3);
	CHECK_U64(got[1].procs[0].sm_ns, 800 * MS);
	align_destroy(&a);
}

static const struct unit_case cases[] = {
    {"slots carry a GPU's identity and its processes' SM time", test_slots_carry_gpu_weights},
    {"off the grid: SM time shared by the overlap of each sample's interval", test_off_grid_shares},
};

UNIT_MAIN(cases)
