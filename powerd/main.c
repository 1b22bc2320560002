/*
 * wattbus-powerd: reads the machine's power meters (RAPL through powercap or
 * MSRs, hwmon and ACPI power meters, or a command) and publishes cumulative,
 * wrap-corrected energy per zone at every multiple of the interval. See
 * wattbus-powerd(8) and docs/powerd.md.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>

#include "clock.h"
#include "daemon.h"
#include "powerd.h"

/* [powerd]: powerd's own keys (struct pd_conf) and each source's, composed by conf.c. */
static void opts_from_conf(struct pd_opts *o, const struct pd_conf *conf, const struct wb_global *g)
{
	pd_opts_from_conf(o, conf, g ? g->max_zone_w : 0,
			  g ? (int)(g->reconnect_max_ns / 1000000) : 0);
}

static int powerd_check(const void *confp, char *err, size_t errlen)
{
	const struct pd_conf *conf = confp;
	unsigned mask;
	if (detect_parse_sources(conf->source.v, conf->source.n, &mask, err, errlen) < 0)
		return -1;
	struct pd_opts opts;
	opts_from_conf(&opts, conf, NULL);
	return detect_check(mask, &opts, err, errlen);
}

/* keys, nkeys and conf_size: conf.c's composed section, filled in by main */
static struct wb_stage powerd_stage = {
    .name = "powerd",
    .summary =
	"Publish cumulative energy per power zone (RAPL, MSR, hwmon, a command) on the wattbus.",
    .check = powerd_check,
};

struct powerd;
struct pd_watch {
	struct powerd *pd;
	const struct pd_source *src;
};

struct powerd {
	struct wb_daemon *d;
	struct pd_watch watch[PD_SOURCES_MAX];
	struct pd_opts opts;
	struct pd_set *set;
	struct wb_grid *grid;
	uint64_t last_t_ns;
	/* a sample begun whose readings are still on their way (pd_set_busy: exec's run) */
	bool pending;
	uint64_t pending_t_ns;
};

/* End the sample begun and publish it. */
static void sample_send(struct powerd *pd)
{
	struct wb_msg msg = {.kind = WB_POWER};
	pd->pending = false;
	size_t n = pd_set_sample_end(pd->set, pd->pending_t_ns, &msg.power);
	if (pd->pending_t_ns <= pd->last_t_ns) {
		/* The clock went back: the counters were read (no wrap goes unseen) but t must not
		 * repeat. */
		pd->set->counts.clock_steps++;
		log_warnx(
		    "sample time %llu is not after the last one published (%llu): clock set back; not published",
		    (unsigned long long)pd->pending_t_ns, (unsigned long long)pd->last_t_ns);
	} else if (n > 0) {
		if (wb_daemon_send(pd->d, &msg) == 0)
			pd->last_t_ns = pd->pending_t_ns;
	}
	wb_msg_clear(&msg);
}

/* The set's counters as stat counters; a source's own ones while it is in use. */
static void stat_update(struct wb_daemon *d, void *arg)
{
	struct powerd *pd = arg;
	struct pd_counts *c = &pd->set->counts;
	struct wb_stats *stats = wb_daemon_stats(pd->d);
	c->lateness_mean_ns = c->samples ? c->lateness_sum_ns / c->samples : 0;
	wb_stats_mirror(stats, c, pd_stat_rows, pd_nstat_rows);
	for (unsigned s = 0; s < pd_nsources; s++)
		if ((pd->set->used & (1u << s)) && pd_sources[s]->stats)
			wb_stats_mirror(stats, c->src[s], pd_sources[s]->stats,
					pd_sources[s]->nstats);
}

static int on_source_fd(struct wb_daemon *d, int fd, void *arg)
{
	struct pd_watch *w = arg;
	/* The descriptor of a set a reload replaced (closed, or its number taken again): end this
	 * watch, which would otherwise fire for ever; the new set's has a watch of its own. */
	if (!(w->pd->set->used & (1u << pd_source_index(w->src))) ||
	    w->src->watch_fd(w->pd->set) != fd)
		return -1;
	/* A source whose input ended keeps an idle descriptor in its place: keep watching. */
	w->src->on_readable(w->pd->set);
	if (w->pd->pending && !pd_set_busy(w->pd->set))
		sample_send(w->pd);
	return 0;
}

static void on_tick(struct wb_daemon *d, const struct wb_grid_tick *tick, void *arg)
{
	struct powerd *pd = arg;
	uint64_t mono = wb_mono_ns();
	struct pd_counts *c = &pd->set->counts;
	c->samples_missed += tick->missed;
	c->lateness_sum_ns += tick->late_ns;
	if (tick->late_ns > c->lateness_max_ns)
		c->lateness_max_ns = tick->late_ns;
	/* a run that outlasted its sample (cut at its deadline): publish what came */
	if (pd->pending)
		sample_send(pd);
	for (unsigned s = 0; s < pd_nsources; s++)
		if ((pd->set->used & (1u << s)) && pd_sources[s]->tend)
			pd_sources[s]->tend(pd->set);

	pd_set_sample_begin(pd->set, tick->t_ns, mono);
	pd->pending = true;
	pd->pending_t_ns = tick->t_ns;
	if (!pd_set_busy(pd->set))
		sample_send(pd);
}

static size_t open_sources(struct powerd *pd, const struct pd_conf *conf)
{
	unsigned mask = 0;
	char err[256];
	detect_parse_sources(conf->source.v, conf->source.n, &mask, err,
			     sizeof(err)); /* checked by powerd_check */
	pd->set = pd_set_new(&pd->opts);
	if (!pd->set)
		return 0;
	size_t usable = detect_open(pd->set, mask);
	char mode[32];
	detect_mode(pd->set, mode, sizeof(mode));
	wb_daemon_set_mode(pd->d, mode);
	detect_log_zones(pd->set);
	for (unsigned s = 0; s < pd_nsources; s++) {
		const struct pd_source *src = pd_sources[s];
		int fd = (pd->set->used & (1u << s)) && src->watch_fd ? src->watch_fd(pd->set) : -1;
		if (fd < 0)
			continue;
		pd->watch[s] = (struct pd_watch){.pd = pd, .src = src};
		wb_daemon_watch_fd(pd->d, fd, on_source_fd, &pd->watch[s]);
	}
	return usable;
}

/*
 * SIGHUP: interval and max_power_w apply at once. With no usable meter the
 * sources are opened again (after a permission fix, say); otherwise changing
 * where zones come from needs a restart, since their counters would restart.
 */
static int on_reload(struct wb_daemon *d, void *new_confp, void *arg)
{
	struct powerd *pd = arg;
	struct pd_conf *old = wb_daemon_conf(d), *conf = new_confp;
	char changed[512];
	bool sources_changed =
	    wb_conf_restart_changes(pd_conf_section(NULL), old, conf, changed, sizeof(changed)) > 0;
	if (strcmp(old->pub, conf->pub)) {
		log_warnx("reload: pub changes need a restart; keeping the running config");
		return -1;
	}
	if (pd->set->n > 0 && sources_changed) {
		log_warnx(
		    "reload: %s change the zones or their meters and need a restart; keeping the running config",
		    changed);
		return -1;
	}
	bool rearm = old->interval_ns != conf->interval_ns;
	if (rearm && wb_grid_rearm(pd->grid, conf->interval_ns) < 0) {
		log_warnx("reload: cannot re-arm the sampling timer; keeping the running config");
		return -1;
	}
	/* pd->opts points into the config: on failure the old config stays, and so must they. */
	struct pd_opts keep_opts = pd->opts;
	opts_from_conf(&pd->opts, conf, wb_daemon_global(pd->d));
	/* No zones yet (no meter, or one whose zones have not come): nothing to lose, open the
	   sources again, with the new settings. */
	if (pd->set->n == 0) {
		struct pd_set *keep_set = pd->set;
		pd->set = NULL;
		open_sources(pd, conf);
		if (!pd->set) {
			pd->set = keep_set;
			pd->opts = keep_opts;
			if (rearm)
				wb_grid_rearm(pd->grid, old->interval_ns);
			log_warnx(
			    "reload: cannot open the sources again (out of memory); keeping the running config");
			return -1;
		}
		pd->set->counts = keep_set->counts;
		pd_set_destroy(&keep_set);
	}
	uint64_t max_uw = (uint64_t)(pd->opts.max_power_w * 1e6);
	for (size_t i = 0; i < pd->set->n; i++) {
		struct pd_zone *z = &pd->set->zones[i];
		z->ctr.max_uw = max_uw;
		z->integ.max_uw = max_uw;
		if (z->is_power) /* the gap bridged follows the interval */
			z->integ.max_gap_ns = pd_zone_bridge_ns(z, conf->interval_ns);
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct powerd pd = {0};
	const struct wb_conf_section *sec = pd_conf_section(&powerd_stage.conf_size);
	powerd_stage.keys = sec->keys;
	powerd_stage.nkeys = sec->nkeys;
	pd.d = wb_daemon_new(&powerd_stage, argc, argv);
	struct pd_conf *conf = wb_daemon_conf(pd.d);
	opts_from_conf(&pd.opts, conf, wb_daemon_global(pd.d));
	open_sources(&pd, conf);
	if (!pd.set) {
		wb_daemon_destroy(&pd.d);
		return WB_EXIT_FAILURE;
	}
	wb_daemon_on_stat(pd.d, stat_update, &pd);
	/* Timer slack delays wake-ups by up to 50 us by default; keep it well under the interval.
	 */
	uint64_t slack_ns = conf->interval_ns / 1000;
	prctl(PR_SET_TIMERSLACK, slack_ns < 1000 ? 1000 : slack_ns > 50000 ? 50000 : slack_ns);
	pd.grid = wb_daemon_grid_timer(pd.d, conf->interval_ns, on_tick, &pd);
	if (!pd.grid) {
		log_errx("cannot set up the sampling timer");
		pd_set_destroy(&pd.set);
		wb_daemon_destroy(&pd.d);
		return WB_EXIT_FAILURE;
	}
	wb_grid_carry_stats(pd.grid); /* a stat message costs no wake-up of its own */
	wb_daemon_on_reload(pd.d, on_reload, &pd);
	char ival[32];
	wb_format_duration(conf->interval_ns, ival, sizeof(ival));
	log_info("sampling %zu zones every %s on the wall-clock grid", pd.set->n, ival);

	int rc = wb_daemon_run(pd.d);

	const struct pd_counts *c = &pd.set->counts;
	log_info(
	    "%llu samples, %llu missed; lateness mean %.1f us, max %.1f us; %llu zone samples skipped",
	    (unsigned long long)c->samples, (unsigned long long)c->samples_missed,
	    c->samples ? (double)c->lateness_sum_ns / (double)c->samples / 1e3 : 0.0,
	    (double)c->lateness_max_ns / 1e3, (unsigned long long)c->zone_samples_skipped);
	pd_set_destroy(&pd.set);
	wb_daemon_destroy(&pd.d);
	return rc;
}
