/*
 * The pure parts of exportd's HTTP side: Accept-Encoding negotiation, the
 * listen address syntax, and the constant-time secret comparison.
 */
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

static const struct unit_case cases[] = {
    {"Accept-Encoding: gzip negotiation", test_accepts_gzip},
    {"listen address syntax", test_split_listen},
    {"secrets compare exactly", test_secret_equal},
};

UNIT_MAIN(cases)
