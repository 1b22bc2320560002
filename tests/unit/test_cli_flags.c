/*
 * The wattbus verbs' flag tables (cli/flags.c): defaults, values read into the verb's options,
 * a bad or out-of-range value refused with the flag's name, and a --help that lists every flag
 * with its range and default.
 */
#include <fcntl.h>
#include <stddef.h>
#include <unistd.h>

#include "../../cli/cli.h"
#include "unit.h"

struct t_opts {
	bool loud;
	int64_t count, rows;
	uint64_t wait_ns, gap_ns;
	double speed;
	const char *name, *dir;
	struct cli_strs from;
	struct wb_sockopts so;
};
#define OFF(m) offsetof(struct t_opts, m)
static const struct cli_flag t_flags[] = {
    CLI_OPERAND("SRC", "where from"),
    CLI_OPERAND("MORE", "and more,\nover two lines"),
    {"loud", 'l', WB_CONF_BOOL, OFF(loud), NULL, 0, 0, NULL, "say more"},
    {"count", 'n', WB_CONF_INT, OFF(count), NULL, 1, INT64_MAX, "N", "stop after N"},
    {"rows", 'r', WB_CONF_INT, OFF(rows), "3", 1, 5, "N", "rows shown"},
    {"wait", 'w', WB_CONF_DURATION, OFF(wait_ns), "5s", 0, 0, "D", "wait this long"},
    {"max-gap", 0, WB_CONF_DURATION, OFF(gap_ns), "10s", 1e6, 60e9, "D", "longest pause"},
    {"speed", 's', WB_CONF_DOUBLE, OFF(speed), "1", 0.5, 8, "X", "how much faster"},
    {"name", 0, WB_CONF_STR, OFF(name), "anon", 0, 0, "NAME", "who we are"},
    {"dir", 'd', WB_CONF_STR, OFF(dir), NULL, 0, 0, "DIR", "where to look"},
    {"from", 0, WB_CONF_LIST, OFF(from), NULL, 0, 0, "FILE", "read this file"},
    CLI_CURVE_CERT(OFF(so)),
    CLI_CURVE_PEER(OFF(so)),
};
static const struct cli_verb t_verb = {CLI_VERB("t", t_flags, struct t_opts, 1, 2),
				       .synopsis = "[OPTIONS] SRC [MORE...]",
				       .notes = "a note at the end\n"};

/* What cli_parse printed on stdout and stderr, and what it returned. */
struct outcome {
	int rc, first;
	char out[8192], err[8192];
};

static void slurp(int fd, char *buf, size_t len)
{
	lseek(fd, 0, SEEK_SET);
	ssize_t n = read(fd, buf, len - 1);
	buf[n > 0 ? n : 0] = '\0';
}

/* Parse argv (NULL-terminated, argv[0] the verb) into o, with stdout and stderr captured. */
static void parse(struct outcome *res, struct t_opts *o, char **argv)
{
	int argc = 0;
	while (argv[argc])
		argc++;
	char out_path[256], err_path[256];
	int out_fd = mkstemp(unit_tmp(out_path, sizeof(out_path), "cliflags-out-XXXXXX"));
	int err_fd = mkstemp(unit_tmp(err_path, sizeof(err_path), "cliflags-err-XXXXXX"));
	fflush(stdout);
	int saved_out = dup(STDOUT_FILENO), saved_err = dup(STDERR_FILENO);
	dup2(out_fd, STDOUT_FILENO);
	dup2(err_fd, STDERR_FILENO);
	res->first = -1;
	res->rc = cli_parse(&t_verb, argc, argv, o, &res->first);
	fflush(stdout);
	fflush(stderr);
	dup2(saved_out, STDOUT_FILENO);
	dup2(saved_err, STDERR_FILENO);
	close(saved_out);
	close(saved_err);
	slurp(out_fd, res->out, sizeof(res->out));
	slurp(err_fd, res->err, sizeof(res->err));
	close(out_fd);
	close(err_fd);
	unlink(out_path);
	unlink(err_path);
}

static bool has(const char *text, const char *part)
{
	if (strstr(text, part))
		return true;
	printf("#   '%s' not in:\n# %s\n", part, text);
	return false;
}

static void test_defaults(void)
{
	struct t_opts o;
	memset(&o, 0xa5, sizeof(o)); /* every slot the table names is set, whatever was there */
	struct outcome r;
	parse(&r, &o, (char *[]){"t", "src", NULL});
	CHECK(r.rc == -1);
	CHECK(r.first == 1);
	CHECK(!o.loud);
	CHECK_U64(o.count, 0);
	CHECK_U64(o.rows, 3);
	CHECK_U64(o.wait_ns, 5000000000ull);
	CHECK_U64(o.gap_ns, 10000000000ull);
	CHECK_NEAR(o.speed, 1, 0);
	CHECK_STR(o.name, "anon");
	CHECK(o.dir == NULL);
	CHECK_U64(o.from.n, 0);
	CHECK(o.so.curve_cert == NULL && o.so.curve_peer == NULL);
	CHECK_STR(r.err, "");
}

static void test_values(void)
{
	struct t_opts o;
	struct outcome r;
	/* long and short spellings, a value in the same word, flags after an operand */
	parse(&r, &o,
	      (char *[]){"t",	   "-l",	   "--count=7", "-r",		"5",	 "src",
			 "--wait", "250ms",	   "--max-gap", "1ms",		"-s2.5", "--name",
			 "x",	   "-d",	   "/tmp",	"--from",	"a",	 "--from",
			 "b",	   "--curve-cert", "c",		"--curve-peer", "p",	 "more",
			 NULL});
	CHECK(r.rc == -1);
	CHECK_STR(r.err, "");
	CHECK(o.loud);
	CHECK_U64(o.count, 7);
	CHECK_U64(o.rows, 5);
	CHECK_U64(o.wait_ns, 250000000);
	CHECK_U64(o.gap_ns, 1000000);
	CHECK_NEAR(o.speed, 2.5, 0);
	CHECK_STR(o.name, "x");
	CHECK_STR(o.dir, "/tmp");
	CHECK_U64(o.from.n, 2);
	CHECK_STR(o.from.v[0], "a");
	CHECK_STR(o.from.v[1], "b");
	CHECK_STR(o.so.curve_cert, "c");
	CHECK_STR(o.so.curve_peer, "p");
	/* getopt moved the operands to the end, in their order */
	char **argv = (char *[]){"t", "src", "-n", "1", "more", NULL};
	parse(&r, &o, argv);
	CHECK(r.rc == -1);
	CHECK_STR(argv[r.first], "src");
	CHECK_STR(argv[r.first + 1], "more");
}

/* argv's value of flag is refused: exit 2, a message naming the flag (by its long name) and the
 * reason. */
static void refused(const char *flag, const char *value, const char *why)
{
	const char *named = strcmp(flag, "-n") == 0 ? "--count" : flag;
	struct t_opts o;
	struct outcome r;
	parse(&r, &o, (char *[]){"t", (char *)flag, (char *)value, "src", NULL});
	if (r.rc != 2)
		printf("#   %s %s: rc %d, want 2\n", flag, value, r.rc);
	CHECK(r.rc == 2);
	char want[256];
	snprintf(want, sizeof(want), "wattbus t: %s: %s\n", named, why);
	CHECK_STR(r.err, want);
}

static void test_bad_values(void)
{
	static const char *const cases[][3] = {
	    {"--count", "x", "'x' is not a decimal integer"},
	    {"--count", "2x", "'2x' is not a decimal integer"},
	    {"--count", "0", "0 is below 1"},
	    {"--count", "-1", "-1 is below 1"},
	    {"--count", "", "'' is not a decimal integer"},
	    {"--rows", "6", "6 is outside [1, 5]"},
	    {"--rows", "0x3", "'0x3' is not a decimal integer"},
	    {"--wait", "soon", "'soon' is not a duration (e.g. 1s, 250ms, 2m)"},
	    {"--wait", "-1s", "'-1s' is not a duration (e.g. 1s, 250ms, 2m)"},
	    {"--max-gap", "2m", "2m is outside [1ms, 1m]"},
	    {"--speed", "9", "9 is outside [0.5, 8]"},
	    {"--speed", "inf", "'inf' is not a decimal number"},
	    {"-n", "0", "0 is below 1"}, /* the short spelling is named by its long name */
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		refused(cases[i][0], cases[i][1], cases[i][2]);
}

static void test_usage_errors(void)
{
	struct t_opts o;
	struct outcome r;
	parse(&r, &o, (char *[]){"t", "--bogus", "src", NULL});
	CHECK(r.rc == 2);
	CHECK(has(r.err, "wattbus t: unknown option '--bogus' (see --help)\n"));
	CHECK(has(r.err, "usage: wattbus t [OPTIONS] SRC [MORE...]"));
	parse(&r, &o, (char *[]){"t", "src", "--count", NULL});
	CHECK(r.rc == 2);
	CHECK(has(r.err, "wattbus t: --count needs a value\n"));
	parse(&r, &o, (char *[]){"t", NULL});
	CHECK(r.rc == 2);
	CHECK(has(r.err, "wattbus t: 0 operands given, 1 needed\n"));
	parse(&r, &o, (char *[]){"t", "a", "b", "c", NULL});
	CHECK(r.rc == 2);
	CHECK(has(r.err, "wattbus t: unexpected argument 'c'\n"));
	/* a list flag holds CLI_STRS_MAX values; one more is refused, not dropped */
	char *argv[2 * CLI_STRS_MAX + 5] = {"t", "src"};
	int n = 2;
	for (int i = 0; i <= CLI_STRS_MAX; i++) {
		argv[n++] = "--from";
		argv[n++] = "f";
	}
	argv[n] = NULL;
	parse(&r, &o, argv);
	CHECK(r.rc == 2);
	CHECK_STR(r.err, "wattbus t: --from: given more than 16 times\n");
}

static void test_help(void)
{
	struct t_opts o;
	struct outcome r;
	parse(&r, &o, (char *[]){"t", "--help", NULL});
	CHECK(r.rc == 0);
	CHECK_STR(r.err, "");
	CHECK(has(r.out, "usage: wattbus t [OPTIONS] SRC [MORE...]\n"));
	/* every flag, with its letter, its value's name, its help, range and default */
	for (size_t i = 0; i < CLI_NFLAGS(t_flags); i++) {
		const struct cli_flag *f = &t_flags[i];
		char head[64];
		if (f->type == CLI_OPERAND_ROW)
			continue;
		snprintf(head, sizeof(head), "%s%c%s--%s%s%s", f->letter ? "-" : "",
			 f->letter ? f->letter : ' ', f->letter ? ", " : "   ", f->name,
			 f->arg ? " " : "", f->arg ? f->arg : "");
		CHECK(has(r.out, head + (f->letter ? 0 : 1)));
		CHECK(has(r.out, f->help));
	}
	CHECK(has(r.out, "  -n, --count N            stop after N (at least 1)\n"));
	CHECK(has(r.out, "  -r, --rows N             rows shown (1 to 5) [default 3]\n"));
	CHECK(has(r.out, "      --max-gap D          longest pause (1ms to 1m) [default 10s]\n"));
	CHECK(has(r.out, "  -s, --speed X            how much faster (0.5 to 8) [default 1]\n"));
	CHECK(has(r.out, "      --from FILE          read this file (repeatable)\n"));
	CHECK(has(r.out, "  -l, --loud               say more\n"));
	CHECK(has(r.out, "  SRC                      where from\n"
			 "  MORE                     and more,\n"
			 "                           over two lines\n"
			 "  -l, --loud"));
	CHECK(has(r.out, "  -h, --help               this text\na note at the end\n"));
}

/* A row whose default its own bounds refuse is the table's mistake, said before any flag. */
static void test_bad_default(void)
{
	static const struct cli_flag bad[] = {
	    {"rows", 0, WB_CONF_INT, OFF(rows), "9", 1, 5, "N", "rows shown"},
	};
	static const struct cli_verb v = {CLI_VERB("b", bad, struct t_opts, 0, 0), .synopsis = ""};
	struct t_opts o;
	char *argv[] = {"b", NULL};
	int first, saved = dup(STDERR_FILENO), null = open("/dev/null", O_WRONLY);
	dup2(null, STDERR_FILENO);
	int rc = cli_parse(&v, 1, argv, &o, &first);
	dup2(saved, STDERR_FILENO);
	close(saved);
	close(null);
	CHECK(rc == 2);
}

static const struct unit_case cases[] = {
    {"defaults from the table, whatever the struct held", test_defaults},
    {"values of every type, long and short, among the operands", test_values},
    {"a bad or out-of-range value is refused, naming the flag", test_bad_values},
    {"unknown flag, missing value, operands, a list flag given too often", test_usage_errors},
    {"--help lists every flag with its range and default", test_help},
    {"a default outside its own bounds is refused", test_bad_default},
};

UNIT_MAIN(cases)
