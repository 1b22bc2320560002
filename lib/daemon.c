/*
 * Daemon scaffolding shared by the stages: start (config, logging, signals read
 * from a signalfd, the runtime dir, the PUB socket), the one zloop and its stop,
 * sd_notify readiness and watchdog. The config is in daemon_conf.c, the loop's
 * sources in daemon_loop.c, the stat messages in daemon_stat.c.
 */
#include <errno.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "clock.h"
#include "daemon_int.h"
#include "heap.h"
#include "job.h"
#include "log.h"
#include "state.h"
#include "vis.h"

struct wb_daemon *wb_daemon_new(const struct wb_stage *stage, int argc, char **argv)
{
	wb_heap_init();
	struct wb_daemon *d = calloc(1, sizeof(*d));
	if (!d || !(d->conf = calloc(1, stage->conf_size)))
		fatalx(WB_EXIT_FAILURE, "out of memory");
	d->stage = stage;
	d->sigfd = d->stopfd[0] = d->stopfd[1] = -1;
	d->stat_chore = (struct wb_chore){.d = d, .late_id = -1};
	d->start_ns = wb_now_ns();
	d->start_mono = wb_mono_ns();
	snprintf(d->mode, sizeof(d->mode), "starting");
	char prog[64];
	snprintf(prog, sizeof(prog), "wattbus-%s", stage->name);
	log_init(strdup(prog), WB_LOG_INFO);

	bool check_only = false;
	daemon_parse_args(d, argc, argv, &check_only);
	char err[WB_CONF_ERR_MAX];
	if (daemon_load_config(d, &d->global, d->conf, err, sizeof(err)) < 0) {
		/* the error quotes the value, which may hold what the stage refused: escaped */
		fprintf(stderr, "wattbus-%s: %s\n", stage->name, WB_VIS(err));
		exit(WB_EXIT_USAGE);
	}
	if (check_only) {
		printf("%s: ok\n", d->config_path ? d->config_path : "(built-in defaults)");
		for (size_t i = 0; i < d->nenvset; i++)
			printf("%s\n", d->envset[i]);
		exit(WB_EXIT_OK);
	}
	log_set_level(d->verbose ? WB_LOG_DEBUG : log_level_parse(d->global.log_level));
	for (size_t i = 0; i < d->nenvset; i++)
		log_info("environment %s", d->envset[i]);

	/* Block the signals before ZeroMQ starts its threads, so only the signalfd sees them. */
	/* A shell starts background jobs with SIGINT ignored; an ignored signal never
	 * reaches a signalfd, so take the default back first. */
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	signal(SIGHUP, SIG_DFL);
	sigset_t mask;
	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGHUP);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	signal(SIGPIPE, SIG_IGN);
	d->sigfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	if (d->sigfd < 0 || pipe2(d->stopfd, O_CLOEXEC | O_NONBLOCK) < 0)
		fatalx(WB_EXIT_FAILURE, "signalfd/pipe: %s", strerror(errno));
	zsys_handler_set(NULL);
	zsys_set_logstream(stderr);

	/* State files and directories the stage makes are for its user and the socket group only.
	 */
	if (d->global.socket_group[0]) {
		struct group *gr = getgrnam(d->global.socket_group);
		if (gr)
			wb_state_set_group(gr->gr_gid);
		else
			log_warnx(
			    "[global] socket_group '%s' does not exist: state files are for this user only",
			    d->global.socket_group);
	}
	if (wb_state_mkdir(d->global.runtime_dir, err, sizeof(err)) < 0) {
		if (errno == EPERM)
			fatalx(WB_EXIT_FAILURE, "runtime dir %s", err);
		log_warnx("runtime dir %s", err);
	}
	d->sockopts = (struct wb_sockopts){
	    .hwm = (int)d->global.hwm,
	    .reconnect_max_ms = (int)(d->global.reconnect_max_ns / 1000000),
	    .curve_cert = d->global.curve_cert,
	    .curve_peer = d->global.curve_peer,
	    .curve_allow = d->global.curve_allow,
	    .ipc_group = d->global.socket_group,
	    .plaus = {d->global.max_ahead_ns, d->global.max_behind_ns, d->global.max_slot_ns,
		      d->global.max_zone_w, d->global.max_host_w, true, &d->global.extra_power_src},
	};
	struct wb_conf_section secs[2];
	daemon_sections(d, &d->global, d->conf, secs);
	const struct wb_conf_key *pubk = wb_conf_find(&secs[1], "pub");
	const char *pub_ep = *(char **)((char *)d->conf + pubk->off);
	d->pub = wb_pub_new(pub_ep, stage->name, d->global.host, &d->sockopts);
	if (!d->pub)
		fatalx(WB_EXIT_FAILURE, "cannot publish on %s (is another wattbus-%s running?)",
		       pub_ep, stage->name);
	d->loop = zloop_new();
	d->subs = zlistx_new();
	d->watches = zlistx_new();
	if (!d->loop || !d->subs || !d->watches)
		fatalx(WB_EXIT_FAILURE, "out of memory");
	zloop_set_nonstop(d->loop, true);
	log_info("version %s, host %s, publishing on %s, config %s", WB_VERSION, d->global.host,
		 pub_ep, d->config_path ? d->config_path : "(built-in defaults)");
	return d;
}

void wb_daemon_destroy(struct wb_daemon **self_p)
{
	if (!self_p || !*self_p)
		return;
	struct wb_daemon *d = *self_p;
	daemon_loop_free(d);
	zlistx_destroy(&d->subs);
	zlistx_destroy(&d->watches);
	zloop_destroy(&d->loop);
	wb_pub_destroy(&d->pub);
	daemon_conf_free(d);
	if (d->sigfd >= 0)
		close(d->sigfd);
	if (d->stopfd[0] >= 0) {
		close(d->stopfd[0]);
		close(d->stopfd[1]);
	}
	free(d);
	*self_p = NULL;
}

void *wb_daemon_conf(struct wb_daemon *d)
{
	return d->conf;
}

const struct wb_global *wb_daemon_global(struct wb_daemon *d)
{
	return &d->global;
}

const char *wb_daemon_config_path(struct wb_daemon *d)
{
	return d->config_path;
}

struct wb_stats *wb_daemon_stats(struct wb_daemon *d)
{
	return &d->stats;
}

zloop_t *wb_daemon_loop(struct wb_daemon *d)
{
	return d->loop;
}

struct wb_pub *wb_daemon_pub(struct wb_daemon *d)
{
	return d->pub;
}

void wb_daemon_set_mode(struct wb_daemon *d, const char *mode)
{
	snprintf(d->mode, sizeof(d->mode), "%s", mode);
	sd_notifyf(0, "STATUS=mode %s", d->mode);
}

int wb_daemon_send(struct wb_daemon *d, struct wb_msg *msg)
{
	if (wb_pub_send(d->pub, msg) < 0) {
		/* A value past its schema bound is a message lost here: counted, not just logged.
		 */
		uint64_t *n = errno == EINVAL ? wb_stats_counter(&d->stats, "encode_failed") : NULL;
		if (n)
			(*n)++;
		return -1;
	}
	d->stats.frames_out++;
	return 0;
}

void wb_daemon_stop(struct wb_daemon *d, int code)
{
	d->exit_code = code;
	if (write(d->stopfd[1], "x", 1) < 0)
		log_warn("stop pipe");
}

static int on_watchdog(zloop_t *loop, int timer_id, void *arg)
{
	sd_notify(0, "WATCHDOG=1");
	return 0;
}

static int on_signal(zloop_t *loop, zmq_pollitem_t *item, void *arg)
{
	struct wb_daemon *d = arg;
	struct signalfd_siginfo si;
	while (read(d->sigfd, &si, sizeof(si)) == sizeof(si)) {
		if (si.ssi_signo == SIGHUP) {
			daemon_reload(d);
			continue;
		}
		log_info("stopping on %s", strsignal((int)si.ssi_signo));
		return -1;
	}
	return 0;
}

static int on_stop(zloop_t *loop, zmq_pollitem_t *item, void *arg)
{
	return -1;
}

int wb_daemon_run(struct wb_daemon *d)
{
	zmq_pollitem_t sig = {NULL, d->sigfd, ZMQ_POLLIN, 0};
	zmq_pollitem_t stop = {NULL, d->stopfd[0], ZMQ_POLLIN, 0};
	/* Without the signal fd in the loop SIGTERM would never stop it: fail now instead. */
	if (zloop_poller(d->loop, &sig, on_signal, d) < 0 ||
	    zloop_poller(d->loop, &stop, on_stop, d) < 0 || daemon_stat_schedule(d) < 0) {
		log_errx("cannot watch signals, the stop pipe or the stat timer: %s",
			 zmq_strerror(zmq_errno()));
		return WB_EXIT_FAILURE;
	}
	uint64_t wd_usec = 0;
	if (sd_watchdog_enabled(0, &wd_usec) > 0 && wd_usec > 0)
		wb_daemon_timer(d, wd_usec * 1000 / 2, on_watchdog, d);
	daemon_stat_publish(d);
	sd_notifyf(0, "READY=1\nSTATUS=mode %s", d->mode);
	log_info("running (mode %s)", d->mode);
	zloop_start(d->loop);
	sd_notify(0, "STOPPING=1");
	/* A hung peer must not hold the stop past TimeoutStopSec: its job is cancelled, and one
	 * that does not end within the bound is left to end with the process. */
	wb_jobs_stop(WB_JOB_STOP_NS);
	daemon_stat_publish(d);
	return d->exit_code;
}
