/* The HTTP client over libcurl (httpc.h). */
#include "clock.h"
#include "dl.h"
#include "grow.h"
#include "curl.h"
#include "httpc.h"
#include "job.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <curl/curl.h>

#define DEFAULT_TIMEOUT_MS 10000L
#define DEFAULT_MAX_BODY (4u << 20)

static const char *const result_names[WB_HTTPC_NRESULTS] = {
    [WB_HTTPC_OK] = "ok",	    [WB_HTTPC_STATUS] = "status", [WB_HTTPC_CONNECT] = "connect",
    [WB_HTTPC_TIMEOUT] = "timeout", [WB_HTTPC_TLS] = "tls",	  [WB_HTTPC_TOO_BIG] = "too_big",
    [WB_HTTPC_ERROR] = "error",
};

const char *wb_httpc_result_name(enum wb_httpc_result r)
{
	return (unsigned)r < WB_HTTPC_NRESULTS ? result_names[r] : "error";
}

/*
 * libcurl is loaded by the first request (dl.h), so that a daemon without an HTTP peer maps
 * neither it nor the TLS, Kerberos, LDAP and SSH libraries it brings. The build passes its soname.
 */
_Static_assert(sizeof(WB_LIBCURL) > 1, "the Makefile found no soname for libcurl");
static struct wb_curl curl;
static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static char global_err[512];

static void global_init(void)
{
	const struct wb_dl_sym syms[] = {
	    {&curl.global_init, "curl_global_init", true},
	    {&curl.easy_init, "curl_easy_init", true},
	    {&curl.easy_setopt, "curl_easy_setopt", true},
	    {&curl.easy_perform, "curl_easy_perform", true},
	    {&curl.easy_getinfo, "curl_easy_getinfo", true},
	    {&curl.easy_cleanup, "curl_easy_cleanup", true},
	    {&curl.easy_strerror, "curl_easy_strerror", true},
	    {&curl.slist_append, "curl_slist_append", true},
	    {&curl.slist_free_all, "curl_slist_free_all", true},
	    {&curl.multi_init, "curl_multi_init", true},
	    {&curl.multi_add_handle, "curl_multi_add_handle", true},
	    {&curl.multi_remove_handle, "curl_multi_remove_handle", true},
	    {&curl.multi_perform, "curl_multi_perform", true},
	    {&curl.multi_poll, "curl_multi_poll", true},
	    {&curl.multi_info_read, "curl_multi_info_read", true},
	    {&curl.multi_cleanup, "curl_multi_cleanup", true},
	    {&curl.url, "curl_url", true},
	    {&curl.url_set, "curl_url_set", true},
	    {&curl.url_get, "curl_url_get", true},
	    {&curl.url_cleanup, "curl_url_cleanup", true},
	    {&curl.free, "curl_free", true},
	};
	char why[400];
	if (!wb_dl_open(WB_LIBCURL, syms, sizeof(syms) / sizeof(syms[0]), why, sizeof(why))) {
		snprintf(global_err, sizeof(global_err), "%s; install libcurl (Debian: libcurl4)",
			 why);
		return;
	}
	CURLcode rc = curl.global_init(CURL_GLOBAL_DEFAULT);
	if (rc != CURLE_OK)
		snprintf(global_err, sizeof(global_err), "libcurl: %s", curl.easy_strerror(rc));
}

int wb_httpc_load(char *err, size_t errlen)
{
	pthread_once(&global_once, global_init);
	if (!global_err[0])
		return 0;
	snprintf(err, errlen, "%s", global_err);
	return -1;
}

const struct wb_curl *wb_curl_load(char *err, size_t errlen)
{
	return wb_httpc_load(err, errlen) < 0 ? NULL : &curl;
}

struct sink {
	struct wb_httpc_resp *resp;
	size_t cap, max;
	bool too_big;
};

static size_t on_data(char *data, size_t size, size_t n, void *arg)
{
	struct sink *s = arg;
	size_t add = size * n;
	if (add > s->max - s->resp->len) {
		s->too_big = true;
		return 0;
	}
	if (wb_grow(&s->resp->body, &s->cap, s->resp->len + add + 1, 1, 4096) < 0)
		return 0;
	memcpy(s->resp->body + s->resp->len, data, add);
	s->resp->len += add;
	s->resp->body[s->resp->len] = '\0';
	return add;
}

/*
 * Redirects stay where the request went: the same scheme, host and port (libcurl's URL parser
 * resolves a relative Location against the request URL and names the default port), so a model
 * server or BMC that answers 3xx cannot send the request, its bearer token or its body to another
 * host. A refused Location aborts the transfer.
 */
struct redirect_check {
	const char *url; /* the request URL */
	bool in_3xx;	 /* the headers being read are a redirect's */
	bool refused;
	char location[160]; /* the refused Location, printable bytes only */
};

/* A URL's scheme, host and port, or false when libcurl cannot parse it. */
struct url_origin {
	char scheme[16], host[256], port[8];
};

static bool origin_part(CURLU *u, CURLUPart part, unsigned flags, char *out, size_t size)
{
	char *v = NULL;
	bool ok = curl.url_get(u, part, &v, flags) == CURLUE_OK && strlen(v) < size;
	if (ok)
		snprintf(out, size, "%s", v);
	curl.free(v);
	return ok;
}

/* location NULL: the origin of base; else of location resolved against base. */
static bool url_origin(const char *base, const char *location, struct url_origin *o)
{
	CURLU *u = curl.url();
	bool ok = u && curl.url_set(u, CURLUPART_URL, base, 0) == CURLUE_OK &&
		  (!location || curl.url_set(u, CURLUPART_URL, location, 0) == CURLUE_OK) &&
		  origin_part(u, CURLUPART_SCHEME, 0, o->scheme, sizeof(o->scheme)) &&
		  origin_part(u, CURLUPART_HOST, 0, o->host, sizeof(o->host)) &&
		  origin_part(u, CURLUPART_PORT, CURLU_DEFAULT_PORT, o->port, sizeof(o->port));
	curl.url_cleanup(u);
	return ok;
}

static bool same_origin(const struct redirect_check *rc, const char *location)
{
	struct url_origin from, to;
	return url_origin(rc->url, NULL, &from) && url_origin(rc->url, location, &to) &&
	       strcasecmp(from.scheme, to.scheme) == 0 && strcasecmp(from.host, to.host) == 0 &&
	       strcmp(from.port, to.port) == 0;
}

static size_t on_header(char *data, size_t size, size_t n, void *arg)
{
	struct redirect_check *rc = arg;
	size_t len = size * n;
	if (len > 5 && strncasecmp(data, "HTTP/", 5) == 0) {
		const char *sp = memchr(data, ' ', len);
		rc->in_3xx = sp && sp + 1 < data + len && sp[1] == '3';
		return len;
	}
	if (!rc->in_3xx || len < 9 || strncasecmp(data, "Location:", 9) != 0)
		return len;
	const char *v = data + 9;
	size_t vn = len - 9;
	while (vn && (*v == ' ' || *v == '\t'))
		v++, vn--;
	while (vn && (v[vn - 1] == '\r' || v[vn - 1] == '\n' || v[vn - 1] == ' '))
		vn--;
	char location[2048];
	if (vn < sizeof(location)) {
		memcpy(location, v, vn);
		location[vn] = '\0';
		if (same_origin(rc, location))
			return len;
	}
	size_t k = 0;
	for (; k < vn && k + 1 < sizeof(rc->location); k++)
		rc->location[k] = v[k] > 0x20 && v[k] < 0x7f ? v[k] : '?';
	rc->location[k] = '\0';
	rc->refused = true;
	return 0; /* aborts the transfer: CURLE_WRITE_ERROR */
}

static enum wb_httpc_result classify(CURLcode rc)
{
	switch (rc) {
	case CURLE_COULDNT_CONNECT:
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_RESOLVE_PROXY:
		return WB_HTTPC_CONNECT;
	case CURLE_OPERATION_TIMEDOUT:
		return WB_HTTPC_TIMEOUT;
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CERTPROBLEM:
	case CURLE_SSL_CIPHER:
	case CURLE_SSL_CACERT_BADFILE:
	case CURLE_SSL_ISSUER_ERROR:
	case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
	case CURLE_SSL_INVALIDCERTSTATUS:
		return WB_HTTPC_TLS;
	default:
		return WB_HTTPC_ERROR;
	}
}

/* The first bytes of a body, printable, for a message. */
static void body_excerpt(const struct wb_httpc_resp *r, char *out, size_t outlen)
{
	size_t n = 0;
	for (size_t i = 0; r->body && i < r->len && n + 1 < outlen && n < 120; i++)
		out[n++] = (r->body[i] >= 0x20 && r->body[i] < 0x7f) ? r->body[i] : ' ';
	out[n] = '\0';
}

/* A request that runs as a job ends at its cancel: libcurl calls this at least once a second. */
static int on_progress(void *arg, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
		       curl_off_t ulnow)
{
	return wb_job_cancelled(arg) ? 1 : 0;
}

/*
 * The transfer of a job: the loop curl_easy_perform runs, with the job's cancel fd among
 * the fds it waits on, so that a cancel ends the wait at once rather than at the progress
 * callback's next call (up to a second later; the stop waits 1 s in all).
 */
static CURLcode perform_job(CURL *c, struct wb_job *job)
{
	CURLM *m = curl.multi_init();
	if (!m)
		return CURLE_OUT_OF_MEMORY;
	if (curl.multi_add_handle(m, c) != CURLM_OK) {
		curl.multi_cleanup(m);
		return CURLE_OUT_OF_MEMORY;
	}
	CURLcode rc = CURLE_OK;
	int running = 1;
	for (;;) {
		if (curl.multi_perform(m, &running) != CURLM_OK) {
			rc = CURLE_RECV_ERROR;
			break;
		}
		if (!running)
			break;
		if (wb_job_cancelled(job)) {
			rc = CURLE_ABORTED_BY_CALLBACK;
			break;
		}
		struct curl_waitfd cancel = {.fd = wb_job_cancel_fd(job),
					     .events = CURL_WAIT_POLLIN};
		curl.multi_poll(m, &cancel, 1, 1000, NULL);
	}
	if (!running) {
		CURLMsg *msg;
		int left;
		while ((msg = curl.multi_info_read(m, &left)))
			if (msg->msg == CURLMSG_DONE)
				rc = msg->data.result;
	}
	curl.multi_remove_handle(m, c);
	curl.multi_cleanup(m);
	return rc;
}

/* job: the job it runs as (its cancel aborts the transfer), or NULL. */
static enum wb_httpc_result request(const char *method, const char *url, const void *body,
				    size_t body_len, const struct wb_httpc_opts *opts,
				    struct wb_httpc_resp *resp, struct wb_job *job, char *err,
				    size_t errlen)
{
	static const struct wb_httpc_opts none;
	const struct wb_httpc_opts *o = opts ? opts : &none;
	memset(resp, 0, sizeof(*resp));
	if (err && errlen)
		err[0] = '\0';
	char lerr[512];
	if (wb_httpc_load(lerr, sizeof(lerr)) < 0) {
		snprintf(err, errlen, "%s %s: %s", method, url, lerr);
		return WB_HTTPC_ERROR;
	}
	CURL *c = curl.easy_init();
	if (!c) {
		snprintf(err, errlen, "%s %s: libcurl: cannot start a transfer", method, url);
		return WB_HTTPC_ERROR;
	}
	struct sink sink = {.resp = resp, .max = o->max_body ? o->max_body : DEFAULT_MAX_BODY};
	struct curl_slist *hdr = NULL;
	char line[4096];
	char curl_err[CURL_ERROR_SIZE] = "";
	long timeout = o->timeout_ms > 0 ? o->timeout_ms : DEFAULT_TIMEOUT_MS;

	curl.easy_setopt(c, CURLOPT_URL, url);
	curl.easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	curl.easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl.easy_setopt(c, CURLOPT_ERRORBUFFER, curl_err);
	curl.easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl.easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
	curl.easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
	curl.easy_setopt(c, CURLOPT_MAXREDIRS, 3L);
	struct redirect_check redir = {.url = url};
	curl.easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl.easy_setopt(c, CURLOPT_HEADERDATA, &redir);
	curl.easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout);
	curl.easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, timeout);
	curl.easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
	curl.easy_setopt(c, CURLOPT_WRITEDATA, &sink);
	curl.easy_setopt(c, CURLOPT_ACCEPT_ENCODING, "");
	curl.easy_setopt(c, CURLOPT_USERAGENT, "wattbus/" WB_VERSION);
	if (o->ca_file)
		curl.easy_setopt(c, CURLOPT_CAINFO, o->ca_file);
	if (o->insecure) {
		curl.easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
		curl.easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
	}
	if (o->user) {
		curl.easy_setopt(c, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
		curl.easy_setopt(c, CURLOPT_USERNAME, o->user);
		curl.easy_setopt(c, CURLOPT_PASSWORD, o->password ? o->password : "");
	}
	if (o->bearer) {
		if ((size_t)snprintf(line, sizeof(line), "Authorization: Bearer %s", o->bearer) >=
		    sizeof(line)) {
			explicit_bzero(line, sizeof(line));
			curl.easy_cleanup(c);
			snprintf(err, errlen, "%s %s: bearer token longer than %zu bytes", method,
				 url, sizeof(line) - 23);
			return WB_HTTPC_ERROR;
		}
		hdr = curl.slist_append(hdr, line);
	}
	if (o->accept) {
		snprintf(line, sizeof(line), "Accept: %s", o->accept);
		hdr = curl.slist_append(hdr, line);
	}
	if (body) {
		hdr = curl.slist_append(hdr, "Content-Type: application/json");
		curl.easy_setopt(c, CURLOPT_POSTFIELDS, body);
		curl.easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
	}
	if (hdr)
		curl.easy_setopt(c, CURLOPT_HTTPHEADER, hdr);
	if (job) {
		curl.easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
		curl.easy_setopt(c, CURLOPT_XFERINFODATA, job);
		curl.easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
	}

	CURLcode rc = job ? perform_job(c, job) : curl.easy_perform(c);
	curl.easy_getinfo(c, CURLINFO_RESPONSE_CODE, &resp->status);
	enum wb_httpc_result res;
	if (redir.refused) {
		res = WB_HTTPC_ERROR;
		snprintf(err, errlen, "%s %s: redirect to another host refused (Location: %s)",
			 method, url, redir.location);
	} else if (sink.too_big) {
		res = WB_HTTPC_TOO_BIG;
		snprintf(err, errlen, "%s %s: answer longer than %zu bytes", method, url, sink.max);
	} else if (rc == CURLE_ABORTED_BY_CALLBACK) {
		res = WB_HTTPC_ERROR;
		snprintf(err, errlen, "%s %s: cancelled", method, url);
	} else if (rc != CURLE_OK) {
		res = classify(rc);
		snprintf(err, errlen, "%s %s: %s", method, url,
			 curl_err[0] ? curl_err : curl.easy_strerror(rc));
	} else if (resp->status < 200 || resp->status > 299) {
		char ex[128];
		body_excerpt(resp, ex, sizeof(ex));
		res = WB_HTTPC_STATUS;
		snprintf(err, errlen, "%s %s: HTTP %ld%s%s", method, url, resp->status,
			 ex[0] ? ": " : "", ex);
	} else {
		res = WB_HTTPC_OK;
	}
	curl.slist_free_all(hdr);
	curl.easy_cleanup(c);
	explicit_bzero(line, sizeof(line)); /* it held the bearer header */
	return res;
}

enum wb_httpc_result wb_httpc_request(const char *method, const char *url, const void *body,
				      size_t body_len, const struct wb_httpc_opts *opts,
				      struct wb_httpc_resp *resp, char *err, size_t errlen)
{
	return request(method, url, body, body_len, opts, resp, NULL, err, errlen);
}

void wb_httpc_resp_free(struct wb_httpc_resp *resp)
{
	if (!resp)
		return;
	free(resp->body);
	resp->body = NULL;
	resp->len = 0;
}

json_t *wb_httpc_json(const struct wb_httpc_resp *resp, const char *url, char *err, size_t errlen)
{
	json_error_t je;
	if (!resp->body || resp->len == 0) {
		snprintf(err, errlen, "%s: not JSON: empty answer", url);
		return NULL;
	}
	json_t *j = json_loadb(resp->body, resp->len, JSON_REJECT_DUPLICATES, &je);
	if (!j)
		snprintf(err, errlen, "%s: not JSON: line %d: %s", url, je.line, je.text);
	return j;
}

/* ---- a request as a job (job.h) ---- */

/* What the job's thread works on: the request's copies, then the result. The job owns it. */
struct req {
	char *method, *url, *body;
	size_t body_len;
	struct wb_httpc_opts opts;
	enum wb_httpc_result res;
	struct wb_httpc_resp resp;
	char err[1024];
};

struct wb_httpc_job {
	struct wb_job *job;
};

static char *dup_or_null(const char *s, bool *ok)
{
	if (!s)
		return NULL;
	char *d = strdup(s);
	if (!d)
		*ok = false;
	return d;
}

/* A secret (token, password) is wiped before its memory goes back. */
static void free_secret(const char *s)
{
	if (s) {
		explicit_bzero((char *)s, strlen(s));
		free((char *)s);
	}
}

static void req_free(void *arg)
{
	struct req *r = arg;
	free(r->method);
	free(r->url);
	free(r->body);
	free((char *)r->opts.ca_file);
	free_secret(r->opts.bearer);
	free((char *)r->opts.user);
	free_secret(r->opts.password);
	free((char *)r->opts.accept);
	wb_httpc_resp_free(&r->resp);
	free(r);
}

static void req_run(struct wb_job *job, void *arg)
{
	struct req *r = arg;
	r->res = request(r->method, r->url, r->body, r->body_len, &r->opts, &r->resp, job, r->err,
			 sizeof(r->err));
}

struct wb_httpc_job *wb_httpc_start(const char *method, const char *url, const void *body,
				    size_t body_len, const struct wb_httpc_opts *opts, char *err,
				    size_t errlen)
{
	struct wb_httpc_job *hj = calloc(1, sizeof(*hj));
	struct req *r = calloc(1, sizeof(*r));
	if (!hj || !r) {
		free(hj);
		free(r);
		snprintf(err, errlen, "%s %s: out of memory", method, url);
		return NULL;
	}
	bool ok = true;
	r->method = dup_or_null(method, &ok);
	r->url = dup_or_null(url, &ok);
	if (body) {
		r->body = malloc(body_len + 1);
		if (r->body) {
			memcpy(r->body, body, body_len);
			r->body[body_len] = '\0';
		} else {
			ok = false;
		}
		r->body_len = body_len;
	}
	if (opts) {
		r->opts = *opts;
		r->opts.ca_file = dup_or_null(opts->ca_file, &ok);
		r->opts.bearer = dup_or_null(opts->bearer, &ok);
		r->opts.user = dup_or_null(opts->user, &ok);
		r->opts.password = dup_or_null(opts->password, &ok);
		r->opts.accept = dup_or_null(opts->accept, &ok);
	}
	if (!ok) {
		req_free(r);
		free(hj);
		snprintf(err, errlen, "%s %s: out of memory", method, url);
		return NULL;
	}
	/* curl_global_init is not thread-safe: run it here, before the thread. */
	pthread_once(&global_once, global_init);
	/* The job's deadline is libcurl's own (CURLOPT_TIMEOUT_MS); the job's cancel aborts it. */
	char what[160];
	snprintf(what, sizeof(what), "%s %s", method, url);
	hj->job = wb_job_start(what, 0, req_run, r, req_free, err, errlen);
	if (!hj->job) {
		free(hj);
		return NULL;
	}
	return hj;
}

int wb_httpc_job_fd(const struct wb_httpc_job *job)
{
	return wb_job_fd(job->job);
}

bool wb_httpc_job_done(const struct wb_httpc_job *job)
{
	return wb_job_done(job->job);
}

enum wb_httpc_result wb_httpc_job_finish(struct wb_httpc_job *job, struct wb_httpc_resp *resp,
					 char *err, size_t errlen)
{
	/* Bounded by the request's own timeout (libcurl's) and by a cancel at the stop. */
	while (!wb_job_wait(job->job, WB_NS_PER_SEC * 3600))
		;
	struct req *r = wb_job_arg(job->job);
	enum wb_httpc_result res = r->res;
	*resp = r->resp;
	memset(&r->resp, 0, sizeof(r->resp));
	snprintf(err, errlen, "%s", r->err);
	wb_job_release(&job->job);
	free(job);
	return res;
}

void wb_httpc_job_cancel(struct wb_httpc_job **job_p)
{
	if (!job_p || !*job_p)
		return;
	wb_job_release(&(*job_p)->job);
	free(*job_p);
	*job_p = NULL;
}
