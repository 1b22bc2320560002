/*
 * The estimator sidecar's socket: one exchange of kepler.c's PowerRequest and
 * its answer on a unix stream socket, bounded by a deadline so that a slot
 * never waits longer. The encoding and parsing stay in kepler.c (pure).
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "estimd.h"

static int64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Wait for events on fd until the deadline: 1 ready, 0 past the deadline, -1 error. */
static int wait_fd(int fd, short events, int64_t deadline_ms)
{
	for (;;) {
		int64_t left = deadline_ms - mono_ms();
		if (left <= 0)
			return 0;
		struct pollfd p = {.fd = fd, .events = events};
		int n = poll(&p, 1, (int)left);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0)
			return 0;
		return 1;
	}
}

int kepler_sidecar_call(const char *path, const char *req, int timeout_ms, char *buf, size_t size,
			size_t *len, bool *timed_out, char *err, size_t errlen)
{
	*len = 0;
	*timed_out = false;
	int64_t deadline = mono_ms() + timeout_ms;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof(sa.sun_path)) {
		snprintf(err, errlen, "%s: path too long for a unix socket", path);
		return -1;
	}
	strcpy(sa.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return -1;
	}
	int rc = -1;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		/* A unix socket connects at once or not at all (EAGAIN: its backlog is full). */
		snprintf(err, errlen, "%s: connect: %s", path, strerror(errno));
		goto out;
	}
	size_t reqlen = strlen(req), off = 0;
	while (off < reqlen) {
		ssize_t n = send(fd, req + off, reqlen - off, MSG_NOSIGNAL);
		if (n > 0) {
			off += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			int w = wait_fd(fd, POLLOUT, deadline);
			if (w > 0)
				continue;
			if (w == 0)
				goto timeout;
		}
		snprintf(err, errlen, "%s: send: %s", path, strerror(errno));
		goto out;
	}
	/* Kepler's client reads one answer of at most 4096 bytes. */
	size_t cap = size - 1 < 4096 ? size - 1 : 4096;
	for (;;) {
		ssize_t n = recv(fd, buf + *len, cap - *len, 0);
		if (n > 0) {
			*len += (size_t)n;
			buf[*len] = '\0';
			if (kepler_answer_complete(buf, *len)) {
				rc = 0;
				goto out;
			}
			if (*len >= cap) {
				snprintf(err, errlen,
					 "%s: answer longer than %zu bytes or not JSON", path, cap);
				goto out;
			}
			continue;
		}
		if (n == 0) {
			buf[*len] = '\0';
			/* Closed: what came is the answer (the parser says whether it is one). */
			if (*len == 0) {
				snprintf(err, errlen, "%s: closed without an answer", path);
				goto out;
			}
			rc = 0;
			goto out;
		}
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK) {
			int w = wait_fd(fd, POLLIN, deadline);
			if (w > 0)
				continue;
			if (w == 0)
				goto timeout;
		}
		snprintf(err, errlen, "%s: recv: %s", path, strerror(errno));
		goto out;
	}
timeout:
	*timed_out = true;
	snprintf(err, errlen, "%s: no answer within %d ms", path, timeout_ms);
out:
	close(fd);
	if (rc < 0)
		buf[*len < size ? *len : size - 1] = '\0';
	return rc;
}
