/*
 * lib/follow.c: a consumer's counter following a producer's cumulative total
 * across counts, a total that goes back, a total near the wire's maximum and
 * lost messages. Each case runs a producer that knows the true energy and
 * checks that the consumer's counter holds it once (or, where a rule has to
 * give up energy, exactly what it gives up).
 */
#include "follow.h"
#include "plaus.h"
#include "unit.h"

#define S 1000000000ull
#define J 1000000ull

/* A consumer: its counter and the follower of one upstream total. */
struct consumer {
	struct wb_follow f;
	uint64_t counter_uj;
	enum wb_follow_how how;
};

/* One message: the producer's total in count, the slot's own energy, one second after the last. */
static uint64_t take(struct consumer *c, uint64_t count, uint64_t total_uj, uint64_t own_uj)
{
	struct wb_follow_step s = {count, total_uj, own_uj, S, 5000};
	uint64_t add = wb_follow_step(&c->f, &s, &c->how);
	c->counter_uj = wb_sat_add(c->counter_uj, add, NULL);
	return add;
}

static void counts(void)
{
	uint64_t a = wb_follow_count("estimd", 100), b = wb_follow_count("estimd", 101);
	CHECK(a != 0 && b != 0 && a != b);
	CHECK(wb_follow_count("estimd-b", 100) != a); /* another producer, same total_epoch */
	CHECK_U64(wb_follow_count("estimd", 0), 0);   /* no totals */
	CHECK_U64(wb_follow_count("estimd", 100), a);

	struct consumer c = {0};
	/* The first step: its own energy (the count may be days old). */
	CHECK_U64(take(&c, a, 50 * J, 10 * J), 10 * J);
	CHECK(c.how == WB_FOLLOW_FIRST);
	/* Same count: the difference. */
	CHECK_U64(take(&c, a, 60 * J, 10 * J), 10 * J);
	CHECK(c.how == WB_FOLLOW_DIFF);
	/* A new count (the producer restarted without its state): its own energy, not all of
	 * it, and the next step of the new count is diffed with it. */
	CHECK_U64(take(&c, b, 300 * J, 7 * J), 7 * J);
	CHECK(c.how == WB_FOLLOW_NEW_COUNT);
	CHECK_U64(take(&c, b, 309 * J, 9 * J), 9 * J);
	CHECK(c.how == WB_FOLLOW_DIFF);
	/* The old count back again (a second producer taking turns): never diffed across. */
	CHECK_U64(take(&c, a, 80 * J, 5 * J), 5 * J);
	CHECK(c.how == WB_FOLLOW_NEW_COUNT);
	CHECK_U64(c.counter_uj, (10 + 10 + 7 + 9 + 5) * J);
	/* No total: its own energy, and the baseline is forgotten, so what the total did
	 * meanwhile is not counted again. */
	CHECK_U64(take(&c, 0, 0, 4 * J), 4 * J);
	CHECK(c.how == WB_FOLLOW_NONE);
	CHECK(!c.f.have);
	CHECK_U64(take(&c, a, 90 * J, 6 * J), 6 * J);
	CHECK(c.how == WB_FOLLOW_FIRST);
	CHECK_STR(wb_follow_how_name(WB_FOLLOW_BACK), "went back");
}

/*
 * A producer killed after publishing past its last checkpoint resumes from it: the
 * total goes back. Its energy since the checkpoint was counted once; the consumer
 * counts the new energy from the first step on and nothing twice.
 */
static void goes_back(void)
{
	struct consumer c = {0};
	uint64_t n = wb_follow_count("estimd", 7), total = 0;
	for (int k = 0; k < 5; k++) { /* 2 J a slot; checkpoint after slot 2 */
		total += 2 * J;
		take(&c, n, total, 2 * J);
	}
	uint64_t checkpoint = 6 * J;
	CHECK_U64(c.counter_uj, 10 * J);
	/* Resumed at 6 J; the next slot draws 3 J: total 9 J, below the 10 J told before. */
	CHECK_U64(take(&c, n, checkpoint + 3 * J, 3 * J), 3 * J);
	CHECK(c.how == WB_FOLLOW_BACK);
	/* Onwards by differences from the new baseline: a hold at 10 J would add 2 J here,
	 * losing 3 J; adding the whole total would count 6 J twice. */
	CHECK_U64(take(&c, n, checkpoint + 3 * J + 5 * J, 5 * J), 5 * J);
	CHECK(c.how == WB_FOLLOW_DIFF);
	CHECK_U64(c.counter_uj, 10 * J + 3 * J + 5 * J);
}

/*
 * Totals do not wrap on the wire: one near 2^63 followed by a small one went back
 * (never "max - last + new"), and a counter at the wire's maximum stays there.
 */
static void wrap(void)
{
	struct consumer c = {0};
	uint64_t n = wb_follow_count("vmpub", 3);
	take(&c, n, WB_WIRE_MAX - 2 * J, 1 * J);
	CHECK_U64(take(&c, n, WB_WIRE_MAX - 1 * J, 1 * J), 1 * J);
	CHECK_U64(take(&c, n, 5 * J, 2 * J), 2 * J); /* not the 1 J to the top and the 5 J */
	CHECK(c.how == WB_FOLLOW_BACK);
	CHECK_U64(c.counter_uj, 4 * J);
	/* The consumer's counter saturates instead of wrapping to 0. */
	c.counter_uj = WB_WIRE_MAX - 1;
	take(&c, n, 10 * J, 5 * J);
	CHECK_U64(c.counter_uj, WB_WIRE_MAX);
	take(&c, n, 11 * J, 1 * J);
	CHECK_U64(c.counter_uj, WB_WIRE_MAX);
}

/*
 * Lost messages within one count cost nothing: the difference holds them. A
 * difference past the bound over the time since the last step (a hostile or
 * broken producer) is not trusted: the step's own energy counts.
 */
static void gap(void)
{
	struct consumer c = {0};
	uint64_t n = wb_follow_count("estimd", 9);
	take(&c, n, 1 * J, 1 * J);
	/* three slots of 1 J lost, the fourth arrives 4 s after the last step */
	struct wb_follow_step s = {n, 5 * J, 1 * J, 4 * S, 5000};
	enum wb_follow_how how;
	CHECK_U64(wb_follow_step(&c.f, &s, &how), 4 * J);
	CHECK(how == WB_FOLLOW_DIFF);
	/* 2^62 uJ further in 1 s is not 5 kW: the slot's own 1 J, and the baseline moves. */
	s = (struct wb_follow_step){n, 5 * J + (1ull << 62), 1 * J, S, 5000};
	CHECK_U64(wb_follow_step(&c.f, &s, &how), 1 * J);
	CHECK(how == WB_FOLLOW_IMPLAUSIBLE);
	s = (struct wb_follow_step){n, 7 * J + (1ull << 62), 2 * J, S, 5000};
	CHECK_U64(wb_follow_step(&c.f, &s, &how), 2 * J);
	CHECK(how == WB_FOLLOW_DIFF);
	/* At the bound exactly it is trusted (5 kJ in 1 s), one microjoule past it is not. */
	uint64_t base = c.f.last_uj;
	s = (struct wb_follow_step){n, base + 5000 * J, 0, S, 5000};
	CHECK_U64(wb_follow_step(&c.f, &s, &how), 5000 * J);
	s = (struct wb_follow_step){n, base + 5000 * J + 5000 * J + 1, 0, S, 5000};
	CHECK_U64(wb_follow_step(&c.f, &s, &how), 0);
	CHECK(how == WB_FOLLOW_IMPLAUSIBLE);
	/* No time since the last step: any difference beyond the step's own is past it;
	 * up to the step's own, it is the step. */
	s = (struct wb_follow_step){n, c.f.last_uj + 3 * J, 3 * J, 0, 5000};
	CHECK_U64(wb_follow_step(&c.f, &s, &how), 3 * J);
	CHECK(how == WB_FOLLOW_DIFF);
	s = (struct wb_follow_step){n, c.f.last_uj + 3 * J, 2 * J, 0, 5000};
	CHECK_U64(wb_follow_step(&c.f, &s, &how), 2 * J);
	CHECK(how == WB_FOLLOW_IMPLAUSIBLE);
	/* Without a bound (max_w 0) every forward difference counts. */
	s = (struct wb_follow_step){n, c.f.last_uj + (1ull << 50), 0, S, 0};
	CHECK_U64(wb_follow_step(&c.f, &s, &how), 1ull << 50);
}

static const struct unit_case cases[] = {
    {"counts: differences within one, the step's own across", counts},
    {"a total that goes back is a new baseline", goes_back},
    {"a total near the wire's maximum does not wrap", wrap},
    {"lost messages cost nothing; a step past the bound is not trusted", gap},
};

UNIT_MAIN(cases)
