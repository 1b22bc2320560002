/*
 * The estimator sidecar's socket, a peer kept rather than a call abandoned: each exchange of
 * kepler.c's PowerRequest and its answer is a job (lib/job.h) that holds its connection until
 * the answer comes, the sidecar closes, or answer_max passes. A slot waits for its answer at
 * most wait_ns; one that comes later is read and dropped, never answered by closing the socket
 * (Kepler's estimator writes its answer into the closed socket and exits). While an exchange
 * waits, later slots do not ask (one exchange at a time, as Kepler's single-threaded estimator
 * serves them). A sidecar that cannot be reached is tried again with a doubling backoff.
 * The encoding and parsing stay in kepler.c (pure).
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "clock.h"
#include "estimd.h"
#include "job.h"

#define BACKOFF_FIRST_NS (100 * WB_NS_PER_MS)
#define BACKOFF_MAX_NS (10 * WB_NS_PER_SEC)

int sidecar_socket_check(const char *path, uid_t self, char *why, size_t whylen)
{
	struct stat st, dst;
	if (lstat(path, &st) < 0) {
		int e = errno;
		snprintf(why, whylen, "%s: %s", path, strerror(e));
		return e == ENOENT ? -2 : -1;
	}
	if (!S_ISSOCK(st.st_mode)) {
		snprintf(why, whylen, "%s: not a socket", path);
		return -1;
	}
	if (st.st_uid != 0 && st.st_uid != self) {
		snprintf(
		    why, whylen,
		    "%s: owned by uid %u, neither root nor estimd's own user (uid %u): another user may have bound it",
		    path, (unsigned)st.st_uid, (unsigned)self);
		return -1;
	}
	char dir[PATH_MAX];
	const char *slash = strrchr(path, '/');
	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == path)
		snprintf(dir, sizeof(dir), "/");
	else
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	if (stat(dir, &dst) < 0) {
		snprintf(why, whylen, "%s: %s", dir, strerror(errno));
		return -1;
	}
	/* A sticky directory: nobody but the socket's owner (checked above) can replace it. */
	if (dst.st_mode & S_ISVTX)
		return 0;
	if (dst.st_mode & (S_IWGRP | S_IWOTH)) {
		snprintf(
		    why, whylen,
		    "%s: its directory %s is writable by %s without the sticky bit: another user may replace the socket",
		    path, dir, dst.st_mode & S_IWOTH ? "all users" : "its group");
		return -1;
	}
	if (dst.st_uid != 0 && dst.st_uid != self) {
		snprintf(
		    why, whylen,
		    "%s: its directory %s is owned by uid %u, neither root nor estimd's own user (uid %u)",
		    path, dir, (unsigned)dst.st_uid, (unsigned)self);
		return -1;
	}
	return 0;
}

/* One exchange, the job's arg: what it sends, then what came back. */
struct exchange {
	struct sockaddr_un sa;
	uid_t self;
	bool warm_up;
	uint64_t start_ns;
	char *req;
	/* the result */
	enum sidecar_status status; /* SIDECAR_ANSWERED, _UNREACHABLE, _TIMEOUT, _REFUSED, _ERROR */
	char buf[4097];		    /* Kepler's client reads one answer of at most 4096 bytes */
	size_t len;
	uint64_t end_ns;
	char err[384];
};

static void exchange_free(void *arg)
{
	struct exchange *x = arg;
	free(x->req);
	free(x);
}

static void exchange_run(struct wb_job *job, void *arg)
{
	struct exchange *x = arg;
	const char *path = x->sa.sun_path;
	x->status = SIDECAR_ERROR;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(x->err, sizeof(x->err), "socket: %s", strerror(errno));
		goto out;
	}
	if (connect(fd, (struct sockaddr *)&x->sa, sizeof(x->sa)) < 0) {
		/* A unix socket connects at once or not at all (EAGAIN: its backlog is full). */
		x->status = SIDECAR_UNREACHABLE;
		snprintf(x->err, sizeof(x->err), "%s: connect: %s", path, strerror(errno));
		goto out;
	}
	/* The process on the other end, whatever the file says by now. */
	struct ucred cred;
	socklen_t cl = sizeof(cred);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) == 0 && cred.uid != 0 &&
	    cred.uid != x->self) {
		x->status = SIDECAR_REFUSED;
		snprintf(
		    x->err, sizeof(x->err),
		    "%s: the process listening on it runs as uid %u, neither root nor estimd's own user (uid %u)",
		    path, (unsigned)cred.uid, (unsigned)x->self);
		goto out;
	}
	size_t reqlen = strlen(x->req), off = 0;
	while (off < reqlen) {
		ssize_t n = send(fd, x->req + off, reqlen - off, MSG_NOSIGNAL);
		if (n > 0) {
			off += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			int w = wb_job_wait_fd(job, fd, POLLOUT, 0);
			if (w > 0)
				continue;
			if (w == 0)
				goto stopped;
		}
		x->status = SIDECAR_UNREACHABLE;
		snprintf(x->err, sizeof(x->err), "%s: send: %s", path, strerror(errno));
		goto out;
	}
	size_t cap = sizeof(x->buf) - 1;
	for (;;) {
		ssize_t n = recv(fd, x->buf + x->len, cap - x->len, 0);
		if (n > 0) {
			x->len += (size_t)n;
			x->buf[x->len] = '\0';
			if (kepler_answer_complete(x->buf, x->len)) {
				x->status = SIDECAR_ANSWERED;
				goto out;
			}
			if (x->len >= cap) {
				/* The parser says why it is no answer. */
				x->status = SIDECAR_ANSWERED;
				goto out;
			}
			continue;
		}
		if (n == 0) {
			/* Closed: what came is the answer (the parser says whether it is one). */
			if (x->len == 0) {
				x->status = SIDECAR_UNREACHABLE;
				snprintf(x->err, sizeof(x->err), "%s: closed without an answer",
					 path);
			} else {
				x->status = SIDECAR_ANSWERED;
			}
			goto out;
		}
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK) {
			int w = wb_job_wait_fd(job, fd, POLLIN, 0);
			if (w > 0)
				continue;
			if (w == 0)
				goto stopped;
		}
		x->status = SIDECAR_UNREACHABLE;
		snprintf(x->err, sizeof(x->err), "%s: recv: %s", path, strerror(errno));
		goto out;
	}
stopped:
	x->status = SIDECAR_TIMEOUT;
	if (wb_job_cancelled(job))
		snprintf(x->err, sizeof(x->err), "%s: cancelled", path);
	else
		snprintf(x->err, sizeof(x->err), "%s: no answer within %.0f s: connection closed",
			 path, (double)(wb_mono_ns() - x->start_ns) / 1e9);
out:
	x->end_ns = wb_mono_ns();
	if (fd >= 0)
		close(fd);
}

struct sidecar {
	struct sockaddr_un sa;
	uint64_t wait_ns, answer_max_ns;
	struct wb_job *job;	/* the exchange in flight, or NULL */
	uint64_t backoff_ns;	/* after a failure to reach it; 0: none */
	uint64_t retry_mono_ns; /* not asked before then */
};

struct sidecar *sidecar_new(const char *path, uint64_t wait_ns, uint64_t answer_max_ns, char *err,
			    size_t errlen)
{
	struct sidecar *s = calloc(1, sizeof(*s));
	if (!s) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	s->sa.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(s->sa.sun_path)) {
		snprintf(err, errlen, "%s: path too long for a unix socket", path);
		free(s);
		return NULL;
	}
	strcpy(s->sa.sun_path, path);
	sidecar_set_times(s, wait_ns, answer_max_ns);
	return s;
}

void sidecar_set_path(struct sidecar *s, const char *path)
{
	if (strlen(path) >= sizeof(s->sa.sun_path))
		return;
	strcpy(s->sa.sun_path, path);
	s->backoff_ns = 0;
	s->retry_mono_ns = 0;
	if (s->job)
		wb_job_cancel(s->job); /* the old sidecar's: collected as cancelled */
}

_Static_assert(SIDECAR_PATH_MAX == sizeof(((struct sockaddr_un *)0)->sun_path),
	       "SIDECAR_PATH_MAX is sockaddr_un's sun_path");

void sidecar_set_times(struct sidecar *s, uint64_t wait_ns, uint64_t answer_max_ns)
{
	s->wait_ns = wait_ns;
	s->answer_max_ns = answer_max_ns;
}

void sidecar_destroy(struct sidecar **self_p)
{
	struct sidecar *s = self_p ? *self_p : NULL;
	if (!s)
		return;
	wb_job_release(&s->job); /* a hung sidecar never holds the stop */
	free(s);
	*self_p = NULL;
}

const char *sidecar_path(const struct sidecar *s)
{
	return s->sa.sun_path;
}

/* Hand a finished exchange's result over; the backoff follows whether the sidecar was reached. */
static void finish(struct sidecar *s, struct sidecar_done *d)
{
	struct exchange *x = wb_job_arg(s->job);
	d->status = x->status;
	d->warm_up = x->warm_up;
	d->cancelled = wb_job_cancelled(s->job) && x->status != SIDECAR_ANSWERED;
	d->ms = (double)(x->end_ns - x->start_ns) / 1e6;
	memcpy(d->buf, x->buf, x->len + 1);
	d->len = x->len;
	snprintf(d->err, sizeof(d->err), "%s", x->err);
	if (x->status == SIDECAR_UNREACHABLE || x->status == SIDECAR_REFUSED) {
		s->backoff_ns = s->backoff_ns ? s->backoff_ns * 2 : BACKOFF_FIRST_NS;
		if (s->backoff_ns > BACKOFF_MAX_NS)
			s->backoff_ns = BACKOFF_MAX_NS;
		s->retry_mono_ns = wb_mono_ns() + s->backoff_ns;
	} else {
		s->backoff_ns = 0;
		s->retry_mono_ns = 0;
	}
	wb_job_release(&s->job);
}

int sidecar_fd(const struct sidecar *s)
{
	return s->job ? wb_job_fd(s->job) : -1;
}

bool sidecar_collect(struct sidecar *s, struct sidecar_done *d)
{
	if (!s->job || !wb_job_done(s->job))
		return false;
	finish(s, d);
	return true;
}

static int start(struct sidecar *s, const char *req, bool warm_up, char *err, size_t errlen)
{
	struct exchange *x = calloc(1, sizeof(*x));
	if (!x || !(x->req = strdup(req))) {
		free(x);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	x->sa = s->sa;
	x->self = geteuid();
	x->warm_up = warm_up;
	x->start_ns = wb_mono_ns();
	char what[160];
	snprintf(what, sizeof(what), "%s of the estimator sidecar %s",
		 warm_up ? "warm-up" : "request", s->sa.sun_path);
	s->job = wb_job_start(what, s->answer_max_ns, exchange_run, x, exchange_free, err, errlen);
	return s->job ? 0 : -1;
}

enum sidecar_status sidecar_ask(struct sidecar *s, const char *req, bool warm_up,
				struct sidecar_done *d, char *err, size_t errlen)
{
	d->status = SIDECAR_ERROR;
	d->len = 0;
	d->buf[0] = d->err[0] = '\0';
	if (s->job) {
		snprintf(err, errlen, "%s: still waiting for the answer to an earlier request",
			 s->sa.sun_path);
		return SIDECAR_BUSY;
	}
	if (s->retry_mono_ns && wb_mono_ns() < s->retry_mono_ns) {
		snprintf(err, errlen, "%s: not asked for %.1f s more after the last failure",
			 s->sa.sun_path, (double)(s->retry_mono_ns - wb_mono_ns()) / 1e9);
		return SIDECAR_BACKOFF;
	}
	int chk = sidecar_socket_check(s->sa.sun_path, geteuid(), err, errlen);
	if (chk < 0) {
		/* An absent socket is a sidecar not (yet) there; one of another user is refused. */
		bool absent = chk == -2;
		s->backoff_ns = s->backoff_ns ? s->backoff_ns * 2 : BACKOFF_FIRST_NS;
		if (s->backoff_ns > BACKOFF_MAX_NS)
			s->backoff_ns = BACKOFF_MAX_NS;
		s->retry_mono_ns = wb_mono_ns() + s->backoff_ns;
		return absent ? SIDECAR_UNREACHABLE : SIDECAR_REFUSED;
	}
	if (start(s, req, warm_up, err, errlen) < 0)
		return SIDECAR_ERROR;
	if (warm_up || !wb_job_wait(s->job, s->wait_ns)) {
		snprintf(err, errlen, "%s: no answer within %.0f ms", s->sa.sun_path,
			 (double)s->wait_ns / 1e6);
		return SIDECAR_TIMEOUT;
	}
	finish(s, d);
	snprintf(err, errlen, "%s", d->err);
	return d->status;
}
