/*
 * libFuzzer target for alignd's engine: any stream of power samples, usage
 * samples and clock ticks (stale, reordered, restarted, with counters going
 * anywhere) must never crash, and every slot it emits must be a valid aligned
 * message: encodable, t0 < t1, coverage in [0, 1], and within one
 * total_epoch of a host each zone's total_uj is the previous one plus the
 * slot's energy_uj.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../alignd/alignd.h"
#include "log.h"

struct in {
	const uint8_t *p;
	size_t n;
};

static uint64_t take(struct in *in, int bytes)
{
	uint64_t v = 0;
	for (int i = 0; i < bytes && in->n; i++, in->p++, in->n--)
		v = v << 8 | *in->p;
	return v;
}

/* Last total per (host, zone) seen in this input. */
static struct {
	char host[8], zone[64];
	uint64_t epoch, total;
} seen[16];
static size_t nseen;

static void check_total(const struct wb_aligned *a, const struct wb_slot_zone *z)
{
	if (!a->total_epoch || z->total_uj < z->energy_uj)
		abort();
	for (size_t i = 0; i < nseen; i++) {
		if (strcmp(seen[i].host, a->env.host) != 0 || strcmp(seen[i].zone, z->name) != 0)
			continue;
		if (seen[i].epoch == a->total_epoch && seen[i].total + z->energy_uj != z->total_uj)
			abort();
		seen[i].epoch = a->total_epoch;
		seen[i].total = z->total_uj;
		return;
	}
	if (nseen < sizeof(seen) / sizeof(seen[0])) {
		snprintf(seen[nseen].host, sizeof(seen[nseen].host), "%s", a->env.host);
		snprintf(seen[nseen].zone, sizeof(seen[nseen].zone), "%s", z->name);
		seen[nseen].epoch = a->total_epoch;
		seen[nseen++].total = z->total_uj;
	}
}

static void emit(struct wb_msg *m, void *arg)
{
	const struct wb_aligned *a = &m->aligned;
	if (m->kind != WB_ALIGNED || a->t0 >= a->t1 ||
	    !(a->quality.coverage >= 0 && a->quality.coverage <= 1))
		abort();
	if (strlen(a->env.host) != 2 || (a->env.host[0] != 'h' && a->env.host[0] != 'p'))
		abort();
	for (size_t i = 0; i < a->n_zones; i++)
		check_total(a, &a->zones[i]);
	m->aligned.env.v = 1;
	snprintf(m->aligned.env.kind, sizeof(m->aligned.env.kind), "aligned");
	snprintf(m->aligned.env.src, sizeof(m->aligned.env.src), "alignd");
	char *buf;
	size_t len;
	struct wb_err err;
	if (wb_encode(m, &buf, &len, &err) < 0)
		abort();
	free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool quiet;
	if (!quiet) {
		log_init("fuzz", WB_LOG_ERR);
		quiet = true;
	}
	struct in in = {data, size};
	nseen = 0;
	struct align_conf conf = {.max_lag_ns = take(&in, 1) * 10000000ull,
				  .snap_ns = take(&in, 1) * 100000ull,
				  .host_timeout_ns = 1000000000ull * (1 + take(&in, 1) % 8),
				  .max_skew_ns = 1000000000ull,
				  .bridge_max_w = (double)(take(&in, 1) * 10),
				  .max_hosts = 2,
				  .max_procs = 16,
				  .max_cgroups = 4,
				  .max_exes = 4,
				  .max_pending = 1 + take(&in, 1) % 8,
				  .max_samples = 4 + take(&in, 1) % 16};
	char *map[] = {"h1=p0"};
	align_conf_map(&conf, map, take(&in, 1) & 1, NULL, 0);
	struct align *a = align_new(&conf, emit, NULL);
	align_conf_free(&conf);
	if (!a)
		return 0;
	uint64_t now = 1000000000000ull, t = now;
	while (in.n) {
		uint64_t op = take(&in, 1);
		char host[8];
		snprintf(host, sizeof(host), "%c%d", op & 8 ? 'p' : 'h', (int)(op >> 4) & 1);
		t += take(&in, 2) * 1000000ull - 8000000ull; /* mostly forward, sometimes back */
		now += take(&in, 1) * 10000000ull;
		switch (op & 3) {
		case 0: {
			struct wb_power_zone z[3] = {{.name = "package-0", .zone = "package"},
						     {.name = "dram-0", .zone = "dram"},
						     {.name = "psys", .zone = "psys"}};
			struct wb_power p = {.t = t,
					     .interval_ns = 1000000 * (1 + take(&in, 2)),
					     .zones = z,
					     .n_zones = take(&in, 1) % 4};
			snprintf(p.env.host, sizeof(p.env.host), "%s", host);
			p.env.epoch = take(&in, 1) % 3;
			for (size_t i = 0; i < p.n_zones; i++) {
				z[i].energy_uj = take(&in, 5);
				z[i].max_energy_range_uj = take(&in, 1) & 1 ? 262143328850ull : 0;
			}
			align_power(a, &p, now);
			break;
		}
		case 1: {
			struct wb_proc procs[6];
			struct wb_cgroup cgs[2] = {{.id = 1, .service = "a.service"},
						   {.id = 2, .vm = "vm"}};
			struct wb_usage u = {.t = t,
					     .interval_ns = 1000000000,
					     .ncpu = 1,
					     .procs = procs,
					     .n_procs = take(&in, 1) % 7,
					     .cgroups = cgs,
					     .n_cgroups = take(&in, 1) % 3};
			snprintf(u.env.host, sizeof(u.env.host), "%s", host);
			u.env.epoch = take(&in, 1) % 3;
			u.full = take(&in, 1) & 1;
			u.boot_ns = take(&in, 1) & 1 ? now - 500000000000ull : 0;
			u.cpu.user_ns = take(&in, 4);
			u.cpu.idle_ns = take(&in, 4);
			for (size_t i = 0; i < u.n_procs; i++)
				procs[i] =
				    (struct wb_proc){.pid = take(&in, 1) % 8,
						     .start_ns = take(&in, 1) * 1000000000ull,
						     .cgroup_id = take(&in, 1) % 4,
						     .cpu_ns = take(&in, 4),
						     .exited = take(&in, 1) == 7};
			align_usage(a, &u, take(&in, 1) % 3, now);
			break;
		}
		case 2:
			align_tick(a, now);
			break;
		case 3:
			align_flush(a, now);
			break;
		}
	}
	align_flush(a, now);
	align_destroy(&a);
	return 0;
}
