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

/* The one physical bound: each zone at most max_zone_w, the zones together at most max_host_w. */
static void test_power(void)
{
	const struct wb_plaus p = {.max_zone_w = 5000, .max_host_w = 12000};
	struct wb_err err;
	struct wb_claim c[3] = {{"package-0", 5000000000ull, S}, {"dram-0", 0, 0}, {"psys", 1, S}};
	CHECK(wb_plaus_power(&p, "aligned/h", c, 3, &err) == 0);
	c[0].e_uj++;
	CHECK(wb_plaus_power(&p, "aligned/h", c, 3, &err) < 0);
	CHECK_STR(wb_reason_name(err.reason), "implausible_power");
	CHECK(strstr(err.msg, "aligned/h zone package-0") && strstr(err.msg, "max_zone_w 5000"));
	/* energy in no time is more than any bound */
	c[0].e_uj = 1, c[0].dt_ns = 0;
	CHECK(wb_plaus_power(&p, "aligned/h", c, 1, &err) < 0);
	/* 2^63-1 uJ in a slot (an INT64 overflow frame) */
	c[0] = (struct wb_claim){"package-0", (uint64_t)INT64_MAX, S};
	CHECK(wb_plaus_power(&p, "aligned/h", c, 1, &err) < 0);
	/* three zones at 4000 W each pass one by one, not together */
	struct wb_claim h[3] = {
	    {"a", 4000000000ull, S}, {"b", 4000000000ull, S}, {"c", 4000000001ull, S}};
	CHECK(wb_plaus_power(&p, "power/h", h, 2, &err) == 0);
	CHECK(wb_plaus_power(&p, "power/h", h, 3, &err) < 0 && strstr(err.msg, "max_host_w 12000"));
	/* 0: off */
	const struct wb_plaus off = {0};
	CHECK(wb_plaus_power(&off, "power/h", h, 3, &err) == 0);
}

static struct wb_power_zone pz[2];
static struct wb_slot_zone sz[2];

static struct wb_msg power(const char *src, uint64_t epoch, uint64_t t, uint64_t e0, uint64_t e1)
{
	struct wb_msg m = {.kind = WB_POWER};
	snprintf(m.env.kind, sizeof(m.env.kind), "power");
	snprintf(m.env.host, sizeof(m.env.host), "h");
	snprintf(m.env.src, sizeof(m.env.src), "%s", src);
	m.env.epoch = epoch;
	m.power.t = t;
	snprintf(pz[0].name, sizeof(pz[0].name), "package-0");
	snprintf(pz[1].name, sizeof(pz[1].name), "dram-0");
	pz[0].energy_uj = e0, pz[1].energy_uj = e1;
	m.power.zones = pz;
	m.power.n_zones = 2;
	return m;
}

static struct wb_msg slot(uint64_t t0, uint64_t t1, uint64_t total_epoch, uint64_t e, uint64_t tot)
{
	struct wb_msg m = {.kind = WB_ALIGNED};
	snprintf(m.env.kind, sizeof(m.env.kind), "aligned");
	snprintf(m.env.host, sizeof(m.env.host), "h");
	snprintf(m.env.src, sizeof(m.env.src), "alignd");
	m.aligned.t0 = t0, m.aligned.t1 = t1, m.aligned.total_epoch = total_epoch;
	snprintf(sz[0].name, sizeof(sz[0].name), "package-0");
	sz[0].energy_uj = e, sz[0].total_uj = tot;
	m.aligned.zones = sz;
	m.aligned.n_zones = 1;
	return m;
}

/* The bound over a stream: counter steps, slots after a silence, total steps, zones' owners. */
static void test_bound(void)
{
	const struct wb_plaus p = {.max_zone_w = 5000, .max_host_w = 8000, .one_producer = true};
	struct wb_bound *b = wb_bound_new(0);
	struct wb_err err;
	struct wb_msg m = power("powerd", 7, NOW, 1000, 0);
	CHECK(wb_bound_check(b, &p, &m, true, &err) == 0);
	/* 4999 J in one second */
	m = power("powerd", 7, NOW + S, 1000 + 4999000000ull, 0);
	CHECK(wb_bound_check(b, &p, &m, true, &err) == 0);
	/* 9.2e18 uJ in the next second: refused, and the next honest step counts from the last
	 * accepted sample */
	m = power("powerd", 7, NOW + 2 * S, (uint64_t)INT64_MAX, 0);
	CHECK(wb_bound_check(b, &p, &m, true, &err) < 0 && err.reason == WB_R_IMPLAUSIBLE_POWER);
	m = power("powerd", 7, NOW + 3 * S, 1000 + 9000000000ull, 0);
	CHECK(wb_bound_check(b, &p, &m, true, &err) == 0);
	/* two zones at 4500 W each: the host's 8000 W */
	m = power("powerd", 7, NOW + 4 * S, 1000 + 13500000000ull, 4500000000ull);
	CHECK(wb_bound_check(b, &p, &m, true, &err) < 0 && strstr(err.msg, "max_host_w"));
	/* a new epoch is a restart: alignd's bridge judges it */
	m = power("powerd", 8, NOW + 4 * S, 1000 + 13500000000ull, 4500000000ull);
	CHECK(wb_bound_check(b, &p, &m, true, &err) == 0);
	/* another src with the same zone: refused unless it is the host's producer now */
	m = power("meter", 1, NOW + 5 * S, 0, 0);
	CHECK(wb_bound_check(b, &p, &m, false, &err) < 0 && err.reason == WB_R_DUP_PRODUCER);
	CHECK(strstr(err.msg, "'powerd'") && strstr(err.msg, "'meter'"));
	CHECK(wb_bound_check(b, &p, &m, true, &err) == 0);

	/* Slots: 50 kJ after ten silent seconds is 4545 W; the same in the next second is not. */
	m = slot(NOW, NOW + S, 3, 1000000, 1000000);
	CHECK(wb_bound_check(b, &p, &m, true, &err) == 0);
	m = slot(NOW + 10 * S, NOW + 11 * S, 3, 50000000000ull, 50001000000ull);
	CHECK(wb_bound_check(b, &p, &m, true, &err) == 0);
	m = slot(NOW + 11 * S, NOW + 12 * S, 3, 50000000000ull, 100001000000ull);
	CHECK(wb_bound_check(b, &p, &m, true, &err) < 0 && err.reason == WB_R_IMPLAUSIBLE_POWER);
	/* its total jumping while the slot is small (a recovery claimed from nothing) */
	m = slot(NOW + 12 * S, NOW + 13 * S, 3, 1000000, 70001000000ull);
	CHECK(wb_bound_check(b, &p, &m, true, &err) < 0 && strstr(err.msg, "package-0"));
	/* the same total in a new count is a new baseline */
	m = slot(NOW + 12 * S, NOW + 13 * S, 4, 1000000, 70001000000ull);
	CHECK(wb_bound_check(b, &p, &m, true, &err) == 0);
	/* a slot of 2^63-1 uJ */
	m = slot(NOW + 13 * S, NOW + 14 * S, 4, (uint64_t)INT64_MAX, (uint64_t)INT64_MAX);
	CHECK(wb_bound_check(b, &p, &m, true, &err) < 0);
	wb_bound_destroy(&b);
	CHECK(b == NULL);
}

/* One zone per message, two zones at interleaved times: each message is within the zone's
 * bound, the host's is judged over both. */
static struct wb_msg one_zone(const char *name, uint64_t t, uint64_t e)
{
	struct wb_msg m = power("powerd", 7, t, e, 0);
	snprintf(pz[0].name, sizeof(pz[0].name), "%s", name);
	m.power.n_zones = 1;
	return m;
}

static void test_bound_split(void)
{
	const struct wb_plaus p = {.max_zone_w = 5000, .max_host_w = 8000};
	struct wb_bound *b = wb_bound_new(0);
	struct wb_err err;
	struct wb_msg m;
	for (uint64_t k = 0; k < 3; k++) {
		m = one_zone("a", NOW + k * S, k * 4000000000ull);
		CHECK(wb_bound_check(b, &p, &m, true, &err) == 0);
		m = one_zone("b", NOW + k * S + S / 2, k * 3000000000ull);
		CHECK(wb_bound_check(b, &p, &m, true, &err) == 0);
	}
	/* b at 4500 W now: 8500 W with a's 4000 W over the same time */
	m = one_zone("a", NOW + 3 * S, 12000000000ull);
	CHECK(wb_bound_check(b, &p, &m, true, &err) == 0);
	m = one_zone("b", NOW + 3 * S + S / 2, 6000000000ull + 4500000000ull);
	CHECK(wb_bound_check(b, &p, &m, true, &err) < 0 && strstr(err.msg, "max_host_w"));
	/* a zone silent since (its last claim ends before this one starts) does not count */
	m = one_zone("b", NOW + 10 * S + S / 2, 6000000000ull + 7 * 4500000000ull);
	CHECK(wb_bound_check(b, &p, &m, true, &err) == 0);
	wb_bound_destroy(&b);
}

/* Records are bounded: the least recently seen hosts go first, and a forgotten host's next slot
 * is judged by its own length. */
static void test_bound_memory(void)
{
	const struct wb_plaus p = {.max_zone_w = 5000};
	struct wb_bound *b = wb_bound_new(256);
	struct wb_err err;
	struct wb_msg m = slot(NOW, NOW + S, 3, 1, 1);
	CHECK(wb_bound_check(b, &p, &m, true, &err) == 0);
	for (int i = 0; i < 300; i++) {
		struct wb_msg o = slot(NOW, NOW + S, 3, 1, 1);
		snprintf(o.env.host, sizeof(o.env.host), "other%d", i);
		CHECK(wb_bound_check(b, &p, &o, true, &err) == 0);
	}
	/* h was forgotten: 10 s of energy in a slot of 1 s is no longer explained by its silence */
	m = slot(NOW + 10 * S, NOW + 11 * S, 3, 40000000000ull, 0);
	CHECK(wb_bound_check(b, &p, &m, true, &err) < 0);
	wb_bound_destroy(&b);
}

static const struct unit_case cases[] = {
    {"a zone's power from a model's answer: clipped to [0, the bound], idle within it",
     test_zone_power},
    {"the physical bound", test_power},
    {"the bound over a stream", test_bound},
    {"the bound's records are bounded", test_bound_memory},
    {"a host's zones spread over several messages", test_bound_split},
    {"a time line set back", test_rewind},
    {"times around the receiver's clock and slot length", test_times},
    {"saturating sums and marks", test_sums_and_marks},
};
UNIT_MAIN(cases)
