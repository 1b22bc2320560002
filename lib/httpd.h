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

#include "config.h"

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
	uint64_t auth_failures;	   /* wrong user or password */
	uint64_t auth_throttled;   /* requests answered 429 during a penalty */
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
	const char *auth_user, *auth_pass; /* basic auth (copied); NULL: none */
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
/*
 * Basic auth of one request when the server has a user (auth_user): true when it
 * may go on; false when the answer was queued (401 asking for credentials, or 429
 * with Retry-After while the client's address serves a penalty for wrong
 * passwords), with MHD's result in *rc. Wrong passwords are counted, logged
 * (rate-limited, naming what) and start the address's penalty from
 * auth_max_failures on; the right ones forget them.
 */
bool wb_httpd_auth(struct wb_httpd *self, struct MHD_Connection *con, const char *what,
		   enum MHD_Result *rc);
/* The first line of path, without its newline (malloc'd). NULL (logged) when unreadable or
 * empty. */
char *wb_httpd_read_password(const char *path);
/* Count an answer of this status (the stage calls it for each response it queues). */
void wb_httpd_count(struct wb_httpd *self, unsigned status);
/* Queue body (copied) with this status and content type; counted. */
enum MHD_Result wb_httpd_reply(struct wb_httpd *self, struct MHD_Connection *con, unsigned status,
			       const char *content_type, const void *body, size_t len);
/*
 * The same with more headers (NULL, or name, value, ..., NULL) and the body's
 * mode: MHD_RESPMEM_MUST_FREE hands a malloc'd body over (freed here when the
 * response cannot be made), MHD_RESPMEM_PERSISTENT for a body that outlives it.
 */
enum MHD_Result wb_httpd_reply_with(struct wb_httpd *self, struct MHD_Connection *con,
				    unsigned status, const char *content_type, const void *body,
				    size_t len, enum MHD_ResponseMemoryMode mode,
				    const char *const *headers);

/*
 * The server's config keys, the same in every stage that serves HTTP: a
 * member of the stage's conf struct, its rows spliced into the stage's key
 * table with WB_HTTPD_KEYS, checked by wb_httpd_conf_check and turned into
 * options by wb_httpd_opts_of.
 */
struct wb_httpd_conf {
	char *listen;
	int64_t max_connections, max_connections_per_ip, reserved_connections;
	uint64_t http_timeout_ns, http_request_timeout_ns;
	int64_t max_header_bytes;
	char *tls_cert, *tls_key;
	char *auth_user, *auth_password_file;
	int64_t auth_max_failures;
	uint64_t auth_penalty_ns;
};
#define WB_HTTPD_KEY(name, type, type_, m, field, def, min, max, help)                             \
	{                                                                                          \
		name, type, offsetof(type_, m.field), def, min, max, NULL, help                    \
	}
/* The rows of type_'s member m: listen (default listen_def), limits, timeouts, TLS. */
#define WB_HTTPD_KEYS(type_, m, listen_def, max_connections_def)                                                                                                                \
	WB_HTTPD_KEY(                                                                                                                                                           \
	    "listen", WB_CONF_STR, type_, m, listen, listen_def, 0, 0,                                                                                                          \
	    "HTTP address: PORT, :PORT (all addresses), HOST:PORT or [IPV6]:PORT; port 0 picks a free one"),                                                                    \
	    WB_HTTPD_KEY("max_connections", WB_CONF_INT, type_, m, max_connections,                                                                                             \
			 max_connections_def, 1, 65536, "concurrent HTTP connections"),                                                                                         \
	    WB_HTTPD_KEY("max_connections_per_ip", WB_CONF_INT, type_, m, max_connections_per_ip,                                                                               \
			 "16", 0, 65536,                                                                                                                                        \
			 "concurrent HTTP connections from one client address (0: no limit)"),                                                                                  \
	    WB_HTTPD_KEY(                                                                                                                                                       \
		"reserved_connections", WB_CONF_INT, type_, m, reserved_connections, "8", 0,                                                                                    \
		32768,                                                                                                                                                          \
		"of max_connections, the last ones (at most half) go only to client addresses holding no connection, so that a few busy addresses cannot keep the others out"), \
	    WB_HTTPD_KEY("http_timeout", WB_CONF_DURATION, type_, m, http_timeout_ns, "10s", 1e9,                                                                               \
			 3600e9, "an HTTP connection idle this long is closed"),                                                                                                \
	    WB_HTTPD_KEY(                                                                                                                                                       \
		"http_request_timeout", WB_CONF_DURATION, type_, m, http_request_timeout_ns,                                                                                    \
		"30s", 1e9, 3600e9,                                                                                                                                             \
		"a connection whose request is not received and answered within this long (from its accept or its previous answer) is closed, however steadily it trickles"),   \
	    WB_HTTPD_KEY(                                                                                                                                                       \
		"max_header_bytes", WB_CONF_INT, type_, m, max_header_bytes, "16384", 4096,                                                                                     \
		1048576,                                                                                                                                                        \
		"memory per HTTP connection for the request line and headers; larger requests get 431"),                                                                        \
	    WB_HTTPD_KEY("tls_cert", WB_CONF_STR, type_, m, tls_cert, "", 0, 0,                                                                                                 \
			 "PEM certificate (chain) file: serve HTTPS; needs tls_key"),                                                                                           \
	    WB_HTTPD_KEY("tls_key", WB_CONF_STR, type_, m, tls_key, "", 0, 0,                                                                                                   \
			 "PEM private key file of tls_cert"),                                                                                                                   \
	    WB_HTTPD_KEY(                                                                                                                                                       \
		"auth_user", WB_CONF_STR, type_, m, auth_user, "", 0, 0,                                                                                                        \
		"user name every HTTP request but /healthz requires (basic auth); needs auth_password_file"),                                                                   \
	    WB_HTTPD_KEY("auth_password_file", WB_CONF_STR, type_, m, auth_password_file, "", 0,                                                                                \
			 0, "file whose first line is the password of auth_user"),                                                                                              \
	    WB_HTTPD_KEY(                                                                                                                                                       \
		"auth_max_failures", WB_CONF_INT, type_, m, auth_max_failures, "5", 1, 1000000,                                                                                 \
		"wrong passwords from one client address before it gets 429 for auth_penalty"),                                                                                 \
	    WB_HTTPD_KEY(                                                                                                                                                       \
		"auth_penalty", WB_CONF_DURATION, type_, m, auth_penalty_ns, "1s", 0, 3600e9,                                                                                   \
		"first penalty after auth_max_failures; doubles with each further failure up to 1024 times (0: no penalty)")
/* 0, or -1 with err naming the key: a listen address that does not parse, tls_cert without tls_key,
 * auth_user without auth_password_file. */
int wb_httpd_conf_check(const struct wb_httpd_conf *c, char *err, size_t errlen);
/* The server options of c (auth limits included); handler, completion and the auth user and
 * password (wb_httpd_read_password) are the caller's to add. */
struct wb_httpd_opts wb_httpd_opts_of(const struct wb_httpd_conf *c);
/* Whether a and b would make the same server (a reload that changes it needs a restart). */
bool wb_httpd_conf_same(const struct wb_httpd_conf *a, const struct wb_httpd_conf *b);

/* Pure helpers, unit-tested. */
/* "9102", ":9102", "host:9102", "[::1]:9102" -> host (empty: any) and port. Returns 0 or -1. */
int http_split_listen(const char *listen, char *host, size_t hostlen, unsigned *port);
/* Constant-time equality of two strings. */
bool http_secret_equal(const char *a, const char *b);

#endif
