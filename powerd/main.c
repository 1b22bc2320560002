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

struct powerd_conf {
	char *pub;
	uint64_t interval_ns;
	struct wb_strlist source;
	char *sysfs_root;
	char *msr_root;
	int64_t msr_dram_unit_nj;
	double max_power_w;
	char *exec;
	char *exec_mode;
	uint64_t exec_timeout_ns;
	char *redfish_url;
	char *redfish_credentials;
	char *redfish_ca_file;
	bool redfish_insecure;
	uint64_t redfish_interval_ns;
	uint64_t redfish_timeout_ns;
	char *ipmi_host;
	char *ipmi_credentials;
	char *ipmi_protocol;
	uint64_t ipmi_interval_ns;
	uint64_t ipmi_timeout_ns;
	char *bus_sub;
	char *bus_vm;
	char *bus_curve_cert;
	char *bus_curve_peer;
	uint64_t bus_wait_ns;
	char *nvml_library;
	char *proc_root;
};

#define OFF(f) offsetof(struct powerd_conf, f)
/* WB_CONF_RESTART: the keys that define the zones or their meters (see on_reload). */
static const struct wb_conf_key powerd_keys[] = {
    {"pub", WB_CONF_STR, OFF(pub), "ipc://%r/powerd.sock", 0, 0, NULL,
     "endpoint the power and stat messages are published on"},
    {"interval", WB_CONF_DURATION, OFF(interval_ns), "1s", 10e6, 3600e9, NULL,
     "sampling interval (10ms..1h); samples fall on wall-clock multiples of it"},
    {"source", WB_CONF_LIST | WB_CONF_RESTART, OFF(source), "auto", 0, 0, NULL,
     "meters to read: auto (the first usable of rapl, msr, hwmon) or a list of rapl, msr, hwmon, exec, redfish, ipmi, bus, nvml, fake (simulated from the CPU load, for development)"},
    {"sysfs_root", WB_CONF_STR | WB_CONF_RESTART, OFF(sysfs_root), "/sys", 0, 0, NULL,
     "where sysfs is mounted (class/powercap, class/hwmon, devices/system/cpu)"},
    {"msr_root", WB_CONF_STR | WB_CONF_RESTART, OFF(msr_root), "/dev/cpu", 0, 0, NULL,
     "directory of the msr devices, MSR_ROOT/CPU/msr (register number = file offset)"},
    {"msr_dram_unit_nj", WB_CONF_INT | WB_CONF_RESTART, OFF(msr_dram_unit_nj), "0", 0, 1e9, NULL,
     "DRAM energy unit in nJ for the msr source; 0: as the kernel (15300 on Xeon servers, else the power-unit register)"},
    {"max_power_w", WB_CONF_DOUBLE, OFF(max_power_w), "0", 0, 1e6, NULL,
     "highest plausible power of one zone; faster counter changes and higher readings are rejected (0: [global] max_zone_w, the bound every later stage applies; 5000 W when that is 0)"},
    {"exec", WB_CONF_STR | WB_CONF_RESTART, OFF(exec), "", 0, 0, NULL,
     "command (run by /bin/sh -c) printing readings for the exec source: ZONE VALUE uj|w per line"},
    {"exec_mode", WB_CONF_ENUM | WB_CONF_RESTART, OFF(exec_mode), "sample", 0, 0, "sample|stream",
     "sample: run the command at every sample; stream: keep it running and take lines as they come"},
    {"exec_timeout", WB_CONF_DURATION, OFF(exec_timeout_ns), "1s", 1e6, 20e9, NULL,
     "sample mode: longest run (at most the interval; the first run at start has all of it); stream mode: wait for the first readings; at most 20 s: a run holds the loop, and the units' WatchdogSec is 30 s"},
    {"redfish_url", WB_CONF_STR | WB_CONF_RESTART, OFF(redfish_url), "", 0, 0, NULL,
     "the BMC for the redfish source: https://HOST[:PORT] (its Chassis collection is read)"},
    {"redfish_credentials", WB_CONF_STR | WB_CONF_RESTART, OFF(redfish_credentials), "", 0, 0, NULL,
     "file holding the BMC's USER:PASSWORD; refused unless owned by powerd's user and mode 600 or stricter"},
    {"redfish_ca_file", WB_CONF_STR | WB_CONF_RESTART, OFF(redfish_ca_file), "", 0, 0, NULL,
     "PEM file of the CA(s) that signed the BMC's certificate; empty: the system's"},
    {"redfish_insecure", WB_CONF_BOOL | WB_CONF_RESTART, OFF(redfish_insecure), "false", 0, 0, NULL,
     "skip TLS verification of the BMC (logs a warning: its password and readings are then open to anyone in the path)"},
    {"redfish_interval", WB_CONF_DURATION | WB_CONF_RESTART, OFF(redfish_interval_ns), "10s", 1e9,
     3600e9, NULL,
     "how often the BMC is asked (1s..1h): no faster than it updates its readings (5-60 s on most BMCs)"},
    {"redfish_timeout", WB_CONF_DURATION | WB_CONF_RESTART, OFF(redfish_timeout_ns), "5s", 100e6,
     60e9, NULL, "longest wait for one answer of the BMC"},
    {"ipmi_host", WB_CONF_STR | WB_CONF_RESTART, OFF(ipmi_host), "", 0, 0, NULL,
     "the BMC for the ipmi source over the LAN (host name or address); empty: in-band (/dev/ipmi0)"},
    {"ipmi_credentials", WB_CONF_STR | WB_CONF_RESTART, OFF(ipmi_credentials), "", 0, 0, NULL,
     "file holding the BMC's USER:PASSWORD for ipmi_host; refused unless owned by powerd's user and mode 600 or stricter"},
    {"ipmi_protocol", WB_CONF_ENUM | WB_CONF_RESTART, OFF(ipmi_protocol), "lanplus", 0, 0,
     "lanplus|lan", "over the LAN: lanplus (IPMI 2.0, RMCP+) or lan (IPMI 1.5, MD5)"},
    {"ipmi_interval", WB_CONF_DURATION | WB_CONF_RESTART, OFF(ipmi_interval_ns), "5s", 1e9, 3600e9,
     NULL, "how often the DCMI power reading is asked for (1s..1h)"},
    {"ipmi_timeout", WB_CONF_DURATION | WB_CONF_RESTART, OFF(ipmi_timeout_ns), "5s", 100e6, 60e9,
     NULL, "longest wait for the BMC's session and answer over the LAN"},
    {"bus_sub", WB_CONF_STR | WB_CONF_RESTART, OFF(bus_sub), "", 0, 0, NULL,
     "bus source (a VM guest): the endpoint of the host's `wattbus vmpub` for this VM"},
    {"bus_vm", WB_CONF_STR | WB_CONF_RESTART, OFF(bus_vm), "", 0, 0, NULL,
     "bus source: this VM's name on its host (the libvirt domain name)"},
    {"bus_curve_cert", WB_CONF_STR | WB_CONF_RESTART, OFF(bus_curve_cert), "", 0, 0, NULL,
     "bus source: this VM's CURVE certificate (secret beside it), for a tcp:// bus_sub"},
    {"bus_curve_peer", WB_CONF_STR | WB_CONF_RESTART, OFF(bus_curve_peer), "", 0, 0, NULL,
     "bus source: the host's public CURVE certificate"},
    {"bus_wait", WB_CONF_DURATION, OFF(bus_wait_ns), "10s", 0, 3600e9, NULL,
     "bus source: warn when the host's first message (its zones) has not come this long after the start; powerd never waits for it"},
    {"nvml_library", WB_CONF_STR | WB_CONF_RESTART, OFF(nvml_library), "libnvidia-ml.so.1", 0, 0,
     NULL, "the NVML library the nvml source loads (a name the loader searches, or a path)"},
    {"proc_root", WB_CONF_STR | WB_CONF_RESTART, OFF(proc_root), "/proc", 0, 0, NULL,
     "where procfs is mounted: the fake source models power from PROC_ROOT/stat"},
};
#undef OFF

static void opts_from_conf(struct pd_opts *o, const struct powerd_conf *conf,
			   const struct wb_global *g)
{
	*o = (struct pd_opts){
	    .sysfs_root = conf->sysfs_root,
	    .msr_root = conf->msr_root,
	    .cpuinfo_path = "/proc/cpuinfo",
	    .msr_dram_unit_nj = (uint64_t)conf->msr_dram_unit_nj,
	    /* One bound for every stage: a zone powerd publishes is one alignd accepts. */
	    .max_power_w = conf->max_power_w > 0    ? conf->max_power_w
			   : g && g->max_zone_w > 0 ? g->max_zone_w
						    : WB_ZONE_MAX_W,
	    .interval_ns = conf->interval_ns,
	    .exec_cmd = conf->exec,
	    .exec_stream = !strcmp(conf->exec_mode, "stream"),
	    .exec_timeout_ns = conf->exec_timeout_ns,
	    .exec_retry = true,
	    .redfish_url = conf->redfish_url,
	    .redfish_credentials = conf->redfish_credentials,
	    .redfish_ca_file = conf->redfish_ca_file,
	    .redfish_insecure = conf->redfish_insecure,
	    .redfish_interval_ns = conf->redfish_interval_ns,
	    .redfish_timeout_ns = conf->redfish_timeout_ns,
	    .ipmi_host = conf->ipmi_host,
	    .ipmi_credentials = conf->ipmi_credentials,
	    .ipmi_lanplus = !strcmp(conf->ipmi_protocol, "lanplus"),
	    .ipmi_interval_ns = conf->ipmi_interval_ns,
	    .ipmi_timeout_ns = conf->ipmi_timeout_ns,
	    .bus_sub = conf->bus_sub,
	    .bus_vm = conf->bus_vm,
	    .bus_curve_cert = conf->bus_curve_cert,
	    .bus_curve_peer = conf->bus_curve_peer,
	    .bus_wait_ns = conf->bus_wait_ns,
	    .bus_reconnect_max_ms = g ? (int)(g->reconnect_max_ns / 1000000) : 0,
	    .nvml_library = conf->nvml_library,
	    .proc_root = conf->proc_root,
	};
}

static int powerd_check(const void *confp, char *err, size_t errlen)
{
	const struct powerd_conf *conf = confp;
	unsigned mask;
	if (detect_parse_sources(conf->source.v, conf->source.n, &mask, err, errlen) < 0)
		return -1;
	struct pd_opts opts;
	opts_from_conf(&opts, conf, NULL);
	return detect_check(mask, &opts, err, errlen);
}

static const struct wb_stage powerd_stage = WB_STAGE(
    "powerd",
    "Publish cumulative energy per power zone (RAPL, MSR, hwmon, a command) on the wattbus.",
    powerd_keys, struct powerd_conf, powerd_check);

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
};

/* The set's counters as stat counters; a source's own ones while it is in use. */
static void stat_update(struct wb_daemon *d, void *arg)
{
	struct powerd *pd = arg;
#define R(f) WB_STAT_ROW(struct pd_counts, f, #f)
	static const struct wb_stat_row rows[] = {
	    R(samples),		 R(samples_missed),   R(zone_samples_skipped),
	    R(read_errors),	 R(parse_errors),     R(backwards),
	    R(implausible),	 R(rebased),	      R(wraps),
	    R(exec_failures),	 R(exec_burst_lines), R(lateness_max_ns),
	    R(lateness_mean_ns), R(lateness_sum_ns),  R(clock_steps),
	};
#undef R
	struct pd_counts *c = &pd->set->counts;
	struct wb_stats *stats = wb_daemon_stats(pd->d);
	c->lateness_mean_ns = c->samples ? c->lateness_sum_ns / c->samples : 0;
	wb_stats_mirror(stats, c, rows, sizeof(rows) / sizeof(rows[0]));
	for (unsigned s = 0; s < pd_nsources; s++)
		if ((pd->set->used & (1u << s)) && pd_sources[s]->stats)
			wb_stats_mirror(stats, c, pd_sources[s]->stats, pd_sources[s]->nstats);
}

static int on_source_fd(struct wb_daemon *d, int fd, void *arg)
{
	struct pd_watch *w = arg;
	/* A source whose input ended keeps an idle descriptor in its place: keep watching. */
	w->src->on_readable(w->pd->set);
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
	for (unsigned s = 0; s < pd_nsources; s++)
		if ((pd->set->used & (1u << s)) && pd_sources[s]->tend)
			pd_sources[s]->tend(pd->set);

	struct wb_msg msg = {.kind = WB_POWER};
	size_t n = pd_set_sample(pd->set, tick->t_ns, mono, &msg.power);
	if (tick->t_ns <= pd->last_t_ns) {
		/* The clock went back: the counters were read (no wrap goes unseen) but t must not
		 * repeat. */
		c->clock_steps++;
		log_warnx(
		    "sample time %llu is not after the last one published (%llu): clock set back; not published",
		    (unsigned long long)tick->t_ns, (unsigned long long)pd->last_t_ns);
	} else if (n > 0) {
		if (wb_daemon_send(d, &msg) == 0)
			pd->last_t_ns = tick->t_ns;
	}
	wb_msg_clear(&msg);
}

static size_t open_sources(struct powerd *pd, const struct powerd_conf *conf)
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
	struct powerd_conf *old = wb_daemon_conf(d), *conf = new_confp;
	const struct wb_conf_section sec = {"powerd", powerd_keys,
					    sizeof(powerd_keys) / sizeof(powerd_keys[0]), NULL};
	char changed[512];
	bool sources_changed =
	    wb_conf_restart_changes(&sec, old, conf, changed, sizeof(changed)) > 0;
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
	pd.d = wb_daemon_new(&powerd_stage, argc, argv);
	struct powerd_conf *conf = wb_daemon_conf(pd.d);
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
