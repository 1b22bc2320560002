/*
 * The operator's API server client over libcurl (lib/curl.h: the one table of
 * its functions, loaded by lib/httpc.c at the first request): one request, or a
 * wait on several watches at once, each with a deadline and cancelled within
 * 200 ms of a stop. The token is read again for every request (projected tokens
 * rotate).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "curl.h"
#include "grow.h"
#include "kube.h"

#define TOKEN_MAX 65536
#define BODY_MAX (16u << 20)

/* lib/httpc's table of libcurl's functions, copied once it is loaded */
static struct wb_curl curl;

int kube_load(char *err, size_t errlen)
{
	const struct wb_curl *c = curl.easy_init ? &curl : wb_curl_load(err, errlen);
	if (!c)
		return -1;
	curl = *c;
	return 0;
}

/* The token without trailing white space; NULL with err when unreadable. */
static char *read_token(const struct kube *k, char *err, size_t errlen)
{
	int fd = open(k->token_file, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	char *buf = malloc(TOKEN_MAX + 1);
	ssize_t n = -1;
	if (fd >= 0 && buf)
		n = read(fd, buf, TOKEN_MAX + 1);
	if (fd >= 0)
		close(fd);
	if (n < 0 || n > TOKEN_MAX) {
		snprintf(err, errlen, "token file %s: %s", k->token_file,
			 n > TOKEN_MAX ? "longer than 64 KiB" : "cannot be read");
		free(buf);
		return NULL;
	}
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' '))
		n--;
	buf[n] = '\0';
	return buf;
}

struct xfer {
	const struct kube *k;
	CURL *h;
	struct curl_slist *hdrs;
	char *body;
	size_t len, cap;
	bool too_big;
	bool watch; /* a watch: a complete event line ends the wait */
	bool event; /* one arrived */
	char url[1024];
};

static size_t on_data(char *data, size_t size, size_t n, void *arg)
{
	struct xfer *x = arg;
	size_t add = size * n;
	if (add > BODY_MAX - x->len) {
		x->too_big = true;
		return 0;
	}
	if (wb_grow(&x->body, &x->cap, x->len + add + 1, 1, 4096) < 0)
		return 0;
	memcpy(x->body + x->len, data, add);
	x->len += add;
	x->body[x->len] = '\0';
	/* An event is one JSON object a line (no bookmarks are asked for). */
	if (x->watch && memchr(data, '\n', add))
		x->event = true;
	return add;
}

/* libcurl asks this every second at least and whenever data moves: a stop aborts the transfer. */
static int on_progress(void *arg, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
	const struct xfer *x = arg;
	return *x->k->stop ? 1 : 0;
}

static int xfer_init(struct xfer *x, const struct kube *k, const char *method, const char *path,
		     const char *ctype, const char *body, long timeout_ms, char *err, size_t errlen)
{
	memset(x, 0, sizeof(*x));
	x->k = k;
	if (kube_load(err, errlen) < 0)
		return -1;
	snprintf(x->url, sizeof(x->url), "%s%s", k->url, path);
	char *token = NULL;
	if (k->token_file && k->token_file[0] && !(token = read_token(k, err, errlen)))
		return -1;
	x->h = curl.easy_init();
	if (!x->h) {
		free(token);
		snprintf(err, errlen, "%s %s: libcurl: no handle", method, x->url);
		return -1;
	}
	char hdr[TOKEN_MAX + 32];
	if (token) {
		snprintf(hdr, sizeof(hdr), "Authorization: Bearer %s", token);
		x->hdrs = curl.slist_append(x->hdrs, hdr);
		free(token);
	}
	x->hdrs = curl.slist_append(x->hdrs, "Accept: application/json");
	if (ctype) {
		snprintf(hdr, sizeof(hdr), "Content-Type: %s", ctype);
		x->hdrs = curl.slist_append(x->hdrs, hdr);
	}
	CURL *h = x->h;
	curl.easy_setopt(h, CURLOPT_URL, x->url);
	curl.easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	curl.easy_setopt(h, CURLOPT_HTTPHEADER, x->hdrs);
	curl.easy_setopt(h, CURLOPT_USERAGENT, "wattbus-operator/" WB_VERSION);
	if (body) {
		curl.easy_setopt(h, CURLOPT_POSTFIELDS, body);
		curl.easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
	}
	curl.easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
	curl.easy_setopt(h, CURLOPT_WRITEDATA, x);
	curl.easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
	curl.easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl.easy_setopt(h, CURLOPT_XFERINFODATA, x);
	curl.easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl.easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
	curl.easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms < 5000 ? timeout_ms : 5000L);
	curl.easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	if (k->ca_file && k->ca_file[0])
		curl.easy_setopt(h, CURLOPT_CAINFO, k->ca_file);
	return 0;
}

static void xfer_clear(struct xfer *x)
{
	if (x->h)
		curl.easy_cleanup(x->h);
	if (x->hdrs)
		curl.slist_free_all(x->hdrs);
	free(x->body);
	memset(x, 0, sizeof(*x));
}

static int xfer_result(struct xfer *x, CURLcode rc, const char *method, long *status, char *err,
		       size_t errlen)
{
	*status = 0;
	if (rc == CURLE_ABORTED_BY_CALLBACK) {
		snprintf(err, errlen, "%s %s: stopped", method, x->url);
		return -1;
	}
	if (x->too_big) {
		snprintf(err, errlen, "%s %s: answer longer than %u bytes", method, x->url,
			 BODY_MAX);
		return -1;
	}
	if (rc != CURLE_OK) {
		snprintf(err, errlen, "%s %s: %s", method, x->url, curl.easy_strerror(rc));
		return -1;
	}
	curl.easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, status);
	return 0;
}

int kube_call(const struct kube *k, const char *method, const char *path, const char *ctype,
	      const char *body, long *status, json_t **answer, char *err, size_t errlen)
{
	struct xfer x;
	*answer = NULL;
	*status = 0;
	if (xfer_init(&x, k, method, path, ctype, body, k->timeout_ms, err, errlen) < 0) {
		xfer_clear(&x);
		return -1;
	}
	CURLcode rc = curl.easy_perform(x.h);
	int r = xfer_result(&x, rc, method, status, err, errlen);
	if (r == 0) {
		json_error_t je;
		*answer = x.len ? json_loadb(x.body, x.len, 0, &je) : NULL;
		if (*status >= 200 && *status < 300 && x.len && !*answer) {
			snprintf(err, errlen, "%s %s: answer is not JSON: %s", method, x.url,
				 je.text);
			r = -1;
		} else if (*status < 200 || *status >= 300) {
			const char *msg = json_string_value(json_object_get(*answer, "message"));
			snprintf(err, errlen, "%s %s: status %ld: %.200s", method, x.url, *status,
				 msg ? msg : "");
		}
	}
	xfer_clear(&x);
	return r;
}

int kube_watch_any(const struct kube *k, const char *const *paths, size_t n, long max_ms, char *err,
		   size_t errlen)
{
	struct xfer xs[8];
	if (n > 8)
		n = 8;
	CURLM *m = NULL;
	size_t started = 0;
	int r = -1;
	if (kube_load(err, errlen) < 0 || !(m = curl.multi_init())) {
		if (m == NULL && !err[0])
			snprintf(err, errlen, "libcurl: no multi handle");
		return -1;
	}
	for (; started < n; started++) {
		if (xfer_init(&xs[started], k, "GET", paths[started], NULL, NULL, max_ms, err,
			      errlen) < 0) {
			xfer_clear(&xs[started]);
			goto out;
		}
		xs[started].watch = true;
		curl.multi_add_handle(m, xs[started].h);
	}
	for (;;) {
		int running = 0;
		curl.multi_perform(m, &running);
		for (size_t i = 0; i < n; i++) {
			if (xs[i].event) {
				r = 1;
				goto out;
			}
		}
		CURLMsg *msg;
		int left;
		while ((msg = curl.multi_info_read(m, &left))) {
			if (msg->msg != CURLMSG_DONE)
				continue;
			for (size_t i = 0; i < n; i++) {
				if (xs[i].h != msg->easy_handle)
					continue;
				long status;
				if (xfer_result(&xs[i], msg->data.result, "GET", &status, err,
						errlen) < 0)
					goto out;
				if (status < 200 || status >= 300) {
					snprintf(err, errlen, "GET %s: status %ld", xs[i].url,
						 status);
					goto out;
				}
				/* The server ended a watch (its timeout): time to resync. */
				r = 0;
				goto out;
			}
		}
		if (*k->stop) {
			snprintf(err, errlen, "stopped");
			goto out;
		}
		curl.multi_poll(m, NULL, 0, 200, NULL);
	}
out:
	for (size_t i = 0; i < started; i++) {
		curl.multi_remove_handle(m, xs[i].h);
		xfer_clear(&xs[i]);
	}
	curl.multi_cleanup(m);
	return r;
}
