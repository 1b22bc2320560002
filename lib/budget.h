/*
 * A memory budget that several tables share: each charges the bytes it holds,
 * and one that would grow past the budget does not. Lets a stage bound what
 * all hosts together hold, however many (forged) host names a peer sends.
 */
#ifndef WB_BUDGET_H
#define WB_BUDGET_H

#include <stdbool.h>
#include <stddef.h>

struct wb_budget {
	size_t used, max; /* bytes; max 0: no limit */
};

/* Whether add more bytes fit (a NULL budget: always). */
static inline bool wb_budget_fits(const struct wb_budget *b, size_t add)
{
	return !b || !b->max || (b->used <= b->max && add <= b->max - b->used);
}

/* A holding went from old_bytes to new_bytes (NULL: nothing to charge). */
static inline void wb_budget_move(struct wb_budget *b, size_t old_bytes, size_t new_bytes)
{
	if (b)
		b->used = b->used - old_bytes + new_bytes;
}

#endif
