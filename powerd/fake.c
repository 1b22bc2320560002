/*
 * The fake source: a development meter for machines without one (a cloud VM, a laptop in a VM),
 * as Kepler's dev.fake-cpu-meter. Its package, core and dram zones are SIMULATED from the
 * machine's real CPU load (/proc/stat) by fixed coefficients, never measured: `auto` never
 * chooses it, each zone's path says "simulated:", and powerd's mode reads "fake".
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "powerd.h"
#include "procstat.h"

/*
 * A zone's power: idle_mw all the time, plus busy_mw per busy CPU (CPU time busy as Kepler
 * counts it: all but idle and iowait). Energy over a sample: idle_mw x wall time + busy_mw x
 * busy CPU time, in mW x ns = pJ. docs/powerd.md ("The fake source") lists the same figures.
 */
struct fake_coef {
	const char *kind;
	uint64_t idle_mw, busy_mw;
};

static const struct fake_coef fake_coefs[] = {
    {"package", 10000, 5000},
    {"core", 2000, 4000},
    {"dram", 3000, 1000},
};
#define FAKE_NZONES (sizeof(fake_coefs) / sizeof(fake_coefs[0]))

struct fake_state {
	char stat_path[PD_PATH_MAX];
	uint64_t ns_per_tick;
	bool have; /* a first reading taken: the next one adds energy */
	uint64_t last_busy_ns, last_t_ns, last_mono_ns;
	unsigned __int128 total_pj[FAKE_NZONES];
	struct wb_ratelimit rl;
};

static struct fake_state *fake_state(struct pd_set *set)
{
	return *pd_set_state(set, &fake_source);
}

/* Busy CPU time from the stat file; 0, or -1 with err saying why (errno set for an I/O error). */
static int fake_read_busy(const struct fake_state *st, uint64_t *busy_ns, bool *parse, char *err,
			  size_t errlen)
{
	char buf[4096]; /* the "cpu " line comes first */
	struct wb_cpu_times c;
	*parse = false;
	if (pd_read_text(st->stat_path, buf, sizeof(buf)) < 0) {
		snprintf(err, errlen, "%s: %s", st->stat_path, strerror(errno));
		return -1;
	}
	if (wb_procstat_parse_cpu(buf, st->ns_per_tick, &c) < 0) {
		*parse = true;
		snprintf(err, errlen, "%s: no \"cpu\" line with 4 or more numbers", st->stat_path);
		return -1;
	}
	uint64_t total;
	wb_cpu_busy(&c, busy_ns, &total);
	return 0;
}

static const struct fake_coef *fake_coef_of(const struct pd_zone *z, size_t *k)
{
	for (*k = 0; *k < FAKE_NZONES; (*k)++)
		if (!strcmp(fake_coefs[*k].kind, z->kind))
			return &fake_coefs[*k];
	return NULL;
}

/* Once per sample: the energy since the last reading, accounted to each zone as a counter. */
static void fake_sample(struct pd_set *set, uint64_t t_ns, uint64_t mono_ns)
{
	struct fake_state *st = fake_state(set);
	if (!st)
		return;
	char err[PD_PATH_MAX + 64];
	uint64_t busy;
	bool parse;
	if (fake_read_busy(st, &busy, &parse, err, sizeof(err)) < 0) {
		if (parse)
			set->counts.parse_errors++;
		else
			set->counts.read_errors++;
		log_rl(&st->rl, WB_LOG_WARN, "fake: %s; sample skipped", err);
		return;
	}
	if (st->have) {
		/* the grid's step, the integrator's rule: a set wall clock invents no idle energy
		 */
		uint64_t dt_ns = integ_step_ns(st->last_t_ns, st->last_mono_ns, t_ns, mono_ns);
		uint64_t dbusy_ns = busy > st->last_busy_ns ? busy - st->last_busy_ns : 0;
		for (size_t k = 0; k < FAKE_NZONES; k++)
			st->total_pj[k] += (unsigned __int128)fake_coefs[k].idle_mw * dt_ns +
					   (unsigned __int128)fake_coefs[k].busy_mw * dbusy_ns;
	}
	st->have = true;
	st->last_busy_ns = busy;
	st->last_t_ns = t_ns;
	st->last_mono_ns = mono_ns;
	for (size_t i = 0; i < set->n; i++) {
		struct pd_zone *z = &set->zones[i];
		size_t k;
		if (z->src != &fake_source || !fake_coef_of(z, &k))
			continue;
		uint64_t uj = (uint64_t)(st->total_pj[k] / 1000000u);
		z->updated = pd_verdict_added(pd_zone_account(set, z, uj, t_ns, mono_ns));
	}
}

/* Its keys in [powerd]. */
struct fake_conf {
	char *proc_root; /* "/proc": the stat the fake models power from */
};

static int fake_discover(struct pd_set *set, const struct pd_opts *opts, char *why, size_t whylen)
{
	struct fake_state *st = calloc(1, sizeof(*st));
	if (!st) {
		snprintf(why, whylen, "out of memory");
		return 0;
	}
	const struct fake_conf *conf = pd_source_conf(opts, &fake_source);
	const char *root = conf->proc_root && conf->proc_root[0] ? conf->proc_root : "/proc";
	if (pd_fmt(st->stat_path, sizeof(st->stat_path), "%s/stat", root) < 0) {
		snprintf(why, whylen, "proc_root is too long");
		free(st);
		return 0;
	}
	st->ns_per_tick = wb_procstat_ns_per_tick();
	st->rl = (struct wb_ratelimit)WB_RATELIMIT_INIT;
	uint64_t busy;
	bool parse;
	if (fake_read_busy(st, &busy, &parse, why, whylen) < 0) {
		free(st);
		return 0;
	}
	int added = 0;
	uint64_t max_uw = (uint64_t)(opts->max_power_w * 1e6);
	for (size_t k = 0; k < FAKE_NZONES; k++) {
		struct pd_zone z;
		pd_zone_init(&z, &fake_source, fake_coefs[k].kind, 0);
		pd_zone_name(&z, fake_coefs[k].kind, 0);
		pd_fmt(z.path, sizeof(z.path), WB_PATH_SIMULATED "%s", st->stat_path);
		counter_init(&z.ctr, 0, 1, 1, max_uw);
		if (pd_set_add(set, &z) >= 0)
			added++;
	}
	if (!added) {
		snprintf(why, whylen, "no room for its zones");
		free(st);
		return 0;
	}
	*pd_set_state(set, &fake_source) = st;
	log_warnx(
	    "fake: SIMULATED power, not measured: package, core and dram modeled from the CPU load in %s (for development and demos only; never use its joules)",
	    st->stat_path);
	return added;
}

static void fake_destroy(struct pd_set *set)
{
	void **slot = pd_set_state(set, &fake_source);
	free(*slot);
	*slot = NULL;
}

#define OFF(f) offsetof(struct fake_conf, f)
static const struct wb_conf_key fake_keys[] = {
    {"proc_root", WB_CONF_STR | WB_CONF_RESTART, OFF(proc_root), "/proc", 0, 0, NULL,
     "where procfs is mounted: the fake source models power from PROC_ROOT/stat"},
};
#undef OFF

const struct pd_source fake_source = {
    .name = "fake",
    .in_auto = false, /* simulated: only where named */
    .note = "simulated from the CPU load, for development",
    .keys = fake_keys,
    .nkeys = sizeof(fake_keys) / sizeof(fake_keys[0]),
    .conf_size = sizeof(struct fake_conf),
    .discover = fake_discover,
    .sample = fake_sample,
    .destroy = fake_destroy,
};
