/*
 * The one open-addressing table (lib/table.h). Entries are plain bytes with
 * the key inline at a known offset: a probe reads the key where it is, no call
 * per probe, no second array to look through.
 */
#include <stdlib.h>
#include <string.h>

#include "hash.h"
#include "table.h"

static inline char *slot(const struct wb_table *t, size_t i)
{
	return (char *)t->slots + i * t->size;
}

static inline bool used(const struct wb_table *t, const char *e)
{
	bool u;
	memcpy(&u, e + t->used, sizeof(u));
	return u;
}

static inline uint64_t key(const char *e, size_t off)
{
	uint64_t k;
	memcpy(&k, e + off, sizeof(k));
	return k;
}

static inline size_t home_of(const struct wb_table *t, uint64_t k1, uint64_t k2)
{
	return (size_t)wb_hash2(k1, t->nkeys == 2 ? k2 : 0) & (t->cap - 1);
}

static inline size_t home(const struct wb_table *t, const char *e)
{
	return home_of(t, key(e, t->key), t->nkeys == 2 ? key(e, t->key + 8) : 0);
}

void wb_table_init(struct wb_table *t, size_t size, size_t key_off, unsigned nkeys, size_t used_off,
		   size_t min_cap, size_t max)
{
	memset(t, 0, sizeof(*t));
	t->size = size;
	t->key = key_off;
	t->nkeys = nkeys == 2 ? 2 : 1;
	t->used = used_off;
	t->min_cap = min_cap >= 2 ? min_cap : 2;
	t->max = max ? max : 1;
}

void wb_table_free(struct wb_table *t)
{
	wb_budget_move(t->budget, wb_table_bytes(t), 0);
	free(t->slots);
	t->slots = NULL;
	t->cap = t->n = 0;
}

void wb_table_clear(struct wb_table *t)
{
	if (t->slots)
		memset(t->slots, 0, t->cap * t->size);
	t->n = 0;
}

/* Into a new array of cap slots, keeping the entries keep() says yes to (NULL: all). */
static int rehash(struct wb_table *t, size_t cap, wb_table_keep_fn *keep, void *arg)
{
	char *old = t->slots;
	size_t oldcap = t->cap;
	if (cap > oldcap && !wb_budget_fits(t->budget, (cap - oldcap) * t->size))
		return -1;
	char *slots = calloc(cap, t->size);
	if (!slots)
		return -1;
	wb_budget_move(t->budget, oldcap * t->size, cap * t->size);
	t->slots = slots;
	t->cap = cap;
	t->n = 0;
	for (size_t i = 0; i < oldcap; i++) {
		const char *e = old + i * t->size;
		if (!used(t, e) || (keep && !keep(arg, e)))
			continue;
		size_t j = home(t, e);
		while (used(t, slot(t, j)))
			j = (j + 1) & (cap - 1);
		memcpy(slot(t, j), e, t->size);
		t->n++;
	}
	free(old);
	return 0;
}

void *wb_table_find(const struct wb_table *t, uint64_t k1, uint64_t k2)
{
	/* The table's fields in locals: this loop is the hottest of the stages' tables. */
	char *slots = t->slots;
	size_t mask = t->cap - 1, size = t->size, koff = t->key, uoff = t->used;
	bool two = t->nkeys == 2;
	if (!slots)
		return NULL;
	if (!two)
		k2 = 0;
	for (size_t i = (size_t)wb_hash2(k1, k2) & mask;; i = (i + 1) & mask) {
		char *e = slots + i * size;
		if (!e[uoff])
			return NULL;
		if (key(e, koff) == k1 && (!two || key(e, koff + 8) == k2))
			return e;
	}
}

void *wb_table_find_next(const struct wb_table *t, const void *prev)
{
	size_t mask = t->cap - 1, koff = t->key;
	const char *p = prev;
	uint64_t k1 = key(p, koff), k2 = t->nkeys == 2 ? key(p, koff + 8) : 0;
	/* Every entry with these keys lies between their home and the first empty slot. */
	for (size_t i = ((size_t)(p - (const char *)t->slots) / t->size + 1) & mask;;
	     i = (i + 1) & mask) {
		char *e = slot(t, i);
		if (!used(t, e))
			return NULL;
		if (key(e, koff) == k1 && (t->nkeys != 2 || key(e, koff + 8) == k2))
			return e;
	}
}

/* The capacity after n entries were inserted one by one. */
static size_t cap_for(const struct wb_table *t, size_t n)
{
	size_t cap = t->cap;
	while (n * 2 > cap)
		cap = cap ? cap * 2 : t->min_cap;
	return cap;
}

size_t wb_table_bytes_for(const struct wb_table *t, size_t more)
{
	size_t room = t->max > t->n ? t->max - t->n : 0;
	return cap_for(t, t->n + (more < room ? more : room)) * t->size;
}

void *wb_table_insert(struct wb_table *t, uint64_t k1, uint64_t k2)
{
	if (t->n >= t->max)
		return NULL;
	if ((t->n + 1) * 2 > t->cap && rehash(t, t->cap ? t->cap * 2 : t->min_cap, NULL, NULL) < 0)
		return NULL;
	size_t i = home_of(t, k1, k2);
	while (used(t, slot(t, i)))
		i = (i + 1) & (t->cap - 1);
	char *e = slot(t, i);
	bool yes = true;
	memset(e, 0, t->size);
	memcpy(e + t->key, &k1, sizeof(k1));
	if (t->nkeys == 2)
		memcpy(e + t->key + 8, &k2, sizeof(k2));
	memcpy(e + t->used, &yes, sizeof(yes));
	t->n++;
	return e;
}

void wb_table_remove(struct wb_table *t, void *entry)
{
	size_t mask = t->cap - 1;
	size_t i = (size_t)((char *)entry - (char *)t->slots) / t->size;
	/* Pull later members of the run back unless their home lies cyclically in (i, j]. */
	for (size_t j = (i + 1) & mask; used(t, slot(t, j)); j = (j + 1) & mask) {
		size_t k = home(t, slot(t, j));
		bool movable = (i <= j) ? (k <= i || k > j) : (k <= i && k > j);
		if (movable) {
			memcpy(slot(t, i), slot(t, j), t->size);
			i = j;
		}
	}
	bool no = false;
	memcpy(slot(t, i) + t->used, &no, sizeof(no));
	t->n--;
}

size_t wb_table_sweep(struct wb_table *t, wb_table_keep_fn *keep, void *arg)
{
	size_t before = t->n;
	if (!t->cap)
		return 0;
	size_t cap = t->cap;
	while (cap > t->min_cap && before * 8 < cap)
		cap /= 2;
	if (rehash(t, cap, keep, arg) < 0) {
		for (size_t i = 0; i < t->cap;) {
			char *e = slot(t, i);
			if (used(t, e) && !keep(arg, e))
				wb_table_remove(t, e); /* refills slot i: look at it again */
			else
				i++;
		}
	}
	return before - t->n;
}

void *wb_table_next(const struct wb_table *t, const void *prev)
{
	/* A walk over every slot (an exposition, an expiry scan): a pointer step, no index. */
	size_t size = t->size, uoff = t->used;
	if (!t->slots)
		return NULL;
	char *end = slot(t, t->cap);
	for (char *e = prev ? (char *)prev + size : t->slots; e < end; e += size)
		if (e[uoff])
			return e;
	return NULL;
}
