/*
 * The HTTP server the stages that serve HTTP share (exportd's /metrics, modeld's
 * model API): libmicrohttpd driven by the daemon's zloop, with the limits against
 * hostile clients (connection limits, the reserve for addresses holding none, a
 * bound on a request's whole time) and optional TLS. What a request gets is the
 * stage's MHD access handler; the per-address table (peers) is shared with it.
 */
#ifndef WB_HTTPD_H
#define WB_HTTPD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <czmq.h>
#include <microhttpd.h>

/* ---- peers.c: per client address state of the HTTP side ---- */
struct sockaddr;
struct peer_limits {
	unsigned max_failures; /* failed basic-auth attempts before the penalty starts */
	uint64_t penalty_ns;   /* first penalty; doubles with each further failure */
	size_t max_peers;      /* addresses kept */
};
struct peers;
struct peers *peers_new(const struct peer_limits *lim);
void peers_destroy(struct peers **self_p);
size_t peers_size(const struct peers *self);
/* The table key of a client address: IPv4 (IPv4-mapped too) as is, IPv6 by its /64. */
int peers_key(const struct sockaddr *sa, char *key, size_t len);
unsigned peers_conns(const struct peers *self, const char *key);
/* A connection from key opened or closed. peers_conn_add: 0, or -1 (table full, ENOMEM). */
int peers_conn_add(struct peers *self, const char *key, uint64_t now_ns);
void peers_conn_del(struct peers *self, const char *key, uint64_t now_ns);
/* Is key serving a penalty? *left_ns (optional): for how much longer. */
bool peers_blocked(struct peers *self, const char *key, uint64_t now_ns, uint64_t *left_ns);
/* A wrong user or password from key; from max_failures on, each starts a penalty. */
void peers_auth_failed(struct peers *self, const char *key, uint64_t now_ns);
/* The right credentials: the failures are forgotten. */
void peers_auth_ok(struct peers *self, const char *key, uint64_t now_ns);

/* ---- httpd.c: the server ---- */
/* Kept by the server, read by the stage (exported as wattbus_<stage>_http_*). */
struct wb_httpd_counters {
	uint64_t requests[6];	   /* answers by status class: 1xx, 2xx, 3xx, 4xx, 5xx, other */
	uint64_t connections;	   /* open now */
	uint64_t refused;	   /* kept out of the reserved connections */
	uint64_t request_timeouts; /* connections cut by request_timeout */
};

struct wb_httpd_opts {
	const char *listen;
	unsigned max_connections, max_per_ip;
	unsigned reserved;  /* connections only addresses holding none get (at most half) */
	unsigned timeout_s; /* idle timeout */
	uint64_t request_timeout_ns; /* a connection's request must be in and answered by then */
	size_t memory_limit;	     /* per connection: request line and headers */
	unsigned auth_max_failures;  /* for the peers table (0: 1) */
	uint64_t auth_penalty_ns;
	const char *tls_cert, *tls_key;	   /* files; both or neither; NULL or "": plain HTTP */
	MHD_AccessHandlerCallback handler; /* the stage's requests */
	void *handler_arg;
	/* Optional: called when a request ends (free what the handler kept in *req_cls). */
	MHD_RequestCompletedCallback completed;
	void *completed_arg;
};

struct wb_httpd;
/* Listen and poll from loop. NULL (logged) when the address or the files are bad. */
struct wb_httpd *wb_httpd_new(const struct wb_httpd_opts *opts, zloop_t *loop,
			      struct wb_httpd_counters *ctr);
void wb_httpd_destroy(struct wb_httpd **self_p);
uint16_t wb_httpd_port(const struct wb_httpd *self);
struct peers *wb_httpd_peers(struct wb_httpd *self);
/* The peers key of the connection's client ("" when the table was full); NULL: untracked. */
const char *wb_httpd_client(struct MHD_Connection *con);
/* Count an answer of this status (the stage calls it for each response it queues). */
void wb_httpd_count(struct wb_httpd *self, unsigned status);
/* Queue body (copied) with this status and content type; counted. */
enum MHD_Result wb_httpd_reply(struct wb_httpd *self, struct MHD_Connection *con, unsigned status,
			       const char *content_type, const void *body, size_t len);

/* Pure helpers, unit-tested. */
/* "9102", ":9102", "host:9102", "[::1]:9102" -> host (empty: any) and port. Returns 0 or -1. */
int http_split_listen(const char *listen, char *host, size_t hostlen, unsigned *port);
/* Constant-time equality of two strings. */
bool http_secret_equal(const char *a, const char *b);

#endif
