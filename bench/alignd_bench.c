/*
 * How many slots per second alignd's engine closes with 10,000 processes in
 * every usage message: the engine alone, and the daemon's whole per-slot path
 * without the sockets (decode the usage frame, align, encode the aligned frame).
 * The last slot of that path is the one bench/callgrind.sh counts.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../alignd/alignd.h"
#include "bench.h"
#include "clock.h"
#include "log.h"

#define S 1000000000ull

static size_t nprocs = 10000;
static uint64_t emitted, emitted_procs, frame_bytes;
static bool encode_out;

static void emit(struct wb_msg *m, void *arg)
{
	emitted++;
	emitted_procs += m->aligned.n_procs;
	if (encode_out) {
		char *buf;
		size_t len;
		struct wb_err err;
		bench_stamp(m, "alignd");
		if (wb_encode(m, &buf, &len, &err) < 0) {
			fprintf(stderr, "encode: %s\n", err.msg);
			exit(1);
		}
		frame_bytes = len;
		free(buf);
	}
}

/* Usage sample k of a host: every process ran, in 100 cgroups. */
static void fill_usage(struct wb_usage *u, uint64_t k)
{
	memset(u, 0, sizeof(*u));
	snprintf(u->env.host, sizeof(u->env.host), "bench");
	u->env.epoch = 1;
	u->env.seq = k;
	u->t = (1700000000 + k) * S;
	u->interval_ns = S;
	u->ncpu = 64;
	u->full = k % 10 == 0;
	u->cpu.user_ns = k * 20 * S;
	u->cpu.idle_ns = k * 44 * S;
	u->procs = wb_array_new(nprocs, sizeof(*u->procs));
	u->n_procs = nprocs;
	for (size_t i = 0; i < nprocs; i++) {
		struct wb_proc *p = &u->procs[i];
		p->pid = i + 100;
		p->start_ns = i * 1000;
		p->cgroup_id = 5000 + i % 100;
		p->cpu_ns = k * (i % 7 + 1) * 1000000;
		p->instructions = p->cpu_ns * 2;
		snprintf(p->comm, sizeof(p->comm), "proc%zu", i);
	}
	u->cgroups = wb_array_new(100, sizeof(*u->cgroups));
	u->n_cgroups = 100;
	for (size_t i = 0; i < 100; i++) {
		u->cgroups[i].id = 5000 + i;
		snprintf(u->cgroups[i].path, sizeof(u->cgroups[i].path),
			 "kubepods.slice/pod%zu/cri-%zu.scope", i, i);
		snprintf(u->cgroups[i].container_id, sizeof(u->cgroups[i].container_id), "%064zx",
			 i);
	}
}

static void power(struct align *a, uint64_t k)
{
	struct wb_power_zone z[2] = {
	    {.name = "package-0", .zone = "package", .energy_uj = k * 150000000},
	    {.name = "dram-0", .zone = "dram", .energy_uj = k * 20000000}};
	struct wb_power p = {.t = (1700000000 + k) * S, .interval_ns = S, .zones = z, .n_zones = 2};
	snprintf(p.env.host, sizeof(p.env.host), "bench");
	p.env.epoch = 1;
	align_power(a, &p, p.t + 1000000);
}

static struct align *mk(void)
{
	struct align_conf c = {.host_timeout_ns = 3600 * S,
			       .max_hosts = 16,
			       .max_procs = 262144,
			       .max_cgroups = 16384,
			       .max_exes = 16384,
			       .max_pending = 64,
			       .max_samples = 16384};
	return align_new(&c, emit, NULL);
}

int main(int argc, char **argv)
{
	uint64_t slots = argc > 1 ? strtoull(argv[1], NULL, 0) : 300;
	if (argc > 2)
		nprocs = strtoull(argv[2], NULL, 0);
	log_init("alignd-bench", WB_LOG_WARN);

	/* Engine alone: usage structs built beforehand, as decoded. */
	struct wb_msg *msgs = calloc(slots + 1, sizeof(*msgs));
	for (uint64_t k = 0; k <= slots; k++) {
		msgs[k].kind = WB_USAGE;
		fill_usage(&msgs[k].usage, k);
	}
	struct align *a = mk();
	uint64_t t0 = wb_mono_ns();
	for (uint64_t k = 0; k <= slots; k++) {
		power(a, k);
		align_usage(a, &msgs[k].usage, 0, msgs[k].usage.t + 2000000);
	}
	uint64_t engine_ns = wb_mono_ns() - t0;
	align_destroy(&a);
	if (emitted != slots || emitted_procs != slots * nprocs) {
		fprintf(stderr,
			"alignd bench: %llu slots, %llu procs emitted: expected %llu, %llu\n",
			(unsigned long long)emitted, (unsigned long long)emitted_procs,
			(unsigned long long)slots, (unsigned long long)(slots * nprocs));
		return 1;
	}

	/* The daemon's path: msgpack frame in, aligned frame out. */
	char **frames = calloc(slots + 1, sizeof(*frames));
	size_t *lens = calloc(slots + 1, sizeof(*lens));
	for (uint64_t k = 0; k <= slots; k++) {
		struct wb_err err;
		bench_stamp(&msgs[k], "usaged");
		if (wb_encode(&msgs[k], &frames[k], &lens[k], &err) < 0) {
			fprintf(stderr, "encode usage: %s\n", err.msg);
			return 1;
		}
		wb_msg_clear(&msgs[k]);
	}
	emitted = emitted_procs = 0;
	encode_out = true;
	a = mk();
	t0 = wb_mono_ns();
	for (uint64_t k = 0; k <= slots; k++) {
		struct wb_msg m;
		struct wb_err err;
		if (k == slots)
			BENCH_COUNT_START();
		if (wb_decode(frames[k], lens[k], &m, &err) < 0) {
			fprintf(stderr, "decode usage: %s\n", err.msg);
			return 1;
		}
		power(a, k);
		align_usage(a, &m.usage, 0, m.usage.t + 2000000);
		wb_msg_clear(&m);
		if (k == slots)
			BENCH_COUNT_STOP();
	}
	uint64_t path_ns = wb_mono_ns() - t0;
	align_destroy(&a);

	printf(
	    "alignd bench: %zu processes per usage message, %llu slots, usage frame %zu bytes, aligned frame %llu bytes\n",
	    nprocs, (unsigned long long)slots, lens[1], (unsigned long long)frame_bytes);
	printf("alignd bench: engine alone           %8.1f slots/s  (%.3f ms per slot)\n",
	       (double)slots * 1e9 / (double)engine_ns, (double)engine_ns / 1e6 / (double)slots);
	printf("alignd bench: decode + align + encode %8.1f slots/s  (%.3f ms per slot)\n",
	       (double)slots * 1e9 / (double)path_ns, (double)path_ns / 1e6 / (double)slots);
	/* machine-readable, for bench/run.sh */
	printf("BENCH alignd_procs=%zu\n", nprocs);
	printf("BENCH alignd_engine_ms=%.3f\n", (double)engine_ns / 1e6 / (double)slots);
	printf("BENCH alignd_path_ms=%.3f\n", (double)path_ns / 1e6 / (double)slots);
	for (uint64_t k = 0; k <= slots; k++)
		free(frames[k]);
	free(frames);
	free(lens);
	free(msgs);
	return 0;
}
