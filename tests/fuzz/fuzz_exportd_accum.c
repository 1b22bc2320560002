/*
 * libFuzzer target for exportd's accumulators: the input drives a sequence of
 * estimates (overlapping, stale, malformed, with processes that exit and pids
 * that come back, node totals that continue, go back or do not add up) under
 * tiny caps; after each one the invariants must hold:
 * zone totals never go back and equal active + idle, every workload is
 * reachable in its map, the series and terminated counts add up, the caps
 * hold; and /metrics renders into well-formed lines.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "../../exportd/exportd.h"

#define S 1000000000ull

struct rd {
	const uint8_t *p;
	size_t n;
};

static unsigned take(struct rd *r)
{
	if (!r->n)
		return 0;
	r->n--;
	return *r->p++;
}

#define CHECK(c)                                                                                   \
	do {                                                                                       \
		if (!(c)) {                                                                        \
			fprintf(stderr, "%s:%d: invariant %s broken\n", __FILE__, __LINE__, #c);   \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

static void check_map(const struct ex_host *h, int level, size_t *series, size_t *nterm)
{
	const struct ex_wmap *m = &h->works[level];
	size_t n = 0;
	for (size_t i = 0; i < m->cap; i++) {
		const struct ex_wslot *slot = &m->slots[i];
		if (!slot->used)
			continue;
		const struct ex_work *w = slot->w;
		n++;
		CHECK(w && w->level == level && w->key == slot->key);
		*series += w->nseries;
		*nterm += w->terminated;
		/* reachable: the table finds it among the entries of its key */
		const void *e = wb_table_find(&m->tab, slot->key, 0);
		while (e && e != slot)
			e = wb_table_find_next(&m->tab, e);
		CHECK(e == slot);
		for (size_t z = 0; z < w->nz; z++)
			CHECK(w->uj[w->nz + z] <= w->uj[z] || w->last_t1 != h->last_t1);
	}
	CHECK(n == m->n);
	size_t listed = 0;
	for (const struct ex_work *w = h->term_head[level]; w; w = w->tnext) {
		CHECK(w->terminated);
		listed++;
	}
	CHECK(listed == h->nterm[level]);
}

static void check(const struct accum *a, uint64_t prev[4][EX_MAX_ZONES])
{
	size_t series[EX_NLEVELS] = {0};
	/* A forgotten host or zone gives its index to a new one, which starts from 0. */
	static uint64_t forgotten = 0;
	if (a->evicted_hosts + a->evicted_zones != forgotten) {
		forgotten = a->evicted_hosts + a->evicted_zones;
		memset(prev, 0, 4 * sizeof(prev[0]));
	}
	CHECK(accum_series(a) <= a->lim.max_series);
	for (size_t i = 0; i < a->nhosts; i++) {
		const struct ex_host *h = a->hosts[i];
		for (size_t z = 0; z < h->nzones; z++) {
			const struct ex_zone *xz = &h->zones[z];
			CHECK(xz->total_uj == xz->active_uj + xz->idle_uj);
			CHECK(xz->total_uj >= prev[i][z]);
			prev[i][z] = xz->total_uj;
		}
		for (int l = EX_PROCESS; l < EX_NLEVELS; l++) {
			size_t nterm = 0;
			check_map(h, l, &series[l], &nterm);
			CHECK(nterm == h->nterm[l]);
			CHECK(nterm <= a->lim.max_terminated);
		}
	}
	for (int l = 0; l < EX_NLEVELS; l++)
		CHECK(series[l] == a->series[l]);
}

static void check_render(const struct accum *a)
{
	struct stages *st = stages_new(4);
	struct rbuf b = {0};
	struct render_filter f = {.levels = EX_LEVELS_ALL};
	struct render_input in = {
	    .acc = a, .st = st, .now_ns = 2000000000000000000ull, .stage_timeout_ns = S};
	render_metrics(&in, &f, &b);
	CHECK(!b.oom);
	CHECK(b.len && b.p[b.len - 1] == '\n');
	const char *line = b.p, *end = b.p + b.len;
	while (line < end) {
		const char *nl = memchr(line, '\n', (size_t)(end - line));
		CHECK(nl);
		if (line[0] != '#') {
			/* name{labels} value, with every quote inside the braces escaped or paired
			 */
			const char *sp = nl;
			while (sp > line && sp[-1] != ' ')
				sp--;
			CHECK(sp > line + 1 && sp < nl);
			int quotes = 0;
			for (const char *c = line; c < sp; c++) {
				if (*c == '\\') {
					c++;
					continue;
				}
				quotes += *c == '"';
			}
			CHECK(quotes % 2 == 0);
		}
		line = nl + 1;
	}
	rbuf_free(&b);
	stages_destroy(&st);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rd r = {data, size};
	struct accum_limits lim = {
	    .levels = take(&r) | 1u,
	    .max_series = 1 + take(&r) % 64,
	    .max_terminated = take(&r) % 5,
	    .terminated_ttl_ns = (take(&r) % 6) * S,
	    .stale_after_ns = (take(&r) % 6) * S,
	    .max_hosts = 1 + take(&r) % 3,
	    .node_name = take(&r) & 1 ? "n" : NULL,
	};
	struct accum *a = accum_new(&lim);
	if (!a)
		return 0;
	uint64_t prev[4][EX_MAX_ZONES] = {{0}};
	uint64_t base = 1000000000000000000ull;
	static const char *kinds[] = {"package", "dram", "core"};
	for (int step = 0; step < 64 && r.n; step++) {
		struct wb_msg m = {.kind = WB_ESTIMATE};
		struct wb_estimate *e = &m.estimate;
		snprintf(e->env.host, sizeof e->env.host, "h%u", take(&r) % 4);
		unsigned shape = take(&r);
		e->t0 = base + (uint64_t)(shape % 5) * S / 2 - S;
		e->t1 = e->t0 + (uint64_t)(shape / 5 % 4) * S / 2;
		base += S;
		e->n_zones = take(&r) % 4;
		e->zones = wb_array_new(e->n_zones ? e->n_zones : 1, sizeof *e->zones);
		for (size_t z = 0; z < e->n_zones; z++) {
			unsigned k = take(&r);
			snprintf(e->zones[z].zone, sizeof e->zones[z].zone, "%s", kinds[k % 3]);
			snprintf(e->zones[z].name, sizeof e->zones[z].name, "%s-%u", kinds[k % 3],
				 k / 3 % 2);
			snprintf(e->zones[z].path, sizeof e->zones[z].path, "/p/%u", k / 6 % 2);
			e->zones[z].energy_uj = take(&r) * 257u;
			e->zones[z].active_uj = e->zones[z].energy_uj
						    ? take(&r) * 257u % (e->zones[z].energy_uj + 1)
						    : 0;
			e->zones[z].idle_uj =
			    e->zones[z].energy_uj - e->zones[z].active_uj + (k >= 250);
			/* node totals: going up, back, or not adding up */
			struct wb_est_zone *ez = &e->zones[z];
			unsigned tk = take(&r);
			ez->total_uj = (uint64_t)tk * 40961u;
			ez->active_total_uj =
			    ez->total_uj ? take(&r) * 40961u % (ez->total_uj + 1) : 0;
			ez->idle_total_uj = ez->total_uj - ez->active_total_uj + (tk == 255);
		}
		e->total_epoch = take(&r) % 3;
		snprintf(e->env.src, sizeof e->env.src, "e%u", e->total_epoch == 2);
		e->n_procs = take(&r) % 8;
		e->procs = wb_array_new(e->n_procs ? e->n_procs : 1, sizeof *e->procs);
		for (size_t i = 0; i < e->n_procs; i++) {
			struct wb_est_proc *p = &e->procs[i];
			unsigned id = take(&r);
			p->pid = id % 16;
			p->start_ns = id / 16 % 2;
			p->exited = id >= 224;
			snprintf(p->comm, sizeof p->comm, "c\"%u\\", id % 3);
			if (id % 5 == 1)
				snprintf(p->container_id, sizeof p->container_id, "ct%u", id % 3);
			p->cpu_ns = take(&r) * 1000u;
			p->n_energy_uj = e->n_zones - (e->n_zones && id % 31 == 30);
			p->energy_uj = wb_array_new(e->n_zones ? e->n_zones : 1, sizeof(uint64_t));
			for (size_t z = 0; z < e->n_zones; z++)
				p->energy_uj[z] = take(&r) * 3u;
		}
		e->n_containers = take(&r) % 3;
		e->containers =
		    wb_array_new(e->n_containers ? e->n_containers : 1, sizeof *e->containers);
		for (size_t i = 0; i < e->n_containers; i++) {
			struct wb_est_group *g = &e->containers[i];
			snprintf(g->id, sizeof g->id, "ct%zu", i);
			g->n_energy_uj = e->n_zones;
			g->energy_uj = wb_array_new(e->n_zones ? e->n_zones : 1, sizeof(uint64_t));
			for (size_t z = 0; z < e->n_zones; z++)
				g->energy_uj[z] = take(&r);
		}
		enum accum_reason why;
		if (accum_add(a, e, &why) < 0)
			CHECK(why < ACC_R_COUNT);
		wb_msg_clear(&m);
		check(a, prev);
		if (step % 7 == 6) {
			/* a reload that changes the levels and the name */
			lim.levels = take(&r) | 1u;
			lim.node_name = step % 2 ? "other" : NULL;
			accum_set_limits(a, &lim);
			check(a, prev);
		}
	}
	check_render(a);
	accum_destroy(&a);
	return 0;
}
