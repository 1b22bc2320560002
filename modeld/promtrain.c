/*
 * The online trainer from Prometheus (Kepler's online trainer: PROM_SERVER queried every
 * PROM_QUERY_INTERVAL over that window at PROM_QUERY_STEP): every train_interval, one range
 * query per training metric over the last train_window at train_step, one after the other,
 * each on a thread of lib/httpc's (wb_httpc_start) watched by the event loop, so that a slow
 * Prometheus never holds modeld's loop; once all are in, the results are trained and filed
 * in the store (train.c's md_train_into) as models from the bus are, by the same rule.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "httpc.h"
#include "json.h"
#include "log.h"
#include "modeld.h"
#include "promtrain.h"

/* What Kepler's trainer reads (util/prom_types.py), as exportd's 0.9 profile serves it. */
static const char *const queries[] = {
    "kepler_container_bpf_cpu_time_ms_total",  "kepler_container_cpu_cycles_total",
    "kepler_container_cpu_instructions_total", "kepler_container_cache_miss_total",
    "kepler_node_package_joules_total",	       "kepler_node_core_joules_total",
    "kepler_node_uncore_joules_total",	       "kepler_node_dram_joules_total",
    "kepler_node_platform_joules_total",       "kepler_node_node_info",
};
#define NQUERIES (sizeof queries / sizeof queries[0])

struct promtrain {
	struct wb_daemon *d;
	struct md_store *store;
	struct promtrain_opts o;
	char *base; /* the URL without trailing slashes */
	struct wb_httpc_job *job;
	size_t at;	 /* the query running */
	json_t *results; /* query name -> matrix result, filled as the answers come */
	uint64_t start_s, end_s;
	struct wb_ratelimit rl;
	uint64_t *c_ok, *c_failed, *c_busy, *c_trained, *c_untrained;
	promtrain_filed_fn *filed;
	void *filed_arg;
};

static void round_done(struct promtrain *p)
{
	char err[MD_ERR_MAX];
	struct md_train_result res;
	uint64_t now = wb_now_ns();
	size_t before = p->store->nmodels;
	if (md_train_into(p->store, p->results, "prometheus", now, &res, err, sizeof err) < 0) {
		(*p->c_untrained)++;
		log_rl(&p->rl, WB_LOG_WARN, "prometheus: %s: no model trained: %s", p->base, err);
	} else {
		(*p->c_trained)++;
		log_info("prometheus: %s: trained on %zu intervals of the last %" PRIu64
			 " s: AbsPower mae %.3f W, DynPower mae %.3f W; %zu models held (%zu new)",
			 p->base, res.intervals, p->end_s - p->start_s, res.abs_mae_w,
			 res.dyn_mae_w, p->store->nmodels, p->store->nmodels - before);
		if (p->filed)
			p->filed(p->filed_arg);
	}
	json_decref(p->results);
	p->results = NULL;
}

static int start_query(struct promtrain *p);

/* The next query, from a timer: started inside on_done, its fd could take the number of the
 * one on_done stops watching by returning -1. */
static int on_next(zloop_t *loop, int timer_id, void *arg)
{
	start_query(arg);
	return 0;
}

static int on_done(struct wb_daemon *d, int fd, void *arg)
{
	struct promtrain *p = arg;
	struct wb_httpc_resp resp;
	char err[MD_ERR_MAX];
	enum wb_httpc_result r = wb_httpc_job_finish(p->job, &resp, err, sizeof err);
	p->job = NULL;
	json_t *j = r == WB_HTTPC_OK ? wb_httpc_json(&resp, queries[p->at], err, sizeof err) : NULL;
	wb_httpc_resp_free(&resp);
	json_t *result = json_object_get(json_object_get(j, "data"), "result");
	if (j && (strcmp(wb_json_str(j, "status"), "success") || !json_is_array(result))) {
		snprintf(err, sizeof err,
			 "%s: not a Prometheus range query answer (status success, data.result)",
			 queries[p->at]);
		result = NULL;
	}
	if (!result) {
		(*p->c_failed)++;
		log_rl(&p->rl, WB_LOG_WARN, "prometheus: %s; this round is dropped", err);
		json_decref(j);
		json_decref(p->results);
		p->results = NULL;
		return -1;
	}
	(*p->c_ok)++;
	json_object_set(p->results, queries[p->at], result);
	json_decref(j);
	if (++p->at == NQUERIES) {
		round_done(p);
	} else if (wb_daemon_timer_once(p->d, 1, on_next, p) < 0) {
		(*p->c_failed)++;
		log_rl(&p->rl, WB_LOG_WARN,
		       "prometheus: cannot start a timer; this round is dropped");
		json_decref(p->results);
		p->results = NULL;
	}
	return -1; /* the job's fd is closed: stop watching it */
}

static int start_query(struct promtrain *p)
{
	char url[1024], err[MD_ERR_MAX];
	snprintf(url, sizeof url,
		 "%s/api/v1/query_range?query=%s&start=%" PRIu64 "&end=%" PRIu64 "&step=%.3f",
		 p->base, queries[p->at], p->start_s, p->end_s, (double)p->o.step_ns / 1e9);
	struct wb_httpc_opts ho = {.accept = "application/json",
				   .timeout_ms = (long)(p->o.timeout_ns / 1000000),
				   .max_body = p->o.max_bytes};
	p->job = wb_httpc_start("GET", url, NULL, 0, &ho, err, sizeof err);
	if (p->job && wb_daemon_watch_fd(p->d, wb_httpc_job_fd(p->job), on_done, p) == 0)
		return 0;
	if (p->job) {
		struct wb_httpc_resp resp;
		wb_httpc_job_finish(p->job, &resp, err, sizeof err);
		wb_httpc_resp_free(&resp);
		p->job = NULL;
		snprintf(err, sizeof err, "cannot watch the request's fd");
	}
	(*p->c_failed)++;
	log_rl(&p->rl, WB_LOG_WARN, "prometheus: %s", err);
	json_decref(p->results);
	p->results = NULL;
	return -1;
}

static int on_round(zloop_t *loop, int timer_id, void *arg)
{
	struct promtrain *p = arg;
	if (p->job || p->results) { /* the last round still waits for an answer */
		(*p->c_busy)++;
		return 0;
	}
	p->end_s = wb_now_ns() / WB_NS_PER_SEC; /* Prometheus' time: the wall clock */
	p->start_s = p->end_s - p->o.window_ns / WB_NS_PER_SEC;
	p->at = 0;
	if (!(p->results = json_object())) {
		(*p->c_failed)++;
		return 0;
	}
	start_query(p);
	return 0;
}

struct promtrain *promtrain_new(struct wb_daemon *d, struct md_store *store,
				const struct promtrain_opts *o, promtrain_filed_fn *filed,
				void *filed_arg)
{
	struct promtrain *p = calloc(1, sizeof *p);
	if (!p)
		return NULL;
	p->d = d;
	p->store = store;
	p->o = *o;
	p->filed = filed;
	p->filed_arg = filed_arg;
	p->rl = (struct wb_ratelimit)WB_RATELIMIT_INIT;
	size_t ul = strlen(o->url);
	while (ul && o->url[ul - 1] == '/')
		ul--;
	if (!(p->base = strndup(o->url, ul))) {
		free(p);
		return NULL;
	}
	static const struct wb_stat_row rows[] = {
	    WB_STAT_ROW(struct promtrain, c_ok, "prom_queries_ok"),
	    WB_STAT_ROW(struct promtrain, c_failed, "prom_queries_failed"),
	    WB_STAT_ROW(struct promtrain, c_busy, "prom_rounds_busy"),
	    WB_STAT_ROW(struct promtrain, c_trained, "prom_rounds_trained"),
	    WB_STAT_ROW(struct promtrain, c_untrained, "prom_rounds_untrained"),
	};
	wb_stats_bind(wb_daemon_stats(d), p, rows, sizeof rows / sizeof rows[0]);
	char err[MD_ERR_MAX];
	if (wb_httpc_load(err, sizeof err) < 0) {
		log_errx("prometheus: %s", err);
		promtrain_destroy(&p);
		return NULL;
	}
	/* the first round at once, then every interval */
	if (wb_daemon_timer(d, o->interval_ns, on_round, p) < 0 ||
	    wb_daemon_timer_once(d, 1000000, on_round, p) < 0) {
		log_errx("prometheus: cannot start the train timer");
		promtrain_destroy(&p);
		return NULL;
	}
	log_info("prometheus: training from %s every %.0f s over the last %.0f s at %.3f s steps",
		 p->base, (double)o->interval_ns / 1e9, (double)o->window_ns / 1e9,
		 (double)o->step_ns / 1e9);
	return p;
}

void promtrain_destroy(struct promtrain **self_p)
{
	if (!self_p || !*self_p)
		return;
	struct promtrain *p = *self_p;
	if (p->job) {
		struct wb_httpc_resp resp;
		char err[MD_ERR_MAX];
		wb_httpc_job_finish(p->job, &resp, err, sizeof err);
		wb_httpc_resp_free(&resp);
	}
	json_decref(p->results);
	free(p->base);
	free(p);
	*self_p = NULL;
}
