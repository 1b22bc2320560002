/*
 * Kepler's power-model features from one aligned slot. Kepler's model-db
 * trains on Prometheus rates, so every feature is a per-second value: CPU time
 * in ms per second, counter events per second.
 */
#include <string.h>

#include "clock.h"
#include "estimd.h"

static const char *const feat_names[FEAT_COUNT] = {
    [FEAT_CPU_TIME_MS] = "bpf_cpu_time_ms",
    [FEAT_CPU_CYCLES] = "cpu_cycles",
    [FEAT_CPU_INSTRUCTIONS] = "cpu_instructions",
    [FEAT_CACHE_MISS] = "cache_miss",
};

const char *feat_name(enum feat_id id)
{
	return id >= 0 && id < FEAT_COUNT ? feat_names[id] : "unmeasured";
}

int feat_from_name(const char *name)
{
	for (int i = 0; i < FEAT_COUNT; i++)
		if (strcmp(name, feat_names[i]) == 0)
			return i;
	/* Kepler <= 0.7.2 spelled instructions this way. */
	if (strcmp(name, "cpu_instr") == 0)
		return FEAT_CPU_INSTRUCTIONS;
	return FEAT_UNMEASURED;
}

double feat_slot_s(const struct wb_aligned *a)
{
	return a->t1 > a->t0 ? (double)(a->t1 - a->t0) / (double)WB_NS_PER_SEC : 0.0;
}

int feat_from_slot(const struct wb_aligned *a, double x[FEAT_COUNT])
{
	double s = feat_slot_s(a);
	memset(x, 0, sizeof(double) * FEAT_COUNT);
	if (s <= 0)
		return -1;
	double cpu_ns = 0, cycles = 0, instr = 0, misses = 0;
	for (size_t i = 0; i < a->n_procs; i++) {
		const struct wb_slot_proc *p = &a->procs[i];
		if (p->pid == 0)
			continue;
		cpu_ns += (double)p->cpu_ns;
		cycles += (double)p->cycles;
		instr += (double)p->instructions;
		misses += (double)p->cache_misses;
	}
	x[FEAT_CPU_TIME_MS] = cpu_ns / 1e6 / s;
	x[FEAT_CPU_CYCLES] = cycles / s;
	x[FEAT_CPU_INSTRUCTIONS] = instr / s;
	x[FEAT_CACHE_MISS] = misses / s;
	return 0;
}
