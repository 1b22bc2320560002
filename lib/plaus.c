/*
 * Plausibility rules shared by the stages: the message times checked on receipt
 * (a table of where each kind keeps its times), saturating sums and marks, the
 * physical bound on energy with what each stream said last, and the one rule that
 * turns a model's answer into a zone's power.
 */
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <czmq.h>

#include "plaus.h"

/* Where each kind keeps its times: t, or the slot t0 .. t1. */
static const struct {
	const char *t0, *t1; /* key names, for the error message */
	size_t off0, off1;   /* offsets in struct wb_msg; off1 == 0: no slot */
} times[WB_NKINDS] = {
    [WB_POWER] = {"t", NULL, offsetof(struct wb_msg, power.t), 0},
    [WB_USAGE] = {"t", NULL, offsetof(struct wb_msg, usage.t), 0},
    [WB_ALIGNED] = {"t0", "t1", offsetof(struct wb_msg, aligned.t0),
		    offsetof(struct wb_msg, aligned.t1)},
    [WB_ESTIMATE] = {"t0", "t1", offsetof(struct wb_msg, estimate.t0),
		     offsetof(struct wb_msg, estimate.t1)},
    [WB_MODEL] = {"t", NULL, offsetof(struct wb_msg, model.t), 0},
    [WB_STAT] = {"t", NULL, offsetof(struct wb_msg, stat.t), 0},
};

static uint64_t field(const struct wb_msg *msg, size_t off)
{
	return *(const uint64_t *)((const char *)msg + off);
}

static int time_check(const struct wb_plaus *p, const char *key, uint64_t t, uint64_t now_ns,
		      struct wb_err *err)
{
	if (p->max_ahead_ns && t > now_ns && t - now_ns > p->max_ahead_ns) {
		err->reason = WB_R_IMPLAUSIBLE_TIME;
		snprintf(err->msg, sizeof(err->msg),
			 "%s %" PRIu64 " is %.3f s ahead of this host's clock (max_ahead %.3f s)",
			 key, t, (double)(t - now_ns) / 1e9, (double)p->max_ahead_ns / 1e9);
		return -1;
	}
	if (p->max_behind_ns && t < now_ns && now_ns - t > p->max_behind_ns) {
		err->reason = WB_R_IMPLAUSIBLE_TIME;
		snprintf(err->msg, sizeof(err->msg),
			 "%s %" PRIu64 " is %.3f s behind this host's clock (max_behind %.3f s)",
			 key, t, (double)(now_ns - t) / 1e9, (double)p->max_behind_ns / 1e9);
		return -1;
	}
	return 0;
}

int wb_plaus_check(const struct wb_plaus *p, const struct wb_msg *msg, uint64_t now_ns,
		   struct wb_err *err)
{
	if (!p || msg->kind < 0 || msg->kind >= WB_NKINDS || !times[msg->kind].t0)
		return 0;
	uint64_t t0 = field(msg, times[msg->kind].off0);
	if (time_check(p, times[msg->kind].t0, t0, now_ns, err) < 0)
		return -1;
	if (!times[msg->kind].off1)
		return 0;
	uint64_t t1 = field(msg, times[msg->kind].off1);
	if (time_check(p, times[msg->kind].t1, t1, now_ns, err) < 0)
		return -1;
	if (t1 < t0) {
		err->reason = WB_R_IMPLAUSIBLE_TIME;
		snprintf(err->msg, sizeof(err->msg),
			 "slot t0 %" PRIu64 " .. t1 %" PRIu64 " goes back", t0, t1);
		return -1;
	}
	if (p->max_slot_ns && t1 - t0 > p->max_slot_ns) {
		err->reason = WB_R_IMPLAUSIBLE_TIME;
		snprintf(err->msg, sizeof(err->msg),
			 "slot of %.3f s is longer than max_slot %.3f s", (double)(t1 - t0) / 1e9,
			 (double)p->max_slot_ns / 1e9);
		return -1;
	}
	return 0;
}

uint64_t wb_mark_next(uint64_t *last, uint64_t t)
{
	uint64_t next = t > *last ? t : *last + 1;
	if (*last >= WB_WIRE_MAX || next > WB_WIRE_MAX)
		next = t ? t : 1;
	if (next > WB_WIRE_MAX)
		next = WB_WIRE_MAX;
	*last = next;
	return next;
}

uint64_t wb_plaus_energy_max_uj(uint64_t dt_ns, double max_w)
{
	/* W * ns / 1e3 is uJ */
	double e = max_w * (double)dt_ns / 1e3;
	if (!(e >= 0))
		return 0;
	return e >= (double)WB_WIRE_MAX ? WB_WIRE_MAX : (uint64_t)e;
}

bool wb_rewind_see(struct wb_rewind *r, uint64_t t)
{
	r->n = r->n && t > r->last_t ? r->n + 1 : 1;
	r->last_t = t;
	if (r->n < WB_REWIND_SAMPLES)
		return false;
	r->n = 0;
	return true;
}

static double clip_w(double w, double max_w)
{
	if (!isfinite(w) || w < 0)
		return 0;
	return w > max_w ? max_w : w;
}

enum wb_power_fault wb_plaus_zone_power(double p_w, double p0_w, double max_w,
					struct wb_zone_power *out)
{
	if (!(max_w >= 0))
		max_w = 0;
	out->node_w = clip_w(p_w, max_w);
	out->idle_w = clip_w(p0_w, max_w);
	if (out->idle_w > out->node_w)
		out->idle_w = out->node_w;
	out->active_w = out->node_w - out->idle_w;
	if (!isfinite(p_w) || !isfinite(p0_w))
		return WB_POWER_NONFINITE;
	if (p_w > max_w || p0_w > max_w)
		return WB_POWER_ABOVE;
	if (p_w < 0 || p0_w < 0)
		return WB_POWER_NEGATIVE;
	if (p0_w > p_w)
		return WB_POWER_IDLE_ABOVE;
	return WB_POWER_OK;
}

const char *wb_power_fault_name(enum wb_power_fault f)
{
	switch (f) {
	case WB_POWER_OK:
		return "plausible";
	case WB_POWER_NONFINITE:
		return "not finite";
	case WB_POWER_ABOVE:
		return "above the zone's bound";
	case WB_POWER_NEGATIVE:
		return "negative";
	case WB_POWER_IDLE_ABOVE:
		return "idle above total";
	}
	return "?";
}

int wb_plaus_power(const struct wb_plaus *p, const char *what, const struct wb_claim *c, size_t n,
		   struct wb_err *err)
{
	if (!p)
		return 0;
	double host_w = 0;
	for (size_t i = 0; i < n; i++) {
		/* uJ per ns * 1e3 is watts; energy in no time is more than any bound */
		double w = c[i].dt_ns ? (double)c[i].e_uj * 1e3 / (double)c[i].dt_ns
				      : (c[i].e_uj ? INFINITY : 0);
		if (p->max_zone_w > 0 &&
		    c[i].e_uj > wb_plaus_energy_max_uj(c[i].dt_ns, p->max_zone_w)) {
			err->reason = WB_R_IMPLAUSIBLE_POWER;
			snprintf(err->msg, sizeof(err->msg),
				 "%s zone %.63s: %" PRIu64
				 " uJ in %.3f s is %.4g W, more than max_zone_w %.0f W",
				 what, c[i].zone, c[i].e_uj, (double)c[i].dt_ns / 1e9, w,
				 p->max_zone_w);
			return -1;
		}
		host_w += w;
	}
	if (p->max_host_w > 0 && host_w > p->max_host_w) {
		err->reason = WB_R_IMPLAUSIBLE_POWER;
		snprintf(err->msg, sizeof(err->msg),
			 "%s: %zu zones draw %.4g W together, more than max_host_w %.0f W", what, n,
			 host_w, p->max_host_w);
		return -1;
	}
	return 0;
}

/* ---- the bound over a stream ---- */

#define BOUND_HOST_ZONES 256 /* a message carries at most 256 zones (schemas) */
#define BOUND_KEY_MAX                                                                              \
	(sizeof(((struct wb_envelope *)0)->kind) + sizeof(((struct wb_envelope *)0)->host))

struct bzone {
	char name[64];
	char src[sizeof(((struct wb_envelope *)0)->src)];
	uint64_t epoch; /* power: the producer's epoch; slots: total_epoch */
	uint64_t t;	/* power: the last sample's t; slots: the last slot's t1 */
	uint64_t uj;	/* power: the counter; slots: total_uj */
	/* Its last accepted claim (a counter step, a slot's energy): e_uj over the claim_ns
	 * before t. A message that leaves it out is judged with it where the spans overlap, so
	 * that zones spread over several messages still sum to the host's bound. */
	uint64_t claim_uj, claim_ns;
};

struct bhost {
	uint64_t used; /* the stream's tick when last seen */
	size_t n, cap;
	struct bzone *z;
};

struct wb_bound {
	zhashx_t *map; /* "kind/host" -> struct bhost */
	size_t zones, max_zones;
	uint64_t tick;
};

static void bhost_free(void **item)
{
	struct bhost *h = *item;
	if (h) {
		free(h->z);
		free(h);
	}
	*item = NULL;
}

struct wb_bound *wb_bound_new(size_t max_zones)
{
	struct wb_bound *self = calloc(1, sizeof(*self));
	if (!self)
		return NULL;
	self->map = zhashx_new();
	if (!self->map) {
		free(self);
		return NULL;
	}
	zhashx_set_destructor(self->map, bhost_free);
	self->max_zones = max_zones > BOUND_HOST_ZONES ? max_zones : BOUND_HOST_ZONES;
	return self;
}

void wb_bound_destroy(struct wb_bound **self_p)
{
	if (!self_p || !*self_p)
		return;
	zhashx_destroy(&(*self_p)->map);
	free(*self_p);
	*self_p = NULL;
}

/* One zone of a message, whatever its kind. */
struct zview {
	const char *name;
	uint64_t e_uj;	 /* power: the counter; slots: the slot's energy */
	uint64_t tot_uj; /* slots: total_uj */
};

static bool zone_at(const struct wb_msg *m, size_t i, struct zview *v)
{
	switch (m->kind) {
	case WB_POWER:
		*v = (struct zview){m->power.zones[i].name, m->power.zones[i].energy_uj, 0};
		return true;
	case WB_ALIGNED:
		*v = (struct zview){m->aligned.zones[i].name, m->aligned.zones[i].energy_uj,
				    m->aligned.zones[i].total_uj};
		return true;
	case WB_ESTIMATE:
		*v = (struct zview){m->estimate.zones[i].name, m->estimate.zones[i].energy_uj,
				    m->estimate.zones[i].total_uj};
		return true;
	default:
		return false;
	}
}

static struct bzone *bzone_find(struct bhost *h, const char *name)
{
	for (size_t i = 0; h && i < h->n; i++)
		if (strcmp(h->z[i].name, name) == 0)
			return &h->z[i];
	return NULL;
}

/* Forget the least recently seen host other than keep. */
static void bound_evict(struct wb_bound *self, const struct bhost *keep)
{
	const char *oldest = NULL;
	uint64_t when = UINT64_MAX;
	for (struct bhost *h = zhashx_first(self->map); h; h = zhashx_next(self->map))
		if (h != keep && h->used < when) {
			when = h->used;
			oldest = zhashx_cursor(self->map);
		}
	if (!oldest)
		return;
	struct bhost *h = zhashx_lookup(self->map, oldest);
	self->zones -= h->n;
	char key[BOUND_KEY_MAX];
	snprintf(key, sizeof(key), "%s", oldest);
	zhashx_delete(self->map, key);
}

/* The record of a zone new to h: a free one, or the one that said the least for longest. */
static struct bzone *bzone_add(struct wb_bound *self, struct bhost *h, const char *name)
{
	if (h->n == BOUND_HOST_ZONES) {
		struct bzone *old = &h->z[0];
		for (size_t i = 1; i < h->n; i++)
			if (h->z[i].t < old->t)
				old = &h->z[i];
		memset(old, 0, sizeof(*old));
		snprintf(old->name, sizeof(old->name), "%s", name);
		return old;
	}
	while (self->zones >= self->max_zones && zhashx_size(self->map) > 1)
		bound_evict(self, h);
	if (h->n == h->cap) {
		size_t cap = h->cap ? 2 * h->cap : 8;
		struct bzone *z = realloc(h->z, cap * sizeof(*z));
		if (!z)
			return NULL;
		h->z = z;
		h->cap = cap;
	}
	struct bzone *z = &h->z[h->n++];
	self->zones++;
	memset(z, 0, sizeof(*z));
	snprintf(z->name, sizeof(z->name), "%s", name);
	return z;
}

int wb_bound_check(struct wb_bound *self, const struct wb_plaus *p, const struct wb_msg *msg,
		   bool owner, struct wb_err *err)
{
	if (!self || !p)
		return 0;
	size_t n;
	uint64_t t0, t1, epoch;
	switch (msg->kind) {
	case WB_POWER:
		n = msg->power.n_zones, t0 = t1 = msg->power.t, epoch = msg->env.epoch;
		break;
	case WB_ALIGNED:
		n = msg->aligned.n_zones, t0 = msg->aligned.t0, t1 = msg->aligned.t1;
		epoch = msg->aligned.total_epoch;
		break;
	case WB_ESTIMATE:
		n = msg->estimate.n_zones, t0 = msg->estimate.t0, t1 = msg->estimate.t1;
		epoch = msg->estimate.total_epoch;
		break;
	default:
		return 0;
	}
	if (n > BOUND_HOST_ZONES)
		n = BOUND_HOST_ZONES; /* the schema's bound: a decoded message has no more */
	if (msg->kind != WB_POWER && t1 <= t0)
		return 0; /* a slot of no length: every stage refuses it as such (estimd, exportd)
			   */
	char key[BOUND_KEY_MAX];
	snprintf(key, sizeof(key), "%s/%s", msg->env.kind, msg->env.host);
	struct bhost *h = zhashx_lookup(self->map, key);
	const char *src = msg->env.src;
	/* own: what each zone claims (power: its counter step; slots: its energy), then the
	 * other zones of the host whose last claim overlaps; steps: slots' total_uj steps */
	struct wb_claim own[2 * BOUND_HOST_ZONES], steps[BOUND_HOST_ZONES];
	int claim_of[BOUND_HOST_ZONES]; /* message zone -> its index in own, or -1 */
	bool in_msg[BOUND_HOST_ZONES] = {false};
	size_t nown = 0, nsteps = 0;
	uint64_t from_min = t1;
	for (size_t i = 0; i < n; i++) {
		struct zview v;
		zone_at(msg, i, &v);
		struct bzone *z = bzone_find(h, v.name);
		claim_of[i] = -1;
		if (z)
			in_msg[z - h->z] = true;
		bool same_src = z && strcmp(z->src, src) == 0;
		if (z && !same_src && !owner && p->one_producer) {
			err->reason = WB_R_DUP_PRODUCER;
			snprintf(err->msg, sizeof(err->msg),
				 "zone %.48s of %.70s is src '%s''s: src '%s' is a second producer",
				 v.name, key, z->src, src);
			return -1;
		}
		bool same = same_src && z->epoch == epoch;
		struct wb_claim c;
		if (msg->kind == WB_POWER) {
			/* a counter step within one run; a new epoch is a restart (alignd's bridge)
			 */
			if (!(same && t1 > z->t && v.e_uj >= z->uj))
				continue;
			c = (struct wb_claim){v.name, v.e_uj - z->uj, t1 - z->t};
		} else {
			/* A slot after a silence of the zone carries the silence's energy. */
			uint64_t from = z && z->t < t0 ? z->t : t0;
			c = (struct wb_claim){v.name, v.e_uj, t1 - from};
			if (same && epoch && t1 > z->t && v.tot_uj >= z->uj && z->uj)
				steps[nsteps++] =
				    (struct wb_claim){v.name, v.tot_uj - z->uj, t1 - z->t};
		}
		claim_of[i] = (int)nown;
		own[nown++] = c;
		if (t1 - c.dt_ns < from_min)
			from_min = t1 - c.dt_ns;
	}
	for (size_t k = 0; nown && h && k < h->n; k++) {
		const struct bzone *z = &h->z[k];
		if (!in_msg[k] && z->claim_ns && z->t > from_min && z->t - z->claim_ns < t1)
			own[nown++] = (struct wb_claim){z->name, z->claim_uj, z->claim_ns};
	}
	if (wb_plaus_power(p, key, own, nown, err) < 0 ||
	    wb_plaus_power(p, key, steps, nsteps, err) < 0)
		return -1;

	if (!h) {
		if (!n)
			return 0;
		h = calloc(1, sizeof(*h));
		if (!h || zhashx_insert(self->map, key, h) < 0) {
			free(h);
			return 0; /* out of memory: judged by its own slot only */
		}
	}
	h->used = ++self->tick;
	for (size_t i = 0; i < n; i++) {
		struct zview v;
		zone_at(msg, i, &v);
		struct bzone *z = bzone_find(h, v.name);
		if (!z && !(z = bzone_add(self, h, v.name)))
			break;
		bool same = strcmp(z->src, src) == 0 && z->epoch == epoch;
		if (same && t1 <= z->t)
			continue; /* a slot resent or a stale sample: the newer one stays */
		snprintf(z->src, sizeof(z->src), "%s", src);
		z->epoch = epoch;
		z->t = t1;
		z->claim_uj = claim_of[i] >= 0 ? own[claim_of[i]].e_uj : 0;
		z->claim_ns = claim_of[i] >= 0 ? own[claim_of[i]].dt_ns : 0;
		z->uj = msg->kind == WB_POWER ? v.e_uj : v.tot_uj;
	}
	return 0;
}
