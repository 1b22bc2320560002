/* usaged/procfs.c: /proc/<pid>/stat and /proc/stat parsing, UTF-8 cleaning, scanning a fake /proc.
 */
#include <errno.h>
#include <ftw.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../usaged/usaged.h"
#include "procstat.h"
#include "log.h"
#include "unit.h"

#include "usaged_unit.h"

/* A real line (cat /proc/self/stat), fields 14/15/22 = 7, 3, 12345 */
#define STAT_TAIL                                                                                  \
	" S 1 1234 1234 34816 1234 4194304 120 0 0 0 7 3 0 0 20 0 1 0 12345 8192000 200 "          \
	"18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n"

static void test_pstat(void)
{
	struct procfs_pstat ps;
	CHECK(procfs_parse_pstat("4321 (bash)" STAT_TAIL, &ps) == 0);
	CHECK_U64(ps.pid, 4321);
	CHECK_STR(ps.comm, "bash");
	CHECK_U64(ps.utime_ticks, 7);
	CHECK_U64(ps.stime_ticks, 3);
	CHECK_U64(ps.start_ticks, 12345);
	/* comm may hold spaces and parentheses: it ends at the last ')' */
	CHECK(procfs_parse_pstat("7 (a) b (c))" STAT_TAIL, &ps) == 0);
	CHECK_STR(ps.comm, "a) b (c)");
	CHECK_U64(ps.utime_ticks, 7);
	CHECK(procfs_parse_pstat("8 ()" STAT_TAIL, &ps) == 0);
	CHECK_STR(ps.comm, "");
	/* 15 bytes is the kernel's longest; longer text is cut to fit */
	CHECK(procfs_parse_pstat("9 (0123456789abcdefgh)" STAT_TAIL, &ps) == 0);
	CHECK_STR(ps.comm, "0123456789abcde");
}

static void test_pstat_malformed(void)
{
	struct procfs_pstat ps;
	CHECK(procfs_parse_pstat("", &ps) < 0);
	CHECK(procfs_parse_pstat("4321 bash S 1", &ps) < 0);
	CHECK(procfs_parse_pstat("4321 (bash) S 1 2 3", &ps) < 0); /* truncated */
	CHECK(procfs_parse_pstat("x (bash)" STAT_TAIL, &ps) < 0);  /* no pid */
	CHECK(procfs_parse_pstat("1 (b) S 1 1 1 1 1 1 1 1 1 1 x 3 0 0 20 0 1 0 5 1", &ps) <
	      0); /* utime */
	CHECK(procfs_parse_pstat("1 )b( S 1", &ps) < 0);
}

static void test_cpu(void)
{
	struct wb_cpu_times c;
	const char *text =
	    "cpu  100 2 30 4000 5 6 7 8 9 10\ncpu0 50 1 15 2000 2 3 3 4 0 0\nintr 1\n";
	CHECK(wb_procstat_parse_cpu(text, 10000000, &c) == 0);
	CHECK_U64(c.user_ns, 1000000000ull);
	CHECK_U64(c.nice_ns, 20000000ull);
	CHECK_U64(c.system_ns, 300000000ull);
	CHECK_U64(c.idle_ns, 40000000000ull);
	CHECK_U64(c.iowait_ns, 50000000ull);
	CHECK_U64(c.irq_ns, 60000000ull);
	CHECK_U64(c.softirq_ns, 70000000ull);
	CHECK_U64(c.steal_ns, 80000000ull);
	/* the "cpu " line need not come first; cpu0 is not it */
	CHECK(wb_procstat_parse_cpu("intr 1\ncpu0 1 2 3 4\ncpu  1 2 3 4\n", 1, &c) == 0);
	CHECK_U64(c.idle_ns, 4);
	CHECK_U64(c.steal_ns, 0);
	CHECK(wb_procstat_parse_cpu("cpu0 1 2 3 4\n", 1, &c) < 0);
	CHECK(wb_procstat_parse_cpu("cpu  1 2 3\n", 1, &c) < 0);
	CHECK(wb_procstat_parse_cpu("", 1, &c) < 0);
}

static void test_utf8(void)
{
	char s[64];
	snprintf(s, sizeof(s), "plain");
	usaged_utf8_clean(s);
	CHECK_STR(s, "plain");
	snprintf(s, sizeof(s), "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
	usaged_utf8_clean(s);
	CHECK_STR(s, "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
	snprintf(s, sizeof(s),
		 "a\xff"
		 "b\xc3");
	usaged_utf8_clean(s); /* invalid byte, and a sequence cut by the 15-byte comm limit */
	CHECK_STR(s, "a?b?");
	snprintf(s, sizeof(s), "\xe2\x82x");
	usaged_utf8_clean(s);
	CHECK_STR(s, "??x");
	snprintf(s, sizeof(s),
		 "\xc0\xaf|\xed\xa0\x80|\xf4\x90\x80\x80"); /* overlong, surrogate, > U+10FFFF */
	usaged_utf8_clean(s);
	CHECK_STR(s, "??|???|????");
	snprintf(s, sizeof(s), "tab\there\x7f\x1b[0m");
	usaged_utf8_clean(s);
	CHECK_STR(s, "tab?here??[0m");
}

/* ---- a fake /proc ---- */

static char root[256];

static void put(const char *rel, const char *text)
{
	usaged_unit_put(root, rel, text);
}

struct seen {
	int n;
	struct usaged_sample s[8];
};

static void collect(void *arg, const struct usaged_sample *s)
{
	struct seen *seen = arg;
	if (seen->n < 8)
		seen->s[seen->n++] = *s;
}

static void test_scan(void)
{
	unit_tmp(root, sizeof(root), "usaged-procfs-XXXXXX");
	CHECK(mkdtemp(root) != NULL);
	put("stat", "cpu  10 0 5 100 0 0 0 0 0 0\n");
	put("42/stat", "42 (worker one)" STAT_TAIL);
	put("43/stat", "43 (garbage");
	put("44/cgroup",
	    "0::/system.slice/x.service\n");	  /* no stat: gone between readdir and open */
	put("self/stat", "1 (self)" STAT_TAIL);	  /* not a pid */
	put("07/stat", "7 (zero-led)" STAT_TAIL); /* not how the kernel names a pid */
	put("100/stat", "100 (k\xffworker)" STAT_TAIL);

	struct procfs *pf = procfs_new(root);
	CHECK(pf != NULL);
	if (!pf)
		return;
	uint64_t tick = procfs_ns_per_tick(pf);
	CHECK(tick == 1000000000ull / (uint64_t)sysconf(_SC_CLK_TCK));

	/* Node totals count from the first reading (the epoch), not from boot. */
	struct wb_cpu_times c;
	CHECK(procfs_read_cpu(pf, &c) == 0);
	CHECK_U64(c.idle_ns, 0);
	CHECK_U64(c.user_ns, 0);
	put("stat", "cpu  13 0 5 160 0 0 0 0 0 0\n");
	CHECK(procfs_read_cpu(pf, &c) == 0);
	CHECK_U64(c.user_ns, 3 * tick);
	CHECK_U64(c.idle_ns, 60 * tick);
	CHECK_U64(c.system_ns, 0);

	struct seen seen = {0};
	CHECK(procfs_scan(pf, collect, &seen) == 2);
	CHECK(seen.n == 2);
	for (int i = 0; i < seen.n; i++) {
		const struct usaged_sample *s = &seen.s[i];
		CHECK(s->pid == 42 || s->pid == 100);
		CHECK_U64(s->cpu_ns, 10 * tick);
		CHECK_U64(s->start_ns, 12345 * tick);
		CHECK_U64(s->kcgroup_id, 0);
		CHECK(!s->exited);
		CHECK_STR(s->comm,
			  s->pid == 42 ? "worker one" : "k\xffworker"); /* ptab cleans it */
	}

	/* a second scan sees the same: the directory is rewound */
	seen.n = 0;
	CHECK(procfs_scan(pf, collect, &seen) == 2);

	struct usaged_sample s;
	CHECK(procfs_read_pid(pf, 42, &s) == 0);
	CHECK_STR(s.comm, "worker one");
	CHECK(procfs_read_pid(pf, 44, &s) < 0 && errno == ENOENT);
	CHECK(procfs_read_pid(pf, 43, &s) < 0 && errno == EINVAL);

	char buf[128];
	CHECK(procfs_read_cgroup(pf, 44, buf, sizeof(buf)) ==
	      (long)strlen("0::/system.slice/x.service\n"));
	CHECK_STR(buf, "0::/system.slice/x.service\n");
	CHECK(procfs_read_cgroup(pf, 45, buf, sizeof(buf)) < 0);

	put("stat", "nothing useful\n");
	CHECK(procfs_read_cpu(pf, &c) < 0);
	procfs_destroy(&pf);
	CHECK(pf == NULL);
	procfs_destroy(&pf);
	CHECK(procfs_new("/nonexistent/proc") == NULL);
	usaged_unit_rm(root);
}

/* 208 days of uptime on 512 threads: /proc/stat's idle is near 9.3e18 ns since boot, past
 * INT64_MAX; what is published counts from the first reading and stays far below it. */
static void test_cpu_big_host(void)
{
	unit_tmp(root, sizeof(root), "usaged-procfs-XXXXXX");
	CHECK(mkdtemp(root) != NULL);
	struct procfs *pf = procfs_new(root);
	CHECK(pf != NULL);
	if (!pf)
		return;
	uint64_t tick = procfs_ns_per_tick(pf);
	unsigned long long idle = 9300000000000000000ull / tick, user = idle / 10;
	char line[160];
	snprintf(line, sizeof(line), "cpu  %llu 7 %llu %llu 3 0 0 0 0 0\n", user, user, idle);
	put("stat", line);
	struct wb_cpu_times c;
	CHECK(procfs_read_cpu(pf, &c) == 0);
	CHECK_U64(c.idle_ns, 0);
	snprintf(line, sizeof(line), "cpu  %llu 7 %llu %llu 3 0 0 0 0 0\n", user + 1536, user + 5,
		 idle + 4000);
	put("stat", line);
	CHECK(procfs_read_cpu(pf, &c) == 0);
	CHECK_U64(c.idle_ns, 4000 * tick);
	CHECK_U64(c.user_ns, 1536 * tick);
	CHECK_U64(c.system_ns, 5 * tick);
	CHECK_U64(c.nice_ns, 0);
	CHECK_U64(c.iowait_ns, 0);
	procfs_destroy(&pf);
	usaged_unit_rm(root);
}

static void test_scan_real(void)
{
	/* The real /proc lists this process with its own CPU time. */
	struct procfs *pf = procfs_new("/proc");
	struct usaged_sample s;
	CHECK(pf != NULL);
	if (!pf)
		return;
	CHECK(procfs_read_pid(pf, (uint32_t)getpid(), &s) == 0);
	CHECK_U64(s.pid, (uint64_t)getpid());
	char comm[32] = "";
	FILE *f = fopen("/proc/self/comm", "r");
	CHECK(f && fgets(comm, sizeof(comm), f));
	if (f)
		fclose(f);
	comm[strcspn(comm, "\n")] = '\0';
	CHECK_STR(s.comm, comm);
	CHECK(s.start_ns > 0);
	procfs_destroy(&pf);
}

static const struct unit_case cases[] = {
    {"/proc/<pid>/stat fields 14, 15, 22 and the comm", test_pstat},
    {"/proc/<pid>/stat malformed", test_pstat_malformed},
    {"/proc/stat cpu line in ns", test_cpu},
    {"UTF-8 cleaning", test_utf8},
    {"scanning a fake /proc", test_scan},
    {"node totals since the first reading on a big host", test_cpu_big_host},
    {"the real /proc", test_scan_real},
};

int main(void)
{
	log_init("test_usaged_procfs", WB_LOG_ERR);
	return unit_run(cases, sizeof(cases) / sizeof(cases[0]), __FILE__);
}
