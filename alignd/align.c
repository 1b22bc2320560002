/*
 * The alignment engine: power hosts (one energy curve per zone), usage hosts
 * (usage deltas, per-zone carries, slots waiting for power), the pairing
 * between them, and the rules for when a slot may be emitted.
 *
 * A usage message closes the slot [previous usage t, its t]. The slot waits
 * until its power host has a sample at or after t1 (then E(t1) is interpolated)
 * or until max_lag has passed since the usage message arrived (then E(t1) is
 * extrapolated from the last rate and the slot says so). Energy per zone is
 * floor(E(t1)) minus what the host's earlier slots were given (carry.c), so the
 * next slot corrects an extrapolation and any run sums exactly.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include <czmq.h>

#include "align_int.h"
#include "clock.h"
#include "grow.h"
#include "log.h"
#include "plaus.h"

#define SWEEP_NS WB_NS_PER_SEC /* how often silent hosts and old samples are dropped */
/*
 * alignd calls align_sweep at every message as well, so the sweep rides on them
 * and its timer (align_next_tick_ns) is needed only when they stop: it is due
 * that much after SWEEP_NS, more than a message interval of 1 s with its
 * jitter, or each sweep that just missed a message would wake alignd.
 */
#define SWEEP_LATE_NS (2 * WB_NS_PER_SEC)
/* Power intervals past the last power sample a slot end may be extrapolated. */
#define EXTRAP_INTERVALS 4

/* What a host record holds beyond its tables, charged to the budget while it exists. */
#define UHOST_BYTES (sizeof(struct uhost) + TOTALS_MAX * sizeof(struct zone_total))
#define PHOST_BYTES                                                                                \
	(sizeof(struct phost) + ALIGN_ZONES_MAX * (sizeof(struct curve) + sizeof(struct curve *)))

/* ---- configuration ---- */

int align_conf_map(struct align_conf *conf, char *const *items, size_t n, char *err, size_t errlen)
{
	struct align_map *map = n ? calloc(n, sizeof(*map)) : NULL;
	if (n && !map) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		const char *eq = strchr(items[i], '=');
		size_t ul = eq ? (size_t)(eq - items[i]) : 0;
		size_t pl = eq ? strlen(eq + 1) : 0;
		if (!eq || ul == 0 || pl == 0 || ul > 63 || pl > 63 || strchr(eq + 1, '=')) {
			snprintf(
			    err, errlen,
			    "host_map: '%s' is not usagehost=powerhost (host names of 1 to 63 characters)",
			    items[i]);
			free(map);
			return -1;
		}
		memcpy(map[i].usage_host, items[i], ul);
		memcpy(map[i].power_host, eq + 1, pl);
		for (size_t j = 0; j < i; j++)
			if (strcmp(map[j].usage_host, map[i].usage_host) == 0) {
				snprintf(err, errlen, "host_map: usage host '%s' is mapped twice",
					 map[i].usage_host);
				free(map);
				return -1;
			}
	}
	free(conf->map);
	conf->map = map;
	conf->nmap = n;
	return 0;
}

void align_conf_free(struct align_conf *conf)
{
	free(conf->map);
	conf->map = NULL;
	conf->nmap = 0;
}

static int conf_copy(struct align_conf *dst, const struct align_conf *src)
{
	struct align_map *map = NULL;
	if (src->nmap) {
		map = calloc(src->nmap, sizeof(*map));
		if (!map)
			return -1;
		memcpy(map, src->map, src->nmap * sizeof(*map));
	}
	free(dst->map);
	*dst = *src;
	dst->map = map;
	return 0;
}

static void power_name_of(const struct align *a, const char *usage_host, char out[64])
{
	for (size_t i = 0; i < a->conf.nmap; i++)
		if (strcmp(a->conf.map[i].usage_host, usage_host) == 0) {
			snprintf(out, 64, "%s", a->conf.map[i].power_host);
			return;
		}
	snprintf(out, 64, "%s", usage_host);
}

/* ---- hosts ---- */

static void waiting_add(struct align *a, struct uhost *uh)
{
	if (uh->waiting)
		return;
	if (a->nwaiting == a->capwaiting) {
		size_t cap = a->capwaiting ? a->capwaiting * 2 : 16;
		struct uhost **w = realloc(a->waiting, cap * sizeof(*w));
		if (!w)
			return; /* its slots still go out at the host's next message */
		a->waiting = w;
		a->capwaiting = cap;
	}
	uh->widx = a->nwaiting;
	uh->waiting = true;
	a->waiting[a->nwaiting++] = uh;
}

static void waiting_remove(struct align *a, struct uhost *uh)
{
	size_t i = uh->widx;
	if (!uh->waiting || i >= a->nwaiting || a->waiting[i] != uh)
		return;
	uh->waiting = false;
	a->waiting[i] = a->waiting[--a->nwaiting];
	a->waiting[i]->widx = i;
}

static void uhost_destroy(void **item)
{
	struct uhost *uh = *item;
	if (!uh)
		return;
	struct wb_budget *budget = uh->us.procs.budget;
	for (size_t i = 0; i < uh->qlen; i++) {
		struct pending *pd = &uh->q[(uh->qhead + i) % uh->qcap];
		wb_budget_move(budget, pd->bytes, 0);
		wb_msg_clear(&pd->msg);
	}
	wb_budget_move(budget, UHOST_BYTES, 0);
	free(uh->q);
	usage_free(&uh->us);
	free(uh->carries);
	free(uh->totals);
	free(uh);
	*item = NULL;
}

static void phost_destroy(void **item)
{
	struct phost *ph = *item;
	if (!ph)
		return;
	for (size_t i = 0; i < ph->ncurves; i++)
		curve_destroy(&ph->curves[i]);
	wb_budget_move(ph->budget, PHOST_BYTES, 0);
	free(ph->curves);
	free(ph);
	*item = NULL;
}

struct align *align_new(const struct align_conf *conf, align_emit_fn *emit, void *arg)
{
	struct align *a = calloc(1, sizeof(*a));
	if (!a)
		return NULL;
	a->emit = emit;
	a->arg = arg;
	a->uhosts = zhashx_new();
	a->phosts = zhashx_new();
	if (!a->uhosts || !a->phosts || conf_copy(&a->conf, conf) < 0) {
		align_destroy(&a);
		return NULL;
	}
	a->budget.max = conf->budget_bytes;
	zhashx_set_destructor(a->uhosts, uhost_destroy);
	zhashx_set_destructor(a->phosts, phost_destroy);
	a->rl_skew = a->rl_power = a->rl_usage = a->rl_host = a->rl_state =
	    (struct wb_ratelimit)WB_RATELIMIT_INIT;
	return a;
}

void align_destroy(struct align **self_p)
{
	if (!self_p || !*self_p)
		return;
	struct align *a = *self_p;
	zhashx_destroy(&a->uhosts);
	zhashx_destroy(&a->phosts);
	free(a->waiting);
	align_conf_free(&a->conf);
	free(a);
	*self_p = NULL;
}

int align_reconf(struct align *a, const struct align_conf *conf)
{
	if (conf_copy(&a->conf, conf) < 0)
		return -1;
	/* A lower budget refuses what comes next; what is held stays until its host goes. */
	a->budget.max = conf->budget_bytes;
	/* A remapped host starts new carries by itself: its carries name the old curves. */
	for (struct uhost *uh = zhashx_first(a->uhosts); uh; uh = zhashx_next(a->uhosts)) {
		uh->us.procs.max = conf->max_procs;
		uh->us.cgroups.tab.max = conf->max_cgroups;
		uh->us.exes.tab.max = conf->max_exes;
		power_name_of(a, uh->name, uh->power_name);
	}
	for (struct phost *ph = zhashx_first(a->phosts); ph; ph = zhashx_next(a->phosts))
		for (size_t i = 0; i < ph->ncurves; i++)
			ph->curves[i]->max_samples = conf->max_samples < 4 ? 4 : conf->max_samples;
	return 0;
}

const struct align_counters *align_counters(const struct align *a)
{
	return &a->cnt;
}

size_t align_budget_used(const struct align *a)
{
	return a->budget.used;
}

size_t align_nhosts(const struct align *a, size_t *npower)
{
	if (npower) {
		*npower = 0;
		for (struct phost *ph = zhashx_first(a->phosts); ph; ph = zhashx_next(a->phosts))
			*npower += !ph->away;
	}
	return zhashx_size(a->uhosts);
}

static void check_skew(struct align *a, const char *kind, const char *host, uint64_t t_ns,
		       uint64_t recv_ns)
{
	if (!a->conf.max_skew_ns)
		return;
	uint64_t d = recv_ns > t_ns ? recv_ns - t_ns : t_ns - recv_ns;
	if (d <= a->conf.max_skew_ns)
		return;
	a->cnt.clock_skew++;
	log_rl(
	    &a->rl_skew, WB_LOG_WARN,
	    "%s/%s: message time is %s%.3f s from its arrival, beyond max_skew %.3f s: check the clocks (NTP)",
	    kind, host, recv_ns > t_ns ? "-" : "+", (double)d / 1e9,
	    (double)a->conf.max_skew_ns / 1e9);
}

/* Make room for a new host record by forgetting the longest-silent one that holds no tables. */
static bool evict_one(struct align *a)
{
	struct uhost *victim = NULL;
	for (struct uhost *uh = zhashx_first(a->uhosts); uh; uh = zhashx_next(a->uhosts))
		if (!uh->live && (!victim || uh->last_recv_ns < victim->last_recv_ns))
			victim = uh;
	if (!victim)
		return false;
	zhashx_delete(a->uhosts, victim->name);
	return true;
}

struct uhost *uhost_get(struct align *a, const char *name)
{
	struct uhost *uh = zhashx_lookup(a->uhosts, name);
	if (uh)
		return uh;
	if (zhashx_size(a->uhosts) >= a->conf.max_hosts && !evict_one(a)) {
		a->cnt.hosts_refused++;
		log_rl(&a->rl_host, WB_LOG_WARN,
		       "usage/%s: refused, already tracking max_hosts %zu usage hosts", name,
		       a->conf.max_hosts);
		return NULL;
	}
	uh = calloc(1, sizeof(*uh));
	if (!uh)
		return NULL;
	snprintf(uh->name, sizeof(uh->name), "%s", name);
	power_name_of(a, name, uh->power_name);
	usage_init(&uh->us, a->conf.max_procs, a->conf.max_cgroups, a->conf.max_exes, &a->budget);
	wb_budget_move(&a->budget, 0, UHOST_BYTES);
	uh->live = true;
	zhashx_insert(a->uhosts, uh->name, uh);
	log_info("usage/%s: new usage host, power from %s", name, uh->power_name);
	return uh;
}

struct phost *phost_get(struct align *a, const char *name)
{
	struct phost *ph = zhashx_lookup(a->phosts, name);
	if (ph)
		return ph;
	struct phost *victim = NULL;
	for (struct phost *o = zhashx_first(a->phosts); o; o = zhashx_next(a->phosts))
		if (o->away && (!victim || o->last_recv_ns < victim->last_recv_ns))
			victim = o;
	if (zhashx_size(a->phosts) >= a->conf.max_hosts && victim)
		zhashx_delete(a->phosts,
			      victim->name); /* the longest away: its return starts over */
	if (zhashx_size(a->phosts) >= a->conf.max_hosts) {
		a->cnt.hosts_refused++;
		log_rl(&a->rl_host, WB_LOG_WARN,
		       "power/%s: refused, already tracking max_hosts %zu power hosts", name,
		       a->conf.max_hosts);
		return NULL;
	}
	ph = calloc(1, sizeof(*ph));
	if (!ph)
		return NULL;
	snprintf(ph->name, sizeof(ph->name), "%s", name);
	ph->budget = &a->budget;
	wb_budget_move(&a->budget, 0, PHOST_BYTES);
	zhashx_insert(a->phosts, ph->name, ph);
	log_info("power/%s: new power host", name);
	return ph;
}

/*
 * At ALIGN_ZONES_MAX the least recently updated curve makes room, unless every
 * curve is in the message being read (recv_ns): then the new zone is refused.
 */
static bool curve_evict(struct align *a, struct phost *ph, const char *zone_name, uint64_t recv_ns)
{
	size_t v = 0;
	for (size_t i = 1; i < ph->ncurves; i++)
		if (ph->curves[i]->last_recv_ns < ph->curves[v]->last_recv_ns)
			v = i;
	a->cnt.power_zones_evicted++;
	if (ph->curves[v]->last_recv_ns >= recv_ns) {
		log_rl(&a->rl_power, WB_LOG_WARN,
		       "power/%s zone %s: more than %d zones in one message: zone ignored",
		       ph->name, zone_name, ALIGN_ZONES_MAX);
		return false;
	}
	log_rl(
	    &a->rl_power, WB_LOG_WARN,
	    "power/%s: more than %d zones (renamed, or two producers under one host name?): zone %s, the least recently updated, dropped for %s",
	    ph->name, ALIGN_ZONES_MAX, ph->curves[v]->name, zone_name);
	curve_destroy(&ph->curves[v]);
	ph->curves[v] = ph->curves[--ph->ncurves];
	return true;
}

struct curve *curve_of(struct align *a, struct phost *ph, const char *zone_name, uint64_t recv_ns)
{
	for (size_t i = 0; i < ph->ncurves; i++)
		if (strcmp(ph->curves[i]->name, zone_name) == 0)
			return ph->curves[i];
	if (ph->ncurves >= ALIGN_ZONES_MAX && !curve_evict(a, ph, zone_name, recv_ns))
		return NULL;
	struct curve **cv = realloc(ph->curves, (ph->ncurves + 1) * sizeof(*cv));
	if (!cv)
		return NULL;
	ph->curves = cv;
	struct curve *c = curve_new(++a->next_curve_id, a->conf.max_samples);
	if (!c)
		return NULL;
	snprintf(c->name, sizeof(c->name), "%s", zone_name);
	c->budget = &a->budget;
	cv[ph->ncurves++] = c;
	return c;
}

/* ---- resolution ---- */

struct carry *carry_of(struct uhost *uh, const char *zone_name)
{
	for (size_t i = 0; i < uh->ncarries; i++)
		if (strcmp(uh->carries[i].name, zone_name) == 0)
			return &uh->carries[i];
	if (wb_grow(&uh->carries, &uh->capcarries, uh->ncarries + 1, sizeof(*uh->carries), 8) < 0)
		return NULL;
	struct carry *c = &uh->carries[uh->ncarries++];
	memset(c, 0, sizeof(*c));
	snprintf(c->name, sizeof(c->name), "%s", zone_name);
	return c;
}

/* ---- totals ---- */

/* Start a new count of totals for uh: t_ns (a time of the host) names it, unique in this alignd. */
static void totals_start(struct align *a, struct uhost *uh, uint64_t t_ns)
{
	uh->total_epoch = wb_mark_next(&a->last_total_epoch, t_ns);
	uh->ntotals = 0;
}

static struct zone_total *total_find(struct uhost *uh, const char *name)
{
	for (size_t i = 0; i < uh->ntotals; i++)
		if (strcmp(uh->totals[i].name, name) == 0)
			return &uh->totals[i];
	return NULL;
}

/* The zone's total, created at 0; NULL when the table is full or on ENOMEM. */
struct zone_total *total_get(struct uhost *uh, const char *name)
{
	struct zone_total *zt = total_find(uh, name);
	if (zt)
		return zt;
	if (uh->ntotals >= TOTALS_MAX)
		return NULL;
	if (!uh->totals) {
		uh->totals = calloc(TOTALS_MAX, sizeof(*uh->totals));
		if (!uh->totals)
			return NULL;
	}
	zt = &uh->totals[uh->ntotals++];
	snprintf(zt->name, sizeof(zt->name), "%s", name);
	zt->uj = 0;
	return zt;
}

/*
 * Zone names come and go (a power host remapped, zones dropped): a host that
 * has seen more than TOTALS_MAX names starts a new count rather than forget
 * one total, which would make it go back within its epoch.
 */
static void totals_make_room(struct align *a, struct uhost *uh, const struct phost *ph,
			     uint64_t t_ns)
{
	size_t missing = 0;
	for (size_t i = 0; ph && i < ph->ncurves; i++)
		missing += !total_find(uh, ph->curves[i]->name);
	if (uh->ntotals + missing <= TOTALS_MAX)
		return;
	log_rl(&a->rl_host, WB_LOG_INFO,
	       "usage/%s: more than %d zone names since its totals started: new total_epoch",
	       uh->name, TOTALS_MAX);
	totals_start(a, uh, t_ns);
}

/*
 * E(t) of curve c for a slot boundary. Within snap after the last sample the
 * value is that sample's: usaged stamps the moment it read, a fraction of a
 * millisecond after the grid instant powerd stamps, and an extrapolation over
 * that span could hand out energy the meter never counts (it stops, or power
 * drops), which no later slot could take back; the next slot gets the span.
 */
static enum curve_pos boundary_at(const struct align *a, const struct curve *c, uint64_t t_ns,
				  uint64_t *e_uj)
{
	enum curve_pos p = curve_at(c, t_ns, e_uj);
	if (p == CURVE_AFTER && t_ns - curve_last_t(c) <= a->conf.snap_ns)
		p = curve_at(c, curve_last_t(c), e_uj); /* CURVE_INSIDE */
	return p;
}

/* Fill the zones and quality of slot from the power host's curves. */
static void fill_energy(struct align *a, struct uhost *uh, struct phost *ph,
			struct wb_aligned *slot)
{
	uint64_t t0 = slot->t0, t1 = slot->t1;
	struct wb_slot_zone *zones = ph ? wb_array_new(ph->ncurves, sizeof(*zones)) : NULL;
	size_t nz = 0;
	double coverage = 1.0;
	bool interpolated = true, extrapolated = false, gap = false;

	for (size_t i = 0; i < uh->ncarries; i++)
		uh->carries[i].seen = false;
	if (!uh->total_epoch)
		totals_start(a, uh, t1);
	totals_make_room(a, uh, ph, t1);
	slot->total_epoch = uh->total_epoch;
	for (size_t i = 0; zones && i < ph->ncurves; i++) {
		struct curve *c = ph->curves[i];
		struct carry *cy = carry_of(uh, c->name);
		if (!cy)
			continue;
		cy->seen = true;
		if (t1 <= c->first_t_ns)
			continue; /* first sample at or after the slot's end: not measured */
		uint64_t e0, e1;
		if (cy->curve_id != c->id) {
			/* No baseline (first slot, new zone, power host back): E(t0) from it. */
			enum curve_pos p0 = boundary_at(a, c, t0, &e0);
			if (p0 == CURVE_NONE)
				continue;
			carry_set(cy, c->id, e0, p0 == CURVE_AFTER);
			if (p0 != CURVE_INSIDE)
				interpolated = false;
		}
		enum curve_pos p1 = boundary_at(a, c, t1, &e1);
		bool x1 = p1 == CURVE_AFTER;
		if (p1 == CURVE_NONE || p1 == CURVE_BEFORE)
			continue; /* pruned past t1 (max_samples): nothing to say */
		if (cy->ahead || x1)
			interpolated = false;
		extrapolated |= x1;
		struct wb_slot_zone *z = &zones[nz++];
		z->energy_uj = carry_take(cy, e1, x1);
		struct zone_total *zt = total_get(uh, c->name);
		if (zt) {
			bool sat = false;
			zt->uj = wb_sat_add(zt->uj, z->energy_uj, &sat);
			a->cnt.totals_saturated += sat;
			z->total_uj = zt->uj;
		}
		snprintf(z->name, sizeof(z->name), "%s", c->name);
		memcpy(z->zone, c->zone, sizeof(z->zone));
		memcpy(z->path, c->path, sizeof(z->path));
		z->index = c->index;
		if (gpu_slot_fill(c, t0, t1, z) < 0)
			a->cnt.gpu_weights_dropped++;
		double cov = (double)curve_covered_ns(c, t0, t1) / (double)(t1 - t0);
		if (cov < coverage)
			coverage = cov;
		gap |= curve_gap_in(c, t0, t1);
	}
	/* Without power the carries stay: the slot after power's return takes what the
	 * meter counted meanwhile (or gives back an overshoot), and says it is not interpolated. */
	for (size_t i = 0; !ph && i < uh->ncarries; i++)
		uh->carries[i].ahead = true;
	/* Zones the power host no longer has: forget their carries. */
	size_t k = 0;
	for (size_t i = 0; i < uh->ncarries; i++)
		if (uh->carries[i].seen || !ph)
			uh->carries[k++] = uh->carries[i];
	uh->ncarries = k;

	if (nz == 0) {
		free(zones);
		slot->zones = NULL;
		slot->n_zones = 0;
		slot->power_host[0] = '\0';
		slot->quality.coverage = 0;
		a->cnt.slots_no_power++;
		return;
	}
	slot->zones = zones;
	slot->n_zones = nz;
	snprintf(slot->power_host, sizeof(slot->power_host), "%s", ph->name);
	slot->quality.coverage = coverage;
	slot->quality.interpolated = interpolated;
	slot->quality.extrapolated = extrapolated;
	slot->quality.gap = gap;
	a->cnt.slots_extrapolated += extrapolated;
	a->cnt.slots_gap += gap;
}

/* Emit the oldest waiting slot of uh if its wait is over (or force). Returns whether it did. */
static bool resolve_head(struct align *a, struct uhost *uh, uint64_t now_ns, bool force)
{
	struct pending *pd = &uh->q[uh->qhead];
	struct wb_aligned *slot = &pd->msg.aligned;
	struct phost *ph = zhashx_lookup(a->phosts, uh->power_name);
	if (ph && ph->away)
		ph = NULL;
	/* Within snap of the last sample no wait: producers' stamps differ by that much. */
	if (ph && ph->have_t && !force && ph->last_t < slot->t1 &&
	    slot->t1 - ph->last_t > a->conf.snap_ns) {
		uint64_t lag = a->conf.max_lag_ns ? a->conf.max_lag_ns : 2 * ph->interval_ns;
		if (now_ns < pd->recv_ns + lag)
			return false;
	}
	if (force)
		a->cnt.slots_forced++;
	/* Power missing for longer than EXTRAP_INTERVALS is not guessed: the slot goes without
	 * zones and the carries wait for the meter's own count when power is back. */
	if (ph && ph->have_t && ph->interval_ns && slot->t1 > ph->last_t &&
	    slot->t1 - ph->last_t > EXTRAP_INTERVALS * ph->interval_ns)
		ph = NULL;
	fill_energy(a, uh, ph && ph->have_t ? ph : NULL, slot);
	slot->quality.lag_ns = now_ns > pd->recv_ns ? now_ns - pd->recv_ns : 0;
	a->cnt.slots++;
	a->emit(&pd->msg, a->arg);
	wb_msg_clear(&pd->msg);
	wb_budget_move(&a->budget, pd->bytes, 0);
	pd->bytes = 0;
	uh->qhead = (uh->qhead + 1) % uh->qcap;
	uh->qlen--;
	return true;
}

static void resolve(struct align *a, struct uhost *uh, uint64_t now_ns, bool force)
{
	while (uh->qlen && resolve_head(a, uh, now_ns, force))
		;
	if (!uh->qlen)
		waiting_remove(a, uh);
}

static int enqueue(struct align *a, struct uhost *uh, struct pending *pd, uint64_t now_ns)
{
	if (uh->qlen && uh->qlen >= a->conf.max_pending)
		resolve_head(a, uh, now_ns,
			     true); /* power is far behind: do not hold unbounded slots */
	if (uh->qlen == uh->qcap) {
		size_t cap = uh->qcap ? uh->qcap * 2 : 4;
		struct pending *q = malloc(cap * sizeof(*q));
		if (!q)
			return -1;
		for (size_t i = 0; i < uh->qlen; i++)
			q[i] = uh->q[(uh->qhead + i) % uh->qcap];
		free(uh->q);
		uh->q = q;
		uh->qcap = cap;
		uh->qhead = 0;
	}
	const struct wb_aligned *s = &pd->msg.aligned;
	pd->bytes = 2 * sizeof(*pd) + s->n_procs * sizeof(*s->procs) +
		    s->n_cgroups * sizeof(*s->cgroups) + s->n_exes * sizeof(*s->exes) +
		    s->n_counters * sizeof(*s->counters);
	bool room = wb_budget_fits(&a->budget, pd->bytes);
	wb_budget_move(&a->budget, 0, pd->bytes);
	waiting_add(a, uh);
	uh->q[(uh->qhead + uh->qlen) % uh->qcap] = *pd;
	uh->qlen++;
	/* Beyond the budget nothing waits for power: the host's slots go out now. */
	if (!room)
		resolve(a, uh, now_ns, true);
	return 0;
}

/* ---- input ---- */

/*
 * A frame from a host new to alignd is refused when its record and tables
 * would not fit the budget (no record is made); a known host's frame is kept,
 * with the processes and cgroups that fit (procs_dropped), so that hosts
 * already tracked keep their slots whatever others send.
 */
static bool budget_admits(struct align *a, const char *kind, const char *host, bool is_new,
			  size_t growth)
{
	if (wb_budget_fits(&a->budget, growth))
		return true;
	if (is_new)
		a->cnt.budget_refused++;
	else
		a->cnt.budget_short++;
	log_rl(
	    &a->rl_host, WB_LOG_WARN,
	    "%s/%s: %s: it needs %zu KiB more and the memory budget has %zu of %zu MiB in use (budget_mib)",
	    kind, host, is_new ? "refused" : "kept in part", growth >> 10, a->budget.used >> 20,
	    a->budget.max >> 20);
	return !is_new;
}

/* Bytes the curves of ph would grow by to take p's zones. */
static size_t power_growth(const struct phost *ph, const struct wb_power *p)
{
	size_t bytes = 0;
	for (size_t i = 0; i < p->n_zones; i++) {
		const struct curve *c = NULL;
		for (size_t k = 0; k < ph->ncurves && !c; k++)
			if (strcmp(ph->curves[k]->name, p->zones[i].name) == 0)
				c = ph->curves[k];
		if (!c)
			bytes += 16 * sizeof(struct curve_sample);
		else if (c->n == c->cap && c->cap < c->max_samples)
			bytes +=
			    (c->cap < c->max_samples - c->cap ? c->cap : c->max_samples - c->cap) *
			    sizeof(struct curve_sample);
	}
	return bytes;
}

/* A sample of the host's own producer (own), or of a deliberate second meter beside it
 * ([global] extra_power_src): that one's zones are its own, each judged by its curve, and it
 * leaves the host's time line (last sample, epoch, interval) to the producer. */
static void power_in(struct align *a, const struct wb_power *p, uint64_t recv_ns, bool own)
{
	check_skew(a, "power", p->env.host, p->t, recv_ns);
	struct phost *ph = zhashx_lookup(a->phosts, p->env.host);
	static const struct phost empty;
	size_t growth = ph ? power_growth(ph, p) : PHOST_BYTES + power_growth(&empty, p);
	if (!budget_admits(a, "power", p->env.host, !ph, growth))
		return;
	if (!ph && !(ph = phost_get(a, p->env.host)))
		return;
	ph->last_recv_ns = recv_ns;
	if (ph->away) {
		ph->away = false;
		log_info("power/%s: back after silence; its zones continue from their last values",
			 ph->name);
	}
	if (!own) {
		/* the second meter's samples: each curve judges its own times */
	} else if (ph->have_t && p->t <= ph->last_t && wb_rewind_see(&ph->rewind, p->t)) {
		a->cnt.clock_rewinds++;
		log_warnx("power/%s: %d samples in a row behind t=%" PRIu64
			  ": its clock was set back; the time line continues from t=%" PRIu64,
			  p->env.host, WB_REWIND_SAMPLES, ph->last_t, p->t);
		for (size_t i = 0; i < ph->ncurves; i++) {
			struct curve *c = ph->curves[i];
			if (curve_last_t(c) >= p->t && !curve_rewind(c, p->t)) {
				/* only samples from the clock ahead: the curve starts over, its
				 * carries too */
				c->n = 0;
				c->id = ++a->next_curve_id;
			}
		}
	} else if (ph->have_t && p->t <= ph->last_t) {
		a->cnt.power_stale++;
		log_rl(&a->rl_power, WB_LOG_WARN,
		       "power/%s: sample at t=%" PRIu64 " is not after the last one (%" PRIu64
		       "): ignored",
		       p->env.host, p->t, ph->last_t);
		return;
	}
	if (own)
		wb_rewind_reset(&ph->rewind);
	if (own && ph->have_t && p->env.epoch != ph->epoch)
		log_info("power/%s: new power epoch %" PRIu64 " (was %" PRIu64 ")", p->env.host,
			 p->env.epoch, ph->epoch);
	for (size_t i = 0; i < p->n_zones; i++) {
		const struct wb_power_zone *z = &p->zones[i];
		struct curve *c = curve_of(a, ph, z->name, recv_ns);
		if (!c)
			continue;
		uint64_t before = c->raw_last_uj, delta;
		enum curve_event ev =
		    curve_add(c, p->t, p->env.epoch, z->energy_uj, z->max_energy_range_uj,
			      a->conf.bridge_max_w, &delta);
		switch (ev) {
		case CURVE_BRIDGED:
			a->cnt.power_bridged++;
			log_info(
			    "power/%s zone %s: powerd restarted and the counter continues (%" PRIu64
			    " -> %" PRIu64 " uJ): bridged, +%" PRIu64 " uJ",
			    p->env.host, z->name, before, z->energy_uj, delta);
			break;
		case CURVE_DISCONTINUITY:
			a->cnt.power_discontinuities++;
			log_rl(
			    &a->rl_power, WB_LOG_WARN,
			    "power/%s zone %s: counter went from %" PRIu64 " to %" PRIu64
			    " uJ without continuing: discontinuity, energy across it unknown (slots flagged gap)",
			    p->env.host, z->name, before, z->energy_uj);
			break;
		case CURVE_NOMEM:
			log_rl(&a->rl_power, WB_LOG_WARN, "power/%s: out of memory", p->env.host);
			break;
		case CURVE_STALE:
			a->cnt.power_stale++;
			break;
		case CURVE_APPENDED:
			break;
		}
		c->last_recv_ns = recv_ns;
		if ((z->uuid[0] || z->n_gpu_procs || c->gpu) && ev != CURVE_STALE &&
		    ev != CURVE_NOMEM && gpu_ring_add(c, p->t, p->interval_ns, z) < 0)
			a->cnt.gpu_weights_dropped++;
		memcpy(c->zone, z->zone, sizeof(c->zone));
		memcpy(c->path, z->path, sizeof(c->path));
		c->index = z->index;
	}
	if (own) {
		ph->last_t = p->t;
		ph->have_t = true;
		ph->epoch = p->env.epoch;
		ph->interval_ns = p->interval_ns;
	}
	a->cnt.power_samples++;
	/* Slots waiting for this host may be ready now. */
	for (size_t i = 0; i < a->nwaiting;) {
		struct uhost *uh = a->waiting[i];
		size_t before_n = a->nwaiting;
		if (strcmp(uh->power_name, ph->name) == 0)
			resolve(a, uh, recv_ns, false);
		if (a->nwaiting == before_n)
			i++; /* else uh left and another took index i */
	}
}

void align_power(struct align *a, const struct wb_power *p, uint64_t recv_ns)
{
	power_in(a, p, recv_ns, true);
}

void align_power_meter(struct align *a, const struct wb_power *p, uint64_t recv_ns)
{
	power_in(a, p, recv_ns, false);
}

void align_usage(struct align *a, const struct wb_usage *u, uint64_t lost, uint64_t recv_ns)
{
	check_skew(a, "usage", u->env.host, u->t, recv_ns);
	/* Checked before a record is made: a refused host costs nothing, not even a log line. */
	struct uhost *uh = zhashx_lookup(a->uhosts, u->env.host);
	size_t growth;
	if (uh) {
		growth = usage_growth(&uh->us, u);
	} else {
		struct usage_state empty;
		usage_init(&empty, a->conf.max_procs, a->conf.max_cgroups, a->conf.max_exes, NULL);
		growth = UHOST_BYTES + usage_growth(&empty, u);
	}
	if (!budget_admits(a, "usage", u->env.host, !uh, growth))
		return;
	if (!uh && !(uh = uhost_get(a, u->env.host)))
		return;
	uh->last_recv_ns = recv_ns;
	if (!uh->live) {
		log_info("usage/%s: back after silence; the next slot spans it", uh->name);
		uh->live = true;
	}
	if (uh->have_t && u->env.epoch != uh->epoch) {
		a->cnt.usage_epochs++;
		log_info("usage/%s: new usage epoch %" PRIu64 " (was %" PRIu64
			 "): process table restarts",
			 uh->name, u->env.epoch, uh->epoch);
		usage_forget_procs(&uh->us);
		/* usaged counts node CPU time from its own start: the new epoch's totals
		 * are deltas from zero, never from the old epoch's values. */
		memset(&uh->us.cpu, 0, sizeof(uh->us.cpu));
		if (u->t <= uh->last_t) {
			/* The clock went back across the restart: start over from this sample. */
			resolve(a, uh, recv_ns, true);
			uh->have_t = false;
			uh->ncarries = 0; /* their boundary is later than the new start */
			totals_start(a, uh,
				     u->t); /* a new time line: consumers must not diff across */
		}
	} else if (uh->have_t && u->t <= uh->last_t && wb_rewind_see(&uh->rewind, u->t)) {
		a->cnt.clock_rewinds++;
		log_warnx("usage/%s: %d samples in a row behind t=%" PRIu64
			  ": its clock was set back; a new baseline at t=%" PRIu64,
			  uh->name, WB_REWIND_SAMPLES, uh->last_t, u->t);
		resolve(a, uh, recv_ns, true);
		uh->have_t = false;
		uh->ncarries = 0;
		totals_start(a, uh, u->t); /* a new time line: consumers must not diff across */
	} else if (uh->have_t && u->t <= uh->last_t) {
		a->cnt.usage_stale++;
		log_rl(&a->rl_usage, WB_LOG_WARN,
		       "usage/%s: sample at t=%" PRIu64 " is not after the last one (%" PRIu64
		       "): ignored",
		       uh->name, u->t, uh->last_t);
		return;
	}
	wb_rewind_reset(&uh->rewind);
	uh->epoch = u->env.epoch;
	if (!uh->total_epoch)
		totals_start(a, uh, u->t);
	if (!uh->have_t) {
		usage_baseline(&uh->us, u, &a->cnt.usage);
		uh->last_t = u->t;
		uh->have_t = true;
		uh->lost_acc = 0;
		a->cnt.usage_baselines++;
		return;
	}
	if (a->conf.max_slot_ns && u->t - uh->last_t > a->conf.max_slot_ns) {
		/* A slot that long would be refused downstream (max_slot): the span has no
		 * slot and counting starts again from this sample. */
		a->cnt.slots_too_long++;
		log_rl(
		    &a->rl_usage, WB_LOG_WARN,
		    "usage/%s: %.0f s since its last sample, more than max_slot: no slot for the span, a new baseline at t=%" PRIu64,
		    uh->name, (double)(u->t - uh->last_t) / 1e9, u->t);
		resolve(a, uh, recv_ns, true);
		uh->ncarries = 0; /* the next slot starts from E(t0), not from before the span */
		usage_baseline(&uh->us, u, &a->cnt.usage);
		uh->last_t = u->t;
		uh->lost_acc = 0;
		return;
	}
	uh->lost_acc += lost;

	struct pending pd = {.msg.kind = WB_ALIGNED, .recv_ns = recv_ns};
	struct wb_aligned *slot = &pd.msg.aligned;
	snprintf(slot->env.host, sizeof(slot->env.host), "%s", uh->name);
	slot->t0 = uh->last_t;
	slot->t1 = u->t;
	slot->ncpu = u->ncpu;
	if (u->n_counters &&
	    (slot->counters = wb_array_new(u->n_counters, sizeof(*slot->counters))))
		slot->n_counters = u->n_counters;
	for (size_t i = 0; i < slot->n_counters; i++)
		memcpy(slot->counters[i], u->counters[i], sizeof(slot->counters[i]));
	if (usage_slot(&uh->us, u, uh->last_t, uh->lost_acc, slot, &a->cnt.usage) < 0) {
		log_rl(&a->rl_usage, WB_LOG_WARN,
		       "usage/%s: out of memory; the next slot covers this one", uh->name);
		wb_msg_clear(&pd.msg);
		return;
	}
	slot->quality.usage_lost = uh->lost_acc;
	uh->lost_acc = 0;
	uh->last_t = u->t;
	if (enqueue(a, uh, &pd, recv_ns) < 0) {
		log_rl(&a->rl_usage, WB_LOG_WARN,
		       "usage/%s: out of memory: slot [%" PRIu64 ", %" PRIu64 "] lost", uh->name,
		       slot->t0, slot->t1);
		wb_msg_clear(&pd.msg);
		return;
	}
	resolve(a, uh, recv_ns, false);
}

/* ---- time ---- */

/* Every second: drop silent hosts and zones, prune samples no slot can need. */
static void sweep(struct align *a, uint64_t now_ns)
{
	uint64_t to = a->conf.host_timeout_ns;
	for (struct uhost *uh = zhashx_first(a->uhosts); uh; uh = zhashx_next(a->uhosts)) {
		if (!uh->live || now_ns < uh->last_recv_ns + to)
			continue;
		resolve(a, uh, now_ns, true);
		usage_free(&uh->us);
		uh->live = false;
		a->cnt.hosts_dropped++;
		log_info(
		    "usage/%s: silent for %.0f s: process, cgroup and executable tables dropped",
		    uh->name, (double)to / 1e9);
	}
	for (struct phost *ph = zhashx_first(a->phosts); ph; ph = zhashx_next(a->phosts)) {
		if (ph->away)
			continue;
		if (now_ns >= ph->last_recv_ns + to) {
			/* One sample per zone stays: a returning powerd adds on or is bridged. */
			for (size_t i = 0; i < ph->ncurves; i++)
				curve_prune(ph->curves[i], curve_last_t(ph->curves[i]));
			ph->away = true;
			ph->keep_from_ns = ph->last_t;
			a->cnt.hosts_dropped++;
			log_info(
			    "power/%s: silent for %.0f s: its slots go without power until it is back",
			    ph->name, (double)to / 1e9);
			continue;
		}
		size_t k = 0;
		for (size_t i = 0; i < ph->ncurves; i++) {
			if (now_ns >= ph->curves[i]->last_recv_ns + to) {
				log_info("power/%s zone %s: absent for %.0f s: dropped", ph->name,
					 ph->curves[i]->name, (double)to / 1e9);
				curve_destroy(&ph->curves[i]);
			} else {
				ph->curves[k++] = ph->curves[i];
			}
		}
		ph->ncurves = k;
		/* Keep a few intervals of history for a usage host that is about to start. */
		uint64_t hist = 4 * ph->interval_ns;
		ph->keep_from_ns = ph->last_t > hist ? ph->last_t - hist : 0;
	}
	/* Samples before the earliest boundary a live usage host may still ask for go. */
	for (struct uhost *uh = zhashx_first(a->uhosts); uh; uh = zhashx_next(a->uhosts)) {
		if (!uh->live || !uh->have_t)
			continue;
		struct phost *ph = zhashx_lookup(a->phosts, uh->power_name);
		if (!ph || ph->away)
			continue;
		uint64_t need = uh->qlen ? uh->q[uh->qhead].msg.aligned.t0 : uh->last_t;
		if (need < ph->keep_from_ns)
			ph->keep_from_ns = need;
	}
	for (struct phost *ph = zhashx_first(a->phosts); ph; ph = zhashx_next(a->phosts))
		for (size_t i = 0; i < ph->ncurves; i++)
			curve_prune(ph->curves[i], ph->keep_from_ns);
}

void align_tick(struct align *a, uint64_t now_ns)
{
	for (size_t i = 0; i < a->nwaiting;) {
		size_t before_n = a->nwaiting;
		resolve(a, a->waiting[i], now_ns, false);
		if (a->nwaiting == before_n)
			i++;
	}
	align_sweep(a, now_ns);
}

void align_sweep(struct align *a, uint64_t now_ns)
{
	if (now_ns >= a->last_sweep_ns + SWEEP_NS) {
		a->last_sweep_ns = now_ns;
		sweep(a, now_ns);
	}
}

uint64_t align_next_tick_ns(const struct align *a)
{
	uint64_t next = a->last_sweep_ns + SWEEP_NS + SWEEP_LATE_NS;
	for (size_t i = 0; i < a->nwaiting; i++) {
		const struct uhost *uh = a->waiting[i];
		if (!uh->qlen)
			continue;
		const struct pending *pd = &uh->q[uh->qhead];
		const struct phost *ph = zhashx_lookup(a->phosts, uh->power_name);
		/* The wait that resolve_head applies; a slot it would not hold is due now. */
		uint64_t due = 0;
		if (ph && !ph->away && ph->have_t) {
			uint64_t lag =
			    a->conf.max_lag_ns ? a->conf.max_lag_ns : 2 * ph->interval_ns;
			due = pd->recv_ns + lag;
		}
		if (due < next)
			next = due;
	}
	return next;
}

bool align_timer_keeps(uint64_t armed_ns, uint64_t deadline_ns, uint64_t at_ns)
{
	return armed_ns + WB_NS_PER_MS > deadline_ns && armed_ns < at_ns + WB_NS_PER_MS;
}

void align_flush(struct align *a, uint64_t now_ns)
{
	while (a->nwaiting)
		resolve(a, a->waiting[0], now_ns, true);
}

/* ---- state across alignd restarts ---- */

/* Node CPU totals at the start of uh's oldest waiting slot: the last ones minus the waiting deltas.
 */
struct wb_cpu_times cpu_at_boundary(const struct uhost *uh)
{
	struct wb_cpu_times c = uh->us.cpu;
	uint64_t *ct = (uint64_t *)&c;
	for (size_t i = 0; i < uh->qlen; i++) {
		const uint64_t *d =
		    (const uint64_t *)&uh->q[(uh->qhead + i) % uh->qcap].msg.aligned.cpu;
		for (size_t k = 0; k < sizeof(c) / sizeof(uint64_t); k++)
			ct[k] = ct[k] > d[k] ? ct[k] - d[k] : 0; /* a reboot inside: near enough */
	}
	return c;
}
