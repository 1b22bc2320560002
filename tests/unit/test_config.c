/* Config: typed keys, file:line errors, other stages' sections, flags, expansion. */
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "config.h"
#include "unit.h"

struct conf {
	char *pub;
	struct wb_strlist sub;
	int64_t level;
	uint64_t interval_ns;
	uint64_t every_ns;
	bool train;
	double ratio;
	char *method;
	char *name;
	struct wb_strlist pats;
};

static const struct wb_conf_key keys[] = {
    {"pub", WB_CONF_STR | WB_CONF_RESTART, offsetof(struct conf, pub), "ipc://%r/alignd.sock", 0, 0,
     NULL, "endpoint"},
    {"sub", WB_CONF_LIST, offsetof(struct conf, sub), "ipc://%r/a.sock, ipc://%r/b.sock", 0, 0,
     NULL, "up"},
    {"level", WB_CONF_INT, offsetof(struct conf, level), "3", 1, 10, NULL, "a level"},
    {"interval", WB_CONF_DURATION, offsetof(struct conf, interval_ns), "1s", 10e6, 3600e9, NULL,
     "interval"},
    {"every", WB_CONF_DURATION | WB_CONF_OFF0, offsetof(struct conf, every_ns), "0", 100e6, 3600e9,
     NULL, "0 or a floor"},
    {"train", WB_CONF_BOOL, offsetof(struct conf, train), "no", 0, 0, NULL, "train"},
    {"ratio", WB_CONF_DOUBLE, offsetof(struct conf, ratio), "0.5", 0, 1, NULL, "ratio"},
    {"method", WB_CONF_ENUM, offsetof(struct conf, method), "ratio", 0, 0, "ratio|fixed|regression",
     "m"},
    {"name", WB_CONF_UTF8 | WB_CONF_RESTART, offsetof(struct conf, name), "", 0, 0, NULL, "a name"},
    {"pats", WB_CONF_GLOBS, offsetof(struct conf, pats), "", 0, 0, NULL, "patterns"},
};

static struct conf c;
static struct wb_conf_section sec = {"alignd", keys, sizeof(keys) / sizeof(keys[0]), &c};

static char *write_file(const char *text)
{
	static char path[64];
	unit_tmp(path, sizeof(path), "wb-test-conf-XXXXXX");
	int fd = mkstemp(path);
	if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
		return NULL;
	close(fd);
	return path;
}

static void test_defaults_and_expand(void)
{
	char err[WB_CONF_ERR_MAX];
	memset(&c, 0, sizeof(c));
	CHECK(wb_conf_defaults(&sec, 1, err, sizeof(err)) == 0);
	CHECK(wb_conf_expand(&sec, 1, "/run/wattbus", "n1") == 0);
	CHECK_STR(c.pub, "ipc:///run/wattbus/alignd.sock");
	CHECK_U64(c.sub.n, 2);
	CHECK_STR(c.sub.v[1], "ipc:///run/wattbus/b.sock");
	CHECK_U64(c.interval_ns, 1000000000);
	CHECK_U64(c.level, 3);
	CHECK(!c.train);
	CHECK_STR(c.method, "ratio");
	wb_conf_free(&sec, 1);
	CHECK(c.pub == NULL && c.sub.n == 0);
}

static void test_file_values(void)
{
	char err[WB_CONF_ERR_MAX];
	memset(&c, 0, sizeof(c));
	CHECK(wb_conf_defaults(&sec, 1, err, sizeof(err)) == 0);
	char *path = write_file(
	    "; comment\n[global]\n[alignd]\ninterval = 250ms\ntrain = yes\nsub = tcp://a:1\n"
	    "[exportd]\nlisten = :9102\n");
	int rc = wb_conf_load(path, &sec, 1, err, sizeof(err));
	if (rc < 0)
		printf("# %s\n", err);
	CHECK(rc == 0);
	CHECK_U64(c.interval_ns, 250000000);
	CHECK(c.train);
	CHECK_U64(c.sub.n, 1);
	CHECK_STR(c.sub.v[0], "tcp://a:1");
	unlink(path);
	wb_conf_free(&sec, 1);
}

static const struct {
	const char *text;
	const char *expect; /* ":LINE: reason" part */
} bad_files[] = {
    {"[alignd]\n\ncolour = blue\n", ":3: unknown key 'colour' in [alignd]"},
    {"[alignd]\ninterval = soon\n", ":2: [alignd] interval: 'soon' is not a duration"},
    {"[alignd]\ninterval = 1ms\n", ":2: [alignd] interval: 1ms is outside [10ms, 1h]"},
    {"[alignd]\nlevel = 11\n", ":2: [alignd] level: 11 is outside [1, 10]"},
    {"[alignd]\nlevel = 3x\n", ":2: [alignd] level: '3x' is not a decimal integer"},
    {"[alignd]\nlevel = 0x10\n", ":2: [alignd] level: '0x10' is not a decimal integer"},
    {"[alignd]\ninterval = 0x10s\n", ":2: [alignd] interval: '0x10s' is not a duration"},
    {"[alignd]\nlevel = 2\ntrain = yes\n\n[alignd]\nlevel = 3\n",
     ":6: [alignd] level: set twice (first on line 2)"},
    {"[alignd]\nsub = tcp://a:1\nsub = tcp://b:1\n",
     ":3: [alignd] sub: set twice (first on line 2)"},
    {"[alignd]\nevery = 1ns\n", ":2: [alignd] every: 1ns is outside [100ms, 1h] (or 0: off)"},
    {"[alignd]\nname = a\xc2\x9b"
     "2J\n",
     ":2: [alignd] name: 'a\xc2\x9b"
     "2J' holds a control character"},
    {"[alignd]\ntrain = perhaps\n", ":2: [alignd] train: 'perhaps' is not a boolean"},
    {"[alignd]\nratio = nan\n", ":2: [alignd] ratio: 'nan' is not a decimal number"},
    {"[alignd]\nmethod = magic\n",
     ":2: [alignd] method: 'magic' is not one of ratio|fixed|regression"},
    {"[alignd]\nthis line has no equals sign\n", ":2: syntax error"},
    {"[alignd\nlevel = 2\n", ":1: syntax error"},
    {"[aligned]\nlevel = 2\n", ":1: unknown section [aligned]"},
    {"[alignd]\nlevel = 2\n[nothing]\n", ":3: unknown section [nothing]"},
    {"level = 2\n", ":1: key 'level' outside a section"},
    {"[alignd]\nname = caf\xe9\n", ":2: [alignd] name: 'caf\xe9' is not valid UTF-8"},
    {"[alignd]\nname = a\x01"
     "b\n",
     ":2: [alignd] name: 'a\x01"
     "b' holds a control character"},
    {"[alignd]\npats = wattbus_*, node_[ab\n",
     ":2: [alignd] pats: pattern 'node_[ab' has a [ without its ]"},
    {"[alignd]\npats = x\\\n", ":2: [alignd] pats: pattern 'x\\' ends in a backslash"},
};

static void test_bad_files(void)
{
	for (size_t i = 0; i < sizeof(bad_files) / sizeof(bad_files[0]); i++) {
		char err[WB_CONF_ERR_MAX];
		memset(&c, 0, sizeof(c));
		wb_conf_defaults(&sec, 1, err, sizeof(err));
		char *path = write_file(bad_files[i].text);
		int rc = wb_conf_load(path, &sec, 1, err, sizeof(err));
		char want[256];
		snprintf(want, sizeof(want), "%s%s", path, bad_files[i].expect);
		if (rc == 0 || strncmp(err, want, strlen(want)) != 0) {
			printf("# case %zu: got \"%s\", expected prefix \"%s\"\n", i,
			       rc ? err : "(accepted)", want);
			unit_failed_checks++;
		}
		unlink(path);
		wb_conf_free(&sec, 1);
	}
}

/* Debian's libinih is built for 200-byte lines; a long sub list must still load. */
static void test_long_lines(void)
{
	char err[WB_CONF_ERR_MAX];
	memset(&c, 0, sizeof(c));
	wb_conf_defaults(&sec, 1, err, sizeof(err));
	size_t cap = 100 * 40 + 64;
	char *text = malloc(cap);
	size_t n = (size_t)snprintf(text, cap, "[alignd]\nsub = ");
	for (int i = 0; i < 100; i++)
		n += (size_t)snprintf(text + n, cap - n, "%sipc:///run/wattbus/host-%03d.sock",
				      i ? ", " : "", i);
	snprintf(text + n, cap - n,
		 "\nname = caf\xc3\xa9\npats = wattbus_[a-z]*, *_joules_total\n");
	char *path = write_file(text);
	int rc = wb_conf_load(path, &sec, 1, err, sizeof(err));
	if (rc < 0)
		printf("# %s\n", err);
	CHECK(rc == 0);
	CHECK_U64(c.sub.n, 100);
	CHECK_STR(c.sub.v[99], "ipc:///run/wattbus/host-099.sock");
	CHECK_STR(c.name, "caf\xc3\xa9");
	CHECK_U64(c.pats.n, 2);
	unlink(path);
	wb_conf_free(&sec, 1);
	/* Past the limit: refused with the line, not cut. */
	char *huge = malloc(WB_CONF_LINE_MAX + 64);
	n = (size_t)snprintf(huge, 64, "[alignd]\nlevel = 2\npub = ");
	memset(huge + n, 'x', WB_CONF_LINE_MAX);
	snprintf(huge + n + WB_CONF_LINE_MAX, 8, "\n");
	path = write_file(huge);
	memset(&c, 0, sizeof(c));
	wb_conf_defaults(&sec, 1, err, sizeof(err));
	CHECK(wb_conf_load(path, &sec, 1, err, sizeof(err)) < 0);
	CHECK(strstr(err, ":3: line longer than 65534 characters") != NULL);
	unlink(path);
	wb_conf_free(&sec, 1);
	free(text);
	free(huge);
}

/* Keys marked WB_CONF_RESTART that differ are named; others are not. */
static void test_restart_changes(void)
{
	char err[WB_CONF_ERR_MAX], buf[64];
	struct conf a = {0}, b = {0};
	struct wb_conf_section sa = sec, sb = sec;
	sa.dst = &a;
	sb.dst = &b;
	wb_conf_defaults(&sa, 1, err, sizeof(err));
	wb_conf_defaults(&sb, 1, err, sizeof(err));
	CHECK_U64(wb_conf_restart_changes(&sec, &a, &b, buf, sizeof(buf)), 0);
	CHECK_STR(buf, "");
	wb_conf_set(&sb, "level", "5", "--level", err,
		    sizeof(err)); /* applies at reload: not named */
	wb_conf_set(&sb, "pub", "tcp://x:1", "--pub", err, sizeof(err));
	wb_conf_set(&sb, "name", "n2", "--name", err, sizeof(err));
	CHECK_U64(wb_conf_restart_changes(&sec, &a, &b, buf, sizeof(buf)), 2);
	CHECK_STR(buf, "pub, name");
	CHECK_U64(wb_conf_restart_changes(&sec, &a, &b, buf, 7), 2); /* whole names only */
	CHECK_STR(buf, "pub");
	wb_conf_free(&sa, 1);
	wb_conf_free(&sb, 1);
}

static void test_missing_file_and_flags(void)
{
	char err[WB_CONF_ERR_MAX];
	memset(&c, 0, sizeof(c));
	wb_conf_defaults(&sec, 1, err, sizeof(err));
	CHECK(wb_conf_load("/nonexistent/wattbus.conf", &sec, 1, err, sizeof(err)) < 0);
	CHECK(strstr(err, "/nonexistent/wattbus.conf: cannot open") != NULL);
	/* not a regular file: /dev/zero is one endless line, a FIFO would block the open */
	CHECK(wb_conf_load("/dev/zero", &sec, 1, err, sizeof(err)) < 0);
	CHECK_STR(err, "/dev/zero: not a regular file");
	CHECK(wb_conf_load("/", &sec, 1, err, sizeof(err)) < 0);
	CHECK_STR(err, "/: not a regular file");
	char fifo[64];
	unit_tmp(fifo, sizeof(fifo), "wb-test-fifo-XXXXXX");
	CHECK(mkdtemp(fifo) != NULL);
	strcat(fifo, "/f");
	CHECK(mkfifo(fifo, 0600) == 0);
	CHECK(wb_conf_load(fifo, &sec, 1, err, sizeof(err)) < 0 &&
	      strstr(err, ": not a regular file"));
	unlink(fifo);
	*strrchr(fifo, '/') = '\0';
	rmdir(fifo);
	/* 0 is off; anything else keeps the floor */
	CHECK(wb_conf_set(&sec, "every", "0", "--every", err, sizeof(err)) == 0 && c.every_ns == 0);
	CHECK(wb_conf_set(&sec, "every", "100ms", "--every", err, sizeof(err)) == 0 &&
	      c.every_ns == 100000000);
	CHECK(wb_conf_set(&sec, "every", "99ms", "--every", err, sizeof(err)) < 0);
	CHECK(wb_conf_set(&sec, "interval", "10ms", "--interval", err, sizeof(err)) == 0);
	CHECK_U64(c.interval_ns, 10000000);
	CHECK(wb_conf_set(&sec, "nope", "1", "--nope", err, sizeof(err)) < 0);
	CHECK_STR(err, "--nope: unknown key 'nope' in [alignd]");
	CHECK(wb_conf_set(&sec, "level", "0", "--level", err, sizeof(err)) < 0);
	CHECK(strstr(err, "--level: [alignd] level: 0 is outside") != NULL);
	wb_conf_free(&sec, 1);
}

static void test_numbers(void)
{
	int64_t i;
	double d;
	CHECK(wb_parse_int("42", &i) == 0 && i == 42);
	CHECK(wb_parse_int("-3", &i) == 0 && i == -3);
	/* decimal only: base 0 would read 0x10 as 16 and 010 as 8 */
	CHECK(wb_parse_int("0x10", &i) < 0);
	CHECK(wb_parse_int("010", &i) == 0 && i == 10);
	CHECK(wb_parse_int(" 5", &i) < 0);
	CHECK(wb_parse_double("0x10", &d) < 0);
	CHECK(wb_parse_double("0x1p4", &d) < 0);
	CHECK(wb_parse_double("-.5", &d) == 0 && d == -0.5);
	CHECK(wb_parse_int("x", &i) < 0);
	CHECK(wb_parse_int("2x", &i) < 0);
	CHECK(wb_parse_int("", &i) < 0);
	CHECK(wb_parse_int("1.5", &i) < 0);
	CHECK(wb_parse_int("99999999999999999999", &i) < 0);
	CHECK(wb_parse_double("2.5", &d) == 0 && d == 2.5);
	CHECK(wb_parse_double("2x", &d) < 0);
	CHECK(wb_parse_double("inf", &d) < 0);
	CHECK(wb_parse_double("nan", &d) < 0);
	CHECK(wb_parse_double("", &d) < 0);
}

/* A duration and what it parses to; bad ones are refused. */
static const struct {
	const char *text;
	bool ok;
	uint64_t ns;
} durations[] = {
    {"1.5s", true, 1500000000}, {"100us", true, 100000},  {"2m", true, 120000000000ull},
    {"3", true, 3000000000ull}, {".5s", true, 500000000}, {"-1s", false, 0},
    {"0x10s", false, 0},	{"0x10", false, 0},	  {"infs", false, 0},
    {"1 s", false, 0},		{"s", false, 0},
};

static void test_durations(void)
{
	for (size_t i = 0; i < sizeof(durations) / sizeof(durations[0]); i++) {
		uint64_t ns = 0;
		int rc = wb_parse_duration(durations[i].text, &ns);
		if (durations[i].ok) {
			CHECK(rc == 0);
			CHECK_U64(ns, durations[i].ns);
		} else {
			CHECK(rc < 0);
		}
	}
	char buf[32];
	wb_format_duration(250000000, buf, sizeof(buf));
	CHECK_STR(buf, "250ms");
	wb_format_duration(3600000000000ull, buf, sizeof(buf));
	CHECK_STR(buf, "1h");
	CHECK_U64(wb_grid_next(1700000000123456789ull, 1000000000), 1700000001000000000ull);
	CHECK_U64(wb_grid_next(1700000001000000000ull, 1000000000), 1700000002000000000ull);
	CHECK_U64(wb_grid_next(15, 10), 20);
}

struct env_seen {
	int n;
	char last[64];
};

static void note_env(const char *var, const struct wb_conf_section *s, const struct wb_conf_key *k,
		     const char *value, void *arg)
{
	struct env_seen *seen = arg;
	seen->n++;
	snprintf(seen->last, sizeof(seen->last), "%s %s=%s", var, k->name, value);
}

static void test_env(void)
{
	char err[WB_CONF_ERR_MAX];
	struct env_seen seen = {0};
	memset(&c, 0, sizeof(c));
	wb_conf_defaults(&sec, 1, err, sizeof(err));
	char *const env[] = {
	    "PATH=/bin",
	    "WATTBUS_CONF=/etc/wattbus/wattbus.conf", /* not a section: left alone */
	    "WATTBUS_RUNTIME_DIR=/run/x",
	    "WATTBUS_EXPORTD_LISTEN=:1", /* another stage's section: left alone */
	    "WATTBUS_ALIGND_INTERVAL=250ms",
	    "WATTBUS_ALIGND_SUB=tcp://a:1, tcp://b:2",
	    "WATTBUS_ALIGND_TRAIN=yes",
	    "WATTBUS_ALIGND_OPTS=--level 9", /* the systemd units' flag list */
	    "WATTBUS_ALIGND_TEST_HOOK=1",
	    "WATTBUS_alignd_level=9", /* not the convention's spelling */
	    "WATTBUS_ALIGNDX_LEVEL=9",
	    NULL,
	};
	CHECK(wb_conf_env(&sec, 1, env, note_env, &seen, err, sizeof(err)) == 3);
	CHECK_U64(c.interval_ns, 250000000);
	CHECK_U64(c.sub.n, 2);
	CHECK_STR(c.sub.v[1], "tcp://b:2");
	CHECK(c.train);
	CHECK_U64(c.level, 3);
	CHECK_U64(seen.n, 3);
	CHECK_STR(seen.last, "WATTBUS_ALIGND_TRAIN train=yes");

	/* Bad values and unknown keys fail naming the variable; the flag set later wins. */
	char *const bad_int[] = {"WATTBUS_ALIGND_LEVEL=11", NULL};
	CHECK(wb_conf_env(&sec, 1, bad_int, NULL, NULL, err, sizeof(err)) < 0);
	CHECK_STR(err, "WATTBUS_ALIGND_LEVEL: [alignd] level: 11 is outside [1, 10]");
	char *const bad_enum[] = {"WATTBUS_ALIGND_METHOD=guess", NULL};
	CHECK(wb_conf_env(&sec, 1, bad_enum, NULL, NULL, err, sizeof(err)) < 0);
	CHECK_STR(
	    err,
	    "WATTBUS_ALIGND_METHOD: [alignd] method: 'guess' is not one of ratio|fixed|regression");
	char *const bad_dur[] = {"WATTBUS_ALIGND_INTERVAL=", NULL};
	CHECK(wb_conf_env(&sec, 1, bad_dur, NULL, NULL, err, sizeof(err)) < 0);
	CHECK(strstr(err, "WATTBUS_ALIGND_INTERVAL: [alignd] interval: '' is not a duration") ==
	      err);
	char *const typo[] = {"WATTBUS_ALIGND_INTERVALL=1s", NULL};
	CHECK(wb_conf_env(&sec, 1, typo, NULL, NULL, err, sizeof(err)) < 0);
	CHECK_STR(err, "WATTBUS_ALIGND_INTERVALL: [alignd] has no key 'intervall' (see --help)");
	CHECK(wb_conf_set(&sec, "interval", "2s", "--interval", err, sizeof(err)) == 0);
	CHECK_U64(c.interval_ns, 2000000000);
	CHECK(wb_conf_env(&sec, 1, NULL, NULL, NULL, err, sizeof(err)) == 0);
	wb_conf_free(&sec, 1);
}

/* A variant's keys of its own, composed after the stage's (powerd's sources). */
struct variant_conf {
	char depth; /* a first field smaller than the alignment: the offset must still align */
	double scale;
	char *path;
};

static const struct wb_conf_key variant_keys[] = {
    {"scale", WB_CONF_DOUBLE, offsetof(struct variant_conf, scale), "2.5", 0, 10, NULL, "scale"},
    {"path", WB_CONF_STR, offsetof(struct variant_conf, path), "/v", 0, 0, NULL, "path"},
};

static void test_compose(void)
{
	const struct wb_conf_part parts[] = {
	    {keys, sizeof(keys) / sizeof(keys[0]), sizeof(struct conf)},
	    {NULL, 0, 0}, /* a variant without keys */
	    {variant_keys, 2, sizeof(struct variant_conf)},
	};
	struct wb_conf_key out[16];
	size_t offs[3], size;
	char err[256];
	int n = wb_conf_compose(parts, 3, out, 16, offs, &size, err, sizeof(err));
	CHECK(n == (int)(sizeof(keys) / sizeof(keys[0])) + 2);
	CHECK(offs[0] == 0 && offs[2] >= sizeof(struct conf) &&
	      offs[2] % _Alignof(max_align_t) == 0);
	CHECK(size >= offs[2] + sizeof(struct variant_conf));
	CHECK(!strcmp(out[n - 1].name, "path") &&
	      out[n - 1].off == offs[2] + offsetof(struct variant_conf, path));
	/* the composed section takes defaults, flags and a file into each part's own struct */
	char *block = calloc(1, size);
	struct wb_conf_section vsec = {"alignd", out, (size_t)n, block};
	CHECK(wb_conf_defaults(&vsec, 1, err, sizeof(err)) == 0);
	struct conf *own = (struct conf *)block;
	struct variant_conf *var = (struct variant_conf *)(block + offs[2]);
	CHECK(own->level == 3 && var->scale == 2.5 && !strcmp(var->path, "/v"));
	CHECK(wb_conf_set(&vsec, "scale", "7", "--scale", err, sizeof(err)) == 0 &&
	      var->scale == 7);
	CHECK(wb_conf_set(&vsec, "scale", "11", "--scale", err, sizeof(err)) < 0);
	CHECK(strstr(err, "--scale") != NULL);
	CHECK(own->ratio == 0.5);
	wb_conf_free(&vsec, 1);
	free(block);
	/* a name in two parts, or more keys than room: refused, said */
	const struct wb_conf_part twice[] = {{variant_keys, 2, sizeof(struct variant_conf)},
					     {variant_keys, 1, sizeof(struct variant_conf)}};
	CHECK(wb_conf_compose(twice, 2, out, 16, offs, &size, err, sizeof(err)) < 0);
	CHECK(strstr(err, "scale") && strstr(err, "twice"));
	CHECK(wb_conf_compose(parts, 3, out, 4, offs, &size, err, sizeof(err)) < 0);
	CHECK(strstr(err, "more than 4 keys") != NULL);
}

static const struct unit_case cases[] = {
    {"defaults and %r expansion", test_defaults_and_expand},
    {"file values; other stages' sections skipped", test_file_values},
    {"bad files fail with file:line and the reason", test_bad_files},
    {"missing file, flags and their errors", test_missing_file_and_flags},
    {"whole-text integers and numbers", test_numbers},
    {"durations and the wall-clock grid", test_durations},
    {"lines past inih's 200 bytes; UTF-8 and pattern keys", test_long_lines},
    {"restart-only keys changed by a reload are named", test_restart_changes},
    {"WATTBUS_<SECTION>_<KEY> variables; bad ones named", test_env},
    {"key tables composed: each part's keys in its own struct", test_compose},
};
UNIT_MAIN(cases)
