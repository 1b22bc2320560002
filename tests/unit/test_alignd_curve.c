/*
 * alignd's energy curve and carry: exact interpolation, extrapolation, powerd
 * restarts bridged or flagged, pruning, and integer slot energies that sum to
 * the measured whole.
 */
#include "../../alignd/alignd.h"
#include "unit.h"

#define S 1000000000ull
#define RANGE 262143328850ull /* a real RAPL package max_energy_range_uj */

static struct curve *mk(void)
{
	struct curve *c = curve_new(1, 1024);
	CHECK(c != NULL);
	return c;
}

static void interpolates_exactly(void)
{
	struct curve *c = mk();
	uint64_t e;
	CHECK(curve_at(c, 5, &e) == CURVE_NONE);
	CHECK(curve_add(c, 10 * S, 1, 1000000, 0, 0, NULL) == CURVE_APPENDED);
	CHECK(curve_add(c, 11 * S, 1, 4000000, 0, 0, NULL) == CURVE_APPENDED);
	CHECK(curve_add(c, 13 * S, 1, 4000001, 0, 0, NULL) == CURVE_APPENDED);
	CHECK(curve_at(c, 10 * S, &e) == CURVE_INSIDE);
	CHECK_U64(e, 1000000);
	CHECK(curve_at(c, 10 * S + S / 2, &e) == CURVE_INSIDE);
	CHECK_U64(e, 2500000);
	/* S/3 is 333333333 ns: 1e6 + 3e6 * 0.333333333 = 1999999.999, floored. */
	CHECK(curve_at(c, 10 * S + S / 3, &e) == CURVE_INSIDE);
	CHECK_U64(e, 1999999);
	CHECK(curve_at(c, 11 * S, &e) == CURVE_INSIDE);
	CHECK_U64(e, 4000000);
	/* 1 uJ over 2 s: floor keeps the value until the very end. */
	CHECK(curve_at(c, 13 * S - 1, &e) == CURVE_INSIDE);
	CHECK_U64(e, 4000000);
	CHECK(curve_at(c, 13 * S, &e) == CURVE_INSIDE);
	CHECK_U64(e, 4000001);
	CHECK(curve_at(c, 9 * S, &e) == CURVE_BEFORE);
	CHECK_U64(e, 1000000);
	curve_destroy(&c);
	CHECK(c == NULL);
}

static void extrapolates_from_last_rate(void)
{
	struct curve *c = mk();
	uint64_t e;
	curve_add(c, 1 * S, 7, 500, 0, 0, NULL);
	CHECK(curve_at(c, 2 * S, &e) == CURVE_AFTER); /* one sample: no rate, flat */
	CHECK_U64(e, 500);
	curve_add(c, 2 * S, 7, 100000500, 0, 0, NULL); /* 100 W */
	CHECK(curve_at(c, 3 * S + S / 4, &e) == CURVE_AFTER);
	CHECK_U64(e, 100000500 + 125000000);
	curve_destroy(&c);
}

static void same_epoch_counter_adds_up(void)
{
	struct curve *c = mk();
	uint64_t d;
	curve_add(c, 1 * S, 7, 2 * RANGE + 100, RANGE, 0, NULL);
	CHECK(curve_add(c, 2 * S, 7, 2 * RANGE + 300, RANGE, 0, &d) == CURVE_APPENDED);
	CHECK_U64(d, 200);
	CHECK(curve_add(c, 2 * S, 7, 2 * RANGE + 900, RANGE, 0, NULL) == CURVE_STALE);
	CHECK(curve_add(c, 1 * S, 7, 2 * RANGE + 900, RANGE, 0, NULL) == CURVE_STALE);
	CHECK_U64(c->n, 2);
	curve_destroy(&c);
}

/* powerd restarts from the hardware reading: lower than its last value by the wraps it had added.
 */
static void restart_bridged_through_range(void)
{
	struct curve *c = mk();
	uint64_t e, d;
	curve_add(c, 1 * S, 7, 3 * (RANGE + 1) + 1000, RANGE, 0, NULL);
	curve_add(c, 2 * S, 7, 3 * (RANGE + 1) + 2000, RANGE, 0, NULL);
	/* Down 3 s; the hardware counter (0..RANGE, so powerd added RANGE + 1 per wrap)
	 * went from 2000 to 5000. */
	CHECK(curve_add(c, 5 * S, 9, 5000, RANGE, 0, &d) == CURVE_BRIDGED);
	CHECK_U64(d, 3000);
	CHECK(curve_add(c, 6 * S, 9, 6000, RANGE, 0, &d) == CURVE_APPENDED);
	CHECK_U64(d, 1000);
	CHECK(curve_at(c, 6 * S, &e) == CURVE_INSIDE);
	CHECK_U64(e, 3 * (RANGE + 1) + 1000 + 1000 + 3000 + 1000);
	CHECK(!curve_gap_in(c, 0, 10 * S));
	CHECK_U64(curve_covered_ns(c, 0, 10 * S), 5 * S);
	curve_destroy(&c);
}

/* The hardware reading may be the range itself: 0..RANGE inclusive, not off by one per wrap. */
static void restart_bridged_at_the_top_of_the_range(void)
{
	struct curve *c = mk();
	uint64_t d;
	curve_add(c, 1 * S, 7, 2 * (RANGE + 1) + RANGE - 10, RANGE, 0, NULL);
	CHECK(curve_add(c, 2 * S, 9, RANGE, RANGE, 0, &d) == CURVE_BRIDGED);
	CHECK_U64(d, 10);
	curve_destroy(&c);
}

static void restart_bridged_without_wraps(void)
{
	struct curve *c = mk();
	uint64_t d;
	curve_add(c, 1 * S, 7, 1000, 0, 0, NULL); /* a meter that does not wrap */
	CHECK(curve_add(c, 3 * S, 8, 1500, 0, 0, &d) == CURVE_BRIDGED);
	CHECK_U64(d, 500);
	curve_destroy(&c);
}

static void discontinuity_is_a_flat_gap(void)
{
	struct curve *c = mk();
	uint64_t e, d;
	curve_add(c, 1 * S, 7, (RANGE + 1) + 5000, RANGE, 0, NULL);
	curve_add(c, 2 * S, 7, (RANGE + 1) + 6000, RANGE, 0, NULL);
	/* New epoch at 10 (below 6000 = the old value modulo the range): a reset, not a
	 * continuation. */
	CHECK(curve_add(c, 4 * S, 8, 10, RANGE, 0, &d) == CURVE_DISCONTINUITY);
	CHECK_U64(d, 0);
	CHECK(curve_add(c, 5 * S, 8, 1010, RANGE, 0, &d) == CURVE_APPENDED);
	CHECK_U64(d, 1000);
	CHECK(curve_at(c, 3 * S, &e) == CURVE_INSIDE);
	CHECK_U64(e, (RANGE + 1) + 6000); /* flat across the gap */
	CHECK(curve_at(c, 5 * S, &e) == CURVE_INSIDE);
	CHECK_U64(e, (RANGE + 1) + 7000);
	CHECK(curve_gap_in(c, 3 * S, 6 * S));
	CHECK(curve_gap_in(c, 1 * S, 3 * S));
	CHECK(!curve_gap_in(c, 4 * S, 5 * S));
	CHECK(!curve_gap_in(c, 0, 2 * S));
	/* [0, 6]: samples span [1, 5], the gap [2, 4] is not covered. */
	CHECK_U64(curve_covered_ns(c, 0, 6 * S), 2 * S);
	/* Extrapolating right after a gap has no rate: flat. */
	struct curve *g = mk();
	curve_add(g, 1 * S, 1, 100, 0, 0, NULL);
	curve_add(g, 2 * S, 1, 200, 0, 0, NULL);
	curve_add(g, 3 * S, 2, 50, 0, 0, NULL);
	CHECK(curve_at(g, 4 * S, &e) == CURVE_AFTER);
	CHECK_U64(e, 200);
	curve_destroy(&g);
	curve_destroy(&c);
}

static void counter_back_within_epoch_is_a_discontinuity(void)
{
	struct curve *c = mk();
	curve_add(c, 1 * S, 7, 5000, 0, 0, NULL);
	CHECK(curve_add(c, 2 * S, 7, 4000, 0, 0, NULL) == CURVE_DISCONTINUITY);
	CHECK(curve_add(c, 3 * S, 7, 4500, 0, 0, NULL) == CURVE_APPENDED);
	uint64_t e;
	curve_at(c, 3 * S, &e);
	CHECK_U64(e, 5500);
	curve_destroy(&c);
}

static void bridge_power_limit(void)
{
	struct curve *c = mk();
	curve_add(c, 1 * S, 7, 1000000, 0, 0, NULL);
	/* 500 J in 2 s is 250 W: over a 200 W limit, so not bridged. */
	CHECK(curve_add(c, 3 * S, 8, 501000000, 0, 200, NULL) == CURVE_DISCONTINUITY);
	struct curve *b = mk();
	curve_add(b, 1 * S, 7, 1000000, 0, 0, NULL);
	CHECK(curve_add(b, 3 * S, 8, 301000000, 0, 200, NULL) == CURVE_BRIDGED); /* 150 W */
	curve_destroy(&b);
	curve_destroy(&c);
}

static void prune_keeps_what_boundaries_need(void)
{
	struct curve *c = mk();
	for (uint64_t i = 0; i < 10; i++)
		curve_add(c, i * S, 1, i * 1000, 0, 0, NULL);
	curve_prune(c, 4 * S + S / 2);
	CHECK_U64(c->n, 6); /* 4..9 */
	uint64_t e;
	CHECK(curve_at(c, 4 * S + S / 2, &e) == CURVE_INSIDE);
	CHECK_U64(e, 4500);
	curve_prune(c, 0); /* nothing older to drop */
	CHECK_U64(c->n, 6);
	curve_prune(c, 100 * S); /* the last sample always stays */
	CHECK_U64(c->n, 1);
	CHECK_U64(curve_last_t(c), 9 * S);
	/* Coverage still starts at the first sample ever. */
	curve_add(c, 10 * S, 1, 10000, 0, 0, NULL);
	CHECK_U64(curve_covered_ns(c, 0, 10 * S), 10 * S);
	curve_destroy(&c);
}

static void cap_drops_oldest(void)
{
	struct curve *c = curve_new(1, 64);
	for (uint64_t i = 0; i < 1000; i++)
		CHECK(curve_add(c, (i + 1) * S, 1, i * 10, 0, 0, NULL) == CURVE_APPENDED);
	CHECK(c->n <= 64);
	CHECK_U64(curve_last_t(c), 1000 * S);
	uint64_t e;
	CHECK(curve_at(c, 999 * S + S / 2, &e) == CURVE_INSIDE);
	CHECK_U64(e, 9985);
	curve_destroy(&c);
}

static void carry_sums_exactly(void)
{
	/* 10 uJ over 3 ns sampled at 0 and 3: boundaries at 1 and 2 fall on fractions. */
	struct curve *c = mk();
	curve_add(c, 0, 1, 1000, 0, 0, NULL);
	curve_add(c, 3, 1, 1010, 0, 0, NULL);
	struct carry cy = {0};
	uint64_t e, sum = 0;
	curve_at(c, 0, &e);
	carry_set(&cy, c->id, e, false);
	uint64_t parts[3];
	for (uint64_t t = 1; t <= 3; t++) {
		curve_at(c, t, &e);
		parts[t - 1] = carry_take(&cy, e, false);
		sum += parts[t - 1];
	}
	CHECK_U64(parts[0], 3); /* 3.33 */
	CHECK_U64(parts[1], 3); /* 6.66 - 3 */
	CHECK_U64(parts[2], 4); /* 10 - 6 */
	CHECK_U64(sum, 10);
	curve_destroy(&c);
}

static void carry_holds_back_an_overshoot(void)
{
	struct carry cy = {0};
	carry_set(&cy, 1, 1000, false);
	CHECK_U64(carry_take(&cy, 1500, true), 500); /* extrapolated */
	CHECK(cy.ahead);
	CHECK_U64(carry_take(&cy, 1400, false), 0); /* the measurement came in lower */
	CHECK(cy.ahead);
	CHECK_U64(carry_take(&cy, 1700, false), 200);
	CHECK(!cy.ahead);
	CHECK_U64(cy.emitted_uj, 1700); /* 500 + 0 + 200 = 1700 - 1000 */
}

static const struct unit_case cases[] = {
    {"interpolation is exact and floored", interpolates_exactly},
    {"extrapolation uses the last rate", extrapolates_from_last_rate},
    {"same epoch: deltas, stale samples ignored", same_epoch_counter_adds_up},
    {"restart bridged through max_energy_range_uj", restart_bridged_through_range},
    {"restart bridged with the reading at the top of the range",
     restart_bridged_at_the_top_of_the_range},
    {"restart bridged, meter without wraps", restart_bridged_without_wraps},
    {"discontinuity: flat gap, flagged, not covered", discontinuity_is_a_flat_gap},
    {"counter back within an epoch: discontinuity", counter_back_within_epoch_is_a_discontinuity},
    {"bridge_max_w refuses implausible bridges", bridge_power_limit},
    {"prune keeps the sample before a boundary", prune_keeps_what_boundaries_need},
    {"max_samples drops the oldest", cap_drops_oldest},
    {"carry: remainders move on, sum exact", carry_sums_exactly},
    {"carry: an overshoot is held back", carry_holds_back_an_overshoot},
};

UNIT_MAIN(cases)
