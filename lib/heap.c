/*
 * glibc raises its mmap threshold to the size of each large block freed (up to
 * 32 MiB) and its trim threshold to twice that: after a few frames (or, in
 * exportd, a scrape) the heap keeps their pages for good, fragmented by what
 * lives between them. A daemon starts with fixed thresholds, so that large
 * blocks are mmap'd and go back when freed. Where frames are large (thousands
 * of processes) that would fault their pages in again at every slot, so from
 * WB_HEAP_LARGE_FRAME on the thresholds follow the largest frame instead
 * (bench/README.md, "Pipeline memory"): 4x it, past glibc's own dynamic limit
 * of 32 MiB when needed. A slot of 100,000 processes decodes into one array of
 * 33 MB, and faulting its pages in again cost exportd four times its decoding
 * (bench/README.md, "Blocks above 32 MiB"). A glibc before 2.35 refuses a
 * threshold above 32 MiB; there mmap is turned off instead (M_MMAP_MAX 0).
 */
#include <limits.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdint.h>

#include "heap.h"
#include "log.h"

static size_t threshold; /* 0: not a daemon, leave malloc alone */
static bool mmap_off;

void wb_heap_init(void)
{
	mallopt(M_MMAP_THRESHOLD, WB_HEAP_MMAP_MIN);
	mallopt(M_TRIM_THRESHOLD, WB_HEAP_MMAP_MIN);
	threshold = WB_HEAP_MMAP_MIN;
}

void wb_heap_frame(size_t bytes)
{
	if (!threshold || bytes < WB_HEAP_LARGE_FRAME || bytes > INT_MAX / 8 ||
	    4 * bytes <= threshold)
		return;
	if (threshold == WB_HEAP_MMAP_MIN)
		log_info("frames of %zu bytes: the heap keeps its pages from one slot to the next",
			 bytes);
	if (!mallopt(M_MMAP_THRESHOLD, (int)(4 * bytes)) && !mmap_off) {
		mallopt(M_MMAP_MAX, 0);
		mmap_off = true;
		log_info("frames of %zu bytes: this glibc mmaps blocks above 32 MiB whatever the "
			 "threshold; they come from the heap instead",
			 bytes);
	}
	mallopt(M_TRIM_THRESHOLD, (int)(8 * bytes));
	threshold = 4 * bytes;
}

size_t wb_heap_mmap_threshold(void)
{
	return threshold;
}
