/*
 * alignd's engine on synthetic streams with analytic answers: the energy of
 * each slot is the integral of a known piecewise-constant power, and the slot
 * energies of a run sum exactly to E(last) - E(first). Covers power denser and
 * sparser than usage, jitter, lost power samples (extrapolation, then the
 * correction), powerd restarts (bridged or a gap), hosts without power, two
 * hosts with a host map, timeouts and the bounded queue; the cumulative totals
 * and a restart from a checkpoint after a crash.
 */
#include <unistd.h>

#include "../../alignd/alignd.h"
#include "plaus.h"
#include "unit.h"

#include "alignd_unit.h"

#define RANGE 262143328850ull

/* ---- what the engine emitted ---- */

struct got {
	char host[64], power_host[64];
	uint64_t t0, t1;
	size_t nz, nprocs;
	char zname[4][64];
	uint64_t e[4];
	uint64_t total[4]; /* zones[].total_uj */
	uint64_t total_epoch;
	struct wb_quality q;
	uint64_t user_ns;
};

static struct got got[4096];
static size_t ngot;

static void collect(struct wb_msg *m, void *arg)
{
	const struct wb_aligned *a = &m->aligned;
	CHECK(m->kind == WB_ALIGNED);
	CHECK(ngot < sizeof(got) / sizeof(got[0]));
	if (ngot >= sizeof(got) / sizeof(got[0]))
		return;
	struct got *g = &got[ngot++];
	memset(g, 0, sizeof(*g));
	snprintf(g->host, sizeof(g->host), "%s", a->env.host);
	snprintf(g->power_host, sizeof(g->power_host), "%s", a->power_host);
	g->t0 = a->t0;
	g->t1 = a->t1;
	g->nz = a->n_zones;
	for (size_t i = 0; i < a->n_zones && i < 4; i++) {
		snprintf(g->zname[i], sizeof(g->zname[i]), "%s", a->zones[i].name);
		g->e[i] = a->zones[i].energy_uj;
		g->total[i] = a->zones[i].total_uj;
	}
	g->total_epoch = a->total_epoch;
	g->q = a->quality;
	g->nprocs = a->n_procs;
	g->user_ns = a->cpu.user_ns;
	alignd_unit_check_encodes(m);
}

static struct got *slot_of(const char *host, uint64_t t1)
{
	for (size_t i = 0; i < ngot; i++)
		if (strcmp(got[i].host, host) == 0 && got[i].t1 == t1)
			return &got[i];
	return NULL;
}

static uint64_t zone_e(const struct got *g, const char *zone)
{
	for (size_t i = 0; g && i < g->nz; i++)
		if (strcmp(g->zname[i], zone) == 0)
			return g->e[i];
	return UINT64_MAX;
}

static uint64_t sum_of(const char *host, const char *zone)
{
	uint64_t sum = 0;
	for (size_t i = 0; i < ngot; i++)
		if (strcmp(got[i].host, host) == 0 && zone_e(&got[i], zone) != UINT64_MAX)
			sum += zone_e(&got[i], zone);
	return sum;
}

static struct align_conf base_conf(void)
{
	return alignd_unit_conf(16, 1000, 64, 4096);
}

static struct align *mk(const struct align_conf *conf)
{
	ngot = 0;
	struct align *a = align_new(conf, collect, NULL);
	CHECK(a != NULL);
	return a;
}

/* ---- analytic power: piecewise constant, times in whole microseconds ---- */

struct pw {
	size_t n;
	uint64_t t[1024]; /* P = w[i] watts on [t[i], t[i + 1]) */
	uint64_t w[1024];
};

static void pw_add(struct pw *p, uint64_t t, uint64_t w)
{
	p->t[p->n] = t;
	p->w[p->n++] = w;
}

/* Energy since t[0] in uJ: W * ns / 1000, exact for times in whole microseconds. */
static uint64_t pw_e(const struct pw *p, uint64_t t)
{
	uint64_t e = 0;
	for (size_t i = 0; i < p->n && p->t[i] < t; i++) {
		uint64_t end = i + 1 < p->n && p->t[i + 1] < t ? p->t[i + 1] : t;
		e += p->w[i] * (end - p->t[i]) / 1000;
	}
	return e;
}

/* ---- feeding ---- */

struct zone_in {
	const char *name;
	uint64_t energy_uj, range_uj;
};

static void power(struct align *a, const char *host, uint64_t epoch, uint64_t t, uint64_t interval,
		  const struct zone_in *z, size_t nz, uint64_t recv)
{
	struct wb_power_zone zones[4];
	struct wb_power p = {.t = t, .interval_ns = interval, .zones = zones, .n_zones = nz};
	snprintf(p.env.host, sizeof(p.env.host), "%s", host);
	p.env.epoch = epoch;
	memset(zones, 0, sizeof(zones));
	for (size_t i = 0; i < nz; i++) {
		snprintf(zones[i].name, sizeof(zones[i].name), "%s", z[i].name);
		snprintf(zones[i].zone, sizeof(zones[i].zone), "%.*s", (int)strcspn(z[i].name, "-"),
			 z[i].name);
		zones[i].energy_uj = z[i].energy_uj;
		zones[i].max_energy_range_uj = z[i].range_uj;
	}
	align_power(a, &p, recv);
}

static void power1(struct align *a, const char *host, uint64_t t, uint64_t interval, uint64_t e,
		   uint64_t recv)
{
	struct zone_in z = {"package-0", e, 0};
	power(a, host, 1, t, interval, &z, 1, recv);
}

static void usage(struct align *a, const char *host, uint64_t t, uint64_t lost, uint64_t recv)
{
	struct wb_proc procs[1] = {{.pid = 1, .cpu_ns = t / 2}};
	struct wb_usage u = {.t = t, .interval_ns = S, .ncpu = 1, .procs = procs, .n_procs = 1};
	snprintf(procs[0].comm, sizeof(procs[0].comm), "worker");
	snprintf(u.env.host, sizeof(u.env.host), "%s", host);
	u.env.epoch = 1;
	u.cpu.user_ns = t / 2;
	u.cpu.idle_ns = t / 2;
	align_usage(a, &u, lost, recv);
}

/* ---- scenarios ---- */

static void power_1s_usage_3s(void)
{
	struct align_conf c = base_conf();
	struct align *a = mk(&c);
	struct pw p = {0};
	for (uint64_t k = 0; k < 31; k++)
		pw_add(&p, k * S, 50 + (k * 37) % 90); /* a new power every second */
	uint64_t base = 123456789;
	for (uint64_t k = 0; k <= 30; k++) {
		power1(a, "h", k * S, S, base + pw_e(&p, k * S), k * S + 1 * MS);
		if (k % 3 == 0)
			usage(a, "h", k * S, 0, k * S + 2 * MS);
	}
	CHECK_U64(ngot, 10);
	for (uint64_t m = 1; m <= 10; m++) {
		struct got *g = slot_of("h", 3 * m * S);
		CHECK(g != NULL);
		if (!g)
			continue;
		CHECK_U64(g->t0, 3 * (m - 1) * S);
		CHECK_U64(zone_e(g, "package-0"), pw_e(&p, 3 * m * S) - pw_e(&p, 3 * (m - 1) * S));
		CHECK(g->q.interpolated && !g->q.extrapolated && !g->q.gap);
		CHECK_NEAR(g->q.coverage, 1.0, 1e-12);
		CHECK_U64(g->q.lag_ns, 0);
		CHECK_STR(g->power_host, "h");
		CHECK_U64(g->user_ns, 3 * S / 2);
	}
	CHECK_U64(sum_of("h", "package-0"), pw_e(&p, 30 * S));
	align_destroy(&a);
}

static void power_5s_usage_1s(void)
{
	struct align_conf c = base_conf();
	struct align *a = mk(&c);
	struct pw p = {0};
	for (uint64_t m = 0; m < 7; m++)
		pw_add(&p, 5 * m * S, 40 + 30 * m); /* constant within each power interval */
	for (uint64_t t = 0; t <= 30; t++) {
		if (t % 5 == 0)
			power1(a, "h", t * S, 5 * S, 1000 + pw_e(&p, t * S), t * S + 1 * MS);
		usage(a, "h", t * S, 0, t * S + 2 * MS);
		/* Slots wait for the next power sample: nothing before it. */
		if (t % 5 != 0)
			CHECK(slot_of("h", t * S) == NULL);
	}
	CHECK_U64(ngot, 30);
	for (uint64_t t = 1; t <= 30; t++) {
		struct got *g = slot_of("h", t * S);
		CHECK(g != NULL);
		if (!g)
			continue;
		CHECK_U64(zone_e(g, "package-0"), (40 + 30 * ((t - 1) / 5)) * 1000000);
		CHECK(g->q.interpolated && !g->q.extrapolated);
	}
	/* Slot [0, 1] closed at 1.002 s and waited for the sample of 5 s, received at 5.001 s. */
	CHECK_U64(slot_of("h", 1 * S)->q.lag_ns, 5 * S + 1 * MS - (1 * S + 2 * MS));
	CHECK_U64(sum_of("h", "package-0"), pw_e(&p, 30 * S));
	align_destroy(&a);
}

static uint64_t rnd(uint64_t *x)
{
	*x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
	return *x;
}

/* Power and usage both off the grid by up to +-300 ms; power changes at its own sample instants. */
static void jittered(void)
{
	struct align_conf c = base_conf();
	struct align *a = mk(&c);
	struct pw p = {0};
	uint64_t x = 2463534242;
	uint64_t pt[61], ut[21];
	for (size_t k = 0; k < 61; k++) /* power every 500 ms, +-100 ms */
		pt[k] = 10 * S + k * 500 * MS + (rnd(&x) % 200000) * 1000 - 100 * MS;
	for (size_t k = 0; k < 61; k++)
		pw_add(&p, pt[k], 20 + rnd(&x) % 200);
	for (size_t m = 0; m < 21; m++) /* usage every 1.5 s, +-300 ms, inside the power span */
		ut[m] = 10 * S + 500 * MS + m * 1400 * MS + (rnd(&x) % 600000) * 1000 - 300 * MS;
	/* Deliver in arrival order (3 ms after each message's time). */
	size_t i = 0, j = 0;
	while (i < 61 || j < 21) {
		if (j >= 21 || (i < 61 && pt[i] <= ut[j])) {
			power1(a, "h", pt[i], 500 * MS, 7 + pw_e(&p, pt[i]), pt[i] + 3 * MS);
			i++;
		} else {
			usage(a, "h", ut[j], 0, ut[j] + 3 * MS);
			j++;
		}
	}
	CHECK_U64(ngot, 20);
	for (size_t m = 1; m < 21; m++) {
		struct got *g = slot_of("h", ut[m]);
		CHECK(g != NULL);
		if (!g)
			continue;
		CHECK_U64(g->t0, ut[m - 1]);
		CHECK_U64(zone_e(g, "package-0"), pw_e(&p, ut[m]) - pw_e(&p, ut[m - 1]));
		CHECK(g->q.interpolated);
	}
	CHECK_U64(sum_of("h", "package-0"), pw_e(&p, ut[20]) - pw_e(&p, ut[0]));
	align_destroy(&a);
}

/* Power every 100 ms, changing every 100 ms, usage every second. */
static void power_denser(void)
{
	struct align_conf c = base_conf();
	struct align *a = mk(&c);
	struct pw p = {0};
	uint64_t x = 99;
	for (uint64_t k = 0; k <= 100; k++)
		pw_add(&p, k * 100 * MS, rnd(&x) % 300);
	for (uint64_t k = 0; k <= 100; k++) {
		power1(a, "h", k * 100 * MS, 100 * MS, pw_e(&p, k * 100 * MS),
		       k * 100 * MS + 1 * MS);
		if (k % 10 == 0)
			usage(a, "h", k * 100 * MS, 0, k * 100 * MS + 2 * MS);
	}
	CHECK_U64(ngot, 10);
	for (uint64_t s = 1; s <= 10; s++)
		CHECK_U64(zone_e(slot_of("h", s * S), "package-0"),
			  pw_e(&p, s * S) - pw_e(&p, (s - 1) * S));
	align_destroy(&a);
}

/*
 * 100 W until 4 s, then 200 W. Power samples 5..9 s are lost; with max_lag at
 * its default (two intervals) the slots ending at 5, 6 and 7 s are
 * extrapolated at the last known rate (100 W), and the slot in which power
 * comes back corrects them.
 */
static void lost_power_extrapolated_then_corrected(void)
{
	struct align_conf c = base_conf();
	struct align *a = mk(&c);
	struct pw p = {0};
	pw_add(&p, 0, 100);
	pw_add(&p, 4 * S, 200);
	uint64_t e0 = 5000000;
	for (uint64_t t = 0; t <= 12; t++) {
		if (t < 5 || t > 9)
			power1(a, "h", t * S, S, e0 + pw_e(&p, t * S), t * S + 1 * MS);
		align_tick(a, t * S + 1 * MS);
		usage(a, "h", t * S, 0, t * S + 2 * MS);
		align_tick(a, t * S + 2 * MS);
	}
	struct got *g5 = slot_of("h", 5 * S), *g6 = slot_of("h", 6 * S), *g7 = slot_of("h", 7 * S);
	struct got *g8 = slot_of("h", 8 * S), *g9 = slot_of("h", 9 * S),
		   *g10 = slot_of("h", 10 * S);
	CHECK(g5 && g6 && g7 && g8 && g9 && g10);
	if (!(g5 && g6 && g7 && g8 && g9 && g10))
		return;
	CHECK_U64(zone_e(g5, "package-0"), 100000000); /* true 200 J */
	CHECK_U64(zone_e(g6, "package-0"), 100000000);
	CHECK_U64(zone_e(g7, "package-0"), 100000000);
	CHECK(g5->q.extrapolated && g6->q.extrapolated && g7->q.extrapolated);
	CHECK(!g5->q.interpolated);
	CHECK_NEAR(g5->q.coverage, 0.0, 1e-12);
	CHECK_U64(g5->q.lag_ns, 2 * S); /* closed at 5.002 s, extrapolated at 7.002 s */
	/* Power back at 10 s: 4..10 s interpolates at 200 W; the slot ending at 8 s takes the
	 * correction. */
	CHECK_U64(zone_e(g8, "package-0"), 500000000);
	CHECK(!g8->q.extrapolated && !g8->q.interpolated);
	CHECK_U64(zone_e(g9, "package-0"), 200000000);
	CHECK(g9->q.interpolated);
	CHECK_U64(zone_e(g10, "package-0"), 200000000);
	CHECK_U64(align_counters(a)->slots_extrapolated, 3);
	/* Exact over the run. */
	CHECK_U64(sum_of("h", "package-0"), pw_e(&p, 12 * S));
	align_destroy(&a);
}

/* An overshoot (power dropped while samples were lost) is held back, never negative. */
static void extrapolation_overshoot_held_back(void)
{
	struct align_conf c = base_conf();
	c.max_lag_ns = 500 * MS;
	struct align *a = mk(&c);
	struct pw p = {0};
	pw_add(&p, 0, 300);
	pw_add(&p, 3 * S, 100);
	for (uint64_t t = 0; t <= 20; t++) {
		if (t <= 3 || t >= 8)
			power1(a, "h", t * S, S, pw_e(&p, t * S), t * S + 1 * MS);
		usage(a, "h", t * S, 0, t * S + 2 * MS);
		align_tick(a, t * S + 600 * MS);
	}
	CHECK_U64(ngot, 20);
	for (size_t i = 0; i < ngot; i++)
		CHECK(zone_e(&got[i], "package-0") <= 300000000);
	/* Slots ending at 4..7 s are extrapolated at 300 W (true: 100 W): 800 J too much by 8 s. */
	CHECK_U64(zone_e(slot_of("h", 4 * S), "package-0"), 300000000);
	CHECK(slot_of("h", 7 * S)->q.extrapolated);
	/* Held back until the curve catches up at 15 s, then measured again. */
	for (uint64_t t = 8; t <= 15; t++)
		CHECK_U64(zone_e(slot_of("h", t * S), "package-0"), 0);
	CHECK_U64(zone_e(slot_of("h", 16 * S), "package-0"), 100000000);
	CHECK_U64(sum_of("h", "package-0"), pw_e(&p, 20 * S));
	align_destroy(&a);
}

/* powerd restarts at 10.5 s: package had wrapped (value = hardware + R), dram had not. */
static void restart_bridged(void)
{
	struct align_conf c = base_conf();
	struct align *a = mk(&c);
	struct pw pk = {0}, dr = {0};
	pw_add(&pk, 0, 150);
	pw_add(&pk, 7 * S, 90);
	pw_add(&dr, 0, 12);
	uint64_t hw0 = RANGE - 1000000000; /* the package counter wraps after 1000 J, at ~6.7 s */
	uint64_t dram0 = 777;
	for (uint64_t t = 0; t <= 20; t++) {
		uint64_t epoch = t <= 10 ? 1 : 2;
		uint64_t pkg = hw0 + pw_e(&pk, t * S);
		if (epoch == 2)
			pkg %= RANGE +
			       1; /* the new powerd starts from the hardware reading (0..RANGE) */
		struct zone_in z[2] = {{"package-0", pkg, RANGE},
				       {"dram-0", dram0 + pw_e(&dr, t * S), RANGE}};
		if (t != 11) /* down for a while */
			power(a, "h", epoch, t * S, S, z, 2, t * S + 1 * MS);
		usage(a, "h", t * S, 0, t * S + 2 * MS);
	}
	CHECK_U64(ngot, 20);
	CHECK_U64(align_counters(a)->power_bridged, 2);
	CHECK_U64(align_counters(a)->power_discontinuities, 0);
	for (uint64_t t = 1; t <= 20; t++) {
		struct got *g = slot_of("h", t * S);
		CHECK_U64(zone_e(g, "package-0"), pw_e(&pk, t * S) - pw_e(&pk, (t - 1) * S));
		CHECK_U64(zone_e(g, "dram-0"), pw_e(&dr, t * S) - pw_e(&dr, (t - 1) * S));
		CHECK(!g->q.gap);
	}
	CHECK_U64(sum_of("h", "package-0"), pw_e(&pk, 20 * S));
	align_destroy(&a);
}

/* A counter that really restarted (new hardware, reboot): the gap is flagged, not guessed. */
static void restart_discontinuity(void)
{
	struct align_conf c = base_conf();
	struct align *a = mk(&c);
	struct pw p = {0};
	pw_add(&p, 0, 100);
	for (uint64_t t = 0; t <= 10; t++) {
		uint64_t e =
		    t <= 4 ? 900000000 + pw_e(&p, t * S) : pw_e(&p, t * S) - pw_e(&p, 6 * S);
		if (t != 5) /* epoch 2 starts at 6 s from 0 */
			power(a, "h", t <= 4 ? 1 : 2, t * S, S,
			      &(struct zone_in){"package-0", e, 0}, 1, t * S + 1 * MS);
		usage(a, "h", t * S, 0, t * S + 2 * MS);
	}
	CHECK_U64(align_counters(a)->power_discontinuities, 1);
	CHECK_U64(ngot, 10);
	/* The gap is [4, 6]: slots ending at 5 and 6 lie in it, with no energy. */
	CHECK(slot_of("h", 5 * S)->q.gap && slot_of("h", 6 * S)->q.gap);
	CHECK(!slot_of("h", 4 * S)->q.gap && !slot_of("h", 7 * S)->q.gap);
	CHECK_U64(zone_e(slot_of("h", 5 * S), "package-0"), 0);
	CHECK_U64(zone_e(slot_of("h", 6 * S), "package-0"), 0);
	CHECK_NEAR(slot_of("h", 5 * S)->q.coverage, 0.0, 1e-12);
	CHECK_U64(zone_e(slot_of("h", 7 * S), "package-0"), 100000000);
	/* Measured: 4 s before the gap, 4 s after. */
	CHECK_U64(sum_of("h", "package-0"), 800000000);
	align_destroy(&a);
}

static void usage_without_power(void)
{
	struct align_conf c = base_conf();
	struct align *a = mk(&c);
	for (uint64_t t = 0; t <= 5; t++)
		usage(a, "lonely", t * S, 0, t * S + 2 * MS);
	CHECK_U64(ngot, 5); /* not held back: nothing to wait for */
	for (size_t i = 0; i < ngot; i++) {
		CHECK_U64(got[i].nz, 0);
		CHECK_STR(got[i].power_host, "");
		CHECK_NEAR(got[i].q.coverage, 0.0, 1e-12);
		CHECK_U64(got[i].nprocs, 1);
		CHECK_U64(got[i].user_ns, S / 2);
	}
	CHECK_U64(align_counters(a)->slots_no_power, 5);
	align_destroy(&a);
}

/* Two hosts at once, one of them metered under another name (host_map). */
static void two_hosts_and_a_map(void)
{
	struct align_conf c = base_conf();
	char *items[] = {"node1=bmc-node1"};
	char err[256];
	CHECK(align_conf_map(&c, items, 1, err, sizeof(err)) == 0);
	struct align *a = mk(&c);
	align_conf_free(&c);
	struct pw pa = {0}, pb = {0};
	pw_add(&pa, 0, 111);
	pw_add(&pa, 5 * S, 222);
	pw_add(&pb, 0, 333);
	for (uint64_t t = 0; t <= 10; t++) {
		power1(a, "node0", t * S, S, pw_e(&pa, t * S), t * S + 1 * MS);
		power1(a, "bmc-node1", t * S, S, 5 + pw_e(&pb, t * S), t * S + 1 * MS);
		if (t % 2 == 0)
			usage(a, "node1", t * S, 0, t * S + 2 * MS);
		usage(a, "node0", t * S, 0, t * S + 3 * MS);
	}
	CHECK_U64(ngot, 15);
	CHECK_U64(sum_of("node0", "package-0"), pw_e(&pa, 10 * S));
	CHECK_U64(sum_of("node1", "package-0"), pw_e(&pb, 10 * S));
	struct got *g0 = slot_of("node0", 6 * S), *g1 = slot_of("node1", 6 * S);
	CHECK(g0 && g1);
	if (g0 && g1) {
		CHECK_U64(zone_e(g0, "package-0"), 222000000);
		CHECK_U64(zone_e(g1, "package-0"), 666000000);
		CHECK_STR(g1->power_host, "bmc-node1");
		CHECK_STR(g0->power_host, "node0");
	}
	size_t np, nu = align_nhosts(a, &np);
	CHECK_U64(nu, 2);
	CHECK_U64(np, 2);
	/* A bad map item is refused with its text. */
	struct align_conf bad = {0};
	char *items2[] = {"node1"};
	CHECK(align_conf_map(&bad, items2, 1, err, sizeof(err)) < 0);
	CHECK(strstr(err, "'node1'") != NULL);
	align_destroy(&a);
}

/* A usage host silent past host_timeout loses its tables but not its energy. */
static void usage_host_timeout_and_back(void)
{
	struct align_conf c = base_conf();
	c.host_timeout_ns = 5 * S;
	struct align *a = mk(&c);
	struct pw p = {0};
	pw_add(&p, 0, 100);
	pw_add(&p, 6 * S, 50);
	for (uint64_t t = 0; t <= 20; t++) {
		power1(a, "h", t * S, S, pw_e(&p, t * S), t * S + 1 * MS);
		if (t <= 3 || t >= 15)
			usage(a, "h", t * S, 0, t * S + 2 * MS);
		align_tick(a, t * S + 500 * MS);
	}
	CHECK_U64(align_counters(a)->hosts_dropped, 1);
	struct got *g = slot_of("h", 15 * S);
	CHECK(g != NULL);
	if (g) {
		CHECK_U64(g->t0, 3 * S); /* spans the silence */
		CHECK_U64(zone_e(g, "package-0"), pw_e(&p, 15 * S) - pw_e(&p, 3 * S));
		CHECK_U64(g->nprocs, 0); /* its process table was dropped: counts from here */
	}
	CHECK_U64(sum_of("h", "package-0"), pw_e(&p, 20 * S));
	align_destroy(&a);
}

/* A power host silent past host_timeout is dropped; its usage host goes on without zones. */
static void power_host_timeout_and_back(void)
{
	struct align_conf c = base_conf();
	c.host_timeout_ns = 3 * S;
	struct align *a = mk(&c);
	for (uint64_t t = 0; t <= 20; t++) {
		if (t <= 5 || t >= 12)
			power1(a, "h", t * S, S, t * 100000000, t * S + 1 * MS);
		usage(a, "h", t * S, 0, t * S + 2 * MS);
		align_tick(a, t * S + 500 * MS);
	}
	size_t np;
	align_nhosts(a, &np);
	CHECK_U64(np, 1);
	CHECK_U64(align_counters(a)->hosts_dropped, 1);
	/* Until the drop at 8.5 s slots are extrapolated at 100 W, then there is no power. */
	CHECK(slot_of("h", 6 * S)->q.extrapolated);
	CHECK_U64(zone_e(slot_of("h", 6 * S), "package-0"), 100000000);
	CHECK_U64(slot_of("h", 7 * S)->nz, 0);
	CHECK_U64(slot_of("h", 10 * S)->nz, 0);
	CHECK_U64(slot_of("h", 11 * S)->nz, 0);
	/* Back at 12 s with its counter continued: the first slot takes what the meter
	 * counted over the silence (6..12 s), flagged not interpolated; the run is exact. */
	CHECK_U64(zone_e(slot_of("h", 12 * S), "package-0"), 600000000);
	CHECK(!slot_of("h", 12 * S)->q.interpolated);
	CHECK_U64(zone_e(slot_of("h", 13 * S), "package-0"), 100000000);
	CHECK(slot_of("h", 13 * S)->q.interpolated);
	CHECK_U64(sum_of("h", "package-0"), 2000000000);
	align_destroy(&a);
}

/*
 * A producer that renames its zones (or two producers under one host name):
 * the power host keeps at most ALIGN_ZONES_MAX curves, evicting the least
 * recently updated, so every slot encodes and the steady zone stays exact.
 */
static void zones_per_power_host_are_bounded(void)
{
	struct align_conf c = base_conf();
	struct align *a = mk(&c);
	size_t max_nz = 0;
	for (uint64_t k = 0; k <= 400; k++) {
		uint64_t t = k * 100 * MS;
		char renamed[32];
		snprintf(renamed, sizeof(renamed), "r%llu", (unsigned long long)k);
		struct zone_in z[2] = {{"package-0", t / 10, 0}, {renamed, t / 20, 0}};
		power(a, "h", 1, t, 100 * MS, z, 2, t + 1 * MS);
		if (k % 10 == 0)
			usage(a, "h", t, 0, t + 2 * MS);
		align_tick(a, t + 3 * MS);
	}
	for (size_t i = 0; i < ngot; i++)
		if (got[i].nz > max_nz)
			max_nz = got[i].nz;
	CHECK_U64(ngot, 40);
	CHECK(max_nz <= ALIGN_ZONES_MAX);
	CHECK_U64(align_counters(a)->power_zones_evicted, 401 + 1 - ALIGN_ZONES_MAX);
	/* The zone present all along is never the one evicted: 100 W for 40 s. */
	CHECK_U64(sum_of("h", "package-0"), 4000000000ull);
	align_destroy(&a);
}

/*
 * powerd away longer than host_timeout while the real load drops from 100 W to
 * 10 W: the slots extrapolated at 100 W before the drop overshoot, the meter
 * keeps counting, and when powerd comes back (same counter, or restarted and
 * bridged) the first slot pays the overshoot back from the bridged energy, so
 * the run sums exactly to what the meter counted.
 */
static void power_away_past_timeout_sums_exactly(void)
{
	static const uint64_t outages[] = {30, 61, 120};
	for (size_t k = 0; k < sizeof(outages) / sizeof(outages[0]); k++) {
		uint64_t out = outages[k], back = 10 + out, end = back + 20;
		uint64_t epoch_back = k == 2 ? 2 : 1; /* 120 s: powerd restarted, bridged */
		struct align_conf c = base_conf();
		struct align *a = mk(&c);
		struct pw p = {0};
		pw_add(&p, 0, 100);
		pw_add(&p, 10 * S, 10);
		for (uint64_t t = 0; t <= end; t++) {
			if (t <= 10 || t >= back) {
				struct zone_in z = {"package-0", 7000 + pw_e(&p, t * S), RANGE};
				power(a, "h", t >= back ? epoch_back : 1, t * S, S, &z, 1,
				      t * S + 1 * MS);
			}
			usage(a, "h", t * S, 0, t * S + 2 * MS);
			align_tick(a, t * S + 500 * MS);
		}
		align_flush(a, end * S + S);
		CHECK_U64(ngot, end);
		CHECK_U64(sum_of("h", "package-0"), pw_e(&p, end * S));
		CHECK_U64(zone_e(slot_of("h", end * S), "package-0"), 10000000);
		align_destroy(&a);
	}
}

static void pending_is_bounded(void)
{
	struct align_conf c = base_conf();
	c.max_pending = 3;
	c.max_lag_ns = 3600 * S;
	struct align *a = mk(&c);
	power1(a, "h", 0, S, 0, 1 * MS);
	power1(a, "h", 1 * S, S, 1000000, S + 1 * MS);
	for (uint64_t t = 1; t <= 10; t++)
		usage(a, "h", t * S, 0, t * S + 2 * MS);
	/* 9 slots: at most 3 wait, the older ones went out extrapolated. */
	CHECK_U64(ngot, 6);
	CHECK_U64(align_counters(a)->slots_forced, 6);
	align_flush(a, 11 * S);
	CHECK_U64(ngot, 9);
	/* Extrapolated up to 4 power intervals past the last sample (slots to 5 s); later
	 * ones go without zones rather than guess. */
	CHECK_U64(sum_of("h", "package-0"), 4000000);
	CHECK_U64(slot_of("h", 6 * S)->nz, 0);
	CHECK_U64(slot_of("h", 10 * S)->nz, 0);
	align_destroy(&a);

	/* One waiting slot at most: forcing the only one out empties the queue (the fuzzer's find).
	 */
	c.max_pending = 1;
	a = mk(&c);
	power1(a, "h", 0, S, 0, 1 * MS);
	power1(a, "h", 1 * S, S, 1000000, S + 1 * MS);
	for (uint64_t t = 1; t <= 5; t++)
		usage(a, "h", t * S, 0, t * S + 2 * MS);
	CHECK_U64(ngot, 3);
	align_flush(a, 6 * S);
	CHECK_U64(ngot, 4);
	align_tick(a, 7 * S);
	align_flush(a, 8 * S);
	CHECK_U64(ngot, 4);
	align_destroy(&a);
}

static void stale_and_skew(void)
{
	struct align_conf c = base_conf();
	c.max_skew_ns = 2 * S;
	struct align *a = mk(&c);
	power1(a, "h", 10 * S, S, 100, 10 * S);
	power1(a, "h", 9 * S, S, 50, 10 * S);	/* older than the last */
	power1(a, "h", 20 * S, S, 100, 30 * S); /* arrives 10 s late */
	usage(a, "h", 20 * S, 0, 20 * S);
	usage(a, "h", 20 * S, 0, 20 * S);
	CHECK_U64(align_counters(a)->power_stale, 1);
	CHECK_U64(align_counters(a)->usage_stale, 1);
	CHECK_U64(align_counters(a)->clock_skew, 1);
	align_destroy(&a);
}

/*
 * powerd stamps its samples on the grid, usaged stamps when it read (a little
 * after): slots end just past the last power sample. Within snap they go out
 * at once, measured, with that sample's value: never ahead of the meter, which
 * may stop right there (it did at a stage restart's end: the extrapolated span
 * was counted once too often); the next slot gets the span.
 */
static void snap_to_the_last_sample(void)
{
	struct align_conf c = base_conf();
	c.snap_ns = 5 * MS;
	struct align *a = mk(&c);
	struct pw p = {0};
	for (uint64_t k = 0; k <= 10; k++)
		pw_add(&p, k * S, 100 + 10 * k);
	for (uint64_t t = 0; t <= 10; t++) {
		power1(a, "h", t * S, S, pw_e(&p, t * S), t * S + 1 * MS);
		uint64_t tu = t * S + 60000 + t * 100000; /* 60 us .. 1.06 ms late */
		usage(a, "h", tu, 0, tu + 1 * MS);
		if (t > 0) {
			struct got *g = slot_of("h", tu);
			CHECK(g != NULL); /* out at once, not a power interval later */
			if (!g)
				continue;
			CHECK(!g->q.extrapolated && g->q.interpolated);
			CHECK_U64(g->q.lag_ns, 0);
			CHECK(g->q.coverage < 1.0 && g->q.coverage > 0.998);
			/* The energy up to the sample on the grid. */
			CHECK_U64(zone_e(g, "package-0"),
				  pw_e(&p, t * S) - pw_e(&p, t == 1 ? 60000 : (t - 1) * S));
		}
	}
	/* Exact up to the last sample: nothing handed out that the meter did not count. */
	CHECK_U64(sum_of("h", "package-0"), pw_e(&p, 10 * S) - pw_e(&p, 60000));
	/* The meter stands still from here: the run still sums to its advance. */
	power1(a, "h", 11 * S, S, pw_e(&p, 10 * S), 11 * S + 1 * MS);
	usage(a, "h", 11 * S + 2 * MS, 0, 11 * S + 3 * MS);
	CHECK_U64(sum_of("h", "package-0"), pw_e(&p, 10 * S) - pw_e(&p, 60000));
	/* Beyond snap the slot waits as before. */
	usage(a, "h", 12 * S + 6 * MS, 0, 12 * S + 7 * MS);
	CHECK(slot_of("h", 12 * S + 6 * MS) == NULL);
	align_destroy(&a);
}

/* alignd stops cleanly and starts again: the saved state makes the run continue exactly. */
static void restart_of_alignd_itself(void)
{
	char path[256];
	unit_tmpfile(path, sizeof(path), "alignd-state-XXXXXX");
	struct align_conf c = base_conf();
	struct align *a = mk(&c);
	struct pw p = {0};
	pw_add(&p, 0, 100);
	pw_add(&p, 5 * S + 500 * MS, 300);
	for (uint64_t t = 0; t <= 5; t++) {
		power1(a, "h", t * S, S, 42 + pw_e(&p, t * S), t * S + 1 * MS);
		usage(a, "h", t * S, 0, t * S + 2 * MS);
	}
	usage(a, "h", 6 * S, 0, 6 * S + 2 * MS); /* waits for power at 6 s: flushed at the stop */
	align_flush(a, 6 * S + 10 * MS);
	CHECK(align_save(a, path, 6 * S + 10 * MS, true) == 0);
	align_destroy(&a);
	CHECK_U64(ngot, 6);
	uint64_t first_run = sum_of("h", "package-0");
	uint64_t n_first = ngot;

	a = align_new(&c, collect, NULL);
	CHECK(align_load(a, path, 9 * S, 60 * S) == 0);
	/* Down 6..9 s: the next slot spans the restart, and corrects the extrapolated one. */
	for (uint64_t t = 9; t <= 12; t++) {
		power1(a, "h", t * S, S, 42 + pw_e(&p, t * S), t * S + 1 * MS);
		usage(a, "h", t * S, 0, t * S + 2 * MS);
	}
	CHECK_U64(ngot - n_first, 4);
	struct got *g = slot_of("h", 9 * S);
	CHECK(g && g->t0 == 6 * S);
	/* Both runs together: exactly E(12) - E(0). */
	CHECK(first_run < pw_e(&p, 6 * S)); /* the flushed slot was extrapolated low */
	CHECK_U64(sum_of("h", "package-0"), pw_e(&p, 12 * S));
	align_destroy(&a);

	/* A state older than the limit is not used. */
	a = align_new(&c, collect, NULL);
	CHECK(align_save(a, path, 1 * S, true) == 0);
	CHECK(align_load(a, path, 100 * S, 60 * S) < 0);
	align_destroy(&a);
	unlink(path);
}

static uint64_t zone_total(const struct got *g, const char *zone)
{
	for (size_t i = 0; g && i < g->nz; i++)
		if (strcmp(g->zname[i], zone) == 0)
			return g->total[i];
	return UINT64_MAX;
}

/*
 * Node energy as estimd reads it from the slots it receives (schemas/README.md):
 * a slot not after the last one adds nothing; within one total_epoch the
 * difference of total_uj (lost slots included); otherwise the slot's energy.
 * keep(i) says whether slot i was received.
 */
static uint64_t consumer_energy(const char *zone, bool (*keep)(size_t i))
{
	uint64_t sum = 0, last_t1 = 0, epoch = 0, prev = 0;
	bool have = false;
	for (size_t i = 0; i < ngot; i++) {
		if (keep && !keep(i))
			continue;
		const struct got *g = &got[i];
		uint64_t e = zone_e(g, zone), tot = zone_total(g, zone);
		if (e == UINT64_MAX || (have && g->t1 <= last_t1))
			continue;
		if (have && g->total_epoch == epoch && tot >= prev)
			sum += tot - prev;
		else
			sum += e;
		have = true;
		last_t1 = g->t1;
		epoch = g->total_epoch;
		prev = tot;
	}
	return sum;
}

static bool every_third_lost(size_t i)
{
	return i % 3 != 2; /* the last one (19) arrives */
}

/* total_uj counts what the host's slots were given; a consumer that misses slots still gets all. */
static void totals_cumulative(void)
{
	struct align_conf c = base_conf();
	struct align *a = mk(&c);
	struct pw p = {0};
	for (uint64_t k = 0; k < 21; k++)
		pw_add(&p, k * S, 40 + (k * 53) % 70);
	for (uint64_t k = 0; k <= 20; k++) {
		power1(a, "h", k * S, S, 7777 + pw_e(&p, k * S), k * S + 1 * MS);
		usage(a, "h", k * S, 0, k * S + 2 * MS);
	}
	CHECK_U64(ngot, 20);
	uint64_t run = 0;
	for (size_t i = 0; i < ngot; i++) {
		run += zone_e(&got[i], "package-0");
		CHECK_U64(zone_total(&got[i], "package-0"), run);
		CHECK(got[i].total_epoch != 0 && got[i].total_epoch == got[0].total_epoch);
	}
	CHECK_U64(run, pw_e(&p, 20 * S));
	/* Every third slot lost: the differences of the totals still give all of it. */
	CHECK_U64(consumer_energy("package-0", every_third_lost), pw_e(&p, 20 * S));
	/* A second host gets a total_epoch of its own. */
	usage(a, "h2", 20 * S, 0, 20 * S + 3 * MS);
	usage(a, "h2", 21 * S, 0, 21 * S + 3 * MS);
	CHECK(ngot == 21 && got[20].total_epoch && got[20].total_epoch != got[0].total_epoch);
	align_destroy(&a);
}

/*
 * alignd killed (no clean stop): the last checkpoint, taken while a slot was
 * waiting for power, carries the run on. Slots published after it come again;
 * a consumer following the totals counts every microjoule exactly once.
 */
static void crash_resumes_from_checkpoint(void)
{
	char path[256];
	unit_tmpfile(path, sizeof(path), "alignd-ckpt-XXXXXX");
	struct align_conf c = base_conf();
	struct align *a = mk(&c);
	struct pw p = {0};
	pw_add(&p, 0, 100);
	pw_add(&p, 4 * S + 300 * MS, 250);
	pw_add(&p, 9 * S + 700 * MS, 60);
	for (uint64_t t = 0; t <= 4; t++) {
		power1(a, "h", t * S, S, 5000 + pw_e(&p, t * S), t * S + 1 * MS);
		usage(a, "h", t * S, 0, t * S + 2 * MS);
	}
	usage(a, "h", 5 * S, 0, 5 * S + 2 * MS); /* [4 s, 5 s] waits for power at 5 s */
	CHECK(align_save(a, path, 5 * S + 10 * MS, true) == 0);
	uint64_t n_ckpt = ngot;
	CHECK_U64(n_ckpt, 4);
	/* Published after the checkpoint, then killed: no flush, no save. */
	for (uint64_t t = 5; t <= 7; t++) {
		power1(a, "h", t * S, S, 5000 + pw_e(&p, t * S), t * S + 1 * MS);
		if (t > 5)
			usage(a, "h", t * S, 0, t * S + 2 * MS);
	}
	CHECK_U64(ngot, 7); /* up to [6 s, 7 s] */
	uint64_t epoch = got[0].total_epoch;
	align_destroy(&a);

	a = align_new(&c, collect, NULL);
	CHECK(align_load(a, path, 9 * S, 60 * S) == 0);
	for (uint64_t t = 9; t <= 14; t++) {
		power1(a, "h", t * S, S, 5000 + pw_e(&p, t * S), t * S + 1 * MS);
		usage(a, "h", t * S, 0, t * S + 2 * MS);
	}
	struct got *g = slot_of("h", 9 * S);
	CHECK(g != NULL);
	if (g) {
		/* From the checkpoint's boundary: the slot that was waiting, and the downtime. */
		CHECK_U64(g->t0, 4 * S);
		CHECK_U64(g->total_epoch, epoch);
		CHECK_U64(zone_total(g, "package-0"), pw_e(&p, 9 * S));
	}
	/* The totals of the second run continue those of the first: exactly E(14) - E(0). */
	CHECK_U64(zone_total(&got[ngot - 1], "package-0"), pw_e(&p, 14 * S));
	CHECK_U64(consumer_energy("package-0", NULL), pw_e(&p, 14 * S));
	align_destroy(&a);
	unlink(path);
}

/* A usage message of host with n processes (pids from pid0), cumulative CPU growing with t. */
static void usage_many(struct align *a, const char *host, uint64_t t, uint64_t pid0, size_t n)
{
	struct wb_proc *procs = calloc(n, sizeof(*procs));
	CHECK(procs != NULL);
	if (!procs)
		return;
	for (size_t i = 0; i < n; i++)
		procs[i] = (struct wb_proc){.pid = pid0 + i, .start_ns = 1, .cpu_ns = t / 1000 + i};
	struct wb_usage u = {.t = t, .interval_ns = S, .ncpu = 1, .procs = procs, .n_procs = n};
	snprintf(u.env.host, sizeof(u.env.host), "%s", host);
	u.env.epoch = 1;
	u.cpu.user_ns = t / 2;
	u.cpu.idle_ns = t / 2;
	align_usage(a, &u, 0, t + 1 * MS);
	free(procs);
}

/*
 * Many hosts (forged names) each with a large process table: what they hold
 * together stays within the budget, the hosts beyond it are refused and
 * counted, and a host tracked before keeps its slots and its table.
 */
static void budget_across_hosts(void)
{
	struct align_conf c = base_conf();
	c.max_hosts = 1000;
	c.max_procs = 100000;
	c.budget_bytes = 8u << 20;
	struct align *a = mk(&c);
	for (uint64_t t = 0; t <= 2; t++) {
		power1(a, "good", t * S, S, 1000 + 50 * t * 1000000, t * S + 1 * MS);
		usage_many(a, "good", t * S, 100, 500);
	}
	CHECK_U64(ngot, 2);
	size_t before = align_budget_used(a);
	CHECK(before > 0 && before < (1u << 20));
	/* 100 hosts of 50,000 processes: about 6 MiB of table each, 600 MiB without a budget. */
	for (int h = 0; h < 100; h++) {
		char name[32];
		snprintf(name, sizeof(name), "forged%d", h);
		usage_many(a, name, 2 * S + 10 * MS, 1000, 50000);
		CHECK(align_budget_used(a) <= c.budget_bytes);
	}
	CHECK(align_counters(a)->budget_refused >= 99);
	size_t npower;
	CHECK(align_nhosts(a, &npower) <= 2);
	/* The host tracked before goes on: slots with all its processes. */
	for (uint64_t t = 3; t <= 5; t++) {
		power1(a, "good", t * S, S, 1000 + 50 * t * 1000000, t * S + 1 * MS);
		usage_many(a, "good", t * S, 100, 500);
		struct got *g = slot_of("good", t * S);
		CHECK(g != NULL);
		if (g)
			CHECK_U64(zone_e(g, "package-0"), 50 * 1000000);
	}
	CHECK_U64(align_counters(a)->usage.procs_dropped, 0);
	CHECK(align_budget_used(a) <= c.budget_bytes);
	align_destroy(&a);
}

/* One usage frame at 2^63-1 (valid for the schema) must not stop other hosts' totals. */
static void poisoned_total_epoch(void)
{
	struct align_conf c = base_conf();
	struct align *a = mk(&c);
	usage(a, "evil", (uint64_t)INT64_MAX, 0, 10 * S);
	for (uint64_t t = 10; t <= 13; t++) {
		power1(a, "h2", t * S, S, t * 1000000, t * S);
		usage(a, "h2", t * S, 0, t * S);
	}
	align_tick(a, 20 * S);
	CHECK(ngot >= 3);
	for (size_t i = 0; i < ngot; i++)
		CHECK(got[i].total_epoch > 0 && got[i].total_epoch <= (uint64_t)INT64_MAX);
	align_destroy(&a);
}

/* A bridge across a counter range near 2^63 must not take E (and the totals) past the wire. */
static void huge_range_bridge(double bridge_max_w)
{
	struct align_conf c = base_conf();
	c.bridge_max_w = bridge_max_w;
	struct align *a = mk(&c);
	const uint64_t range = (uint64_t)INT64_MAX;
	struct zone_in z = {"package-0", 1000, range};
	for (uint64_t t = 10; t <= 12; t++) {
		z.energy_uj = 1000 + (t - 10) * 1000000;
		power(a, "h", 1, t * S, S, &z, 1, t * S);
		usage(a, "h", t * S, 0, t * S);
	}
	/* a new epoch claiming the counter jumped by almost 2^63 */
	for (uint64_t t = 13; t <= 16; t++) {
		z.energy_uj = range - 5000000 + (t - 13) * 1000000;
		power(a, "h", 2, t * S, S, &z, 1, t * S);
		usage(a, "h", t * S, 0, t * S);
	}
	/* and again, to the top of the range */
	for (uint64_t t = 17; t <= 19; t++) {
		z.energy_uj = range - (19 - t);
		power(a, "h", 3, t * S, S, &z, 1, t * S);
		usage(a, "h", t * S, 0, t * S);
	}
	align_tick(a, 30 * S);
	CHECK(ngot >= 8); /* collect() checks every slot encodes */
	for (size_t i = 0; i < ngot; i++) {
		CHECK(got[i].total[0] <= (uint64_t)INT64_MAX);
		/* with the default bound (a zone's plausible maximum) no bridge gives more */
		if (bridge_max_w > 0)
			CHECK(got[i].e[0] <= (uint64_t)(bridge_max_w * 1e6));
	}
	align_destroy(&a);
}

static void huge_range_bridge_stays_encodable(void)
{
	huge_range_bridge(0);
	huge_range_bridge(WB_ZONE_MAX_W);
}

/* Usage samples further apart than max_slot give no slot: a new baseline, counted. */
static void slot_longer_than_max_slot(void)
{
	struct align_conf c = base_conf();
	c.max_slot_ns = 10 * S;
	c.host_timeout_ns = 3600 * S;
	struct align *a = mk(&c);
	for (uint64_t t = 10; t <= 40; t++)
		power1(a, "h", t * S, S, t * 1000000, t * S);
	usage(a, "h", 10 * S, 0, 10 * S);
	usage(a, "h", 11 * S, 0, 11 * S);
	usage(a, "h", 30 * S, 0, 30 * S);
	usage(a, "h", 31 * S, 0, 31 * S);
	align_tick(a, 40 * S);
	CHECK_U64(align_counters(a)->slots_too_long, 1);
	CHECK_U64(ngot, 2);
	CHECK(slot_of("h", 11 * S) && !slot_of("h", 30 * S) && slot_of("h", 31 * S));
	CHECK_U64(zone_e(slot_of("h", 31 * S), "package-0"), 1000000);
	align_destroy(&a);
}

/* One sample of each stream stamped a minute ahead (a clock jump set right at once): after
 * WB_REWIND_SAMPLES samples behind it the host's time line continues, counted; energy stays exact.
 */
static void clock_jump_recovers(void)
{
	struct align_conf c = base_conf();
	struct align *a = mk(&c);
	for (uint64_t t = 10; t <= 14; t++) {
		power1(a, "h", t * S, S, t * 1000000, t * S);
		usage(a, "h", t * S, 0, t * S);
	}
	power1(a, "h", 74 * S, S, 15 * 1000000, 15 * S); /* read at 15 s, stamped 74 s */
	usage(a, "h", 74 * S, 0, 15 * S);
	align_tick(a, 20 * S); /* the slot ending at 74 s goes out extrapolated */
	for (uint64_t t = 16; t <= 30; t++) {
		power1(a, "h", t * S, S, t * 1000000, t * S);
		usage(a, "h", t * S, 0, t * S);
	}
	align_tick(a, 31 * S);
	CHECK_U64(align_counters(a)->clock_rewinds, 2);
	CHECK(align_counters(a)->power_stale <= WB_REWIND_SAMPLES);
	/* from the new baseline on, every slot exact at 1 W */
	for (uint64_t t = 20; t <= 30; t++) {
		struct got *g = slot_of("h", t * S);
		CHECK(g != NULL);
		if (g)
			CHECK_U64(zone_e(g, "package-0"), 1000000);
	}
	align_destroy(&a);
}

/* alignd sweeps at every message (align_sweep): once a second is due, not before; the timer's
 * deadline for the sweep follows the last one. */
static void sweep_rides_on_messages(void)
{
	struct align_conf c = base_conf();
	struct align *a = mk(&c);
	CHECK_U64(align_next_tick_ns(a), 3 * S);
	align_sweep(a, 999 * MS); /* not due */
	CHECK_U64(align_next_tick_ns(a), 3 * S);
	align_sweep(a, 1 * S + 5 * MS);
	CHECK_U64(align_next_tick_ns(a), 4 * S + 5 * MS);
	align_sweep(a, 2 * S); /* not a second since the last */
	CHECK_U64(align_next_tick_ns(a), 4 * S + 5 * MS);
	align_destroy(&a);
}

/* alignd's timer: a deadline that moved later moves it; a slot already due, seen again at each
 * message, does not push it a tick further each time. */
static void timer_follows_the_deadline(void)
{
	/* due since 0, armed at 120 ms (tick 20 ms after a message at 100 ms), a message at 110 ms
	 */
	CHECK(align_timer_keeps(120 * MS, 0, 130 * MS));
	/* the sweep's deadline moved from 2 s to 3 s: armed at 2 s, it would wake alignd for
	 * nothing */
	CHECK(!align_timer_keeps(2 * S, 3 * S, 3 * S));
	/* a slot now waits until 3 s, armed at 5 s: too late */
	CHECK(!align_timer_keeps(5 * S, 3 * S, 3 * S));
	/* within zloop's millisecond */
	CHECK(align_timer_keeps(3 * S + MS / 2, 3 * S, 3 * S));
	CHECK(align_timer_keeps(3 * S - MS / 2, 3 * S, 3 * S));
}

/* alignd sleeps until align_next_tick_ns: a slot waiting for power is due at its wait's end, not
 * before. */
static void next_tick_is_the_wait_for_power(void)
{
	struct align_conf c = base_conf();
	struct align *a = mk(&c);
	power1(a, "h", 0, S, 1000000, 1 * MS);
	usage(a, "h", 0, 0, 2 * MS);
	align_tick(a, 3 * MS);
	/* Nothing waits: the first sweep, due at a tick from 1 s on (alignd ticks at every
	 * message), and from the timer 2 s later, in a silence. */
	CHECK_U64(align_next_tick_ns(a), 3 * S);
	usage(a, "h", 1 * S, 0, 1 * S + 2 * MS); /* [0, 1 s] waits for power at or after 1 s */
	align_tick(a, 1 * S + 3 * MS);		 /* sweeps; the slot still waits */
	CHECK_U64(ngot, 0);
	CHECK_U64(align_next_tick_ns(a), 3 * S + 2 * MS); /* received + 2 power intervals */
	align_tick(a, 2 * S + 3 * MS);			  /* sweeps */
	CHECK_U64(align_next_tick_ns(a), 3 * S + 2 * MS);
	align_tick(a, 3 * S + 2 * MS - 1); /* no sweep: not 1 s since the last */
	CHECK_U64(ngot, 0);
	align_tick(a, 3 * S + 2 * MS);
	CHECK_U64(ngot, 1);
	CHECK_U64(align_next_tick_ns(a),
		  5 * S + 3 * MS); /* nothing waits: the sweep at 2.003 s + 3 s */
	/* Power in time resolves the slot at once: no deadline is left for it. */
	usage(a, "h", 2 * S, 0, 3 * S + 4 * MS);
	CHECK_U64(align_next_tick_ns(a), 5 * S + 3 * MS);
	CHECK_U64(ngot, 1);
	power1(a, "h", 3 * S, S, 4000000, 3 * S + 5 * MS);
	CHECK_U64(ngot, 2);
	align_destroy(&a);
}

static const struct unit_case cases[] = {
    {"a one-sample clock jump recovers after a few samples", clock_jump_recovers},
    {"a usage frame at 2^63-1 does not poison total epochs", poisoned_total_epoch},
    {"a bridge across a range near 2^63 stays encodable", huge_range_bridge_stays_encodable},
    {"a span longer than max_slot is no slot", slot_longer_than_max_slot},
    {"power 1 s, usage 3 s", power_1s_usage_3s},
    {"power 5 s, usage 1 s", power_5s_usage_1s},
    {"jittered sampling", jittered},
    {"power 100 ms, usage 1 s", power_denser},
    {"lost power: extrapolated, then corrected", lost_power_extrapolated_then_corrected},
    {"an extrapolation overshoot is held back", extrapolation_overshoot_held_back},
    {"powerd restart bridged", restart_bridged},
    {"counter reset: gap flagged", restart_discontinuity},
    {"usage without power", usage_without_power},
    {"two hosts and a host map", two_hosts_and_a_map},
    {"usage host timeout and return", usage_host_timeout_and_back},
    {"power host timeout and return", power_host_timeout_and_back},
    {"waiting slots are bounded", pending_is_bounded},
    {"stale samples and clock skew counted", stale_and_skew},
    {"alignd restarts without losing energy", restart_of_alignd_itself},
    {"a slot end within snap of the last sample", snap_to_the_last_sample},
    {"totals are cumulative; lost slots recovered from them", totals_cumulative},
    {"a crash resumes from the last checkpoint", crash_resumes_from_checkpoint},
    {"zones per power host are bounded", zones_per_power_host_are_bounded},
    {"power away past host_timeout: the run sums exactly", power_away_past_timeout_sums_exactly},
    {"a memory budget across hosts", budget_across_hosts},
    {"the next tick is a waiting slot's deadline or the sweep", next_tick_is_the_wait_for_power},
    {"the sweep rides on the messages, once a second", sweep_rides_on_messages},
    {"the timer follows the deadline, not each message's tick", timer_follows_the_deadline},
};

UNIT_MAIN(cases)
