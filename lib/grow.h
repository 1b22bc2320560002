/* The one growable array: room for more elements by doubling. */
#ifndef WB_GROW_H
#define WB_GROW_H

#include <stddef.h>

/*
 * Room for need elements of elem bytes in the array *pp (a pointer to the array's pointer) of
 * capacity *cap, doubling from *cap, or from min when it is 0. 0, or -1 when out of memory or
 * the size would overflow: the array and *cap are unchanged then.
 */
int wb_grow(void *pp, size_t *cap, size_t need, size_t elem, size_t min);

#endif
