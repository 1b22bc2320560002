/*
 * lib/heap.c: a daemon's malloc thresholds start fixed and follow the largest
 * frame once frames are large; outside a daemon (no wb_heap_init) nothing is set.
 */
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>

#include "../../lib/heap.h"
#include "unit.h"

static void thresholds_follow_large_frames(void)
{
	wb_heap_frame(8u << 20); /* not a daemon yet: malloc is left alone */
	CHECK_U64(wb_heap_mmap_threshold(), 0);
	wb_heap_init();
	CHECK_U64(wb_heap_mmap_threshold(), WB_HEAP_MMAP_MIN);
	wb_heap_frame(WB_HEAP_LARGE_FRAME - 1); /* a small frame: pages go back */
	CHECK_U64(wb_heap_mmap_threshold(), WB_HEAP_MMAP_MIN);
	char *p = malloc(1u << 20); /* mmap'd and given back when freed */
	CHECK(p != NULL);
	memset(p, 1, 1u << 20);
	free(p);
	wb_heap_frame(2u << 20);
	CHECK_U64(wb_heap_mmap_threshold(), 8u << 20);
	wb_heap_frame(1u << 20); /* a smaller one after a larger: unchanged */
	CHECK_U64(wb_heap_mmap_threshold(), 8u << 20);
	wb_heap_frame(16u << 20); /* past glibc's dynamic limit of 32 MiB */
	CHECK_U64(wb_heap_mmap_threshold(), 64u << 20);
#if !defined(__SANITIZE_ADDRESS__)
	/* A 48 MiB block comes from the heap (brk), which it extends; given back to the
	 * heap, the same block serves the next request. (glibc's malloc: not under
	 * valgrind or ASan, which bring their own.) */
	p = malloc(48u << 20);
	CHECK(p != NULL);
	CHECK(p < (char *)sbrk(0)); /* below the break, not mmap'd */
	memset(p, 1, 48u << 20);
	free(p);
	char *q = malloc(48u << 20);
	CHECK(q == p);
	free(q);
#endif
	wb_heap_frame((size_t)1 << 40); /* past any frame: ignored */
	CHECK_U64(wb_heap_mmap_threshold(), 64u << 20);
}

static const struct unit_case cases[] = {
    {"thresholds start fixed and follow the largest frame", thresholds_follow_large_frames},
};

UNIT_MAIN(cases)
