/*
 * What the in-process benchmarks share: the envelope stamp that wb_pub_send
 * adds before it encodes, and callgrind's collection switch around the one
 * slot whose instructions bench/callgrind.sh counts (no-ops outside valgrind).
 */
#ifndef WB_BENCH_H
#define WB_BENCH_H

#include <stdio.h>

#include <valgrind/callgrind.h>

#include "codec.h"

/* v, kind, src and an epoch, as wb_pub_send stamps them: the codec refuses an envelope without
 * them. */
static inline void bench_stamp(struct wb_msg *m, const char *src)
{
	m->env.v = wb_kinds[m->kind].version;
	snprintf(m->env.kind, sizeof(m->env.kind), "%s", wb_kinds[m->kind].name);
	snprintf(m->env.src, sizeof(m->env.src), "%s", src);
	if (!m->env.epoch)
		m->env.epoch = 1;
}

/* Count instructions from here (callgrind --collect-atstart=no) ... */
#define BENCH_COUNT_START() CALLGRIND_TOGGLE_COLLECT
/* ... to here. */
#define BENCH_COUNT_STOP() CALLGRIND_TOGGLE_COLLECT

#endif
