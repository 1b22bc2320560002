/*
 * wattbus-modeld: collects the models estimd trainers publish (model messages),
 * keeps them in Kepler's model-db layout beside any imported pipeline, and
 * serves Kepler's model server API on HTTP. See wattbus-modeld(8).
 */
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "daemon.h"
#include "log.h"
#include "modeld.h"
#include "promtrain.h"

struct modeld_conf {
	char *pub;
	struct wb_strlist sub;
	struct wb_httpd_conf http;
	char *store;
	struct wb_strlist import;
	char *pipeline;
	char *source;
	int64_t max_body_bytes, train_max_body_bytes;
	struct wb_strlist trusted_trainers;
	char *untrusted_pipeline;
	int64_t max_models, max_models_per_host, max_node_types, max_node_types_per_host;
	int64_t max_store_bytes, max_store_bytes_per_host, max_trainers;
	double models_per_host_per_minute;
	char *prometheus;
	uint64_t train_interval_ns, train_window_ns, train_step_ns, prometheus_timeout_ns;
	int64_t prometheus_max_bytes;
};

#define K(name, type, field, def, min, max, help)                                                  \
	{                                                                                          \
		name, type, offsetof(struct modeld_conf, field), def, min, max, NULL, help         \
	}
static const struct wb_conf_key modeld_keys[] = {
    K("pub", WB_CONF_STR, pub, "ipc://%r/modeld.sock", 0, 0,
      "endpoint modeld's stat messages are published on"),
    K("sub", WB_CONF_LIST, sub, "ipc://%r/estimd.sock", 0, 0,
      "endpoints to read model/ messages from (estimd trainers; tcp:// with CURVE across hosts)"),
    K("store", WB_CONF_STR, store, "/var/lib/wattbus/models", 0, 0,
      "directory the models received are kept in (Kepler's model-db layout)"),
    K("import", WB_CONF_LIST, import, "", 0, 0,
      "published model-db pipeline folders served as they are (read-only), e.g. ec2-0.7.11"),
    K("pipeline", WB_CONF_STR, pipeline, "wattbus", 0, 0,
      "pipeline name the models received are filed under"),
    K("source", WB_CONF_STR, source, "rapl-sysfs", 0, 0,
      "energy source the models received are filed under (what their trainers metered)"),
    K("max_body_bytes", WB_CONF_INT, max_body_bytes, "65536", 1024, 16777216,
      "largest request body; larger ones get 413"),
    K("train_max_body_bytes", WB_CONF_INT, train_max_body_bytes, "16777216", 0, 268435456,
      "largest POST /train body (Kepler's TrainRequest with its Prometheus results); 0: no /train"),
    K("trusted_trainers", WB_CONF_LIST, trusted_trainers, "", 0, 0,
      "trainer host names whose models (and self-declared mae) go to the served pipeline; others go to untrusted_pipeline, served only when a request names it; * trusts every trainer"),
    K("untrusted_pipeline", WB_CONF_STR, untrusted_pipeline, "wattbus-untrusted", 0, 0,
      "pipeline the models of trainers not in trusted_trainers are filed under"),
    K("max_models", WB_CONF_INT, max_models, "4096", 1, 1000000,
      "models from the bus held in all; past it a new one is refused (models_over_budget)"),
    K("max_models_per_host", WB_CONF_INT, max_models_per_host, "64", 1, 1000000,
      "models from the bus held per trainer host"),
    K("max_node_types", WB_CONF_INT, max_node_types, "256", 1, 100000,
      "node types the bus's pipelines hold in all"),
    K("max_node_types_per_host", WB_CONF_INT, max_node_types_per_host, "4", 1, 100000,
      "node types one trainer host is a member of"),
    K("max_store_bytes", WB_CONF_INT, max_store_bytes, "268435456", 65536, INT64_MAX,
      "bytes of the bus's model files on disk in all"),
    K("max_store_bytes_per_host", WB_CONF_INT, max_store_bytes_per_host, "4194304", 4096, INT64_MAX,
      "bytes of the bus's model files on disk per trainer host"),
    K("max_trainers", WB_CONF_INT, max_trainers, "1024", 1, 1000000,
      "trainer hosts tracked (a host that holds nothing makes room for a new one)"),
    K("models_per_host_per_minute", WB_CONF_DOUBLE, models_per_host_per_minute, "60", 0, 1e6,
      "models accepted from one trainer host a minute (a bucket of that many; 0: no limit); past it models_rate_limited"),
    K("prometheus", WB_CONF_STR | WB_CONF_RESTART, prometheus, "", 0, 0,
      "Prometheus base URL to train from (Kepler's PROM_SERVER), e.g. http://localhost:9090; empty: no online training from Prometheus"),
    K("train_interval", WB_CONF_DURATION | WB_CONF_RESTART, train_interval_ns, "300s", 1e9, 86400e9,
      "how often to query Prometheus and train (Kepler's PROM_QUERY_INTERVAL)"),
    K("train_window", WB_CONF_DURATION | WB_CONF_RESTART, train_window_ns, "300s", 10e9, 86400e9,
      "how far back each round queries (Kepler queries PROM_QUERY_INTERVAL back)"),
    K("train_step", WB_CONF_DURATION | WB_CONF_RESTART, train_step_ns, "3s", 1e8, 3600e9,
      "the range queries' step (Kepler's PROM_QUERY_STEP)"),
    K("prometheus_timeout", WB_CONF_DURATION | WB_CONF_RESTART, prometheus_timeout_ns, "30s", 1e8,
      600e9, "deadline of one range query"),
    K("prometheus_max_bytes", WB_CONF_INT | WB_CONF_RESTART, prometheus_max_bytes, "67108864",
      65536, 1073741824, "largest answer of one range query"),
    WB_HTTPD_KEYS(struct modeld_conf, http, ":8100", "256"),
};
#undef K

static int check_conf(const void *conf, char *err, size_t errlen)
{
	const struct modeld_conf *c = conf;
	if (wb_httpd_conf_check(&c->http, err, errlen) < 0)
		return -1;
	if (!c->store[0]) {
		snprintf(err, errlen, "store: a directory is needed");
		return -1;
	}
	if (!c->pipeline[0] || strchr(c->pipeline, '/') || c->pipeline[0] == '.') {
		snprintf(err, errlen, "pipeline: \"%s\" is not a folder name", c->pipeline);
		return -1;
	}
	if (!c->untrusted_pipeline[0] || strchr(c->untrusted_pipeline, '/') ||
	    c->untrusted_pipeline[0] == '.' || !strcmp(c->untrusted_pipeline, c->pipeline)) {
		snprintf(err, errlen,
			 "untrusted_pipeline: \"%s\" is not a folder name other than pipeline's",
			 c->untrusted_pipeline);
		return -1;
	}
	if (!c->source[0] || strchr(c->source, '/') || c->source[0] == '.') {
		snprintf(err, errlen, "source: \"%s\" is not a folder name", c->source);
		return -1;
	}
	return 0;
}

static const struct wb_stage modeld_stage = WB_STAGE(
    "modeld", "Collect trained power models and serve them with Kepler's model server API.",
    modeld_keys, struct modeld_conf, check_conf);

struct modeld {
	struct wb_daemon *d;
	struct md_store *store;
	struct api *api;
	struct promtrain *prom;
	struct api_counters ctr;
	uint64_t held, skipped;			    /* the store's size, mirrored */
	struct wb_ratelimit rl, rl_budget, rl_rate; /* one per kind of refusal: a flood of one
						     * does not hide the others */
	uint64_t *c_received, *c_stored, *c_kept, *c_rejected, *c_over_budget, *c_rate_limited,
	    *c_imports_refused;
};

/* Counted here, through the stat table. */
static const struct wb_stat_row counted[] = {
    WB_STAT_ROW(struct modeld, c_received, "models_received"),
    WB_STAT_ROW(struct modeld, c_stored, "models_stored"),
    WB_STAT_ROW(struct modeld, c_kept, "models_kept"),
    WB_STAT_ROW(struct modeld, c_rejected, "models_rejected"),
    WB_STAT_ROW(struct modeld, c_over_budget, "models_over_budget"),
    WB_STAT_ROW(struct modeld, c_rate_limited, "models_rate_limited"),
    WB_STAT_ROW(struct modeld, c_imports_refused, "imports_refused"),
};

/* Kept by the store and the HTTP side, copied into the stat message. */
static const struct wb_stat_row mirrored[] = {
    WB_STAT_ROW(struct modeld, held, "models_held"),
    WB_STAT_ROW(struct modeld, skipped, "store_entries_skipped"),
    WB_STAT_ROW(struct modeld, ctr.model_requests, "model_requests"),
    WB_STAT_ROW(struct modeld, ctr.bad_requests, "http_bad_requests"),
    WB_STAT_ROW(struct modeld, ctr.too_large, "http_too_large"),
    WB_STAT_ROW(struct modeld, ctr.no_model, "http_no_model"),
    WB_STAT_ROW(struct modeld, ctr.train.requests, "train_requests"),
    WB_STAT_ROW(struct modeld, ctr.train.trained, "train_pipelines"),
    WB_STAT_ROW(struct modeld, ctr.train.refused, "train_refused"),
    WB_STAT_ROW(struct modeld, ctr.http.requests[1], "http_2xx"),
    WB_STAT_ROW(struct modeld, ctr.http.requests[3], "http_4xx"),
    WB_STAT_ROW(struct modeld, ctr.http.refused, "http_refused"),
    WB_STAT_ROW(struct modeld, ctr.http.request_timeouts, "http_request_timeouts"),
    WB_STAT_ROW(struct modeld, ctr.http.auth_failures, "http_auth_failures"),
    WB_STAT_ROW(struct modeld, ctr.http.auth_throttled, "http_auth_throttled"),
};

static void mirror(struct modeld *m)
{
	m->held = m->store->nmodels;
	m->skipped = m->store->skipped;
	wb_stats_mirror(wb_daemon_stats(m->d), m, mirrored, sizeof mirrored / sizeof mirrored[0]);
}

static int on_tick(zloop_t *loop, int timer_id, void *arg)
{
	mirror(arg);
	return 0;
}

static void on_msg(struct wb_daemon *d, const struct wb_msg *msg, const struct wb_rx *rx, void *arg)
{
	struct modeld *m = arg;
	if (msg->kind != WB_MODEL)
		return;
	const struct wb_model *mm = &msg->model;
	char err[MD_ERR_MAX];
	const struct md_model *out;
	(*m->c_received)++;
	enum md_put_result r = md_store_put(m->store, mm, wb_mono_ns(), &out, err, sizeof err);
	switch (r) {
	case MD_PUT_ERROR:
	case MD_PUT_OVER_BUDGET:
	case MD_PUT_RATE_LIMITED:
		(*(r == MD_PUT_ERROR	     ? m->c_rejected
		   : r == MD_PUT_OVER_BUDGET ? m->c_over_budget
					     : m->c_rate_limited))++;
		log_rl(r == MD_PUT_ERROR	 ? &m->rl
		       : r == MD_PUT_OVER_BUDGET ? &m->rl_budget
						 : &m->rl_rate,
		       WB_LOG_WARN, "model/%s from %s seq %" PRIu64 " (%s): not stored: %s",
		       mm->env.host, mm->env.src, mm->env.seq, mm->name, err);
		break;
	case MD_PUT_KEPT:
		(*m->c_kept)++;
		log_info("model/%s (%s): %s/%s/%s/%s kept, it has the lower mae (%g)", mm->env.host,
			 mm->name, out->pipeline, out->output, out->group, out->name, out->mae);
		break;
	default:
		(*m->c_stored)++;
		log_info("model/%s (%s): %s %s/%s/%s/%s/%s (mae %g)", mm->env.host, mm->name,
			 r == MD_PUT_NEW ? "stored as" : "replaced", out->pipeline, out->source,
			 out->output, out->group, out->name, out->mae);
	}
	mirror(m);
}

/* The online trainer filed models: the counters follow. */
static void on_filed(void *arg)
{
	mirror(arg);
}

int main(int argc, char **argv)
{
	struct modeld m = {
	    .rl = WB_RATELIMIT_INIT, .rl_budget = WB_RATELIMIT_INIT, .rl_rate = WB_RATELIMIT_INIT};
	m.d = wb_daemon_new(&modeld_stage, argc, argv);
	struct modeld_conf *c = wb_daemon_conf(m.d);
	int rc = WB_EXIT_FAILURE;
	char err[MD_ERR_MAX];
	wb_stats_bind(wb_daemon_stats(m.d), &m, counted, sizeof counted / sizeof counted[0]);
	if (!(m.store = md_store_new(c->store, c->pipeline, c->source))) {
		log_errx("out of memory");
		goto out;
	}
	struct md_policy pol = {
	    .max_models = (size_t)c->max_models,
	    .max_models_per_host = (size_t)c->max_models_per_host,
	    .max_node_types = (size_t)c->max_node_types,
	    .max_node_types_per_host = (size_t)c->max_node_types_per_host,
	    .max_bytes = (uint64_t)c->max_store_bytes,
	    .max_bytes_per_host = (uint64_t)c->max_store_bytes_per_host,
	    .max_hosts = (size_t)c->max_trainers,
	    .models_per_host_per_min = c->models_per_host_per_minute,
	    .trusted = c->trusted_trainers.v,
	    .ntrusted = c->trusted_trainers.n,
	};
	snprintf(pol.apart, sizeof pol.apart, "%s", c->untrusted_pipeline);
	if (md_store_policy(m.store, &pol, err, sizeof err) < 0) {
		log_errx("%s", err);
		goto out;
	}
	if (md_store_load(m.store, err, sizeof err) < 0) {
		log_errx("store %s", err);
		rc = WB_EXIT_USAGE;
		goto out;
	}
	/* a refused import costs that pipeline, not the service: the bus's models and the other
	 * imports are still served, and GET /models lists why */
	for (size_t i = 0; i < c->import.n; i++)
		if (md_store_import(m.store, c->import.v[i], err, sizeof err) < 0) {
			(*m.c_imports_refused)++;
			log_errx("%s", err);
			md_store_note_error(m.store, c->import.v[i], err);
		}
	struct wb_httpd_opts ho = wb_httpd_opts_of(&c->http);
	char *password = NULL;
	if (c->http.auth_user[0] &&
	    !(password = wb_httpd_read_password(c->http.auth_password_file))) {
		rc = WB_EXIT_USAGE;
		goto out;
	}
	ho.auth_user = c->http.auth_user[0] ? c->http.auth_user : NULL;
	ho.auth_pass = password;
	m.api = api_new(&ho, wb_daemon_loop(m.d), m.store, (size_t)c->max_body_bytes,
			(size_t)c->train_max_body_bytes, &m.ctr);
	if (password) {
		explicit_bzero(password, strlen(password));
		free(password);
	}
	if (!m.api)
		goto out;
	static const char *const prefixes[] = {"model/", NULL};
	if (c->sub.n && wb_daemon_subscribe(m.d, &c->sub, prefixes, on_msg, &m) < 0) {
		log_errx("cannot subscribe to the sub endpoints");
		goto out;
	}
	if (wb_daemon_timer(m.d, WB_NS_PER_SEC, on_tick, &m) < 0) {
		log_errx("cannot start the counter timer");
		goto out;
	}
	if (c->prometheus[0]) {
		struct promtrain_opts po = {.url = c->prometheus,
					    .interval_ns = c->train_interval_ns,
					    .window_ns = c->train_window_ns,
					    .step_ns = c->train_step_ns,
					    .timeout_ns = c->prometheus_timeout_ns,
					    .max_bytes = (size_t)c->prometheus_max_bytes};
		if (!(m.prom = promtrain_new(m.d, m.store, &po, on_filed, &m)))
			goto out;
	}
	mirror(&m);
	wb_daemon_set_mode(m.d, c->http.tls_cert[0] ? "https" : "http");
	log_info(
	    "serving the model API on %s%s (port %u): %zu models in %zu pipelines (store %s, %" PRIu64
	    " entries skipped)",
	    c->http.tls_cert[0] ? "https " : "", c->http.listen, api_port(m.api), m.store->nmodels,
	    m.store->npipes, c->store, m.store->skipped);
	rc = wb_daemon_run(m.d);
out:
	promtrain_destroy(&m.prom);
	api_destroy(&m.api);
	md_store_destroy(&m.store);
	wb_daemon_destroy(&m.d);
	return rc;
}
