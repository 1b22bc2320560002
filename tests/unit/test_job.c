/* lib/job.c: results, cancel, deadline, release while running, and the stop's bounded wait. */
#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <unistd.h>

#include "clock.h"
#include "job.h"
#include "unit.h"

static atomic_int made, freed; /* works allocated, works freed */

struct work {
	int fd;		 /* wait for input here (a pipe nobody writes), or -1: compute */
	int in, out;	 /* compute: out = in * 2 */
	int waited;	 /* wb_job_wait_fd's return */
	int why;	 /* its errno */
	atomic_bool *go; /* stubborn: ignore the cancel until *go */
	bool was_stopping;
};

static void free_work(void *arg)
{
	free(arg);
	atomic_fetch_add(&freed, 1);
}

static void run(struct wb_job *job, void *arg)
{
	struct work *w = arg;
	if (w->go) {
		while (!atomic_load(w->go))
			usleep(1000);
	} else if (w->fd >= 0) {
		w->waited = wb_job_wait_fd(job, w->fd, POLLIN, 0);
		w->why = errno;
	} else {
		w->out = w->in * 2;
	}
	w->was_stopping = wb_job_stopping(job);
}

static struct work *work(int fd, int in)
{
	struct work *w = calloc(1, sizeof(*w));
	atomic_fetch_add(&made, 1);
	w->fd = fd;
	w->in = in;
	return w;
}

/* Wait for cond up to 30 s (a loaded machine): never a duration asserted. */
#define WAIT_FOR(cond)                                                                             \
	do {                                                                                       \
		for (int i_ = 0; i_ < 30000 && !(cond); i_++)                                      \
			usleep(1000);                                                              \
	} while (0)

/* A finished job's thread may drop its reference a moment after its owner did, and the last
 * of the two frees the work: a test that counts frees first waits for the earlier tests' works. */
static int settled_frees(void)
{
	WAIT_FOR(atomic_load(&freed) == atomic_load(&made));
	return atomic_load(&freed);
}

static void test_result_on_fd(void)
{
	char err[256];
	int before = settled_frees();
	struct wb_job *j =
	    wb_job_start("double 21", 0, run, work(-1, 21), free_work, err, sizeof err);
	CHECK(j != NULL);
	struct pollfd p = {.fd = wb_job_fd(j), .events = POLLIN};
	CHECK(poll(&p, 1, 30000) == 1);
	CHECK(wb_job_done(j));
	struct work *w = wb_job_arg(j);
	CHECK_U64(w->out, 42);
	CHECK(!w->was_stopping);
	CHECK_STR(wb_job_what(j), "double 21");
	wb_job_release(&j);
	CHECK(j == NULL);
	/* The thread lets go just after the fd turned readable: freed by whichever is last. */
	WAIT_FOR(atomic_load(&freed) == before + 1);
	CHECK_U64(atomic_load(&freed), before + 1);
	wb_job_release(&j); /* NULL-safe */
}

static void test_cancel_wakes_the_wait(void)
{
	int pfd[2];
	CHECK(pipe(pfd) == 0);
	char err[256];
	struct wb_job *j =
	    wb_job_start("wait on a pipe", 0, run, work(pfd[0], 0), free_work, err, sizeof err);
	CHECK(j != NULL);
	CHECK(!wb_job_wait(j, 20 * WB_NS_PER_MS)); /* nobody writes: still waiting */
	CHECK(!wb_job_done(j));
	wb_job_cancel(j);
	CHECK(wb_job_wait(j, 30 * WB_NS_PER_SEC));
	struct work *w = wb_job_arg(j);
	CHECK(w->waited == 0);
	CHECK(w->why == ECANCELED);
	CHECK(w->was_stopping);
	wb_job_release(&j);
	close(pfd[0]);
	close(pfd[1]);
}

static void test_deadline(void)
{
	int pfd[2];
	CHECK(pipe(pfd) == 0);
	char err[256];
	uint64_t t0 = wb_mono_ns();
	struct wb_job *j = wb_job_start("wait 50 ms", 50 * WB_NS_PER_MS, run, work(pfd[0], 0),
					free_work, err, sizeof err);
	CHECK(j != NULL);
	CHECK(wb_job_deadline_ns(j) >= t0 + 50 * WB_NS_PER_MS);
	CHECK(wb_job_wait(j, 30 * WB_NS_PER_SEC));
	struct work *w = wb_job_arg(j);
	CHECK(w->waited == 0);
	CHECK(w->why == ETIMEDOUT);
	CHECK(!wb_job_cancelled(j));
	/* It ended at its deadline, not before. */
	CHECK(wb_mono_ns() >= t0 + 50 * WB_NS_PER_MS);
	wb_job_release(&j);
	close(pfd[0]);
	close(pfd[1]);
}

static void test_ready_fd(void)
{
	int pfd[2];
	CHECK(pipe(pfd) == 0);
	char err[256];
	struct wb_job *j = wb_job_start("read a pipe", 30 * WB_NS_PER_SEC, run, work(pfd[0], 0),
					free_work, err, sizeof err);
	CHECK(write(pfd[1], "x", 1) == 1);
	CHECK(wb_job_wait(j, 30 * WB_NS_PER_SEC));
	CHECK(((struct work *)wb_job_arg(j))->waited == 1);
	wb_job_release(&j);
	close(pfd[0]);
	close(pfd[1]);
}

/* The owner lets go while fn still waits: the job is cancelled and frees its arg at its end. */
static void test_release_while_running(void)
{
	int pfd[2];
	CHECK(pipe(pfd) == 0);
	char err[256];
	int before = settled_frees();
	struct wb_job *j =
	    wb_job_start("abandoned", 0, run, work(pfd[0], 0), free_work, err, sizeof err);
	CHECK(j != NULL);
	wb_job_release(&j);
	WAIT_FOR(atomic_load(&freed) == before + 1 && wb_jobs_running() == 0);
	CHECK_U64(atomic_load(&freed), before + 1);
	CHECK_U64(wb_jobs_running(), 0);
	close(pfd[0]);
	close(pfd[1]);
}

/* Last: the stop is once per process. Two jobs that wait end at the cancel; a stubborn one is
 * left behind at the bound and counted; a job started after the stop is cancelled at once. */
static void test_stop(void)
{
	settled_frees(); /* the earlier tests' works, before this one's are counted */
	int pfd[2];
	CHECK(pipe(pfd) == 0);
	char err[256];
	static atomic_bool go;
	struct work *s = work(-1, 0);
	s->go = &go;
	struct wb_job *a = wb_job_start("a", 0, run, work(pfd[0], 0), free_work, err, sizeof err);
	struct wb_job *b = wb_job_start("b", 0, run, work(pfd[0], 0), free_work, err, sizeof err);
	struct wb_job *c = wb_job_start("stubborn", 0, run, s, free_work, err, sizeof err);
	CHECK(a && b && c);
	CHECK_U64(wb_jobs_running(), 3);
	/* a and b end at their cancel, the stubborn does not: the bound is generous, since a
	 * loaded machine may take a while to run a and b's threads */
	CHECK_U64(wb_jobs_stop(3 * WB_NS_PER_SEC), 1);
	CHECK(wb_job_done(a) && wb_job_done(b) && !wb_job_done(c));
	CHECK(((struct work *)wb_job_arg(a))->why == ECANCELED);
	struct wb_job *late =
	    wb_job_start("late", 0, run, work(pfd[0], 0), free_work, err, sizeof err);
	CHECK(late != NULL);
	CHECK(wb_job_wait(late, 30 * WB_NS_PER_SEC));
	CHECK(((struct work *)wb_job_arg(late))->why == ECANCELED);
	/* a finished job's thread may drop its reference a moment after the job is done: the
	 * last of the two frees the work, so wait for these three before counting c's */
	int released = atomic_load(&freed);
	wb_job_release(&a);
	wb_job_release(&b);
	wb_job_release(&late);
	WAIT_FOR(atomic_load(&freed) == released + 3);
	int before = atomic_load(&freed);
	CHECK_U64(before, released + 3);
	wb_job_release(&c); /* the thread still holds it */
	CHECK_U64(atomic_load(&freed), before);
	atomic_store(&go, true);
	WAIT_FOR(atomic_load(&freed) == before + 1);
	CHECK_U64(atomic_load(&freed), before + 1);
	CHECK_U64(wb_jobs_running(), 0);
	close(pfd[0]);
	close(pfd[1]);
}

static const struct unit_case cases[] = {
    {"a result, collected on the job's fd", test_result_on_fd},
    {"a cancel wakes wb_job_wait_fd", test_cancel_wakes_the_wait},
    {"the deadline ends the wait", test_deadline},
    {"input before the deadline", test_ready_fd},
    {"released while running: cancelled, arg freed at its end", test_release_while_running},
    {"stop: cancel all, a bounded wait, the stubborn left behind", test_stop},
};
UNIT_MAIN(cases)
