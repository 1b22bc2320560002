/*
 * lib/cpuinfo.c: /proc/cpuinfo texts recorded on an x86 server (two sockets,
 * two threads each), an arm64 one (no model name, vendor or physical id) and a
 * file cut short, parsed into CPUs and summed into the machine's facts.
 */
#include <errno.h>
#include <stdlib.h>

#include "cpuinfo.h"
#include "unit.h"

/* tests/data/cpuinfo/NAME parsed; the number of CPUs, or -1. */
static int parse_recorded(const char *name, struct wb_cpuinfo_cpu **cpus,
			  struct wb_cpuinfo_facts *f)
{
	const char *root = getenv("WB_ROOT");
	char path[512], err[600];
	snprintf(path, sizeof(path), "%s/tests/data/cpuinfo/%s", root ? root : ".", name);
	int n = wb_cpuinfo_read(path, cpus, err, sizeof(err));
	if (n < 0)
		printf("# %s\n", err);
	else
		wb_cpuinfo_facts(*cpus, (size_t)n, f);
	return n;
}

static void test_x86(void)
{
	struct wb_cpuinfo_cpu *c;
	struct wb_cpuinfo_facts f;
	CHECK(parse_recorded("x86-xeon-2s.txt", &c, &f) == 4);
	CHECK_STR(c[0].processor, "0");
	CHECK_STR(c[3].processor, "3");
	CHECK_STR(c[0].vendor_id, "GenuineIntel");
	CHECK_STR(c[2].model_name, "Intel(R) Xeon(R) Gold 6130 CPU @ 2.10GHz");
	CHECK_STR(c[1].physical_id, "0");
	CHECK_STR(c[2].physical_id, "1");
	CHECK_STR(c[3].core_id, "0");
	CHECK_NEAR(c[1].mhz, 3100.4, 1e-9);
	CHECK_U64(f.cpus, 4);
	CHECK_U64(f.sockets, 2);
	CHECK_U64(f.cores, 2); /* two threads on each socket's one core */
	CHECK_STR(f.vendor_id, "GenuineIntel");
	CHECK_STR(f.model_name, "Intel(R) Xeon(R) Gold 6130 CPU @ 2.10GHz");
	CHECK_NEAR(f.max_mhz, 3100.4, 1e-9);
	free(c);
}

static void test_arm64(void)
{
	struct wb_cpuinfo_cpu *c;
	struct wb_cpuinfo_facts f;
	CHECK(parse_recorded("arm64-graviton2.txt", &c, &f) == 2);
	CHECK_STR(c[1].processor, "1");
	CHECK_STR(c[0].vendor_id, "");
	CHECK_STR(c[0].model_name, "");
	CHECK(c[0].mhz == 0);
	CHECK_U64(f.cpus, 2);
	CHECK_U64(f.sockets, 1); /* no physical id: one socket, as Kepler 0.9 counts */
	CHECK_U64(f.cores, 1);
	CHECK_STR(f.model_name, "");
	CHECK(f.max_mhz == 0);
	free(c);
}

static void test_truncated(void)
{
	struct wb_cpuinfo_cpu *c;
	struct wb_cpuinfo_facts f;
	/* cut in the second CPU's "model na": it counts, with what it has */
	CHECK(parse_recorded("x86-truncated.txt", &c, &f) == 2);
	CHECK_STR(c[1].processor, "1");
	CHECK_STR(c[1].vendor_id, "GenuineIntel");
	CHECK_STR(c[1].model_name, "");
	CHECK_STR(c[1].physical_id, "");
	CHECK_U64(f.cpus, 2);
	CHECK_U64(f.sockets, 2); /* "0" and the second CPU's unknown one */
	CHECK_STR(f.model_name, "Intel(R) Xeon(R) Gold 6130 CPU @ 2.10GHz");
	CHECK_NEAR(f.max_mhz, 1000.021, 1e-9);
	free(c);
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
    {"x86: CPUs, sockets, cores, model name, MHz", test_x86},
    {"arm64: CPUs without model name or physical id", test_arm64},
    {"a file cut short keeps the CPUs it has", test_truncated},
    {"line forms: blanks, CR, keys before a CPU, prefixes, long values", test_lines},
    {"an unreadable file is an error naming it", test_unreadable},
};

UNIT_MAIN(cases)
