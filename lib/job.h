/*
 * Blocking work as a job, not a call (STYLE.md 16): a job runs fn on a thread of its own with a
 * deadline and a cancel, and an fd turns readable when it is done, so that a daemon's loop (or a
 * source's epoll) collects the result without ever waiting on a peer. Every job of the process is
 * in one registry: at stop, lib/daemon cancels them all and waits for them with a bound
 * (wb_jobs_stop), so that no hung peer (a BMC, a kubelet, a model server, a sidecar) holds a
 * stopping daemon past systemd's TimeoutStopSec.
 *
 * fn must end soon after wb_job_stopping() turns true: it waits on its peer with wb_job_wait_fd
 * (which wakes at the cancel and the deadline) or polls wb_job_stopping (libcurl's progress
 * callback does, lib/httpc.c). Work that cannot be interrupted (a library call with a timeout of
 * its own) is left behind at the stop's bound and ends with the process.
 *
 * Ownership: the job owns arg from wb_job_start on (free_arg frees it, whoever lets go last:
 * the owner's wb_job_release or the thread's end), so that a job left behind never works on
 * memory its owner freed.
 */
#ifndef WB_JOB_H
#define WB_JOB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* How long a stopping daemon waits for its cancelled jobs (lib/daemon.c, wb_daemon_run). */
#define WB_JOB_STOP_NS (1000 * 1000000ull)

struct wb_job;
/* Runs on the job's thread; the result goes into arg, which the owner reads once done. */
typedef void(wb_job_fn)(struct wb_job *job, void *arg);

/*
 * Start fn(job, arg) on a thread of its own, to be cancelled at now + timeout_ns (0: no
 * deadline but the cancel). what names it in messages ("GET http://bmc/redfish/v1/..."). NULL
 * with err when no thread could be started (arg is freed then too). A job started once
 * wb_jobs_stop has run is cancelled from the start.
 */
struct wb_job *wb_job_start(const char *what, uint64_t timeout_ns, wb_job_fn *fn, void *arg,
			    void (*free_arg)(void *), char *err, size_t errlen);

/* ---- the owner's side ---- */

/* Readable once fn has returned (add it to the loop, or poll it). */
int wb_job_fd(const struct wb_job *job);
bool wb_job_done(const struct wb_job *job);
/* Wait for the job up to timeout_ns on the caller's thread: whether it is done. */
bool wb_job_wait(const struct wb_job *job, uint64_t timeout_ns);
/* arg as given to wb_job_start; the owner reads the result there once done. */
void *wb_job_arg(const struct wb_job *job);
const char *wb_job_what(const struct wb_job *job);
/* Ask fn to end now: wb_job_stopping turns true, wb_job_wait_fd returns. */
void wb_job_cancel(struct wb_job *job);
/* Let go of the job (cancelled when not done), never waiting; NULL-safe, nulls *job_p. */
void wb_job_release(struct wb_job **job_p);

/* ---- fn's side ---- */

/* Cancelled, or past the deadline: fn should end. */
bool wb_job_stopping(const struct wb_job *job);
/* Whether it was cancelled (rather than past its deadline). */
bool wb_job_cancelled(const struct wb_job *job);
/* Readable once cancelled: for a wait of fn's own (poll, libcurl's multi_poll). */
int wb_job_cancel_fd(const struct wb_job *job);
/* The deadline on wb_mono_ns's clock (UINT64_MAX: none). */
uint64_t wb_job_deadline_ns(const struct wb_job *job);
/*
 * Wait until fd has one of events (POLLIN, POLLOUT), the job is cancelled or its deadline
 * passes, or timeout_ns (0: no bound of its own) is over: 1 ready, 0 not (errno ECANCELED:
 * cancelled, ETIMEDOUT: the deadline or timeout_ns), -1 on a poll error.
 */
int wb_job_wait_fd(struct wb_job *job, int fd, short events, uint64_t timeout_ns);

/* ---- all jobs of the process ---- */

/* Jobs whose fn has not returned yet. */
size_t wb_jobs_running(void);
/*
 * At stop: cancel every running job (logged with its name) and wait up to bound_ns for them
 * to end; the jobs started from now on are cancelled from the start. Returns how many are
 * still running (each logged, left to end with the process).
 */
size_t wb_jobs_stop(uint64_t bound_ns);

#endif
