/*
 * Polls the kubelet's /pods (or the API server's pod list of this node) for pod
 * and container names, on a thread of lib/httpc so that the loop never waits.
 * A failed poll keeps the last good names; every outcome is a stat counter.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon.h"
#include "exportd.h"
#include "httpc.h"
#include "log.h"

#define TOKEN_MAX 65536

struct kube {
	struct wb_daemon *d;
	struct kube_opts o; /* strings: our copies */
	char *url;	    /* what is asked */
	kube_names_fn *fn;
	void *arg;
	struct kube_names *names;
	struct wb_httpc_job *job;
	int timer;
	bool ever_ok;
	struct wb_ratelimit rl;
	uint64_t *c_result[WB_HTTPC_NRESULTS];
	uint64_t *c_malformed, *c_token, *c_skipped, *c_busy;
};

/* The token file's content without trailing white space; NULL (logged, counted) when unreadable. */
static char *read_token(struct kube *k)
{
	/* links are followed: a projected token is ..data/token behind a link; O_NONBLOCK: a FIFO
	 * put there does not hang the loop */
	int fd = open(k->o.token_file, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	char *buf = malloc(TOKEN_MAX + 1);
	ssize_t n = -1;
	if (fd >= 0 && buf)
		n = read(fd, buf, TOKEN_MAX + 1);
	int e = errno;
	if (fd >= 0)
		close(fd);
	if (n < 0 || n > TOKEN_MAX) {
		(*k->c_token)++;
		log_rl(&k->rl, WB_LOG_WARN, "kube: token file %s: %s; names stay as they are",
		       k->o.token_file, n > TOKEN_MAX ? "longer than 64 KiB" : strerror(e));
		free(buf);
		return NULL;
	}
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' '))
		n--;
	buf[n] = '\0';
	return buf;
}

static void take_answer(struct kube *k, const struct wb_httpc_resp *resp)
{
	char err[256];
	size_t skipped;
	struct kube_names *n =
	    kube_names_parse(resp->body ? resp->body : "", resp->len, &skipped, err, sizeof err);
	if (!n) {
		(*k->c_malformed)++;
		log_rl(&k->rl, WB_LOG_WARN, "kube: %s: %s; the last names stay", k->url, err);
		return;
	}
	if (skipped) {
		*k->c_skipped += skipped;
		log_rl(&k->rl, WB_LOG_WARN, "kube: %s: %zu pods without uid or name left out",
		       k->url, skipped);
	}
	if (!k->ever_ok)
		log_info("kube: %s: names of %zu pods and %zu containers", k->url,
			 kube_names_npods(n), kube_names_ncontainers(n));
	k->ever_ok = true;
	k->fn(k->arg, n);
	kube_names_destroy(&k->names);
	k->names = n;
}

static int on_done(struct wb_daemon *d, int fd, void *arg)
{
	struct kube *k = arg;
	struct wb_httpc_resp resp;
	char err[512];
	enum wb_httpc_result r = wb_httpc_job_finish(k->job, &resp, err, sizeof err);
	k->job = NULL;
	(*k->c_result[r])++;
	if (r == WB_HTTPC_OK)
		take_answer(k, &resp);
	else if (r == WB_HTTPC_STATUS && (resp.status == 401 || resp.status == 403))
		log_rl(
		    &k->rl, WB_LOG_WARN,
		    "kube: %s: status %ld: the token (%s) is refused or lacks the RBAC rule (%s); the last names stay",
		    k->url, resp.status, k->o.token_file,
		    k->o.apiserver ? "pods list" : "nodes/proxy get");
	else
		log_rl(&k->rl, WB_LOG_WARN, "kube: %s; the last names stay", err);
	wb_httpc_resp_free(&resp);
	return -1; /* the job's fd is closed: stop watching it */
}

static int on_poll(zloop_t *loop, int timer_id, void *arg)
{
	struct kube *k = arg;
	char err[512];
	if (k->job) { /* the previous poll is still waiting for its deadline */
		(*k->c_busy)++;
		return 0;
	}
	char *token = k->o.token_file[0] ? read_token(k) : NULL;
	if (k->o.token_file[0] && !token)
		return 0;
	struct wb_httpc_opts ho = {
	    .ca_file = k->o.ca_file[0] ? k->o.ca_file : NULL,
	    .insecure = k->o.insecure,
	    .bearer = token && token[0] ? token : NULL,
	    .accept = "application/json",
	    .timeout_ms = (long)(k->o.timeout_ns / 1000000),
	    .max_body = k->o.max_bytes,
	};
	k->job = wb_httpc_start("GET", k->url, NULL, 0, &ho, err, sizeof err);
	if (token) {
		explicit_bzero(token, strlen(token));
		free(token);
	}
	if (!k->job) {
		(*k->c_result[WB_HTTPC_ERROR])++;
		log_rl(&k->rl, WB_LOG_WARN, "kube: %s", err);
		return 0;
	}
	if (wb_daemon_watch_fd(k->d, wb_httpc_job_fd(k->job), on_done, k) < 0) {
		wb_httpc_job_cancel(&k->job); /* nothing would collect it: the loop never waits */
		(*k->c_result[WB_HTTPC_ERROR])++;
		log_rl(&k->rl, WB_LOG_WARN, "kube: cannot watch the request's fd");
	}
	return 0;
}

struct kube *kube_new(struct wb_daemon *d, const struct kube_opts *o, kube_names_fn *fn, void *arg)
{
	struct kube *k = calloc(1, sizeof *k);
	if (!k)
		return NULL;
	k->d = d;
	k->fn = fn;
	k->arg = arg;
	k->rl = (struct wb_ratelimit)WB_RATELIMIT_INIT;
	k->timer = -1;
	k->o = *o;
	k->o.url = strdup(o->url);
	k->o.node = strdup(o->node);
	k->o.token_file = strdup(o->token_file);
	k->o.ca_file = strdup(o->ca_file);
	size_t ul = strlen(o->url);
	while (ul && o->url[ul - 1] == '/')
		ul--;
	int rc = o->apiserver
		     ? asprintf(&k->url, "%.*s/api/v1/pods?fieldSelector=spec.nodeName%%3D%s",
				(int)ul, o->url, o->node)
		     : asprintf(&k->url, "%.*s/pods", (int)ul, o->url);
	if (rc < 0)
		k->url = NULL;
	/* counters named after lib/httpc's results: kube_ok, kube_status, ... */
	static const struct wb_stat_row rows[] = {
	    WB_STAT_ROW(struct kube, c_result[WB_HTTPC_OK], "kube_ok"),
	    WB_STAT_ROW(struct kube, c_result[WB_HTTPC_STATUS], "kube_status"),
	    WB_STAT_ROW(struct kube, c_result[WB_HTTPC_CONNECT], "kube_connect"),
	    WB_STAT_ROW(struct kube, c_result[WB_HTTPC_TIMEOUT], "kube_timeout"),
	    WB_STAT_ROW(struct kube, c_result[WB_HTTPC_TLS], "kube_tls"),
	    WB_STAT_ROW(struct kube, c_result[WB_HTTPC_TOO_BIG], "kube_too_big"),
	    WB_STAT_ROW(struct kube, c_result[WB_HTTPC_ERROR], "kube_error"),
	    WB_STAT_ROW(struct kube, c_malformed, "kube_malformed"),
	    WB_STAT_ROW(struct kube, c_token, "kube_token_unreadable"),
	    WB_STAT_ROW(struct kube, c_skipped, "kube_pods_skipped"),
	    WB_STAT_ROW(struct kube, c_busy, "kube_busy"),
	};
	_Static_assert(WB_HTTPC_NRESULTS == 7, "a row per lib/httpc result");
	wb_stats_bind(wb_daemon_stats(d), k, rows, sizeof rows / sizeof rows[0]);
	if (!k->url || !k->o.url || !k->o.node || !k->o.token_file || !k->o.ca_file) {
		log_errx("kube: out of memory");
		kube_destroy(&k);
		return NULL;
	}
	k->timer = wb_daemon_timer(d, o->interval_ns, on_poll, k);
	if (k->timer < 0 || wb_daemon_timer_once(d, 1000000, on_poll, k) < 0) {
		log_errx("kube: cannot start the poll timer");
		kube_destroy(&k);
		return NULL;
	}
	if (o->insecure)
		log_warnx(
		    "kube: kube_insecure is on: %s is not verified (anyone on the path can serve names)",
		    k->url);
	log_info("kube: names from %s every %.1f s", k->url, (double)o->interval_ns / 1e9);
	return k;
}

void kube_destroy(struct kube **self_p)
{
	struct kube *k = self_p ? *self_p : NULL;
	if (!k)
		return;
	if (k->timer >= 0)
		wb_daemon_timer_end(k->d, k->timer);
	wb_httpc_job_cancel(&k->job); /* a hung kubelet never holds the stop */
	kube_names_destroy(&k->names);
	free(k->url);
	free((char *)k->o.url);
	free((char *)k->o.node);
	free((char *)k->o.token_file);
	free((char *)k->o.ca_file);
	free(k);
	*self_p = NULL;
}
