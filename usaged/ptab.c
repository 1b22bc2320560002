/*
 * The processes usaged knows, keyed by (pid, start time), and which of them
 * each usage message lists: the loss-tolerance scheme described in
 * schemas/usage.json. Pure code: samples in, message procs out.
 */
#include <stdlib.h>
#include <string.h>

#include "codec.h"
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

struct ptab {
	struct pt_entry *ents; /* dense; order does not matter */
	size_t n, cap, max;
	uint32_t *slots; /* open addressing over ents: 0 empty, else index + 1 */
	size_t nslots;	 /* power of two, at least twice n */
	uint64_t msgno, gen, dropped;
	bool baseline_first, first_scan;
};

static uint64_t hash(uint32_t pid, uint64_t start_ns)
{
	return wb_hash2(pid, start_ns);
}

struct ptab *ptab_new(size_t max, bool baseline_first)
{
	struct ptab *self = calloc(1, sizeof(*self));
	if (!self)
		return NULL;
	self->max = max;
	self->baseline_first = baseline_first;
	self->first_scan = true;
	self->nslots = 1024;
	self->slots = calloc(self->nslots, sizeof(*self->slots));
	if (!self->slots) {
		free(self);
		return NULL;
	}
	return self;
}

void ptab_destroy(struct ptab **self_p)
{
	if (!self_p || !*self_p)
		return;
	free((*self_p)->ents);
	free((*self_p)->slots);
	free(*self_p);
	*self_p = NULL;
}

/* The slot holding (pid, start_ns), or the empty slot where it would go. */
static size_t probe(const struct ptab *self, uint32_t pid, uint64_t start_ns)
{
	size_t mask = self->nslots - 1, i = (size_t)hash(pid, start_ns) & mask;
	while (self->slots[i]) {
		const struct pt_entry *e = &self->ents[self->slots[i] - 1];
		if (e->pid == pid && e->start_ns == start_ns)
			break;
		i = (i + 1) & mask;
	}
	return i;
}

static int grow_slots(struct ptab *self)
{
	size_t nslots = self->nslots * 2;
	uint32_t *slots = calloc(nslots, sizeof(*slots));
	if (!slots)
		return -1;
	free(self->slots);
	self->slots = slots;
	self->nslots = nslots;
	for (size_t k = 0; k < self->n; k++)
		self->slots[probe(self, self->ents[k].pid, self->ents[k].start_ns)] =
		    (uint32_t)(k + 1);
	return 0;
}

static struct pt_entry *add(struct ptab *self, uint32_t pid, uint64_t start_ns)
{
	if (self->n >= self->max || self->n >= UINT32_MAX - 1)
		return NULL;
	if ((self->n + 1) * 2 > self->nslots && grow_slots(self) < 0)
		return NULL;
	if (self->n == self->cap) {
		size_t cap = self->cap ? self->cap * 2 : 256;
		struct pt_entry *ents = realloc(self->ents, cap * sizeof(*ents));
		if (!ents)
			return NULL;
		self->ents = ents;
		self->cap = cap;
	}
	struct pt_entry *e = &self->ents[self->n];
	memset(e, 0, sizeof(*e));
	e->pid = pid;
	e->start_ns = start_ns;
	self->slots[probe(self, pid, start_ns)] = (uint32_t)(++self->n);
	return e;
}

/* Remove entry k: backward-shift its slot's cluster, then move the last entry into k. */
static void del(struct ptab *self, size_t k)
{
	size_t mask = self->nslots - 1;
	size_t i = probe(self, self->ents[k].pid, self->ents[k].start_ns);
	size_t j = i;
	for (;;) {
		j = (j + 1) & mask;
		if (!self->slots[j])
			break;
		const struct pt_entry *e = &self->ents[self->slots[j] - 1];
		size_t home = (size_t)hash(e->pid, e->start_ns) & mask;
		/* Move slot j back to i unless its home lies cyclically in (i, j]. */
		if ((j > i && (home <= i || home > j)) || (j < i && home <= i && home > j)) {
			self->slots[i] = self->slots[j];
			i = j;
		}
	}
	self->slots[i] = 0;
	size_t last = --self->n;
	if (k != last) {
		self->ents[k] = self->ents[last];
		self->slots[probe(self, self->ents[k].pid, self->ents[k].start_ns)] =
		    (uint32_t)(k + 1);
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
	size_t i = probe(self, s->pid, s->start_ns);
	struct pt_entry *e = self->slots[i] ? &self->ents[self->slots[i] - 1] : NULL;
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
