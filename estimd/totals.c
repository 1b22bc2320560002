/*
 * Cumulative node energy per host and zone (estimate.zones[].*total_uj): what
 * lets exportd count every microjoule once even when estimates are lost, and
 * lets estimd count aligned slots it never received, from the difference of
 * alignd's own totals. Their state (as JSON) is built and read back here;
 * state.c writes and reads the file, so that a restarted estimd continues its
 * totals and its baseline of alignd's. Pure: no sockets, no clock, no files.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "estimd.h"
#include "grow.h"
#include "json.h"
#include "plaus.h"
#include "state.h"

static size_t vm_bytes(const struct tot_vm *v)
{
	return sizeof(*v) + v->n * sizeof(*v->uj);
}

static void vms_clear(struct totals *t, struct tot_host *h)
{
	for (size_t i = 0; i < h->nvm; i++) {
		wb_budget_move(t->budget, vm_bytes(&h->vm[i]), 0);
		free(h->vm[i].uj);
	}
	h->nvm = 0;
}

static void host_clear(struct totals *t, struct tot_host *h)
{
	vms_clear(t, h);
	free(h->vm);
	wb_budget_move(t->budget, h->zcap * sizeof(*h->z), 0);
	free(h->z);
	memset(h, 0, sizeof(*h));
}

int totals_init(struct totals *t, size_t max_hosts)
{
	memset(t, 0, sizeof(*t));
	t->max = max_hosts ? max_hosts : 1;
	t->bound.max_zone_w = WB_ZONE_MAX_W;
	return 0;
}

void totals_free(struct totals *t)
{
	for (size_t i = 0; i < t->n; i++)
		host_clear(t, &t->h[i]);
	free(t->h);
	memset(t, 0, sizeof(*t));
}

/* A new count for h, named by t_ns (a time of the host) and unique in this estimd. */
static void host_start(struct totals *t, struct tot_host *h, uint64_t t_ns)
{
	h->epoch = wb_mark_next(&t->last_epoch, t_ns);
	h->nz = 0;
	vms_clear(t, h);
	h->have_t = false;
}

static struct tot_host *host_find(struct totals *t, const char *host)
{
	for (size_t i = 0; i < t->n; i++)
		if (strcmp(t->h[i].host, host) == 0)
			return &t->h[i];
	return NULL;
}

/* The host's record, created (the least recently used one evicted when full); NULL on ENOMEM. */
static struct tot_host *host_get(struct totals *t, const char *host, uint64_t t_ns)
{
	t->tick++;
	struct tot_host *h = host_find(t, host);
	if (h) {
		h->used = t->tick;
		return h;
	}
	if (t->n < t->max) {
		if (wb_grow(&t->h, &t->cap, t->n + 1, sizeof(*t->h), 8) < 0)
			return NULL;
		h = &t->h[t->n++];
		memset(h, 0, sizeof(*h));
	} else {
		/* An evicted host that comes back starts a new total_epoch: nothing is diffed
		 * across. */
		h = &t->h[0];
		for (size_t i = 1; i < t->n; i++)
			if (t->h[i].used < h->used)
				h = &t->h[i];
		host_clear(t, h);
	}
	snprintf(h->host, sizeof(h->host), "%s", host);
	h->used = t->tick;
	host_start(t, h, t_ns);
	return h;
}

static struct tot_zone *zone_find(struct tot_host *h, const char *name)
{
	for (size_t i = 0; i < h->nz; i++)
		if (strcmp(h->z[i].name, name) == 0)
			return &h->z[i];
	return NULL;
}

/* Zone records for n zones: grown by doubling from 4, up to TOTALS_ZONES_MAX. */
static size_t zcap_for(size_t cap, size_t n)
{
	while (cap < n && cap < TOTALS_ZONES_MAX)
		cap = cap ? cap * 2 : 4;
	return cap;
}

bool totals_admits(const struct totals *t, const char *host, size_t nz)
{
	for (size_t i = 0; i < t->n; i++)
		if (strcmp(t->h[i].host, host) == 0)
			return true;
	return wb_budget_fits(t->budget, zcap_for(0, nz) * sizeof(struct tot_zone));
}

/*
 * The zone's record, created at 0; NULL when the host holds TOTALS_ZONES_MAX,
 * the budget has no room to grow its records, or on ENOMEM.
 */
static struct tot_zone *zone_get(struct totals *t, struct tot_host *h, const char *name)
{
	struct tot_zone *z = zone_find(h, name);
	if (z)
		return z;
	if (h->nz >= TOTALS_ZONES_MAX)
		return NULL;
	if (h->nz == h->zcap) {
		size_t cap = zcap_for(h->zcap, h->nz + 1);
		if (!wb_budget_fits(t->budget, (cap - h->zcap) * sizeof(*h->z)))
			return NULL;
		z = realloc(h->z, cap * sizeof(*z));
		if (!z)
			return NULL;
		wb_budget_move(t->budget, h->zcap * sizeof(*z), cap * sizeof(*z));
		h->z = z;
		h->zcap = cap;
	}
	z = &h->z[h->nz++];
	memset(z, 0, sizeof(*z));
	snprintf(z->name, sizeof(z->name), "%s", name);
	return z;
}

static uint64_t muldiv(uint64_t v, uint64_t num, uint64_t den)
{
	return den ? (uint64_t)((unsigned __int128)v * num / den) : 0;
}

/*
 * Split d_uj, the energy the totals advance by, into active and idle: the
 * slot's own split when d_uj is the slot's energy, else in the slot's ratio
 * (the slot that covers the missing span), or the CPU busy ratio when the
 * slot had no energy. Exact: active + idle == d_uj.
 */
static void split(uint64_t d_uj, const struct wb_est_zone *z, uint64_t busy, uint64_t total,
		  uint64_t *active, uint64_t *idle)
{
	if (d_uj == z->energy_uj) {
		*active = z->active_uj;
	} else if (z->energy_uj) {
		*active = muldiv(d_uj, z->active_uj, z->energy_uj);
	} else {
		*active = muldiv(d_uj, busy < total ? busy : total, total);
	}
	*idle = d_uj - *active;
}

/* Whether a zone can have drawn e_uj in dt_ns: the one physical bound. */
static bool plausible(const struct totals *t, const char *zone, uint64_t e_uj, uint64_t dt_ns)
{
	struct wb_claim c = {zone, e_uj, dt_ns};
	struct wb_err err;
	return wb_plaus_power(&t->bound, "aligned", &c, 1, &err) == 0;
}

int totals_slot(struct totals *t, const struct wb_aligned *a, struct wb_est_zone *zones, size_t nz,
		bool measured, uint64_t busy, uint64_t total, struct tot_result *res)
{
	memset(res, 0, sizeof(*res));
	if (a->t1 <= a->t0)
		return -1;
	struct tot_host *h = host_get(t, a->env.host, a->t1);
	if (!h)
		return -1;
	/* Room for every zone of the slot, or a new count (never a total that goes back). */
	size_t missing = 0;
	for (size_t i = 0; i < nz; i++)
		missing += !zone_find(h, zones[i].name);
	if (h->nz + missing > TOTALS_ZONES_MAX)
		host_start(t, h, a->t1);

	bool stale = h->have_t && a->t1 <= h->last_t1;
	/* A slot resent after alignd's restart keeps its total_epoch; slots of a new count
	 * that stay behind last_t1 come from a clock that ran ahead and was set back. */
	if (stale && a->total_epoch != h->in_epoch && wb_rewind_see(&h->rewind, a->t1)) {
		stale = false;
		h->have_t = false;
		res->rewound = true;
	} else if (!stale) {
		wb_rewind_reset(&h->rewind);
	}
	bool same = h->have_t && a->total_epoch && a->total_epoch == h->in_epoch &&
		    strcmp(a->env.src, h->in_src) == 0;
	uint64_t len = a->t1 - a->t0;
	/* The part of the slot after the last one (a slot published again after alignd's restart).
	 */
	uint64_t fresh = h->have_t && a->t0 < h->last_t1 ? a->t1 - h->last_t1 : len;
	uint64_t gap = h->have_t && a->t0 > h->last_t1 ? a->t0 - h->last_t1 : 0;
	/* What a zone can have drawn since the last slot: alignd's totals advancing by more
	 * (a hostile or broken peer, a jump of 2^62) are not trusted; the one bound
	 * (wb_plaus_power) refuses such a slot on receipt already. */
	uint64_t since = h->have_t && a->t1 > h->last_t1 ? a->t1 - h->last_t1 : len;
	if (!stale && !same)
		for (size_t i = 0; i < h->nz; i++)
			h->z[i].in_have = false; /* alignd's totals start over: a new baseline */

	res->stale = stale;
	res->epoch = h->epoch;
	for (size_t i = 0; i < nz; i++) {
		struct wb_est_zone *ez = &zones[i];
		struct tot_zone *z = zone_get(t, h, ez->name);
		if (!z)
			continue;
		uint64_t e = ez->energy_uj, d = 0, in = 0;
		if (measured && i < a->n_zones && strcmp(a->zones[i].name, ez->name) == 0)
			in = a->zones[i].total_uj;
		if (stale) {
			d = 0; /* counted already */
		} else if (measured && same && z->in_have && in && in >= z->in_uj &&
			   (in - z->in_uj <= e || plausible(t, ez->name, in - z->in_uj, since))) {
			d = in - z->in_uj; /* this slot and any lost since the last one */
		} else if (measured && same && z->in_have && in && in >= z->in_uj) {
			d = e; /* the slot's own energy; the jump in alignd's total is not */
			res->implausible++;
		} else if (!measured && same && gap) {
			d = e + muldiv(e, gap, len); /* lost slots, modelled at this slot's power */
		} else {
			d = muldiv(e, fresh, len);
		}
		uint64_t act, idle;
		split(d, ez, busy, total, &act, &idle);
		bool sat = false;
		z->total_uj = wb_sat_add(z->total_uj, d, &sat);
		z->active_uj = wb_sat_add(z->active_uj, act, &sat);
		z->idle_uj =
		    z->total_uj - (z->active_uj < z->total_uj ? z->active_uj : z->total_uj);
		res->saturated += sat;
		if (!stale && in) {
			z->in_uj = in;
			z->in_have = true;
		}
		if (d > e)
			res->recovered_uj = wb_sat_add(res->recovered_uj, d - e, NULL);
		ez->total_uj = z->total_uj;
		ez->active_total_uj = z->active_uj;
		ez->idle_total_uj = z->idle_uj;
	}
	if (!stale) {
		h->in_epoch = a->total_epoch;
		snprintf(h->in_src, sizeof(h->in_src), "%s", a->env.src);
		h->last_t1 = a->t1;
		h->have_t = true;
	}
	return 0;
}

/* ---- VMs: cumulative energy per VM and zone, in the host's count ---- */

static struct tot_vm *vm_find(struct tot_host *h, const char *id)
{
	for (size_t i = 0; i < h->nvm; i++)
		if (strcmp(h->vm[i].id, id) == 0)
			return &h->vm[i];
	return NULL;
}

/* The VM's record with room for the host's nz zones, created at 0; NULL (ENOMEM, budget). */
static struct tot_vm *vm_get(struct totals *t, struct tot_host *h, const char *id)
{
	struct tot_vm *v = vm_find(h, id);
	if (!v) {
		if (h->nvm >= TOTALS_VMS_MAX) {
			v = &h->vm[0];
			for (size_t i = 1; i < h->nvm; i++)
				if (h->vm[i].used < v->used)
					v = &h->vm[i];
			wb_budget_move(t->budget, vm_bytes(v), 0);
			free(v->uj);
		} else {
			if (!wb_budget_fits(t->budget, sizeof(*v)))
				return NULL;
			if (wb_grow(&h->vm, &h->vmcap, h->nvm + 1, sizeof(*h->vm), 4) < 0)
				return NULL;
			v = &h->vm[h->nvm++];
		}
		memset(v, 0, sizeof(*v));
		snprintf(v->id, sizeof(v->id), "%s", id);
		wb_budget_move(t->budget, 0, vm_bytes(v));
	}
	v->used = t->tick;
	if (v->n < h->nz) {
		size_t add = (h->nz - v->n) * sizeof(*v->uj);
		if (!wb_budget_fits(t->budget, add))
			return NULL;
		uint64_t *uj = realloc(v->uj, h->nz * sizeof(*uj));
		if (!uj)
			return NULL;
		memset(uj + v->n, 0, add);
		wb_budget_move(t->budget, 0, add);
		v->uj = uj;
		v->n = h->nz;
	}
	return v;
}

int totals_vms(struct totals *t, const char *host, const struct wb_est_zone *zones, size_t nz,
	       struct wb_est_group *vms, size_t ngroups, const uint64_t *idle_uj, uint64_t *pool)
{
	struct tot_host *h = host_find(t, host);
	int rc = 0;
	for (size_t g = 0; g < ngroups; g++) {
		vms[g].total_uj = NULL;
		vms[g].n_total_uj = 0;
		struct tot_vm *v = h ? vm_get(t, h, vms[g].id) : NULL;
		if (!v) {
			rc = -1;
			continue;
		}
		for (size_t i = 0; i < nz; i++) {
			struct tot_zone *z = zone_find(h, zones[i].name);
			uint64_t *dst = &pool[g * nz + i];
			*dst = 0;
			if (!z)
				continue;
			size_t k = (size_t)(z - h->z);
			uint64_t d = i < vms[g].n_energy_uj ? vms[g].energy_uj[i] : 0;
			if (idle_uj)
				d = wb_sat_add(d, idle_uj[g * nz + i], NULL);
			v->uj[k] = wb_sat_add(v->uj[k], d, NULL);
			*dst = v->uj[k];
		}
		vms[g].total_uj = &pool[g * nz];
		vms[g].n_total_uj = nz;
	}
	return rc;
}

/* ---- state (state.c saves and loads it) ---- */

json_t *totals_to_json(const struct totals *t, uint64_t now_ns)
{
	json_t *hosts = json_array();
	json_t *root =
	    json_pack("{s:i, s:I, s:I, s:o}", "version", 1, "saved_ns", (json_int_t)now_ns,
		      "last_epoch", (json_int_t)t->last_epoch, "hosts", hosts);
	if (!root)
		return NULL;
	for (size_t i = 0; i < t->n; i++) {
		const struct tot_host *h = &t->h[i];
		json_t *zones = json_array();
		for (size_t k = 0; k < h->nz; k++) {
			const struct tot_zone *z = &h->z[k];
			json_array_append_new(
			    zones,
			    json_pack("{s:s, s:b, s:I, s:I, s:I, s:I}", "name", z->name, "in_have",
				      z->in_have, "in_uj", (json_int_t)z->in_uj, "total_uj",
				      (json_int_t)z->total_uj, "active_uj",
				      (json_int_t)z->active_uj, "idle_uj", (json_int_t)z->idle_uj));
		}
		json_t *vms = json_array();
		for (size_t k = 0; k < h->nvm; k++) {
			const struct tot_vm *v = &h->vm[k];
			json_t *uj = json_object();
			for (size_t j = 0; j < v->n && j < h->nz; j++)
				json_object_set_new(uj, h->z[j].name,
						    json_integer((json_int_t)v->uj[j]));
			json_array_append_new(vms,
					      json_pack("{s:s, s:o}", "id", v->id, "total_uj", uj));
		}
		json_array_append_new(
		    hosts, json_pack("{s:s, s:I, s:s, s:I, s:b, s:I, s:o, s:o}", "host", h->host,
				     "epoch", (json_int_t)h->epoch, "in_src", h->in_src, "in_epoch",
				     (json_int_t)h->in_epoch, "have_t", h->have_t, "last_t1",
				     (json_int_t)h->last_t1, "zones", zones, "vms", vms));
	}
	return root;
}

static const struct wb_state_field zone_fields[] = {
    {"name", true, WB_SK_NAME},	     {"in_uj", false, WB_SK_U64},   {"total_uj", false, WB_SK_U64},
    {"active_uj", false, WB_SK_U64}, {"idle_uj", false, WB_SK_U64}, {NULL},
};
static const struct wb_state_field vm_fields[] = {
    {"id", true, {.kind = WB_SK_STRING, .min_len = 1, .max_len = 127}},
    {"total_uj", true, WB_SK_MAP_OF(WB_SK_U64)},
    {NULL},
};
static const struct wb_state_field host_fields[] = {
    {"host", true, WB_SK_NAME},
    {"zones", true, WB_SK_OBJECTS(zone_fields)},
    {"vms", false, WB_SK_OBJECTS(vm_fields)},
    {"in_src", false, {.kind = WB_SK_STRING, .max_len = 63}},
    {"epoch", false, WB_SK_U64},
    {"in_epoch", false, WB_SK_U64},
    {"last_t1", false, WB_SK_U64},
    {NULL},
};
/* The whole file is checked before anything in it is used (lib/state.h): a damaged or planted
 * file is refused as a whole and estimd starts clean. */
static const struct wb_state_field root_fields[] = {
    {"version", true, {.kind = WB_SK_UINT, .min = 1, .max = 1}},
    {"last_epoch", false, WB_SK_U64},
    {"hosts", true, WB_SK_OBJECTS(host_fields)},
    {NULL},
};
static const struct wb_state_shape state_shape = WB_SK_OBJECT_OF(root_fields);

int totals_from_json(struct totals *t, const json_t *root, size_t *nhosts, char *why, size_t len)
{
	*nhosts = 0;
	if (wb_state_check(root, &state_shape, why, len) < 0)
		return -1;
	if (wb_json_u64(root, "last_epoch") > t->last_epoch)
		t->last_epoch = wb_json_u64(root, "last_epoch");
	size_t i, k;
	json_t *o, *zo;
	json_array_foreach(json_object_get(root, "hosts"), i, o)
	{
		const char *name = wb_json_str(o, "host");
		if (host_find(t, name))
			continue;
		struct tot_host *h = host_get(t, name, wb_json_u64(o, "epoch"));
		if (!h)
			break;
		h->epoch = wb_json_u64(o, "epoch");
		if (!h->epoch) {
			host_start(t, h, 1);
			continue;
		}
		if (h->epoch > t->last_epoch)
			t->last_epoch = h->epoch;
		snprintf(h->in_src, sizeof(h->in_src), "%s", wb_json_str(o, "in_src"));
		h->in_epoch = wb_json_u64(o, "in_epoch");
		h->have_t = json_is_true(json_object_get(o, "have_t"));
		h->last_t1 = wb_json_u64(o, "last_t1");
		json_array_foreach(json_object_get(o, "zones"), k, zo)
		{
			const char *zn = wb_json_str(zo, "name");
			struct tot_zone *z = zn[0] && strlen(zn) <= 63 ? zone_get(t, h, zn) : NULL;
			if (!z)
				continue;
			z->in_have = json_is_true(json_object_get(zo, "in_have"));
			z->in_uj = wb_json_u64(zo, "in_uj");
			z->total_uj = wb_json_u64(zo, "total_uj");
			z->active_uj = wb_json_u64(zo, "active_uj");
			z->idle_uj = wb_json_u64(zo, "idle_uj");
			/* A damaged file must not break active + idle == total. */
			if (z->active_uj > z->total_uj)
				z->active_uj = z->total_uj;
			z->idle_uj = z->total_uj - z->active_uj;
		}
		json_array_foreach(json_object_get(o, "vms"), k, zo)
		{
			struct tot_vm *v = vm_get(t, h, wb_json_str(zo, "id"));
			const json_t *uj = json_object_get(zo, "total_uj");
			for (size_t j = 0; v && j < h->nz; j++)
				v->uj[j] = wb_json_u64(uj, h->z[j].name);
		}
		(*nhosts)++;
	}
	return 0;
}
