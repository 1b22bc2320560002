/*
 * powerd's arithmetic: wrap correction, rejected readings and restarts of the
 * energy counters, trapezoid integration of power. (The sampling grid is lib/daemon.c's:
 * test_daemon_grid.c.)
 */
#include "../../powerd/powerd.h"
#include "unit.h"

#define MS 1000000ull
#define S 1000000000ull
#define MAX_UW 5000000000ull /* 5000 W */

/* Range 1,000,000 uJ: values 0..1000000, so it wraps modulo 1000001. */
static void test_wrap_sum_exact(void)
{
	struct pd_counter c;
	counter_init(&c, 1000001, 1, 1, MAX_UW);
	uint64_t raw = 900000, t = 0;
	CHECK(counter_update(&c, raw, t) == PD_FIRST);
	CHECK_U64(counter_uj(&c), 900000); /* starts from the hardware reading */
	uint64_t incs[] = {50000, 50000, 1, 300000, 999999, 0, 123457, 1000000};
	uint64_t sum = 900000;
	int wraps = 0;
	for (size_t i = 0; i < sizeof(incs) / sizeof(incs[0]); i++) {
		uint64_t next = (raw + incs[i]) % 1000001;
		t += 1 * S; /* 1 s: up to 5000 J plausible, far above 1 J */
		enum pd_verdict v = counter_update(&c, next, t);
		CHECK(v == PD_OK || v == PD_WRAP);
		wraps += v == PD_WRAP;
		sum += incs[i];
		raw = next;
		CHECK_U64(counter_uj(&c), sum);
	}
	CHECK(wraps >= 3);
	CHECK_U64(counter_range_uj(&c), 1000000);
}

static void test_exact_wrap_to_zero(void)
{
	struct pd_counter c;
	counter_init(&c, 1001, 1, 1, MAX_UW);
	counter_update(&c, 1000, 0);
	CHECK(counter_update(&c, 0, S) == PD_WRAP); /* 1000 -> 0 is one microjoule */
	CHECK_U64(counter_uj(&c), 1001);
}

static void test_out_of_range(void)
{
	struct pd_counter c;
	counter_init(&c, 1001, 1, 1, MAX_UW);
	counter_update(&c, 10, 0);
	CHECK(counter_update(&c, 1001, S) == PD_RANGE);
	CHECK(counter_update(&c, 20, 2 * S) == PD_OK);
	CHECK_U64(counter_uj(&c), 20);
}

/* A backwards step whose wrap would need more than max power is rejected; a glitch costs nothing.
 */
static void test_backwards_glitch(void)
{
	struct pd_counter c;
	counter_init(&c, 1000000000001ull, 1, 1, MAX_UW); /* 1 MJ range */
	counter_update(&c, 500000000000ull, 0);
	CHECK(counter_update(&c, 500000100000ull, 100 * MS) == PD_OK);
	/* wrap delta ~500 kJ in 0.1 s: 5 MW, not plausible */
	CHECK(counter_update(&c, 5, 200 * MS) == PD_BACKWARDS);
	CHECK_U64(counter_uj(&c), 500000100000ull);
	/* the next reading agrees with the last good one: the glitch is forgotten, nothing lost */
	CHECK(counter_update(&c, 500000300000ull, 300 * MS) == PD_OK);
	CHECK_U64(counter_uj(&c), 500000300000ull);
}

/* A counter that really restarted: two readings agree on the new value; the gap's energy is not
 * invented. */
static void test_backwards_restart(void)
{
	struct pd_counter c;
	counter_init(&c, 0, 1, 1, MAX_UW); /* a counter that never wraps (hwmon energy) */
	counter_update(&c, 7000000, 0);
	CHECK(counter_update(&c, 1000, 100 * MS) == PD_BACKWARDS);
	CHECK_U64(counter_uj(&c), 7000000);
	CHECK(counter_update(&c, 251000, 200 * MS) == PD_REBASED);
	CHECK_U64(counter_uj(&c), 7000000 + 250000); /* only the increment both readings agree on */
	CHECK(counter_update(&c, 351000, 300 * MS) == PD_OK);
	CHECK_U64(counter_uj(&c), 7350000);
}

/* A bad value that sticks for several readings never becomes the baseline. */
static void test_stuck_glitch(void)
{
	struct pd_counter c;
	counter_init(&c, 0, 1, 1, MAX_UW);
	counter_update(&c, 1000000, 0);
	CHECK(counter_update(&c, 10, 100 * MS) == PD_BACKWARDS);
	CHECK(counter_update(&c, 10, 200 * MS) == PD_BACKWARDS);
	CHECK(counter_update(&c, 10, 300 * MS) == PD_BACKWARDS);
	CHECK_U64(counter_uj(&c), 1000000);
	/* 1 J in 0.4 s would be a believable climb from 10, but the old count is believable too and
	 * wins */
	CHECK(counter_update(&c, 1000500, 400 * MS) == PD_OK);
	CHECK_U64(counter_uj(&c), 1000500);
}

static void test_forward_jump(void)
{
	struct pd_counter c;
	counter_init(&c, 0, 1, 1, 100000000ull); /* 100 W */
	counter_update(&c, 0, 0);
	/* 10 J in 10 ms is 1000 W */
	CHECK(counter_update(&c, 10000000, 10 * MS) == PD_JUMP);
	CHECK_U64(counter_uj(&c), 0);
	/* 1 J in 20 ms since the start is 50 W: fine against the last good reading */
	CHECK(counter_update(&c, 1000000, 20 * MS) == PD_OK);
	CHECK_U64(counter_uj(&c), 1000000);
}

/* MSR-style units: ticks of 1/2^14 J, 32-bit counter; published uJ never go backwards or lose
 * fractions. */
static void test_msr_units(void)
{
	struct pd_counter c;
	counter_init(&c, 1ull << 32, 1000000, 1ull << 14, MAX_UW);
	counter_update(&c, 0xfffffff0u, 0);
	CHECK(counter_update(&c, 0x10, S) == PD_WRAP);
	CHECK_U64(c.total_ticks, 0xfffffff0ull + 0x20);
	/* (2^32 + 0x10) * 1e6 / 2^14 = 262144000976.5625 -> floor */
	CHECK_U64(counter_uj(&c), 262144000976ull);
	CHECK_U64(counter_range_uj(&c), 262143999938ull); /* (2^32 - 1) * 1e6 / 2^14 */
	uint64_t prev = counter_uj(&c);
	for (int i = 1; i <= 100; i++) {
		counter_update(&c, 0x10 + (uint64_t)i, S + (uint64_t)i * MS);
		CHECK(counter_uj(&c) >= prev);
		prev = counter_uj(&c);
	}
	CHECK_U64(counter_uj(&c),
		  (uint64_t)((unsigned __int128)(0xfffffff0ull + 0x20 + 100) * 1000000 >> 14));
}

static void test_integ_trapezoid(void)
{
	struct pd_integrator in;
	integ_init(&in, MAX_UW, 10 * S);
	uint64_t t0 = 1700000000ull * S, m0 = 5 * S;
	CHECK(integ_add(&in, 10000000, t0, m0) == PD_FIRST); /* 10 W */
	CHECK_U64(in.total_uj, 0);
	CHECK(integ_add(&in, 30000000, t0 + 100 * MS, m0 + 100 * MS + 37000) == PD_OK);
	/* (10 + 30) / 2 W * 0.1 s = 2 J: the grid step, not the monotonic one, counts */
	CHECK_U64(in.total_uj, 2000000);
	CHECK(integ_add(&in, 30000000, t0 + 200 * MS, m0 + 200 * MS) == PD_OK);
	CHECK_U64(in.total_uj, 5000000);
}

/* 1 uW for 1 ms is 1 nJ: a thousand of them make 1 uJ, rounding never loses it. */
static void test_integ_remainder(void)
{
	struct pd_integrator in;
	integ_init(&in, MAX_UW, 10 * S);
	integ_add(&in, 1, 0, 1);
	for (uint64_t i = 1; i <= 999; i++)
		integ_add(&in, 1, i * MS, 1 + i * MS);
	CHECK_U64(in.total_uj, 0);
	integ_add(&in, 1, 1000 * MS, 1 + 1000 * MS);
	CHECK_U64(in.total_uj, 1);
}

static void test_integ_rejects(void)
{
	struct pd_integrator in;
	integ_init(&in, 100000000ull, 2 * S); /* 100 W, gaps over 2 s not bridged */
	integ_add(&in, 50000000, 0, 1);
	CHECK(integ_add(&in, 200000000, S, 1 + S) == PD_RANGE); /* 200 W is beyond 100 W */
	CHECK_U64(in.total_uj, 0);
	/* the rejected reading is bridged by the next good one: 50 W over 1.5 s */
	CHECK(integ_add(&in, 50000000, 1500 * MS, 1 + 1500 * MS) == PD_OK);
	CHECK_U64(in.total_uj, 75000000);
	CHECK(integ_add(&in, 50000000, 1500 * MS, 1 + 1500 * MS) == PD_STALE);
	/* 5 s without a reading is too long to interpolate */
	CHECK(integ_add(&in, 50000000, 6500 * MS, 1 + 6500 * MS) == PD_REBASED);
	CHECK_U64(in.total_uj, 75000000);
	CHECK(integ_add(&in, 50000000, 7500 * MS, 1 + 7500 * MS) == PD_OK);
	CHECK_U64(in.total_uj, 125000000);
}

/* Every source bridges max(10 intervals, 10 s): at 250 ms a reading lost for 4 s is bridged (it
 * was rebased after 2.5 s in the nvml source, dropping 4 s of a GPU's power). */
static void test_integ_bridge(void)
{
	CHECK_U64(integ_bridge_ns(250 * MS), 10 * S);
	CHECK_U64(integ_bridge_ns(S), 10 * S);
	CHECK_U64(integ_bridge_ns(1500 * MS), 15 * S);
	CHECK_U64(integ_bridge_ns(UINT64_MAX / 4), UINT64_MAX);
	struct pd_integrator in;
	integ_init(&in, MAX_UW, integ_bridge_ns(250 * MS));
	integ_add(&in, 100000000, 0, 1); /* 100 W */
	CHECK(integ_add(&in, 100000000, 250 * MS, 1 + 250 * MS) == PD_OK);
	CHECK(integ_add(&in, 100000000, 4250 * MS, 1 + 4250 * MS) == PD_OK);
	CHECK_U64(in.total_uj, 425000000);
	CHECK(integ_add(&in, 100000000, 14500 * MS, 1 + 14500 * MS) == PD_REBASED);
	CHECK_U64(in.total_uj, 425000000);
}

/* The wall clock stepped back an hour between readings: the monotonic step is used. */
static void test_integ_clock_step(void)
{
	struct pd_integrator in;
	integ_init(&in, MAX_UW, 10 * S);
	integ_add(&in, 10000000, 7200 * S, 100 * S);
	CHECK(integ_add(&in, 10000000, 3600 * S + S, 101 * S) == PD_OK);
	CHECK_U64(in.total_uj, 10000000);
	/* and forward by an hour */
	CHECK(integ_add(&in, 10000000, 7201 * S + S, 102 * S) == PD_OK);
	CHECK_U64(in.total_uj, 20000000);
}

static const struct unit_case cases[] = {
    {"sum of increments across wraps is exact", test_wrap_sum_exact},
    {"wrap from the top value to 0", test_exact_wrap_to_zero},
    {"a power reading lost for max(10 intervals, 10 s) is bridged", test_integ_bridge},
    {"value beyond the range rejected", test_out_of_range},
    {"backwards glitch rejected, nothing lost", test_backwards_glitch},
    {"counter restart confirmed by two readings", test_backwards_restart},
    {"a stuck bad value never becomes the baseline", test_stuck_glitch},
    {"forward jump beyond max power rejected", test_forward_jump},
    {"msr energy units and 32-bit wrap", test_msr_units},
    {"trapezoids over grid steps", test_integ_trapezoid},
    {"sub-microjoule remainder kept", test_integ_remainder},
    {"power out of range, stale, long gaps", test_integ_rejects},
    {"wall clock stepped between readings", test_integ_clock_step},
};

UNIT_MAIN(cases)
