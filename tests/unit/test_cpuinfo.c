/*
 * lib/cpuinfo.c: /proc/cpuinfo texts recorded on an x86 server (two sockets,
 * two threads each), an arm64 one (no model name, vendor or physical id) and a
 * file cut short, parsed into CPUs and summed into the machine's facts.
 */
#include <errno.h>
#include <stdlib.h>

#include "cpuinfo.h"
#include "unit.h"

#define XEON "Intel(R) Xeon(R) Gold 6130 CPU @ 2.10GHz"

/* What each recorded file holds: its CPUs, the first and last of them, and the facts. */
static const struct {
	const char *file;
	int n;
	struct wb_cpuinfo_cpu first, last;
	struct wb_cpuinfo_facts facts;
} recorded[] = {
    /* two sockets, each one core of two threads */
    {"x86-xeon-2s.txt",
     4,
     {"0", "GenuineIntel", XEON, "0", "0", 1000.021, "6", "85"},
     {"3", "GenuineIntel", XEON, "1", "0", 800.0, "6", "85"},
     {4, 2, 2, "GenuineIntel", XEON, 3100.4}},
    /* no model name, vendor, physical id or MHz: one socket, as Kepler 0.9 counts */
    {"arm64-graviton2.txt",
     2,
     {"0", "", "", "", "", 0, "", ""},
     {"1", "", "", "", "", 0, "", ""},
     {2, 1, 1, "", "", 0}},
    /* cut in the second CPU's "model na": it counts, with what it has ("" its socket) */
    {"x86-truncated.txt",
     2,
     {"0", "GenuineIntel", XEON, "0", "0", 1000.021, "6", "85"},
     {"1", "GenuineIntel", "", "", "", 0, "6", "85"},
     {2, 2, 2, "GenuineIntel", XEON, 1000.021}},
};

static void check_cpu(const struct wb_cpuinfo_cpu *got, const struct wb_cpuinfo_cpu *want)
{
	CHECK_STR(got->processor, want->processor);
	CHECK_STR(got->vendor_id, want->vendor_id);
	CHECK_STR(got->model_name, want->model_name);
	CHECK_STR(got->physical_id, want->physical_id);
	CHECK_STR(got->core_id, want->core_id);
	CHECK_NEAR(got->mhz, want->mhz, 1e-9);
	CHECK_STR(got->cpu_family, want->cpu_family); /* "model" is not "model name" */
	CHECK_STR(got->model, want->model);
}

static void test_recorded(void)
{
	const char *root = getenv("WB_ROOT");
	for (size_t i = 0; i < sizeof(recorded) / sizeof(recorded[0]); i++) {
		char path[512], err[600];
		snprintf(path, sizeof(path), "%s/tests/data/cpuinfo/%s", root ? root : ".",
			 recorded[i].file);
		struct wb_cpuinfo_cpu *c;
		int n = wb_cpuinfo_read(path, &c, err, sizeof(err));
		printf("# %s\n", n < 0 ? err : path);
		CHECK(n == recorded[i].n);
		if (n != recorded[i].n)
			continue;
		check_cpu(&c[0], &recorded[i].first);
		check_cpu(&c[n - 1], &recorded[i].last);
		struct wb_cpuinfo_facts f;
		const struct wb_cpuinfo_facts *want = &recorded[i].facts;
		wb_cpuinfo_facts(c, (size_t)n, &f);
		CHECK_U64(f.cpus, want->cpus);
		CHECK_U64(f.sockets, want->sockets);
		CHECK_U64(f.cores, want->cores);
		CHECK_STR(f.vendor_id, want->vendor_id);
		CHECK_STR(f.model_name, want->model_name);
		CHECK_NEAR(f.max_mhz, want->max_mhz, 1e-9);
		free(c);
	}
}

static void test_lines(void)
{
	struct wb_cpuinfo_cpu *c;
	/* blanks around the colon and at the end (CR included) go; keys before any processor and
	 * keys that only start like one are not taken */
	const char *txt = "model name\t: before any CPU\n"
			  "processor\t: 0\r\n"
			  "model name\t: Xeon  \r\n"
			  "core id\t\t:7\n"
			  "processors\t: 9\n"
			  "physical id : 1";
	CHECK(wb_cpuinfo_parse(txt, &c) == 1);
	CHECK_STR(c[0].processor, "0");
	CHECK_STR(c[0].model_name, "Xeon");
	CHECK_STR(c[0].core_id, "7");
	CHECK_STR(c[0].physical_id, "1");
	free(c);
	/* a value longer than its field is cut, not overflowed */
	char long_txt[400];
	snprintf(long_txt, sizeof(long_txt), "processor : 0\nvendor_id : %0200d\n", 1);
	CHECK(wb_cpuinfo_parse(long_txt, &c) == 1);
	CHECK_U64(strlen(c[0].vendor_id), sizeof(c[0].vendor_id) - 1);
	free(c);
	CHECK(wb_cpuinfo_parse("", &c) == 0);
	CHECK(c == NULL);
	struct wb_cpuinfo_facts f;
	wb_cpuinfo_facts(NULL, 0, &f);
	CHECK_U64(f.cpus + f.sockets + f.cores, 0);
}

static void test_unreadable(void)
{
	struct wb_cpuinfo_cpu *c;
	char err[256];
	errno = 0;
	CHECK(wb_cpuinfo_read("/nonexistent/cpuinfo", &c, err, sizeof(err)) == -1);
	CHECK(errno == ENOENT);
	CHECK(c == NULL);
	CHECK(strstr(err, "/nonexistent/cpuinfo: ") == err);
}

static const struct unit_case cases[] = {
    {"recorded x86, arm64 and cut-short files: CPUs, sockets, cores, model name, MHz",
     test_recorded},
    {"line forms: blanks, CR, keys before a CPU, prefixes, long values", test_lines},
    {"an unreadable file is an error naming it", test_unreadable},
};

UNIT_MAIN(cases)
