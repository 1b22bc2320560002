/*
 * estimd benchmark: one aligned slot of 100,000 processes (4 zones, 2,000
 * containers in 500 pods) through estimator_slot, and the estimate's msgpack
 * encoding. Prints the time per slot; asserts nothing. Then one slot as the
 * daemon handles it (decode the aligned frame, attribute, encode the estimate):
 * the slot bench/callgrind.sh counts.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "codec.h"
#include "../estimd/estimd.h"
#include "bench.h"

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* One slot as estimd's on_msg sees it: the aligned frame decoded, attributed, the estimate encoded.
 */
static int daemon_path(struct estimator *e, struct wb_msg *in)
{
	char *frame, *buf;
	size_t len, bytes;
	struct wb_err werr;
	char err[512];
	bench_stamp(in, "alignd");
	in->aligned.t0 += 1000000000ull; /* the next slot */
	in->aligned.t1 += 1000000000ull;
	if (wb_encode(in, &frame, &len, &werr) < 0) {
		fprintf(stderr, "wb_encode aligned: %s\n", werr.msg);
		return -1;
	}
	struct wb_msg m, out = {.kind = WB_ESTIMATE};
	struct est_result res;
	BENCH_COUNT_START();
	int rc = wb_decode(frame, len, &m, &werr);
	if (rc == 0 &&
	    (rc = estimator_slot(e, &m.aligned, &out.estimate, &res, err, sizeof(err))) < 0)
		fprintf(stderr, "estimator_slot: %s\n", err);
	if (rc == 0) {
		bench_stamp(&out, "estimd");
		if ((rc = wb_encode(&out, &buf, &bytes, &werr)) == 0)
			free(buf);
	}
	wb_msg_clear(&m);
	BENCH_COUNT_STOP();
	free(frame);
	if (rc < 0)
		fprintf(stderr, "daemon path: %s\n", werr.msg);
	return rc;
}

int main(int argc, char **argv)
{
	size_t nprocs = argc > 1 ? strtoul(argv[1], NULL, 10) : 100000;
	int runs = argc > 2 ? atoi(argv[2]) : 21;
	size_t ncg = 2000, nz = 4;
	struct wb_msg m = {.kind = WB_ALIGNED};
	struct wb_aligned *a = &m.aligned;
	snprintf(a->env.host, sizeof(a->env.host), "bench");
	a->t0 = 1700000000ull * 1000000000ull;
	a->t1 = a->t0 + 1000000000ull;
	a->ncpu = 128;
	a->procs = wb_array_new(nprocs, sizeof(*a->procs));
	a->zones = wb_array_new(nz, sizeof(*a->zones));
	a->cgroups = wb_array_new(ncg, sizeof(*a->cgroups));
	a->n_procs = nprocs;
	a->n_zones = nz;
	a->n_cgroups = ncg;
	const char *names[4] = {"package-0", "package-1", "dram-0", "dram-1"};
	for (size_t z = 0; z < nz; z++) {
		snprintf(a->zones[z].name, sizeof(a->zones[z].name), "%s", names[z]);
		snprintf(a->zones[z].zone, sizeof(a->zones[z].zone), "%s",
			 z < 2 ? "package" : "dram");
		a->zones[z].energy_uj = z < 2 ? 180000000 + z * 1234567 : 25000000 + z * 7654;
	}
	for (size_t c = 0; c < ncg; c++) {
		a->cgroups[c].id = 1000 + c;
		snprintf(a->cgroups[c].container_id, sizeof(a->cgroups[c].container_id), "%064zx",
			 c * 7919);
		snprintf(a->cgroups[c].pod_uid, sizeof(a->cgroups[c].pod_uid), "pod-%zu", c / 4);
		snprintf(a->cgroups[c].runtime, sizeof(a->cgroups[c].runtime), "containerd");
	}
	uint64_t seed = 88172645463325252ull, busy = 0;
	for (size_t i = 0; i < nprocs; i++) {
		seed ^= seed << 13;
		seed ^= seed >> 7;
		seed ^= seed << 17;
		a->procs[i].pid = 1 + i;
		snprintf(a->procs[i].comm, sizeof(a->procs[i].comm), "proc%zu", i);
		a->procs[i].cpu_ns = seed % 2000000;
		a->procs[i].cgroup_id =
		    1000 + seed % (ncg + ncg / 4); /* a fifth outside any container */
		busy += a->procs[i].cpu_ns;
	}
	a->cpu.user_ns = busy + busy / 10;
	a->cpu.idle_ns = a->ncpu * 1000000000ull - a->cpu.user_ns;

	struct est_conf conf = {
	    .mode = EST_AUTO, .by = EST_BY_CPU, .base = EST_BASE_NODE, .idle.method = IDLE_RATIO};
	struct estimator *e = estimator_new(&conf);
	double *t_est = calloc((size_t)runs, sizeof(double)),
	       *t_enc = calloc((size_t)runs, sizeof(double));
	size_t bytes = 0, ncontainers = 0, npods = 0;
	char err[512];
	for (int r = 0; r < runs; r++) {
		struct wb_msg out = {.kind = WB_ESTIMATE};
		struct est_result res;
		double t0 = now_ms();
		if (estimator_slot(e, a, &out.estimate, &res, err, sizeof(err)) < 0) {
			fprintf(stderr, "estimator_slot: %s\n", err);
			return 1;
		}
		double t1 = now_ms();
		bench_stamp(&out, "estimd");
		char *buf;
		struct wb_err werr;
		if (wb_encode(&out, &buf, &bytes, &werr) < 0) {
			fprintf(stderr, "wb_encode: %s\n", werr.msg);
			return 1;
		}
		double t2 = now_ms();
		free(buf);
		t_est[r] = t1 - t0;
		t_enc[r] = t2 - t1;
		ncontainers = out.estimate.n_containers;
		npods = out.estimate.n_pods;
	}
	if (daemon_path(e, &m) < 0)
		return 1;
	qsort(t_est, (size_t)runs, sizeof(double), cmp_double);
	qsort(t_enc, (size_t)runs, sizeof(double), cmp_double);
	printf("estimd: one slot of %zu processes, %zu zones, %zu containers, %zu pods (%d runs)\n",
	       nprocs, nz, ncontainers, npods, runs);
	printf("  attribute (estimator_slot): median %.2f ms, min %.2f ms, max %.2f ms\n",
	       t_est[runs / 2], t_est[0], t_est[runs - 1]);
	printf(
	    "  encode the estimate:        median %.2f ms, min %.2f ms, max %.2f ms (%zu bytes)\n",
	    t_enc[runs / 2], t_enc[0], t_enc[runs - 1], bytes);
	/* machine-readable, for bench/run.sh */
	printf("BENCH estimd_procs=%zu\nBENCH estimd_attrib_ms=%.3f\nBENCH estimd_encode_ms=%.3f\n",
	       nprocs, t_est[runs / 2], t_enc[runs / 2]);
	estimator_destroy(&e);
	wb_msg_clear(&m);
	free(t_est);
	free(t_enc);
	return 0;
}
