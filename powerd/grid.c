/*
 * The wall-clock sampling grid: a one-shot CLOCK_REALTIME timerfd armed for the
 * next multiple of the interval, re-armed at every tick. TFD_TIMER_CANCEL_ON_SET
 * wakes it when the clock is set, so a step backwards cannot stall sampling.
 */
#include <errno.h>
#include <string.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "clock.h"
#include "powerd.h"

void grid_tick_at(uint64_t armed_ns, uint64_t now_ns, uint64_t interval_ns, struct pd_tick *tick)
{
	uint64_t latest = now_ns - now_ns % interval_ns; /* the last grid time not after now */
	tick->t_ns = latest;
	tick->lateness_ns = now_ns - latest;
	tick->missed = latest > armed_ns ? (latest - armed_ns) / interval_ns : 0;
}

static int grid_arm(struct pd_grid *g)
{
	g->next_ns = wb_grid_next(wb_now_ns(), g->interval_ns);
	struct itimerspec its = {
	    .it_value = {(time_t)(g->next_ns / WB_NS_PER_SEC), (long)(g->next_ns % WB_NS_PER_SEC)}};
	if (timerfd_settime(g->fd, TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET, &its, NULL) < 0) {
		log_warn("timerfd_settime");
		return -1;
	}
	return 0;
}

int grid_open(struct pd_grid *g, uint64_t interval_ns)
{
	g->interval_ns = interval_ns;
	g->fd = timerfd_create(CLOCK_REALTIME, TFD_NONBLOCK | TFD_CLOEXEC);
	if (g->fd < 0) {
		log_warn("timerfd_create");
		return -1;
	}
	if (grid_arm(g) < 0) {
		grid_close(g);
		return -1;
	}
	return 0;
}

int grid_fire(struct pd_grid *g, struct pd_tick *tick)
{
	uint64_t expirations;
	ssize_t n = read(g->fd, &expirations, sizeof(expirations));
	if (n != (ssize_t)sizeof(expirations)) {
		if (n < 0 && errno == ECANCELED) {
			log_info("the wall clock was set; sampling realigned to the grid");
			grid_arm(g);
		}
		return 0;
	}
	uint64_t now = wb_now_ns();
	grid_tick_at(g->next_ns, now, g->interval_ns, tick);
	grid_arm(g);
	return 1;
}

int grid_rearm(struct pd_grid *g, uint64_t interval_ns)
{
	g->interval_ns = interval_ns;
	return grid_arm(g);
}

void grid_close(struct pd_grid *g)
{
	if (g->fd >= 0)
		close(g->fd);
	g->fd = -1;
}
