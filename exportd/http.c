/*
 * exportd's HTTP side on the shared server (lib/httpd.h): /metrics (gzip on
 * request, optional basic auth) and /healthz, with a growing penalty for wrong
 * passwords on top of the server's limits.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <czmq.h>
#include <microhttpd.h>

#include "clock.h"
#include "exportd.h"
#include "log.h"

struct http {
	struct wb_httpd *srv;
	http_metrics_fn *fn;
	void *arg;
	struct exportd_counters *ctr;
	int gzip_level;
	struct wb_ratelimit rl;
};

/* ---- pure helpers ---- */
bool http_accepts_gzip(const char *ae)
{
	if (!ae)
		return false;
	/* a comma-separated list of codings with optional ;q=; gzip;q=0 means "not gzip" */
	const char *p = ae;
	while (*p) {
		while (*p == ' ' || *p == '\t' || *p == ',')
			p++;
		const char *tok = p;
		while (*p && *p != ',' && *p != ';' && *p != ' ' && *p != '\t')
			p++;
		size_t len = (size_t)(p - tok);
		double q = 1.0;
		while (*p && *p != ',') {
			if (*p == ';') {
				p++;
				while (*p == ' ' || *p == '\t')
					p++;
				if ((*p == 'q' || *p == 'Q') && p[1] == '=')
					q = strtod(p + 2, NULL);
			} else {
				p++;
			}
		}
		bool gzip = (len == 4 && !strncasecmp(tok, "gzip", 4)) || (len == 1 && *tok == '*');
		if (gzip && q > 0)
			return true;
	}
	return false;
}

/* ---- responses ---- */
static enum MHD_Result reply_text(struct http *self, struct MHD_Connection *con, unsigned status,
				  const char *body)
{
	static const char *const allow[] = {MHD_HTTP_HEADER_ALLOW, "GET, HEAD", NULL};
	return wb_httpd_reply_with(self->srv, con, status, "text/plain; charset=utf-8", body,
				   strlen(body), MHD_RESPMEM_PERSISTENT,
				   status == MHD_HTTP_METHOD_NOT_ALLOWED ? allow : NULL);
}

static enum MHD_Result reply_metrics(struct http *self, struct MHD_Connection *con)
{
	struct rbuf body = {0};
	uint64_t t0 = wb_mono_ns();
	const char *ae =
	    MHD_lookup_connection_value(con, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT_ENCODING);
	/* gzip'd as it is rendered: the whole text is never held (RBUF_GZ_CHUNK at a time) */
	bool gz = self->gzip_level > 0 && http_accepts_gzip(ae) &&
		  rbuf_gzip_begin(&body, self->gzip_level) == 0;
	self->fn(self->arg, &body);
	if (gz)
		rbuf_gzip_end(&body);
	self->ctr->last_render_s = (double)(wb_mono_ns() - t0) / 1e9;
	if (body.oom) {
		rbuf_free(&body);
		log_rl(&self->rl, WB_LOG_WARN, "http: out of memory rendering /metrics");
		return reply_text(self, con, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
	}
	size_t len;
	char *p = rbuf_steal(&body, &len);
	const char *const headers[] = {MHD_HTTP_HEADER_VARY, MHD_HTTP_HEADER_ACCEPT_ENCODING,
				       gz ? MHD_HTTP_HEADER_CONTENT_ENCODING : NULL, "gzip", NULL};
	return wb_httpd_reply_with(self->srv, con, MHD_HTTP_OK,
				   "text/plain; version=0.0.4; charset=utf-8", p, len,
				   MHD_RESPMEM_MUST_FREE, headers);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *con, const char *url,
				  const char *method, const char *version, const char *upload_data,
				  size_t *upload_data_size, void **req_cls)
{
	struct http *self = cls;
	static int headers_seen;
	if (!*req_cls) {
		/* first call: headers only; answer once the (ignored) body is in */
		*req_cls = &headers_seen;
		return MHD_YES;
	}
	if (*upload_data_size) {
		*upload_data_size = 0;
		return MHD_YES;
	}
	if (strcmp(method, MHD_HTTP_METHOD_GET) && strcmp(method, MHD_HTTP_METHOD_HEAD))
		return reply_text(self, con, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed\n");
	if (!strcmp(url, "/healthz"))
		return reply_text(self, con, MHD_HTTP_OK, "ok\n");
	if (strcmp(url, "/metrics"))
		return reply_text(self, con, MHD_HTTP_NOT_FOUND,
				  "not found: try /metrics or /healthz\n");
	enum MHD_Result rc;
	if (!wb_httpd_auth(self->srv, con, "/metrics", &rc))
		return rc;
	return reply_metrics(self, con);
}

/* ---- lifecycle ---- */
struct http *http_new(const struct http_opts *o, void *zloop, http_metrics_fn *fn, void *arg,
		      struct exportd_counters *ctr)
{
	struct http *self = calloc(1, sizeof *self);
	if (!self)
		return NULL;
	self->fn = fn;
	self->arg = arg;
	self->ctr = ctr;
	self->gzip_level = o->gzip_level;
	self->rl = (struct wb_ratelimit)WB_RATELIMIT_INIT;
	struct wb_httpd_opts so = o->srv;
	so.handler = on_request;
	so.handler_arg = self;
	if (!(self->srv = wb_httpd_new(&so, zloop, &ctr->http)))
		goto fail;
	return self;
fail:
	http_destroy(&self);
	return NULL;
}

uint16_t http_port(const struct http *self)
{
	return wb_httpd_port(self->srv);
}

void http_destroy(struct http **self_p)
{
	if (!self_p || !*self_p)
		return;
	struct http *self = *self_p;
	wb_httpd_destroy(&self->srv);
	free(self);
	*self_p = NULL;
}
