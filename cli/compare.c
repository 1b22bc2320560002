/*
 * wattbus compare: verify one meter against another. Two power streams (two
 * zones, or two hosts), live from the bus or from a recording, are put into
 * common slots with alignd's own curves (alignd/curve.c: exact interpolation,
 * restarts bridged, gaps kept) and compared: lag by cross-correlation, gain
 * and offset by a linear fit, R², MAE and MAPE, and what each side dropped.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include <jansson.h>

#include "bus.h"
#include "cli.h"
#include "clock.h"
#include "codec.h"
#include "grow.h"
#include "log.h"
#include "../alignd/alignd.h"

#define CMP_MAX_SAMPLES (1u << 22) /* a day of 20 ms samples */

struct side {
	const char *spec;
	char host[64], zone[64]; /* wanted; host "" takes the first host with the zone */
	char kind[16], source[16];
	struct curve *c;
	uint64_t messages, lost, discontinuities, bridged, stale;
	double *lag_s; /* per message: receive time minus sample time */
	size_t nlag, lagcap;
	double spacing_s; /* median sample spacing, once the curve is complete (analyze) */
};

/* How well B follows A over slots [i0, i1). */
struct agree {
	size_t i0, i1, n; /* n: slots with both meters */
	bool lag_known;
	double lag_s, lag_r;	  /* B follows A by lag_s; the correlation there */
	struct lin_fit fit, fit0; /* B against A at that lag, and at lag 0 */
	double mae_w, mape_pct, bias_w;
	uint64_t missing_a, missing_b;
};

struct cmp {
	struct side s[2];
	struct wb_seqtrack *seq;
	uint64_t rejected;
	uint64_t slot_ns, max_lag_ns;
	uint64_t window_ns; /* 0: no per-window report */
	/* results */
	size_t nslots;
	int coarse;	   /* the side whose sample times are the slot edges (analyze) */
	uint64_t e0_ns;	   /* its first slot's start */
	double *coarse_w;  /* its slot powers, the same at every lag */
	uint64_t t0_ns;	   /* A's first slot's start */
	double *a_w, *b_w; /* per slot at the overall lag; NAN where missing */
	struct agree all;
	struct agree *win;
	size_t nwin;
};

static int parse_spec(struct side *s, const char *spec)
{
	s->spec = spec;
	const char *slash = strchr(spec, '/');
	const char *zone = slash ? slash + 1 : spec;
	size_t hlen = slash ? (size_t)(slash - spec) : 0;
	if (!*zone || strlen(zone) >= sizeof(s->zone) || hlen >= sizeof(s->host) ||
	    (slash && !hlen)) {
		fprintf(
		    stderr,
		    "wattbus compare: '%s' is not a power stream: give ZONE or HOST/ZONE (e.g. package-0, node1/platform)\n",
		    spec);
		return -1;
	}
	snprintf(s->zone, sizeof(s->zone), "%s", zone);
	snprintf(s->host, sizeof(s->host), "%.*s", (int)hlen, spec);
	return 0;
}

static void add_lag(struct side *s, double v)
{
	if (wb_grow(&s->lag_s, &s->lagcap, s->nlag + 1, sizeof(*s->lag_s), 256) < 0)
		return;
	s->lag_s[s->nlag++] = v;
}

/* One power message, received at recv_ns, lost: messages of its producer missed before it. */
static void feed(struct cmp *k, const struct wb_power *pw, uint64_t recv_ns, uint64_t lost)
{
	for (int i = 0; i < 2; i++) {
		struct side *s = &k->s[i];
		if (s->host[0] && strcmp(s->host, pw->env.host) != 0)
			continue;
		for (size_t z = 0; z < pw->n_zones; z++) {
			const struct wb_power_zone *wz = &pw->zones[z];
			if (strcmp(wz->name, s->zone) != 0)
				continue;
			if (!s->host[0])
				snprintf(s->host, sizeof(s->host), "%s",
					 pw->env.host); /* from now on, this host's */
			snprintf(s->kind, sizeof(s->kind), "%s", wz->zone);
			snprintf(s->source, sizeof(s->source), "%s", wz->source);
			if (s->messages)
				s->lost += lost;
			s->messages++;
			add_lag(s, recv_ns > pw->t ? (double)(recv_ns - pw->t) / 1e9 : 0);
			switch (curve_add(s->c, pw->t, pw->env.epoch, wz->energy_uj,
					  wz->max_energy_range_uj, 0, NULL)) {
			case CURVE_DISCONTINUITY:
				s->discontinuities++;
				break;
			case CURVE_BRIDGED:
				s->bridged++;
				break;
			case CURVE_STALE:
				s->stale++;
				break;
			case CURVE_NOMEM:
				log_warnx("%s: out of memory for its samples", s->spec);
				break;
			case CURVE_APPENDED:
				break;
			}
			break;
		}
	}
}

static int feed_record(uint64_t recv_ns, const char *topic, const void *body, size_t len, void *arg)
{
	struct cmp *k = arg;
	if (strncmp(topic, "power/", 6) != 0)
		return 0;
	struct wb_msg msg = {0};
	struct wb_err err;
	if (wb_frame_check(topic, body, len, &msg, &err) < 0) {
		k->rejected++;
		return 0;
	}
	struct wb_rx rx = {0};
	wb_seqtrack_see(k->seq, &msg.env, "power", &rx);
	if (!rx.duplicate && !rx.stale)
		feed(k, &msg.power, recv_ns, rx.lost);
	wb_msg_clear(&msg);
	return 0;
}

static int feed_bus(struct cmp *k, const char *endpoints, uint64_t duration_ns,
		    const struct wb_sockopts *so)
{
	static const char *const power[] = {"power/"};
	struct wb_sub *sub = cli_sub_open(endpoints, power, 1, so);
	if (!sub)
		return -1;
	uint64_t end = wb_mono_ns() + duration_ns;
	while (wb_mono_ns() < end && !cli_interrupted()) {
		if (!wb_sub_wait(sub, 100))
			continue;
		struct wb_msg msg = {0};
		struct wb_rx rx;
		struct wb_err err;
		int rc = wb_sub_recv(sub, &msg, &rx, &err, NULL);
		if (rc < 0)
			break;
		if (rc == 0) {
			k->rejected++;
			continue;
		}
		if (msg.kind == WB_POWER && !rx.duplicate && !rx.stale)
			feed(k, &msg.power, rx.recv_ns, rx.lost);
		wb_msg_clear(&msg);
	}
	wb_sub_destroy(&sub);
	return 0;
}

/* Average watts of a side over [t0, t1]: both ends inside its samples and no gap between. */
static double slot_w(const struct side *s, uint64_t t0, uint64_t t1)
{
	uint64_t e0, e1;
	if (curve_covered_ns(s->c, t0, t1) < t1 - t0)
		return NAN;
	if (curve_at(s->c, t0, &e0) != CURVE_INSIDE || curve_at(s->c, t1, &e1) != CURVE_INSIDE ||
	    e1 < e0)
		return NAN;
	return (double)(e1 - e0) / (double)(t1 - t0) * 1e3; /* uJ per ns is kW */
}

static double spacing_s(const struct curve *c)
{
	if (c->n < 2)
		return NAN;
	double *g = malloc((c->n - 1) * sizeof(*g));
	if (!g)
		return NAN;
	for (size_t i = 1; i < c->n; i++)
		g[i - 1] = (double)(c->s[i].t_ns - c->s[i - 1].t_ns) / 1e9;
	double m = series_quantile(g, c->n - 1, 0.5);
	free(g);
	return m;
}

/*
 * The slots: slot i spans [e0 + i * slot, + slot) on the coarser meter, whose edges are on its
 * sample times (as alignd puts slot edges on usage samples), so that its slot energies are read,
 * not interpolated, at every lag. The finer meter is read shifted by the lag (B follows A by lag:
 * B at A's time + lag) and interpolated within its shorter spacing. The lag search and the fit
 * read the same slots: the fit reported is the one at the lag reported, its R^2 the square of
 * the correlation there (they were read on two grids, and disagreed).
 */
static double fine_w(const struct cmp *k, size_t i, int64_t lag_ns)
{
	int64_t e = (int64_t)(k->e0_ns + i * k->slot_ns);
	int64_t t = k->coarse ? e - lag_ns : e + lag_ns;
	return slot_w(&k->s[!k->coarse], (uint64_t)t, (uint64_t)t + k->slot_ns);
}

/*
 * A's and B's slot powers at lag_ns over slots [i0, i1): into a[i] and b[i] when a is not NULL,
 * and the slots where both are known into xa, xb; returns how many those are.
 */
static size_t slot_pairs(const struct cmp *k, size_t i0, size_t i1, int64_t lag_ns, double *a,
			 double *b, double *xa, double *xb)
{
	size_t n = 0;
	for (size_t i = i0; i < i1; i++) {
		double pc = k->coarse_w[i], pf = isfinite(pc) || a ? fine_w(k, i, lag_ns) : NAN;
		double pa = k->coarse ? pf : pc, pb = k->coarse ? pc : pf;
		if (a) {
			a[i] = pa;
			b[i] = pb;
		}
		if (isfinite(pa) && isfinite(pb)) {
			xa[n] = pa;
			xb[n] = pb;
			n++;
		}
	}
	return n;
}

/*
 * Correlations closer than this share of what the best leaves unexplained (1 - r) are one: at a
 * finer step than the meters resolve, neighbouring lags differ by the noise of an interpolation,
 * which grows with what the fit does not explain, and the lag nearest 0 is the one to report.
 */
#define LAG_TIE_SHARE 0.1
/*
 * The lag where B follows A best over slots [i0, i1): the correlation at each lag from
 * -max_lag to +max_lag in steps of step_ns; of those within LAG_TIE_SHARE of (1 - the best), the
 * lag nearest 0 (so that two zones of one message, read at the same instants, show lag 0). Returns
 * that lag in ns (0, and lag_known false, when nothing varies).
 */
static int64_t find_lag(const struct cmp *k, size_t i0, size_t i1, int64_t step_ns, double *xa,
			double *xb, struct agree *g)
{
	size_t nlags = 2 * (size_t)(k->max_lag_ns / (uint64_t)step_ns) + 1;
	double *r = malloc(nlags * sizeof(*r));
	int64_t lag0 = -(int64_t)(k->max_lag_ns / (uint64_t)step_ns) * step_ns;
	double best_r = -INFINITY;
	for (size_t j = 0; r && j < nlags; j++) {
		size_t n = slot_pairs(k, i0, i1, lag0 + (int64_t)j * step_ns, NULL, NULL, xa, xb);
		r[j] = n >= 3 ? correlation(xa, xb, n) : NAN;
		if (isfinite(r[j]) && r[j] > best_r)
			best_r = r[j];
	}
	int64_t best = 0;
	double r_best = NAN;
	g->lag_known = r && isfinite(best_r);
	for (size_t j = 0; g->lag_known && j < nlags; j++) {
		int64_t lag = lag0 + (int64_t)j * step_ns;
		if (isfinite(r[j]) && r[j] >= best_r - LAG_TIE_SHARE * (1 - best_r) &&
		    (!isfinite(r_best) || llabs(lag) < llabs(best))) {
			best = lag;
			r_best = r[j];
		}
	}
	free(r);
	g->lag_s = (double)best / 1e9;
	g->lag_r = g->lag_known ? r_best : NAN;
	return best;
}

/*
 * The fit and the errors of B against A over slots [i0, i1) at lag_ns (the lag g reports), and
 * the fit at lag 0 on the same slots; each slot's powers into a[i], b[i] when a is not NULL.
 */
static void agree_at(const struct cmp *k, size_t i0, size_t i1, int64_t lag_ns, double *a,
		     double *b, double *xa, double *xb, struct agree *g)
{
	g->i0 = i0;
	g->i1 = i1;
	fit_linear(xa, xb, slot_pairs(k, i0, i1, 0, NULL, NULL, xa, xb), &g->fit0);
	size_t n = 0;
	g->missing_a = g->missing_b = 0;
	for (size_t i = i0; i < i1; i++) {
		double pc = k->coarse_w[i], pf = fine_w(k, i, lag_ns);
		double pa = k->coarse ? pf : pc, pb = k->coarse ? pc : pf;
		if (a) {
			a[i] = pa;
			b[i] = pb;
		}
		g->missing_a += !isfinite(pa);
		g->missing_b += !isfinite(pb);
		if (isfinite(pa) && isfinite(pb)) {
			xa[n] = pa;
			xb[n] = pb;
			n++;
		}
	}
	g->n = n;
	fit_linear(xa, xb, n, &g->fit);
	double ae = 0, ape = 0, bias = 0;
	size_t npct = 0;
	for (size_t i = 0; i < n; i++) {
		ae += fabs(xb[i] - xa[i]);
		bias += xb[i] - xa[i];
		if (xa[i] > 0) {
			ape += fabs(xb[i] - xa[i]) / xa[i];
			npct++;
		}
	}
	g->mae_w = n ? ae / (double)n : NAN;
	g->bias_w = n ? bias / (double)n : NAN;
	g->mape_pct = npct ? 100 * ape / (double)npct : NAN;
}

static int analyze(struct cmp *k)
{
	const struct curve *ca = k->s[0].c, *cb = k->s[1].c;
	if (ca->n < 2 || cb->n < 2)
		return -1;
	/* each is a median over every sample: computed once */
	double spa = k->s[0].spacing_s = spacing_s(ca), spb = k->s[1].spacing_s = spacing_s(cb);
	if (!k->slot_ns) {
		/* Four samples of the coarser meter: interpolation at the edges then moves little.
		 */
		double sp = fmax(spa, spb);
		k->slot_ns = (uint64_t)ceil(4 * sp * 1e3) * WB_NS_PER_MS;
		if (!k->slot_ns)
			k->slot_ns = WB_NS_PER_MS;
	}
	uint64_t from = ca->s[0].t_ns > cb->s[0].t_ns ? ca->s[0].t_ns : cb->s[0].t_ns;
	uint64_t to = ca->s[ca->n - 1].t_ns < cb->s[cb->n - 1].t_ns ? ca->s[ca->n - 1].t_ns
								    : cb->s[cb->n - 1].t_ns;
	if (to <= from || to - from < 4 * k->slot_ns)
		return -1;
	if (!k->max_lag_ns)
		k->max_lag_ns = (uint64_t)(10 * fmax(spa, spb) * 1e9);
	if (k->max_lag_ns > (to - from) / 4)
		k->max_lag_ns = (to - from) / 4;
	/* Slot edges on the coarser meter's sample times, within [from + max_lag, to - max_lag]:
	 * the finer one is read up to max_lag either side of each slot. */
	k->coarse = spb >= spa;
	uint64_t start = from + k->max_lag_ns, stop = to - k->max_lag_ns;
	uint64_t phase = k->s[k->coarse].c->s[0].t_ns % k->slot_ns;
	uint64_t e0 = start - start % k->slot_ns + phase;
	if (e0 < start)
		e0 += k->slot_ns;
	k->e0_ns = e0;
	k->nslots = stop > e0 ? (stop - e0) / k->slot_ns : 0;
	if (k->nslots < 3)
		return -1;
	k->coarse_w = calloc(k->nslots, sizeof(double));
	k->a_w = calloc(k->nslots, sizeof(double));
	k->b_w = calloc(k->nslots, sizeof(double));
	double *xa = calloc(k->nslots, sizeof(double)), *xb = calloc(k->nslots, sizeof(double));
	if (!k->coarse_w || !k->a_w || !k->b_w || !xa || !xb) {
		free(xa);
		free(xb);
		return -1;
	}
	/* the coarser meter's slot powers: the same at every lag */
	for (size_t i = 0; i < k->nslots; i++) {
		uint64_t e = e0 + i * k->slot_ns;
		k->coarse_w[i] = slot_w(&k->s[k->coarse], e, e + k->slot_ns);
	}
	/* Steps of a tenth of the finer meter's spacing (or of the slot, if shorter). */
	double fine_s = fmin(fmin(spa, spb), (double)k->slot_ns / 1e9);
	int64_t step = (int64_t)(fine_s * 1e8);
	if (step < 1000)
		step = 1000;
	int64_t best = find_lag(k, 0, k->nslots, step, xa, xb, &k->all);
	agree_at(k, 0, k->nslots, best, k->a_w, k->b_w, xa, xb, &k->all);
	/* A's slots start at T_S 0: B follows at the lag */
	k->t0_ns = k->coarse ? (uint64_t)((int64_t)e0 - best) : e0;
	/* Windows: the lag each finds for itself, and the fit there. */
	size_t per = k->window_ns ? (size_t)(k->window_ns / k->slot_ns) : 0;
	if (per >= 3) {
		k->nwin = k->nslots / per;
		k->win = calloc(k->nwin ? k->nwin : 1, sizeof(*k->win));
		if (!k->win)
			k->nwin = 0;
		for (size_t w = 0; w < k->nwin; w++) {
			int64_t lag = find_lag(k, w * per, (w + 1) * per, step, xa, xb, &k->win[w]);
			agree_at(k, w * per, (w + 1) * per, lag, NULL, NULL, xa, xb, &k->win[w]);
		}
	}
	free(xa);
	free(xb);
	return 0;
}

/* ---- output ---- */

static json_t *jnum(double x)
{
	return isfinite(x) ? json_real(x) : json_null();
}

static double lag_q(const struct side *s, double q)
{
	return s->nlag ? series_quantile(s->lag_s, s->nlag, q) : NAN;
}

static void say_side(const struct side *s, char which, uint64_t missing)
{
	printf(
	    "%c = %s/%s (%s, %s): %llu samples %.3g s apart, %llu lost, %llu discontinuities, %llu restarts bridged, arrival %.3g s late (median; max %.3g s), missing from %llu slots\n",
	    which, WB_VIS(s->host), WB_VIS(s->zone), WB_VIS(s->kind), WB_VIS(s->source),
	    (unsigned long long)s->messages, s->spacing_s, (unsigned long long)s->lost,
	    (unsigned long long)s->discontinuities, (unsigned long long)s->bridged, lag_q(s, 0.5),
	    lag_q(s, 1), (unsigned long long)missing);
}

static void print_text(const struct cmp *k, bool slots)
{
	if (slots) {
		printf("%10s %10s %10s %10s %8s\n", "T_S", "A_W", "B_W", "B-A_W", "B-A_%");
		for (size_t i = 0; i < k->nslots; i++) {
			double t = (double)(i * k->slot_ns) / 1e9, a = k->a_w[i], b = k->b_w[i];
			if (!isfinite(a) || !isfinite(b)) {
				printf("%10.3f %10s %10s %10s %8s  %s\n", t, isfinite(a) ? "" : "-",
				       isfinite(b) ? "" : "-", "", "",
				       !isfinite(a) && !isfinite(b) ? "both missing"
				       : !isfinite(a)		    ? "A missing"
								    : "B missing");
				continue;
			}
			printf("%10.3f %10.3f %10.3f %10.3f %8.2f\n", t, a, b, b - a,
			       a > 0 ? 100 * (b - a) / a : NAN);
		}
		printf("\n");
	}
	const struct agree *g = &k->all;
	say_side(&k->s[0], 'A', g->missing_a);
	say_side(&k->s[1], 'B', g->missing_b);
	char from[64];
	time_t secs = (time_t)(k->t0_ns / WB_NS_PER_SEC);
	struct tm tm;
	strftime(from, sizeof(from), "%Y-%m-%d %H:%M:%S UTC", gmtime_r(&secs, &tm));
	printf("slots: %zu of %.3g s from %s (T_S 0), %zu with both meters\n", k->nslots,
	       (double)k->slot_ns / 1e9, from, g->n);
	if (g->lag_known)
		printf(
		    "lag: B follows A by %+.3f s (correlation %.4f at that lag; searched +-%.3g s)\n",
		    g->lag_s, g->lag_r, (double)k->max_lag_ns / 1e9);
	else
		printf("lag: unknown (a meter stayed constant: nothing to correlate)\n");
	printf("fit: B = %.4f * A %+.3f W, R^2 %.4f (at lag 0: R^2 %.4f)\n", g->fit.gain,
	       g->fit.offset, g->fit.r2, g->fit0.r2);
	printf("error of B against A: MAE %.3f W, MAPE %.2f %%, bias %+.3f W\n", g->mae_w,
	       g->mape_pct, g->bias_w);
	if (k->nwin) {
		printf("\n%10s %6s %8s %8s %9s %7s %8s %7s %9s %9s\n", "WINDOW_S", "SLOTS", "LAG_S",
		       "GAIN", "OFFSET_W", "R2", "MAE_W", "MAPE_%", "A_MISSING", "B_MISSING");
		for (size_t w = 0; w < k->nwin; w++) {
			const struct agree *x = &k->win[w];
			printf("%10.1f %6zu %+8.3f %8.4f %+9.3f %7.4f %8.3f %7.2f %9llu %9llu\n",
			       (double)(x->i0 * k->slot_ns) / 1e9, x->n,
			       x->lag_known ? x->lag_s : NAN, x->fit.gain, x->fit.offset, x->fit.r2,
			       x->mae_w, x->mape_pct, (unsigned long long)x->missing_a,
			       (unsigned long long)x->missing_b);
		}
	}
	if (k->rejected)
		printf("%llu power frames rejected as invalid (left out)\n",
		       (unsigned long long)k->rejected);
}

static json_t *side_json(const struct side *s, uint64_t missing)
{
	json_t *o =
	    json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:I}", "spec", s->spec, "host",
		      s->host, "zone", s->zone, "kind", s->kind, "source", s->source, "samples",
		      (json_int_t)s->messages, "lost", (json_int_t)s->lost, "discontinuities",
		      (json_int_t)s->discontinuities, "bridged", (json_int_t)s->bridged,
		      "slots_missing", (json_int_t)missing);
	json_object_set_new(o, "spacing_s", jnum(s->spacing_s));
	json_object_set_new(
	    o, "arrival_lag_s",
	    json_pack("{s:o, s:o}", "median", jnum(lag_q(s, 0.5)), "max", jnum(lag_q(s, 1))));
	return o;
}

static json_t *fit_json(const struct lin_fit *f)
{
	return json_pack("{s:o, s:o, s:o, s:I}", "gain", jnum(f->gain), "offset_w", jnum(f->offset),
			 "r2", jnum(f->r2), "n", (json_int_t)f->n);
}

/* An agreement as JSON: slots_both, lag_s, lag_r, fit, fit_lag0, mae_w, mape_pct, bias_w,
 * slots_missing. */
static json_t *agree_json(const struct agree *g)
{
	json_t *o = json_pack(
	    "{s:I, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:{s:I, s:I}}", "slots_both",
	    (json_int_t)g->n, "lag_s", g->lag_known ? json_real(g->lag_s) : json_null(), "lag_r",
	    jnum(g->lag_r), "fit", fit_json(&g->fit), "fit_lag0", fit_json(&g->fit0), "mae_w",
	    jnum(g->mae_w), "mape_pct", jnum(g->mape_pct), "bias_w", jnum(g->bias_w),
	    "slots_missing", "a", (json_int_t)g->missing_a, "b", (json_int_t)g->missing_b);
	return o;
}

static int print_json(const struct cmp *k, bool slots)
{
	const struct agree *g = &k->all;
	json_t *root =
	    json_pack("{s:o, s:o, s:f, s:I, s:I}", "a", side_json(&k->s[0], g->missing_a), "b",
		      side_json(&k->s[1], g->missing_b), "slot_s", (double)k->slot_ns / 1e9,
		      "t0_ns", (json_int_t)k->t0_ns, "slots", (json_int_t)k->nslots);
	json_t *all = agree_json(g);
	json_object_update(root, all);
	json_decref(all);
	json_object_set_new(root, "max_lag_s", json_real((double)k->max_lag_ns / 1e9));
	if (k->nwin) {
		json_t *arr = json_array();
		for (size_t w = 0; w < k->nwin; w++) {
			json_t *o = agree_json(&k->win[w]);
			json_object_set_new(o, "t_s",
					    json_real((double)(k->win[w].i0 * k->slot_ns) / 1e9));
			json_array_append_new(arr, o);
		}
		json_object_set_new(root, "windows", arr);
	}
	json_object_set_new(root, "rejected", json_integer((json_int_t)k->rejected));
	if (slots) {
		json_t *arr = json_array();
		for (size_t i = 0; i < k->nslots; i++)
			json_array_append_new(
			    arr, json_pack("{s:f, s:o, s:o}", "t_s", (double)(i * k->slot_ns) / 1e9,
					   "a_w", jnum(k->a_w[i]), "b_w", jnum(k->b_w[i])));
		json_object_set_new(root, "per_slot", arr);
	}
	char *s = json_dumps(root, JSON_INDENT(2) | JSON_ENSURE_ASCII);
	json_decref(root);
	if (!s)
		return 1;
	puts(s);
	free(s);
	return 0;
}

/*
 * A text for gnuplot between single quotes: a quote is doubled, and what is not
 * printable is escaped first (wb_vis), so a name holding a newline cannot end the
 * command and start another (system("...")): gnuplot reads a script line by line.
 */
static void gp_quote(FILE *f, const char *raw)
{
	size_t n = strlen(raw), size = 4 * n + 1; /* the most wb_vis writes */
	char *vis = malloc(size);
	if (!vis) {
		fputs("''", f);
		return;
	}
	wb_vis(vis, size, raw, n, 0);
	fputc('\'', f);
	for (const char *s = vis; *s; s++) {
		if (*s == '\'')
			fputc('\'', f);
		fputc(*s, f);
	}
	fputc('\'', f);
	free(vis);
}

/* Both meters over time and B against A with the fit, as SVG, by gnuplot. */
static int plot_svg(const struct cmp *k, const char *path)
{
	FILE *gp = popen("gnuplot 2>&1", "w");
	if (!gp) {
		fprintf(stderr, "wattbus compare: --plot: cannot run gnuplot: %s\n",
			strerror(errno));
		return -1;
	}
	fprintf(gp, "set terminal svg size 1000,800 dynamic enhanced font 'sans,11'\nset output ");
	gp_quote(gp, path);
	fprintf(gp, "\n$D << EOD\n");
	for (size_t i = 0; i < k->nslots; i++)
		if (isfinite(k->a_w[i]) && isfinite(k->b_w[i]))
			fprintf(gp, "%.6f %.6f %.6f\n", (double)(i * k->slot_ns) / 1e9, k->a_w[i],
				k->b_w[i]);
	fprintf(gp, "EOD\nset multiplot layout 2,1\nset grid\nset key top left noenhanced\n"
		    "set xlabel 's'\nset ylabel 'W'\nset title ");
	char title[512];
	snprintf(title, sizeof(title), "A = %s/%s, B = %s/%s (B shifted by %.3f s)", k->s[0].host,
		 k->s[0].zone, k->s[1].host, k->s[1].zone, k->all.lag_s);
	gp_quote(gp, title);
	fprintf(
	    gp,
	    " noenhanced\nplot $D using 1:2 with lines title 'A', $D using 1:3 with lines title 'B'\n");
	snprintf(title, sizeof(title), "B = %.4f A %+.3f W, R^2 %.4f, MAE %.3f W", k->all.fit.gain,
		 k->all.fit.offset, k->all.fit.r2, k->all.mae_w);
	fprintf(gp, "set xlabel 'A (W)'\nset ylabel 'B (W)'\nset title ");
	gp_quote(gp, title);
	fprintf(
	    gp,
	    " noenhanced\nplot $D using 2:3 with points pt 7 ps 0.4 title 'slots', %.9g * x + %.9g with lines title 'fit'\n"
	    "unset multiplot\n",
	    k->all.fit.gain, k->all.fit.offset);
	int st = pclose(gp);
	if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		fprintf(
		    stderr,
		    "wattbus compare: --plot %s: gnuplot failed (%s); install gnuplot-nox for plots\n",
		    path,
		    st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 127 ? "not installed"
									: "see its message above");
		return -1;
	}
	return 0;
}

struct compare_opts {
	struct cli_strs from, sub;
	uint64_t duration_ns, slot_ns, max_lag_ns, window_ns;
	bool json, summary;
	const char *plot;
	struct wb_sockopts so;
};
#define OFF(m) offsetof(struct compare_opts, m)
static const struct cli_flag compare_flags[] = {
    CLI_OPERAND("A, B",
		"power streams: ZONE (any host) or HOST/ZONE, e.g. node1/psys bmc/platform"),
    CLI_LIST("from", 0, OFF(from), "FILE", "read a `wattbus record` file instead of the bus"),
    CLI_LIST("sub", 0, OFF(sub), "ENDPOINT",
	     "subscribe to this publisher (or to several, comma-separated)"),
    CLI_DURATION("duration", 0, OFF(duration_ns), "60s", 0, 0, "D",
		 "how long to listen on the bus (Ctrl-C ends it early)"),
    CLI_DURATION("slot", 0, OFF(slot_ns), NULL, 0, 0, "D",
		 "slot length (default: four samples of the coarser meter)"),
    CLI_DURATION("max-lag", 0, OFF(max_lag_ns), NULL, 0, 0, "D",
		 "largest lag searched either way (default 10 samples of the coarser meter)"),
    CLI_DURATION("window", 0, OFF(window_ns), NULL, 0, 0, "D",
		 "also lag, fit and errors per window of D (at least 3 slots), to see drift"),
    CLI_SWITCH("json", 0, OFF(json),
	       "one JSON object (per-slot values under per_slot, windows under windows)"),
    CLI_SWITCH("summary", 0, OFF(summary), "leave out the per-slot table"),
    CLI_STR("plot", 0, OFF(plot), NULL, "FILE.svg",
	    "both meters and B against A, drawn by gnuplot"),
    CLI_CURVE_SUB(OFF(so)),
};
static const struct cli_verb compare_verb = {
    CLI_VERB("compare", compare_flags, struct compare_opts, 0, -1),
    .synopsis = "[OPTIONS] --from FILE... A B\n[OPTIONS] --sub ENDPOINT... A B"};

int cmd_compare(int argc, char **argv)
{
	struct compare_opts o;
	int first, rc = cli_parse(&compare_verb, argc, argv, &o, &first);
	if (rc >= 0)
		return rc;
	if (argc - first != 2)
		return cli_usage_error(&compare_verb, "give two power streams, A and B");
	struct cmp k = {0};
	k.slot_ns = o.slot_ns;
	k.max_lag_ns = o.max_lag_ns;
	k.window_ns = o.window_ns;
	size_t nfrom = o.from.n;
	char subs[4096] = "";
	for (size_t i = 0, len = 0; i < o.sub.n; i++, len = strlen(subs))
		snprintf(subs + len, sizeof(subs) - len, "%s%s", len ? "," : "", o.sub.v[i]);
	if (!nfrom == !subs[0]) {
		fprintf(
		    stderr,
		    "wattbus compare: give --from FILE (a recording) or --sub ENDPOINT (the bus), not %s\n",
		    nfrom ? "both" : "neither");
		return 2;
	}
	if (k.slot_ns && k.slot_ns < WB_NS_PER_MS) {
		fprintf(stderr,
			"wattbus compare: --slot: below 1 ms is finer than any meter here\n");
		return 2;
	}
	if (parse_spec(&k.s[0], argv[first]) < 0 || parse_spec(&k.s[1], argv[first + 1]) < 0)
		return 2;
	if (!strcmp(k.s[0].host, k.s[1].host) && !strcmp(k.s[0].zone, k.s[1].zone)) {
		fprintf(stderr, "wattbus compare: A and B are the same stream (%s)\n", argv[first]);
		return 2;
	}
	rc = 1;
	k.s[0].c = curve_new(1, CMP_MAX_SAMPLES);
	k.s[1].c = curve_new(2, CMP_MAX_SAMPLES);
	k.seq = wb_seqtrack_new(1024);
	if (!k.s[0].c || !k.s[1].c || !k.seq) {
		fprintf(stderr, "wattbus compare: out of memory\n");
		goto out;
	}
	for (size_t i = 0; i < nfrom; i++)
		if (record_each(o.from.v[i], feed_record, &k) < 0)
			goto out;
	if (subs[0] && feed_bus(&k, subs, o.duration_ns, &o.so) < 0)
		goto out;
	for (int i = 0; i < 2; i++)
		if (k.s[i].c->n < 2) {
			fprintf(stderr,
				"wattbus compare: %s: %s power samples of zone %s%s%s in %s%s\n",
				k.s[i].spec, k.s[i].c->n ? "only one of the" : "no", k.s[i].zone,
				k.s[i].host[0] ? " from host " : "", k.s[i].host,
				nfrom ? "the recording" : "what the bus sent",
				k.rejected ? " (some frames were rejected as invalid)" : "");
			goto out;
		}
	if (analyze(&k) < 0) {
		fprintf(
		    stderr,
		    "wattbus compare: %s and %s overlap for too short a time: need at least 4 slots (%.3g s each) plus the lag searched\n",
		    k.s[0].spec, k.s[1].spec, (double)k.slot_ns / 1e9);
		goto out;
	}
	if (k.window_ns && !k.nwin)
		fprintf(stderr, "wattbus compare: --window: %.3g s %s; no windows reported\n",
			(double)k.window_ns / 1e9,
			k.window_ns / k.slot_ns < 3 ? "holds fewer than 3 slots"
						    : "is longer than the slots compared");
	rc = o.json ? print_json(&k, !o.summary) : (print_text(&k, !o.summary), 0);
	if (o.plot && plot_svg(&k, o.plot) < 0)
		rc = 1;
out:
	for (int i = 0; i < 2; i++) {
		curve_destroy(&k.s[i].c);
		free(k.s[i].lag_s);
	}
	wb_seqtrack_destroy(&k.seq);
	free(k.coarse_w);
	free(k.a_w);
	free(k.b_w);
	free(k.win);
	return rc;
}
