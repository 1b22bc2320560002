/*
 * wattbus-usaged: who used the CPU. Every interval it publishes a usage
 * message with the node's CPU totals and each process's cumulative CPU time
 * (and hardware counters), from eBPF or, where that cannot run, from /proc.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "codec.h"
#include "daemon.h"
#include "log.h"
#include "usaged.h"

struct usaged_conf {
	char *pub;
	uint64_t interval_ns;
	char *mode;
	int64_t full_every;
	int64_t retire_after;
	int64_t max_procs;
	bool counters;
	char *proc_root;
};

#define OFF(f) offsetof(struct usaged_conf, f)
/* WB_CONF_RESTART: read at start only; a reload says which of them changed. */
static const struct wb_conf_key usaged_keys[] = {
    {"pub", WB_CONF_STR | WB_CONF_RESTART, OFF(pub), "ipc://%r/usaged.sock", 0, 0, NULL,
     "endpoint the usage and stat messages are published on"},
    {"interval", WB_CONF_DURATION, OFF(interval_ns), "3s", 100e6, 3600e9, NULL,
     "publishing interval, on the wall-clock grid (100ms to 1h)"},
    {"mode", WB_CONF_ENUM | WB_CONF_RESTART, OFF(mode), "auto", 0, 0, "auto|bpf|procfs",
     "where CPU time comes from: bpf, procfs (/proc/<pid>/stat), or auto (bpf, else procfs)"},
    {"full_every", WB_CONF_INT, OFF(full_every), "20", 1, 1e6, NULL,
     "every Nth message lists every process that used CPU since the start"},
    {"retire_after", WB_CONF_INT, OFF(retire_after), "5", 1, 1e6, NULL,
     "a process stays in the messages for N messages after it last used CPU"},
    /* 250,000 at most: a full message (with exits) stays under the schema's 262,144. */
    {"max_procs", WB_CONF_INT | WB_CONF_RESTART, OFF(max_procs), "100000", 64, 250000, NULL,
     "processes tracked at most (the BPF map's size)"},
    {"counters", WB_CONF_BOOL | WB_CONF_RESTART, OFF(counters), "true", 0, 0, NULL,
     "count cycles, instructions and cache misses where perf_event_open allows (bpf mode)"},
    {"proc_root", WB_CONF_STR | WB_CONF_RESTART, OFF(proc_root), "/proc", 0, 0, NULL,
     "where procfs is mounted"},
};

static int usaged_check(const void *conf, char *err, size_t errlen)
{
	const struct usaged_conf *c = conf;
	if (c->retire_after > c->full_every * 1000) {
		snprintf(err, errlen,
			 "retire_after %lld is beyond 1000 full snapshots (full_every %lld)",
			 (long long)c->retire_after, (long long)c->full_every);
		return -1;
	}
	return 0;
}

static const struct wb_stage usaged_stage =
    WB_STAGE("usaged", "publish per-process CPU time and counters (eBPF, or /proc)", usaged_keys,
	     struct usaged_conf, usaged_check);

struct usaged {
	struct wb_daemon *d;
	struct procfs *pf;
	struct ptab *tab;
	struct cgroups *cg;
	struct exes *ex;
	struct bpfsrc *bpf; /* NULL in procfs mode */
	const char *src;
	struct wb_grid *grid;
	uint64_t msgno;
	uint64_t *c_procs, *c_exited, *c_scan_ns, *c_incomplete, *c_procstat_fail, *c_send_fail,
	    *c_table_full;
	uint64_t *c_cgroups, *c_map_full, *c_map_entries, *c_exits_seen, *c_perf_fail, *c_counters,
	    *c_unpaired, *c_no_storage, *c_exits_forced;
	uint64_t *c_exes, *c_exe_errors, *c_exes_full;
	struct wb_ratelimit rl;
	struct wb_ratelimit rl_full; /* once a minute: a full map stays full */
};

static uint64_t boottime_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (uint64_t)ts.tv_sec * WB_NS_PER_SEC + (uint64_t)ts.tv_nsec;
}

static void put_sample(void *arg, const struct usaged_sample *s)
{
	ptab_put(arg, s);
}

static void retire_count(void *arg, uint32_t pid, uint64_t start_ns)
{
	struct usaged *u = arg;
	(*u->c_exited)++;
	if (u->bpf)
		bpfsrc_retire(u->bpf, pid, start_ns);
}

static void update_stats(struct usaged *u)
{
	*u->c_procs = ptab_count(u->tab);
	*u->c_table_full = ptab_dropped(u->tab);
	*u->c_cgroups = cgroups_count(u->cg);
	*u->c_exes = exes_count(u->ex);
	*u->c_exe_errors = exes_read_errors(u->ex);
	*u->c_exes_full = exes_full_drops(u->ex);
	if (!u->bpf)
		return;
	struct bpfsrc_stats bs;
	bpfsrc_stats(u->bpf, &bs);
	if (bs.map_full > *u->c_map_full)
		log_rl(
		    &u->rl_full, WB_LOG_WARN,
		    "bpf procs map full (%llu entries): %llu switches of untracked processes so far; raise max_procs",
		    (unsigned long long)bs.entries, (unsigned long long)bs.map_full);
	*u->c_map_full = bs.map_full;
	*u->c_map_entries = bs.entries;
	*u->c_exits_seen = bs.exits;
	*u->c_perf_fail = bs.perf_fail;
	*u->c_unpaired = bs.unpaired;
	*u->c_no_storage = bs.no_storage;
	*u->c_exits_forced = bs.exits_forced;
}

static void on_tick(struct wb_daemon *d, const struct wb_grid_tick *tick, void *arg)
{
	struct usaged *u = arg;
	const struct usaged_conf *conf = wb_daemon_conf(d);
	uint64_t full_every = (uint64_t)conf->full_every,
		 retire_after = (uint64_t)conf->retire_after;
	uint64_t mono0 = wb_mono_ns();
	struct wb_msg m = {.kind = WB_USAGE};
	struct wb_usage *msg = &m.usage;
	bool complete, full = u->msgno % full_every == 0;

	msg->t = wb_now_ns();
	msg->boot_ns = msg->t - boottime_ns();
	msg->interval_ns = conf->interval_ns;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	msg->ncpu = ncpu > 0 ? (uint64_t)ncpu : 1;
	if (procfs_read_cpu(u->pf, &msg->cpu) < 0) {
		/* Without node totals the message would mislead; the next one carries everything.
		 */
		(*u->c_procstat_fail)++;
		return;
	}

	ptab_begin(u->tab, u->msgno);
	cgroups_begin(u->cg, u->msgno);
	exes_begin(u->ex, u->msgno);
	if (u->bpf)
		complete = bpfsrc_scan(u->bpf, u->tab, u->pf) == 0;
	else
		complete = procfs_scan(u->pf, put_sample, u->tab) >= 0;
	if (!complete)
		(*u->c_incomplete)++;
	ptab_end(u->tab, complete, u->bpf ? procfs_alive : NULL, u->pf);
	/* /proc cannot see a process change cgroup, so look again at those that ran. */
	ptab_resolve(u->tab, !u->bpf || full, cgroups_resolve, u->cg);
	ptab_resolve_exes(u->tab, exes_resolve, u->ex);

	if (ptab_build(u->tab, full, retire_after, msg) < 0 ||
	    cgroups_fill(u->cg, retire_after, msg) < 0 || exes_fill(u->ex, retire_after, msg) < 0) {
		log_rl(&u->rl, WB_LOG_ERR, "usage message: out of memory");
		(*u->c_send_fail)++;
		wb_msg_clear(&m);
		return;
	}
	unsigned counters = u->bpf ? bpfsrc_counters(u->bpf) : 0;
	if (counters) {
		msg->counters = wb_array_new(USAGED_NCOUNTERS, sizeof(*msg->counters));
		for (int c = 0; msg->counters && c < USAGED_NCOUNTERS; c++)
			if (counters & (1u << c))
				snprintf(msg->counters[msg->n_counters++], sizeof(msg->counters[0]),
					 "%s", usaged_counter_names[c]);
	}
	snprintf(msg->env.src, sizeof(msg->env.src), "%s", u->src);
	if (wb_daemon_send(d, &m) == 0) {
		/* Published: now exited processes may go, and their BPF entries with them. */
		ptab_retire(u->tab, retire_count, u);
		u->msgno++;
	} else {
		(*u->c_send_fail)++;
	}
	wb_msg_clear(&m);
	if (full) {
		cgroups_evict(u->cg, full_every + retire_after);
		exes_evict(u->ex, full_every + retire_after);
	}
	update_stats(u);
	*u->c_scan_ns = wb_mono_ns() - mono0;
	log_debug("usage %llu: %zu processes tracked, scan %.1f ms, late %.1f ms",
		  (unsigned long long)u->msgno, ptab_count(u->tab), (double)*u->c_scan_ns / 1e6,
		  (double)tick->late_ns / 1e6);
}

static int on_reload(struct wb_daemon *d, void *new_conf, void *arg)
{
	struct usaged *u = arg;
	struct usaged_conf *nc = new_conf;
	const struct usaged_conf *oc = wb_daemon_conf(d);
	const struct wb_conf_section sec = {"usaged", usaged_keys,
					    sizeof(usaged_keys) / sizeof(usaged_keys[0]), NULL};
	char later[256];
	if (wb_conf_restart_changes(&sec, oc, nc, later, sizeof(later)))
		log_warnx(
		    "reload: %s keep their old values until a restart; interval, full_every and retire_after apply now",
		    later);
	if (nc->interval_ns != oc->interval_ns) {
		/* Values are cumulative, so the message that spans the change loses nothing. */
		if (wb_grid_rearm(u->grid, nc->interval_ns) < 0) {
			log_warnx("reload: cannot re-arm the timer; keeping the running config");
			return -1;
		}
		log_info("reload: publishing every %.3g s from the next multiple of it on",
			 (double)nc->interval_ns / 1e9);
	}
	return 0;
}

static int open_source(struct usaged *u, const struct usaged_conf *conf)
{
	const char *why = NULL;
	char buf[512];

	if (strcmp(conf->mode, "procfs") != 0) {
		why = bpfsrc_unsupported();
		if (!why) {
			struct bpfsrc_opts opts = {.max_procs = (uint32_t)conf->max_procs,
						   .counters = conf->counters};
			u->bpf = bpfsrc_new(&opts, buf, sizeof(buf));
			if (!u->bpf)
				why = buf;
		}
		if (why && strcmp(conf->mode, "bpf") == 0) {
			log_errx("mode bpf: %s", why);
			return -1;
		}
	}
	if (u->bpf) {
		u->src = "usaged/bpf";
		wb_daemon_set_mode(u->d, "bpf");
		*u->c_counters = (uint64_t)__builtin_popcount(bpfsrc_counters(u->bpf));
	} else {
		u->src = "usaged/procfs";
		wb_daemon_set_mode(u->d, "procfs");
		if (why)
			log_info("mode auto: using procfs, eBPF unavailable: %s", why);
	}
	/* /proc counts from each process's start: its first values become its zero. */
	u->tab = ptab_new((size_t)conf->max_procs + (u->bpf ? 4096 : 0), !u->bpf);
	return u->tab ? 0 : -1;
}

int main(int argc, char **argv)
{
	struct usaged u = {.rl = WB_RATELIMIT_INIT,
			   .rl_full = {.interval_ns = 60 * WB_NS_PER_SEC, .burst = 1}};
	int rc = WB_EXIT_FAILURE;

	u.d = wb_daemon_new(&usaged_stage, argc, argv);
	const struct usaged_conf *conf = wb_daemon_conf(u.d);
	struct wb_stats *st = wb_daemon_stats(u.d);
	static const struct wb_stat_row rows[] = {
	    WB_STAT_ROW(struct usaged, c_procs, "procs_tracked"),
	    WB_STAT_ROW(struct usaged, c_exited, "procs_exited"),
	    WB_STAT_ROW(struct usaged, c_scan_ns, "scan_ns"),
	    WB_STAT_ROW(struct usaged, c_incomplete, "scans_incomplete"),
	    WB_STAT_ROW(struct usaged, c_procstat_fail, "proc_stat_errors"),
	    WB_STAT_ROW(struct usaged, c_send_fail, "send_errors"),
	    WB_STAT_ROW(struct usaged, c_table_full, "table_full"),
	    WB_STAT_ROW(struct usaged, c_cgroups, "cgroups"),
	    WB_STAT_ROW(struct usaged, c_map_full, "bpf_map_full"),
	    WB_STAT_ROW(struct usaged, c_map_entries, "bpf_map_entries"),
	    WB_STAT_ROW(struct usaged, c_exits_seen, "bpf_exits"),
	    WB_STAT_ROW(struct usaged, c_perf_fail, "bpf_perf_errors"),
	    WB_STAT_ROW(struct usaged, c_counters, "hw_counters"),
	    WB_STAT_ROW(struct usaged, c_unpaired, "bpf_unpaired_switches"),
	    WB_STAT_ROW(struct usaged, c_no_storage, "bpf_no_task_storage"),
	    WB_STAT_ROW(struct usaged, c_exits_forced, "bpf_exits_forced"),
	    WB_STAT_ROW(struct usaged, c_exes, "exes"),
	    WB_STAT_ROW(struct usaged, c_exe_errors, "exe_read_errors"),
	    WB_STAT_ROW(struct usaged, c_exes_full, "exes_full"),
	};
	wb_stats_bind(st, &u, rows, sizeof(rows) / sizeof(rows[0]));

	u.pf = procfs_new(conf->proc_root);
	if (!u.pf)
		goto out;
	u.cg = cgroups_new(u.pf);
	if (!u.cg)
		goto out;
	u.ex = exes_new(u.pf);
	if (!u.ex)
		goto out;
	if (open_source(&u, conf) < 0)
		goto out;
	log_info("publishing usage every %.3g s as %s; %s", (double)conf->interval_ns / 1e9, u.src,
		 cgroups_describe(u.cg));
	u.grid = wb_daemon_grid_timer(u.d, conf->interval_ns, on_tick, &u);
	if (!u.grid) {
		log_errx("cannot start the interval timer");
		goto out;
	}
	wb_grid_carry_stats(u.grid); /* a stat message costs no wake-up of its own */
	wb_daemon_on_reload(u.d, on_reload, &u);
	rc = wb_daemon_run(u.d);
out:
	bpfsrc_destroy(&u.bpf);
	ptab_destroy(&u.tab);
	cgroups_destroy(&u.cg);
	exes_destroy(&u.ex);
	procfs_destroy(&u.pf);
	wb_daemon_destroy(&u.d);
	return rc;
}
