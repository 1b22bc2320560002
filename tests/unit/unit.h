/*
 * A small table-driven test runner for C unit tests. Each test file defines
 * its cases and ends with UNIT_MAIN(cases). Output is TAP, which tests/run.sh
 * adds up with the bats suites.
 */
#ifndef WB_UNIT_H
#define WB_UNIT_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/*
 * A mkstemp/mkdtemp template under $TMPDIR (else /tmp): unit_tmp(buf, sizeof(buf),
 * "name-XXXXXX"), so that the tests keep to the directory the test run was given.
 */
static inline char *unit_tmp(char *buf, size_t len, const char *tail)
{
	const char *dir = getenv("TMPDIR");
	snprintf(buf, len, "%s/%s", dir && dir[0] ? dir : "/tmp", tail);
	return buf;
}

struct unit_case {
	const char *name;
	void (*fn)(void);
};

static int unit_failed_checks;

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			printf("#   %s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond);        \
			unit_failed_checks++;                                                      \
		}                                                                                  \
	} while (0)

#define CHECK_U64(a, b)                                                                            \
	do {                                                                                       \
		uint64_t a_ = (uint64_t)(a), b_ = (uint64_t)(b);                                   \
		if (a_ != b_) {                                                                    \
			printf("#   %s:%d: %s == %" PRIu64 ", expected %s == %" PRIu64 "\n",       \
			       __FILE__, __LINE__, #a, a_, #b, b_);                                \
			unit_failed_checks++;                                                      \
		}                                                                                  \
	} while (0)

#define CHECK_STR(a, b)                                                                            \
	do {                                                                                       \
		const char *a_ = (a), *b_ = (b);                                                   \
		if (!a_ || !b_ || strcmp(a_, b_) != 0) {                                           \
			printf("#   %s:%d: %s == \"%s\", expected \"%s\"\n", __FILE__, __LINE__,   \
			       #a, a_ ? a_ : "(null)", b_ ? b_ : "(null)");                        \
			unit_failed_checks++;                                                      \
		}                                                                                  \
	} while (0)

#define CHECK_NEAR(a, b, tol)                                                                      \
	do {                                                                                       \
		double a_ = (a), b_ = (b);                                                         \
		if (!(a_ - b_ <= (tol) && b_ - a_ <= (tol))) {                                     \
			printf("#   %s:%d: %s == %.9g, expected %.9g within %g\n", __FILE__,       \
			       __LINE__, #a, a_, b_, (double)(tol));                               \
			unit_failed_checks++;                                                      \
		}                                                                                  \
	} while (0)

/* An empty file of a fresh name made from unit_tmp's template ("name-XXXXXX"); buf is its path. */
static inline char *unit_tmpfile(char *buf, size_t len, const char *tail)
{
	int fd = mkstemp(unit_tmp(buf, len, tail));
	CHECK(fd >= 0);
	if (fd >= 0)
		close(fd);
	return buf;
}

/* Replace the file at path with text. */
static inline void unit_write(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	CHECK(f != NULL);
	if (f) {
		CHECK(fputs(text, f) >= 0);
		CHECK(fclose(f) == 0);
	}
}

static inline int unit_run(const struct unit_case *cases, size_t n, const char *file)
{
	int failed = 0;
	printf("1..%zu\n", n);
	for (size_t i = 0; i < n; i++) {
		int before = unit_failed_checks;
		cases[i].fn();
		int ok = unit_failed_checks == before;
		printf("%s %zu - %s: %s\n", ok ? "ok" : "not ok", i + 1, file, cases[i].name);
		fflush(stdout);
		failed += !ok;
	}
	return failed ? 1 : 0;
}

#define UNIT_MAIN(cases)                                                                           \
	int main(void)                                                                             \
	{                                                                                          \
		return unit_run(cases, sizeof(cases) / sizeof(cases[0]), __FILE__);                \
	}

#endif
