/*
 * The identity of each cgroup of one host (container, pod, VM, service), as
 * usage messages announce it: every cgroup in a full message, new ones in the
 * others. Slots attach the cgroups their processes ran in.
 */
#include <stdlib.h>
#include <string.h>

#include "alignd.h"

static size_t home(const struct cgtab *t, uint64_t id)
{
	return (size_t)wb_mix64(id) & (t->cap - 1);
}

int cgtab_init(struct cgtab *t, size_t max)
{
	memset(t, 0, sizeof(*t));
	t->max = max ? max : 1;
	return 0;
}

void cgtab_free(struct cgtab *t)
{
	wb_budget_move(t->budget, t->cap * sizeof(*t->slots), 0);
	free(t->slots);
	t->slots = NULL;
	t->cap = t->n = 0;
}

static int rehash(struct cgtab *t, size_t cap, uint32_t keep_gen, bool sweep)
{
	struct cg_entry *old = t->slots;
	size_t oldcap = t->cap;
	if (cap > oldcap && !wb_budget_fits(t->budget, (cap - oldcap) * sizeof(*old)))
		return -1;
	struct cg_entry *slots = calloc(cap, sizeof(*slots));
	if (!slots)
		return -1;
	wb_budget_move(t->budget, oldcap * sizeof(*old), cap * sizeof(*slots));
	t->slots = slots;
	t->cap = cap;
	t->n = 0;
	for (size_t i = 0; i < oldcap; i++) {
		if (!old[i].used || (sweep && old[i].gen != keep_gen))
			continue;
		size_t j = home(t, old[i].cg.id);
		while (slots[j].used)
			j = (j + 1) & (cap - 1);
		slots[j] = old[i];
		t->n++;
	}
	free(old);
	return 0;
}

struct cg_entry *cgtab_find(struct cgtab *t, uint64_t id)
{
	if (!t->cap)
		return NULL;
	for (size_t i = home(t, id);; i = (i + 1) & (t->cap - 1)) {
		if (!t->slots[i].used)
			return NULL;
		if (t->slots[i].cg.id == id)
			return &t->slots[i];
	}
}

size_t cgtab_bytes_for(const struct cgtab *t, size_t n)
{
	size_t room = t->max > t->n ? t->max - t->n : 0, cap = t->cap;
	for (size_t want = t->n + (n < room ? n : room); want * 2 > cap;)
		cap = cap ? cap * 2 : 64;
	return cap * sizeof(*t->slots);
}

struct cg_entry *cgtab_put(struct cgtab *t, const struct wb_cgroup *cg)
{
	struct cg_entry *e = cgtab_find(t, cg->id);
	if (!e) {
		if (t->n >= t->max)
			return NULL;
		if ((t->n + 1) * 2 > t->cap && rehash(t, t->cap ? t->cap * 2 : 64, 0, false) < 0)
			return NULL;
		size_t i = home(t, cg->id);
		while (t->slots[i].used)
			i = (i + 1) & (t->cap - 1);
		e = &t->slots[i];
		e->used = true;
		e->stamp = 0;
		t->n++;
	}
	e->cg = *cg;
	e->gen = t->gen;
	return e;
}

size_t cgtab_sweep(struct cgtab *t, uint32_t gen)
{
	size_t before = t->n;
	if (!t->cap)
		return 0;
	size_t cap = t->cap;
	while (cap > 64 && before * 8 < cap)
		cap /= 2;
	if (rehash(t, cap, gen, true) < 0)
		return 0; /* keep the stale ones: harmless, retried at the next full message */
	return before - t->n;
}
