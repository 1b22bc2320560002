/*
 * Chores (lib/daemon.c): periodic work that rides on the messages a stage
 * handles, run from a one-shot timer only when none comes. Each case waits for
 * conditions (the monotonic clock past a due time, a count reached in the
 * loop), never for a duration.
 */
#include <getopt.h>
#include <stddef.h>
#include <unistd.h>

#include "clock.h"
#include "config.h"
#include "daemon.h"
#include "unit.h"

#define MS 1000000ull
#define HOUR (3600ull * 1000000000ull)

struct test_conf {
	char *pub;
};

static const struct wb_conf_key test_keys[] = {
    {"pub", WB_CONF_STR, offsetof(struct test_conf, pub), "ipc://%r/chore.sock", 0, 0, NULL,
     "endpoint"},
};

static const struct wb_stage test_stage = {
    .name = "chore",
    .summary = "chore test",
    .keys = test_keys,
    .nkeys = 1,
    .conf_size = sizeof(struct test_conf),
};

static char dir[256];

static struct wb_daemon *daemon_new(void)
{
	unit_tmp(dir, sizeof(dir), "wb-chore-XXXXXX");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		exit(1);
	}
	char *argv[] = {"wattbus-chore", "--runtime_dir", dir, "--log_level", "error", NULL};
	optind = 0; /* getopt_long again from the start: one daemon per case */
	return wb_daemon_new(&test_stage, 5, argv);
}

static void daemon_free(struct wb_daemon **d)
{
	wb_daemon_destroy(d);
	char sock[300];
	snprintf(sock, sizeof(sock), "%s/chore.sock", dir);
	unlink(sock);
	rmdir(dir);
}

struct runs {
	int n, late, fail_first;
	uint64_t at[4]; /* wb_mono_ns of the first runs */
};

static int count_run(void *arg, bool late)
{
	struct runs *r = arg;
	if (r->n < 4)
		r->at[r->n] = wb_mono_ns();
	r->n++;
	r->late += late;
	if (r->fail_first && r->n == 1)
		return -1;
	return 0;
}

/* Until the chore is due: the monotonic clock, not a sleep of a guessed length. */
static void wait_due(const struct wb_chore *c)
{
	while (wb_mono_ns() < c->next_ns)
		usleep(200);
}

/* Run the loop until r has n runs (or 20 s pass: a failure, the checks say which). */
struct until {
	struct runs *r;
	int n;
	uint64_t give_up;
};

static int check_until(zloop_t *loop, int timer_id, void *arg)
{
	struct until *u = arg;
	return u->r->n >= u->n || wb_mono_ns() > u->give_up ? -1 : 0;
}

static void loop_until(struct wb_daemon *d, struct runs *r, int n)
{
	struct until u = {r, n, wb_mono_ns() + 20000 * MS};
	int id = zloop_timer(wb_daemon_loop(d), 1, 0, check_until, &u);
	zloop_start(wb_daemon_loop(d));
	zloop_timer_end(wb_daemon_loop(d), id);
}

/* A poke before the chore is due does not run it; it arms the late timer, once. */
static void test_early_poke_arms(void)
{
	struct wb_daemon *d = daemon_new();
	struct runs r = {0};
	struct wb_chore c;
	CHECK(wb_chore_init(&c, d, HOUR, HOUR, true, false, count_run, &r) == 0);
	int armed = c.late_id;
	CHECK(armed >= 0); /* pending from the start: a silence still runs it */
	wb_chore_poke(&c, false);
	CHECK_U64(r.n, 0);
	CHECK(c.late_id == armed);
	wb_chore_end(&c);
	CHECK(c.late_id < 0);
	wb_chore_poke(&c, true); /* ended: nothing runs, nothing is armed */
	CHECK_U64(r.n, 0);
	CHECK(c.late_id < 0);
	daemon_free(&d);
}

/* Due, a poke runs it from the message; housekeeping stays pending with its timer armed
 * for a silence, a change-driven chore runs only after a change and then needs no timer. */
static void test_due_poke_runs(void)
{
	struct wb_daemon *d = daemon_new();
	struct runs r = {0}, q = {0};
	struct wb_chore house, change;
	wb_chore_init(&house, d, 1 * MS, HOUR, true, false, count_run, &r);
	wb_chore_init(&change, d, 1 * MS, HOUR, false, false, count_run, &q);
	CHECK(change.late_id < 0); /* nothing pending: no timer */
	int armed = house.late_id;
	wait_due(&house);
	wb_chore_poke(&house, false);
	CHECK_U64(r.n, 1);
	CHECK_U64(r.late, 0);
	CHECK(house.pending);
	CHECK(house.late_id >= 0 && house.late_id != armed); /* armed again, for the next silence */
	wait_due(&change);
	wb_chore_poke(&change, false);
	CHECK_U64(q.n, 0); /* no change: no run */
	wb_chore_poke(&change, true);
	CHECK_U64(q.n, 1);
	CHECK(!change.pending);
	CHECK(change.late_id < 0);
	wb_chore_end(&house);
	daemon_free(&d);
}

/* Without messages the late timer runs it (late), and a housekeeping chore again after. */
static void test_silence_runs_late(void)
{
	struct wb_daemon *d = daemon_new();
	struct runs r = {0};
	struct wb_chore c;
	wb_chore_init(&c, d, 5 * MS, 5 * MS, true, false, count_run, &r);
	loop_until(d, &r, 2);
	CHECK_U64(r.n, 2);
	CHECK_U64(r.late, 2);
	/* the second every + late after the first (zloop counts whole milliseconds): a lower bound
	 */
	CHECK(r.at[1] - r.at[0] >= 9 * MS);
	wb_chore_end(&c);
	daemon_free(&d);
}

/* A run that fails is tried again from the timer, messages or not. */
static void test_failure_retried(void)
{
	struct wb_daemon *d = daemon_new();
	struct runs r = {.fail_first = 1};
	struct wb_chore c;
	wb_chore_init(&c, d, 1 * MS, HOUR, false, false, count_run, &r);
	wait_due(&c);
	wb_chore_poke(&c, true);
	CHECK_U64(r.n, 1);
	CHECK(c.pending);
	CHECK(c.late_id >= 0); /* every_ns on, not the hour of late_ns */
	loop_until(d, &r, 2);
	CHECK_U64(r.n, 2);
	CHECK_U64(r.late, 1);
	CHECK(!c.pending);
	wb_chore_end(&c);
	daemon_free(&d);
}

struct saves {
	int n;
	bool sync;
};

static int record_save(void *arg, bool sync)
{
	struct saves *sv = arg;
	sv->n++;
	sv->sync = sync;
	return 0;
}

static int check_saves(zloop_t *loop, int timer_id, void *arg)
{
	struct saves *sv = arg;
	return sv->n >= 1 ? -1 : 0;
}

/* The checkpoint as a chore: the first save (from the timer) is fsync'd, one from a message within
 * the minute is not; an early change waits for its timer; the stop saves what is pending, fsync'd,
 * and nothing else. */
static void test_checkpoint(void)
{
	struct wb_daemon *d = daemon_new();
	struct saves sv = {0}, quiet = {0};
	struct wb_checkpoint cp, slow;
	wb_checkpoint_init(&cp, d, 1 * MS, true, record_save, &sv);
	int id = zloop_timer(wb_daemon_loop(d), 1, 0, check_saves, &sv);
	zloop_start(wb_daemon_loop(d));
	zloop_timer_end(wb_daemon_loop(d), id);
	CHECK_U64(sv.n, 1);
	CHECK(sv.sync);
	wait_due(&cp.chore);
	wb_checkpoint_changed(&cp);
	CHECK_U64(sv.n, 2);
	CHECK(!sv.sync);
	CHECK(cp.chore.late_id < 0); /* nothing pending: no timer */
	CHECK(wb_checkpoint_stop(&cp) == 0);
	CHECK_U64(sv.n, 2);

	wb_checkpoint_init(&slow, d, HOUR, false, record_save, &quiet);
	CHECK(slow.chore.late_id < 0);
	wb_checkpoint_changed(&slow); /* early: its timer, no save */
	CHECK_U64(quiet.n, 0);
	CHECK(slow.chore.late_id >= 0);
	CHECK(wb_checkpoint_stop(&slow) == 0);
	CHECK_U64(quiet.n, 1);
	CHECK(quiet.sync);
	CHECK(slow.chore.late_id < 0);
	CHECK(wb_checkpoint_stop(&slow) == 0); /* nothing changed since */
	CHECK_U64(quiet.n, 1);
	daemon_free(&d);
}

static const struct unit_case cases[] = {
    {"early_poke_arms", test_early_poke_arms},
    {"due_poke_runs", test_due_poke_runs},
    {"silence_runs_late", test_silence_runs_late},
    {"failure_retried", test_failure_retried},
    {"checkpoint", test_checkpoint},
};
UNIT_MAIN(cases)
