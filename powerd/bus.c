/*
 * The bus source: a VM guest's meter is its host's measurement of the VM.
 * `wattbus vmpub` on the host publishes the VM's cumulative energy per zone
 * (estimate/<vm>, zones[].total_uj in estimd's total_epoch); this source
 * subscribes to it and turns it into wrap-free counters on the guest's clock.
 * The counters follow the host's totals by lib/follow.h's rule: by their
 * difference within one count, so lost messages cost nothing, else (a new count
 * of the host, a total that went back) by the slot's own energy, so the counter
 * never goes back nor counts twice; and the host's slot times are mapped onto
 * this clock by the smallest recent delay (network, pipeline and clock offset
 * together), between whose points the counter is interpolated.
 */
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bus.h"
#include "clock.h"
#include "follow.h"
#include "powerd.h"

#define BUS_POINTS 16 /* host samples kept per zone for the mapping */
#define BUS_WINDOW 32 /* messages whose smallest delay is the clock mapping */

struct bus_point {
	uint64_t host_ns, uj;
};

struct bus_zone {
	char name[64]; /* the host's zone name */
	size_t zi;     /* in the set */
	bool have;
	struct wb_follow f; /* the host's total_uj it follows */
	uint64_t out_uj;    /* our counter: what the host's totals added, across its counts */
	struct bus_point pt[BUS_POINTS];
	size_t npt, head;
	uint64_t published_uj;
};

/* Its keys in [powerd]. */
struct bus_conf {
	char *bus_sub;	      /* the host's vmpub endpoint for this VM */
	char *bus_vm;	      /* this VM's name on the host */
	char *bus_curve_cert; /* this VM's certificate (secret beside it) */
	char *bus_curve_peer; /* the host's public certificate */
	uint64_t
	    bus_wait_ns; /* warn when the first message has not come this long after the start */
};

/* Its stat counters: host messages taken, lost on the way, refused; new or resumed host counts;
 * the clock mapping (delay of host slot times, or how far the host is ahead) and its steps. */
struct bus_counts {
	uint64_t bus_frames, bus_lost, bus_rejected, bus_resets;
	uint64_t bus_offset_ns, bus_host_ahead_ns, bus_clock_steps;
};
_Static_assert(sizeof(struct bus_counts) <= PD_SOURCE_COUNTERS_MAX * sizeof(uint64_t),
	       "bus's counters do not fit");

static struct bus_counts *bus_counts(struct pd_set *set)
{
	return pd_source_counts(set, &bus_source);
}

struct pd_bus {
	struct wb_sub *sub;
	char vm[64];
	char endpoint[PD_PATH_MAX];
	bool have_count;
	uint64_t count;	  /* estimd's total_epoch */
	uint64_t last_t1; /* host time of the last message counted: the bound's window */
	struct bus_zone *zones;
	size_t nzones;
	int64_t delay[BUS_WINDOW]; /* recv_ns - t1 of recent messages */
	size_t ndelay, dhead;
	bool have_offset;
	int64_t offset_ns; /* guest time of a host slot time = host time + offset_ns */
	struct wb_stats stats;
	struct wb_ratelimit rl;
	uint64_t wait_mono_ns; /* bus_wait: warn when no message has come by then; 0: warned */
	uint64_t wait_ns;
};

static struct pd_bus *bus_state(struct pd_set *set)
{
	return *pd_set_state(set, &bus_source);
}

static struct bus_zone *bus_zone_get(struct pd_set *set, struct pd_bus *b,
				     const struct wb_est_zone *ez)
{
	for (size_t i = 0; i < b->nzones; i++)
		if (strcmp(b->zones[i].name, ez->name) == 0)
			return &b->zones[i];
	if (b->nzones >= PD_ZONES_MAX)
		return NULL;
	if (!b->zones && !(b->zones = calloc(PD_ZONES_MAX, sizeof(*b->zones))))
		return NULL;
	struct pd_zone z;
	pd_zone_init(&z, &bus_source, ez->zone, (unsigned)ez->index);
	snprintf(z.name, sizeof(z.name), "%s", ez->name);
	pd_fmt(z.path, sizeof(z.path), "%s estimate/%s", b->endpoint, b->vm);
	counter_init(&z.ctr, 0, 1, 1, (uint64_t)(set->opts->max_power_w * 1e6));
	int zi = pd_set_add(set, &z);
	if (zi < 0)
		return NULL;
	struct bus_zone *bz = &b->zones[b->nzones++];
	memset(bz, 0, sizeof(*bz));
	snprintf(bz->name, sizeof(bz->name), "%s", ez->name);
	bz->zi = (size_t)zi;
	log_info("bus: zone %s (%s) of VM %s from %s", set->zones[zi].name, ez->zone, b->vm,
		 b->endpoint);
	return bz;
}

/* The clock mapping: the smallest delay of the last BUS_WINDOW messages. */
static void bus_map_clock(struct pd_set *set, struct pd_bus *b, uint64_t recv_ns, uint64_t t1)
{
	int64_t d = (int64_t)(recv_ns - t1);
	b->delay[b->dhead] = d;
	b->dhead = (b->dhead + 1) % BUS_WINDOW;
	if (b->ndelay < BUS_WINDOW)
		b->ndelay++;
	int64_t min = b->delay[0];
	for (size_t i = 1; i < b->ndelay; i++)
		if (b->delay[i] < min)
			min = b->delay[i];
	struct bus_counts *c = bus_counts(set);
	if (b->have_offset && llabs(min - b->offset_ns) > (long long)set->opts->interval_ns) {
		c->bus_clock_steps++;
		log_rl(
		    &b->rl, WB_LOG_WARN,
		    "bus: VM %s: the host's slot times moved by %.3f s against this clock (a clock set, or a slower path); mapping them anew",
		    b->vm, (double)(min - b->offset_ns) / 1e9);
	}
	b->offset_ns = min;
	b->have_offset = true;
	c->bus_offset_ns = min > 0 ? (uint64_t)min : 0;
	c->bus_host_ahead_ns = min < 0 ? (uint64_t)-min : 0;
}

/* One estimate of the VM: advance each zone's counter by the host's increase. */
static void bus_take(struct pd_set *set, struct pd_bus *b, const struct wb_estimate *e,
		     const struct wb_rx *rx)
{
	struct bus_counts *c = bus_counts(set);
	c->bus_frames++;
	c->bus_lost += rx->lost;
	if (rx->stale || rx->duplicate)
		return;
	if (e->total_epoch == 0) {
		c->bus_rejected++;
		log_rl(
		    &b->rl, WB_LOG_WARN,
		    "bus: estimate/%s from %s has no total_epoch: not a VM stream of wattbus vmpub; ignored",
		    b->vm, b->endpoint);
		return;
	}
	bool same = b->have_count && e->total_epoch == b->count;
	if (b->have_count && !same) {
		c->bus_resets++;
		log_rl(
		    &b->rl, WB_LOG_INFO,
		    "bus: VM %s: the host started a new count (estimd without its state): counting the slot's own energy, then the new count's differences",
		    b->vm);
	}
	uint64_t count = wb_follow_count(e->env.src, e->total_epoch);
	uint64_t since = e->t1 > b->last_t1 ? e->t1 - b->last_t1 : 0;
	for (size_t i = 0; i < e->n_zones; i++) {
		const struct wb_est_zone *ez = &e->zones[i];
		struct bus_zone *bz = bus_zone_get(set, b, ez);
		if (!bz)
			continue;
		struct wb_follow_step s = {count, ez->total_uj, ez->energy_uj, since,
					   set->opts->max_power_w};
		enum wb_follow_how how;
		uint64_t add = wb_follow_step(&bz->f, &s, &how);
		if (!bz->have) {
			/* the host's count itself, so a restarted powerd continues it */
			bz->out_uj = ez->total_uj;
		} else {
			bz->out_uj = wb_sat_add(bz->out_uj, add, NULL);
		}
		if (bz->have && how != WB_FOLLOW_DIFF && how != WB_FOLLOW_NEW_COUNT) {
			/* A new count is said once a message above; these are per zone. */
			c->bus_resets++;
			log_rl(&b->rl, WB_LOG_INFO,
			       "bus: VM %s zone %s: the host's total %s (%" PRIu64
			       " uJ): counting the slot's own %" PRIu64 " uJ",
			       b->vm, bz->name, wb_follow_how_name(how), ez->total_uj, add);
		}
		bz->have = true;
		size_t last = (bz->head + BUS_POINTS - 1) % BUS_POINTS;
		if (bz->npt && e->t1 <= bz->pt[last].host_ns) {
			bz->pt[last].uj = bz->out_uj; /* a host clock set back: no new point */
			continue;
		}
		bz->pt[bz->head] = (struct bus_point){e->t1, bz->out_uj};
		bz->head = (bz->head + 1) % BUS_POINTS;
		if (bz->npt < BUS_POINTS)
			bz->npt++;
	}
	b->have_count = true;
	b->count = e->total_epoch;
	b->last_t1 = e->t1;
	bus_map_clock(set, b, rx->recv_ns, e->t1);
}

static void bus_drain(struct pd_set *set, struct pd_bus *b)
{
	for (;;) {
		struct wb_msg m;
		struct wb_rx rx;
		struct wb_err err;
		int rc = wb_sub_try_recv(b->sub, &m, &rx, &err, &b->stats);
		if (rc < 0)
			break;
		if (rc == 0) {
			bus_counts(set)->bus_rejected++;
			continue;
		}
		if (m.kind == WB_ESTIMATE && strcmp(m.estimate.env.host, b->vm) == 0)
			bus_take(set, b, &m.estimate, &rx);
		else
			bus_counts(set)->bus_rejected++;
		wb_msg_clear(&m);
	}
}

/* The zone's counter at host time h: interpolated between the points around it, never past the
 * last. */
static uint64_t bus_value_at(const struct bus_zone *bz, uint64_t h)
{
	const struct bus_point *prev = NULL;
	for (size_t k = 0; k < bz->npt; k++) {
		const struct bus_point *p =
		    &bz->pt[(bz->head + BUS_POINTS - bz->npt + k) % BUS_POINTS];
		if (p->host_ns >= h) {
			/* before the oldest point kept: that point (out_uj never decreases) */
			if (!prev)
				return p->uj;
			return prev->uj +
			       (uint64_t)((unsigned __int128)(p->uj - prev->uj) *
					  (h - prev->host_ns) / (p->host_ns - prev->host_ns));
		}
		prev = p;
	}
	return prev ? prev->uj : 0;
}

static void bus_sample(struct pd_set *set, uint64_t t_ns, uint64_t mono_ns)
{
	struct pd_bus *b = bus_state(set);
	if (!b)
		return;
	bus_drain(set, b);
	uint64_t h =
	    (int64_t)t_ns - b->offset_ns > 0 ? (uint64_t)((int64_t)t_ns - b->offset_ns) : 0;
	for (size_t i = 0; i < b->nzones; i++) {
		struct bus_zone *bz = &b->zones[i];
		if (!bz->npt)
			continue;
		uint64_t v = bus_value_at(bz, h);
		/* A reset of the mapping (a clock step) must not take back what was published. */
		if (v < bz->published_uj)
			v = bz->published_uj;
		struct pd_zone *z = &set->zones[bz->zi];
		if (pd_verdict_added(pd_zone_account(set, z, v, t_ns, mono_ns))) {
			z->updated = true;
			bz->published_uj = v;
		}
	}
}

static int bus_check(const struct pd_opts *opts, char *err, size_t errlen)
{
	const struct bus_conf *o = pd_source_conf(opts, &bus_source);
	if (!o->bus_sub || !o->bus_sub[0]) {
		snprintf(
		    err, errlen,
		    "source bus needs bus_sub, the endpoint of the host's `wattbus vmpub` for this VM (e.g. bus_sub = tcp://192.168.122.1:5610)");
		return -1;
	}
	if (!o->bus_vm || !o->bus_vm[0] || strlen(o->bus_vm) > 63) {
		snprintf(
		    err, errlen,
		    "source bus needs bus_vm, this VM's name on its host (1 to 63 bytes: the libvirt domain name)");
		return -1;
	}
	if (o->bus_curve_cert && o->bus_curve_cert[0] &&
	    (!o->bus_curve_peer || !o->bus_curve_peer[0])) {
		snprintf(
		    err, errlen,
		    "bus_curve_cert is set but bus_curve_peer (the host's public certificate) is not");
		return -1;
	}
	return 0;
}

static void bus_destroy(struct pd_set *set)
{
	struct pd_bus *b = bus_state(set);
	if (!b)
		return;
	wb_sub_destroy(&b->sub);
	free(b->zones);
	free(b);
	*pd_set_state(set, &bus_source) = NULL;
}

static int bus_discover(struct pd_set *set, const struct pd_opts *opts, char *why, size_t whylen)
{
	const struct bus_conf *o = pd_source_conf(opts, &bus_source);
	if (bus_check(opts, why, whylen) < 0)
		return 0;
	struct pd_bus *b = calloc(1, sizeof(*b));
	if (!b) {
		snprintf(why, whylen, "out of memory");
		return 0;
	}
	*pd_set_state(set, &bus_source) = b;
	b->rl = (struct wb_ratelimit)WB_RATELIMIT_INIT;
	snprintf(b->vm, sizeof(b->vm), "%s", o->bus_vm);
	snprintf(b->endpoint, sizeof(b->endpoint), "%s", o->bus_sub);
	struct wb_sockopts so = {.curve_cert = o->bus_curve_cert,
				 .curve_peer = o->bus_curve_peer,
				 .reconnect_max_ms = opts->reconnect_max_ms};
	char topic[WB_TOPIC_MAX];
	snprintf(topic, sizeof(topic), "estimate/%s", b->vm);
	b->sub = wb_sub_new(&so);
	if (!b->sub || wb_sub_connect(b->sub, o->bus_sub) < 0 ||
	    wb_sub_subscribe(b->sub, topic) < 0) {
		snprintf(why, whylen, "cannot subscribe to %s at %s", topic, o->bus_sub);
		bus_destroy(set);
		return 0;
	}
	/*
	 * The zones come with the first estimate, on the loop: no wait here, so that powerd is
	 * READY, pings the watchdog and stops on SIGTERM while the host is silent (a wait of up
	 * to bus_wait here held all three). bus_tend warns when none came within bus_wait.
	 */
	b->wait_ns = o->bus_wait_ns;
	b->wait_mono_ns = wb_mono_ns() + o->bus_wait_ns;
	set->used |= 1u << pd_source_index(&bus_source);
	return 1;
}

static int bus_tend(struct pd_set *set)
{
	struct pd_bus *b = bus_state(set);
	if (!b || !b->wait_mono_ns || wb_mono_ns() < b->wait_mono_ns)
		return 0;
	b->wait_mono_ns = 0;
	if (b->nzones == 0)
		log_warnx(
		    "bus: no estimate/%s from %s within %.0f s (is `wattbus vmpub %s` running on the host, with this VM's key allowed?); zones will appear with the first one",
		    b->vm, b->endpoint, (double)b->wait_ns / 1e9, b->vm);
	return 0;
}

static int bus_watch_fd(struct pd_set *set)
{
	struct pd_bus *b = bus_state(set);
	return b ? zsock_fd(wb_sub_sock(b->sub)) : -1;
}

static int bus_on_readable(struct pd_set *set)
{
	struct pd_bus *b = bus_state(set);
	if (b)
		bus_drain(set, b);
	return 0;
}

#define OFF(f) offsetof(struct bus_conf, f)
static const struct wb_conf_key bus_keys[] = {
    {"bus_sub", WB_CONF_STR | WB_CONF_RESTART, OFF(bus_sub), "", 0, 0, NULL,
     "bus source (a VM guest): the endpoint of the host's `wattbus vmpub` for this VM"},
    {"bus_vm", WB_CONF_STR | WB_CONF_RESTART, OFF(bus_vm), "", 0, 0, NULL,
     "bus source: this VM's name on its host (the libvirt domain name)"},
    {"bus_curve_cert", WB_CONF_STR | WB_CONF_RESTART, OFF(bus_curve_cert), "", 0, 0, NULL,
     "bus source: this VM's CURVE certificate (secret beside it), for a tcp:// bus_sub"},
    {"bus_curve_peer", WB_CONF_STR | WB_CONF_RESTART, OFF(bus_curve_peer), "", 0, 0, NULL,
     "bus source: the host's public CURVE certificate"},
    {"bus_wait", WB_CONF_DURATION | WB_CONF_RESTART, OFF(bus_wait_ns), "10s", 0, 3600e9, NULL,
     "bus source: warn when the host's first message (its zones) has not come this long after the start; powerd never waits for it"},
};
#undef OFF

#define R(f) WB_STAT_ROW(struct bus_counts, f, #f)
static const struct wb_stat_row bus_stats[] = {
    R(bus_frames),    R(bus_lost),	    R(bus_rejected),	R(bus_resets),
    R(bus_offset_ns), R(bus_host_ahead_ns), R(bus_clock_steps),
};
#undef R

const struct pd_source bus_source = {
    .name = "bus",
    .in_auto = false,
    .keys = bus_keys,
    .nkeys = sizeof(bus_keys) / sizeof(bus_keys[0]),
    .conf_size = sizeof(struct bus_conf),
    .power_from = "the host's measurement of this VM (wattbus vmpub)",
    .discover = bus_discover,
    .check = bus_check,
    .sample = bus_sample,
    .watch_fd = bus_watch_fd,
    .on_readable = bus_on_readable,
    .tend = bus_tend,
    .destroy = bus_destroy,
    .stats = bus_stats,
    .nstats = sizeof(bus_stats) / sizeof(bus_stats[0]),
};
