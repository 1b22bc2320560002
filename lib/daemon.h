/*
 * What every wattbus daemon shares: config and flags, logging, signals through a
 * signalfd (SIGTERM/SIGINT stop, SIGHUP reloads), one zloop, the PUB socket, the
 * periodic stat message, sd_notify readiness and watchdog.
 *
 * A stage's main.c:
 *	d = wb_daemon_new(&stage, argc, argv);   // exits 2 on a bad config, 0 after -n
 *	conf = wb_daemon_conf(d);
 *	... open sources, wb_daemon_subscribe(), wb_daemon_timer() ...
 *	rc = wb_daemon_run(d);                  // until SIGTERM/SIGINT
 *	wb_daemon_destroy(&d);
 *	return rc;
 */
#ifndef WB_DAEMON_H
#define WB_DAEMON_H

#include <czmq.h>

#include "bus.h"
#include "config.h"

#define WB_EXIT_OK 0
#define WB_EXIT_FAILURE 1
#define WB_EXIT_USAGE 2

/* Keys of [global], shared by all stages. */
struct wb_global {
	char *host;
	char *runtime_dir;
	char *log_level;
	uint64_t stat_interval_ns;
	uint64_t reconnect_max_ns; /* SUB: backoff of tries to connect to an absent publisher */
	int64_t hwm;
	char *curve_cert;   /* our certificate (secret); empty: no CURVE */
	char *curve_peer;   /* publisher certificate to trust when subscribing */
	char *curve_allow;  /* directory of client certificates our PUB admits */
	char *socket_group; /* group that owns ipc sockets (mode 0660) */
	uint64_t max_ahead_ns, max_behind_ns,
	    max_slot_ns;		   /* receive-side plausibility (lib/plaus.h) */
	double max_zone_w, max_host_w;	   /* the physical bound on received energy */
	struct wb_strlist extra_power_src; /* srcs of deliberate second meters */
};

struct wb_stage {
	const char *name;    /* "powerd" */
	const char *summary; /* one line for --help */
	const struct wb_conf_key *keys;
	size_t nkeys;
	size_t conf_size; /* sizeof the stage's conf struct; its keys must include "pub"
			     (WB_CONF_STR) */
	/* Cross-key checks after loading; fill err and return -1 to reject. Optional. */
	int (*check)(const void *conf, char *err, size_t errlen);
	/* How --help names the program and its manual; NULL: wattbus-NAME and wattbus-NAME(8)
	 * (a CLI verb on the framework, `wattbus vmpub`, names its own). */
	const char *program, *man;
};

/* A stage's struct wb_stage from its key table (an array) and the type of its conf struct. */
#define WB_STAGE(NAME, SUMMARY, KEYS, CONF_TYPE, CHECK)                                            \
	{                                                                                          \
		.name = (NAME), .summary = (SUMMARY), .keys = (KEYS),                              \
		.nkeys = sizeof(KEYS) / sizeof((KEYS)[0]), .conf_size = sizeof(CONF_TYPE),         \
		.check = (CHECK),                                                                  \
	}

struct wb_daemon;

struct wb_daemon *wb_daemon_new(const struct wb_stage *stage, int argc, char **argv);
void wb_daemon_destroy(struct wb_daemon **self_p);

void *wb_daemon_conf(struct wb_daemon *d);
const struct wb_global *wb_daemon_global(struct wb_daemon *d);
const char *wb_daemon_config_path(struct wb_daemon *d);
struct wb_stats *wb_daemon_stats(struct wb_daemon *d);
zloop_t *wb_daemon_loop(struct wb_daemon *d);
/* Mode shown in stat messages and the startup line ("rapl", "bpf", "model"). */
void wb_daemon_set_mode(struct wb_daemon *d, const char *mode);

/* Stamp, encode and publish on the stage's PUB socket (bound at startup from conf "pub").
 * A message that cannot be encoded is counted in the stat counter encode_failed. */
int wb_daemon_send(struct wb_daemon *d, struct wb_msg *msg);
struct wb_pub *wb_daemon_pub(struct wb_daemon *d);

typedef void(wb_msg_fn)(struct wb_daemon *d, const struct wb_msg *msg, const struct wb_rx *rx,
			void *arg);
/*
 * Connect a SUB socket to every endpoint, subscribe to the prefixes (NULL-
 * terminated), and call fn for every valid message (rejections are counted and
 * logged by the daemon). Returns 0 or -1.
 */
int wb_daemon_subscribe(struct wb_daemon *d, const struct wb_strlist *endpoints,
			const char *const *prefixes, wb_msg_fn *fn, void *arg);

/* zloop timer (monotonic, not aligned); returns the timer id or -1. */
int wb_daemon_timer(struct wb_daemon *d, uint64_t interval_ns, zloop_timer_fn *fn, void *arg);
/* A zloop timer that fires once, after delay_ns (1 ms at least); returns the timer id or -1. */
int wb_daemon_timer_once(struct wb_daemon *d, uint64_t delay_ns, zloop_timer_fn *fn, void *arg);
/* Cancel a timer (one that already fired once: nothing happens; zloop does not reuse ids). */
void wb_daemon_timer_end(struct wb_daemon *d, int timer_id);

/*
 * Periodic work that rides on the messages a stage handles instead of a timer
 * of its own (a wake-up costs a stage more than most of its work):
 * wb_chore_poke() at a message runs fn once every_ns has passed since it last
 * ran; an earlier poke arms a one-shot timer late_ns after the run is due,
 * which the next run cancels, so that without messages fn still runs within
 * every_ns + late_ns. Only pending work runs: wb_chore_poke(c, true) marks a
 * change; a housekeeping chore (always) is pending again after each run. fn
 * returns 0, or -1 to be tried again every_ns later, messages or not; late
 * says that the timer runs it. every_ns 0: pokes do nothing.
 */
typedef int(wb_chore_fn)(void *arg, bool late);
struct wb_chore {
	struct wb_daemon *d;
	uint64_t every_ns, late_ns;
	uint64_t next_ns; /* wb_mono_ns: due from then */
	int late_id;	  /* the armed one-shot timer, or -1 */
	bool pending, always;
	wb_chore_fn *fn;
	void *arg;
};
/* Pending work (always, or pending) is due every_ns from now, from the timer then without
 * messages. Returns 0, or -1 when that timer could not be armed (the next poke tries again). */
int wb_chore_init(struct wb_chore *c, struct wb_daemon *d, uint64_t every_ns, uint64_t late_ns,
		  bool always, bool pending, wb_chore_fn *fn, void *arg);
/* At a message; changed: there is work for the next run. */
void wb_chore_poke(struct wb_chore *c, bool changed);
/* Cancel the timer; every_ns becomes 0 (pending work stays pending). */
void wb_chore_end(struct wb_chore *c);

/*
 * A stage's state-file checkpoint, a chore (late_ns = every_ns):
 * wb_checkpoint_changed() after each message that changes the state saves once
 * every_ns has passed since the last save, and the last change before a silence
 * is saved within two every_ns. save(arg, sync) writes the file, 0 or -1; sync
 * (fsync) is asked once a WB_JSON_SYNC_EVERY_NS, for the save before a silence
 * and at the stop; a failed one is tried again every_ns later. every_ns 0: at
 * the stop only.
 */
typedef int(wb_checkpoint_fn)(void *arg, bool sync);
struct wb_checkpoint {
	struct wb_chore chore;
	uint64_t next_sync_ns; /* wb_mono_ns: the next fsync */
	wb_checkpoint_fn *save;
	void *arg;
};
/* dirty: a first save is due anyway (it shows from the start that saving works). */
void wb_checkpoint_init(struct wb_checkpoint *c, struct wb_daemon *d, uint64_t every_ns, bool dirty,
			wb_checkpoint_fn *save, void *arg);
void wb_checkpoint_changed(struct wb_checkpoint *c);
/* At the stop: save (fsync'd) when anything changed; the timer goes. Returns save's result. */
int wb_checkpoint_stop(struct wb_checkpoint *c);

/*
 * A timer on the wall-clock grid: fn runs when CLOCK_REALTIME reaches each
 * multiple of interval_ns (t mod interval == 0), with that grid instant as
 * t_ns, so that hosts sample at the same instants. late_ns is how far after
 * t_ns it ran; missed counts the grid instants skipped since the last run (a
 * busy or suspended process): they are not replayed. A clock set re-arms it on
 * the new time's grid.
 */
struct wb_grid_tick {
	uint64_t t_ns;
	uint64_t late_ns;
	uint64_t missed;
};
/* The tick for a timer read at now_ns that reported expirations (>= 1) since the last read. */
void wb_grid_tick_at(uint64_t now_ns, uint64_t interval_ns, uint64_t expirations,
		     struct wb_grid_tick *tick);
struct wb_grid;
typedef void(wb_grid_fn)(struct wb_daemon *d, const struct wb_grid_tick *tick, void *arg);
/* NULL when no timer could be made (logged). The daemon owns it. */
struct wb_grid *wb_daemon_grid_timer(struct wb_daemon *d, uint64_t interval_ns, wb_grid_fn *fn,
				     void *arg);
/* A new interval, from the next multiple of it on (SIGHUP). 0, or -1 (logged; the old one runs). */
int wb_grid_rearm(struct wb_grid *g, uint64_t interval_ns);
/* The stat messages go out at this grid's ticks, after fn, at the tick nearest to stat_interval
 * after the last one, while it ticks at least as often as that (else, as in a stage without
 * such a grid, with the messages the stage receives, or from a timer when none comes): for a
 * stage that sends at every tick, one wake-up instead of two. Call before wb_daemon_run. */
void wb_grid_carry_stats(struct wb_grid *g);

/* Watch a file descriptor for input; fn returns 0, or -1 to stop watching it. */
typedef int(wb_fd_fn)(struct wb_daemon *d, int fd, void *arg);
int wb_daemon_watch_fd(struct wb_daemon *d, int fd, wb_fd_fn *fn, void *arg);

/*
 * Called on SIGHUP with a freshly loaded conf of the same type, already
 * validated. Apply what can change at run time and return 0 (the new conf is
 * kept), or -1 to keep the old one.
 */
typedef int(wb_reload_fn)(struct wb_daemon *d, void *new_conf, void *arg);
void wb_daemon_on_reload(struct wb_daemon *d, wb_reload_fn *fn, void *arg);

/* Called just before each stat message is made (and the last one at stop): the place to
 * bring counters kept elsewhere into the stats (wb_stats_mirror), not the hot path. */
typedef void(wb_stat_fn)(struct wb_daemon *d, void *arg);
void wb_daemon_on_stat(struct wb_daemon *d, wb_stat_fn *fn, void *arg);

/* Run until SIGTERM/SIGINT. Returns the exit code. */
int wb_daemon_run(struct wb_daemon *d);
/* Make wb_daemon_run return code at the next turn (fatal runtime errors). */
void wb_daemon_stop(struct wb_daemon *d, int code);

/* Where the ipc sockets go when [global] runtime_dir is unset: $WATTBUS_RUNTIME_DIR,
 * else /run/wattbus as root, else $XDG_RUNTIME_DIR/wattbus, else /tmp/wattbus-UID. */
int wb_default_runtime_dir(char *buf, size_t size);

/* This process's CPU time (user + system) and resident set. */
uint64_t wb_self_cpu_ns(void);
uint64_t wb_self_rss_bytes(void);

#endif
