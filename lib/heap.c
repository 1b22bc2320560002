/*
 * glibc raises its mmap threshold to the size of each large block freed (up to
 * 32 MiB) and its trim threshold to twice that: after a few frames (or, in
 * exportd, a scrape) the heap keeps their pages for good, fragmented by what
 * lives between them. A daemon starts with fixed thresholds, so that large
 * blocks are mmap'd and go back when freed. Where frames are large (thousands
 * of processes) that would fault their pages in again at every slot, so from
 * WB_HEAP_LARGE_FRAME on the thresholds follow the largest frame instead
 * (bench/README.md, "Pipeline memory"). glibc mmaps every block above 32 MiB
 * whatever the threshold: a slot of 100,000 processes decodes into one such
 * array, and faulting its pages in again cost exportd four times its decoding
 * (bench/README.md, "Blocks above 32 MiB"). Frames of 8 MiB and more (4x is
 * then past 32 MiB) turn mmap off: every block comes from the heap, whose free
 * top is kept up to 8x the largest frame.
 */
#include <limits.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdint.h>

#include "heap.h"
#include "log.h"

#define MMAP_MAX (32u << 20) /* glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit */

static size_t threshold; /* 0: not a daemon, leave malloc alone */
static bool mmap_off;

static void set_thresholds(size_t mmap_bytes)
{
	mallopt(M_MMAP_THRESHOLD, (int)mmap_bytes);
	mallopt(M_TRIM_THRESHOLD, (int)(2 * mmap_bytes));
	threshold = mmap_bytes;
}

void wb_heap_init(void)
{
	mallopt(M_MMAP_THRESHOLD, WB_HEAP_MMAP_MIN);
	mallopt(M_TRIM_THRESHOLD, WB_HEAP_MMAP_MIN);
	threshold = WB_HEAP_MMAP_MIN;
}

void wb_heap_frame(size_t bytes)
{
	if (!threshold || bytes < WB_HEAP_LARGE_FRAME || 4 * bytes <= threshold)
		return;
	if (threshold == WB_HEAP_MMAP_MIN)
		log_info("frames of %zu bytes: the heap keeps its pages from one slot to the next",
			 bytes);
	if (4 * bytes <= MMAP_MAX) {
		set_thresholds(4 * bytes);
		return;
	}
	if (!mmap_off) {
		mallopt(M_MMAP_THRESHOLD, MMAP_MAX);
		mallopt(M_MMAP_MAX, 0);
		mmap_off = true;
		log_info("frames of %zu bytes: blocks above 32 MiB come from the heap too", bytes);
	}
	/* the free top kept: 8x the largest frame (M_TRIM_THRESHOLD has no upper limit) */
	size_t trim = 8 * bytes;
	if (trim > (size_t)INT_MAX)
		trim = (size_t)INT_MAX;
	mallopt(M_TRIM_THRESHOLD, (int)trim);
	threshold = 4 * bytes;
}

size_t wb_heap_mmap_threshold(void)
{
	return mmap_off ? SIZE_MAX : threshold;
}
