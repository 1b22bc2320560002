/*
 * Pipeline health from stat messages: counters carried across stage restarts
 * (new epochs) stay monotonic; inconsistent stat messages change nothing.
 */
#include "unit.h"

#include "codec.h"
#include "../../exportd/exportd.h"

#define S 1000000000ull

static struct wb_stat stat_msg(const char *stage, uint64_t epoch, uint64_t frames_in,
			       uint64_t rejected)
{
	struct wb_stat s = {0};
	snprintf(s.env.host, sizeof s.env.host, "node-a");
	snprintf(s.env.src, sizeof s.env.src, "%s", stage);
	snprintf(s.stage, sizeof s.stage, "%s", stage);
	s.env.epoch = epoch;
	s.frames_in = frames_in;
	s.rejected = rejected;
	return s;
}

static void test_mono(void)
{
	struct mono m = {0};
	mono_update(&m, 10, false);
	mono_update(&m, 15, false);
	CHECK_U64(mono_value(&m), 15);
	mono_update(&m, 3, true); /* restarted: 15 before, 3 since */
	CHECK_U64(mono_value(&m), 18);
	mono_update(&m, 7, false);
	CHECK_U64(mono_value(&m), 22);
	mono_update(&m, 2, false); /* went back within an epoch: a reset too */
	CHECK_U64(mono_value(&m), 24);
}

static void test_restart_keeps_counting(void)
{
	struct stages *st = stages_new(4);
	struct wb_counter rej1[] = {{"type", 4}, {"bound", 1}};
	struct wb_counter ctr1[] = {{"slots", 50}};
	struct wb_stat s = stat_msg("alignd", 1, 100, 5);
	s.rejected_by = rej1;
	s.n_rejected_by = 2;
	s.counters = ctr1;
	s.n_counters = 1;
	CHECK(stages_add(st, &s, 10 * S, NULL) == 0);
	/* alignd restarts: new epoch, small numbers, and no "bound" rejection yet */
	struct wb_counter rej2[] = {{"type", 1}};
	struct wb_counter ctr2[] = {{"slots", 2}};
	s = stat_msg("alignd", 2, 6, 1);
	s.rejected_by = rej2;
	s.n_rejected_by = 1;
	s.counters = ctr2;
	s.n_counters = 1;
	CHECK(stages_add(st, &s, 20 * S, NULL) == 0);
	CHECK_U64(st->n, 1);
	struct stage_rec *r = st->recs[0];
	CHECK_U64(mono_value(&r->frames_in), 106);
	CHECK_U64(mono_value(&r->rejected), 6);
	CHECK_U64(r->starts, 2);
	CHECK_U64(r->last_recv_ns, 20 * S);
	CHECK_U64(r->nreasons, 2);
	CHECK_STR(r->reasons[0].name, "type");
	CHECK_U64(mono_value(&r->reasons[0].m), 5);
	CHECK_STR(r->reasons[1].name, "bound");
	CHECK_U64(mono_value(&r->reasons[1].m), 1);
	CHECK_U64(mono_value(&r->counters[0].m), 52);
	/* same epoch again: plain update */
	s = stat_msg("alignd", 2, 9, 1);
	CHECK(stages_add(st, &s, 25 * S, NULL) == 0);
	CHECK_U64(mono_value(&r->frames_in), 109);
	CHECK_U64(r->starts, 2);
	stages_destroy(&st);
	CHECK(st == NULL);
}

static void test_bad_stats(void)
{
	struct stages *st = stages_new(2);
	enum stages_reason why;
	struct wb_counter dup[] = {{"type", 1}, {"type", 2}};
	struct wb_stat s = stat_msg("estimd", 1, 10, 3);
	s.rejected_by = dup;
	s.n_rejected_by = 2;
	CHECK(stages_add(st, &s, S, &why) == -1);
	CHECK(why == ST_R_DUP_NAME);
	struct wb_counter over[] = {{"type", 2}, {"bound", 2}};
	s.rejected_by = over; /* 4 by reason but 3 in all */
	CHECK(stages_add(st, &s, S, &why) == -1);
	CHECK(why == ST_R_SUM);
	CHECK_U64(st->n, 0);
	CHECK_U64(st->rejected[ST_R_DUP_NAME], 1);
	CHECK_U64(st->rejected[ST_R_SUM], 1);
	/* the producer table is bounded */
	const char *names[] = {"powerd", "usaged", "alignd"};
	for (int i = 0; i < 3; i++) {
		s = stat_msg(names[i], 1, 1, 0);
		CHECK(stages_add(st, &s, S, &why) == (i < 2 ? 0 : -1));
	}
	CHECK(why == ST_R_PRODUCERS);
	CHECK_STR(stages_reason_name(why), "too_many_producers");
	stages_destroy(&st);
}

static const struct unit_case cases[] = {
    {"a counter survives restarts and resets", test_mono},
    {"stage counters keep counting across a restart", test_restart_keeps_counting},
    {"inconsistent stat messages change nothing", test_bad_stats},
};

UNIT_MAIN(cases)
