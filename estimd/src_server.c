/*
 * Model source "server": a Kepler model server (wattbus-modeld or Kepler's own)
 * asked for the best model for this machine at start, every model_refresh, when
 * usaged's features change, and after failures with backoff. Requests run as
 * lib/httpc jobs, off the loop, cancelled at stop.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "httpc.h"
#include "sources.h"

struct server_conf {
	char *model_server;
	uint64_t model_refresh_ns, model_retry_ns, model_server_timeout_ns;
};

#define OFF(field) offsetof(struct server_conf, field)

static const struct wb_conf_key keys[] = {
    {"model_server", WB_CONF_STR, OFF(model_server), "", 0, 0, NULL,
     "Kepler model server (http://HOST:8100, wattbus-modeld or Kepler's own) asked for the best model for this machine at start and every model_refresh (empty: none)"},
    {"model_refresh", WB_CONF_DURATION, OFF(model_refresh_ns), "1h", 1e9, 30 * 86400e9, NULL,
     "how often the model server is asked again"},
    {"model_retry", WB_CONF_DURATION, OFF(model_retry_ns), "10s", 1e8, 86400e9, NULL,
     "first retry after a failed model server request; doubles after each failure, up to model_refresh"},
    {"model_server_timeout", WB_CONF_DURATION, OFF(model_server_timeout_ns), "10s", 1e8, 600e9,
     NULL, "deadline of one model server request"},
};

struct server_state {
	struct est_app *app;
	const struct server_conf *conf;
	struct wb_httpc_job *job;
	int timer;		/* pending request timer, or -1 */
	uint64_t backoff_ns;	/* next retry delay after a failure; 0: none failed yet */
	char asked[64];		/* counters the last request named */
	char slot_counters[64]; /* counters of the last slot */
	struct wb_ratelimit rl;
	uint64_t *requests, *unreachable, *refused, *bad_answer, *models;
};

/* model_server_<field> */
#define ROW(f) WB_STAT_ROW(struct server_state, f, "model_server_" #f)
static const struct wb_stat_row stats[] = {ROW(requests), ROW(unreachable), ROW(refused),
					   ROW(bad_answer), ROW(models)};

static int server_conf(const void *sconf, const struct estimd_conf *c, struct est_conf *ec,
		       char *err, size_t errlen)
{
	const struct server_conf *sc = sconf;
	if (sc->model_server[0] && strncmp(sc->model_server, "http://", 7) != 0 &&
	    strncmp(sc->model_server, "https://", 8) != 0) {
		snprintf(err, errlen, "model_server '%s': expected an http:// or https:// URL",
			 sc->model_server);
		return -1;
	}
	return 0;
}

static void schedule(struct server_state *s, uint64_t delay_ns);

/* The counters of a slot as one string, to tell when usaged's feature set changed. */
static void counters_key(const struct wb_aligned *a, char *buf, size_t size)
{
	size_t o = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < a->n_counters && o < size; i++)
		o += (size_t)snprintf(buf + o, size - o, "%s%.16s", i ? "," : "", a->counters[i]);
}

/* URL/model (Kepler's clients append /model to MODEL_SERVER_URL; a trailing / is not doubled). */
static void server_url(const struct server_state *s, char *buf, size_t size)
{
	size_t n = strlen(s->conf->model_server);
	while (n > 0 && s->conf->model_server[n - 1] == '/')
		n--;
	snprintf(buf, size, "%.*s/model", (int)n, s->conf->model_server);
}

static void failed(struct server_state *s, uint64_t *counter, const char *what, const char *err)
{
	(*counter)++;
	uint64_t max = s->conf->model_refresh_ns;
	s->backoff_ns = s->backoff_ns ? s->backoff_ns * 2 : s->conf->model_retry_ns;
	if (s->backoff_ns > max)
		s->backoff_ns = max;
	const struct model *cur = estimator_model(s->app->est);
	log_rl(&s->rl, WB_LOG_WARN, "model server %s: %s; keeping model %s, next try in %.1f s",
	       what, err, cur ? cur->name : "none", (double)s->backoff_ns / 1e9);
	schedule(s, s->backoff_ns);
}

static void answer(struct server_state *s, enum wb_httpc_result res, struct wb_httpc_resp *resp,
		   const char *err)
{
	char url[1100], perr[MODEL_ERR_MAX];
	server_url(s, url, sizeof(url));
	if (res == WB_HTTPC_STATUS) {
		failed(s, s->refused, "refused the request", err);
		return;
	}
	if (res != WB_HTTPC_OK) {
		failed(s, s->unreachable, "unreachable", err);
		return;
	}
	struct model *m = malloc(sizeof(*m));
	/* weight=true asks for weights JSON; AbsPower was asked for. */
	struct model_hint hint = {NULL, "AbsPower", (uint64_t)s->app->conf->model_cores};
	if (!m)
		snprintf(perr, sizeof(perr), "out of memory");
	if (!m || model_parse(resp->body ? resp->body : "", resp->len, url, &hint, m, perr,
			      sizeof(perr)) < 0) {
		free(m);
		failed(s, s->bad_answer, "answered no model estimd can use", perr);
		return;
	}
	if (model_check_grid(m, est_zone_bound_w(s->app), perr, sizeof(perr)) < 0) {
		free(m);
		(*s->app->models_implausible)++;
		failed(s, s->bad_answer, "answered a model estimd refuses", perr);
		return;
	}
	s->backoff_ns = 0;
	(*s->models)++;
	est_offer_model(s->app, m);
	schedule(s, s->conf->model_refresh_ns);
}

static int on_done(struct wb_daemon *d, int fd, void *arg)
{
	struct server_state *s = arg;
	struct wb_httpc_resp resp;
	char err[1024];
	enum wb_httpc_result res = wb_httpc_job_finish(s->job, &resp, err, sizeof(err));
	s->job = NULL;
	answer(s, res, &resp, err);
	wb_httpc_resp_free(&resp);
	return -1; /* the job's fd is closed: stop watching it */
}

static void request(struct server_state *s)
{
	if (s->job || !s->conf->model_server[0])
		return;
	struct kepler_metrics km;
	/* usaged's counters as the last slot named them (none before the first slot). */
	char names[4][16];
	size_t n = 0;
	snprintf(s->asked, sizeof(s->asked), "%s", s->slot_counters);
	char tmp[64];
	snprintf(tmp, sizeof(tmp), "%s", s->slot_counters);
	for (char *save = NULL, *t = strtok_r(tmp, ",", &save); t && n < 4;
	     t = strtok_r(NULL, ",", &save))
		snprintf(names[n++], sizeof(names[0]), "%s", t);
	kepler_metrics_from((const char(*)[16])names, n, &km);
	struct km_spec spec;
	char err[1024];
	bool have_spec = mspec_read_env(&spec, err, sizeof(err)) == 0;
	if (!have_spec)
		log_rl(&s->rl, WB_LOG_WARN, "machine spec: %s; asking the model server without one",
		       err);
	char *body = kepler_model_request(&km, "AbsPower", have_spec ? &spec : NULL);
	char url[1100];
	server_url(s, url, sizeof(url));
	struct wb_httpc_opts opts = {
	    .timeout_ms = (long)(s->conf->model_server_timeout_ns / WB_NS_PER_MS),
	    .accept = "application/json",
	};
	(*s->requests)++;
	if (!body) {
		failed(s, s->unreachable, "request", "out of memory");
		return;
	}
	log_debug("model server: POST %s %s", url, body);
	s->job = wb_httpc_start("POST", url, body, strlen(body), &opts, err, sizeof(err));
	free(body);
	if (!s->job) {
		failed(s, s->unreachable, "request", err);
		return;
	}
	if (wb_daemon_watch_fd(s->app->d, wb_httpc_job_fd(s->job), on_done, s) < 0) {
		/* Nothing would collect it, and the loop never waits on a peer: tried again later.
		 */
		wb_httpc_job_cancel(&s->job);
		failed(s, s->unreachable, "request", "cannot watch the request's fd");
	}
}

static int on_timer(zloop_t *loop, int timer_id, void *arg)
{
	struct server_state *s = arg;
	s->timer = -1;
	request(s);
	return 0;
}

static void schedule(struct server_state *s, uint64_t delay_ns)
{
	if (s->timer >= 0)
		wb_daemon_timer_end(s->app->d, s->timer);
	s->timer = wb_daemon_timer_once(s->app->d, delay_ns, on_timer, s);
}

static int server_start(struct est_app *app, void *state, const void *sconf, bool *usage, char *err,
			size_t errlen)
{
	struct server_state *s = state;
	s->app = app;
	s->conf = sconf;
	s->timer = -1;
	s->rl = (struct wb_ratelimit)WB_RATELIMIT_INIT;
	if (s->conf->model_server[0]) {
		log_info("model server %s: asked now and every %.0f s", s->conf->model_server,
			 (double)s->conf->model_refresh_ns / 1e9);
		schedule(s, WB_NS_PER_MS);
	}
	return 0;
}

static void server_slot(struct est_app *app, void *state, const struct wb_aligned *a,
			bool model_mode)
{
	struct server_state *s = state;
	counters_key(a, s->slot_counters, sizeof(s->slot_counters));
	/* usaged's features changed since the model server was asked: ask again now. */
	if (s->conf->model_server[0] && !s->job && strcmp(s->slot_counters, s->asked) != 0)
		schedule(s, WB_NS_PER_MS);
}

static void server_reload(struct est_app *app, void *state, const void *old_sconf,
			  const void *sconf)
{
	struct server_state *s = state;
	s->conf = sconf;
	/* The model file replaced the model server's: ask it again now. */
	if (s->conf->model_server[0] && !s->job)
		schedule(s, WB_NS_PER_MS);
}

static void server_stop(struct est_app *app, void *state)
{
	struct server_state *s = state;
	wb_httpc_job_cancel(&s->job); /* a hung model server never holds the stop */
}

const struct est_source est_server_source = {
    .name = "server",
    EST_SOURCE_KEYS(keys, struct server_conf),
    EST_SOURCE_STATE(struct server_state, stats),
    EST_SOURCE_HOOKS(server_conf, server_start, server_slot, NULL, server_reload, server_stop)};
