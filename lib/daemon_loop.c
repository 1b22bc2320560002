/*
 * What a daemon's loop watches: subscriptions, timers, fds and grid timers
 * (timerfds on the wall clock's grid), chores that ride on received messages,
 * and the checkpoint built on them.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "clock.h"
#include "daemon_int.h"
#include "json.h"
#include "log.h"

/* ---- subscriptions ---- */

static int on_sub_readable(zloop_t *loop, zsock_t *sock, void *arg)
{
	struct subscription *s = arg;
	/* Drain what is queued, but yield to timers and signals now and then. */
	for (int i = 0; i < 256; i++) {
		struct wb_msg msg;
		struct wb_rx rx;
		struct wb_err err;
		int rc = wb_sub_try_recv(s->sub, &msg, &rx, &err, &s->d->stats);
		if (rc < 0)
			break;
		if (rc == 1) {
			if (!rx.stale)
				s->fn(s->d, &msg, &rx, s->arg);
			wb_msg_clear(&msg);
		}
	}
	wb_chore_poke(&s->d->stat_chore, false);
	return 0;
}

int wb_daemon_subscribe(struct wb_daemon *d, const struct wb_strlist *endpoints,
			const char *const *prefixes, wb_msg_fn *fn, void *arg)
{
	struct subscription *s = calloc(1, sizeof(*s));
	if (!s)
		return -1;
	s->d = d;
	s->fn = fn;
	s->arg = arg;
	s->sub = wb_sub_new(&d->sockopts);
	if (!s->sub) {
		free(s);
		return -1;
	}
	for (size_t i = 0; i < endpoints->n; i++)
		if (wb_sub_connect(s->sub, endpoints->v[i]) < 0)
			goto fail;
	for (size_t i = 0; prefixes && prefixes[i]; i++)
		wb_sub_subscribe(s->sub, prefixes[i]);
	if (zloop_reader(d->loop, wb_sub_sock(s->sub), on_sub_readable, s) < 0)
		goto fail;
	zloop_reader_set_tolerant(d->loop, wb_sub_sock(s->sub));
	zlistx_add_end(d->subs, s);
	for (size_t i = 0; i < endpoints->n; i++)
		log_info("subscribed to %s", endpoints->v[i]);
	return 0;
fail:
	wb_sub_destroy(&s->sub);
	free(s);
	return -1;
}

/* ---- timers and fds ---- */

int wb_daemon_timer(struct wb_daemon *d, uint64_t interval_ns, zloop_timer_fn *fn, void *arg)
{
	size_t ms = (size_t)((interval_ns + WB_NS_PER_MS - 1) / WB_NS_PER_MS);
	return zloop_timer(d->loop, ms ? ms : 1, 0, fn, arg);
}

int wb_daemon_timer_once(struct wb_daemon *d, uint64_t delay_ns, zloop_timer_fn *fn, void *arg)
{
	size_t ms = (size_t)((delay_ns + WB_NS_PER_MS - 1) / WB_NS_PER_MS);
	return zloop_timer(d->loop, ms ? ms : 1, 1, fn, arg);
}

void wb_daemon_timer_end(struct wb_daemon *d, int timer_id)
{
	if (timer_id >= 0)
		zloop_timer_end(d->loop, timer_id);
}

/* ---- chores and the checkpoint (lib/daemon.h) ---- */
static int on_chore_late(zloop_t *loop, int timer_id, void *arg);

static int chore_arm(struct wb_chore *c, uint64_t delay_ns)
{
	if (c->late_id < 0)
		c->late_id = wb_daemon_timer_once(c->d, delay_ns, on_chore_late, c);
	return c->late_id < 0 ? -1 : 0;
}

static void chore_run(struct wb_chore *c, bool late)
{
	c->next_ns = wb_mono_ns() + c->every_ns;
	wb_daemon_timer_end(c->d, c->late_id);
	c->late_id = -1;
	if (!c->pending)
		return;
	if (c->fn(c->arg, late) < 0) {
		chore_arm(c, c->every_ns); /* tried again, messages or not */
		return;
	}
	c->pending = c->always;
	if (c->pending)
		chore_arm(c, c->every_ns + c->late_ns);
}

static int on_chore_late(zloop_t *loop, int timer_id, void *arg)
{
	struct wb_chore *c = arg;
	c->late_id = -1; /* it fired once and is gone */
	chore_run(c, true);
	return 0;
}

int wb_chore_init(struct wb_chore *c, struct wb_daemon *d, uint64_t every_ns, uint64_t late_ns,
		  bool always, bool pending, wb_chore_fn *fn, void *arg)
{
	*c = (struct wb_chore){.d = d,
			       .every_ns = every_ns,
			       .late_ns = late_ns,
			       .next_ns = wb_mono_ns() + every_ns,
			       .late_id = -1,
			       .pending = pending || always,
			       .always = always,
			       .fn = fn,
			       .arg = arg};
	return every_ns && c->pending ? chore_arm(c, every_ns) : 0;
}

void wb_chore_poke(struct wb_chore *c, bool changed)
{
	if (changed)
		c->pending = true;
	if (!c->every_ns || !c->pending)
		return;
	uint64_t now = wb_mono_ns();
	if (now < c->next_ns)
		chore_arm(c, c->next_ns + c->late_ns - now);
	else
		chore_run(c, false);
}

void wb_chore_end(struct wb_chore *c)
{
	wb_daemon_timer_end(c->d, c->late_id);
	c->late_id = -1;
	c->every_ns = 0;
}

/* A save from the timer (before a silence) is fsync'd, and one a WB_JSON_SYNC_EVERY_NS. */
static int checkpoint_run(void *arg, bool late)
{
	struct wb_checkpoint *c = arg;
	uint64_t now = wb_mono_ns();
	bool sync = late || now >= c->next_sync_ns;
	if (c->save(c->arg, sync) < 0)
		return -1;
	if (sync)
		c->next_sync_ns = now + WB_JSON_SYNC_EVERY_NS;
	return 0;
}

void wb_checkpoint_init(struct wb_checkpoint *c, struct wb_daemon *d, uint64_t every_ns, bool dirty,
			wb_checkpoint_fn *save, void *arg)
{
	*c = (struct wb_checkpoint){.save = save, .arg = arg};
	wb_chore_init(&c->chore, d, every_ns, every_ns, false, dirty, checkpoint_run, c);
}

void wb_checkpoint_changed(struct wb_checkpoint *c)
{
	wb_chore_poke(&c->chore, true);
}

int wb_checkpoint_stop(struct wb_checkpoint *c)
{
	wb_chore_end(&c->chore);
	int rc = 0;
	if (c->chore.pending && (rc = c->save(c->arg, true)) == 0)
		c->chore.pending = false;
	return rc;
}

void wb_grid_tick_at(uint64_t now_ns, uint64_t interval_ns, uint64_t expirations,
		     struct wb_grid_tick *tick)
{
	tick->t_ns = now_ns - now_ns % interval_ns; /* the last grid instant not after now */
	tick->late_ns = now_ns - tick->t_ns;
	tick->missed = expirations > 1 ? expirations - 1 : 0;
}

/*
 * Arm a periodic CLOCK_REALTIME timer at the next multiple of interval_ns; the
 * kernel keeps it on the grid and counts the expirations a late read missed.
 * Cancelled (ECANCELED) when the clock is set.
 */
static int grid_arm(int fd, uint64_t interval_ns)
{
	uint64_t first = wb_grid_next(wb_now_ns(), interval_ns);
	struct itimerspec its = {
	    .it_value = {(time_t)(first / WB_NS_PER_SEC), (long)(first % WB_NS_PER_SEC)},
	    .it_interval = {(time_t)(interval_ns / WB_NS_PER_SEC),
			    (long)(interval_ns % WB_NS_PER_SEC)},
	};
	if (timerfd_settime(fd, TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET, &its, NULL) < 0) {
		log_warn("timerfd_settime");
		return -1;
	}
	return 0;
}

static void grid_fire(struct fdwatch *w)
{
	uint64_t expirations;
	ssize_t got = read(w->fd, &expirations, sizeof(expirations));
	if (got < 0 && errno == ECANCELED) {
		/* The wall clock was set: a periodic absolute timer would wait out a step back,
		 * so arm it again on the grid of the new time. */
		log_info("wall clock changed; sampling grid re-armed");
		grid_arm(w->fd, w->interval_ns);
		return;
	}
	if (got != sizeof(expirations) || expirations == 0)
		return; /* spurious wake-up */
	struct wb_grid_tick tick;
	wb_grid_tick_at(wb_now_ns(), w->interval_ns, expirations, &tick);
	w->grid_fn(w->d, &tick, w->arg);
	/* the tick nearest to stat_interval after the last stat message */
	struct wb_daemon *d = w->d;
	if (d->stat_grid && &d->stat_grid->w == w && d->stat_on_ticks &&
	    wb_mono_ns() - d->stat_last_mono + w->interval_ns / 2 >= d->global.stat_interval_ns)
		daemon_stat_publish(d);
}

static int on_fd(zloop_t *loop, zmq_pollitem_t *item, void *arg)
{
	struct fdwatch *w = arg;
	if (w->grid_fn) {
		grid_fire(w);
		return 0;
	}
	if (w->fn(w->d, w->fd, w->arg) < 0) {
		zmq_pollitem_t it = {NULL, w->fd, ZMQ_POLLIN, 0};
		zloop_poller_end(loop, &it);
		void *handle = zlistx_find(w->d->watches, w);
		if (handle)
			zlistx_delete(w->d->watches, handle);
		free(w);
	}
	return 0;
}

static int watch(struct wb_daemon *d, struct fdwatch *w)
{
	zmq_pollitem_t it = {NULL, w->fd, ZMQ_POLLIN, 0};
	if (zloop_poller(d->loop, &it, on_fd, w) < 0) {
		free(w);
		return -1;
	}
	zloop_poller_set_tolerant(d->loop, &it);
	zlistx_add_end(d->watches, w);
	return 0;
}

int wb_daemon_watch_fd(struct wb_daemon *d, int fd, wb_fd_fn *fn, void *arg)
{
	struct fdwatch *w = calloc(1, sizeof(*w));
	if (!w)
		return -1;
	*w = (struct fdwatch){.d = d, .fd = fd, .fn = fn, .arg = arg};
	return watch(d, w);
}

struct wb_grid *wb_daemon_grid_timer(struct wb_daemon *d, uint64_t interval_ns, wb_grid_fn *fn,
				     void *arg)
{
	if (interval_ns == 0)
		return NULL;
	int fd = timerfd_create(CLOCK_REALTIME, TFD_CLOEXEC | TFD_NONBLOCK);
	if (fd < 0) {
		log_warn("timerfd_create");
		return NULL;
	}
	if (grid_arm(fd, interval_ns) < 0) {
		close(fd);
		return NULL;
	}
	struct wb_grid *g = calloc(1, sizeof(*g));
	if (!g) {
		close(fd);
		return NULL;
	}
	g->w = (struct fdwatch){
	    .d = d, .fd = fd, .grid_fn = fn, .arg = arg, .interval_ns = interval_ns};
	if (watch(d, &g->w) < 0) { /* watch frees g */
		close(fd);
		return NULL;
	}
	return g;
}

int wb_grid_rearm(struct wb_grid *g, uint64_t interval_ns)
{
	if (interval_ns == 0 || grid_arm(g->w.fd, interval_ns) < 0)
		return -1;
	g->w.interval_ns = interval_ns;
	if (g->w.d->stat_grid == g && daemon_stat_schedule(g->w.d) < 0)
		log_warnx("cannot set up the stat timer: %s", zmq_strerror(zmq_errno()));
	return 0;
}

void wb_grid_carry_stats(struct wb_grid *g)
{
	g->w.d->stat_grid = g;
}

void daemon_loop_free(struct wb_daemon *d)
{
	if (d->subs)
		for (struct subscription *s = zlistx_first(d->subs); s; s = zlistx_next(d->subs)) {
			wb_sub_destroy(&s->sub);
			free(s);
		}
	if (d->watches)
		for (struct fdwatch *w = zlistx_first(d->watches); w; w = zlistx_next(d->watches)) {
			if (w->grid_fn)
				close(w->fd);
			free(w);
		}
}
