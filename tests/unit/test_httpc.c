/* lib/httpc.c against a one-connection server on a loopback port. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "httpc.h"
#include "job.h"
#include "unit.h"

/* What the server does with its one connection. */
struct server {
	int lfd;
	int port;
	const char *answer;  /* written as is after the request's headers (and body) */
	size_t repeat;	     /* then this many 'x' bytes */
	bool stall;	     /* never answer: read and wait until the client goes */
	const char *answer2; /* then a second connection gets this (a redirect's target) */
	char request[8192];  /* what the client sent */
	size_t request_len;
	atomic_bool got_request; /* the whole request was read */
	pthread_t thread;
};

static void *serve_one(struct server *s);

static void *serve(void *arg)
{
	struct server *s = arg;
	serve_one(s);
	if (s->answer2) {
		s->answer = s->answer2;
		s->request_len = 0;
		serve_one(s);
	}
	return NULL;
}

static void *serve_one(struct server *s)
{
	int fd = accept(s->lfd, NULL, NULL);
	if (fd < 0)
		return NULL;
	/* Read until the end of the headers plus Content-Length bytes. */
	for (;;) {
		ssize_t n =
		    read(fd, s->request + s->request_len, sizeof(s->request) - 1 - s->request_len);
		if (n <= 0)
			break;
		s->request_len += (size_t)n;
		s->request[s->request_len] = '\0';
		char *end = strstr(s->request, "\r\n\r\n");
		if (!end)
			continue;
		const char *cl = strcasestr(s->request, "Content-Length:");
		size_t want =
		    (size_t)(end + 4 - s->request) + (cl ? strtoul(cl + 15, NULL, 10) : 0);
		if (s->request_len >= want)
			break;
	}
	atomic_store(&s->got_request, true);
	if (s->stall) {
		char b[64];
		while (read(fd, b, sizeof(b)) > 0)
			;
	} else {
		if (send(fd, s->answer, strlen(s->answer), MSG_NOSIGNAL) < 0)
			goto out;
		char x[256];
		memset(x, 'x', sizeof(x));
		for (size_t left = s->repeat; left > 0;) {
			size_t n = left < sizeof(x) ? left : sizeof(x);
			if (send(fd, x, n, MSG_NOSIGNAL) < 0)
				break; /* the client stopped reading (too_big) */
			left -= n;
		}
	}
out:
	close(fd);
	return NULL;
}

static void server_start(struct server *s)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	s->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CHECK(s->lfd >= 0);
	CHECK(bind(s->lfd, (struct sockaddr *)&a, sizeof(a)) == 0);
	CHECK(listen(s->lfd, 4) == 0);
	CHECK(getsockname(s->lfd, (struct sockaddr *)&a, &len) == 0);
	s->port = ntohs(a.sin_port);
	CHECK(pthread_create(&s->thread, NULL, serve, s) == 0);
}

static void server_stop(struct server *s)
{
	pthread_join(s->thread, NULL);
	close(s->lfd);
}

static void url_of(const struct server *s, const char *path, char *out, size_t outlen)
{
	snprintf(out, outlen, "http://127.0.0.1:%d%s", s->port, path);
}

static void test_get_json_with_bearer(void)
{
	struct server s = {.answer = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
				     "Content-Length: 21\r\nConnection: close\r\n\r\n"
				     "{\"items\": [1, 2, 3]}\n"};
	server_start(&s);
	char url[128], err[512];
	url_of(&s, "/pods", url, sizeof(url));
	struct wb_httpc_opts o = {.bearer = "tok-123", .accept = "application/json"};
	struct wb_httpc_resp r;
	CHECK(wb_httpc_request("GET", url, NULL, 0, &o, &r, err, sizeof(err)) == WB_HTTPC_OK);
	server_stop(&s);
	CHECK_U64(r.status, 200);
	CHECK(strstr(s.request, "GET /pods HTTP/1.1\r\n") == s.request);
	CHECK(strstr(s.request, "\r\nAuthorization: Bearer tok-123\r\n") != NULL);
	CHECK(strstr(s.request, "\r\nAccept: application/json\r\n") != NULL);
	json_t *j = wb_httpc_json(&r, url, err, sizeof(err));
	CHECK(j && json_array_size(json_object_get(j, "items")) == 3);
	json_decref(j);
	wb_httpc_resp_free(&r);
}

static void test_post_basic_auth(void)
{
	struct server s = {
	    .answer = "HTTP/1.1 201 Created\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"};
	server_start(&s);
	char url[128], err[512];
	url_of(&s, "/model", url, sizeof(url));
	struct wb_httpc_opts o = {.user = "root", .password = "calvin"};
	struct wb_httpc_resp r;
	const char *body = "{\"metrics\":[\"bpf_cpu_time_ms\"]}";
	CHECK(wb_httpc_request("POST", url, body, strlen(body), &o, &r, err, sizeof(err)) ==
	      WB_HTTPC_OK);
	server_stop(&s);
	CHECK_U64(r.status, 201);
	CHECK_STR(r.body, "ok");
	CHECK(strstr(s.request, "POST /model HTTP/1.1\r\n") == s.request);
	/* base64("root:calvin") */
	CHECK(strstr(s.request, "\r\nAuthorization: Basic cm9vdDpjYWx2aW4=\r\n") != NULL);
	CHECK(strstr(s.request, "\r\nContent-Type: application/json\r\n") != NULL);
	CHECK(strstr(s.request, body) != NULL);
	wb_httpc_resp_free(&r);
}

/* A redirect is followed on the same host and port only: the bearer token stays there. */
static void test_redirects_same_host_only(void)
{
	char url[128], err[512], loc[256];
	struct wb_httpc_opts o = {.bearer = "tok-123"};
	struct wb_httpc_resp r;
	struct server s = {
	    .answer2 = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n"};
	server_start(&s);
	/* absolute, to this server's own origin */
	snprintf(
	    loc, sizeof(loc),
	    "HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:%d/moved\r\nContent-Length: 0\r\n"
	    "Connection: close\r\n\r\n",
	    s.port);
	s.answer = loc;
	url_of(&s, "/models", url, sizeof(url));
	CHECK(wb_httpc_request("GET", url, NULL, 0, &o, &r, err, sizeof(err)) == WB_HTTPC_OK);
	server_stop(&s);
	CHECK(r.len == 3 && memcmp(r.body, "ok\n", 3) == 0);
	CHECK(strstr(s.request, "GET /moved HTTP/1.1\r\n") == s.request);
	wb_httpc_resp_free(&r);

	/* relative: the same host by definition */
	struct server rel = {
	    .answer = "HTTP/1.1 301 Moved\r\nLocation: /v2/models\r\nContent-Length: 0\r\n"
		      "Connection: close\r\n\r\n",
	    .answer2 = s.answer2};
	server_start(&rel);
	url_of(&rel, "/models", url, sizeof(url));
	CHECK(wb_httpc_request("GET", url, NULL, 0, &o, &r, err, sizeof(err)) == WB_HTTPC_OK);
	server_stop(&rel);
	CHECK(strstr(rel.request, "GET /v2/models HTTP/1.1\r\n") == rel.request);
	wb_httpc_resp_free(&r);

	/* another host, another port of this host, //host, another scheme, and this host as the
	 * user name of another: refused, nothing followed */
	static const char *const away[] = {
	    "http://127.0.0.2:%d/steal", "http://127.0.0.1:%d0/steal", "//localhost:%d/steal",
	    "HTTPS://127.0.0.1:%d/x", "http://127.0.0.1:%d@127.0.0.2/steal"};
	for (size_t i = 0; i < sizeof(away) / sizeof(away[0]); i++) {
		struct server far = {0};
		server_start(&far);
		char where[96];
		snprintf(where, sizeof(where), away[i], far.port);
		snprintf(loc, sizeof(loc),
			 "HTTP/1.1 307 Temporary Redirect\r\nLocation: %s\r\nContent-Length: 0\r\n"
			 "Connection: close\r\n\r\n",
			 where);
		far.answer = loc;
		url_of(&far, "/models", url, sizeof(url));
		CHECK(wb_httpc_request("GET", url, NULL, 0, &o, &r, err, sizeof(err)) ==
		      WB_HTTPC_ERROR);
		server_stop(&far);
		char want[200];
		snprintf(want, sizeof(want), "redirect to another host refused (Location: %s)",
			 where);
		if (!strstr(err, want))
			printf("# %s\n", err);
		CHECK(strstr(err, want) != NULL);
		wb_httpc_resp_free(&r);
	}
}

static void test_status_names_url_and_body(void)
{
	struct server s = {.answer = "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 10\r\n"
				     "Connection: close\r\n\r\nBMC\tbusy\n!"};
	server_start(&s);
	char url[128], err[512];
	url_of(&s, "/redfish/v1/Chassis", url, sizeof(url));
	struct wb_httpc_resp r;
	CHECK(wb_httpc_request("GET", url, NULL, 0, NULL, &r, err, sizeof(err)) == WB_HTTPC_STATUS);
	server_stop(&s);
	CHECK_U64(r.status, 500);
	CHECK(strstr(err, url) != NULL);
	CHECK(strstr(err, "HTTP 500: BMC busy !") != NULL);
	wb_httpc_resp_free(&r);
}

static void test_too_big(void)
{
	struct server s = {.answer = "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n",
			   .repeat = 100000};
	server_start(&s);
	char url[128], err[512];
	url_of(&s, "/big", url, sizeof(url));
	struct wb_httpc_opts o = {.max_body = 65536};
	struct wb_httpc_resp r;
	CHECK(wb_httpc_request("GET", url, NULL, 0, &o, &r, err, sizeof(err)) == WB_HTTPC_TOO_BIG);
	server_stop(&s);
	CHECK(r.len <= 65536);
	CHECK(strstr(err, "longer than 65536 bytes") != NULL);
	CHECK_STR(wb_httpc_result_name(WB_HTTPC_TOO_BIG), "too_big");
	wb_httpc_resp_free(&r);
}

static void test_not_json(void)
{
	struct server s = {
	    .answer = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\n{\"a\":"};
	server_start(&s);
	char url[128], err[512];
	url_of(&s, "/x", url, sizeof(url));
	struct wb_httpc_resp r;
	CHECK(wb_httpc_request("GET", url, NULL, 0, NULL, &r, err, sizeof(err)) == WB_HTTPC_OK);
	server_stop(&s);
	CHECK(wb_httpc_json(&r, url, err, sizeof(err)) == NULL);
	CHECK(strstr(err, ": not JSON: line 1") != NULL);
	wb_httpc_resp_free(&r);
}

/* The async form: the fd turns readable, the deadline is kept, and the loop is never blocked. */
static void test_job_timeout_and_refused(void)
{
	struct server s = {.stall = true};
	server_start(&s);
	char url[128], err[512];
	url_of(&s, "/slow", url, sizeof(url));
	/* long enough that a loaded machine does not end it before the first check */
	struct wb_httpc_opts o = {.timeout_ms = 2000};
	struct wb_httpc_job *j = wb_httpc_start("GET", url, NULL, 0, &o, err, sizeof(err));
	CHECK(j != NULL);
	if (!j)
		return;
	CHECK(!wb_httpc_job_done(j));
	struct pollfd p = {.fd = wb_httpc_job_fd(j), .events = POLLIN};
	int n;
	while ((n = poll(&p, 1, 60000)) < 0)
		;
	CHECK(n == 1 && wb_httpc_job_done(j));
	struct wb_httpc_resp r;
	CHECK(wb_httpc_job_finish(j, &r, err, sizeof(err)) == WB_HTTPC_TIMEOUT);
	CHECK(strstr(err, "GET http://127.0.0.1:") == err);
	wb_httpc_resp_free(&r);
	server_stop(&s);

	/* The listening socket is closed now: nothing listens on that port. */
	CHECK(wb_httpc_request("GET", url, NULL, 0, NULL, &r, err, sizeof(err)) ==
	      WB_HTTPC_CONNECT);
	wb_httpc_resp_free(&r);
}

/*
 * The stop (last: once per process) cancels a request a server never answers: the transfer
 * aborts at the cancel, long before its own deadline, and says it was cancelled.
 */
static void test_job_cancelled_at_stop(void)
{
	struct server s = {.stall = true};
	server_start(&s);
	char url[128], err[512];
	url_of(&s, "/hung", url, sizeof(url));
	struct wb_httpc_opts o = {.timeout_ms = 600000};
	struct wb_httpc_job *j = wb_httpc_start("GET", url, NULL, 0, &o, err, sizeof(err));
	CHECK(j != NULL);
	if (!j)
		return;
	/* The transfer is under way: the server holds the request. */
	for (int i = 0; i < 30000 && !atomic_load(&s.got_request); i++)
		usleep(1000);
	CHECK(atomic_load(&s.got_request));
	CHECK(!wb_httpc_job_done(j));
	CHECK_U64(wb_jobs_running(), 1);
	/* 30 s: a loaded machine's room, 20 times less than the request's own deadline */
	CHECK_U64(wb_jobs_stop(30 * WB_NS_PER_SEC), 0);
	CHECK(wb_httpc_job_done(j));
	struct wb_httpc_resp r;
	CHECK(wb_httpc_job_finish(j, &r, err, sizeof(err)) == WB_HTTPC_ERROR);
	CHECK(strstr(err, "/hung: cancelled") != NULL);
	wb_httpc_resp_free(&r);
	server_stop(&s); /* the server's read ends: the client went */
}

/* A token that would not fit the header is refused, not cut short. */
static void test_bearer_too_long(void)
{
	char token[5000], err[512];
	memset(token, 'a', sizeof(token) - 1);
	token[sizeof(token) - 1] = '\0';
	struct wb_httpc_opts o = {.bearer = token};
	struct wb_httpc_resp r;
	CHECK(wb_httpc_request("GET", "http://127.0.0.1:1/pods", NULL, 0, &o, &r, err,
			       sizeof(err)) == WB_HTTPC_ERROR);
	CHECK(strstr(err, "bearer token longer than") != NULL);
	wb_httpc_resp_free(&r);
}

static const struct unit_case cases[] = {
    {"redirects are followed on the same host and port only", test_redirects_same_host_only},
    {"bearer_too_long", test_bearer_too_long},
    {"get_json_with_bearer", test_get_json_with_bearer},
    {"post_basic_auth", test_post_basic_auth},
    {"status_names_url_and_body", test_status_names_url_and_body},
    {"too_big", test_too_big},
    {"not_json", test_not_json},
    {"job_timeout_and_refused", test_job_timeout_and_refused},
    {"job_cancelled_at_stop", test_job_cancelled_at_stop},
};
UNIT_MAIN(cases)
