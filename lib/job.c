/* Cancellable jobs with a deadline, and the registry a stopping daemon cancels (job.h). */
#include "job.h"
#include "clock.h"
#include "log.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

struct wb_job {
	atomic_int refs; /* the thread's and the owner's */
	atomic_bool cancelled, done;
	int done_fd;   /* eventfd, readable once fn returned */
	int cancel_fd; /* eventfd, readable once cancelled: wb_job_wait_fd wakes on it */
	uint64_t deadline_ns;
	wb_job_fn *fn;
	void *arg;
	void (*free_arg)(void *);
	struct wb_job *prev, *next; /* the registry, while fn runs */
	pthread_t thread;
	char what[160];
};

/* The registry: the running jobs, and whether the process is stopping. */
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t reg_cond = PTHREAD_COND_INITIALIZER;
static struct wb_job *reg_head;
static size_t reg_running;
static bool reg_stopping;

static void signal_fd(int fd)
{
	uint64_t one = 1;
	while (write(fd, &one, sizeof(one)) < 0 && errno == EINTR)
		;
}

static void unref(struct wb_job *j)
{
	if (atomic_fetch_sub(&j->refs, 1) != 1)
		return;
	if (j->free_arg)
		j->free_arg(j->arg);
	if (j->done_fd >= 0)
		close(j->done_fd);
	if (j->cancel_fd >= 0)
		close(j->cancel_fd);
	free(j);
}

static void *job_main(void *arg)
{
	struct wb_job *j = arg;
	j->fn(j, j->arg);
	pthread_mutex_lock(&reg_lock);
	if (j->prev)
		j->prev->next = j->next;
	else
		reg_head = j->next;
	if (j->next)
		j->next->prev = j->prev;
	reg_running--;
	atomic_store(&j->done, true);
	pthread_cond_broadcast(&reg_cond);
	pthread_mutex_unlock(&reg_lock);
	signal_fd(j->done_fd);
	unref(j);
	return NULL;
}

struct wb_job *wb_job_start(const char *what, uint64_t timeout_ns, wb_job_fn *fn, void *arg,
			    void (*free_arg)(void *), char *err, size_t errlen)
{
	struct wb_job *j = calloc(1, sizeof(*j));
	if (!j) {
		snprintf(err, errlen, "%s: out of memory", what);
		if (free_arg)
			free_arg(arg);
		return NULL;
	}
	snprintf(j->what, sizeof(j->what), "%s", what);
	j->fn = fn;
	j->arg = arg;
	j->free_arg = free_arg;
	j->deadline_ns = timeout_ns ? wb_mono_ns() + timeout_ns : UINT64_MAX;
	j->done_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	j->cancel_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	atomic_store(&j->refs, 2);
	if (j->done_fd < 0 || j->cancel_fd < 0) {
		snprintf(err, errlen, "%s: eventfd: %s", what, strerror(errno));
		atomic_store(&j->refs, 1);
		unref(j);
		return NULL;
	}
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	/* Nobody joins: the registry says when it ended, and a job left behind at stop must not
	 * hold the process's exit. */
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_mutex_lock(&reg_lock);
	if (reg_stopping) {
		atomic_store(&j->cancelled, true);
		signal_fd(j->cancel_fd);
	}
	int rc = pthread_create(&j->thread, &attr, job_main, j);
	if (rc == 0) {
		j->next = reg_head;
		if (reg_head)
			reg_head->prev = j;
		reg_head = j;
		reg_running++;
	}
	pthread_mutex_unlock(&reg_lock);
	pthread_attr_destroy(&attr);
	if (rc != 0) {
		snprintf(err, errlen, "%s: cannot start a thread: %s", what, strerror(rc));
		atomic_store(&j->refs, 1);
		unref(j);
		return NULL;
	}
	return j;
}

int wb_job_fd(const struct wb_job *job)
{
	return job->done_fd;
}

bool wb_job_done(const struct wb_job *job)
{
	return atomic_load(&job->done);
}

bool wb_job_wait(const struct wb_job *job, uint64_t timeout_ns)
{
	uint64_t end = wb_mono_ns() + timeout_ns;
	while (!wb_job_done(job)) {
		uint64_t now = wb_mono_ns();
		if (now >= end)
			return false;
		uint64_t left_ms = (end - now + WB_NS_PER_MS - 1) / WB_NS_PER_MS;
		struct pollfd p = {.fd = job->done_fd, .events = POLLIN};
		if (poll(&p, 1, left_ms > 60000 ? 60000 : (int)left_ms) < 0 && errno != EINTR)
			return wb_job_done(job);
	}
	return true;
}

void *wb_job_arg(const struct wb_job *job)
{
	return job->arg;
}

const char *wb_job_what(const struct wb_job *job)
{
	return job->what;
}

void wb_job_cancel(struct wb_job *job)
{
	if (!atomic_exchange(&job->cancelled, true))
		signal_fd(job->cancel_fd);
}

void wb_job_release(struct wb_job **job_p)
{
	if (!job_p || !*job_p)
		return;
	struct wb_job *j = *job_p;
	*job_p = NULL;
	if (!wb_job_done(j))
		wb_job_cancel(j);
	unref(j);
}

bool wb_job_cancelled(const struct wb_job *job)
{
	return atomic_load(&job->cancelled);
}

bool wb_job_stopping(const struct wb_job *job)
{
	return atomic_load(&job->cancelled) || wb_mono_ns() >= job->deadline_ns;
}

int wb_job_cancel_fd(const struct wb_job *job)
{
	return job->cancel_fd;
}

uint64_t wb_job_deadline_ns(const struct wb_job *job)
{
	return job->deadline_ns;
}

int wb_job_wait_fd(struct wb_job *job, int fd, short events, uint64_t timeout_ns)
{
	uint64_t end = job->deadline_ns;
	if (timeout_ns) {
		uint64_t own = wb_mono_ns() + timeout_ns;
		if (own < end)
			end = own;
	}
	for (;;) {
		if (wb_job_cancelled(job)) {
			errno = ECANCELED;
			return 0;
		}
		uint64_t now = wb_mono_ns();
		if (now >= end) {
			errno = ETIMEDOUT;
			return 0;
		}
		uint64_t left_ms = (end - now + WB_NS_PER_MS - 1) / WB_NS_PER_MS;
		struct pollfd p[2] = {{.fd = fd, .events = events},
				      {.fd = job->cancel_fd, .events = POLLIN}};
		int n = poll(p, 2, left_ms > 60000 ? 60000 : (int)left_ms);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (p[0].revents)
			return 1;
	}
}

size_t wb_jobs_running(void)
{
	pthread_mutex_lock(&reg_lock);
	size_t n = reg_running;
	pthread_mutex_unlock(&reg_lock);
	return n;
}

size_t wb_jobs_stop(uint64_t bound_ns)
{
	struct timespec until;
	clock_gettime(CLOCK_MONOTONIC, &until);
	uint64_t t = (uint64_t)until.tv_nsec + bound_ns % WB_NS_PER_SEC;
	until.tv_sec += (time_t)(bound_ns / WB_NS_PER_SEC + t / WB_NS_PER_SEC);
	until.tv_nsec = (long)(t % WB_NS_PER_SEC);

	pthread_mutex_lock(&reg_lock);
	reg_stopping = true;
	for (struct wb_job *j = reg_head; j; j = j->next) {
		log_info("stopping: cancelled the job %s", j->what);
		wb_job_cancel(j);
	}
	while (reg_running > 0) {
		int rc = pthread_cond_clockwait(&reg_cond, &reg_lock, CLOCK_MONOTONIC, &until);
		if (rc == ETIMEDOUT)
			break;
	}
	size_t left = reg_running;
	for (struct wb_job *j = reg_head; j; j = j->next)
		log_warnx(
		    "stopping: the job %s still runs %.1f s after its cancel: left to end with the process",
		    j->what, (double)bound_ns / 1e9);
	pthread_mutex_unlock(&reg_lock);
	return left;
}
