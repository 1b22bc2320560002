/*
 * The last cumulative values seen per process of one host, keyed by
 * (pid, start_ns) so that a reused pid is a new process. Open addressing with
 * linear probing and backward-shift deletion: no tombstones, so the table
 * stays fast however many processes come and go.
 */
#include <stdlib.h>
#include <string.h>

#include "alignd.h"

static size_t home(const struct proctab *pt, uint64_t pid, uint64_t start_ns)
{
	return (size_t)wb_hash2(pid, start_ns) & (pt->cap - 1);
}

int proctab_init(struct proctab *pt, size_t max)
{
	memset(pt, 0, sizeof(*pt));
	pt->max = max ? max : 1;
	return 0;
}

void proctab_free(struct proctab *pt)
{
	wb_budget_move(pt->budget, pt->cap * sizeof(*pt->slots), 0);
	free(pt->slots);
	pt->slots = NULL;
	pt->cap = pt->n = 0;
}

void proctab_clear(struct proctab *pt)
{
	size_t max = pt->max;
	struct wb_budget *budget = pt->budget;
	proctab_free(pt);
	proctab_init(pt, max);
	pt->budget = budget;
}

static int rehash(struct proctab *pt, size_t cap, uint32_t keep_gen, bool sweep)
{
	struct proc_entry *old = pt->slots;
	size_t oldcap = pt->cap;
	if (cap > oldcap && !wb_budget_fits(pt->budget, (cap - oldcap) * sizeof(*old)))
		return -1;
	struct proc_entry *slots = calloc(cap, sizeof(*slots));
	if (!slots)
		return -1;
	wb_budget_move(pt->budget, oldcap * sizeof(*old), cap * sizeof(*slots));
	pt->slots = slots;
	pt->cap = cap;
	pt->n = 0;
	for (size_t i = 0; i < oldcap; i++) {
		if (!old[i].used || (sweep && old[i].gen != keep_gen))
			continue;
		size_t j = home(pt, old[i].pid, old[i].start_ns);
		while (slots[j].used)
			j = (j + 1) & (cap - 1);
		slots[j] = old[i];
		pt->n++;
	}
	free(old);
	return 0;
}

struct proc_entry *proctab_find(struct proctab *pt, uint64_t pid, uint64_t start_ns)
{
	if (!pt->cap)
		return NULL;
	for (size_t i = home(pt, pid, start_ns);; i = (i + 1) & (pt->cap - 1)) {
		struct proc_entry *e = &pt->slots[i];
		if (!e->used)
			return NULL;
		if (e->pid == pid && e->start_ns == start_ns)
			return e;
	}
}

/* The capacity after n entries were inserted one by one (load factor at most 1/2). */
static size_t cap_for(size_t cap, size_t n)
{
	while (n * 2 > cap)
		cap = cap ? cap * 2 : 256;
	return cap;
}

size_t proctab_bytes_for(const struct proctab *pt, size_t n)
{
	size_t room = pt->max > pt->n ? pt->max - pt->n : 0;
	return cap_for(pt->cap, pt->n + (n < room ? n : room)) * sizeof(*pt->slots);
}

struct proc_entry *proctab_insert(struct proctab *pt, uint64_t pid, uint64_t start_ns)
{
	if (pt->n >= pt->max)
		return NULL;
	/* Load factor at most 1/2 keeps probe runs short. */
	if ((pt->n + 1) * 2 > pt->cap && rehash(pt, pt->cap ? pt->cap * 2 : 256, 0, false) < 0)
		return NULL;
	size_t i = home(pt, pid, start_ns);
	while (pt->slots[i].used)
		i = (i + 1) & (pt->cap - 1);
	struct proc_entry *e = &pt->slots[i];
	*e = (struct proc_entry){.pid = pid, .start_ns = start_ns, .used = true, .gen = pt->gen};
	pt->n++;
	return e;
}

void proctab_remove(struct proctab *pt, struct proc_entry *e)
{
	size_t mask = pt->cap - 1;
	size_t i = (size_t)(e - pt->slots);
	/* Pull later members of the probe run back so that lookups never stop early. */
	for (size_t j = (i + 1) & mask; pt->slots[j].used; j = (j + 1) & mask) {
		size_t k = home(pt, pt->slots[j].pid, pt->slots[j].start_ns);
		bool movable = (i <= j) ? (k <= i || k > j) : (k <= i && k > j);
		if (movable) {
			pt->slots[i] = pt->slots[j];
			i = j;
		}
	}
	pt->slots[i].used = false;
	pt->n--;
}

size_t proctab_sweep(struct proctab *pt, uint32_t gen)
{
	size_t before = pt->n;
	if (!pt->cap)
		return 0;
	size_t cap = pt->cap;
	/* Shrink when mostly empty, so a burst of processes does not pin memory. */
	while (cap > 256 && before * 8 < cap)
		cap /= 2;
	if (rehash(pt, cap, gen, true) < 0) {
		for (size_t i = 0; i < pt->cap;) {
			if (pt->slots[i].used && pt->slots[i].gen != gen)
				proctab_remove(pt, &pt->slots[i]); /* refill slot i, look again */
			else
				i++;
		}
	}
	return before - pt->n;
}
