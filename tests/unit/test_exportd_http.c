/*
 * The pure parts of exportd's HTTP side: Accept-Encoding negotiation, the
 * listen address syntax, the constant-time secret comparison, and the
 * per-address table (connections, basic-auth penalties).
 */
#include <arpa/inet.h>
#include <netinet/in.h>

#include "unit.h"

#include "../../exportd/exportd.h"

static void test_accepts_gzip(void)
{
	CHECK(http_accepts_gzip("gzip"));
	CHECK(http_accepts_gzip("gzip, deflate, br"));
	CHECK(http_accepts_gzip("deflate,GZIP;q=0.5"));
	CHECK(http_accepts_gzip("identity, *"));
	CHECK(!http_accepts_gzip(NULL));
	CHECK(!http_accepts_gzip(""));
	CHECK(!http_accepts_gzip("identity"));
	CHECK(!http_accepts_gzip("gzip;q=0"));
	CHECK(!http_accepts_gzip("gzip;q=0.0, identity"));
	CHECK(!http_accepts_gzip("x-gzip2"));
	CHECK(!http_accepts_gzip("gzipx"));
}

static void test_split_listen(void)
{
	char host[64];
	unsigned port;
	CHECK(http_split_listen("9102", host, sizeof host, &port) == 0);
	CHECK_STR(host, "");
	CHECK_U64(port, 9102);
	CHECK(http_split_listen(":9103", host, sizeof host, &port) == 0);
	CHECK_STR(host, "");
	CHECK_U64(port, 9103);
	CHECK(http_split_listen("127.0.0.1:0", host, sizeof host, &port) == 0);
	CHECK_STR(host, "127.0.0.1");
	CHECK_U64(port, 0);
	CHECK(http_split_listen("[::1]:9102", host, sizeof host, &port) == 0);
	CHECK_STR(host, "::1");
	CHECK(http_split_listen("localhost:80", host, sizeof host, &port) == 0);
	CHECK_STR(host, "localhost");
	CHECK(http_split_listen("::1:9102", host, sizeof host, &port) == -1);
	CHECK(http_split_listen("host:", host, sizeof host, &port) == -1);
	CHECK(http_split_listen("host:65536", host, sizeof host, &port) == -1);
	CHECK(http_split_listen("host:-1", host, sizeof host, &port) == -1);
	CHECK(http_split_listen("host:12ab", host, sizeof host, &port) == -1);
	CHECK(http_split_listen("[::1]9102", host, sizeof host, &port) == -1);
	CHECK(http_split_listen("", host, sizeof host, &port) == -1);
}

static void test_secret_equal(void)
{
	CHECK(http_secret_equal("s3cret", "s3cret"));
	CHECK(!http_secret_equal("s3cre", "s3cret"));
	CHECK(!http_secret_equal("s3cretx", "s3cret"));
	CHECK(!http_secret_equal("S3cret", "s3cret"));
	CHECK(!http_secret_equal("", "s3cret"));
	CHECK(http_secret_equal("", ""));
}

static void key_of(const char *addr, char *key, size_t len)
{
	struct sockaddr_storage ss = {0};
	if (strchr(addr, ':')) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
		s6->sin6_family = AF_INET6;
		CHECK(inet_pton(AF_INET6, addr, &s6->sin6_addr) == 1);
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
		s4->sin_family = AF_INET;
		CHECK(inet_pton(AF_INET, addr, &s4->sin_addr) == 1);
	}
	CHECK(peers_key((struct sockaddr *)&ss, key, len) == 0);
}

static void test_peer_keys(void)
{
	char k[64];
	key_of("192.0.2.7", k, sizeof k);
	CHECK_STR(k, "192.0.2.7");
	key_of("::ffff:192.0.2.7", k, sizeof k); /* IPv4 on a dual-stack socket */
	CHECK_STR(k, "192.0.2.7");
	key_of("2001:db8:1:2:aaaa:bbbb:cccc:dddd", k, sizeof k); /* one host owns its /64 */
	CHECK_STR(k, "2001:db8:1:2::/64");
	key_of("2001:db8:1:2::1", k, sizeof k);
	CHECK_STR(k, "2001:db8:1:2::/64");
	struct sockaddr sa = {.sa_family = AF_UNIX};
	CHECK(peers_key(&sa, k, sizeof k) == -1);
}

#define MS 1000000ull

static void test_peer_penalty(void)
{
	struct peer_limits lim = {.max_failures = 3, .penalty_ns = 100 * MS, .max_peers = 4};
	struct peers *p = peers_new(&lim);
	uint64_t t = 1000 * MS, left = 0;
	peers_auth_failed(p, "a", t);
	peers_auth_failed(p, "a", t);
	CHECK(!peers_blocked(p, "a", t, NULL));
	peers_auth_failed(p, "a", t); /* the third: 100 ms */
	CHECK(peers_blocked(p, "a", t + 10 * MS, &left));
	CHECK_U64(left, 90 * MS);
	CHECK(!peers_blocked(p, "b", t, NULL)); /* another address is not held up */
	CHECK(!peers_blocked(p, "a", t + 100 * MS, NULL));
	peers_auth_failed(p, "a", t + 100 * MS); /* each further one doubles it */
	CHECK(peers_blocked(p, "a", t + 299 * MS, NULL));
	CHECK(!peers_blocked(p, "a", t + 300 * MS, NULL));
	for (int i = 0; i < 40; i++) /* up to 1024 times */
		peers_auth_failed(p, "a", t + 300 * MS);
	CHECK(peers_blocked(p, "a", t + 300 * MS, &left));
	CHECK_U64(left, 1024 * 100 * MS);
	peers_auth_ok(p, "a", t + 200000 * MS); /* the right password forgets it all */
	CHECK(!peers_blocked(p, "a", t + 200000 * MS, NULL));
	CHECK_U64(peers_size(p), 0);
	/* a lone failure long ago is forgotten: three more are needed */
	peers_auth_failed(p, "c", t);
	peers_auth_failed(p, "c", t + 2048 * 100 * MS);
	peers_auth_failed(p, "c", t + 2048 * 100 * MS);
	CHECK(!peers_blocked(p, "c", t + 2048 * 100 * MS, NULL));
	peers_destroy(&p);
	CHECK(p == NULL);
}

static void test_peer_table_bounded(void)
{
	struct peer_limits lim = {.max_failures = 1, .penalty_ns = 1000 * MS, .max_peers = 3};
	struct peers *p = peers_new(&lim);
	uint64_t t = 1000 * MS;
	CHECK(peers_conn_add(p, "x", t) == 0);
	CHECK(peers_conn_add(p, "x", t) == 0);
	CHECK_U64(peers_conns(p, "x"), 2);
	CHECK(peers_conn_add(p, "y", t) == 0);
	CHECK(peers_conn_add(p, "z", t) == 0);
	/* full of addresses that hold connections: a fourth is not tracked */
	CHECK(peers_conn_add(p, "w", t) == -1);
	peers_conn_del(p, "z", t);
	CHECK_U64(peers_size(p), 2); /* nothing left to keep */
	/* penalties fill the table; the oldest failure makes room, connections stay */
	peers_auth_failed(p, "f1", t);
	peers_auth_failed(p, "f2", t + 1 * MS);
	CHECK(peers_blocked(p, "f2", t + 2 * MS, NULL));
	CHECK_U64(peers_size(p), 3);
	CHECK(!peers_blocked(p, "f1", t + 2 * MS, NULL));
	CHECK_U64(peers_conns(p, "x"), 2);
	CHECK_U64(peers_conns(p, "y"), 1);
	peers_conn_del(p, "x", t);
	peers_conn_del(p, "x", t);
	CHECK_U64(peers_conns(p, "x"), 0);
	peers_destroy(&p);
}

static const struct unit_case cases[] = {
    {"Accept-Encoding: gzip negotiation", test_accepts_gzip},
    {"listen address syntax", test_split_listen},
    {"secrets compare exactly", test_secret_equal},
    {"client address keys", test_peer_keys},
    {"wrong passwords: a penalty per address that doubles", test_peer_penalty},
    {"the address table stays bounded", test_peer_table_bounded},
};

UNIT_MAIN(cases)
