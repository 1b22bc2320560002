/*
 * estimd online training: coefficients recovered from noise-free synthetic
 * slots, held-out error with 5 % noise, collinear features, and training fed
 * by the estimator from measured aligned slots.
 */
#include <math.h>

#include "codec.h"
#include "../../estimd/estimd.h"
#include "unit.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;

static double uniform(void)
{
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return (double)((rng * 2685821657736338717ull) >> 11) / 9007199254740992.0;
}

static double gauss(void)
{
	double u1 = uniform(), u2 = uniform();
	if (u1 < 1e-300)
		u1 = 1e-300;
	return sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2);
}

static const struct train_conf tconf = {
    .window = 600, .min_slots = 30, .every = 60, .holdout_every = 5};

/* Truth: package = 30 W + 0.004 W per CPU-ms/s + 2e-9 W per instruction/s; dram = 5 W + 0.0005 W
 * per CPU-ms/s. */
static void truth(const double x[FEAT_COUNT], double y[TRAIN_ZONES])
{
	for (int z = 0; z < TRAIN_ZONES; z++)
		y[z] = -1;
	y[0] = 30 + 0.004 * x[FEAT_CPU_TIME_MS] + 2e-9 * x[FEAT_CPU_INSTRUCTIONS];
	y[3] = 5 + 0.0005 * x[FEAT_CPU_TIME_MS];
}

static void sample(double x[FEAT_COUNT])
{
	memset(x, 0, sizeof(double) * FEAT_COUNT);
	x[FEAT_CPU_TIME_MS] = 4000 * uniform();
	x[FEAT_CPU_INSTRUCTIONS] = 2e10 * uniform();
}

/* Raw-unit coefficient j of a zone: weight / scale; intercept: bias - sum weight * mean / scale. */
static double raw_weight(const struct model_zone *z, int id)
{
	for (size_t i = 0; i < z->nfeat; i++)
		if (z->feat[i].id == id)
			return z->feat[i].weight / z->feat[i].scale;
	return 0;
}

static double raw_intercept(const struct model_zone *z)
{
	double b = z->bias_w;
	for (size_t i = 0; i < z->nfeat; i++)
		b -= z->feat[i].weight * z->feat[i].mean / z->feat[i].scale;
	return b;
}

static void test_noise_free_recovers_coefficients(void)
{
	struct trainer t;
	CHECK(trainer_init(&t, &tconf) == 0);
	int due = 0;
	for (int i = 0; i < 600; i++) {
		double x[FEAT_COUNT], y[TRAIN_ZONES];
		sample(x);
		truth(x, y);
		due += trainer_add_sample(&t, x, y) == 1;
	}
	CHECK(due > 0);
	struct model m;
	char err[MODEL_ERR_MAX];
	CHECK(trainer_fit(&t, "synthetic", 8, &m, err, sizeof(err)) == 0);
	CHECK_U64(m.nzones, 2);
	CHECK_U64(m.train_slots, 480);
	CHECK_U64(m.test_slots, 120);
	int pkg = model_find_zone(&m, "package"), dram = model_find_zone(&m, "dram");
	CHECK(pkg >= 0 && dram >= 0);
	if (pkg < 0 || dram < 0)
		return;
	/* Within 1 % of the truth. */
	CHECK_NEAR(raw_intercept(&m.zones[pkg]), 30, 0.3);
	CHECK_NEAR(raw_weight(&m.zones[pkg], FEAT_CPU_TIME_MS), 0.004, 0.00004);
	CHECK_NEAR(raw_weight(&m.zones[pkg], FEAT_CPU_INSTRUCTIONS), 2e-9, 2e-11);
	CHECK_NEAR(raw_intercept(&m.zones[dram]), 5, 0.05);
	CHECK_NEAR(raw_weight(&m.zones[dram], FEAT_CPU_TIME_MS), 0.0005, 0.000005);
	CHECK_NEAR(raw_weight(&m.zones[dram], FEAT_CPU_INSTRUCTIONS), 0, 1e-13);
	CHECK(m.zones[pkg].mae_w < 1e-6);
	CHECK(m.zones[pkg].mape < 1e-6);
	/* Unmeasured counters (all zero) are left out of the model. */
	CHECK_U64(m.zones[pkg].nfeat, 2);
	/* The Kepler JSON written from it predicts the same. */
	char *json = model_to_kepler_json(&m, err, sizeof(err));
	struct model back;
	CHECK(json &&
	      model_parse(json, strlen(json), "trained.json", NULL, &back, err, sizeof(err)) == 0);
	free(json);
	double x[FEAT_COUNT] = {2500, 0, 1e10, 0};
	CHECK_NEAR(model_zone_power_w(&back, &back.zones[model_find_zone(&back, "package")], x),
		   30 + 10 + 20, 1e-6);
	trainer_free(&t);
}

static void test_noisy_mape(void)
{
	struct trainer t;
	CHECK(trainer_init(&t, &tconf) == 0);
	for (int i = 0; i < 600; i++) {
		double x[FEAT_COUNT], y[TRAIN_ZONES];
		sample(x);
		truth(x, y);
		y[0] *= 1 + 0.05 * gauss();
		y[3] *= 1 + 0.05 * gauss();
		trainer_add_sample(&t, x, y);
	}
	struct model m;
	char err[MODEL_ERR_MAX];
	CHECK(trainer_fit(&t, "noisy", 8, &m, err, sizeof(err)) == 0);
	for (size_t z = 0; z < m.nzones; z++) {
		printf("#   %s: held-out MAE %.3f W, MAPE %.2f %%\n", m.zones[z].zone,
		       m.zones[z].mae_w, m.zones[z].mape);
		CHECK(m.zones[z].mape < 5.0);
		/* Noise of 5 % (sd) shows as a mean absolute error near 4 %: the error is really
		 * measured. */
		CHECK(m.zones[z].mape > 2.0);
	}
	trainer_free(&t);
}

/* Cycles exactly proportional to CPU time: one of them is dropped, predictions stay right. */
static void test_collinear(void)
{
	struct trainer t;
	CHECK(trainer_init(&t, &tconf) == 0);
	for (int i = 0; i < 200; i++) {
		double x[FEAT_COUNT], y[TRAIN_ZONES];
		sample(x);
		x[FEAT_CPU_CYCLES] = 3e6 * x[FEAT_CPU_TIME_MS];
		truth(x, y);
		trainer_add_sample(&t, x, y);
	}
	struct model m;
	char err[MODEL_ERR_MAX];
	CHECK(trainer_fit(&t, "collinear", 8, &m, err, sizeof(err)) == 0);
	double x[FEAT_COUNT] = {1000, 3e9, 5e9, 0};
	double y[TRAIN_ZONES];
	truth(x, y);
	CHECK_NEAR(model_zone_power_w(&m, &m.zones[0], x), y[0], 1e-6);
	for (size_t f = 0; f < m.zones[0].nfeat; f++)
		CHECK(isfinite(m.zones[0].feat[f].weight) && m.zones[0].feat[f].scale > 0);
	trainer_free(&t);
}

static void test_too_few_and_bad_slots(void)
{
	struct trainer t;
	CHECK(trainer_init(&t, &tconf) == 0);
	struct model m;
	char err[MODEL_ERR_MAX];
	double x[FEAT_COUNT] = {100}, y[TRAIN_ZONES] = {10, -1, -1, -1, -1};
	for (int i = 0; i < 10; i++)
		CHECK(trainer_add_sample(&t, x, y) == 0);
	CHECK(trainer_fit(&t, "few", 1, &m, err, sizeof(err)) == -1);
	CHECK(strstr(err, "30 needed") != NULL);

	/* Aligned slots: sockets add up per Kepler zone; a slot with a counter reset is not learned
	 * from. */
	struct wb_msg msg = {.kind = WB_ALIGNED};
	struct wb_aligned *a = &msg.aligned;
	a->t0 = 0;
	a->t1 = 2000000000ull;
	a->zones = wb_array_new(3, sizeof(*a->zones));
	a->n_zones = 3;
	a->zones[0] =
	    (struct wb_slot_zone){.name = "package-0", .zone = "package", .energy_uj = 60000000};
	a->zones[1] =
	    (struct wb_slot_zone){.name = "package-1", .zone = "package", .energy_uj = 40000000};
	a->zones[2] = (struct wb_slot_zone){.name = "psys", .zone = "psys", .energy_uj = 300000000};
	size_t before = t.n;
	CHECK(trainer_add(&t, a) >= 0);
	CHECK_U64(t.n, before + 1);
	const struct train_sample *s = &t.ring[(t.head + t.conf.window - 1) % t.conf.window];
	CHECK_NEAR(s->y_w[0], 50, 1e-9);  /* (60 + 40) J over 2 s */
	CHECK_NEAR(s->y_w[4], 150, 1e-9); /* psys is Kepler's platform */
	a->quality.gap = true;
	CHECK(trainer_add(&t, a) == -1);
	CHECK_U64(t.n, before + 1);
	/* nor is a slot with a simulated zone (powerd's fake source) */
	a->quality.gap = false;
	snprintf(a->zones[1].path, sizeof(a->zones[1].path), "simulated:/proc/stat");
	CHECK(trainer_add(&t, a) == -1);
	CHECK_U64(t.n, before + 1);
	a->zones[1].path[0] = '\0';
	CHECK(trainer_add(&t, a) >= 0);
	CHECK_U64(t.n, before + 2);
	wb_msg_clear(&msg);
	trainer_free(&t);
}

/* The estimator trains from measured slots and hands out a model every train_every slots. */
static void test_estimator_trains(void)
{
	struct est_conf c = {
	    .mode = EST_AUTO, .idle.method = IDLE_RATIO, .train = true, .train_conf = tconf};
	c.train_conf.every = 50;
	struct estimator *e = estimator_new(&c);
	struct wb_msg msg = {.kind = WB_ALIGNED};
	struct wb_aligned *a = &msg.aligned;
	snprintf(a->env.host, sizeof(a->env.host), "metal_1");
	a->ncpu = 8;
	a->zones = wb_array_new(1, sizeof(*a->zones));
	a->n_zones = 1;
	a->zones[0] = (struct wb_slot_zone){.name = "package-0", .zone = "package"};
	a->procs = wb_array_new(1, sizeof(*a->procs));
	a->n_procs = 1;
	a->procs[0].pid = 7;
	int models = 0;
	char err[MODEL_ERR_MAX], name[128] = "";
	for (int i = 0; i < 200; i++) {
		a->t0 = (uint64_t)i * 1000000000ull;
		a->t1 = a->t0 + 1000000000ull;
		double cpu_ms = 8000 * uniform();
		a->procs[0].cpu_ns = (uint64_t)(cpu_ms * 1e6);
		a->cpu.user_ns = a->procs[0].cpu_ns;
		a->cpu.idle_ns = 8000000000ull - a->cpu.user_ns;
		a->zones[0].energy_uj = (uint64_t)llround((25 + 0.01 * cpu_ms) * 1e6);
		struct wb_estimate out;
		struct est_result res;
		CHECK(estimator_slot(e, a, &out, &res, err, sizeof(err)) == 0);
		if (res.trained) {
			models++;
			snprintf(name, sizeof(name), "%s", res.trained->name);
			CHECK_U64(res.trained->cores, 8);
			CHECK_NEAR(raw_intercept(&res.trained->zones[0]), 25, 0.25);
			free(res.trained);
		}
	}
	/* Fits at 50, 100, 150, 200 slots (the first one has 40 training slots, over train_min). */
	CHECK(models == 4);
	CHECK(strncmp(name, "wattbus-metal-1-", 16) ==
	      0); /* '_' replaced: Kepler splits names on it */
	estimator_destroy(&e);
	wb_msg_clear(&msg);
}

static const struct unit_case cases[] = {
    {"noise-free synthetic slots: coefficients within 1 %", test_noise_free_recovers_coefficients},
    {"5 % noise: held-out MAPE under 5 %", test_noisy_mape},
    {"collinear features", test_collinear},
    {"too few slots, sockets summed, gap slots skipped", test_too_few_and_bad_slots},
    {"estimator trains from measured slots", test_estimator_trains},
};

UNIT_MAIN(cases)
