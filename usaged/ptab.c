/*
 * The processes usaged knows, keyed by (pid, start time), and which of them
 * each usage message lists: the loss-tolerance scheme described in
 * schemas/usage.json. Pure code: samples in, message procs out. The entries
 * are a dense array; a lib/table.h table indexes them by their keys.
 */
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "table.h"
#include "usaged.h"

const char *const usaged_counter_names[USAGED_NCOUNTERS] = {
    [USAGED_CYCLES] = "cycles",
    [USAGED_INSTRUCTIONS] = "instructions",
    [USAGED_CACHE_MISSES] = "cache_misses",
};

struct pt_entry {
	uint32_t pid;
	uint64_t start_ns;
	uint64_t kcgroup_id; /* as the source reports it */
	uint64_t cgroup_id;  /* as published */
	uint64_t exe_id;     /* as published */
	uint64_t base_cpu_ns, base_counters[USAGED_NCOUNTERS];
	uint64_t cpu_ns, counters[USAGED_NCOUNTERS]; /* published: since base, never decreasing */
	uint64_t last_active;			     /* message number of the last increase */
	uint64_t seen;				     /* scan generation that last saw it */
	char comm[USAGED_COMM_LEN];
	bool ever_active; /* has something to report */
	bool active_now;  /* increased in this scan */
	bool fresh;	  /* identity not resolved yet */
	bool moved;	  /* the source reports another cgroup */
	bool exe_stale;	  /* new, or its comm changed (an exec): read its executable */
	bool transient;	  /* last seen running only: the source does not keep it */
	bool exited;
};

/* The index: where in ents the process (pid, start_ns) is. */
struct pt_ix {
	uint64_t pid, start_ns; /* the keys, as in its entry */
	uint32_t idx;
	bool used;
};

struct ptab {
	struct pt_entry *ents; /* dense, so that the scans walk n entries, not the index's slots */
	size_t n, cap, max;
	WB_TABLE(struct pt_ix) ix;
	uint64_t msgno, gen, dropped;
	bool baseline_first, first_scan;
};

struct ptab *ptab_new(size_t max, bool baseline_first)
{
	struct ptab *self = calloc(1, sizeof(*self));
	if (!self)
		return NULL;
	self->max = max;
	self->baseline_first = baseline_first;
	self->first_scan = true;
	/* The table's max keeps idx within a uint32_t; add() checks ptab's own max first. */
	wb_table_init(&self->ix.tab, sizeof(struct pt_ix), offsetof(struct pt_ix, pid), 2,
		      offsetof(struct pt_ix, used), 1024, UINT32_MAX - 1);
	return self;
}

void ptab_destroy(struct ptab **self_p)
{
	if (!self_p || !*self_p)
		return;
	free((*self_p)->ents);
	wb_table_free(&(*self_p)->ix.tab);
	free(*self_p);
	*self_p = NULL;
}

static struct pt_entry *find(const struct ptab *self, uint32_t pid, uint64_t start_ns)
{
	const struct pt_ix *x = wb_table_find(&self->ix.tab, pid, start_ns);
	return x ? &self->ents[x->idx] : NULL;
}

static struct pt_entry *add(struct ptab *self, uint32_t pid, uint64_t start_ns)
{
	if (self->n >= self->max)
		return NULL;
	if (self->n == self->cap) {
		size_t cap = self->cap ? self->cap * 2 : 256;
		struct pt_entry *ents = realloc(self->ents, cap * sizeof(*ents));
		if (!ents)
			return NULL;
		self->ents = ents;
		self->cap = cap;
	}
	struct pt_ix *x = wb_table_insert(&self->ix.tab, pid, start_ns);
	if (!x)
		return NULL;
	x->idx = (uint32_t)self->n;
	struct pt_entry *e = &self->ents[self->n++];
	memset(e, 0, sizeof(*e));
	e->pid = pid;
	e->start_ns = start_ns;
	return e;
}

/* Remove entry k: the last entry takes its place, and its index entry follows it. */
static void del(struct ptab *self, size_t k)
{
	wb_table_remove(&self->ix.tab,
			wb_table_find(&self->ix.tab, self->ents[k].pid, self->ents[k].start_ns));
	size_t last = --self->n;
	if (k != last) {
		self->ents[k] = self->ents[last];
		struct pt_ix *x =
		    wb_table_find(&self->ix.tab, self->ents[k].pid, self->ents[k].start_ns);
		x->idx = (uint32_t)k;
	}
}

void ptab_begin(struct ptab *self, uint64_t msgno)
{
	self->msgno = msgno;
	self->gen++;
	for (size_t k = 0; k < self->n; k++)
		self->ents[k].active_now = false;
}

int ptab_put(struct ptab *self, const struct usaged_sample *s)
{
	struct pt_entry *e = find(self, s->pid, s->start_ns);
	bool increased = false;

	if (!e) {
		e = add(self, s->pid, s->start_ns);
		if (!e) {
			self->dropped++;
			return -1;
		}
		e->fresh = e->exe_stale = true;
		e->kcgroup_id = s->kcgroup_id;
		if (self->baseline_first && self->first_scan) {
			e->base_cpu_ns = s->cpu_ns;
			memcpy(e->base_counters, s->counters, sizeof(e->base_counters));
		}
	}
	if (strncmp(e->comm, s->comm, sizeof(e->comm)) != 0) {
		memcpy(e->comm, s->comm, sizeof(e->comm));
		e->comm[sizeof(e->comm) - 1] = '\0';
		usaged_utf8_clean(e->comm);
		e->exe_stale = true; /* exec sets the comm: the executable may have changed too */
	}
	if (s->kcgroup_id && s->kcgroup_id != e->kcgroup_id) {
		e->kcgroup_id = s->kcgroup_id;
		e->moved = true;
	}
	uint64_t v = s->cpu_ns > e->base_cpu_ns ? s->cpu_ns - e->base_cpu_ns : 0;
	if (v > e->cpu_ns) {
		e->cpu_ns = v;
		increased = true;
	}
	for (int c = 0; c < USAGED_NCOUNTERS; c++) {
		v = s->counters[c] > e->base_counters[c] ? s->counters[c] - e->base_counters[c] : 0;
		if (v > e->counters[c]) {
			e->counters[c] = v;
			increased = true;
		}
	}
	if (increased) {
		e->last_active = self->msgno;
		e->active_now = e->ever_active = true;
	}
	if (s->exited)
		e->exited = true;
	e->transient = s->transient;
	e->seen = self->gen;
	return 0;
}

void ptab_end(struct ptab *self, bool complete, ptab_alive_fn *alive_fn, void *arg)
{
	if (!complete)
		return; /* a process missing from a partial scan may be alive */
	for (size_t k = 0; k < self->n; k++) {
		struct pt_entry *e = &self->ents[k];
		if (e->seen == self->gen || e->exited)
			continue;
		if (e->transient && alive_fn && alive_fn(arg, e->pid, e->start_ns))
			continue;
		e->exited = true;
	}
	self->first_scan = false;
}

void ptab_resolve(struct ptab *self, bool all_active, ptab_cgroup_fn *fn, void *arg)
{
	for (size_t k = 0; k < self->n; k++) {
		struct pt_entry *e = &self->ents[k];
		if (!(e->fresh || e->moved || (all_active && e->active_now)))
			continue;
		uint64_t id = fn(arg, e->pid, e->kcgroup_id);
		if (id || e->fresh || e->moved)
			e->cgroup_id =
			    id ? id : e->cgroup_id; /* a process gone meanwhile keeps what it had */
		e->fresh = e->moved = false;
	}
}

void ptab_resolve_exes(struct ptab *self, ptab_exe_fn *fn, void *arg)
{
	for (size_t k = 0; k < self->n; k++) {
		struct pt_entry *e = &self->ents[k];
		/* Only what will be published, and never an exited process: its pid may be
		 * another's by now. */
		if (!e->exe_stale || !e->ever_active || e->exited)
			continue;
		e->exe_id = fn(arg, e->pid);
		e->exe_stale = false;
	}
}

static bool listed(const struct ptab *self, const struct pt_entry *e, bool full,
		   uint64_t retire_after)
{
	if (!e->ever_active)
		return false; /* nothing since the epoch: its cumulative values are all 0 */
	return e->exited || full || e->last_active + retire_after > self->msgno;
}

int ptab_build(struct ptab *self, bool full, uint64_t retire_after, struct wb_usage *msg)
{
	size_t n = 0;
	for (size_t k = 0; k < self->n; k++)
		n += listed(self, &self->ents[k], full, retire_after);
	msg->full = full;
	msg->n_procs = 0;
	msg->procs = n ? wb_array_new(n, sizeof(*msg->procs)) : NULL;
	if (n && !msg->procs)
		return -1;
	for (size_t k = 0; k < self->n; k++) {
		const struct pt_entry *e = &self->ents[k];
		if (!listed(self, e, full, retire_after))
			continue;
		struct wb_proc *p = &msg->procs[msg->n_procs++];
		p->pid = e->pid;
		memcpy(p->comm, e->comm, sizeof(p->comm));
		p->start_ns = e->start_ns;
		p->cgroup_id = e->cgroup_id;
		p->exe_id = e->exe_id;
		p->cpu_ns = e->cpu_ns;
		p->cycles = e->counters[USAGED_CYCLES];
		p->instructions = e->counters[USAGED_INSTRUCTIONS];
		p->cache_misses = e->counters[USAGED_CACHE_MISSES];
		p->exited = e->exited;
	}
	return 0;
}

size_t ptab_retire(struct ptab *self, ptab_retire_fn *fn, void *arg)
{
	size_t retired = 0;
	for (size_t k = self->n; k-- > 0;) {
		if (!self->ents[k].exited)
			continue;
		if (fn)
			fn(arg, self->ents[k].pid, self->ents[k].start_ns);
		del(self, k);
		retired++;
	}
	return retired;
}

size_t ptab_count(const struct ptab *self)
{
	return self->n;
}

uint64_t ptab_dropped(const struct ptab *self)
{
	return self->dropped;
}
