/*
 * estimd idle/active split: Kepler's ratio, a fixed idle power, and the idle
 * power learned by regression, including under sustained full load.
 */
#include <math.h>

#include "../../estimd/estimd.h"
#include "unit.h"

static struct idle_conf conf_of(enum idle_method m)
{
	struct idle_conf c = {.method = m, .window = 300, .min_slots = 30, .min_spread = 0.05};
	return c;
}

static void test_ratio(void)
{
	struct idle_conf c = conf_of(IDLE_RATIO);
	uint64_t active, idle;
	/* busy 1 s of 4 s (idle 1 s + iowait 2 s): a quarter of 1000 J is active. */
	CHECK(idle_split(&c, NULL, "package-0", "package", 1000000000, 1.0, 1000000000, 4000000000,
			 &active, &idle) == IDLE_RATIO);
	CHECK_U64(active, 250000000);
	CHECK_U64(idle, 750000000);
	/* Full load drives idle to zero. */
	idle_split(&c, NULL, "package-0", "package", 1000000000, 1.0, 4000000000, 4000000000,
		   &active, &idle);
	CHECK_U64(idle, 0);
	/* No CPU time: all idle, no division. */
	idle_split(&c, NULL, "package-0", "package", 123, 1.0, 0, 0, &active, &idle);
	CHECK_U64(active, 0);
	CHECK_U64(idle, 123);
	/* busy above total (skewed deltas) is capped. */
	idle_split(&c, NULL, "package-0", "package", 123, 1.0, 9, 3, &active, &idle);
	CHECK_U64(active, 123);
}

static void test_fixed(void)
{
	struct idle_conf c = conf_of(IDLE_FIXED);
	const char *entries[] = {"package=20", "package-1=5.5", "dram=3"};
	char err[256];
	CHECK(idle_parse_fixed(entries, 3, &c, err, sizeof(err)) == 0);
	CHECK_U64(c.nfixed, 3);
	uint64_t active, idle;
	/* 20 W for 2 s is 40 J idle. */
	CHECK(idle_split(&c, NULL, "package-0", "package", 100000000, 2.0, 1, 2, &active, &idle) ==
	      IDLE_FIXED);
	CHECK_U64(idle, 40000000);
	CHECK_U64(active, 60000000);
	/* The zone's own entry wins over its kind. */
	idle_split(&c, NULL, "package-1", "package", 100000000, 2.0, 1, 2, &active, &idle);
	CHECK_U64(idle, 11000000);
	/* Idle never exceeds the energy. */
	idle_split(&c, NULL, "dram-0", "dram", 1000000, 2.0, 1, 2, &active, &idle);
	CHECK_U64(idle, 1000000);
	CHECK_U64(active, 0);
	/* A zone without a value falls back to the ratio. */
	CHECK(idle_split(&c, NULL, "psys", "psys", 1000, 1.0, 1, 4, &active, &idle) == IDLE_RATIO);
	CHECK_U64(active, 250);

	const char *bad[] = {"package", "=5", "package=abc", "package=-1", "package=nan"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		CHECK(idle_parse_fixed(&bad[i], 1, &c, err, sizeof(err)) == -1);
		CHECK(strstr(err, bad[i]) != NULL);
	}
}

/* Zone power P = 20 W + 80 W * u: regression learns 20 W idle and keeps it under sustained full
 * load. */
static void test_regression_full_load(void)
{
	struct idle_conf c = conf_of(IDLE_REGRESSION);
	struct idle_conf ratio = conf_of(IDLE_RATIO);
	struct idle_reg reg = {0};
	uint64_t active, idle;
	uint64_t total = 4000000000ull;
	uint32_t seed = 12345;
	int before_learned_ratio = 0;
	for (int i = 0; i < 200; i++) {
		seed = seed * 1103515245u + 12345u;
		double u = 0.1 + 0.8 * (double)(seed >> 8) / (double)(1u << 24);
		uint64_t busy = (uint64_t)(u * (double)total);
		u = (double)busy / (double)total;
		uint64_t e = (uint64_t)llround((20 + 80 * u) * 1e6);
		enum idle_method used = idle_split(&c, &reg, "package-0", "package", e, 1.0, busy,
						   total, &active, &idle);
		if (i < 29 && used == IDLE_RATIO)
			before_learned_ratio++;
	}
	CHECK(before_learned_ratio == 29); /* the ratio stands in until enough slots are seen */
	CHECK(reg.valid);
	CHECK_NEAR(reg.idle_w, 20.0, 0.01);

	/* Sustained full load: P = 100 W at u = 1 for longer than the window. */
	for (int i = 0; i < 400; i++)
		idle_split(&c, &reg, "package-0", "package", 100000000, 1.0, total, total, &active,
			   &idle);
	CHECK_NEAR(reg.idle_w, 20.0, 0.01);
	CHECK(idle_split(&c, &reg, "package-0", "package", 100000000, 1.0, total, total, &active,
			 &idle) == IDLE_REGRESSION);
	CHECK_NEAR((double)idle, 20e6, 1e4);
	CHECK_NEAR((double)active, 80e6, 1e4);
	/* The ratio method under the same load calls all of it active. */
	idle_split(&ratio, NULL, "package-0", "package", 100000000, 1.0, total, total, &active,
		   &idle);
	CHECK_U64(idle, 0);
	CHECK_U64(active, 100000000);
	idle_reg_free(&reg);
}

/* A window that never varies teaches nothing: the ratio keeps standing in. */
static void test_regression_needs_spread(void)
{
	struct idle_conf c = conf_of(IDLE_REGRESSION);
	struct idle_reg reg = {0};
	uint64_t active, idle;
	enum idle_method used = IDLE_REGRESSION;
	for (int i = 0; i < 100; i++)
		used = idle_split(&c, &reg, "dram-0", "dram", 5000000, 1.0, 2000000000, 4000000000,
				  &active, &idle);
	CHECK(!reg.valid);
	CHECK(used == IDLE_RATIO);
	CHECK_U64(active, 2500000);
	idle_reg_free(&reg);
}

static const struct unit_case cases[] = {
    {"ratio: busy / total, iowait idle, no division by zero", test_ratio},
    {"fixed idle power per zone and kind, capped, fallback", test_fixed},
    {"regression learns idle and keeps it under full load", test_regression_full_load},
    {"regression waits for spread in usage", test_regression_needs_spread},
};

UNIT_MAIN(cases)
