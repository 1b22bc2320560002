/* The operator's API server client (kube.c): requests and watches that a stop cancels. */
#ifndef WB_OPERATOR_KUBE_H
#define WB_OPERATOR_KUBE_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

struct kube {
	const char *url;	     /* https://kubernetes.default.svc, no trailing slash */
	const char *token_file;	     /* bearer token, read at every request; NULL or "": none */
	const char *ca_file;	     /* NULL or "": the system's */
	long timeout_ms;	     /* one request */
	volatile sig_atomic_t *stop; /* set: every transfer ends within 200 ms */
};

/* Load libcurl: 0, or -1 with err naming the library and the package. */
int kube_load(char *err, size_t errlen);
/*
 * METHOD PATH (with its query) with BODY of CTYPE (NULL: none). 0 when an answer came:
 * *status, *answer its JSON (new reference, or NULL); err set when the status is not 2xx.
 * -1 with err when none came (connect, TLS, timeout, stop) or a 2xx answer is not JSON.
 */
int kube_call(const struct kube *k, const char *method, const char *path, const char *ctype,
	      const char *body, long *status, json_t **answer, char *err, size_t errlen);
/*
 * Watch PATHS (each a ?watch=1 request) at once until one delivers an event: 1; until a
 * server ends one (its timeoutSeconds): 0; -1 with err on an error or a stop.
 */
int kube_watch_any(const struct kube *k, const char *const *paths, size_t n, long max_ms, char *err,
		   size_t errlen);

#endif
