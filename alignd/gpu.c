/*
 * A GPU zone's process weights: the compute processes each power sample listed with their SM
 * time in the interval before it, kept for the last GPU_RING samples of the curve, and given to
 * a slot in proportion to how much of each sample's interval lies in the slot (as its energy
 * is). Weights only: the slot's energy comes from the curve, so a weight lost (a sample beyond
 * the ring, a restart) moves no microjoule.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alignd.h"
#include "plaus.h"

void gpu_ring_free(struct curve *c)
{
	struct gpu_ring *r = c->gpu;
	if (!r)
		return;
	size_t bytes = sizeof(*r);
	for (size_t i = 0; i < GPU_RING; i++) {
		bytes += r->e[i].n * sizeof(*r->e[i].procs);
		free(r->e[i].procs);
	}
	wb_budget_move(c->budget, bytes, 0);
	free(r);
	c->gpu = NULL;
}

int gpu_ring_add(struct curve *c, uint64_t t_ns, uint64_t interval_ns,
		 const struct wb_power_zone *z)
{
	snprintf(c->uuid, sizeof(c->uuid), "%s", z->uuid);
	snprintf(c->model, sizeof(c->model), "%s", z->model);
	snprintf(c->vendor, sizeof(c->vendor), "%s", z->vendor);
	if (!c->gpu) {
		if (!wb_budget_fits(c->budget, sizeof(*c->gpu)) ||
		    !(c->gpu = calloc(1, sizeof(*c->gpu))))
			return -1;
		wb_budget_move(c->budget, 0, sizeof(*c->gpu));
	}
	struct gpu_ring *r = c->gpu;
	struct gpu_sample *e = &r->e[r->next];
	size_t old = e->n * sizeof(*e->procs), need = z->n_gpu_procs * sizeof(*e->procs);
	struct wb_gpu_proc *p = NULL;
	if (need &&
	    (!wb_budget_fits(c->budget, need > old ? need - old : 0) || !(p = malloc(need))))
		return -1;
	if (need)
		memcpy(p, z->gpu_procs, need);
	free(e->procs);
	wb_budget_move(c->budget, old, need);
	*e = (struct gpu_sample){.from_ns = t_ns > interval_ns ? t_ns - interval_ns : 0,
				 .t_ns = t_ns,
				 .exclusive = z->exclusive,
				 .procs = p,
				 .n = z->n_gpu_procs,
				 .used = true};
	r->next = (r->next + 1) % GPU_RING;
	return 0;
}

static int cmp_pid(const void *pa, const void *pb)
{
	const struct wb_gpu_proc *a = pa, *b = pb;
	return a->pid < b->pid ? -1 : a->pid > b->pid;
}

/* Nanoseconds of sample e's interval (from, t] inside the slot (t0, t1]. */
static uint64_t overlap(const struct gpu_sample *e, uint64_t t0_ns, uint64_t t1_ns)
{
	uint64_t lo = e->from_ns > t0_ns ? e->from_ns : t0_ns;
	uint64_t hi = e->t_ns < t1_ns ? e->t_ns : t1_ns;
	return e->used && hi > lo ? hi - lo : 0;
}

int gpu_slot_fill(const struct curve *c, uint64_t t0_ns, uint64_t t1_ns, struct wb_slot_zone *z)
{
	memcpy(z->uuid, c->uuid, sizeof(z->uuid));
	memcpy(z->model, c->model, sizeof(z->model));
	memcpy(z->vendor, c->vendor, sizeof(z->vendor));
	const struct gpu_ring *r = c->gpu;
	if (!r)
		return 0;
	size_t total = 0;
	for (size_t i = 0; i < GPU_RING; i++) {
		const struct gpu_sample *e = &r->e[i];
		if (!overlap(e, t0_ns, t1_ns))
			continue;
		z->gpu_samples++;
		z->exclusive |= e->exclusive;
		total += e->n;
	}
	if (!total)
		return 0;
	/* every listing of the span, sorted by pid, then one entry per pid with the sum */
	struct wb_gpu_proc *all = wb_array_new(total, sizeof(*all));
	if (!all)
		return -1;
	size_t n = 0;
	for (size_t i = 0; i < GPU_RING; i++) {
		const struct gpu_sample *e = &r->e[i];
		uint64_t in = overlap(e, t0_ns, t1_ns), span = e->t_ns - e->from_ns;
		if (!in)
			continue;
		for (size_t j = 0; j < e->n; j++) {
			all[n] = e->procs[j];
			/* the share of the sample's SM time that falls in the slot */
			if (in < span)
				all[n].sm_ns =
				    (uint64_t)((unsigned __int128)all[n].sm_ns * in / span);
			n++;
		}
	}
	qsort(all, n, sizeof(*all), cmp_pid);
	size_t k = 0;
	for (size_t j = 0; j < n; j++) {
		if (k && all[k - 1].pid == all[j].pid) {
			all[k - 1].sm_ns = wb_sat_add(all[k - 1].sm_ns, all[j].sm_ns, NULL);
			continue;
		}
		if (k == 1024)
			break; /* schemas/aligned.json: gpu_procs maxItems */
		all[k++] = all[j];
	}
	z->gpu_procs = all;
	z->n_gpu_procs = k;
	return 0;
}
