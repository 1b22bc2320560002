/*
 * The one hash table of the stages: open addressing with linear probing over
 * a power-of-two array of entries, load factor at most 1/2, backward-shift
 * deletion (no tombstones, however many keys come and go), keyed by one or two
 * uint64_t stored inline in the entry, optionally charged to a wb_budget.
 * Entries keyed by a string (or anything wider than 16 bytes) are keyed by its
 * hash (wb_hash_str) and told apart with wb_table_find_next.
 */
#ifndef WB_TABLE_H
#define WB_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "budget.h"

struct wb_table {
	void *slots;		  /* cap entries of size bytes; NULL while cap is 0 */
	size_t cap, n, max;	  /* max: most entries held (at least 1) */
	struct wb_budget *budget; /* charged for slots (NULL: not limited) */
	size_t size;		  /* bytes of one entry */
	size_t key;		  /* offset of k1 (uint64_t), k2 right after it when nkeys is 2 */
	size_t used;		  /* offset of the entry's bool: the slot holds an entry */
	size_t min_cap;		  /* first capacity, and the least a sweep shrinks to */
	unsigned nkeys;		  /* 1: keyed by k1 alone (k2 is taken as 0), 2: by both */
};

/*
 * A table whose slots the owner reads typed: WB_TABLE(struct x) is a member
 * with .tab for the functions below and .slots (struct x *), .cap, .n, .max,
 * .budget to read (and .budget to set).
 */
#define WB_TABLE(T)                                                                                \
	union {                                                                                    \
		struct wb_table tab;                                                               \
		struct {                                                                           \
			T *slots;                                                                  \
			size_t cap, n, max;                                                        \
			struct wb_budget *budget;                                                  \
		};                                                                                 \
	}

/* An empty table (no memory until the first insert); budget NULL. */
void wb_table_init(struct wb_table *t, size_t size, size_t key_off, unsigned nkeys, size_t used_off,
		   size_t min_cap, size_t max);
/* Frees the slots and returns their bytes to the budget; the table stays usable, empty. */
void wb_table_free(struct wb_table *t);
/* Removes every entry and keeps the slots (a table built again every round). */
void wb_table_clear(struct wb_table *t);

/* The entry with these keys (the first, where several have them), or NULL. */
void *wb_table_find(const struct wb_table *t, uint64_t k1, uint64_t k2);
/*
 * The next entry after e (from wb_table_find or this) with the same keys, or
 * NULL. Where the keys are a hash of what tells entries apart (a string), the
 * caller compares that along find, find_next, ...: two strings with one hash
 * are two entries.
 */
void *wb_table_find_next(const struct wb_table *t, const void *e);
/*
 * A new zeroed entry with these keys, its keys and used flag set; NULL when the
 * table holds max entries, the budget has no room to grow it, or on ENOMEM.
 * It does not look for the keys: a table keyed by unique keys finds first,
 * one keyed by a hash may hold the keys more than once. Moves entries:
 * pointers into the table are stale after it.
 */
void *wb_table_insert(struct wb_table *t, uint64_t k1, uint64_t k2);
/* Removes entry e (a pointer into the table); moves later entries of its run back. */
void wb_table_remove(struct wb_table *t, void *e);

typedef bool(wb_table_keep_fn)(void *arg, const void *entry);
/*
 * Keeps the entries keep() says yes to, the others go; returns how many went.
 * Shrinks a mostly empty table (a burst of keys does not pin memory).
 */
size_t wb_table_sweep(struct wb_table *t, wb_table_keep_fn *keep, void *arg);
/* The next entry after prev (NULL: the first), or NULL; not across an insert or remove. */
void *wb_table_next(const struct wb_table *t, const void *prev);

/* Bytes the slots would take after inserting more new keys (up to max). */
size_t wb_table_bytes_for(const struct wb_table *t, size_t more);
/* Bytes the slots take now. */
static inline size_t wb_table_bytes(const struct wb_table *t)
{
	return t->cap * t->size;
}

#endif
