/*
 * The shared HTTP server: libmicrohttpd in external-polling epoll mode, so that
 * it runs inside the daemon's one zloop (no MHD thread, no locks): a zloop poller
 * on MHD's epoll fd plus a one-shot timer armed from MHD_get_timeout after every
 * MHD_run. Against hostile clients, on top of MHD's limits: a bound on the whole
 * time of a request (MHD's own timeout is an idle timeout) and connections kept
 * for addresses that hold none. Requests go to the stage's handler.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <czmq.h>
#include <microhttpd.h>

#include "clock.h"
#include "httpd.h"
#include "log.h"

#define HTTP_TLS_PRIORITIES "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2"

/* A connection, from accept to close (MHD's socket context). */
struct http_conn {
	struct http_conn *prev, *next; /* the deadline list: oldest since_ns first */
	struct MHD_Connection *con;
	uint64_t since_ns; /* accept, or the end of the previous answer */
	bool listed;	   /* in the deadline list (not yet cut) */
	char key[64];	   /* peers_key of the client address */
};

struct wb_httpd {
	struct MHD_Daemon *mhd;
	struct peers *peers;
	struct http_conn *head, *tail;
	unsigned nconns, max_connections, reserved;
	uint64_t request_timeout_ns;
	zloop_t *loop;
	zmq_pollitem_t item;
	bool polling;
	int timer_id;
	struct wb_httpd_counters *ctr;
	MHD_AccessHandlerCallback handler;
	void *handler_arg;
	MHD_RequestCompletedCallback completed;
	void *completed_arg;
	char *tls_cert, *tls_key;    /* PEM text, alive as long as the daemon */
	char *auth_user, *auth_pass; /* NULL: no authentication */
	uint16_t port;
	struct wb_ratelimit rl, rl_refused, rl_cut, rl_bad, rl_auth;
};

/* ---- pure helpers ---- */
int http_split_listen(const char *listen, char *host, size_t hostlen, unsigned *port)
{
	const char *colon;
	const char *p = listen;
	host[0] = '\0';
	if (*p == '[') {
		const char *end = strchr(p, ']');
		if (!end || end[1] != ':')
			return -1;
		snprintf(host, hostlen, "%.*s", (int)(end - p - 1), p + 1);
		colon = end + 1;
	} else if ((colon = strrchr(p, ':'))) {
		if (memchr(p, ':', (size_t)(colon - p)))
			return -1; /* a bare IPv6 address needs brackets */
		snprintf(host, hostlen, "%.*s", (int)(colon - p), p);
	} else {
		colon = p - 1; /* just a port */
	}
	const char *ps = colon + 1;
	char *end;
	errno = 0;
	unsigned long v = strtoul(ps, &end, 10);
	if (!*ps || *end || errno || v > 65535 || *ps == '-' || *ps == '+')
		return -1;
	*port = (unsigned)v;
	return 0;
}

bool http_secret_equal(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	unsigned char diff = la != lb;
	/* look at every byte of the expected secret whatever the input, so timing tells nothing */
	for (size_t i = 0; i < lb; i++)
		diff |= (unsigned char)(b[i] ^ (i < la ? a[i] : 0));
	return diff == 0;
}

/* ---- responses ---- */
void wb_httpd_count(struct wb_httpd *self, unsigned status)
{
	unsigned cls = status / 100;
	self->ctr->requests[cls >= 1 && cls <= 5 ? cls - 1 : 5]++;
}

enum MHD_Result wb_httpd_reply(struct wb_httpd *self, struct MHD_Connection *con, unsigned status,
			       const char *content_type, const void *body, size_t len)
{
	return wb_httpd_reply_with(self, con, status, content_type, body, len,
				   MHD_RESPMEM_MUST_COPY, NULL);
}

enum MHD_Result wb_httpd_reply_with(struct wb_httpd *self, struct MHD_Connection *con,
				    unsigned status, const char *content_type, const void *body,
				    size_t len, enum MHD_ResponseMemoryMode mode,
				    const char *const *headers)
{
	if (!body) {
		body = "";
		mode = MHD_RESPMEM_PERSISTENT;
	}
	struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)body, mode);
	if (!r) {
		if (mode == MHD_RESPMEM_MUST_FREE)
			free((void *)body);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
	for (size_t i = 0; headers && headers[i] && headers[i + 1]; i += 2)
		MHD_add_response_header(r, headers[i], headers[i + 1]);
	enum MHD_Result rc = MHD_queue_response(con, status, r);
	MHD_destroy_response(r);
	wb_httpd_count(self, status);
	return rc;
}

static struct http_conn *conn_of(struct MHD_Connection *con)
{
	const union MHD_ConnectionInfo *i =
	    MHD_get_connection_info(con, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	return i ? i->socket_context : NULL;
}

const char *wb_httpd_client(struct MHD_Connection *con)
{
	struct http_conn *c = conn_of(con);
	return c ? c->key : NULL;
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
	struct wb_httpd *self = cls;
	char msg[512];
	vsnprintf(msg, sizeof msg, fmt, ap);
	size_t n = strlen(msg);
	while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
		msg[--n] = '\0';
	/* clients can make MHD talk (bad requests, resets): rate-limited */
	log_rl(&self->rl, WB_LOG_INFO, "http: %s", msg);
}

/* ---- connections: the reserve and the request deadline ---- */
static void conn_unlist(struct wb_httpd *self, struct http_conn *c)
{
	if (!c->listed)
		return;
	if (c->prev)
		c->prev->next = c->next;
	else
		self->head = c->next;
	if (c->next)
		c->next->prev = c->prev;
	else
		self->tail = c->prev;
	c->prev = c->next = NULL;
	c->listed = false;
}

/* (Re)start the connection's deadline: it goes to the end of the list, which stays sorted. */
static void conn_list(struct wb_httpd *self, struct http_conn *c, uint64_t now)
{
	conn_unlist(self, c);
	c->since_ns = now;
	c->prev = self->tail;
	if (self->tail)
		self->tail->next = c;
	else
		self->head = c;
	self->tail = c;
	c->listed = true;
}

/*
 * The last `reserved` connections go only to addresses that hold none, so that
 * clients filling the server from a few addresses (each within the per-address
 * limit) leave room for Prometheus. Refused connections are closed by MHD.
 */
static enum MHD_Result on_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen)
{
	struct wb_httpd *self = cls;
	char key[64];
	if (!self->reserved || self->nconns + self->reserved < self->max_connections)
		return MHD_YES;
	if (peers_key(addr, key, sizeof key) < 0 || !peers_conns(self->peers, key))
		return MHD_YES;
	self->ctr->refused++;
	log_rl(&self->rl_refused, WB_LOG_INFO,
	       "http: %s: refused, the last %u connections are kept for other addresses", key,
	       self->reserved);
	return MHD_NO;
}

static void on_connection(void *cls, struct MHD_Connection *con, void **socket_context,
			  enum MHD_ConnectionNotificationCode toe)
{
	struct wb_httpd *self = cls;
	uint64_t now = wb_mono_ns();
	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		struct http_conn *c = calloc(1, sizeof *c);
		const union MHD_ConnectionInfo *i =
		    MHD_get_connection_info(con, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
		if (!c)
			return; /* untracked: MHD's own limits still hold */
		c->con = con;
		if (!i || peers_key(i->client_addr, c->key, sizeof c->key) < 0)
			snprintf(c->key, sizeof c->key, "unknown");
		if (peers_conn_add(self->peers, c->key, now) < 0)
			c->key[0] = '\0';
		conn_list(self, c, now);
		self->nconns++;
		self->ctr->connections = self->nconns;
		*socket_context = c;
	} else if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
		struct http_conn *c = *socket_context;
		if (!c)
			return;
		conn_unlist(self, c);
		if (c->key[0])
			peers_conn_del(self->peers, c->key, now);
		free(c);
		*socket_context = NULL;
		self->nconns--;
		self->ctr->connections = self->nconns;
	}
}

/* An answer was sent (or the request failed): a keep-alive connection's next request gets the whole
 * bound again. */
static void on_completed(void *cls, struct MHD_Connection *con, void **req_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct wb_httpd *self = cls;
	struct http_conn *c = conn_of(con);
	if (c && c->listed)
		conn_list(self, c, wb_mono_ns());
	if (self->completed)
		self->completed(self->completed_arg, con, req_cls, toe);
}

static enum MHD_Result count_length(void *cls, enum MHD_ValueKind kind, const char *key,
				    const char *value)
{
	(void)kind;
	(void)value;
	if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0)
		(*(unsigned *)cls)++;
	return MHD_YES;
}

/*
 * Every request passes here before the stage's handler. Two Content-Length headers
 * make the body's end ambiguous (a proxy in front may take the other one: request
 * smuggling, RFC 9112 6.3), and libmicrohttpd takes the first: answered 400 here,
 * before any body is read, for every stage alike. The headers are counted once, at the
 * request's first call (*req_cls still NULL), not again for every piece of its body.
 */
static enum MHD_Result on_request(void *cls, struct MHD_Connection *con, const char *url,
				  const char *method, const char *version, const char *upload_data,
				  size_t *upload_data_size, void **req_cls)
{
	struct wb_httpd *self = cls;
	unsigned lengths = 0;
	if (*req_cls == NULL)
		MHD_get_connection_values(con, MHD_HEADER_KIND, count_length, &lengths);
	if (lengths > 1) {
		static const char msg[] = "more than one Content-Length header\n";
		log_rl(&self->rl_bad, WB_LOG_INFO,
		       "http: %s: %s %s: %u Content-Length headers, answered 400",
		       wb_httpd_client(con), method, url, lengths);
		return wb_httpd_reply(self, con, MHD_HTTP_BAD_REQUEST, "text/plain", msg,
				      sizeof(msg) - 1);
	}
	return self->handler(self->handler_arg, con, url, method, version, upload_data,
			     upload_data_size, req_cls);
}

/*
 * Cut the connections whose request has not been received and answered within
 * request_timeout: shutdown() makes the socket readable at EOF, and MHD, seeing
 * it, closes the connection itself (no second owner of the fd).
 */
static void cut_late(struct wb_httpd *self, uint64_t now)
{
	while (self->head && now - self->head->since_ns >= self->request_timeout_ns) {
		struct http_conn *c = self->head;
		conn_unlist(self, c);
		const union MHD_ConnectionInfo *i =
		    MHD_get_connection_info(c->con, MHD_CONNECTION_INFO_CONNECTION_FD);
		if (i)
			shutdown(i->connect_fd, SHUT_RDWR);
		self->ctr->request_timeouts++;
		log_rl(&self->rl_cut, WB_LOG_INFO,
		       "http: %s: closed, no complete request and answer within %.1f s", c->key,
		       (double)self->request_timeout_ns / 1e9);
	}
}

/* ---- the zloop glue ---- */
static int on_timer(zloop_t *loop, int timer_id, void *arg);

static unsigned mhd_connections(struct wb_httpd *self)
{
	const union MHD_DaemonInfo *i =
	    MHD_get_daemon_info(self->mhd, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
	return i ? i->num_connections : 0;
}

static void httpd_drive(struct wb_httpd *self)
{
	/*
	 * MHD asks for an immediate rerun (timeout 0) while it has buffered work.
	 * It also takes its listen socket out of its epoll set at max_connections
	 * and puts it back only at the start of a later run: when this run closed
	 * connections, run again, or nothing would ever wake us to accept.
	 */
	MHD_UNSIGNED_LONG_LONG to_ms = 0;
	cut_late(self, wb_mono_ns());
	for (int i = 0; i < 8; i++) {
		unsigned before = mhd_connections(self);
		MHD_run(self->mhd);
		bool closed = mhd_connections(self) < before;
		if (!closed && (MHD_get_timeout(self->mhd, &to_ms) != MHD_YES || to_ms > 0))
			break;
	}
	if (self->timer_id >= 0) {
		zloop_timer_end(self->loop, self->timer_id);
		self->timer_id = -1;
	}
	bool have = MHD_get_timeout(self->mhd, &to_ms) == MHD_YES;
	if (self->head) {
		/* wake up for the oldest connection's deadline too */
		uint64_t now = wb_mono_ns(), due = self->head->since_ns + self->request_timeout_ns;
		MHD_UNSIGNED_LONG_LONG cut_ms = due > now ? (due - now + 999999) / 1000000 : 0;
		if (!have || cut_ms < to_ms)
			to_ms = cut_ms;
		have = true;
	}
	if (have)
		self->timer_id =
		    zloop_timer(self->loop, to_ms ? (size_t)to_ms : 1, 1, on_timer, self);
}

static int on_timer(zloop_t *loop, int timer_id, void *arg)
{
	struct wb_httpd *self = arg;
	if (timer_id == self->timer_id)
		self->timer_id = -1; /* a one-shot timer: zloop removes it after this call */
	httpd_drive(self);
	return 0;
}

static int on_ready(zloop_t *loop, zmq_pollitem_t *item, void *arg)
{
	httpd_drive(arg);
	return 0;
}

/* ---- lifecycle ---- */
static char *read_text(const char *path, const char *what)
{
	FILE *f = fopen(path, "re");
	if (!f) {
		log_warn("http: %s %s", what, path);
		return NULL;
	}
	char *text = NULL;
	size_t cap = 0;
	ssize_t n = getdelim(&text, &cap, '\0', f);
	bool err = n < 0 || ferror(f);
	fclose(f);
	if (err) {
		log_warnx("http: %s %s: empty or unreadable", what, path);
		free(text);
		return NULL;
	}
	return text;
}

static int resolve(const char *listen, struct sockaddr_storage *ss, socklen_t *sslen)
{
	char host[256];
	unsigned port;
	if (http_split_listen(listen, host, sizeof host, &port) < 0) {
		log_warnx("http: listen \"%s\": expected PORT, :PORT, HOST:PORT or [IPV6]:PORT",
			  listen);
		return -1;
	}
	memset(ss, 0, sizeof *ss);
	if (!host[0]) {
		/* any address; IPv6 with IPv4 mapped when the kernel has IPv6 */
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
		s6->sin6_family = AF_INET6;
		s6->sin6_addr = in6addr_any;
		s6->sin6_port = htons((uint16_t)port);
		*sslen = sizeof *s6;
		return 0;
	}
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
	struct addrinfo *res;
	char ports[8];
	snprintf(ports, sizeof ports, "%u", port);
	int rc = getaddrinfo(host, ports, &hints, &res);
	if (rc) {
		log_warnx("http: listen \"%s\": %s", listen, gai_strerror(rc));
		return -1;
	}
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	*sslen = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

/*
 * The listen socket, bound here rather than by MHD: MHD's bind error names "port 0" (it is given
 * an address, not a port), and a stage that cannot serve must say which address it could not
 * have and why. Any address is IPv6 with IPv4 mapped, or IPv4 where the kernel has no IPv6.
 * Returns the socket, or -1 with errno set.
 */
static int listen_on(struct sockaddr_storage *ss, socklen_t sslen)
{
	int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -1;
	int on = 1, off = 0;
	/* as MHD does on its own sockets: a restart binds while the old connections linger */
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) < 0 ||
	    (ss->ss_family == AF_INET6 &&
	     IN6_IS_ADDR_UNSPECIFIED(&((struct sockaddr_in6 *)ss)->sin6_addr) &&
	     setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off) < 0) ||
	    bind(fd, (struct sockaddr *)ss, sslen) < 0 || listen(fd, SOMAXCONN) < 0) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

/* The address a listen setting resolved to, as "ADDR:PORT" or "[ADDR]:PORT". */
static void addr_text(const struct sockaddr_storage *ss, char *buf, size_t len)
{
	char a[INET6_ADDRSTRLEN] = "?";
	if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)ss;
		inet_ntop(AF_INET6, &s6->sin6_addr, a, sizeof a);
		snprintf(buf, len, "[%s]:%u", a, ntohs(s6->sin6_port));
	} else {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)ss;
		inet_ntop(AF_INET, &s4->sin_addr, a, sizeof a);
		snprintf(buf, len, "%s:%u", a, ntohs(s4->sin_port));
	}
}

static struct MHD_Daemon *start(struct wb_httpd *self, const struct wb_httpd_opts *o, int fd)
{
	unsigned flags = MHD_USE_EPOLL | MHD_USE_ERROR_LOG;
	if (self->tls_cert)
		flags |= MHD_USE_TLS;
	struct MHD_OptionItem opts[16];
	size_t n = 0;
	opts[n++] = (struct MHD_OptionItem){MHD_OPTION_LISTEN_SOCKET, fd, NULL};
	opts[n++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_LIMIT,
					    (intptr_t)o->max_connections, NULL};
	opts[n++] = (struct MHD_OptionItem){MHD_OPTION_PER_IP_CONNECTION_LIMIT,
					    (intptr_t)o->max_per_ip, NULL};
	opts[n++] =
	    (struct MHD_OptionItem){MHD_OPTION_CONNECTION_TIMEOUT, (intptr_t)o->timeout_s, NULL};
	opts[n++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_MEMORY_LIMIT,
					    (intptr_t)o->memory_limit, NULL};
	opts[n++] =
	    (struct MHD_OptionItem){MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)on_connection, self};
	opts[n++] =
	    (struct MHD_OptionItem){MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)on_completed, self};
	if (self->tls_cert) {
		opts[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0, self->tls_cert};
		opts[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0, self->tls_key};
		/* TLS 1.0 and 1.1 are deprecated (RFC 8996); GnuTLS's NORMAL still offers them */
		opts[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_PRIORITIES, 0,
						    (void *)HTTP_TLS_PRIORITIES};
	}
	opts[n++] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
	/* the logger goes first so that MHD routes even its option errors through it */
	return MHD_start_daemon(flags, 0, on_accept, self, on_request, self,
				MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, self, MHD_OPTION_ARRAY,
				opts, MHD_OPTION_END);
}

struct wb_httpd *wb_httpd_new(const struct wb_httpd_opts *o, zloop_t *loop,
			      struct wb_httpd_counters *ctr)
{
	struct wb_httpd *self = calloc(1, sizeof *self);
	if (!self)
		return NULL;
	self->loop = loop;
	self->ctr = ctr;
	self->handler = o->handler;
	self->handler_arg = o->handler_arg;
	self->completed = o->completed;
	self->completed_arg = o->completed_arg;
	self->timer_id = -1;
	self->rl = self->rl_refused = self->rl_cut = self->rl_bad = self->rl_auth =
	    (struct wb_ratelimit)WB_RATELIMIT_INIT;
	if (o->auth_user && o->auth_user[0] &&
	    (!(self->auth_user = strdup(o->auth_user)) ||
	     !(self->auth_pass = strdup(o->auth_pass ? o->auth_pass : ""))))
		goto fail;
	self->max_connections = o->max_connections;
	/* at most half: the reserve must not become the limit */
	self->reserved =
	    o->reserved < o->max_connections / 2 ? o->reserved : o->max_connections / 2;
	self->request_timeout_ns = o->request_timeout_ns;
	struct peer_limits pl = {.max_failures = o->auth_max_failures ? o->auth_max_failures : 1,
				 .penalty_ns = o->auth_penalty_ns,
				 .max_peers = (size_t)o->max_connections + 4096};
	if (!(self->peers = peers_new(&pl)))
		goto fail;
	if (o->tls_cert && o->tls_cert[0]) {
		if (!(self->tls_cert = read_text(o->tls_cert, "tls_cert")) ||
		    !(self->tls_key = read_text(o->tls_key, "tls_key")))
			goto fail;
	}
	struct sockaddr_storage ss;
	socklen_t sslen;
	if (resolve(o->listen, &ss, &sslen) < 0)
		goto fail;
	bool any = ss.ss_family == AF_INET6 &&
		   IN6_IS_ADDR_UNSPECIFIED(&((struct sockaddr_in6 *)&ss)->sin6_addr);
	int fd = listen_on(&ss, sslen);
	if (fd < 0 && any && errno != EADDRINUSE && errno != EACCES) {
		/* no IPv6 in this kernel or namespace: any IPv4 address */
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
		uint16_t port = ((struct sockaddr_in6 *)&ss)->sin6_port;
		memset(&ss, 0, sizeof ss);
		s4->sin_family = AF_INET;
		s4->sin_addr.s_addr = htonl(INADDR_ANY);
		s4->sin_port = port;
		fd = listen_on(&ss, sizeof *s4);
	}
	if (fd < 0) {
		char at[INET6_ADDRSTRLEN + 16];
		addr_text(&ss, at, sizeof at);
		log_errx("http: cannot listen on %s (listen \"%s\"): %s", at, o->listen,
			 strerror(errno));
		goto fail;
	}
	self->mhd = start(self, o, fd);
	if (!self->mhd) {
		/* MHD owns the socket once it runs; whether it closed it on failure depends on
		 * where it failed */
		if (fcntl(fd, F_GETFD) >= 0)
			close(fd);
		log_errx("http: cannot serve on %s (see the message above)", o->listen);
		goto fail;
	}
	const union MHD_DaemonInfo *info = MHD_get_daemon_info(self->mhd, MHD_DAEMON_INFO_EPOLL_FD);
	const union MHD_DaemonInfo *pinfo =
	    MHD_get_daemon_info(self->mhd, MHD_DAEMON_INFO_BIND_PORT);
	if (!info) {
		log_warnx("http: libmicrohttpd gave no epoll fd");
		goto fail;
	}
	self->port = pinfo ? pinfo->port : 0;
	self->item = (zmq_pollitem_t){.socket = NULL, .fd = info->epoll_fd, .events = ZMQ_POLLIN};
	if (zloop_poller(self->loop, &self->item, on_ready, self) < 0) {
		log_warnx("http: cannot poll the server's epoll fd");
		goto fail;
	}
	self->polling = true;
	zloop_poller_set_tolerant(self->loop, &self->item);
	httpd_drive(self);
	return self;
fail:
	wb_httpd_destroy(&self);
	return NULL;
}

uint16_t wb_httpd_port(const struct wb_httpd *self)
{
	return self->port;
}

struct peers *wb_httpd_peers(struct wb_httpd *self)
{
	return self->peers;
}

void wb_httpd_destroy(struct wb_httpd **self_p)
{
	if (!self_p || !*self_p)
		return;
	struct wb_httpd *self = *self_p;
	if (self->polling)
		zloop_poller_end(self->loop, &self->item);
	if (self->timer_id >= 0)
		zloop_timer_end(self->loop, self->timer_id);
	if (self->mhd)
		MHD_stop_daemon(self->mhd); /* closes every connection: on_connection frees them */
	peers_destroy(&self->peers);
	if (self->tls_key)
		explicit_bzero(self->tls_key, strlen(self->tls_key));
	if (self->auth_pass)
		explicit_bzero(self->auth_pass, strlen(self->auth_pass));
	free(self->tls_cert);
	free(self->tls_key);
	free(self->auth_user);
	free(self->auth_pass);
	free(self);
	*self_p = NULL;
}

/* ---- basic auth, the same for every stage that serves HTTP ---- */
enum auth_result { AUTH_OK, AUTH_MISSING, AUTH_WRONG };

static enum auth_result authorized(struct wb_httpd *self, struct MHD_Connection *con)
{
	char *pass = NULL;
	char *user = MHD_basic_auth_get_username_password(con, &pass);
	enum auth_result r = !user ? AUTH_MISSING
			     : pass && (http_secret_equal(user, self->auth_user) &
					http_secret_equal(pass, self->auth_pass))
				 ? AUTH_OK
				 : AUTH_WRONG;
	if (user)
		MHD_free(user);
	if (pass)
		MHD_free(pass);
	return r;
}

bool wb_httpd_auth(struct wb_httpd *self, struct MHD_Connection *con, const char *what,
		   enum MHD_Result *rc)
{
	if (!self->auth_user)
		return true;
	const char *key = wb_httpd_client(con);
	uint64_t now = wb_mono_ns(), left_ns;
	if (key && peers_blocked(self->peers, key, now, &left_ns)) {
		/* 429 with Retry-After while the address serves a penalty for wrong passwords */
		static const char body[] =
		    "too many failed logins from this address; try again later\n";
		char secs[24];
		snprintf(secs, sizeof secs, "%llu",
			 (unsigned long long)((left_ns + WB_NS_PER_SEC - 1) / WB_NS_PER_SEC));
		const char *const headers[] = {MHD_HTTP_HEADER_RETRY_AFTER, secs, NULL};
		self->ctr->auth_throttled++;
		*rc = wb_httpd_reply_with(self, con, MHD_HTTP_TOO_MANY_REQUESTS,
					  "text/plain; charset=utf-8", body, sizeof body - 1,
					  MHD_RESPMEM_PERSISTENT, headers);
		return false;
	}
	enum auth_result ar = authorized(self, con);
	if (ar == AUTH_WRONG && key) {
		self->ctr->auth_failures++;
		peers_auth_failed(self->peers, key, now);
		log_rl(&self->rl_auth, WB_LOG_WARN, "http: %s: wrong user or password for %s", key,
		       what);
	} else if (ar == AUTH_OK && key) {
		peers_auth_ok(self->peers, key, now);
	}
	if (ar == AUTH_OK)
		return true;
	static const char body[] = "authentication required\n";
	struct MHD_Response *r =
	    MHD_create_response_from_buffer(sizeof body - 1, (void *)body, MHD_RESPMEM_PERSISTENT);
	if (!r) {
		*rc = MHD_NO;
		return false;
	}
	*rc = MHD_queue_basic_auth_fail_response(con, "wattbus", r);
	MHD_destroy_response(r);
	wb_httpd_count(self, MHD_HTTP_UNAUTHORIZED);
	return false;
}

char *wb_httpd_read_password(const char *path)
{
	FILE *f = fopen(path, "re");
	if (!f) {
		log_warn("auth_password_file %s", path);
		return NULL;
	}
	char *line = NULL;
	size_t cap = 0;
	ssize_t n = getline(&line, &cap, f);
	fclose(f);
	while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
		line[--n] = '\0';
	if (n <= 0) {
		log_warnx("auth_password_file %s: no password on its first line", path);
		free(line);
		return NULL;
	}
	return line;
}

/* ---- the config keys ---- */

int wb_httpd_conf_check(const struct wb_httpd_conf *c, char *err, size_t errlen)
{
	char host[256];
	unsigned port;
	if (http_split_listen(c->listen, host, sizeof host, &port) < 0) {
		snprintf(err, errlen, "listen: \"%s\" is not PORT, :PORT, HOST:PORT or [IPV6]:PORT",
			 c->listen);
		return -1;
	}
	if (!c->tls_cert[0] != !c->tls_key[0]) {
		snprintf(err, errlen, "tls_cert and tls_key go together");
		return -1;
	}
	if (!c->auth_user[0] != !c->auth_password_file[0]) {
		snprintf(err, errlen, "auth_user and auth_password_file go together");
		return -1;
	}
	return 0;
}

struct wb_httpd_opts wb_httpd_opts_of(const struct wb_httpd_conf *c)
{
	return (struct wb_httpd_opts){
	    .listen = c->listen,
	    .max_connections = (unsigned)c->max_connections,
	    .max_per_ip = (unsigned)c->max_connections_per_ip,
	    .reserved = (unsigned)c->reserved_connections,
	    .timeout_s = (unsigned)((c->http_timeout_ns + WB_NS_PER_SEC - 1) / WB_NS_PER_SEC),
	    .request_timeout_ns = c->http_request_timeout_ns,
	    .memory_limit = (size_t)c->max_header_bytes,
	    .tls_cert = c->tls_cert,
	    .tls_key = c->tls_key,
	    .auth_max_failures = (unsigned)c->auth_max_failures,
	    .auth_penalty_ns = c->auth_penalty_ns,
	};
}

bool wb_httpd_conf_same(const struct wb_httpd_conf *a, const struct wb_httpd_conf *b)
{
	return !strcmp(a->listen, b->listen) && a->max_connections == b->max_connections &&
	       a->max_connections_per_ip == b->max_connections_per_ip &&
	       a->reserved_connections == b->reserved_connections &&
	       a->http_timeout_ns == b->http_timeout_ns &&
	       a->http_request_timeout_ns == b->http_request_timeout_ns &&
	       a->max_header_bytes == b->max_header_bytes && !strcmp(a->tls_cert, b->tls_cert) &&
	       !strcmp(a->tls_key, b->tls_key) && !strcmp(a->auth_user, b->auth_user) &&
	       !strcmp(a->auth_password_file, b->auth_password_file) &&
	       a->auth_max_failures == b->auth_max_failures &&
	       a->auth_penalty_ns == b->auth_penalty_ns;
}
