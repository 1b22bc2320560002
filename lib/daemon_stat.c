/*
 * A daemon's stat messages: what the stage counts, its CPU and memory, sent
 * every stat_interval on the ticks of a grid or riding on received messages.
 */
#include <stdio.h>
#include <sys/resource.h>
#include <unistd.h>

#include "clock.h"
#include "daemon_int.h"

/* ---- stat ---- */

uint64_t wb_self_cpu_ns(void)
{
	struct rusage ru;
	if (getrusage(RUSAGE_SELF, &ru) < 0)
		return 0;
	return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * WB_NS_PER_SEC +
	       (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000u;
}

uint64_t wb_self_rss_bytes(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	unsigned long size, resident = 0;
	if (!f)
		return 0;
	if (fscanf(f, "%lu %lu", &size, &resident) != 2)
		resident = 0;
	fclose(f);
	return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

void daemon_stat_publish(struct wb_daemon *d)
{
	struct wb_counter rej[WB_R_COUNT];
	struct wb_counter ctr[WB_COUNTERS_MAX];
	struct wb_msg m = {.kind = WB_STAT};
	struct wb_stat *s = &m.stat;
	if (d->stat_fn)
		d->stat_fn(d, d->stat_arg);
	s->t = wb_now_ns();
	d->stat_last_mono = wb_mono_ns();
	snprintf(s->stage, sizeof(s->stage), "%s", d->stage->name);
	snprintf(s->version, sizeof(s->version), "%s", WB_VERSION);
	snprintf(s->mode, sizeof(s->mode), "%s", d->mode);
	s->uptime_ns = wb_mono_ns() - d->start_mono;
	s->cpu_ns = wb_self_cpu_ns();
	s->rss_bytes = wb_self_rss_bytes();
	s->frames_in = d->stats.frames_in;
	s->frames_out = d->stats.frames_out + 1; /* this message */
	s->lost = d->stats.lost;
	s->rejected = d->stats.rejected;
	s->restarts = d->stats.restarts;
	s->checkpoint_failures = d->stats.checkpoint_failures;
	for (int r = 0; r < WB_R_COUNT; r++)
		if (d->stats.rejected_by[r]) {
			snprintf(rej[s->n_rejected_by].name, sizeof(rej[0].name), "%s",
				 wb_reason_name(r));
			rej[s->n_rejected_by++].value = d->stats.rejected_by[r];
		}
	s->rejected_by = rej;
	for (size_t i = 0; i < d->stats.ncounters; i++) {
		snprintf(ctr[i].name, sizeof(ctr[i].name), "%s", d->stats.counters[i].name);
		ctr[i].value = d->stats.counters[i].value;
	}
	s->n_counters = d->stats.ncounters;
	s->counters = ctr;
	wb_daemon_send(d, &m); /* arrays are on the stack: no wb_msg_clear */
}

static int run_stat(void *arg, bool late)
{
	daemon_stat_publish(arg);
	return 0;
}

/*
 * The stat messages go out at the ticks of the grid that carries them, when it
 * ticks at least as often, right after what the tick sent: that costs no
 * wake-up of the loop (nor of libzmq's I/O thread) of their own. Else they are
 * a chore that rides on the messages the stage receives (the first one
 * stat_interval after the last stat message), from a timer only when none
 * comes for half a stat_interval more: the stages' stat messages then go out
 * with the slot's messages, and exportd, which receives them all, wakes for
 * them together.
 */
int daemon_stat_schedule(struct wb_daemon *d)
{
	d->stat_on_ticks =
	    d->stat_grid && d->stat_grid->w.interval_ns <= d->global.stat_interval_ns;
	if (d->stat_on_ticks) {
		wb_chore_end(&d->stat_chore);
		return 0;
	}
	if (d->stat_chore.every_ns)
		return 0; /* running */
	/* A stage that subscribes to nothing has no message to wait for. */
	uint64_t every = d->global.stat_interval_ns, late = zlistx_size(d->subs) ? every / 2 : 0;
	return wb_chore_init(&d->stat_chore, d, every, late, true, true, run_stat, d);
}

void wb_daemon_on_stat(struct wb_daemon *d, wb_stat_fn *fn, void *arg)
{
	d->stat_fn = fn;
	d->stat_arg = arg;
}
