/* Plausibility rules: message times around the receiver's clock, slot length, saturating sums and
 * marks. */
#include <math.h>
#include <string.h>

#include "plaus.h"
#include "unit.h"

#define S 1000000000ull
#define NOW (1800000000ull * S)

static int check_t(enum wb_kind kind, uint64_t t0, uint64_t t1, struct wb_err *err)
{
	const struct wb_plaus p = {
	    .max_ahead_ns = 300 * S, .max_behind_ns = 3600 * S, .max_slot_ns = 3600 * S};
	struct wb_msg m;
	memset(&m, 0, sizeof(m));
	m.kind = kind;
	if (kind == WB_POWER)
		m.power.t = t0;
	else if (kind == WB_USAGE)
		m.usage.t = t0;
	else if (kind == WB_ALIGNED)
		m.aligned.t0 = t0, m.aligned.t1 = t1;
	else if (kind == WB_ESTIMATE)
		m.estimate.t0 = t0, m.estimate.t1 = t1;
	else if (kind == WB_STAT)
		m.stat.t = t0;
	memset(err, 0, sizeof(*err));
	return wb_plaus_check(&p, &m, NOW, err);
}

static void test_times(void)
{
	struct wb_err err;
	CHECK(check_t(WB_POWER, NOW, 0, &err) == 0);
	CHECK(check_t(WB_POWER, NOW + 299 * S, 0, &err) == 0);
	CHECK(check_t(WB_POWER, NOW - 3599 * S, 0, &err) == 0);
	/* 2^63-1: valid for the schema, 292 years ahead */
	CHECK(check_t(WB_USAGE, (uint64_t)INT64_MAX, 0, &err) < 0);
	CHECK(err.reason == WB_R_IMPLAUSIBLE_TIME && strstr(err.msg, "ahead"));
	CHECK_STR(wb_reason_name(err.reason), "implausible_time");
	CHECK(check_t(WB_STAT, NOW + 301 * S, 0, &err) < 0);
	CHECK(check_t(WB_POWER, NOW - 3601 * S, 0, &err) < 0 && strstr(err.msg, "behind"));
	CHECK(check_t(WB_ALIGNED, NOW - S, NOW, &err) == 0);
	CHECK(check_t(WB_ALIGNED, NOW - S, (uint64_t)INT64_MAX, &err) < 0 && strstr(err.msg, "t1"));
	CHECK(check_t(WB_ESTIMATE, NOW - 3000 * S, NOW, &err) == 0);
	/* a slot longer than max_slot, both ends within the window */
	struct wb_plaus wide = {.max_slot_ns = 3600 * S};
	struct wb_msg m = {.kind = WB_ESTIMATE};
	m.estimate.t0 = 1;
	m.estimate.t1 = NOW;
	CHECK(wb_plaus_check(&wide, &m, NOW, &err) < 0 && strstr(err.msg, "max_slot"));
	CHECK(check_t(WB_ALIGNED, NOW, NOW - S, &err) < 0 && strstr(err.msg, "goes back"));
	/* all bounds 0: nothing refused */
	struct wb_plaus off = {0};
	m.estimate.t1 = (uint64_t)INT64_MAX;
	CHECK(wb_plaus_check(&off, &m, NOW, &err) == 0);
}

static void test_sums_and_marks(void)
{
	bool sat = false;
	CHECK_U64(wb_sat_add(1, 2, &sat), 3);
	CHECK(!sat);
	CHECK_U64(wb_sat_add(WB_WIRE_MAX - 1, 1, &sat), WB_WIRE_MAX);
	CHECK(!sat);
	CHECK_U64(wb_sat_add(WB_WIRE_MAX, 1, &sat), WB_WIRE_MAX);
	CHECK(sat);
	sat = false;
	CHECK_U64(wb_sat_add(UINT64_MAX, UINT64_MAX, &sat), WB_WIRE_MAX);
	CHECK(sat);

	uint64_t last = 0;
	CHECK_U64(wb_mark_next(&last, 100), 100);
	CHECK_U64(wb_mark_next(&last, 50), 101);
	CHECK_U64(wb_mark_next(&last, 200), 200);
	/* A poisoned mark (a frame at 2^63-1, or a state file holding one) starts again from t. */
	last = WB_WIRE_MAX;
	CHECK_U64(wb_mark_next(&last, NOW), NOW);
	CHECK_U64(wb_mark_next(&last, NOW), NOW + 1);
	last = WB_WIRE_MAX - 1;
	CHECK_U64(wb_mark_next(&last, NOW), WB_WIRE_MAX);
	CHECK_U64(wb_mark_next(&last, NOW), NOW);
	for (int i = 0; i < 10; i++)
		CHECK(wb_mark_next(&last, WB_WIRE_MAX) <= WB_WIRE_MAX);

	CHECK_U64(wb_plaus_energy_max_uj(S, 5000), 5000000000ull);
	CHECK_U64(wb_plaus_energy_max_uj(UINT64_MAX, 1e9), WB_WIRE_MAX);
}

static void test_rewind(void)
{
	struct wb_rewind r = {0};
	/* increasing samples behind: the third restarts the time line */
	CHECK(!wb_rewind_see(&r, 10) && !wb_rewind_see(&r, 11) && wb_rewind_see(&r, 12));
	/* a duplicate or a reordered one breaks the run */
	CHECK(!wb_rewind_see(&r, 10) && !wb_rewind_see(&r, 10) && !wb_rewind_see(&r, 11));
	CHECK(wb_rewind_see(&r, 12));
	/* an accepted sample in between starts the count over */
	CHECK(!wb_rewind_see(&r, 10) && !wb_rewind_see(&r, 11));
	wb_rewind_reset(&r);
	CHECK(!wb_rewind_see(&r, 12));
}

static void test_zone_power(void)
{
	struct wb_zone_power zp;
	/* Kepler's LogarithmicRegressionTrainer_5 package at 960 CPU-ms/s: P(x) 88.77 W, P(0)
	 * -612.03 W. Clipped at 0 as Kepler's estimator does, idle is 0 and all 88.77 W active
	 * (not P(x) - P(0) = 700.80 W). */
	CHECK(wb_plaus_zone_power(88.77, -612.03, 5000, &zp) == WB_POWER_NEGATIVE);
	CHECK_NEAR(zp.node_w, 88.77, 1e-12);
	CHECK_NEAR(zp.idle_w, 0, 0);
	CHECK_NEAR(zp.active_w, 88.77, 1e-12);
	/* a plausible answer passes as it is */
	CHECK(wb_plaus_zone_power(120, 100, 5000, &zp) == WB_POWER_OK);
	CHECK(zp.node_w == 120 && zp.idle_w == 100 && zp.active_w == 20);
	/* idle above total: the node power is the answer, idle at most that, active 0 */
	CHECK(wb_plaus_zone_power(40, 60, 5000, &zp) == WB_POWER_IDLE_ABOVE);
	CHECK(zp.node_w == 40 && zp.idle_w == 40 && zp.active_w == 0);
	/* above the bound: clipped to it */
	CHECK(wb_plaus_zone_power(99999, -99999, 5000, &zp) == WB_POWER_ABOVE);
	CHECK(zp.node_w == 5000 && zp.idle_w == 0 && zp.active_w == 5000);
	CHECK(wb_plaus_zone_power(1e39, 1e39, 300, &zp) == WB_POWER_ABOVE);
	CHECK(zp.node_w == 300 && zp.idle_w == 300 && zp.active_w == 0);
	/* not finite: 0 W; a finite part still counts */
	CHECK(wb_plaus_zone_power(NAN, 10, 5000, &zp) == WB_POWER_NONFINITE);
	CHECK(zp.node_w == 0 && zp.idle_w == 0 && zp.active_w == 0);
	CHECK(wb_plaus_zone_power(50, INFINITY, 5000, &zp) == WB_POWER_NONFINITE);
	CHECK(zp.node_w == 50 && zp.idle_w == 0 && zp.active_w == 50);
	CHECK(wb_plaus_zone_power(-INFINITY, 0, 5000, &zp) == WB_POWER_NONFINITE);
	CHECK(zp.node_w == 0);
	CHECK_STR(wb_power_fault_name(WB_POWER_IDLE_ABOVE), "idle above total");
}

static const struct unit_case cases[] = {
    {"a zone's power from a model's answer: clipped to [0, the bound], idle within it",
     test_zone_power},
    {"a time line set back", test_rewind},
    {"times around the receiver's clock and slot length", test_times},
    {"saturating sums and marks", test_sums_and_marks},
};
UNIT_MAIN(cases)
