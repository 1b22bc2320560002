/* The stages' malloc settings: a small pipeline's heap gives its large frames' pages back. */
#ifndef WB_HEAP_H
#define WB_HEAP_H

#include <stdbool.h>
#include <stddef.h>

/* Blocks from this size on are mmap'd, and the heap's free top above it given back. */
#define WB_HEAP_MMAP_MIN (128u << 10)
/* A frame of this size (a few thousand processes) turns the heap to keeping its pages. */
#define WB_HEAP_LARGE_FRAME (1u << 20)

/* Fixed thresholds (mallopt) for a daemon; wb_heap_frame does nothing until this is called. */
void wb_heap_init(void);
/*
 * A frame of bytes was sent or received (taken, not refused): from WB_HEAP_LARGE_FRAME
 * on, an mmap threshold of 4x the largest frame (and a trim threshold of 8x) keeps the
 * slot's blocks in the heap for the next slot, past glibc's dynamic limit of 32 MiB
 * (a glibc that refuses that gets mmap turned off instead). At most WB_FRAME_MAX.
 */
void wb_heap_frame(size_t bytes);
/* The mmap threshold now set (0 before wb_heap_init). */
size_t wb_heap_mmap_threshold(void);

#endif
