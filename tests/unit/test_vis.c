/* Escaping at output (lib/vis.c) and the log lines that go through it (lib/log.c). */
#include <unistd.h>

#include "log.h"
#include "unit.h"
#include "vis.h"

static const char *vis(const char *s, unsigned flags)
{
	static char buf[256];
	wb_vis(buf, sizeof(buf), s, strlen(s), flags);
	return buf;
}

static void test_escapes(void)
{
	CHECK(strcmp(vis("node-1.example", 0), "node-1.example") == 0);
	CHECK(strcmp(vis("a\nb\r\tc\\", 0), "a\\nb\\r\\tc\\\\") == 0);
	CHECK(strcmp(vis("x\x1b[2Jy", 0), "x\\x1b[2Jy") == 0);
	CHECK(strcmp(vis("del\x7f", 0), "del\\x7f") == 0);
	/* a quote is a character of a name; WB_VIS_DQ escapes it for a double-quoted text */
	CHECK(strcmp(vis("it's \"q\"", 0), "it's \"q\"") == 0);
	CHECK(strcmp(vis("it's \"q\"", WB_VIS_DQ), "it's \\\"q\\\"") == 0);
	/* valid UTF-8 stays; C1 (U+009B, a CSI), bidi overrides and stray bytes do not */
	CHECK(strcmp(vis("caf\xc3\xa9 \xe2\x82\xac", 0), "caf\xc3\xa9 \xe2\x82\xac") == 0);
	CHECK(strcmp(vis("a\xc2\x9b"
			 "2J",
			 0),
		     "a\\xc2\\x9b2J") == 0);
	CHECK(strcmp(vis("\xe2\x80\xae"
			 "evil",
			 0),
		     "\\xe2\\x80\\xaeevil") == 0);
	CHECK(strcmp(vis("bad\xff\xc3", 0), "bad\\xff\\xc3") == 0);
	CHECK(strcmp(vis("\xed\xa0\x80", 0), "\\xed\\xa0\\x80") == 0); /* a surrogate */
	CHECK(wb_vis_clean("plain name", 10) && !wb_vis_clean("a\nb", 3) &&
	      !wb_vis_clean("\xff", 1));
}

static void test_cut(void)
{
	char buf[8];
	/* the whole result needs 10 bytes; an escape is never cut in half */
	CHECK(wb_vis(buf, sizeof(buf), "abcde\nxyz", 9, 0) == 10);
	CHECK(strcmp(buf, "abcde\\n") == 0);
	CHECK(wb_vis(buf, sizeof(buf), "abcdef\n", 7, 0) == 8 && strcmp(buf, "abcdef") == 0);
	CHECK(wb_vis(buf, sizeof(buf), "abc\x1b", 4, 0) == 7 && strcmp(buf, "abc\\x1b") == 0);
	CHECK(wb_vis(buf, sizeof(buf), "abcd\x1b", 5, 0) == 8 && strcmp(buf, "abcd") == 0);
	CHECK(strcmp(WB_VIS(NULL), "") == 0);
}

/* A name in a log line cannot end the line and forge the next one. */
static void test_log_line(void)
{
	char path[256];
	unit_tmp(path, sizeof(path), "test_vis-XXXXXX");
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	int saved = dup(STDERR_FILENO);
	fflush(stderr);
	dup2(fd, STDERR_FILENO);
	log_init("test", WB_LOG_INFO);
	log_warnx("model '%s' refused", "m\nestimd: error: forged\x1b[2J\xff");
	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	close(saved);
	char got[512] = "";
	FILE *f = fopen(path, "r");
	CHECK(f && fread(got, 1, sizeof(got) - 1, f) > 0);
	if (f)
		fclose(f);
	close(fd);
	unlink(path);
	CHECK(strcmp(got,
		     "test: warning: model 'm\\nestimd: error: forged\\x1b[2J\\xff' refused\n") ==
	      0);
}

static const struct unit_case cases[] = {
    {"controls, C1, bidi and invalid bytes are escaped; names stay", test_escapes},
    {"a cut result keeps whole escapes and says what it needed", test_cut},
    {"a log line escapes the names in it", test_log_line},
};
UNIT_MAIN(cases)
