/*
 * lib/daemon's insides, shared by its files (private): daemon.c (start, the
 * loop, signals and stop, readiness and watchdog), daemon_conf.c (config file,
 * environment and flags, reload), daemon_loop.c (subscriptions, timers, fds,
 * grids, chores) and daemon_stat.c (the stat messages).
 */
#ifndef WB_DAEMON_INT_H
#define WB_DAEMON_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "daemon.h"

/* A --key value from the command line, re-applied over the file on reload. */
struct flag {
	int sec; /* 0 global, 1 stage */
	const char *key;
	char *value;
};

struct subscription {
	struct wb_daemon *d;
	struct wb_sub *sub;
	wb_msg_fn *fn;
	void *arg;
};

struct fdwatch {
	struct wb_daemon *d;
	int fd;
	wb_fd_fn *fn;
	void *arg;
	wb_grid_fn *grid_fn;
	uint64_t interval_ns;
};

/* A grid timer is an fd watch whose fd is its timerfd. */
struct wb_grid {
	struct fdwatch w;
};

struct wb_daemon {
	const struct wb_stage *stage;
	struct wb_global global;
	void *conf;
	char *config_path; /* NULL: defaults only */
	bool config_explicit;
	struct flag *flags;
	size_t nflags;
	char **envset; /* "WATTBUS_X_Y: [x] y = value" for each key the environment set */
	size_t nenvset;
	bool verbose;

	zloop_t *loop;
	int sigfd;
	int stopfd[2];
	struct wb_pub *pub;
	struct wb_sockopts sockopts;
	zlistx_t *subs;	   /* struct subscription */
	zlistx_t *watches; /* struct fdwatch */
	struct wb_stats stats;
	char mode[32];
	uint64_t start_ns, start_mono;
	int exit_code;
	wb_reload_fn *reload_fn;
	void *reload_arg;
	wb_stat_fn *stat_fn;
	void *stat_arg;
	struct wb_chore stat_chore; /* the stat messages, unless stat_grid's ticks carry them */
	bool stat_on_ticks;
	struct wb_grid *stat_grid; /* wb_grid_carry_stats */
	uint64_t stat_last_mono;
};

/* daemon_conf.c */
void daemon_sections(struct wb_daemon *d, struct wb_global *g, void *conf,
		     struct wb_conf_section secs[2]);
void daemon_parse_args(struct wb_daemon *d, int argc, char **argv, bool *check_only);
int daemon_load_config(struct wb_daemon *d, struct wb_global *g, void *conf, char *err,
		       size_t errlen);
/* Free what the config, the flags and the environment hold. */
void daemon_conf_free(struct wb_daemon *d);
/* SIGHUP: read the config again, keep the running one on a fault. */
void daemon_reload(struct wb_daemon *d);

/* daemon_loop.c: close the subscriptions and the fd watches. */
void daemon_loop_free(struct wb_daemon *d);

/* daemon_stat.c */
void daemon_stat_publish(struct wb_daemon *d);
int daemon_stat_schedule(struct wb_daemon *d);

#endif
