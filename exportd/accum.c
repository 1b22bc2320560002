/*
 * exportd's own accumulators. Estimates carry the energy of one slot; summing
 * them here is what keeps every counter on /metrics monotonic across estimd,
 * alignd and powerd restarts. Slots are applied once per host in time order,
 * so a replayed or duplicated slot is not counted twice. Node counters follow
 * estimd's cumulative totals by lib/follow.h's rule (the difference within one
 * src and total_epoch, else the slot's own energy), so that lost estimates cost
 * no node energy; the accumulators stay exportd's own. The node
 * counters and the totals they were last diffed with go into a state (JSON built
 * and read back here, the file written and read by state.c), so that an exportd
 * restart continues them too.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "exportd.h"
#include "json.h"
#include "log.h"
#include "hash.h"

static const char *const reason_names[ACC_R_COUNT] = {
    [ACC_R_SLOT] = "slot",
    [ACC_R_ARRAY] = "array_length",
    [ACC_R_ZONE_SUM] = "zone_sum",
    [ACC_R_OVER] = "over_attributed",
    [ACC_R_DUP_ZONE] = "duplicate_zone",
    [ACC_R_ZONES] = "too_many_zones",
    [ACC_R_HOSTS] = "too_many_hosts",
    [ACC_R_STALE] = "stale",
    [ACC_R_NOMEM] = "nomem",
};

const char *accum_reason_name(enum accum_reason r)
{
	return r < ACC_R_COUNT ? reason_names[r] : "unknown";
}

/* ---- hashing ---- */

/* A label set's fingerprint, one string (at most maxlen bytes) at a time. */
static uint64_t hash_str(uint64_t h, const char *s, size_t maxlen)
{
	return wb_hash_more(h, s, strnlen(s, maxlen));
}

/* ---- a workload ---- */
static void work_free(struct ex_work *w)
{
	if (!w)
		return;
	free(w->id);
	free(w->labels);
	free(w->uj);
	free(w);
}

/* ---- a host's map of workloads of one level (struct ex_wmap) ---- */
static void wmap_init(struct ex_wmap *m)
{
	wb_table_init(&m->tab, sizeof(struct ex_wslot), offsetof(struct ex_wslot, key), 1,
		      offsetof(struct ex_wslot, used), 64, SIZE_MAX);
}

static uint64_t work_key(enum ex_level level, uint64_t pid, const char *id)
{
	return level == EX_PROCESS ? pid : wb_hash_str(id);
}

static struct ex_work *wmap_get(const struct ex_wmap *m, enum ex_level level, uint64_t key,
				uint64_t start_ns, const char *id)
{
	for (struct ex_wslot *s = wb_table_find(&m->tab, key, 0); s;
	     s = wb_table_find_next(&m->tab, s))
		if (level == EX_PROCESS ? s->w->start_ns == start_ns : strcmp(s->w->id, id) == 0)
			return s->w;
	return NULL;
}

/* A terminated process of the same pid, other than start_ns, or NULL. */
static struct ex_work *wmap_terminated_pid(const struct ex_wmap *m, uint64_t pid, uint64_t start_ns)
{
	for (struct ex_wslot *s = wb_table_find(&m->tab, pid, 0); s;
	     s = wb_table_find_next(&m->tab, s))
		if (s->w->start_ns != start_ns && s->w->terminated)
			return s->w;
	return NULL;
}

static int wmap_put(struct ex_wmap *m, struct ex_work *w)
{
	struct ex_wslot *s = wb_table_insert(&m->tab, w->key, 0);
	if (!s)
		return -1;
	s->w = w;
	return 0;
}

static void wmap_del(struct ex_wmap *m, const struct ex_work *w)
{
	for (struct ex_wslot *s = wb_table_find(&m->tab, w->key, 0); s;
	     s = wb_table_find_next(&m->tab, s))
		if (s->w == w) {
			wb_table_remove(&m->tab, s);
			return;
		}
}

/* Frees every workload of the map and its slots; the map stays usable, empty. */
static void wmap_free(struct ex_wmap *m)
{
	for (struct ex_wslot *s = wb_table_next(&m->tab, NULL); s; s = wb_table_next(&m->tab, s))
		work_free(s->w);
	wb_table_free(&m->tab);
}

/* ---- workloads ---- */
static unsigned work_series(enum ex_level level, size_t nz)
{
	/* joules and watts per zone, plus cpu_seconds for processes and containers */
	return (unsigned)(2 * nz + (level == EX_PROCESS || level == EX_CONTAINER));
}

static int work_resize(struct ex_work *w, size_t nz)
{
	if (nz <= w->nz)
		return 0;
	uint64_t *uj = calloc(2 * nz, sizeof *uj);
	if (!uj)
		return -1;
	if (w->uj) {
		memcpy(uj, w->uj, w->nz * sizeof *uj);
		memcpy(uj + nz, w->uj + w->nz, w->nz * sizeof *uj);
	}
	free(w->uj);
	w->uj = uj;
	w->nz = (uint8_t)nz;
	return 0;
}

static void term_unlink(struct ex_host *h, struct ex_work *w)
{
	if (w->tprev)
		w->tprev->tnext = w->tnext;
	else
		h->term_head[w->level] = w->tnext;
	if (w->tnext)
		w->tnext->tprev = w->tprev;
	else
		h->term_tail[w->level] = w->tprev;
	w->tprev = w->tnext = NULL;
	h->nterm[w->level]--;
}

static void work_terminate(struct ex_host *h, struct ex_work *w, uint64_t t1)
{
	if (w->terminated)
		return;
	w->terminated = true;
	w->terminated_t1 = t1;
	w->tprev = h->term_tail[w->level];
	w->tnext = NULL;
	if (w->tprev)
		w->tprev->tnext = w;
	else
		h->term_head[w->level] = w;
	h->term_tail[w->level] = w;
	h->nterm[w->level]++;
}

static void work_revive(struct ex_host *h, struct ex_work *w)
{
	if (!w->terminated)
		return;
	term_unlink(h, w);
	w->terminated = false;
}

static void work_remove(struct accum *self, struct ex_host *h, struct ex_work *w)
{
	if (w->terminated)
		term_unlink(h, w);
	wmap_del(&h->works[w->level], w);
	self->series[w->level] -= w->nseries;
	work_free(w);
}

/* Evict the oldest terminated workload of host h, its own level first. */
static bool evict_one(struct accum *self, struct ex_host *h, enum ex_level prefer)
{
	struct ex_work *w = h->term_head[prefer];
	for (int l = 0; !w && l < EX_NLEVELS; l++)
		w = h->term_head[l];
	if (!w)
		return false;
	self->evicted[w->level]++;
	work_remove(self, h, w);
	return true;
}

/*
 * Find or create the workload. NULL when the level is not tracked or the series
 * cap refused it (counted).
 */
static struct ex_work *work_get(struct accum *self, struct ex_host *h, enum ex_level level,
				uint64_t pid, uint64_t start_ns, const char *id)
{
	if (!(self->lim.levels & (1u << level)))
		return NULL;
	uint64_t key = work_key(level, pid, id);
	struct ex_work *w = wmap_get(&h->works[level], level, key, start_ns, id);
	if (w)
		return w;
	struct ex_work *old;
	if (level == EX_PROCESS && (old = wmap_terminated_pid(&h->works[level], pid, start_ns))) {
		/* The pid was reused: a terminated predecessor still exported would render a
		 * second series with the same labels. The new process takes the pid's series
		 * over from zero (a counter reset, as when Kepler sees a pid again). */
		work_remove(self, h, old);
		self->pid_reused++;
	}
	unsigned ns = work_series(level, h->nkinds);
	while (accum_series(self) + ns > self->lim.max_series) {
		if (!evict_one(self, h, level)) {
			self->dropped[level] += ns;
			return NULL;
		}
	}
	w = calloc(1, sizeof *w);
	if (w) {
		w->level = (uint8_t)level;
		w->key = key;
		w->pid = pid;
		w->start_ns = start_ns;
		w->nseries = ns;
	}
	if (!w || work_resize(w, h->nkinds) < 0 || (level != EX_PROCESS && !(w->id = strdup(id))) ||
	    wmap_put(&h->works[level], w) < 0) {
		log_warnx("exportd: out of memory tracking a %s of host %s", ex_level_names[level],
			  h->name);
		work_free(w);
		self->dropped[level] += ns;
		return NULL;
	}
	self->series[level] += ns;
	return w;
}

/* Set the workload's fixed labels when what they show changed (exec, rename). */
static void work_labels(struct ex_work *w, uint64_t ident, struct rbuf *tmp,
			void (*render)(struct rbuf *, const void *), const void *src)
{
	if (w->labels && w->ident == ident)
		return;
	rbuf_reset(tmp);
	render(tmp, src);
	rbuf_putc(tmp, '\0');
	if (tmp->oom)
		return;
	char *l = malloc(tmp->len);
	if (!l)
		return;
	memcpy(l, tmp->p, tmp->len);
	free(w->labels);
	w->labels = l;
	w->ident = ident;
}

static const char *proc_type(const struct wb_est_proc *p)
{
	if (p->vm[0])
		return "vm";
	if (p->container_id[0])
		return "container";
	return "regular";
}

/* A process as its labels show it: estimd's process and its executable's path ("": unknown). */
struct proc_view {
	const struct wb_est_proc *p;
	const char *exe;
};

static void render_proc_labels(struct rbuf *b, const void *src)
{
	const struct proc_view *v = src;
	const struct wb_est_proc *p = v->p;
	char pid[24];
	snprintf(pid, sizeof pid, "%llu", (unsigned long long)p->pid);
	rbuf_label(b, true, "pid", pid, sizeof pid);
	rbuf_label(b, false, "comm", p->comm, sizeof p->comm);
	rbuf_label(b, false, "exe", v->exe, sizeof(((struct wb_exe *)0)->path));
	rbuf_label(b, false, "type", proc_type(p), 16);
	rbuf_label(b, false, "container_id", p->container_id, sizeof p->container_id);
	rbuf_label(b, false, "vm_id", p->vm, sizeof p->vm);
}

/* Kepler's runtime names: docker, containerd, crio, podman, kubernetes, unknown. */
static const char *container_runtime(const char *rt)
{
	if (!rt[0])
		return "unknown";
	if (!strcmp(rt, "cri-o"))
		return "crio";
	return rt;
}

/* Kepler's hypervisor names; libvirt's machine.slice scopes on Linux are KVM. */
static const char *vm_hypervisor(const char *rt)
{
	if (!rt[0])
		return "unknown";
	if (!strcmp(rt, "libvirt") || !strcmp(rt, "qemu"))
		return "kvm";
	return rt;
}

/* A container, pod or VM as its labels show it: estimd's group and the names found for it. */
struct group_view {
	const struct wb_est_group *g;
	const char *name; /* the kubelet's name, estimd's, or NULL */
	const char *ns;	  /* pods: the namespace, or NULL */
};

static void render_container_labels(struct rbuf *b, const void *src)
{
	const struct group_view *v = src;
	const struct wb_est_group *g = v->g;
	rbuf_label(b, true, "container_id", g->id, sizeof g->id);
	/* Without a name (no kubelet, a container of no pod): a docker-style short id keeps
	 * containers apart in "by (container_name)" */
	rbuf_label(b, false, "container_name", v->name ? v->name : g->id,
		   v->name ? KUBE_NAME_MAX : 12);
	rbuf_label(b, false, "runtime", container_runtime(g->runtime), sizeof g->runtime);
	rbuf_label(b, false, "pod_id", g->pod_uid, sizeof g->pod_uid);
}

static void render_pod_labels(struct rbuf *b, const void *src)
{
	const struct group_view *v = src;
	const struct wb_est_group *g = v->g;
	rbuf_label(b, true, "pod_id", g->id, sizeof g->id);
	/* Without a name the uid keeps pods apart in "by (pod_name)" */
	rbuf_label(b, false, "pod_name", v->name ? v->name : g->id, KUBE_NAME_MAX);
	rbuf_label(b, false, "pod_namespace", v->ns ? v->ns : "", KUBE_NAME_MAX);
}

static void render_vm_labels(struct rbuf *b, const void *src)
{
	const struct group_view *v = src;
	const struct wb_est_group *g = v->g;
	rbuf_label(b, true, "vm_id", g->id, sizeof g->id);
	rbuf_label(b, false, "vm_name", v->name ? v->name : g->id, sizeof g->name);
	rbuf_label(b, false, "hypervisor", vm_hypervisor(g->runtime), sizeof g->runtime);
}

/* ---- hosts and zones ---- */
static void host_free(struct ex_host *h)
{
	if (!h)
		return;
	for (int l = 0; l < EX_NLEVELS; l++)
		wmap_free(&h->works[l]);
	for (size_t z = 0; z < h->nzones; z++)
		free(h->zones[z].labels);
	for (size_t k = 0; k < h->nkinds; k++)
		free(h->kinds[k].zlabel);
	free(h->node_label);
	free(h);
}

struct ex_host *accum_host(struct accum *self, const char *name)
{
	for (size_t i = 0; i < self->nhosts; i++)
		if (!strcmp(self->hosts[i]->name, name))
			return self->hosts[i];
	return NULL;
}

const struct ex_work *accum_work(const struct ex_host *h, enum ex_level level, const char *id)
{
	if (level == EX_PROCESS || level >= EX_NLEVELS)
		return NULL;
	return wmap_get(&h->works[level], level, work_key(level, 0, id), 0, id);
}

static int host_label(struct ex_host *h, const char *node_name)
{
	struct rbuf b = {0};
	rbuf_label(&b, true, "node_name", node_name && node_name[0] ? node_name : h->name, 256);
	rbuf_putc(&b, '\0');
	if (b.oom) {
		rbuf_free(&b);
		return -1;
	}
	size_t len;
	free(h->node_label);
	h->node_label = rbuf_steal(&b, &len);
	return 0;
}

/* How long a host or a zone may be silent before its place can go to a new one. */
static uint64_t forget_after_ns(const struct accum *self)
{
	uint64_t ns = self->lim.stale_after_ns > self->lim.terminated_ttl_ns
			  ? self->lim.stale_after_ns
			  : self->lim.terminated_ttl_ns;
	return ns ? ns : 600 * 1000000000ull;
}

/*
 * A fleet turns over (autoscaling, renamed nodes): when the table is full, the
 * host silent longest, and longer than forget_after, makes room. Its series
 * leave /metrics; if it comes back, its counters start again (a counter reset,
 * which Prometheus handles).
 */
static bool host_evict_silent(struct accum *self, uint64_t now_t1)
{
	size_t victim = self->nhosts;
	for (size_t i = 0; i < self->nhosts; i++) {
		const struct ex_host *h = self->hosts[i];
		if (h->last_t1 + forget_after_ns(self) < now_t1 &&
		    (victim == self->nhosts || h->last_t1 < self->hosts[victim]->last_t1))
			victim = i;
	}
	if (victim == self->nhosts)
		return false;
	struct ex_host *h = self->hosts[victim];
	for (int l = 0; l < EX_NLEVELS; l++) {
		const struct ex_wmap *m = &h->works[l];
		for (const struct ex_wslot *s = wb_table_next(&m->tab, NULL); s;
		     s = wb_table_next(&m->tab, s))
			self->series[l] -= s->w->nseries;
	}
	host_free(h);
	self->hosts[victim] = self->hosts[--self->nhosts];
	self->evicted_hosts++;
	return true;
}

static struct ex_host *host_get(struct accum *self, const char *name, uint64_t now_t1,
				enum accum_reason *reason)
{
	struct ex_host *h = accum_host(self, name);
	if (h)
		return h;
	if (self->nhosts >= self->lim.max_hosts && !host_evict_silent(self, now_t1)) {
		*reason = ACC_R_HOSTS;
		return NULL;
	}
	struct ex_host **hosts = realloc(self->hosts, (self->nhosts + 1) * sizeof *hosts);
	if (hosts)
		self->hosts = hosts;
	h = calloc(1, sizeof *h);
	if (h) {
		snprintf(h->name, sizeof h->name, "%s", name);
		for (int l = 0; l < EX_NLEVELS; l++)
			wmap_init(&h->works[l]);
	}
	if (!h || !hosts || host_label(h, self->lim.node_name) < 0) {
		free(h);
		*reason = ACC_R_NOMEM;
		return NULL;
	}
	self->hosts[self->nhosts++] = h;
	return h;
}

/*
 * Zone paths change over a host's life (hwmonN renumbered at boot, an exec
 * command edited): when the table is full, the zone silent longest, and longer
 * than forget_after, gives its place up. Workloads keep their share of its kind
 * (kind_get clears it when no zone is left of that kind and its place is taken).
 */
static int zone_evict_silent(struct accum *self, struct ex_host *h, uint64_t now_t1)
{
	int victim = -1;
	for (size_t z = 0; z < h->nzones; z++)
		if (h->zones[z].slot_t1 + forget_after_ns(self) < now_t1 &&
		    (victim < 0 || h->zones[z].slot_t1 < h->zones[victim].slot_t1))
			victim = (int)z;
	if (victim < 0)
		return -1;
	free(h->zones[victim].labels);
	h->zones[victim].labels = NULL;
	self->evicted_zones++;
	return victim;
}

/*
 * The kind of zone named zone; a new kind takes the place of one no zone but
 * slot `filling` has any more, and every workload's share of that one is
 * cleared so nothing carries over to the new kind.
 */
static int kind_get(struct ex_host *h, const char *zone, size_t filling,
		    const struct ex_gpu_id *gpu)
{
	for (size_t k = 0; k < h->nkinds; k++)
		if (!strcmp(h->kinds[k].zone, zone))
			return (int)k;
	int slot = (int)h->nkinds;
	if (h->nkinds >= EX_MAX_ZONES) {
		bool used[EX_MAX_ZONES] = {0};
		for (size_t z = 0; z < h->nzones; z++)
			if (z != filling)
				used[h->zones[z].kind] = true;
		for (slot = 0; slot < EX_MAX_ZONES && used[slot]; slot++)
			;
		if (slot == EX_MAX_ZONES)
			return -1; /* not reached: at most EX_MAX_ZONES - 1 other zones */
		for (int l = 0; l < EX_NLEVELS; l++) {
			const struct ex_wmap *m = &h->works[l];
			for (const struct ex_wslot *s = wb_table_next(&m->tab, NULL); s;
			     s = wb_table_next(&m->tab, s))
				if ((size_t)slot < s->w->nz)
					s->w->uj[slot] = s->w->uj[s->w->nz + slot] = 0;
		}
	}
	struct ex_kind *k = &h->kinds[slot];
	struct rbuf b = {0};
	if (gpu) {
		char idx[24];
		snprintf(idx, sizeof idx, "%llu", (unsigned long long)gpu->index);
		rbuf_label(&b, true, "gpu", idx, sizeof idx);
		rbuf_label(&b, false, "vendor", gpu->vendor, 16);
	} else {
		rbuf_label(&b, true, "zone", zone, sizeof k->zone);
	}
	rbuf_putc(&b, '\0');
	size_t len;
	if (b.oom)
		return -1;
	free(k->zlabel);
	k->zlabel = rbuf_steal(&b, &len);
	snprintf(k->zone, sizeof k->zone, "%s", zone);
	k->gpu = gpu != NULL;
	k->platform = !gpu && !strcmp(zone, "platform");
	if (slot == (int)h->nkinds)
		h->nkinds++;
	return slot;
}

static int zone_get(struct accum *self, struct ex_host *h, const char *zone, const char *path,
		    uint64_t now_t1, const struct ex_gpu_id *gpu)
{
	for (size_t z = 0; z < h->nzones; z++)
		if (!strcmp(h->zones[z].zone, zone) && !strcmp(h->zones[z].path, path))
			return (int)z;
	int slot = (int)h->nzones;
	if (h->nzones >= EX_MAX_ZONES && (slot = zone_evict_silent(self, h, now_t1)) < 0)
		return -1;
	char gkind[16];
	if (gpu)
		snprintf(gkind, sizeof gkind, "gpu:%llu",
			 (unsigned long long)(gpu->index % 100000));
	int kind = kind_get(h, gpu ? gkind : zone, (size_t)slot, gpu);
	if (kind < 0)
		return -1;
	struct ex_zone *ez = &h->zones[slot];
	struct rbuf b = {0};
	if (gpu) {
		char idx[24];
		snprintf(idx, sizeof idx, "%llu", (unsigned long long)gpu->index);
		rbuf_label(&b, true, "gpu", idx, sizeof idx);
		rbuf_label(&b, false, "gpu_uuid", gpu->uuid, sizeof ez->uuid);
		rbuf_label(&b, false, "vendor", gpu->vendor, sizeof ez->vendor);
	} else {
		rbuf_label(&b, true, "zone", zone, sizeof ez->zone);
		rbuf_label(&b, false, "path", path, sizeof ez->path);
	}
	rbuf_putc(&b, '\0');
	size_t len;
	if (b.oom)
		return -1;
	*ez = (struct ex_zone){.kind = (uint8_t)kind, .gpu = gpu != NULL};
	if (gpu) {
		ez->index = gpu->index;
		snprintf(ez->uuid, sizeof ez->uuid, "%s", gpu->uuid);
		snprintf(ez->model, sizeof ez->model, "%s", gpu->model);
		snprintf(ez->vendor, sizeof ez->vendor, "%s", gpu->vendor);
	}
	snprintf(ez->zone, sizeof ez->zone, "%s", zone);
	snprintf(ez->path, sizeof ez->path, "%s", path);
	ez->labels = rbuf_steal(&b, &len);
	if (slot == (int)h->nzones)
		h->nzones++;
	return slot;
}

/* A platform zone's energy in the slot ending at t1; the entry silent longest gives its place
 * up when all are taken. */
static void platform_add(struct ex_host *h, const char *path, uint64_t t1, uint64_t uj)
{
	size_t i = 0;
	while (i < h->nplat && strcmp(h->plat[i].path, path))
		i++;
	if (i == h->nplat) {
		if (h->nplat < EX_MAX_PLATFORM) {
			h->nplat++;
		} else {
			i = 0;
			for (size_t k = 1; k < h->nplat; k++)
				if (h->plat[k].slot_t1 < h->plat[i].slot_t1)
					i = k;
		}
		h->plat[i] = (struct ex_platform){0};
		snprintf(h->plat[i].path, sizeof h->plat[i].path, "%s", path);
	}
	struct ex_platform *p = &h->plat[i];
	if (p->slot_t1 != t1)
		p->slot_uj = 0;
	p->slot_t1 = t1;
	p->slot_uj += uj;
}

/* ---- checks ---- */
static bool add_ok(uint64_t *sum, uint64_t v)
{
	return !__builtin_add_overflow(*sum, v, sum);
}

/* The workloads of one kind must not get more than the zone's active energy. */
static bool group_within(const struct wb_est_group *g, size_t n, const struct wb_estimate *e,
			 enum accum_reason *reason)
{
	for (size_t z = 0; z < e->n_zones; z++) {
		uint64_t sum = 0;
		for (size_t i = 0; i < n; i++)
			if (!add_ok(&sum, g[i].energy_uj[z]) || sum > e->zones[z].active_uj) {
				*reason = ACC_R_OVER;
				return false;
			}
	}
	return true;
}

static bool group_arrays(const struct wb_est_group *g, size_t n, size_t nz,
			 enum accum_reason *reason)
{
	for (size_t i = 0; i < n; i++)
		if (g[i].n_energy_uj != nz) {
			*reason = ACC_R_ARRAY;
			return false;
		}
	return true;
}

static bool estimate_check(const struct wb_estimate *e, enum accum_reason *reason)
{
	if (e->t1 <= e->t0) {
		*reason = ACC_R_SLOT;
		return false;
	}
	for (size_t z = 0; z < e->n_zones; z++) {
		const struct wb_est_zone *ez = &e->zones[z];
		uint64_t sum = ez->active_uj;
		if (!add_ok(&sum, ez->idle_uj) || sum != ez->energy_uj) {
			*reason = ACC_R_ZONE_SUM;
			return false;
		}
		for (size_t y = 0; y < z; y++)
			if (!strcmp(e->zones[y].name, ez->name) &&
			    !strcmp(e->zones[y].path, ez->path) &&
			    !strcmp(e->zones[y].zone, ez->zone)) {
				*reason = ACC_R_DUP_ZONE;
				return false;
			}
	}
	for (size_t i = 0; i < e->n_procs; i++)
		if (e->procs[i].n_energy_uj != e->n_zones) {
			*reason = ACC_R_ARRAY;
			return false;
		}
	if (!group_arrays(e->containers, e->n_containers, e->n_zones, reason) ||
	    !group_arrays(e->pods, e->n_pods, e->n_zones, reason) ||
	    !group_arrays(e->vms, e->n_vms, e->n_zones, reason))
		return false;
	for (size_t z = 0; z < e->n_zones; z++) {
		uint64_t sum = e->zones[z].unattributed_uj;
		for (size_t i = 0; i < e->n_procs; i++)
			if (!add_ok(&sum, e->procs[i].energy_uj[z]) ||
			    sum > e->zones[z].active_uj) {
				*reason = ACC_R_OVER;
				return false;
			}
	}
	return group_within(e->containers, e->n_containers, e, reason) &&
	       group_within(e->pods, e->n_pods, e, reason) &&
	       group_within(e->vms, e->n_vms, e, reason);
}

/* ---- node totals ---- */
static struct ex_total *tot_find(struct ex_host *h, const char *name)
{
	for (size_t i = 0; i < h->ntot; i++)
		if (!strcmp(h->tot[i].name, name))
			return &h->tot[i];
	return NULL;
}

/* The zone's followed totals, created with nothing followed; NULL when EX_MAX_TOTALS are held. */
/* name's entry, or a new one; with the table full, one whose baseline is of another count than
 * count (a zone the host no longer has, or that this count has not told yet) gives way, so a host
 * whose zones change over its life keeps following the ones it has. NULL: every entry is in use. */
static struct ex_total *tot_get(struct ex_host *h, const char *name, uint64_t count)
{
	struct ex_total *t = tot_find(h, name);
	if (t)
		return t;
	if (h->ntot < EX_MAX_TOTALS)
		t = &h->tot[h->ntot++];
	for (size_t i = 0; !t && i < h->ntot; i++)
		if (!h->tot[i].f.have || h->tot[i].f.count != count)
			t = &h->tot[i];
	if (!t)
		return NULL;
	memset(t, 0, sizeof(*t));
	snprintf(t->name, sizeof t->name, "%s", name);
	return t;
}

/* Totals a zone can be diffed with: present and adding up (else the slot's values count). */
static bool tot_valid(const struct wb_estimate *e, const struct wb_est_zone *ez)
{
	uint64_t sum = ez->active_total_uj;
	return e->total_epoch && ez->total_uj && add_ok(&sum, ez->idle_total_uj) &&
	       sum == ez->total_uj;
}

/* The count of the host's totals, for its state file: that of the last estimate applied. */
static uint64_t tot_count(const struct ex_host *h)
{
	return h->tot_have ? wb_follow_count(h->tot_src, h->tot_epoch) : 0;
}

/* ---- applying a slot ---- */

/* The estimate's exes by id, for the processes' exe label (the first entry of an id wins). */
struct exe_ix {
	uint64_t id;
	uint32_t idx;
	bool used;
};

static void exes_index(struct wb_table *t, const struct wb_estimate *e)
{
	wb_table_init(t, sizeof(struct exe_ix), offsetof(struct exe_ix, id), 1,
		      offsetof(struct exe_ix, used), 64, e->n_exes ? e->n_exes : 1);
	for (size_t i = 0; i < e->n_exes; i++) {
		struct exe_ix *x = wb_table_find(t, e->exes[i].id, 0);
		if (!x && (x = wb_table_insert(t, e->exes[i].id, 0)))
			x->idx = (uint32_t)i;
	}
}

/* The path of exe_id in the estimate, or NULL (0, or an id without an entry: no fault). */
static const char *exe_path(const struct wb_table *t, const struct wb_estimate *e, uint64_t id)
{
	const struct exe_ix *x = id && t->n ? wb_table_find(t, id, 0) : NULL;
	return x ? e->exes[x->idx].path : NULL;
}

struct slot_ctx {
	struct accum *self;
	struct ex_host *h;
	uint64_t t1;
	uint64_t num, den; /* energies scale by num/den when the slot overlapped the last one */
	int zmap[256];	   /* estimate zone -> exported zone */
	int kmap[256];	   /* estimate zone -> its kind (workloads) */
	size_t nz;
	struct rbuf tmp;
};

static uint64_t scale(const struct slot_ctx *c, uint64_t v)
{
	if (c->num == c->den)
		return v;
	return (uint64_t)((unsigned __int128)v * c->num / c->den);
}

static void work_add(struct slot_ctx *c, struct ex_work *w, uint64_t cpu_ns,
		     const uint64_t *energy_uj)
{
	struct ex_host *h = c->h;
	if (w->nz < h->nkinds) {
		/* a zone kind appeared on the host: the workload's new series count against the cap
		 * too */
		unsigned old = w->nseries, ns = work_series(w->level, h->nkinds);
		if (accum_series(c->self) + (ns - old) > c->self->lim.max_series)
			c->self->dropped[w->level] += ns - old;
		else if (work_resize(w, h->nkinds) == 0) {
			w->nseries = ns;
			c->self->series[w->level] += ns - old;
		}
	}
	/* A host without zones (model mode without a model) leaves uj NULL: no arithmetic on it. */
	uint64_t *acc = w->uj, *slot = w->nz ? w->uj + w->nz : NULL;
	if (w->last_t1 != c->t1) {
		if (slot)
			memset(slot, 0, w->nz * sizeof *slot);
		w->last_t1 = c->t1;
	}
	w->cpu_ns += scale(c, cpu_ns);
	for (size_t z = 0; z < c->nz; z++) {
		int ez = c->kmap[z];
		if (ez >= w->nz)
			continue;
		uint64_t v = scale(c, energy_uj[z]);
		acc[ez] += v;
		slot[ez] += v;
	}
	if (w->terminated)
		work_revive(h, w);
}

/* The names of a group: the kubelet's for containers and pods, else estimd's. */
static struct group_view group_names(const struct accum *self, enum ex_level level,
				     const struct wb_est_group *g, bool *from_kube)
{
	struct group_view v = {.g = g, .name = g->name[0] ? g->name : NULL};
	*from_kube = false;
	if (level == EX_POD) {
		const struct kube_pod *p = kube_names_pod(self->kube, g->id);
		if (p) {
			v.name = p->name;
			v.ns = p->ns;
			*from_kube = true;
		}
	} else if (level == EX_CONTAINER) {
		const struct kube_container *k = kube_names_container(self->kube, g->id);
		if (k) {
			v.name = k->name;
			*from_kube = true;
		}
	}
	return v;
}

static void apply_groups(struct slot_ctx *c, enum ex_level level, const struct wb_est_group *g,
			 size_t n, void (*render)(struct rbuf *, const void *))
{
	for (size_t i = 0; i < n; i++) {
		struct ex_work *w = work_get(c->self, c->h, level, 0, 0, g[i].id);
		if (!w)
			continue;
		bool from_kube;
		struct group_view v = group_names(c->self, level, &g[i], &from_kube);
		/* A pod deleted (gone from the kubelet's list) keeps the names its series has:
		 * its last slots and its terminated series stay one series. */
		if (from_kube || !w->named) {
			uint64_t ident = hash_str(
			    hash_str(hash_str(0, v.name ? v.name : "", 256), v.ns ? v.ns : "", 256),
			    g[i].runtime, sizeof g[i].runtime);
			ident = hash_str(ident, g[i].pod_uid, sizeof g[i].pod_uid);
			work_labels(w, ident, &c->tmp, render, &v);
			w->named = from_kube && w->labels && w->ident == ident;
		}
		work_add(c, w, g[i].cpu_ns, g[i].energy_uj);
	}
}

/* Mark workloads that have not run for stale_after as terminated; enforce retention. */
static void host_expire(struct accum *self, struct ex_host *h)
{
	uint64_t now = h->last_t1;
	/* a full scan per second of data time is plenty for a bound given in minutes */
	bool scan = self->lim.stale_after_ns && now - h->last_scan_t1 >= 1000000000ull;
	if (scan)
		h->last_scan_t1 = now;
	for (int l = EX_PROCESS; l < EX_NLEVELS; l++) {
		struct ex_wmap *m = &h->works[l];
		if (scan) {
			for (const struct ex_wslot *s = wb_table_next(&m->tab, NULL); s;
			     s = wb_table_next(&m->tab, s))
				if (!s->w->terminated &&
				    now - s->w->last_t1 > self->lim.stale_after_ns)
					work_terminate(h, s->w, now);
		}
		while (h->term_head[l] &&
		       (h->nterm[l] > self->lim.max_terminated ||
			(self->lim.terminated_ttl_ns &&
			 now - h->term_head[l]->terminated_t1 >= self->lim.terminated_ttl_ns))) {
			self->evicted[l]++;
			work_remove(self, h, h->term_head[l]);
		}
	}
}

static void drop_level(struct accum *self, enum ex_level level)
{
	for (size_t i = 0; i < self->nhosts; i++) {
		struct ex_host *h = self->hosts[i];
		wmap_free(&h->works[level]);
		h->term_head[level] = h->term_tail[level] = NULL;
		h->nterm[level] = 0;
	}
	self->series[level] = 0;
}

int accum_add(struct accum *self, const struct wb_estimate *e, enum accum_reason *reason)
{
	enum accum_reason r = ACC_R_COUNT;
	struct ex_host *h = NULL;
	if (!estimate_check(e, &r) || !(h = host_get(self, e->env.host, e->t1, &r)))
		goto reject;
	if (h->last_t1 && e->t1 <= h->last_t1) {
		r = ACC_R_STALE;
		goto reject;
	}

	struct slot_ctx c = {.self = self, .h = h, .t1 = e->t1, .nz = e->n_zones};
	uint64_t t0 = e->t0;
	c.num = c.den = e->t1 - e->t0;
	if (h->last_t1 && t0 < h->last_t1) {
		/* overlaps the slot before: count only the part after it */
		c.num = e->t1 - h->last_t1;
		t0 = h->last_t1;
		self->clipped++;
	}

	/* Zones of one kind on several sockets become one "aggregated-<zone>" zone. */
	for (size_t z = 0; z < e->n_zones; z++) {
		const struct wb_est_zone *ez = &e->zones[z];
		size_t same = 0;
		for (size_t y = 0; y < e->n_zones; y++)
			same += !strcmp(e->zones[y].zone, ez->zone) && !e->zones[y].uuid[0];
		char path[sizeof h->zones[0].path];
		if (same > 1 && !ez->uuid[0])
			snprintf(path, sizeof path, "aggregated-%s", ez->zone);
		else
			snprintf(path, sizeof path, "%s", ez->path);
		struct ex_gpu_id gid = {ez->uuid, ez->model, ez->vendor, ez->index};
		c.zmap[z] = zone_get(self, h, ez->zone, path, e->t1, ez->uuid[0] ? &gid : NULL);
		if (c.zmap[z] < 0) {
			r = ACC_R_ZONES;
			goto reject;
		}
		c.kmap[z] = h->zones[c.zmap[z]].kind;
	}

	for (size_t z = 0; z < h->nzones; z++) {
		struct ex_zone *xz = &h->zones[z];
		if (xz->slot_t1 != e->t1) {
			xz->slot_total_uj = xz->slot_active_uj = xz->slot_idle_uj = 0;
			xz->slot_t1 = e->t1;
		}
	}
	uint64_t under = 0, recovered = 0;
	uint64_t count = wb_follow_count(e->env.src, e->total_epoch);
	uint64_t since = e->t1 > h->last_t1 ? e->t1 - h->last_t1 : 0;
	for (size_t z = 0; z < e->n_zones; z++) {
		const struct wb_est_zone *ez = &e->zones[z];
		struct ex_zone *xz = &h->zones[c.zmap[z]];
		uint64_t tot = scale(&c, ez->energy_uj), act = scale(&c, ez->active_uj);
		/* idle as the difference keeps total == active + idle exactly after scaling */
		uint64_t idle = tot - act;
		/* The node counters follow estimd's totals (lib/follow.h): within one count by
		 * their difference, this slot and any lost before; else by the slot's values. */
		uint64_t add_tot = tot, add_act = act, add_idle = idle;
		struct ex_total *t = tot_get(h, ez->name, count);
		if (t) {
			struct wb_follow_step s = {tot_valid(e, ez) ? count : 0, ez->total_uj, tot,
						   since, self->lim.bound.max_zone_w};
			enum wb_follow_how how;
			add_tot = wb_follow_step(&t->f, &s, &how);
			self->totals_implausible += how == WB_FOLLOW_IMPLAUSIBLE;
			if (how == WB_FOLLOW_DIFF) {
				/* An estimd killed after its last checkpoint tells the total again
				 * exactly, but may split what it had published since between active
				 * and idle otherwise: the total counts as told, and neither part
				 * goes back. */
				uint64_t da = ez->active_total_uj > t->active_uj
						  ? ez->active_total_uj - t->active_uj
						  : 0;
				add_act = da < add_tot ? da : add_tot;
				add_idle = add_tot - add_act;
				if (add_tot > tot)
					recovered += add_tot - tot;
			}
			t->active_uj = ez->active_total_uj;
		}
		xz->total_uj += add_tot;
		xz->active_uj += add_act;
		xz->idle_uj += add_idle;
		xz->slot_total_uj += tot;
		xz->slot_active_uj += act;
		xz->slot_idle_uj += idle;
		if (!strcmp(ez->zone, "platform"))
			platform_add(h, ez->path, e->t1, tot);
		if (xz->gpu)
			xz->idle_w = ez->idle_w;
		uint64_t attributed = ez->unattributed_uj;
		for (size_t i = 0; i < e->n_procs; i++)
			attributed += e->procs[i].energy_uj[z];
		under |= attributed != ez->active_uj;
	}
	self->underattributed += under != 0;
	self->recovered += recovered != 0;
	self->recovered_uj += recovered;
	h->tot_have = e->total_epoch != 0;
	h->tot_epoch = e->total_epoch;
	snprintf(h->tot_src, sizeof h->tot_src, "%s", e->env.src);

	if (self->lim.levels & (1u << EX_PROCESS)) {
		struct wb_table exes;
		exes_index(&exes, e);
		for (size_t i = 0; i < e->n_procs; i++) {
			const struct wb_est_proc *p = &e->procs[i];
			struct ex_work *w =
			    work_get(self, h, EX_PROCESS, p->pid, p->start_ns, NULL);
			if (!w)
				continue;
			uint64_t ident = hash_str(hash_str(hash_str(0, p->comm, sizeof p->comm),
							   p->container_id, sizeof p->container_id),
						  p->vm, sizeof p->vm);
			/* exe: the path of its exe_id. An estimate without that path (alignd
			 * restarted and has not had it again yet) keeps the path the labels
			 * show for the same id: a label that comes and goes would split the
			 * series. */
			struct proc_view v = {.p = p, .exe = exe_path(&exes, e, p->exe_id)};
			uint64_t with = wb_hash2(ident, p->exe_id);
			if (!v.exe && !(p->exe_id && w->labels && w->ident == with)) {
				v.exe = "";
				with = ident;
			}
			work_labels(w, with, &c.tmp, render_proc_labels, &v);
			work_add(&c, w, p->cpu_ns, p->energy_uj);
			if (p->exited)
				work_terminate(h, w, e->t1);
		}
		wb_table_free(&exes);
	}
	apply_groups(&c, EX_CONTAINER, e->containers, e->n_containers, render_container_labels);
	apply_groups(&c, EX_POD, e->pods, e->n_pods, render_pod_labels);
	apply_groups(&c, EX_VM, e->vms, e->n_vms, render_vm_labels);
	rbuf_free(&c.tmp);

	h->last_t0 = t0;
	h->last_t1 = e->t1;
	h->slot_ns = e->t1 - t0;
	h->cpu_usage_ratio = e->cpu_usage_ratio;
	snprintf(h->mode, sizeof h->mode, "%s", e->mode);
	h->estimates++;
	host_expire(self, h);
	self->version++;
	return 0;

reject:
	self->rejected[r]++;
	if (reason)
		*reason = r;
	return -1;
}

size_t accum_series(const struct accum *self)
{
	size_t n = 0;
	for (int l = 0; l < EX_NLEVELS; l++)
		n += self->series[l];
	return n;
}

static int limits_copy(struct accum *self, const struct accum_limits *lim)
{
	char *node = strdup(lim->node_name ? lim->node_name : "");
	if (!node)
		return -1;
	free(self->node_name);
	self->node_name = node;
	self->lim = *lim;
	self->lim.node_name = node;
	return 0;
}

void accum_set_limits(struct accum *self, const struct accum_limits *lim)
{
	unsigned dropped = self->lim.levels & ~lim->levels;
	bool renamed = strcmp(self->node_name, lim->node_name ? lim->node_name : "") != 0;
	if (limits_copy(self, lim) < 0)
		return;
	for (int l = EX_PROCESS; l < EX_NLEVELS; l++)
		if (dropped & (1u << l))
			drop_level(self, (enum ex_level)l);
	for (size_t i = 0; renamed && i < self->nhosts; i++)
		host_label(self->hosts[i], self->node_name);
}

struct accum *accum_new(const struct accum_limits *lim)
{
	struct accum *self = calloc(1, sizeof *self);
	if (!self || limits_copy(self, lim) < 0) {
		free(self);
		return NULL;
	}
	return self;
}

void accum_destroy(struct accum **self_p)
{
	if (!self_p || !*self_p)
		return;
	struct accum *self = *self_p;
	for (size_t i = 0; i < self->nhosts; i++)
		host_free(self->hosts[i]);
	free(self->hosts);
	free(self->node_name);
	free(self);
	*self_p = NULL;
}

/* ---- state: the node counters across exportd's restarts (state.c saves and loads it) ---- */

json_t *accum_to_json(const struct accum *self)
{
	json_t *hosts = json_array();
	json_t *root = json_pack("{s:i, s:o}", "version", 1, "hosts", hosts);
	if (!root)
		return NULL;
	for (size_t i = 0; i < self->nhosts; i++) {
		const struct ex_host *h = self->hosts[i];
		json_t *zones = json_array(), *tots = json_array();
		for (size_t z = 0; z < h->nzones; z++) {
			const struct ex_zone *xz = &h->zones[z];
			json_array_append_new(
			    zones,
			    json_pack(
				"{s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:s, s:s, s:s, s:I}",
				"zone", xz->zone, "path", xz->path, "total_uj",
				(json_int_t)xz->total_uj, "active_uj", (json_int_t)xz->active_uj,
				"idle_uj", (json_int_t)xz->idle_uj, "slot_total_uj",
				(json_int_t)xz->slot_total_uj, "slot_active_uj",
				(json_int_t)xz->slot_active_uj, "slot_idle_uj",
				(json_int_t)xz->slot_idle_uj, "slot_t1", (json_int_t)xz->slot_t1,
				"uuid", xz->uuid, "model", xz->model, "vendor", xz->vendor, "index",
				(json_int_t)xz->index));
		}
		/* Only totals of the host's count: a zone silent since an older one is not
		 * diffed with after a restart either. */
		uint64_t count = tot_count(h);
		for (size_t k = 0; k < h->ntot; k++) {
			const struct ex_total *t = &h->tot[k];
			if (!count || !t->f.have || t->f.count != count)
				continue;
			uint64_t act = t->active_uj < t->f.last_uj ? t->active_uj : t->f.last_uj;
			json_array_append_new(
			    tots, json_pack("{s:s, s:I, s:I, s:I}", "name", t->name, "total_uj",
					    (json_int_t)t->f.last_uj, "active_uj", (json_int_t)act,
					    "idle_uj", (json_int_t)(t->f.last_uj - act)));
		}
		json_array_append_new(
		    hosts, json_pack("{s:s, s:I, s:I, s:I, s:I, s:s, s:f, s:b, s:s, s:I, s:o, s:o}",
				     "host", h->name, "last_t0", (json_int_t)h->last_t0, "last_t1",
				     (json_int_t)h->last_t1, "slot_ns", (json_int_t)h->slot_ns,
				     "last_recv_ns", (json_int_t)h->last_recv_ns, "mode", h->mode,
				     "cpu_usage_ratio", h->cpu_usage_ratio, "tot_have", h->tot_have,
				     "tot_src", h->tot_src, "tot_epoch", (json_int_t)h->tot_epoch,
				     "zones", zones, "totals", tots));
	}
	return root;
}

/* A saved energy triple, made to add up (active + idle == total) whatever the file says. */
static void load_triple(const json_t *o, const char *tk, const char *ak, uint64_t *tot,
			uint64_t *act, uint64_t *idle)
{
	*tot = wb_json_u64(o, tk);
	*act = wb_json_u64(o, ak);
	if (*act > *tot)
		*act = *tot;
	*idle = *tot - *act;
}

static void host_restore(struct accum *self, struct ex_host *h, const json_t *o)
{
	h->last_t0 = wb_json_u64(o, "last_t0");
	h->last_t1 = wb_json_u64(o, "last_t1");
	h->slot_ns = wb_json_u64(o, "slot_ns");
	h->last_recv_ns = wb_json_u64(o, "last_recv_ns");
	h->last_scan_t1 = h->last_t1;
	snprintf(h->mode, sizeof h->mode, "%s", wb_json_str(o, "mode"));
	json_t *ratio = json_object_get(o, "cpu_usage_ratio");
	h->cpu_usage_ratio = json_is_number(ratio) ? json_number_value(ratio) : 0;
	size_t k;
	json_t *zo;
	json_array_foreach(json_object_get(o, "zones"), k, zo)
	{
		const char *zone = wb_json_str(zo, "zone"), *path = wb_json_str(zo, "path");
		if (!zone[0] || strlen(zone) >= sizeof h->zones[0].zone ||
		    strlen(path) >= sizeof h->zones[0].path)
			continue;
		const char *uuid = wb_json_str(zo, "uuid");
		struct ex_gpu_id gid = {uuid, wb_json_str(zo, "model"), wb_json_str(zo, "vendor"),
					wb_json_u64(zo, "index")};
		int z = zone_get(self, h, zone, path, h->last_t1,
				 uuid[0] && strlen(uuid) < sizeof h->zones[0].uuid &&
					 strlen(gid.model) < sizeof h->zones[0].model &&
					 strlen(gid.vendor) < sizeof h->zones[0].vendor
				     ? &gid
				     : NULL);
		if (z < 0)
			continue;
		struct ex_zone *xz = &h->zones[z];
		load_triple(zo, "total_uj", "active_uj", &xz->total_uj, &xz->active_uj,
			    &xz->idle_uj);
		load_triple(zo, "slot_total_uj", "slot_active_uj", &xz->slot_total_uj,
			    &xz->slot_active_uj, &xz->slot_idle_uj);
		xz->slot_t1 = wb_json_u64(zo, "slot_t1");
	}
	h->tot_epoch = wb_json_u64(o, "tot_epoch");
	h->tot_have = json_is_true(json_object_get(o, "tot_have")) && h->tot_epoch;
	snprintf(h->tot_src, sizeof h->tot_src, "%s", wb_json_str(o, "tot_src"));
	uint64_t count = tot_count(h);
	json_array_foreach(json_object_get(o, "totals"), k, zo)
	{
		const char *name = wb_json_str(zo, "name");
		if (!count || !name[0] || strlen(name) >= sizeof h->tot[0].name ||
		    tot_find(h, name) || h->ntot >= EX_MAX_TOTALS)
			continue;
		struct ex_total *t = tot_get(h, name, count);
		uint64_t idle;
		load_triple(zo, "total_uj", "active_uj", &t->f.last_uj, &t->active_uj, &idle);
		t->f.count = count;
		t->f.have = true;
	}
}

int accum_from_json(struct accum *self, const json_t *root, size_t *nhosts, char *err,
		    size_t errlen)
{
	*nhosts = 0;
	if (wb_json_u64(root, "version") != 1 || !json_is_array(json_object_get(root, "hosts"))) {
		snprintf(err, errlen, "not an exportd state (version 1 with hosts)");
		return -1;
	}
	size_t i;
	json_t *o;
	json_array_foreach(json_object_get(root, "hosts"), i, o)
	{
		const char *name = wb_json_str(o, "host");
		if (!name[0] || strlen(name) >= sizeof self->hosts[0]->name ||
		    accum_host(self, name))
			continue;
		enum accum_reason why;
		struct ex_host *h = host_get(self, name, wb_json_u64(o, "last_t1"), &why);
		if (!h)
			break; /* max_hosts, or out of memory */
		host_restore(self, h, o);
		(*nhosts)++;
	}
	return 0;
}
