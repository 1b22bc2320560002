/*
 * powerd's fake source: the energy it simulates follows a scripted /proc/stat exactly (the
 * coefficients of powerd/fake.c and docs/powerd.md), its zones say they are simulated, and
 * `auto` never picks it.
 */
#include "procstat.h"
#include "test_powerd_fake.h"
#include "unit.h"

/* powerd/fake.c's coefficients as docs/powerd.md gives them: idle mW, mW per busy CPU. */
static const struct {
	const char *name;
	uint64_t idle_mw, busy_mw;
} coef[] = {{"package-0", 10000, 5000}, {"core-0", 2000, 4000}, {"dram-0", 3000, 1000}};

/* /proc/stat with the given ticks: user nice system idle iowait irq softirq steal. */
static void stat_ticks(unsigned long long user, unsigned long long system, unsigned long long idle,
		       unsigned long long iowait, unsigned long long steal)
{
	fake_write("proc/stat",
		   "cpu  %llu 0 %llu %llu %llu 0 0 %llu 0 0\ncpu0 1 0 1 1 0 0 0 0 0 0\nintr 5\n",
		   user, system, idle, iowait, steal);
}

static struct pd_set *open_fake(struct pd_opts *o)
{
	struct pd_set *set = pd_set_new(o);
	CHECK_U64(detect_open(set, 1u << pd_source_index(&fake_source)), 1);
	return set;
}

/* Expected cumulative uJ per zone from the busy CPU ns and wall ns summed over the script. */
static void expect(const struct wb_power *p, unsigned __int128 wall_ns, unsigned __int128 busy_ns)
{
	CHECK_U64(p->n_zones, 3);
	for (size_t k = 0; k < 3; k++) {
		const struct wb_power_zone *z = sample_zone(p, coef[k].name);
		CHECK(z != NULL);
		if (!z)
			continue;
		unsigned __int128 pj = coef[k].idle_mw * wall_ns + coef[k].busy_mw * busy_ns;
		CHECK_U64(z->energy_uj, (uint64_t)(pj / 1000000u));
	}
}

static void test_follows_script(void)
{
	fake_new();
	uint64_t tick = wb_procstat_ns_per_tick();
	stat_ticks(1000, 500, 9000, 100, 0);
	struct pd_opts o = fake_opts();
	struct pd_set *set = open_fake(&o);
	CHECK_U64(set->n, 3);
	char mode[32];
	detect_mode(set, mode, sizeof(mode));
	CHECK_STR(mode, "fake");

	struct wb_power p;
	uint64_t t = 1000000000000ull;
	CHECK_U64(pd_set_sample(set, t, t, &p), 3); /* the baseline: 0 uJ */
	expect(&p, 0, 0);
	const struct wb_power_zone *z = sample_zone(&p, "package-0");
	CHECK(z && !strcmp(z->source, "fake") && !strcmp(z->zone, "package"));
	CHECK(z && !strncmp(z->path, "simulated:", 10) && strstr(z->path, "/proc/stat"));
	CHECK(sample_zone(&p, "core-0") && !strcmp(sample_zone(&p, "core-0")->zone, "core"));
	free(p.zones);

	/* 1 s with 150 ticks busy (user 100, system 50) and 50 idle */
	stat_ticks(1100, 550, 9050, 100, 0);
	unsigned __int128 wall = 1000000000ull, busy = 150 * tick;
	t += 1000000000ull;
	CHECK_U64(pd_set_sample(set, t, t, &p), 3);
	expect(&p, wall, busy);
	free(p.zones);

	/* an odd step: the sub-microjoule remainder is carried, not lost; iowait is idle, steal
	 * busy */
	stat_ticks(1101, 550, 9060, 140, 3);
	wall += 333333333ull;
	busy += 4 * tick;
	t += 333333333ull;
	CHECK_U64(pd_set_sample(set, t, t, &p), 3);
	expect(&p, wall, busy);
	free(p.zones);

	/* an idle second: idle power only */
	stat_ticks(1101, 550, 9160, 140, 3);
	wall += 1000000000ull;
	t += 1000000000ull;
	CHECK_U64(pd_set_sample(set, t, t, &p), 3);
	expect(&p, wall, busy);
	free(p.zones);

	/* stat unreadable: counted, nothing published; the next reading covers the gap */
	fake_remove("proc/stat");
	uint64_t errs = set->counts.read_errors;
	t += 1000000000ull;
	CHECK_U64(pd_set_sample(set, t, t, &p), 0);
	CHECK_U64(set->counts.read_errors, errs + 1);
	free(p.zones);
	fake_write("proc/stat", "cpu nonsense\n");
	uint64_t perrs = set->counts.parse_errors;
	t += 1000000000ull;
	CHECK_U64(pd_set_sample(set, t, t, &p), 0);
	CHECK_U64(set->counts.parse_errors, perrs + 1);
	free(p.zones);
	stat_ticks(1301, 550, 9360, 140, 3); /* 200 ticks busy over the 3 s */
	wall += 3000000000ull;
	busy += 200 * tick;
	t += 1000000000ull;
	CHECK_U64(pd_set_sample(set, t, t, &p), 3);
	expect(&p, wall, busy);
	free(p.zones);

	/* the wall clock set an hour forward while 1 s passed: 1 s of idle power, not an hour's */
	stat_ticks(1301, 550, 9460, 140, 3);
	wall += 1000000000ull;
	CHECK_U64(pd_set_sample(set, t + 3600000000000ull, t + 1000000000ull, &p), 3);
	expect(&p, wall, busy);
	free(p.zones);
	pd_set_destroy(&set);
}

static void test_never_auto(void)
{
	/* no RAPL, MSR or hwmon, but a readable /proc/stat: auto finds no meter */
	fake_new();
	stat_ticks(1, 1, 1, 1, 0);
	struct pd_opts o = fake_opts();
	struct pd_set *set = pd_set_new(&o);
	CHECK_U64(detect_open(set, 0), 0);
	CHECK_U64(set->n, 0);
	char mode[32];
	detect_mode(set, mode, sizeof(mode));
	CHECK_STR(mode, "none");
	pd_set_destroy(&set);
	CHECK(!fake_source.in_auto);
}

static void test_no_stat(void)
{
	fake_new();
	struct pd_opts o = fake_opts();
	struct pd_set *set = pd_set_new(&o);
	CHECK_U64(detect_open(set, 1u << pd_source_index(&fake_source)), 0);
	CHECK_U64(set->n, 0);
	pd_set_destroy(&set);
}

static const struct unit_case cases[] = {
    {"energy follows a /proc/stat script", test_follows_script},
    {"auto never picks it", test_never_auto},
    {"no /proc/stat: not usable", test_no_stat},
    {"cleanup", fake_cleanup},
};

UNIT_MAIN(cases)
