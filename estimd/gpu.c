/*
 * GPU zones (those a GPU source names by uuid): idle is the lowest power seen in a slot whose
 * samples listed no compute process (or a configured power), as Kepler does; the active rest
 * goes to the GPU's processes by their SM time, equally where the driver gave no utilization
 * sample, and all to the one process of an exclusive-process GPU.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "estimd.h"

bool gpu_zone(const struct wb_slot_zone *sz)
{
	return sz->uuid[0] != '\0';
}

void gpu_split(const struct idle_conf *conf, struct gpu_idle *st, const struct wb_slot_zone *sz,
	       double slot_s, double measured_s, uint64_t *active_uj, uint64_t *idle_uj,
	       double *idle_w)
{
	const struct idle_fixed *f = idle_find_fixed(conf, sz->name, sz->zone);
	double w = f ? f->watts : 0;
	if (!f && st) {
		/* samples that listed no process: the GPU idled through the slot. The power is
		 * over what the slot's energy measured: a slot's end past the last sample holds the
		 * energy up to it (the rest comes with the next slot), and one that powerd's
		 * restart cut is not learned from at all; a minimum learned from either never
		 * recovers. */
		if (measured_s > 0 && sz->gpu_samples > 0 && sz->n_gpu_procs == 0) {
			double p = (double)sz->energy_uj / 1e6 / measured_s;
			if (!st->have || p < st->min_w)
				st->min_w = p;
			st->have = true;
		}
		w = st->have ? st->min_w : 0;
	}
	double uj = w * slot_s * 1e6;
	uint64_t idle =
	    uj > 0 ? (uj >= (double)sz->energy_uj ? sz->energy_uj : (uint64_t)llround(uj)) : 0;
	if (idle > sz->energy_uj)
		idle = sz->energy_uj;
	*idle_uj = idle;
	*active_uj = sz->energy_uj - idle;
	*idle_w = w;
}

static int cmp_pid(const void *pa, const void *pb)
{
	const struct wb_gpu_proc *a = pa, *b = pb;
	return a->pid < b->pid ? -1 : a->pid > b->pid;
}

int gpu_weights(const struct wb_slot_zone *sz, const struct wb_aligned *a, uint64_t *w,
		uint64_t *denom, struct gpu_scratch *s)
{
	size_t m = sz->n_gpu_procs;
	memset(w, 0, a->n_procs * sizeof(*w));
	*denom = 0;
	if (m == 0)
		return 0;
	if (s->cap < m) {
		struct wb_gpu_proc *p = realloc(s->procs, m * sizeof(*p));
		bool *u = realloc(s->taken, m * sizeof(*u));
		if (p)
			s->procs = p;
		if (u)
			s->taken = u;
		if (!p || !u)
			return -1;
		s->cap = m;
	}
	memcpy(s->procs, sz->gpu_procs, m * sizeof(*s->procs));
	memset(s->taken, 0, m * sizeof(*s->taken));
	qsort(s->procs, m, sizeof(*s->procs), cmp_pid);
	unsigned __int128 sum = 0;
	for (size_t j = 0; j < m; j++)
		sum += s->procs[j].sm_ns;
	/* no utilization sample, or the one process of an exclusive GPU: equal shares */
	bool equal = sum == 0 || (sz->exclusive && m == 1);
	/* SM times of a slot are far below 2^63; scale only if a forged frame says otherwise */
	unsigned shift = 0;
	while (!equal && (sum >> shift) > UINT64_MAX / 2)
		shift++;
	uint64_t d = 0;
	for (size_t j = 0; j < m; j++)
		d += equal ? 1 : s->procs[j].sm_ns >> shift;
	for (size_t i = 0; i < a->n_procs; i++) {
		struct wb_gpu_proc key = {.pid = a->procs[i].pid};
		struct wb_gpu_proc *hit = bsearch(&key, s->procs, m, sizeof(key), cmp_pid);
		if (!hit || s->taken[hit - s->procs])
			continue; /* a pid listed twice in the slot: the first one has it */
		s->taken[hit - s->procs] = true;
		w[i] = equal ? 1 : hit->sm_ns >> shift;
	}
	*denom = d;
	return 0;
}

void gpu_scratch_free(struct gpu_scratch *s)
{
	free(s->procs);
	free(s->taken);
	memset(s, 0, sizeof(*s));
}
