/* Plausibility rules: message times around the receiver's clock, slot length, saturating sums and
 * marks. */
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

static const struct unit_case cases[] = {
    {"a time line set back", test_rewind},
    {"times around the receiver's clock and slot length", test_times},
    {"saturating sums and marks", test_sums_and_marks},
};
UNIT_MAIN(cases)
