/*
 * The HTTP client, over libcurl (loaded by the first request, dl.h): one request with a deadline, a
 * cap on the answer's size, TLS verified unless the caller says otherwise, bearer or basic
 * authentication. Every HTTP client of the project (a BMC's Redfish, the kubelet, a model server)
 * goes through it.
 *
 * Two ways to call it: wb_httpc_request blocks until the answer or the
 * deadline; wb_httpc_start runs the same request as a job (job.h) and
 * gives an fd that turns readable when it is done, so that a daemon's event
 * loop never waits on a slow server, and the job's cancel (wb_httpc_job_cancel,
 * or every job's at a daemon's stop) aborts the transfer within a second
 * (libcurl's progress callback).
 */
#ifndef WB_HTTPC_H
#define WB_HTTPC_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

struct wb_httpc_opts {
	const char *ca_file; /* PEM bundle to verify the server with; NULL: the system's */
	bool insecure;	     /* skip TLS verification (the caller warns about it) */
	const char *bearer;  /* Authorization: Bearer TOKEN, or NULL */
	const char *user;    /* basic authentication when not NULL */
	const char *password;
	const char *accept; /* Accept header, or NULL */
	long timeout_ms;    /* whole transfer; 0: 10 s */
	size_t max_body;    /* a longer answer fails WB_HTTPC_TOO_BIG; 0: 4 MiB */
};

enum wb_httpc_result {
	WB_HTTPC_OK = 0,  /* an answer with status 2xx */
	WB_HTTPC_STATUS,  /* an answer with another status (resp->status, resp->body set) */
	WB_HTTPC_CONNECT, /* no connection: refused, unreachable, no such host */
	WB_HTTPC_TIMEOUT, /* past the deadline */
	WB_HTTPC_TLS,	  /* TLS handshake or certificate verification failed */
	WB_HTTPC_TOO_BIG, /* the answer is longer than max_body */
	WB_HTTPC_ERROR,	  /* anything else (bad URL, out of memory, protocol error) */
	WB_HTTPC_NRESULTS
};

struct wb_httpc_resp {
	long status;
	char *body; /* malloc'd, NUL-terminated (the NUL is not in len); NULL when none */
	size_t len;
};

/*
 * Load libcurl, once per process: 0, or -1 with err naming the library and the package to
 * install. Every request does it first, and fails WB_HTTPC_ERROR with that reason; a source that
 * is nothing without HTTP (powerd's redfish) calls it at discovery to be refused at once.
 */
int wb_httpc_load(char *err, size_t errlen);

/* "ok", "status", "connect", "timeout", "tls", "too_big", "error": a counter's label. */
const char *wb_httpc_result_name(enum wb_httpc_result r);

/*
 * method "GET", "POST", ...; body (sent as application/json) may be NULL. Fills *resp (free it with
 * wb_httpc_resp_free whatever the result). On anything but WB_HTTPC_OK, err
 * says "METHOD URL: reason" in one line (the status and the start of the body
 * for WB_HTTPC_STATUS). Follows at most 3 redirects, each only on the URL's own
 * scheme, host and port (as written); one elsewhere fails WB_HTTPC_ERROR, "redirect
 * to another host refused".
 */
enum wb_httpc_result wb_httpc_request(const char *method, const char *url, const void *body,
				      size_t body_len, const struct wb_httpc_opts *opts,
				      struct wb_httpc_resp *resp, char *err, size_t errlen);
void wb_httpc_resp_free(struct wb_httpc_resp *resp);

/*
 * The answer's body as JSON. New reference, or NULL with err ("URL: not JSON:
 * line L: reason"). url only names the input in the message.
 */
json_t *wb_httpc_json(const struct wb_httpc_resp *resp, const char *url, char *err, size_t errlen);

/* A request as a job. */
struct wb_httpc_job;
/*
 * Copies every argument (opts' strings too), starts the job. NULL with err
 * when no thread could be started.
 */
struct wb_httpc_job *wb_httpc_start(const char *method, const char *url, const void *body,
				    size_t body_len, const struct wb_httpc_opts *opts, char *err,
				    size_t errlen);
/* Readable once the request is done (poll it, or add it to the event loop). */
int wb_httpc_job_fd(const struct wb_httpc_job *job);
/* Whether it is done, without waiting. */
bool wb_httpc_job_done(const struct wb_httpc_job *job);
/*
 * Waits for the job (at once when the fd was readable; else up to its timeout, or
 * its cancel), hands over the result as wb_httpc_request would have, frees the job.
 * A cancelled request fails WB_HTTPC_ERROR, "METHOD URL: cancelled".
 */
enum wb_httpc_result wb_httpc_job_finish(struct wb_httpc_job *job, struct wb_httpc_resp *resp,
					 char *err, size_t errlen);
/* Abandon the request without waiting: its transfer aborts, its memory goes when it ends.
 * NULL-safe, nulls *job_p. */
void wb_httpc_job_cancel(struct wb_httpc_job **job_p);

#endif
