/*
 * One aligned slot -> one estimate: node energy per zone (measured, or from the
 * power model), its idle/active split, the active energy attributed exactly to
 * processes, and containers, pods, VMs and services as sums of their processes.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "codec.h"
#include "estimd.h"
#include "grow.h"
#include "hash.h"
#include "plaus.h"
#include "procstat.h"
#include "table.h"

#define HOSTS_MAX                                                                                  \
	1024 /* hosts whose learning state (idle regression, training) is kept, least recent       \
		dropped */
#define ZONE_STATE_MAX 256
/* procs x zones of one estimate; beyond it a slot is refused rather than allocating gigabytes. */
#define ENERGY_CELLS_MAX (1u << 24)

enum { G_CONTAINER, G_POD, G_VM, G_SERVICE, G_KINDS };

struct zone_state {
	char name[64];
	struct idle_reg reg;
	struct gpu_idle gpu;
};

struct host_state {
	char host[64];
	uint64_t used; /* estimator tick of the last slot: least recent goes first */
	size_t bytes;  /* charged to the budget: its zones' regressions and its trainer */
	struct zone_state *zones;
	size_t nzones;
	struct trainer trainer;
	bool trainer_ok;
};

/*
 * An index into one of the slot's arrays (lib/table.h), built again every slot:
 * cgroups by id, groups by wb_hash_str(id), which the group's id tells apart.
 */
struct slot_index_entry {
	uint64_t key;
	int32_t i;
	bool used;
};

struct slot_index {
	WB_TABLE(struct slot_index_entry);
};

struct group_set {
	struct wb_est_group *g;
	size_t n, cap;
	uint64_t *energy; /* n x nzones */
	size_t energy_cap;
	struct slot_index index;
};

struct estimator {
	struct est_conf conf;
	struct model *model;
	struct kepler_powers ext; /* the sidecar's powers for the next slot */
	bool ext_set;
	char ext_name[64];
	struct host_state hosts[HOSTS_MAX];
	size_t nhosts;
	uint64_t tick;

	struct wb_est_zone *zones;
	size_t zones_cap;
	struct wb_est_proc *procs;
	size_t procs_cap;
	uint64_t *energy; /* nprocs x nzones */
	size_t energy_cap;
	uint64_t *w, *w2, *part, *gw;
	size_t w_cap, w2_cap, part_cap, gw_cap;
	struct slot_index cg_index; /* cgroup id -> index into the slot's cgroups */
	int32_t *cg_group;	    /* per cgroup of the slot, per group kind: group index or -1 */
	size_t cg_group_cap;
	int32_t *proc_cg; /* per process of the slot: index of its cgroup, or -1 */
	size_t proc_cg_cap;
	struct group_set groups[G_KINDS];
	uint64_t *vm_total, *vm_idle; /* per VM of the slot x zone: cumulative; share of idle */
	size_t vm_total_cap, vm_idle_cap;
	struct attrib_scratch scratch;
	struct gpu_scratch gpu_scratch;
	struct totals totals;
	struct wb_budget budget; /* learning state and totals of all hosts */
};

static void slot_index_init(struct slot_index *x)
{
	wb_table_init(&x->tab, sizeof(struct slot_index_entry),
		      offsetof(struct slot_index_entry, key), 1,
		      offsetof(struct slot_index_entry, used), 16, SIZE_MAX);
}

static void host_free(struct estimator *e, struct host_state *h)
{
	wb_budget_move(&e->budget, h->bytes, 0);
	for (size_t i = 0; i < h->nzones; i++)
		idle_reg_free(&h->zones[i].reg);
	free(h->zones);
	if (h->trainer_ok)
		trainer_free(&h->trainer);
	memset(h, 0, sizeof(*h));
}

struct estimator *estimator_new(const struct est_conf *conf)
{
	struct estimator *e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	e->conf = *conf;
	e->budget.max = conf->budget_bytes;
	slot_index_init(&e->cg_index);
	for (int k = 0; k < G_KINDS; k++)
		slot_index_init(&e->groups[k].index);
	totals_init(&e->totals, TOTALS_HOSTS_MAX);
	e->totals.budget = &e->budget;
	e->totals.bound = conf->bound;
	return e;
}

struct totals *estimator_totals(struct estimator *e)
{
	return &e->totals;
}

size_t estimator_budget_used(const struct estimator *e)
{
	return e->budget.used;
}

void estimator_destroy(struct estimator **self_p)
{
	if (!self_p || !*self_p)
		return;
	struct estimator *e = *self_p;
	for (size_t i = 0; i < e->nhosts; i++)
		host_free(e, &e->hosts[i]);
	free(e->model);
	free(e->zones);
	free(e->procs);
	free(e->energy);
	free(e->w);
	free(e->w2);
	free(e->part);
	free(e->gw);
	wb_table_free(&e->cg_index.tab);
	free(e->cg_group);
	free(e->proc_cg);
	free(e->vm_total);
	free(e->vm_idle);
	for (int k = 0; k < G_KINDS; k++) {
		free(e->groups[k].g);
		free(e->groups[k].energy);
		wb_table_free(&e->groups[k].index.tab);
	}
	attrib_scratch_free(&e->scratch);
	gpu_scratch_free(&e->gpu_scratch);
	totals_free(&e->totals);
	free(e);
	*self_p = NULL;
}

int estimator_set_conf(struct estimator *e, const struct est_conf *conf)
{
	bool train_changed =
	    memcmp(&conf->train_conf, &e->conf.train_conf, sizeof(conf->train_conf)) != 0 ||
	    conf->train != e->conf.train;
	e->conf = *conf;
	e->budget.max = conf->budget_bytes;
	e->totals.bound = conf->bound;
	if (train_changed)
		for (size_t i = 0; i < e->nhosts; i++)
			if (e->hosts[i].trainer_ok) {
				struct host_state *h = &e->hosts[i];
				size_t tb = h->trainer.conf.window * sizeof(*h->trainer.ring);
				trainer_free(&h->trainer);
				h->trainer_ok = false;
				wb_budget_move(&e->budget, tb, 0);
				h->bytes -= tb < h->bytes ? tb : h->bytes;
			}
	return 0;
}

void estimator_set_model(struct estimator *e, struct model *m)
{
	free(e->model);
	e->model = m;
}

void estimator_set_external(struct estimator *e, const struct kepler_powers *kp, const char *name)
{
	e->ext_set = kp != NULL;
	if (kp) {
		e->ext = *kp;
		snprintf(e->ext_name, sizeof(e->ext_name), "%s", name ? name : "estimator");
	}
}

const struct model *estimator_model(const struct estimator *e)
{
	return e->model;
}

double estimator_core_ratio(const struct estimator *e, uint64_t ncpu)
{
	uint64_t cores = e->conf.model_cores ? e->conf.model_cores : e->model ? e->model->cores : 0;
	if (!cores || !ncpu)
		return 1.0;
	double r = (double)ncpu / (double)cores;
	return r < 1.0 ? r : 1.0;
}

static struct host_state *host_get(struct estimator *e, const char *host)
{
	e->tick++;
	for (size_t i = 0; i < e->nhosts; i++)
		if (strcmp(e->hosts[i].host, host) == 0) {
			e->hosts[i].used = e->tick;
			return &e->hosts[i];
		}
	struct host_state *h;
	if (e->nhosts < HOSTS_MAX) {
		h = &e->hosts[e->nhosts++];
	} else {
		h = &e->hosts[0];
		for (size_t i = 1; i < e->nhosts; i++)
			if (e->hosts[i].used < h->used)
				h = &e->hosts[i];
		host_free(e, h);
	}
	snprintf(h->host, sizeof(h->host), "%s", host);
	h->used = e->tick;
	return h;
}

/* The zone's learning state; NULL when full or out of budget (res->budget_short). */
static struct zone_state *zone_state_get(struct estimator *e, struct host_state *h,
					 const char *name, struct est_result *res)
{
	for (size_t i = 0; i < h->nzones; i++)
		if (strcmp(h->zones[i].name, name) == 0)
			return &h->zones[i];
	if (h->nzones >= ZONE_STATE_MAX)
		return NULL;
	/* The regression keeps 2 x idle_window doubles once it learns. */
	size_t bytes = sizeof(struct zone_state) + 2 * e->conf.idle.window * sizeof(double);
	if (!wb_budget_fits(&e->budget, bytes)) {
		res->budget_short = true;
		return NULL;
	}
	struct zone_state *z = realloc(h->zones, (h->nzones + 1) * sizeof(*z));
	if (!z)
		return NULL;
	h->zones = z;
	wb_budget_move(&e->budget, 0, bytes);
	h->bytes += bytes;
	memset(&z[h->nzones], 0, sizeof(z[0]));
	snprintf(z[h->nzones].name, sizeof(z[0].name), "%s", name);
	return &z[h->nzones++];
}

/* The zone's regression; NULL when full or out of budget (res->budget_short: ratio instead). */
static struct idle_reg *zone_reg(struct estimator *e, struct host_state *h, const char *name,
				 struct est_result *res)
{
	struct zone_state *zs = zone_state_get(e, h, name, res);
	return zs ? &zs->reg : NULL;
}

json_t *estimator_gpu_idle_to_json(const struct estimator *e)
{
	json_t *root = json_object();
	for (size_t i = 0; root && i < e->nhosts; i++) {
		const struct host_state *h = &e->hosts[i];
		json_t *zones = NULL;
		for (size_t k = 0; k < h->nzones; k++) {
			if (!h->zones[k].gpu.have)
				continue;
			if (!zones && (!(zones = json_object()) ||
				       json_object_set_new(root, h->host, zones) < 0))
				goto nomem;
			if (json_object_set_new(zones, h->zones[k].name,
						json_real(h->zones[k].gpu.min_w)) < 0)
				goto nomem;
		}
	}
	return root;
nomem:
	json_decref(root);
	return NULL;
}

static bool state_name_ok(const char *s)
{
	return s[0] && strlen(s) <= 63;
}

size_t estimator_gpu_idle_from_json(struct estimator *e, const json_t *o)
{
	size_t n = 0;
	const char *host, *zone;
	json_t *zones, *w;
	json_object_foreach((json_t *)o, host, zones)
	{
		if (!state_name_ok(host) || !json_is_object(zones))
			continue;
		struct host_state *h = NULL;
		json_object_foreach(zones, zone, w)
		{
			double v = json_number_value(w);
			if (!state_name_ok(zone) || !json_is_number(w) || !(v >= 0) ||
			    v > WB_ZONE_MAX_W)
				continue;
			struct est_result res = {0};
			struct zone_state *zs;
			if ((!h && !(h = host_get(e, host))) ||
			    !(zs = zone_state_get(e, h, zone, &res)))
				continue;
			zs->gpu = (struct gpu_idle){.min_w = v, .have = true};
			n++;
		}
	}
	return n;
}

/* Index the slot's cgroups by id (the last entry of an id wins). */
static int cgroups_index(struct estimator *e, const struct wb_aligned *a)
{
	struct slot_index *x = &e->cg_index;
	wb_table_clear(&x->tab);
	for (size_t i = 0; i < a->n_cgroups; i++) {
		uint64_t id = a->cgroups[i].id;
		struct slot_index_entry *c = wb_table_find(&x->tab, id, 0);
		if (!c && !(c = wb_table_insert(&x->tab, id, 0)))
			return -1;
		c->i = (int32_t)i;
	}
	return 0;
}

/* Each process's cgroup, looked up once per slot. */
static int procs_cgroups(struct estimator *e, const struct wb_aligned *a)
{
	if (wb_grow(&e->proc_cg, &e->proc_cg_cap, a->n_procs + 1, sizeof(int32_t), 16) < 0)
		return -1;
	for (size_t i = 0; i < a->n_procs; i++) {
		const struct slot_index_entry *c =
		    wb_table_find(&e->cg_index.tab, a->procs[i].cgroup_id, 0);
		e->proc_cg[i] = c ? c->i : -1;
	}
	return 0;
}

/* Copy a NUL-terminated fixed-size field into another, without printf's overhead. */
static inline void copy_str(char *dst, size_t dst_size, const char *src, size_t src_size)
{
	size_t n = strnlen(src, src_size < dst_size ? src_size : dst_size - 1);
	memcpy(dst, src, n);
	dst[n] = '\0';
}

/* The group named id in set gs, added when new. Returns its index or -1 (ENOMEM). */
static int32_t group_get(struct group_set *gs, const char *id, const struct wb_cgroup *cg, int kind)
{
	uint64_t key = wb_hash_str(id);
	struct slot_index_entry *x = wb_table_find(&gs->index.tab, key, 0);
	for (; x; x = wb_table_find_next(&gs->index.tab, x))
		if (strcmp(gs->g[x->i].id, id) == 0)
			return x->i;
	if (wb_grow(&gs->g, &gs->cap, gs->n + 1, sizeof(*gs->g), 16) < 0 ||
	    !(x = wb_table_insert(&gs->index.tab, key, 0)))
		return -1;
	struct wb_est_group *g = &gs->g[gs->n];
	memset(g, 0, sizeof(*g));
	snprintf(g->id, sizeof(g->id), "%s", id);
	if (kind == G_CONTAINER) {
		snprintf(g->runtime, sizeof(g->runtime), "%s", cg->runtime);
		snprintf(g->pod_uid, sizeof(g->pod_uid), "%s", cg->pod_uid);
	} else if (kind == G_POD || kind == G_VM) {
		snprintf(g->runtime, sizeof(g->runtime), "%s", cg->runtime);
	}
	x->i = (int32_t)gs->n;
	return (int32_t)gs->n++;
}

static const char *group_key(const struct wb_cgroup *c, int kind)
{
	switch (kind) {
	case G_CONTAINER:
		return c->container_id;
	case G_POD:
		return c->pod_uid;
	case G_VM:
		return c->vm;
	case G_SERVICE:
		return c->service;
	}
	return "";
}

/* Containers, pods, VMs and services of the slot: each the sum of its processes. */
static int groups_build(struct estimator *e, const struct wb_aligned *a, size_t nz)
{
	if (wb_grow(&e->cg_group, &e->cg_group_cap, a->n_cgroups * G_KINDS + 1, sizeof(int32_t),
		    16) < 0)
		return -1;
	for (int k = 0; k < G_KINDS; k++) {
		struct group_set *gs = &e->groups[k];
		gs->n = 0;
		wb_table_clear(&gs->index.tab);
		for (size_t i = 0; i < a->n_cgroups; i++) {
			const char *key = group_key(&a->cgroups[i], k);
			e->cg_group[i * G_KINDS + k] =
			    key[0] ? group_get(gs, key, &a->cgroups[i], k) : -1;
			if (key[0] && e->cg_group[i * G_KINDS + k] < 0)
				return -1;
		}
		if (wb_grow(&gs->energy, &gs->energy_cap, gs->n * nz + 1, sizeof(uint64_t), 16) < 0)
			return -1;
		memset(gs->energy, 0, (gs->n * nz + 1) * sizeof(uint64_t));
	}
	for (size_t i = 0; i < a->n_procs; i++) {
		int32_t ci = e->proc_cg[i];
		if (ci < 0)
			continue;
		for (int k = 0; k < G_KINDS; k++) {
			int32_t gi = e->cg_group[(size_t)ci * G_KINDS + k];
			if (gi < 0)
				continue;
			struct group_set *gs = &e->groups[k];
			gs->g[gi].cpu_ns += a->procs[i].cpu_ns;
			uint64_t *dst = &gs->energy[(size_t)gi * nz];
			const uint64_t *src = &e->energy[i * nz];
			for (size_t z = 0; z < nz; z++)
				dst[z] += src[z];
		}
	}
	/* Pointers only now: the pools may have moved while growing. */
	for (int k = 0; k < G_KINDS; k++) {
		struct group_set *gs = &e->groups[k];
		for (size_t g = 0; g < gs->n; g++) {
			gs->g[g].energy_uj = &gs->energy[g * nz];
			gs->g[g].n_energy_uj = nz;
		}
	}
	return 0;
}

static uint64_t uj_of(double watts, double slot_s)
{
	double uj = watts * slot_s * 1e6;
	if (!(uj > 0))
		return 0;
	if (uj > 4e18)
		return (uint64_t)4e18;
	return (uint64_t)llround(uj);
}

static double max_zone_w(const struct estimator *e)
{
	return e->conf.max_zone_w > 0 ? e->conf.max_zone_w : WB_ZONE_MAX_W;
}

static struct wb_est_zone *zone_out(struct estimator *e, size_t *nz, const char *zone,
				    const struct wb_zone_power *zp, double slot_s)
{
	struct wb_est_zone *z = &e->zones[(*nz)++];
	memset(z, 0, sizeof(*z));
	snprintf(z->name, sizeof(z->name), "%s", zone);
	snprintf(z->zone, sizeof(z->zone), "%s", zone);
	z->idle_uj = uj_of(zp->idle_w, slot_s);
	z->active_uj = uj_of(zp->active_w, slot_s);
	z->energy_uj = z->idle_uj + z->active_uj;
	return z;
}

/*
 * Zones from the power model by lib/plaus.h's rule: node power at this slot's
 * features clipped to [0, the bound], idle the zero-usage power clipped the
 * same way (scaled by the core ratio), active the rest. A negative answer is
 * clipped as Kepler's estimator clips it; one not finite or above the bound is
 * counted (model_implausible).
 */
static void model_zones(struct estimator *e, const struct wb_aligned *a, double slot_s,
			struct est_result *res, size_t *nz)
{
	const struct model *m = e->model;
	double x[FEAT_COUNT], v[MODEL_FEATS_MAX];
	feat_from_slot(a, x);
	double ratio = estimator_core_ratio(e, a->ncpu);
	*nz = 0;
	for (size_t i = 0; i < m->nzones; i++) {
		const struct model_zone *mz = &m->zones[i];
		if (!model_zone_active(m, mz))
			continue;
		model_zone_feats(mz, x, v);
		struct wb_zone_power zp;
		enum wb_power_fault fault = model_zone_split(m, mz, v, ratio, max_zone_w(e), &zp);
		if (fault == WB_POWER_NONFINITE || fault == WB_POWER_ABOVE) {
			if (!res->model_implausible++)
				snprintf(
				    res->implausible, sizeof(res->implausible),
				    "zone %s: %g W at the slot's features, %g W at zero usage (%s; %g W used)",
				    mz->zone, model_zone_eval_w(m, mz, v),
				    model_zone_power_w(m, mz, (double[FEAT_COUNT]){0}),
				    wb_power_fault_name(fault), zp.node_w);
		}
		if (m->output == MODEL_DYN) {
			/* The model's answer is the active power; idle only as configured. */
			zp.idle_w = 0;
			for (size_t f = 0; f < e->conf.idle.nfixed; f++)
				if (strcmp(e->conf.idle.fixed[f].key, mz->zone) == 0)
					zp.idle_w = e->conf.idle.fixed[f].watts;
		}
		zone_out(e, nz, mz->zone, &zp, slot_s);
	}
}

int estimator_check_external(const struct estimator *e, const struct kepler_powers *kp, char *err,
			     size_t errlen)
{
	return kepler_powers_check(kp, max_zone_w(e), err, errlen);
}

/*
 * Zones from the sidecar's powers (checked by kepler_powers_check when it
 * answered): as model_zones, the zero-usage power is the idle part, scaled by
 * the sidecar's core ratio (at most 1, as Kepler applies it).
 */
static void external_zones(struct estimator *e, double slot_s, size_t *nz)
{
	const struct kepler_powers *kp = &e->ext;
	double ratio = kp->core_ratio > 0 && kp->core_ratio < 1 ? kp->core_ratio : 1.0;
	*nz = 0;
	for (size_t i = 0; i < kp->n; i++) {
		struct wb_zone_power zp;
		wb_plaus_zone_power(kp->p_w[i], kp->p0_w[i], max_zone_w(e), &zp);
		zp.idle_w *= ratio;
		zp.node_w = zp.idle_w + zp.active_w;
		zone_out(e, nz, kp->zone[i], &zp, slot_s);
	}
}

static void measured_zones(struct estimator *e, struct host_state *h, const struct wb_aligned *a,
			   double slot_s, uint64_t busy, uint64_t total, struct est_result *res)
{
	for (size_t i = 0; i < a->n_zones; i++) {
		const struct wb_slot_zone *sz = &a->zones[i];
		struct wb_est_zone *z = &e->zones[i];
		memset(z, 0, sizeof(*z));
		snprintf(z->name, sizeof(z->name), "%s", sz->name);
		snprintf(z->zone, sizeof(z->zone), "%s", sz->zone);
		snprintf(z->path, sizeof(z->path), "%s", sz->path);
		z->index = sz->index;
		z->energy_uj = sz->energy_uj;
		if (gpu_zone(sz)) {
			/* without room for its state, a GPU learns no idle power (0 W) */
			struct zone_state *zs = zone_state_get(e, h, sz->name, res);
			struct gpu_idle *st = zs ? &zs->gpu : NULL;
			memcpy(z->uuid, sz->uuid, sizeof(z->uuid));
			memcpy(z->model, sz->model, sizeof(z->model));
			memcpy(z->vendor, sz->vendor, sizeof(z->vendor));
			/* Measured whole: interpolated (both ends inside the power samples: not the
			 * first slot of a zone, nor one after power came back), nothing
			 * extrapolated, no gap; its energy covers the share `coverage` of it (its
			 * end may be past the last sample, a remainder the next slot brings), at
			 * least half. */
			bool whole = a->quality.interpolated && !a->quality.extrapolated &&
				     !a->quality.gap && a->quality.coverage >= 0.5;
			gpu_split(&e->conf.gpu_idle, st, sz, slot_s,
				  whole ? slot_s * a->quality.coverage : 0, &z->active_uj,
				  &z->idle_uj, &z->idle_w);
			continue;
		}
		struct idle_reg *reg =
		    e->conf.idle.method == IDLE_REGRESSION ? zone_reg(e, h, sz->name, res) : NULL;
		enum idle_method used =
		    idle_split(&e->conf.idle, reg, sz->name, sz->zone, sz->energy_uj, slot_s, busy,
			       total, &z->active_uj, &z->idle_uj);
		if (used != e->conf.idle.method)
			res->idle_fallbacks++;
	}
}

/* Active energy of every zone to the processes; the rest to unattributed. */
static int attribute(struct estimator *e, const struct wb_aligned *a, size_t nz, uint64_t busy,
		     bool measured)
{
	size_t n = a->n_procs;
	if (wb_grow(&e->w, &e->w_cap, n + 1, sizeof(uint64_t), 16) < 0 ||
	    wb_grow(&e->w2, &e->w2_cap, n + 1, sizeof(uint64_t), 16) < 0 ||
	    wb_grow(&e->part, &e->part_cap, n + 1, sizeof(uint64_t), 16) < 0 ||
	    wb_grow(&e->gw, &e->gw_cap, n + 1, sizeof(uint64_t), 16) < 0)
		return -1;
	unsigned __int128 cpu_sum = 0, instr_sum = 0;
	for (size_t i = 0; i < n; i++) {
		/* pid 0 is the idle task: its "CPU time" is idle time. */
		bool skip = a->procs[i].pid == 0;
		e->w[i] = skip ? 0 : a->procs[i].cpu_ns;
		e->w2[i] = skip ? 0 : a->procs[i].instructions;
		cpu_sum += e->w[i];
		instr_sum += e->w2[i];
	}
	/*
	 * Shares are of the node's busy CPU time (the rest of it ran in kernel
	 * threads, interrupts and processes too short-lived to be listed), or of
	 * the listed processes' time (base procs, as Kepler does).
	 */
	uint64_t cpu_denom = 0;
	if (e->conf.base == EST_BASE_NODE)
		cpu_denom =
		    cpu_sum > busy ? (cpu_sum > UINT64_MAX ? UINT64_MAX : (uint64_t)cpu_sum) : busy;
	bool by_instr = e->conf.by == EST_BY_INSTRUCTIONS && instr_sum > 0;
	for (size_t z = 0; z < nz; z++) {
		struct wb_est_zone *ez = &e->zones[z];
		uint64_t rest;
		if (!e->conf.attribute_platform && strcmp(ez->zone, "platform") == 0) {
			/* The whole machine (fans, PSU losses, disks, NICs): not the processes'
			 * doing in proportion to their CPU time, so none of it goes to them. */
			ez->unattributed_uj = ez->active_uj;
			for (size_t i = 0; i < n; i++)
				e->energy[i * nz + z] = 0;
			continue;
		}
		if (measured && gpu_zone(&a->zones[z])) {
			uint64_t d;
			if (gpu_weights(&a->zones[z], a, e->gw, &d, &e->gpu_scratch) < 0)
				return -1;
			/* d 0 (no process on the GPU): its active energy is nobody's */
			if (attrib_split(ez->active_uj, e->gw, n, d, e->part, &rest, &e->scratch) <
			    0)
				return -1;
		} else if (!by_instr) {
			if (attrib_split(ez->active_uj, e->w, n, cpu_denom, e->part, &rest,
					 &e->scratch) < 0)
				return -1;
		} else {
			/* The listed processes' share by CPU time, split among them by
			 * instructions. */
			uint64_t d = cpu_denom ? cpu_denom : (uint64_t)(cpu_sum ? cpu_sum : 1);
			uint64_t attributable = cpu_sum
						    ? (uint64_t)((unsigned __int128)ez->active_uj *
								 (cpu_sum > d ? d : cpu_sum) / d)
						    : 0;
			if (attrib_split(attributable, e->w2, n, 0, e->part, &rest, &e->scratch) <
			    0)
				return -1;
			rest += ez->active_uj - attributable;
		}
		ez->unattributed_uj = rest;
		for (size_t i = 0; i < n; i++)
			e->energy[i * nz + z] = e->part[i];
	}
	return 0;
}

static void fill_procs(struct estimator *e, const struct wb_aligned *a, size_t nz)
{
	for (size_t i = 0; i < a->n_procs; i++) {
		const struct wb_slot_proc *sp = &a->procs[i];
		struct wb_est_proc *p = &e->procs[i];
		p->pid = sp->pid;
		memcpy(p->comm, sp->comm, sizeof(p->comm));
		p->start_ns = sp->start_ns;
		p->cgroup_id = sp->cgroup_id;
		p->exe_id = sp->exe_id;
		p->cpu_ns = sp->cpu_ns;
		p->exited = sp->exited;
		p->container_id[0] = p->vm[0] = '\0';
		if (e->proc_cg[i] >= 0) {
			const struct wb_cgroup *cg = &a->cgroups[e->proc_cg[i]];
			copy_str(p->container_id, sizeof(p->container_id), cg->container_id,
				 sizeof(cg->container_id));
			copy_str(p->vm, sizeof(p->vm), cg->vm, sizeof(cg->vm));
		}
		p->energy_uj = &e->energy[i * nz];
		p->n_energy_uj = nz;
	}
}

static void train(struct estimator *e, struct host_state *h, const struct wb_aligned *a,
		  struct est_result *res)
{
	if (!h->trainer_ok) {
		size_t w = e->conf.train_conf.window < 4 ? 4 : e->conf.train_conf.window;
		if (!wb_budget_fits(&e->budget, w * sizeof(*h->trainer.ring))) {
			res->budget_short = true;
			return;
		}
		if (trainer_init(&h->trainer, &e->conf.train_conf) < 0)
			return;
		h->trainer_ok = true;
		wb_budget_move(&e->budget, 0, h->trainer.conf.window * sizeof(*h->trainer.ring));
		h->bytes += h->trainer.conf.window * sizeof(*h->trainer.ring);
	}
	if (trainer_add(&h->trainer, a) != 1)
		return;
	struct model *m = malloc(sizeof(*m));
	if (!m)
		return;
	char name[128];
	/* Names change with every fit, so a receiver can tell models apart; no '_' (Kepler splits
	 * on it). */
	snprintf(name, sizeof(name), "wattbus-%.63s-%" PRIu64, a->env.host,
		 (uint64_t)(a->t1 / WB_NS_PER_SEC));
	for (char *c = name; *c; c++)
		if (*c == '_')
			*c = '-';
	int rc = trainer_fit(&h->trainer, name, a->ncpu, m, res->train_err, sizeof(res->train_err));
	if (rc < 0) {
		res->train_implausible = rc == -2;
		free(m);
		return;
	}
	res->trained = m;
}

/*
 * The slot's VMs' cumulative energy (vms[].total_uj): their active energy, and
 * with vm_idle their share of the zone's idle energy in proportion to their CPU
 * time of the node's (total_cpu_ns), so that all VMs together get at most the idle.
 */
static int vm_totals(struct estimator *e, const char *host, size_t nz, uint64_t total_cpu_ns)
{
	struct group_set *gs = &e->groups[G_VM];
	if (gs->n == 0)
		return 0;
	if (wb_grow(&e->vm_total, &e->vm_total_cap, gs->n * nz + 1, sizeof(uint64_t), 16) < 0 ||
	    wb_grow(&e->vm_idle, &e->vm_idle_cap, gs->n * nz + 1, sizeof(uint64_t), 16) < 0) {
		for (size_t g = 0; g < gs->n; g++)
			gs->g[g].n_total_uj = 0;
		return -1;
	}
	for (size_t g = 0; g < gs->n; g++) {
		uint64_t cpu = gs->g[g].cpu_ns < total_cpu_ns ? gs->g[g].cpu_ns : total_cpu_ns;
		for (size_t z = 0; z < nz; z++)
			e->vm_idle[g * nz + z] =
			    total_cpu_ns ? (uint64_t)((unsigned __int128)e->zones[z].idle_uj * cpu /
						      total_cpu_ns)
					 : 0;
	}
	return totals_vms(&e->totals, host, e->zones, nz, gs->g, gs->n,
			  e->conf.vm_idle ? e->vm_idle : NULL, e->vm_total);
}

int estimator_slot(struct estimator *e, const struct wb_aligned *a, struct wb_estimate *out,
		   struct est_result *res, char *err, size_t errlen)
{
	memset(res, 0, sizeof(*res));
	memset(out, 0, sizeof(*out));
	bool use_ext = e->ext_set; /* for this slot only */
	e->ext_set = false;
	double slot_s = feat_slot_s(a);
	if (slot_s <= 0) {
		snprintf(err, errlen, "slot [%" PRIu64 ", %" PRIu64 "] of %s has no length", a->t0,
			 a->t1, a->env.host);
		return -1;
	}
	bool measured =
	    e->conf.mode == EST_MEASURED || (e->conf.mode == EST_AUTO && a->n_zones > 0);
	if (measured && a->n_zones == 0) {
		snprintf(err, errlen, "slot from %s has no power zones and mode is measured",
			 a->env.host);
		return -1;
	}
	size_t nz_max = measured ? a->n_zones : MODEL_ZONES_MAX;
	if (a->n_procs * nz_max > ENERGY_CELLS_MAX) {
		snprintf(err, errlen,
			 "slot from %s: %zu processes x %zu zones is more than %u values",
			 a->env.host, a->n_procs, nz_max, ENERGY_CELLS_MAX);
		return -1;
	}
	if (wb_grow(&e->zones, &e->zones_cap, nz_max + 1, sizeof(*e->zones), 16) < 0 ||
	    wb_grow(&e->procs, &e->procs_cap, a->n_procs + 1, sizeof(*e->procs), 16) < 0)
		goto nomem;

	/* A host new to the totals whose records would not fit the budget is refused. */
	size_t nz_in = measured ? a->n_zones : use_ext ? e->ext.n : e->model ? e->model->nzones : 0;
	if (!totals_admits(&e->totals, a->env.host, nz_in)) {
		res->budget_refused = true;
		snprintf(
		    err, errlen,
		    "slot from %s: refused, a new host and the memory budget (budget_mib) has %zu of %zu MiB in use",
		    a->env.host, e->budget.used >> 20, e->budget.max >> 20);
		return -1;
	}
	struct host_state *h = host_get(e, a->env.host);
	uint64_t busy, total;
	wb_cpu_busy(&a->cpu, &busy, &total);
	size_t nz = 0;
	res->measured = measured;
	if (measured) {
		measured_zones(e, h, a, slot_s, busy, total, res);
		nz = a->n_zones;
	} else if (use_ext) {
		external_zones(e, slot_s, &nz);
		res->external = true;
	} else if (e->model) {
		model_zones(e, a, slot_s, res, &nz);
	} else {
		res->no_model = true;
	}
	if (wb_grow(&e->energy, &e->energy_cap, a->n_procs * nz + 1, sizeof(uint64_t), 16) < 0)
		goto nomem;
	if (attribute(e, a, nz, busy, measured) < 0)
		goto nomem;
	if (cgroups_index(e, a) < 0 || procs_cgroups(e, a) < 0)
		goto nomem;
	fill_procs(e, a, nz);
	if (groups_build(e, a, nz) < 0)
		goto nomem;

	/* The estimate describes the slot's host; the rest of the envelope is ours (stamped when
	 * sent). */
	snprintf(out->env.host, sizeof(out->env.host), "%s", a->env.host);
	out->t0 = a->t0;
	out->t1 = a->t1;
	snprintf(out->mode, sizeof(out->mode), "%s", measured ? "measured" : "model");
	if (res->external)
		snprintf(out->model, sizeof(out->model), "%s", e->ext_name);
	else if (!measured && e->model)
		snprintf(out->model, sizeof(out->model), "%s", e->model->name);
	out->ncpu = a->ncpu;
	out->cpu_usage_ratio = total ? (double)(busy < total ? busy : total) / (double)total : 0.0;
	out->quality = a->quality;
	out->zones = e->zones;
	out->n_zones = nz;
	out->procs = e->procs;
	out->n_procs = a->n_procs;
	/* The paths of the slot's executables, as alignd attached them (the slot's memory). */
	out->exes = a->exes;
	out->n_exes = a->n_exes;
	struct wb_est_group **dst[G_KINDS] = {&out->containers, &out->pods, &out->vms,
					      &out->services};
	size_t *dst_n[G_KINDS] = {&out->n_containers, &out->n_pods, &out->n_vms, &out->n_services};
	for (int k = 0; k < G_KINDS; k++) {
		*dst[k] = e->groups[k].g;
		*dst_n[k] = e->groups[k].n;
	}
	struct tot_result tr;
	if (totals_slot(&e->totals, a, e->zones, nz, measured, busy, total, &tr) < 0)
		goto nomem;
	out->total_epoch = tr.epoch;
	if (!tr.stale && vm_totals(e, a->env.host, nz, total) < 0)
		res->vm_totals_short = true;
	res->stale = tr.stale;
	res->recovered_uj = tr.recovered_uj;
	res->totals_implausible = tr.implausible;
	res->totals_saturated = tr.saturated;
	res->clock_rewound = tr.rewound;
	if (measured && e->conf.train)
		train(e, h, a, res);
	return 0;
nomem:
	memset(out, 0, sizeof(*out));
	snprintf(err, errlen, "slot from %s: out of memory", a->env.host);
	return -1;
}
