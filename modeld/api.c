/*
 * modeld's HTTP API on the shared server (lib/httpd.h): Kepler's model server
 * (POST /model, GET /best-models), its offline trainer (POST /train, train.c) plus
 * GET /models and /healthz. Request bodies
 * are bounded; every refusal is a 4xx with a one-line reason, counted by kind.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "log.h"
#include "modeld.h"

struct api {
	struct wb_httpd *srv;
	struct md_store *store;
	struct api_counters *ctr;
	size_t max_body, max_train_body;
	struct wb_ratelimit rl;
};

/* What one request has collected so far (MHD's *req_cls). */
struct req {
	char *body;
	size_t len, cap, max; /* max: the body limit of its path */
	bool too_big;
};

static enum MHD_Result reply(struct api *a, struct MHD_Connection *con, unsigned status,
			     const char *type, const void *body, size_t len)
{
	return wb_httpd_reply(a->srv, con, status, type, body, len);
}

/* A refusal: 4xx with the reason as text, counted and logged (rate-limited). */
static enum MHD_Result refuse(struct api *a, struct MHD_Connection *con, unsigned status,
			      uint64_t *counter, const char *url, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
static enum MHD_Result refuse(struct api *a, struct MHD_Connection *con, unsigned status,
			      uint64_t *counter, const char *url, const char *fmt, ...)
{
	char msg[MD_ERR_MAX + 64];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg - 1, fmt, ap);
	va_end(ap);
	md_one_line(msg);
	if (counter)
		(*counter)++;
	const char *who = wb_httpd_client(con);
	log_rl(&a->rl, WB_LOG_INFO, "http: %s %s: %u %s", who && who[0] ? who : "?", url, status,
	       msg);
	strcat(msg, "\n");
	return reply(a, con, status, "text/plain; charset=utf-8", msg, strlen(msg));
}

static enum MHD_Result reply_json(struct api *a, struct MHD_Connection *con, json_t *j)
{
	char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	if (!text)
		return reply(a, con, MHD_HTTP_INTERNAL_SERVER_ERROR, "text/plain; charset=utf-8",
			     "out of memory\n", 14);
	enum MHD_Result rc = reply(a, con, MHD_HTTP_OK, "application/json", text, strlen(text));
	free(text);
	return rc;
}

/* ---- POST /model ---- */
static enum MHD_Result post_model(struct api *a, struct MHD_Connection *con, const struct req *q)
{
	struct md_request r;
	char err[MD_ERR_MAX];
	if (md_request_parse(q->body ? q->body : "", q->len, &r, err, sizeof err) < 0)
		return refuse(a, con, MHD_HTTP_BAD_REQUEST, &a->ctr->bad_requests, "/model", "%s",
			      err);
	a->ctr->model_requests++;
	const struct md_model *m = md_select(a->store, &r, err, sizeof err);
	bool weight = r.weight;
	md_request_free(&r);
	if (!m)
		return refuse(a, con, MHD_HTTP_BAD_REQUEST, &a->ctr->no_model, "/model",
			      "cannot find a model: %s", err);
	log_debug("http: /model: %s/%s/%s/%s/%s (mae %g)", m->pipeline, m->source, m->output,
		  m->group, m->name, m->mae);
	if (weight)
		return reply_json(a, con, md_weight_answer(a->store, m));
	char *zip;
	size_t len;
	if (md_model_zip(m, &zip, &len, err, sizeof err) < 0) {
		log_rl(&a->rl, WB_LOG_WARN, "http: /model: %s/%s: cannot build the archive: %s",
		       m->pipeline, m->name, err);
		return reply(a, con, MHD_HTTP_INTERNAL_SERVER_ERROR, "text/plain; charset=utf-8",
			     "cannot build the archive\n", 25);
	}
	char disp[MD_NAME_MAX + 48];
	snprintf(disp, sizeof disp, "attachment; filename=%s.zip", m->name);
	const char *const headers[] = {MHD_HTTP_HEADER_CONTENT_DISPOSITION, disp, NULL};
	return wb_httpd_reply_with(a->srv, con, MHD_HTTP_OK, "application/zip", zip, len,
				   MHD_RESPMEM_MUST_FREE, headers);
}

/* ---- POST /train ---- */
static enum MHD_Result post_train(struct api *a, struct MHD_Connection *con, const struct req *q)
{
	struct md_train_result res;
	char err[MD_ERR_MAX];
	int status = md_train(q->body ? q->body : "", q->len, a->store->dir, &res, err, sizeof err);
	a->ctr->train.requests++;
	if (status >= 500) {
		log_rl(&a->rl, WB_LOG_WARN, "http: /train: %s", err);
		return reply(a, con, (unsigned)status, "text/plain; charset=utf-8",
			     "cannot write the pipeline\n", 26);
	}
	if (status)
		return refuse(a, con, (unsigned)status, &a->ctr->train.refused, "/train", "%s",
			      err);
	a->ctr->train.trained++;
	log_info(
	    "http: /train: pipeline %s from %zu intervals: AbsPower mae %.3f W, DynPower mae %.3f W (-1: not asked)%s%s",
	    res.name, res.intervals, res.abs_mae_w, res.dyn_mae_w,
	    res.skipped[0] ? "; trainers not trained: " : "", res.skipped);
	char disp[96];
	snprintf(disp, sizeof disp, "attachment; filename=%s.zip", res.name);
	const char *const headers[] = {MHD_HTTP_HEADER_CONTENT_DISPOSITION, disp, NULL};
	return wb_httpd_reply_with(a->srv, con, MHD_HTTP_OK, "application/zip", res.zip, res.len,
				   MHD_RESPMEM_MUST_FREE, headers);
}

/* ---- GET /best-models ---- */
static enum MHD_Result get_best(struct api *a, struct MHD_Connection *con)
{
	const char *src = MHD_lookup_connection_value(con, MHD_GET_ARGUMENT_KIND, "energy-source");
	const char *ot = MHD_lookup_connection_value(con, MHD_GET_ARGUMENT_KIND, "output-type");
	const char *fg = MHD_lookup_connection_value(con, MHD_GET_ARGUMENT_KIND, "feature-group");
	const char *nts = MHD_lookup_connection_value(con, MHD_GET_ARGUMENT_KIND, "node-type");
	const char *flt = MHD_lookup_connection_value(con, MHD_GET_ARGUMENT_KIND, "filter");
	char err[MD_ERR_MAX];
	struct md_filter filter;
	int64_t nt = -1;
	if (!src || !src[0] || strstr(src, "rapl"))
		src = "rapl-sysfs";
	if (ot && strcmp(ot, "AbsPower") && strcmp(ot, "DynPower"))
		return refuse(a, con, MHD_HTTP_BAD_REQUEST, &a->ctr->bad_requests, "/best-models",
			      "output-type: unknown \"%.32s\" (AbsPower or DynPower)", ot);
	if (fg && !md_group_find(fg))
		return refuse(a, con, MHD_HTTP_BAD_REQUEST, &a->ctr->bad_requests, "/best-models",
			      "feature-group: unknown \"%.32s\"", fg);
	if (nts && (wb_parse_int(nts, &nt) < 0 || nt < -1))
		return refuse(a, con, MHD_HTTP_BAD_REQUEST, &a->ctr->bad_requests, "/best-models",
			      "node-type: \"%.32s\" is not a node type", nts);
	if (md_filter_parse(flt ? flt : "", &filter, err, sizeof err) < 0)
		return refuse(a, con, MHD_HTTP_BAD_REQUEST, &a->ctr->bad_requests, "/best-models",
			      "%s", err);
	static const char *const outputs[] = {"AbsPower", "DynPower"};
	json_t *res = json_object();
	for (size_t o = 0; o < 2; o++) {
		if (ot && strcmp(ot, outputs[o]))
			continue;
		json_t *by = json_object();
		for (size_t g = 0; g < md_ngroups; g++) {
			if (fg && strcmp(fg, md_groups[g].name))
				continue;
			/* Kepler: the lowest mae of the group, node type exact (no loose fallback)
			 */
			const struct md_model *best = NULL;
			for (size_t i = 0; i < a->store->nmodels; i++) {
				const struct md_model *m = a->store->models[i];
				const struct md_pipeline *mp =
				    md_store_pipeline(a->store, m->pipeline);
				if ((mp && mp->apart) || strcmp(m->source, src) ||
				    strcmp(m->output, outputs[o]) ||
				    strcmp(m->group, md_groups[g].name) ||
				    (nt >= 0 && m->node_type != nt) || isnan(m->mae) ||
				    !md_filter_pass(&filter, m->meta))
					continue;
				if (!best || m->mae < best->mae)
					best = m;
			}
			if (best)
				json_object_set_new(by, md_groups[g].name, json_string(best->name));
		}
		json_object_set_new(res, outputs[o], by);
	}
	return reply_json(a, con, res);
}

/* ---- GET /models ---- */
static enum MHD_Result get_models(struct api *a, struct MHD_Connection *con)
{
	const struct md_store *s = a->store;
	json_t *models = json_array(), *errors = json_array(), *pipes = json_array();
	for (size_t i = 0; i < s->nmodels; i++) {
		const struct md_model *m = s->models[i];
		json_t *feats = json_array();
		for (size_t f = 0; f < m->nfeat; f++)
			json_array_append_new(feats, json_string(m->features[f]));
		json_t *mape = json_object_get(m->meta, "mape");
		json_array_append_new(
		    models,
		    json_pack(
			"{s:s, s:s, s:s, s:s, s:s, s:s, s:i, s:o, s:O, s:o, s:b, s:s, s:s, s:s?}",
			"pipeline", m->pipeline, "source", m->source, "output_type", m->output,
			"feature_group", m->group, "model_name", m->name, "trainer", m->trainer,
			"node_type", m->node_type, "mae",
			isnan(m->mae) ? json_null() : json_real(m->mae), "mape",
			mape ? mape : json_null(), "features", feats, "weight",
			md_trainer_weight_capable(m->trainer) && m->weight, "origin", m->origin,
			"path", m->dir, "archive", m->archive));
	}
	for (size_t i = 0; i < s->nerrors; i++)
		json_array_append_new(errors, json_pack("{s:s, s:s}", "path", s->errors[i].path,
							"reason", s->errors[i].reason));
	for (size_t i = 0; i < s->npipes; i++)
		json_array_append_new(
		    pipes, json_pack("{s:s, s:s, s:b, s:b, s:O}", "name", s->pipes[i].name, "path",
				     s->pipes[i].dir, "imported", s->pipes[i].imported, "untrusted",
				     s->pipes[i].apart, "node_types", s->pipes[i].index));
	return reply_json(
	    a, con,
	    json_pack("{s:o, s:o, s:o}", "pipelines", pipes, "models", models, "errors", errors));
}

static void on_completed(void *cls, struct MHD_Connection *con, void **req_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct req *q = *req_cls;
	if (q) {
		free(q->body);
		free(q);
		*req_cls = NULL;
	}
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *con, const char *url,
				  const char *method, const char *version, const char *upload_data,
				  size_t *upload_data_size, void **req_cls)
{
	struct api *a = cls;
	struct req *q = *req_cls;
	bool post = !strcmp(method, MHD_HTTP_METHOD_POST);
	if (!q) {
		if (!(q = calloc(1, sizeof *q)))
			return MHD_NO;
		*req_cls = q;
		q->max =
		    !strcmp(url, "/train") && a->max_train_body ? a->max_train_body : a->max_body;
		const char *cl = MHD_lookup_connection_value(con, MHD_HEADER_KIND,
							     MHD_HTTP_HEADER_CONTENT_LENGTH);
		int64_t n;
		/* an announced oversized body is dropped unread, not buffered; the 413 comes once
		 * it is in, since a client still sending would not read an earlier answer */
		if (post && cl && wb_parse_int(cl, &n) == 0 && (uint64_t)n > q->max)
			q->too_big = true;
		return MHD_YES;
	}
	if (*upload_data_size) {
		size_t n = *upload_data_size;
		*upload_data_size = 0;
		if (q->too_big || q->len + n > q->max) {
			q->too_big = true;
			return MHD_YES;
		}
		if (q->len + n + 1 > q->cap) {
			size_t cap = (q->len + n + 1) * 2;
			char *b = realloc(q->body, cap < q->max + 1 ? cap : q->max + 1);
			if (!b)
				return MHD_NO;
			q->body = b;
			q->cap = cap < q->max + 1 ? cap : q->max + 1;
		}
		memcpy(q->body + q->len, upload_data, n);
		q->len += n;
		q->body[q->len] = '\0';
		return MHD_YES;
	}
	if (q->too_big)
		return refuse(a, con, MHD_HTTP_CONTENT_TOO_LARGE, &a->ctr->too_large, url,
			      "request body over %zu bytes", q->max);
	/* every path but /healthz needs the user when auth_user is set (the store's listing too) */
	enum MHD_Result rc;
	if (strcmp(url, "/healthz") && !wb_httpd_auth(a->srv, con, url, &rc))
		return rc;
	if (!strcmp(url, "/model")) {
		if (!post)
			return refuse(a, con, MHD_HTTP_METHOD_NOT_ALLOWED, &a->ctr->bad_requests,
				      url, "%s: use POST with a JSON ModelRequest", method);
		return post_model(a, con, q);
	}
	if (!strcmp(url, "/train") && a->max_train_body) {
		if (!post)
			return refuse(a, con, MHD_HTTP_METHOD_NOT_ALLOWED, &a->ctr->bad_requests,
				      url, "%s: use POST with a JSON TrainRequest", method);
		return post_train(a, con, q);
	}
	bool get = !strcmp(method, MHD_HTTP_METHOD_GET) || !strcmp(method, MHD_HTTP_METHOD_HEAD);
	if (!strcmp(url, "/best-models") || !strcmp(url, "/models") || !strcmp(url, "/healthz")) {
		if (!get)
			return refuse(a, con, MHD_HTTP_METHOD_NOT_ALLOWED, &a->ctr->bad_requests,
				      url, "%s: use GET", method);
		if (!strcmp(url, "/healthz"))
			return reply(a, con, MHD_HTTP_OK, "text/plain; charset=utf-8", "ok\n", 3);
		return !strcmp(url, "/models") ? get_models(a, con) : get_best(a, con);
	}
	return refuse(
	    a, con, MHD_HTTP_NOT_FOUND, &a->ctr->bad_requests, url,
	    "not found: try POST /model, POST /train, GET /best-models, /models or /healthz");
}

struct api *api_new(const struct wb_httpd_opts *o, zloop_t *loop, struct md_store *store,
		    size_t max_body, size_t max_train_body, struct api_counters *ctr)
{
	struct api *a = calloc(1, sizeof *a);
	if (!a)
		return NULL;
	a->store = store;
	a->ctr = ctr;
	a->max_body = max_body;
	a->max_train_body = max_train_body;
	a->rl = (struct wb_ratelimit)WB_RATELIMIT_INIT;
	struct wb_httpd_opts so = *o;
	so.handler = on_request;
	so.handler_arg = a;
	so.completed = on_completed;
	so.completed_arg = a;
	if (!(a->srv = wb_httpd_new(&so, loop, &ctr->http))) {
		free(a);
		return NULL;
	}
	return a;
}

uint16_t api_port(const struct api *a)
{
	return wb_httpd_port(a->srv);
}

void api_destroy(struct api **self_p)
{
	if (!self_p || !*self_p)
		return;
	wb_httpd_destroy(&(*self_p)->srv);
	free(*self_p);
	*self_p = NULL;
}
