/* The HTTP client over libcurl (httpc.h). */
#include "dl.h"
#include "grow.h"
#include "httpc.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
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
static struct {
	__typeof__(curl_global_init) *global_init;
	__typeof__(curl_easy_init) *easy_init;
	__typeof__(curl_easy_setopt) *easy_setopt;
	__typeof__(curl_easy_perform) *easy_perform;
	__typeof__(curl_easy_getinfo) *easy_getinfo;
	__typeof__(curl_easy_cleanup) *easy_cleanup;
	__typeof__(curl_easy_strerror) *easy_strerror;
	__typeof__(curl_slist_append) *slist_append;
	__typeof__(curl_slist_free_all) *slist_free_all;
} curl;
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
 * Redirects stay where the request went: the URL's scheme://authority as written
 * (host and port), so a model server or BMC that answers 3xx cannot send the
 * request, its bearer token or its body to another host. A relative Location is
 * on the same host by definition; a refused one aborts the transfer.
 */
struct redirect_check {
	const char *origin; /* the request URL; origin_len bytes of it are scheme://authority */
	size_t origin_len;
	bool in_3xx; /* the headers being read are a redirect's */
	bool refused;
	char location[160]; /* the refused Location, printable bytes only */
};

static size_t url_origin_len(const char *url, size_t len)
{
	const char *sep = memmem(url, len, "://", 3);
	if (!sep)
		return 0;
	size_t i = (size_t)(sep - url) + 3;
	while (i < len && url[i] != '/' && url[i] != '?' && url[i] != '#')
		i++;
	return i;
}

static bool same_origin(const struct redirect_check *rc, const char *v, size_t n)
{
	size_t scheme = 0;
	while (scheme < n && (isalnum((unsigned char)v[scheme]) || strchr("+-.", v[scheme])))
		scheme++;
	bool absolute = scheme > 0 && scheme < n && v[scheme] == ':';
	if (!absolute && !(n >= 2 && v[0] == '/' && v[1] == '/'))
		return true; /* a path (or a query) on this host */
	if (!absolute) {     /* //authority/path: this scheme, that authority */
		const char *auth = strstr(rc->origin, "://");
		if (!auth)
			return false;
		auth++;
		size_t alen = rc->origin_len - (size_t)(auth - rc->origin);
		return n >= alen && strncasecmp(v, auth, alen) == 0 &&
		       (n == alen || strchr("/?#", v[alen]));
	}
	return url_origin_len(v, n) == rc->origin_len &&
	       strncasecmp(v, rc->origin, rc->origin_len) == 0;
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
	if (same_origin(rc, v, vn))
		return len;
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

enum wb_httpc_result wb_httpc_request(const char *method, const char *url, const void *body,
				      size_t body_len, const struct wb_httpc_opts *opts,
				      struct wb_httpc_resp *resp, char *err, size_t errlen)
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
	struct redirect_check redir = {.origin = url,
				       .origin_len = url_origin_len(url, strlen(url))};
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

	CURLcode rc = curl.easy_perform(c);
	curl.easy_getinfo(c, CURLINFO_RESPONSE_CODE, &resp->status);
	enum wb_httpc_result res;
	if (redir.refused) {
		res = WB_HTTPC_ERROR;
		snprintf(err, errlen, "%s %s: redirect to another host refused (Location: %s)",
			 method, url, redir.location);
	} else if (sink.too_big) {
		res = WB_HTTPC_TOO_BIG;
		snprintf(err, errlen, "%s %s: answer longer than %zu bytes", method, url, sink.max);
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

/* ---- a request on a thread of its own ---- */

struct wb_httpc_job {
	pthread_t thread;
	int fd;
	atomic_bool done;
	char *method, *url, *body;
	size_t body_len;
	struct wb_httpc_opts opts;
	enum wb_httpc_result res;
	struct wb_httpc_resp resp;
	char err[1024];
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

static void job_free(struct wb_httpc_job *j)
{
	if (j->fd >= 0)
		close(j->fd);
	free(j->method);
	free(j->url);
	free(j->body);
	free((char *)j->opts.ca_file);
	free_secret(j->opts.bearer);
	free((char *)j->opts.user);
	free_secret(j->opts.password);
	free((char *)j->opts.accept);
	wb_httpc_resp_free(&j->resp);
	free(j);
}

static void *job_run(void *arg)
{
	struct wb_httpc_job *j = arg;
	j->res = wb_httpc_request(j->method, j->url, j->body, j->body_len, &j->opts, &j->resp,
				  j->err, sizeof(j->err));
	atomic_store(&j->done, true);
	uint64_t one = 1;
	while (write(j->fd, &one, sizeof(one)) < 0 && errno == EINTR)
		;
	return NULL;
}

struct wb_httpc_job *wb_httpc_start(const char *method, const char *url, const void *body,
				    size_t body_len, const struct wb_httpc_opts *opts, char *err,
				    size_t errlen)
{
	struct wb_httpc_job *j = calloc(1, sizeof(*j));
	if (!j) {
		snprintf(err, errlen, "%s %s: out of memory", method, url);
		return NULL;
	}
	j->fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	bool ok = j->fd >= 0;
	j->method = dup_or_null(method, &ok);
	j->url = dup_or_null(url, &ok);
	if (body) {
		j->body = malloc(body_len + 1);
		if (j->body) {
			memcpy(j->body, body, body_len);
			j->body[body_len] = '\0';
		} else {
			ok = false;
		}
		j->body_len = body_len;
	}
	if (opts) {
		j->opts = *opts;
		j->opts.ca_file = dup_or_null(opts->ca_file, &ok);
		j->opts.bearer = dup_or_null(opts->bearer, &ok);
		j->opts.user = dup_or_null(opts->user, &ok);
		j->opts.password = dup_or_null(opts->password, &ok);
		j->opts.accept = dup_or_null(opts->accept, &ok);
	}
	/* curl_global_init is not thread-safe: run it here, before the thread. */
	pthread_once(&global_once, global_init);
	int rc = ok ? pthread_create(&j->thread, NULL, job_run, j) : ENOMEM;
	if (rc != 0) {
		snprintf(err, errlen, "%s %s: cannot start the request: %s", method, url,
			 ok ? strerror(rc) : "out of memory");
		job_free(j);
		return NULL;
	}
	return j;
}

int wb_httpc_job_fd(const struct wb_httpc_job *job)
{
	return job->fd;
}

bool wb_httpc_job_done(const struct wb_httpc_job *job)
{
	return atomic_load(&job->done);
}

enum wb_httpc_result wb_httpc_job_finish(struct wb_httpc_job *job, struct wb_httpc_resp *resp,
					 char *err, size_t errlen)
{
	pthread_join(job->thread, NULL);
	enum wb_httpc_result res = job->res;
	*resp = job->resp;
	memset(&job->resp, 0, sizeof(job->resp));
	snprintf(err, errlen, "%s", job->err);
	job_free(job);
	return res;
}
