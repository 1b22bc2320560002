/*
 * powerd's rapl source on fake powercap trees: a two-socket Intel server with
 * subzones, psys and an MMIO duplicate, an MMIO-only laptop, multi-die, AMD;
 * then samples with wraps, garbage, vanished files, a counter going back,
 * and energy_uj readable by root only.
 */
#include <grp.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "test_powerd_fake.h"
#include "unit.h"

#define MS 1000000ull
#define T0 (1700000000ull * 1000000000ull)
#define RANGE 262143328850ull

static const struct pd_zone *zone(struct pd_set *set, const char *name)
{
	return pd_set_find(set, name);
}

static void intel_two_socket(void)
{
	fake_new();
	fake_write("sys/class/powercap/intel-rapl/enabled",
		   "1\n"); /* the control type: no counter */
	fake_write("sys/class/powercap/intel-rapl-mmio/enabled", "1\n");
	fake_rapl_zone("intel-rapl:0", "package-0", 1000, RANGE);
	fake_rapl_zone("intel-rapl:0:0", "core", 2000, RANGE);
	fake_rapl_zone("intel-rapl:0:1", "uncore", 3000, RANGE);
	fake_rapl_zone("intel-rapl:0:2", "dram", 4000, 65712999613ull);
	fake_rapl_zone("intel-rapl:1", "package-1", 5000, RANGE);
	fake_rapl_zone("intel-rapl:1:0", "core", 6000, RANGE);
	fake_rapl_zone("intel-rapl:1:1", "dram", 7000, 65712999613ull);
	fake_rapl_zone("intel-rapl:2", "psys", 8000, RANGE);
	fake_rapl_zone("intel-rapl-mmio:0", "package-0", 1001, RANGE);
	fake_write("sys/class/powercap/intel-rapl:1/constraint_0_name", "long_term\n");
}

static void test_intel_discovery(void)
{
	intel_two_socket();
	struct pd_opts o = fake_opts();
	struct pd_set *set = pd_set_new(&o);
	char why[PD_WHY_MAX] = "";
	CHECK(rapl_discover(set, &o, why, sizeof(why)) == 8);
	CHECK_U64(set->n, 8);
	static const struct {
		const char *name, *kind, *dir;
		unsigned index;
		uint64_t range;
	} want[] = {
	    {"package-0", "package", "intel-rapl:0", 0, RANGE},
	    {"core-0", "core", "intel-rapl:0:0", 0, RANGE},
	    {"uncore-0", "uncore", "intel-rapl:0:1", 0, RANGE},
	    {"dram-0", "dram", "intel-rapl:0:2", 0, 65712999613ull},
	    {"package-1", "package", "intel-rapl:1", 1, RANGE},
	    {"core-1", "core", "intel-rapl:1:0", 1, RANGE},
	    {"dram-1", "dram", "intel-rapl:1:1", 1, 65712999613ull},
	    {"psys", "psys", "intel-rapl:2", 0, RANGE},
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		const struct pd_zone *z = zone(set, want[i].name);
		CHECK(z != NULL);
		if (!z) {
			printf("#   missing zone %s\n", want[i].name);
			continue;
		}
		char path[PD_PATH_MAX];
		snprintf(path, sizeof(path), "%s/class/powercap/%s", o.sysfs_root, want[i].dir);
		CHECK_STR(z->kind, want[i].kind);
		CHECK_STR(z->path, path);
		CHECK_U64(z->index, want[i].index);
		CHECK_U64(counter_range_uj(&z->ctr), want[i].range);
		CHECK(z->src == &rapl_source);
	}
	/* the MMIO package-0 is the same register as intel-rapl:0: not published twice */
	for (size_t i = 0; i < set->n; i++)
		CHECK(strstr(set->zones[i].path, "mmio") == NULL);
	pd_set_destroy(&set);
	CHECK(set == NULL);
}

static void test_mmio_only_and_dies(void)
{
	fake_new();
	fake_rapl_zone("intel-rapl-mmio:0", "package-0", 42, RANGE);
	struct pd_opts o = fake_opts();
	struct pd_set *set = pd_set_new(&o);
	char why[PD_WHY_MAX] = "";
	CHECK(rapl_discover(set, &o, why, sizeof(why)) == 1);
	const struct pd_zone *z = zone(set, "package-0");
	CHECK(z && strstr(z->path, "intel-rapl-mmio:0"));
	pd_set_destroy(&set);

	fake_new();
	fake_rapl_zone("intel-rapl:0", "package-0-die-0", 1, RANGE);
	fake_rapl_zone("intel-rapl:0:0", "dram", 1, RANGE);
	fake_rapl_zone("intel-rapl:1", "package-0-die-1", 1, RANGE);
	fake_rapl_zone("intel-rapl:1:0", "dram", 1, RANGE);
	o = fake_opts();
	set = pd_set_new(&o);
	CHECK(rapl_discover(set, &o, why, sizeof(why)) == 4);
	CHECK(zone(set, "package-0-die-0") != NULL);
	CHECK(zone(set, "package-0-die-1") != NULL);
	CHECK(zone(set, "dram-0-die-0") != NULL);
	CHECK(zone(set, "dram-0-die-1") != NULL);
	z = zone(set, "dram-0-die-1");
	CHECK(z && z->index == 0 && !strcmp(z->kind, "dram"));
	pd_set_destroy(&set);
	int die;
	CHECK(rapl_package_index("package-12", &die) == 12 && die == -1);
	CHECK(rapl_package_index("package-3-die-2", &die) == 3 && die == 2);
	CHECK(rapl_package_index("package-", &die) == -1);
	CHECK(rapl_package_index("package-1x", &die) == -1);
}

/* AMD Zen: the same driver, package-N with a core subzone, 15.3 uJ units, no dram or psys. */
static void test_amd_discovery(void)
{
	fake_new();
	fake_rapl_zone("intel-rapl:0", "package-0", 123456, 65532610987ull);
	fake_rapl_zone("intel-rapl:0:0", "core", 2345, 65532610987ull);
	fake_rapl_zone("intel-rapl:1", "package-1", 999, 65532610987ull);
	struct pd_opts o = fake_opts();
	struct pd_set *set = pd_set_new(&o);
	char why[PD_WHY_MAX] = "";
	CHECK(rapl_discover(set, &o, why, sizeof(why)) == 3);
	const struct pd_zone *z = zone(set, "core-0");
	CHECK(z && !strcmp(z->kind, "core") && counter_range_uj(&z->ctr) == 65532610987ull);
	CHECK(zone(set, "package-1") != NULL);
	/* the first sample publishes the hardware reading itself: a restarted powerd continues the
	 * count */
	struct wb_power p;
	CHECK_U64(pd_set_sample(set, T0, 1000 * MS, &p), 3);
	const struct wb_power_zone *pz = sample_zone(&p, "package-0");
	CHECK(pz && pz->energy_uj == 123456 && pz->max_energy_range_uj == 65532610987ull);
	CHECK(pz && !strcmp(pz->source, "rapl") && !strcmp(pz->zone, "package"));
	CHECK_U64(p.t, T0);
	free(p.zones);
	pd_set_destroy(&set);
}

static void test_no_powercap(void)
{
	fake_new();
	struct pd_opts o = fake_opts();
	struct pd_set *set = pd_set_new(&o);
	char why[PD_WHY_MAX] = "";
	CHECK(rapl_discover(set, &o, why, sizeof(why)) == 0);
	CHECK(strstr(why, "class/powercap") != NULL);
	fake_write("sys/class/powercap/intel-rapl/enabled", "0\n");
	CHECK(rapl_discover(set, &o, why, sizeof(why)) == 0);
	CHECK(strstr(why, "no zone with energy_uj") != NULL);
	pd_set_destroy(&set);
}

/* Advance every zone between samples, across wraps; the published totals equal the sums written. */
static void test_samples_exact(void)
{
	intel_two_socket();
	struct pd_opts o = fake_opts();
	struct pd_set *set = pd_set_new(&o);
	char why[PD_WHY_MAX] = "";
	rapl_discover(set, &o, why, sizeof(why));
	struct wb_power p;
	pd_set_sample(set, T0, 1000 * MS, &p);
	free(p.zones);
	/* package-1 just below its range: the second step wraps */
	uint64_t pkg1 = 5000, pkg1_total = 5000;
	uint64_t dram0 = 4000;
	uint64_t steps[] = {RANGE - 5000 - 100, 300, 12345, 0, 9999999, RANGE, 1};
	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		uint64_t inc = steps[i]; /* at most RANGE uJ per 100 s: 2.6 kW, plausible */
		pkg1 = (pkg1 + inc) % (RANGE + 1);
		pkg1_total += inc;
		fake_rapl_energy("intel-rapl:1", pkg1);
		dram0 += 1000;
		fake_rapl_energy("intel-rapl:0:2", dram0);
		CHECK_U64(pd_set_sample(set, T0 + (i + 1) * 100000 * MS,
					(1000 + (i + 1) * 100000) * MS, &p),
			  8);
		const struct wb_power_zone *pz = sample_zone(&p, "package-1");
		CHECK(pz && pz->energy_uj == pkg1_total);
		pz = sample_zone(&p, "dram-0");
		CHECK(pz && pz->energy_uj == dram0);
		pz = sample_zone(&p, "package-0");
		CHECK(pz && pz->energy_uj == 1000);
		free(p.zones);
	}
	CHECK(pkg1 < pkg1_total);
	CHECK_U64(set->counts.wraps, 2);
	CHECK_U64(set->counts.zone_samples_skipped, 0);
	pd_set_destroy(&set);
}

static void test_bad_input(void)
{
	intel_two_socket();
	struct pd_opts o = fake_opts();
	struct pd_set *set = pd_set_new(&o);
	char why[PD_WHY_MAX] = "";
	rapl_discover(set, &o, why, sizeof(why));
	struct wb_power p;
	uint64_t t = T0, m = 1000 * MS;
	pd_set_sample(set, t, m, &p);
	free(p.zones);

	/* garbage in dram-0: skipped and counted, the other seven published */
	fake_write("sys/class/powercap/intel-rapl:0:2/energy_uj", "12ab\n");
	fake_rapl_energy("intel-rapl:0", 1500);
	CHECK_U64(pd_set_sample(set, t += 100 * MS, m += 100 * MS, &p), 7);
	CHECK(sample_zone(&p, "dram-0") == NULL);
	CHECK(sample_zone(&p, "package-0") && sample_zone(&p, "package-0")->energy_uj == 1500);
	CHECK_U64(set->counts.parse_errors, 1);
	free(p.zones);
	fake_write("sys/class/powercap/intel-rapl:0:2/energy_uj", "%s", "");
	CHECK_U64(pd_set_sample(set, t += 100 * MS, m += 100 * MS, &p), 7);
	CHECK_U64(set->counts.parse_errors, 2);
	free(p.zones);
	fake_write("sys/class/powercap/intel-rapl:0:2/energy_uj", "99999999999999999999999\n");
	CHECK_U64(pd_set_sample(set, t += 100 * MS, m += 100 * MS, &p), 7);
	CHECK_U64(set->counts.parse_errors, 3);
	free(p.zones);
	/* back to numbers: the increment since the last good reading is all there */
	fake_rapl_energy("intel-rapl:0:2", 4000 + 777);
	CHECK_U64(pd_set_sample(set, t += 100 * MS, m += 100 * MS, &p), 8);
	CHECK(sample_zone(&p, "dram-0") && sample_zone(&p, "dram-0")->energy_uj == 4777);
	free(p.zones);

	/* core-1 vanishes, then comes back */
	fake_remove("sys/class/powercap/intel-rapl:1:0/energy_uj");
	CHECK_U64(pd_set_sample(set, t += 100 * MS, m += 100 * MS, &p), 7);
	CHECK(sample_zone(&p, "core-1") == NULL);
	CHECK_U64(set->counts.read_errors, 1);
	free(p.zones);
	fake_rapl_energy("intel-rapl:1:0", 6100);
	CHECK_U64(pd_set_sample(set, t += 100 * MS, m += 100 * MS, &p), 8);
	CHECK(sample_zone(&p, "core-1") && sample_zone(&p, "core-1")->energy_uj == 6100);
	free(p.zones);

	/* package-1 goes back without a plausible wrap: skipped, counted, no negative or invented
	 * delta */
	fake_rapl_energy("intel-rapl:1", 10);
	CHECK_U64(pd_set_sample(set, t += 100 * MS, m += 100 * MS, &p), 7);
	CHECK(sample_zone(&p, "package-1") == NULL);
	CHECK_U64(set->counts.backwards, 1);
	free(p.zones);
	fake_rapl_energy("intel-rapl:1", 5000 + 200);
	CHECK_U64(pd_set_sample(set, t += 100 * MS, m += 100 * MS, &p), 8);
	CHECK(sample_zone(&p, "package-1") && sample_zone(&p, "package-1")->energy_uj == 5200);
	free(p.zones);
	/* beyond max_energy_range_uj */
	fake_rapl_energy("intel-rapl:1", RANGE + 1);
	CHECK_U64(pd_set_sample(set, t += 100 * MS, m += 100 * MS, &p), 7);
	CHECK_U64(set->counts.implausible, 1);
	free(p.zones);
	CHECK_U64(set->counts.zone_samples_skipped,
		  6); /* 3 garbage, 1 vanished, 1 backwards, 1 range */
	CHECK_U64(set->counts.samples, 10);
	pd_set_destroy(&set);
}

/* Run rapl_discover as nobody against a tree whose energy_uj files are root-only (mode 0400). */
static void test_permission(void)
{
	/* under /tmp, as the suites that switch users do: nobody must reach the tree to be refused
	 * its files, and a private $TMPDIR (mode 700, as mktemp -d makes it) would refuse it all */
	const char *keep = getenv("TMPDIR");
	char saved[PD_PATH_MAX];
	snprintf(saved, sizeof(saved), "%s", keep ? keep : "");
	setenv("TMPDIR", "/tmp", 1);
	intel_two_socket();
	if (keep)
		setenv("TMPDIR", saved, 1);
	else
		unsetenv("TMPDIR");
	chmod(fake_root, 0755);
	char cmd[PD_PATH_MAX];
	snprintf(cmd, sizeof(cmd),
		 "chmod -R a+rX %s && find %s -name energy_uj -exec chmod 0400 {} +", fake_root,
		 fake_root);
	CHECK(system(cmd) == 0);
	int p[2];
	CHECK(pipe(p) == 0);
	pid_t pid = fork();
	if (pid == 0) {
		close(p[0]);
		if (geteuid() == 0 &&
		    (setgroups(0, NULL) < 0 || setresgid(65534, 65534, 65534) < 0 ||
		     setresuid(65534, 65534, 65534) < 0))
			_exit(3);
		if (geteuid() != 0) {
			/* not root from the start: chmod 000 does the same */
			snprintf(cmd, sizeof(cmd), "find %s -name energy_uj -exec chmod 0000 {} +",
				 fake_root);
			if (getuid() != 65534 && system(cmd) != 0)
				_exit(4);
		}
		struct pd_opts o = fake_opts();
		struct pd_set *set = pd_set_new(&o);
		char why[PD_WHY_MAX] = "";
		int n = rapl_discover(set, &o, why, sizeof(why));
		if (write(p[1], why, strlen(why)) < 0)
			_exit(5);
		_exit(n == 0 ? 0 : 6);
	}
	close(p[1]);
	char why[PD_WHY_MAX] = "";
	ssize_t n = read(p[0], why, sizeof(why) - 1);
	why[n > 0 ? n : 0] = '\0';
	close(p[0]);
	int status = 0;
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK(strstr(why, "energy_uj: Permission denied") != NULL);
	CHECK(strstr(why, "CVE-2020-8694") != NULL);
	CHECK(strstr(why, "udev") != NULL);
	CHECK(strstr(why, "root") != NULL);
	if (!strstr(why, "CVE-2020-8694"))
		printf("#   why: %s\n", why);
}

static void test_read_u64(void)
{
	fake_new();
	char path[PD_PATH_MAX], err[PD_PATH_MAX + 128];
	snprintf(path, sizeof(path), "%s/v", fake_root);
	uint64_t v = 0;
	fake_write("v", "18446744073709551615\n");
	CHECK(pd_read_u64(path, &v, err, sizeof(err)) == PD_READ_OK && v == UINT64_MAX);
	fake_write("v", "18446744073709551616\n");
	CHECK(pd_read_u64(path, &v, err, sizeof(err)) == PD_READ_PARSE);
	CHECK(strstr(err, "out of range") != NULL);
	fake_write("v", "-5\n");
	CHECK(pd_read_u64(path, &v, err, sizeof(err)) == PD_READ_PARSE);
	CHECK(strstr(err, path) != NULL);
	fake_write("v", " 5\n");
	CHECK(pd_read_u64(path, &v, err, sizeof(err)) == PD_READ_PARSE);
	fake_write("v", "5\n\n");
	CHECK(pd_read_u64(path, &v, err, sizeof(err)) == PD_READ_OK && v == 5);
	fake_write("v", "5 6\n");
	CHECK(pd_read_u64(path, &v, err, sizeof(err)) == PD_READ_PARSE);
	fake_write("v", "%s", "");
	CHECK(pd_read_u64(path, &v, err, sizeof(err)) == PD_READ_PARSE);
	CHECK(strstr(err, "empty") != NULL);
	fake_remove("v");
	CHECK(pd_read_u64(path, &v, err, sizeof(err)) == PD_READ_IO);
	CHECK(strstr(err, "No such file") != NULL);
}

/* Write a counter in place (same inode, as sysfs changes its values), not by a rename. */
static void rewrite_in_place(const char *path, const char *text)
{
	FILE *f = fopen(path, "r+");
	if (!f || fputs(text, f) < 0 || fclose(f) != 0)
		CHECK(!"rewrite in place");
}

/* A counter file is opened once and read again at offset 0; a replaced or vanished file is
 * opened again by its path. */
static void test_kept_descriptor(void)
{
	fake_new();
	fake_rapl_zone("intel-rapl:0", "package-0", 1000, RANGE);
	struct pd_opts o = fake_opts();
	struct pd_set *set = pd_set_new(&o);
	char why[PD_WHY_MAX] = "", path[PD_PATH_MAX];
	CHECK(rapl_discover(set, &o, why, sizeof(why)) == 1);
	struct pd_zone *z = pd_set_find(set, "package-0");
	if (!z) {
		pd_set_destroy(&set);
		return;
	}
	snprintf(path, sizeof(path), "%s/sys/class/powercap/intel-rapl:0/energy_uj", fake_root);
	CHECK(z->fd < 0); /* discovery reads by path and keeps nothing open */
	struct wb_power p;
	uint64_t t = T0, m = 1000 * MS;
	CHECK_U64(pd_set_sample(set, t, m, &p), 1);
	free(p.zones);
	int fd = z->fd;
	CHECK(fd >= 0);
	rewrite_in_place(path, "1500\n");
	CHECK_U64(pd_set_sample(set, t += 100 * MS, m += 100 * MS, &p), 1);
	CHECK(sample_zone(&p, "package-0") && sample_zone(&p, "package-0")->energy_uj == 1500);
	free(p.zones);
	CHECK(z->fd == fd); /* the same descriptor, read from offset 0 again */
	/* a chmod (access taken away, say) makes it open the path again, as at start */
	struct stat st;
	CHECK(chmod(path, 0444) == 0 && stat(path, &st) == 0);
	CHECK(st.st_ctim.tv_sec != z->fd_ctime.tv_sec || st.st_ctim.tv_nsec != z->fd_ctime.tv_nsec);
	CHECK_U64(pd_set_sample(set, t += 100 * MS, m += 100 * MS, &p), 1);
	free(p.zones);
	CHECK(z->fd >= 0 && st.st_ctim.tv_sec == z->fd_ctime.tv_sec &&
	      st.st_ctim.tv_nsec == z->fd_ctime.tv_nsec);
	/* replaced by a rename (a fake tree; sysfs never does it): the new file is read */
	fake_rapl_energy("intel-rapl:0", 1700);
	CHECK_U64(pd_set_sample(set, t += 100 * MS, m += 100 * MS, &p), 1);
	CHECK(sample_zone(&p, "package-0") && sample_zone(&p, "package-0")->energy_uj == 1700);
	free(p.zones);
	/* gone: an error with the path, nothing kept open; back: read again from its path */
	fake_remove("sys/class/powercap/intel-rapl:0/energy_uj");
	CHECK_U64(pd_set_sample(set, t += 100 * MS, m += 100 * MS, &p), 0);
	free(p.zones);
	CHECK_U64(set->counts.read_errors, 1);
	CHECK(z->fd < 0);
	fake_rapl_energy("intel-rapl:0", 1900);
	CHECK_U64(pd_set_sample(set, t += 100 * MS, m += 100 * MS, &p), 1);
	CHECK(sample_zone(&p, "package-0") && sample_zone(&p, "package-0")->energy_uj == 1900);
	free(p.zones);
	CHECK(z->fd >= 0);
	pd_set_destroy(&set);
}

static const struct unit_case cases[] = {
    {"two-socket Intel with subzones, psys, mmio duplicate", test_intel_discovery},
    {"mmio-only package, multi-die names", test_mmio_only_and_dies},
    {"AMD layout, first sample is the hardware reading", test_amd_discovery},
    {"no powercap tree explained", test_no_powercap},
    {"published totals equal the increments, across a wrap", test_samples_exact},
    {"garbage, vanished file, backwards, out of range", test_bad_input},
    {"energy_uj root-only: CVE-2020-8694 explained", test_permission},
    {"strict unsigned integer files", test_read_u64},
    {"a counter file is kept open, reopened when replaced or gone", test_kept_descriptor},
    {"cleanup", fake_cleanup},
};

UNIT_MAIN(cases)
