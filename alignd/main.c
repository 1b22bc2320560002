/*
 * wattbus-alignd: subscribes to power and usage from any number of hosts and
 * publishes one aligned message per usage slot, with the energy per zone in
 * that slot and the usage deltas of the slot. See wattbus-alignd(8).
 */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alignd.h"
#include "clock.h"
#include "daemon.h"
#include "log.h"

struct alignd_conf {
	char *pub;
	struct wb_strlist sub;
	struct wb_strlist host_map;
	char *state_file;
	uint64_t state_every_ns;
	uint64_t max_lag_ns;
	uint64_t snap_ns;
	uint64_t host_timeout_ns;
	uint64_t max_skew_ns;
	uint64_t tick_ns;
	double bridge_max_w;
	int64_t max_hosts, max_procs, max_cgroups, max_exes, max_pending, max_samples;
	int64_t budget_mib;
};

/* clang-format off */
#define K(name, type, field, def, min, max, help) \
	{name, type, offsetof(struct alignd_conf, field), def, min, max, NULL, help}
static const struct wb_conf_key alignd_keys[] = {
	K("pub", WB_CONF_STR, pub, "ipc://%r/alignd.sock", 0, 0,
	  "endpoint the aligned slots are published on"),
	K("sub", WB_CONF_LIST, sub, "ipc://%r/powerd.sock,ipc://%r/usaged.sock", 0, 0,
	  "endpoints to read power/ and usage/ messages from (any number, any hosts)"),
	K("host_map", WB_CONF_LIST, host_map, "", 0, 0,
	  "usagehost=powerhost items: take a host's energy from a meter published under another name"),
	K("state_file", WB_CONF_STR, state_file, "%r/alignd.state", 0, 0,
	  "where a clean stop saves what a restart needs to lose no energy (empty: nowhere)"),
	K("state_every", WB_CONF_DURATION | WB_CONF_OFF0, state_every_ns, "1s", 100e6, 3600e9,
	  "also save the state this often while running, so that a crash loses no energy (0: at stop only; else 100ms to 1h)"),
	K("max_lag", WB_CONF_DURATION, max_lag_ns, "0", 0, 3600e9,
	  "longest wait for a power sample at or after a slot's end (0: two power intervals)"),
	K("snap", WB_CONF_DURATION, snap_ns, "5ms", 0, 1e9,
	  "a slot end this close after the last power sample goes out at once, unmarked (0: off)"),
	K("host_timeout", WB_CONF_DURATION, host_timeout_ns, "60s", 1e8, 30 * 86400e9,
	  "a host silent this long is dropped (usage: its process, cgroup and executable tables; power: its curves)"),
	K("max_skew", WB_CONF_DURATION, max_skew_ns, "2s", 0, 86400e9,
	  "log and count messages whose time differs from their arrival by more (0: off)"),
	K("tick", WB_CONF_DURATION, tick_ns, "20ms", 1e6, 1e9,
	  "shortest wait between two checks of waiting slots and timeouts (alignd sleeps until the next one is due)"),
	K("bridge_max_w", WB_CONF_DOUBLE, bridge_max_w, "-1", -1, 1e9,
	  "refuse to bridge a powerd restart implying more average power over the outage (-1: [global] max_zone_w, a zone's plausible maximum; 0: no limit)"),
	K("max_hosts", WB_CONF_INT, max_hosts, "4096", 1, 1e6,
	  "usage hosts and power hosts tracked, each"),
	K("max_procs", WB_CONF_INT, max_procs, "262144", 1, 262144,
	  "processes remembered per usage host"),
	K("max_cgroups", WB_CONF_INT, max_cgroups, "16384", 1, 65536,
	  "cgroups remembered per usage host"),
	K("max_exes", WB_CONF_INT, max_exes, "16384", 1, 65536,
	  "executables' paths remembered per usage host"),
	K("max_pending", WB_CONF_INT, max_pending, "64", 1, 65536,
	  "slots per usage host waiting for power before the oldest is extrapolated"),
	K("max_samples", WB_CONF_INT, max_samples, "16384", 4, 16777216,
	  "power samples kept per zone"),
	K("budget_mib", WB_CONF_INT, budget_mib, "512", 0, 1048576,
	  "MiB that all hosts' process, cgroup and executable tables, power curves and waiting slots may hold together; a new host beyond it is refused (0: no limit)"),
};
#undef K
/* clang-format on */

static int conf_to_align(const struct alignd_conf *c, struct align_conf *ac, char *err,
			 size_t errlen)
{
	*ac = (struct align_conf){
	    .max_lag_ns = c->max_lag_ns,
	    .snap_ns = c->snap_ns,
	    .host_timeout_ns = c->host_timeout_ns,
	    .max_skew_ns = c->max_skew_ns,
	    .bridge_max_w = c->bridge_max_w,
	    .max_hosts = (size_t)c->max_hosts,
	    .max_procs = (size_t)c->max_procs,
	    .max_cgroups = (size_t)c->max_cgroups,
	    .max_exes = (size_t)c->max_exes,
	    .max_pending = (size_t)c->max_pending,
	    .max_samples = (size_t)c->max_samples,
	    .budget_bytes = (size_t)c->budget_mib << 20,
	};
	return align_conf_map(ac, c->host_map.v, c->host_map.n, err, errlen);
}

static int check_conf(const void *conf, char *err, size_t errlen)
{
	struct align_conf ac = {0};
	int rc = conf_to_align(conf, &ac, err, errlen);
	align_conf_free(&ac);
	return rc;
}

static const struct wb_stage alignd_stage =
    WB_STAGE("alignd", "Put power and usage samples into the same time slots, exactly.",
	     alignd_keys, struct alignd_conf, check_conf);

struct alignd {
	struct wb_daemon *d;
	struct align *align;
	int tick_id;		 /* the armed one-shot timer, or -1 */
	uint64_t tick_at_ns;	 /* when it fires (monotonic clock) */
	struct wb_checkpoint cp; /* the state file's */
};

static void emit(struct wb_msg *msg, void *arg)
{
	struct alignd *ad = arg;
	if (wb_daemon_send(ad->d, msg) < 0)
		log_warnx("aligned/%s [%" PRIu64 ", %" PRIu64 "]: could not be sent",
			  msg->aligned.env.host, msg->aligned.t0, msg->aligned.t1);
}

static int on_tick(zloop_t *loop, int timer_id, void *arg);

/*
 * Arm the timer for the engine's next deadline (a slot's wait for power, the
 * sweep in a silence), but not sooner than tick. The sweep and the checkpoint
 * ride on the messages (align_sweep in on_msg; lib/daemon.h), so a deadline
 * that moved later moves the timer too: alignd fed once a second wakes for
 * its messages alone.
 */
static void arm(struct alignd *ad)
{
	const struct alignd_conf *conf = wb_daemon_conf(ad->d);
	uint64_t now = wb_now_ns(), mono = wb_mono_ns();
	uint64_t due = align_next_tick_ns(ad->align), deadline = mono + (due > now ? due - now : 0);
	uint64_t at = deadline < mono + conf->tick_ns ? mono + conf->tick_ns : deadline;
	if (ad->tick_id >= 0 && align_timer_keeps(ad->tick_at_ns, deadline, at))
		return;
	wb_daemon_timer_end(ad->d, ad->tick_id);
	ad->tick_id = wb_daemon_timer_once(ad->d, at - mono, on_tick, ad);
	ad->tick_at_ns = at;
	if (ad->tick_id < 0)
		log_errx("cannot arm the timer: waiting slots resolve at the next message");
}

static void mirror_counters(struct alignd *ad);

static void on_msg(struct wb_daemon *d, const struct wb_msg *msg, const struct wb_rx *rx, void *arg)
{
	struct alignd *ad = arg;
	uint64_t refused = align_counters(ad->align)->budget_refused;
	if (msg->kind == WB_POWER && rx->second_meter)
		align_power_meter(ad->align, &msg->power, rx->recv_ns);
	else if (msg->kind == WB_POWER)
		align_power(ad->align, &msg->power, rx->recv_ns);
	else if (msg->kind == WB_USAGE)
		align_usage(ad->align, &msg->usage, rx->lost, rx->recv_ns);
	align_sweep(ad->align, wb_now_ns()); /* once a second */
	/* A valid frame that the memory budget has no room for counts as rejected (budget). */
	if (align_counters(ad->align)->budget_refused != refused)
		wb_stats_reject(wb_daemon_stats(d), WB_R_BUDGET);
	mirror_counters(ad); /* the stat message may go out before the next tick */
	wb_checkpoint_changed(&ad->cp);
	arm(ad);
}

/* The engine's counters, mirrored into the stat message under these names. */
static const struct wb_stat_row engine_counters[] = {
    WB_STAT_ROW(struct align_counters, slots, "slots"),
    WB_STAT_ROW(struct align_counters, slots_no_power, "slots_no_power"),
    WB_STAT_ROW(struct align_counters, slots_extrapolated, "slots_extrapolated"),
    WB_STAT_ROW(struct align_counters, slots_gap, "slots_gap"),
    WB_STAT_ROW(struct align_counters, slots_forced, "slots_forced"),
    WB_STAT_ROW(struct align_counters, power_samples, "power_samples"),
    WB_STAT_ROW(struct align_counters, power_bridged, "power_bridged"),
    WB_STAT_ROW(struct align_counters, power_discontinuities, "power_discontinuities"),
    WB_STAT_ROW(struct align_counters, power_stale, "power_stale"),
    WB_STAT_ROW(struct align_counters, power_zones_evicted, "power_zones_evicted"),
    WB_STAT_ROW(struct align_counters, usage_stale, "usage_stale"),
    WB_STAT_ROW(struct align_counters, usage_epochs, "usage_epochs"),
    WB_STAT_ROW(struct align_counters, usage_baselines, "usage_baselines"),
    WB_STAT_ROW(struct align_counters, clock_skew, "clock_skew"),
    WB_STAT_ROW(struct align_counters, hosts_dropped, "hosts_dropped"),
    WB_STAT_ROW(struct align_counters, hosts_refused, "hosts_refused"),
    WB_STAT_ROW(struct align_counters, slots_too_long, "slots_too_long"),
    WB_STAT_ROW(struct align_counters, clock_rewinds, "clock_rewinds"),
    WB_STAT_ROW(struct align_counters, totals_saturated, "totals_saturated"),
    WB_STAT_ROW(struct align_counters, gpu_weights_dropped, "gpu_weights_dropped"),
    WB_STAT_ROW(struct align_counters, usage.procs_new, "procs_new"),
    WB_STAT_ROW(struct align_counters, usage.procs_baselined, "procs_baselined"),
    WB_STAT_ROW(struct align_counters, usage.procs_backwards, "procs_backwards"),
    WB_STAT_ROW(struct align_counters, usage.procs_dropped, "procs_dropped"),
    WB_STAT_ROW(struct align_counters, usage.cpu_resets, "cpu_resets"),
    WB_STAT_ROW(struct align_counters, budget_short, "budget_short"),
};

static void mirror_counters(struct alignd *ad)
{
	wb_stats_mirror(wb_daemon_stats(ad->d), align_counters(ad->align), engine_counters,
			sizeof(engine_counters) / sizeof(engine_counters[0]));
	size_t npower, nusage = align_nhosts(ad->align, &npower);
	wb_daemon_set_mode(ad->d, npower ? "measured" : nusage ? "usage-only" : "waiting");
}

/*
 * A checkpoint of the state file (lib/daemon.h's: after messages came in), so
 * that a crash (no clean stop) resumes from it. A crash of the process loses
 * nothing written (rename).
 */
static int checkpoint(void *arg, bool sync)
{
	struct alignd *ad = arg;
	const struct alignd_conf *conf = wb_daemon_conf(ad->d);
	if (!conf->state_file[0])
		return 0;
	if (align_save(ad->align, conf->state_file, wb_now_ns(), sync) < 0) {
		wb_daemon_stats(ad->d)->checkpoint_failures++;
		return -1;
	}
	return 0;
}

static int on_tick(zloop_t *loop, int timer_id, void *arg)
{
	struct alignd *ad = arg;
	ad->tick_id = -1; /* it fired once and is gone */
	align_tick(ad->align, wb_now_ns());
	mirror_counters(ad);
	arm(ad);
	return 0;
}

/* bridge_max_w -1: the one bound of a zone, [global] max_zone_w (WB_ZONE_MAX_W when off). */
static void bridge_default(struct align_conf *ac, const struct wb_global *g)
{
	if (ac->bridge_max_w < 0)
		ac->bridge_max_w = g->max_zone_w > 0 ? g->max_zone_w : WB_ZONE_MAX_W;
}

static int on_reload(struct wb_daemon *d, void *new_conf, void *arg)
{
	struct alignd *ad = arg;
	struct alignd_conf *old = wb_daemon_conf(d), *c = new_conf;
	char err[WB_CONF_ERR_MAX];
	struct align_conf ac = {0};
	if (conf_to_align(c, &ac, err, sizeof(err)) < 0) {
		log_errx("reload: %s", err);
		return -1;
	}
	ac.max_slot_ns = wb_daemon_global(d)->max_slot_ns;
	bridge_default(&ac, wb_daemon_global(d));
	int rc = align_reconf(ad->align, &ac);
	align_conf_free(&ac);
	if (rc < 0)
		return -1;
	if (strcmp(old->pub, c->pub) != 0 || old->sub.n != c->sub.n || old->tick_ns != c->tick_ns)
		log_warnx("reload: pub, sub and tick keep their old values until a restart");
	for (size_t i = 0; i < old->sub.n && i < c->sub.n; i++)
		if (strcmp(old->sub.v[i], c->sub.v[i]) != 0)
			log_warnx("reload: sub keeps its old value until a restart");
	return 0;
}

int main(int argc, char **argv)
{
	struct alignd ad = {0};
	ad.d = wb_daemon_new(&alignd_stage, argc, argv);
	struct alignd_conf *conf = wb_daemon_conf(ad.d);
	char err[WB_CONF_ERR_MAX];
	struct align_conf ac = {0};
	if (conf_to_align(conf, &ac, err, sizeof(err)) < 0) {
		log_errx("%s", err);
		wb_daemon_destroy(&ad.d);
		return WB_EXIT_USAGE;
	}
	ac.max_slot_ns = wb_daemon_global(ad.d)->max_slot_ns;
	bridge_default(&ac, wb_daemon_global(ad.d));
	ad.align = align_new(&ac, emit, &ad);
	align_conf_free(&ac);
	if (!ad.align) {
		log_errx("out of memory");
		wb_daemon_destroy(&ad.d);
		return WB_EXIT_FAILURE;
	}

	/*
	 * Without checkpoints the file is used once: after a crash that follows,
	 * a second load would publish the same span again. With checkpoints it
	 * is rewritten within two state_every, and slots published twice are dropped
	 * by consumers (by time and by total_uj).
	 */
	if (conf->state_file[0] &&
	    align_load(ad.align, conf->state_file, wb_now_ns(), conf->host_timeout_ns) == 0 &&
	    !conf->state_every_ns && unlink(conf->state_file) < 0)
		log_warn("state %s: cannot remove it after use", conf->state_file);
	/* dirty: the first checkpoint writes the file, so it shows from the start that saving
	 * works */
	wb_checkpoint_init(&ad.cp, ad.d, conf->state_file[0] ? conf->state_every_ns : 0, true,
			   checkpoint, &ad);

	static const char *const prefixes[] = {"power/", "usage/", NULL};
	if (wb_daemon_subscribe(ad.d, &conf->sub, prefixes, on_msg, &ad) < 0) {
		log_errx("cannot subscribe to the sub endpoints");
		align_destroy(&ad.align);
		wb_daemon_destroy(&ad.d);
		return WB_EXIT_FAILURE;
	}
	ad.tick_id = -1;
	arm(&ad);
	wb_daemon_on_reload(ad.d, on_reload, &ad);
	mirror_counters(&ad);

	int rc = wb_daemon_run(ad.d);

	/* Slots still waiting for power go out extrapolated rather than not at all. */
	align_flush(ad.align, wb_now_ns());
	conf = wb_daemon_conf(ad.d); /* a reload may have replaced it */
	if (conf->state_file[0]) {
		if (align_save(ad.align, conf->state_file, wb_now_ns(), true) == 0)
			log_info("state saved to %s", conf->state_file);
		else
			wb_daemon_stats(ad.d)->checkpoint_failures++;
	}
	mirror_counters(&ad);
	align_destroy(&ad.align);
	wb_daemon_destroy(&ad.d);
	return rc;
}
