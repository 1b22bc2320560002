/*
 * exportd's costs in-process: applying one estimate slot of N processes to the
 * accumulators, and rendering /metrics for them, plain and gzip'd (levels 1 and 6).
 * Prints the median and the best of several runs. One more slot goes in as the
 * daemon takes it (decode the estimate frame, apply): the slot bench/callgrind.sh counts.
 *   [WB_BENCH_METRICS=kepler-0.9] exportd_bench [PROCS [ZONES [RUNS]]]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "codec.h"
#include "../exportd/exportd.h"
#include "bench.h"

#define S 1000000000ull

static void make_slot(struct wb_msg *m, size_t nprocs, size_t nz, uint64_t t0)
{
	*m = (struct wb_msg){.kind = WB_ESTIMATE};
	struct wb_estimate *e = &m->estimate;
	snprintf(e->env.host, sizeof e->env.host, "bench-node");
	e->t0 = t0;
	e->t1 = t0 + S;
	e->cpu_usage_ratio = 0.5;
	e->n_zones = nz;
	e->zones = wb_array_new(nz, sizeof *e->zones);
	static const char *kinds[] = {"package", "dram", "core", "uncore", "psys"};
	for (size_t z = 0; z < nz; z++) {
		snprintf(e->zones[z].zone, sizeof e->zones[z].zone, "%s", kinds[z % 5]);
		snprintf(e->zones[z].name, sizeof e->zones[z].name, "%s", kinds[z % 5]);
		snprintf(e->zones[z].path, sizeof e->zones[z].path,
			 "/sys/class/powercap/intel-rapl:0:%zu", z);
		e->zones[z].energy_uj = 100000000;
		e->zones[z].active_uj = 60000000;
		e->zones[z].idle_uj = 40000000;
	}
	e->n_procs = nprocs;
	e->procs = wb_array_new(nprocs, sizeof *e->procs);
	for (size_t i = 0; i < nprocs; i++) {
		struct wb_est_proc *p = &e->procs[i];
		p->pid = 1000 + i;
		p->start_ns = 777 + i;
		snprintf(p->comm, sizeof p->comm, "worker-%zu", i % 5000);
		if (i % 4 == 0)
			snprintf(p->container_id, sizeof p->container_id, "%064zx", i / 40);
		p->cpu_ns = 1000000 + i;
		p->n_energy_uj = nz;
		p->energy_uj = wb_array_new(nz, sizeof(uint64_t));
		for (size_t z = 0; z < nz; z++)
			p->energy_uj[z] = 60000000 / (nprocs + 1);
	}
}

static size_t bench_procs, bench_zones;

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* The human line, and a machine-readable one for bench/run.sh (BENCH key=value). */
static void report(const char *what, const char *key, uint64_t *ns, int runs, size_t bytes)
{
	qsort(ns, (size_t)runs, sizeof *ns, cmp_u64);
	printf("  %-34s median %8.2f ms   best %8.2f ms", what, ns[runs / 2] / 1e6, ns[0] / 1e6);
	if (bytes)
		printf("   %9zu bytes", bytes);
	printf("\n");
	printf("BENCH exportd.p%zu.z%zu.%s_ms=%.3f\n", bench_procs, bench_zones, key,
	       ns[runs / 2] / 1e6);
	if (bytes)
		printf("BENCH exportd.p%zu.z%zu.%s_bytes=%zu\n", bench_procs, bench_zones, key,
		       bytes);
}

int main(int argc, char **argv)
{
	size_t nprocs = argc > 1 ? strtoul(argv[1], NULL, 10) : 10000;
	size_t nz = argc > 2 ? strtoul(argv[2], NULL, 10) : 1;
	int runs = argc > 3 ? atoi(argv[3]) : 15;
	if (nz < 1 || nz > 5 || runs < 1 || nprocs < 1) {
		fprintf(stderr, "usage: exportd_bench [PROCS [ZONES(1-5) [RUNS]]]\n");
		return 2;
	}
	struct accum_limits lim = {.levels = EX_LEVELS_ALL,
				   .max_series = 100000000,
				   .max_terminated = 500,
				   .terminated_ttl_ns = 600 * S,
				   .stale_after_ns = 300 * S,
				   .max_hosts = 4};
	struct accum *acc = accum_new(&lim);
	struct stages *st = stages_new(16);
	uint64_t *ns = calloc((size_t)runs, sizeof *ns);
	if (!acc || !st || !ns)
		return 1;

	bench_procs = nprocs;
	bench_zones = nz;
	printf("exportd: %zu processes x %zu zone(s), %d runs\n", nprocs, nz, runs);
	/* the first slot creates every workload; the following ones update them */
	for (int r = 0; r <= runs; r++) {
		struct wb_msg m;
		make_slot(&m, nprocs, nz, (1000 + (uint64_t)r) * S);
		uint64_t t = wb_mono_ns();
		if (accum_add(acc, &m.estimate, NULL) < 0)
			return 1;
		if (r > 0)
			ns[r - 1] = wb_mono_ns() - t;
		else
			printf("  %-34s          %8.2f ms\n", "apply the first slot (creates all)",
			       (wb_mono_ns() - t) / 1e6);
		wb_msg_clear(&m);
	}
	report("apply one slot", "apply", ns, runs, 0);
	{
		struct wb_msg m;
		char *frame;
		size_t len;
		struct wb_err err;
		make_slot(&m, nprocs, nz, (1001 + (uint64_t)runs) * S);
		snprintf(m.estimate.mode, sizeof(m.estimate.mode), "measured");
		m.estimate.ncpu = 64;
		bench_stamp(&m, "estimd");
		if (wb_encode(&m, &frame, &len, &err) < 0) {
			fprintf(stderr, "wb_encode estimate: %s\n", err.msg);
			return 1;
		}
		wb_msg_clear(&m);
		BENCH_COUNT_START();
		int rc = wb_decode(frame, len, &m, &err);
		if (rc == 0)
			rc = accum_add(acc, &m.estimate, NULL);
		wb_msg_clear(&m);
		BENCH_COUNT_STOP();
		free(frame);
		if (rc < 0)
			return 1;
	}

	/* WB_BENCH_METRICS: exportd's metrics key (kepler, kepler-0.9, or both comma-separated) */
	struct render_filter f = {.levels = EX_LEVELS_ALL};
	const char *prof = getenv("WB_BENCH_METRICS");
	if (prof && prof[0]) {
		char buf[64], *names[EX_NPROFILES + 1], *save = NULL, err[128];
		struct wb_strlist l = {0, names};
		snprintf(buf, sizeof buf, "%s", prof);
		for (char *t = strtok_r(buf, ",", &save); t && l.n <= EX_NPROFILES;
		     t = strtok_r(NULL, ",", &save))
			names[l.n++] = t;
		if (profiles_parse(&l, &f.profiles, err, sizeof err) < 0) {
			fprintf(stderr, "WB_BENCH_METRICS: %s\n", err);
			return 2;
		}
	}
	struct exportd_counters ctr = {0};
	struct render_input in = {.acc = acc,
				  .st = st,
				  .ctr = &ctr,
				  .now_ns = 2000 * S,
				  .stage_timeout_ns = 15 * S,
				  .version = "bench"};
	struct rbuf body = {0}, z = {0};
	size_t plain = 0, series = 0;
	for (int r = 0; r < runs; r++) {
		rbuf_reset(&body);
		uint64_t t = wb_mono_ns();
		render_metrics(&in, &f, &body);
		ns[r] = wb_mono_ns() - t;
		plain = body.len;
	}
	for (size_t i = 0; i < body.len; i++)
		series += body.p[i] == '\n' && i + 1 < body.len && body.p[i + 1] != '#';
	report("render /metrics", "render", ns, runs, plain);
	int levels[] = {1, 6};
	for (int l = 0; l < 2; l++) {
		for (int r = 0; r < runs; r++) {
			rbuf_free(&z);
			uint64_t t = wb_mono_ns();
			/* as exportd answers a gzip'd scrape: deflated as it is rendered */
			if (rbuf_gzip_begin(&z, levels[l]) < 0)
				return 1;
			render_metrics(&in, &f, &z);
			if (rbuf_gzip_end(&z) < 0)
				return 1;
			ns[r] = wb_mono_ns() - t;
		}
		char what[64];
		snprintf(what, sizeof what, "render /metrics + gzip level %d", levels[l]);
		char key[32];
		snprintf(key, sizeof key, "render_gzip%d", levels[l]);
		report(what, key, ns, runs, z.len);
	}
	printf("  %zu samples in the body, %zu workload series in the accumulators\n", series,
	       accum_series(acc));
	printf("BENCH exportd.p%zu.z%zu.samples=%zu\n", nprocs, nz, series);
	rbuf_free(&body);
	rbuf_free(&z);
	free(ns);
	accum_destroy(&acc);
	stages_destroy(&st);
	return 0;
}
