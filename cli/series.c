/*
 * Pure statistics behind `wattbus probe` and `wattbus compare`: what a sampled
 * meter's readings say about its update period, step and noise, the settings
 * alignd should take from them, and the linear fit of one meter against another.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "grow.h"

int series_add(struct series *s, uint64_t t_ns, double v)
{
	/* two arrays of one capacity: s->cap moves once both have grown */
	size_t tcap = s->cap, vcap = s->cap;
	if (wb_grow(&s->t_ns, &tcap, s->n + 1, sizeof(*s->t_ns), 1024) < 0 ||
	    wb_grow(&s->v, &vcap, s->n + 1, sizeof(*s->v), 1024) < 0)
		return -1;
	s->cap = tcap;
	s->t_ns[s->n] = t_ns;
	s->v[s->n++] = v;
	return 0;
}

void series_free(struct series *s)
{
	free(s->t_ns);
	free(s->v);
	memset(s, 0, sizeof(*s));
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

double series_quantile(const double *v, size_t n, double q)
{
	if (n == 0)
		return NAN;
	double *c = malloc(n * sizeof(*c));
	if (!c)
		return NAN;
	memcpy(c, v, n * sizeof(*c));
	qsort(c, n, sizeof(*c), cmp_double);
	double pos = q * (double)(n - 1);
	size_t i = (size_t)pos;
	double r = i + 1 < n ? c[i] + (c[i + 1] - c[i]) * (pos - (double)i) : c[i];
	free(c);
	return r;
}

/* A counter's increase from a to b, across one wrap of range_uj (0: it does not wrap). */
static double counter_delta(double a, double b, double range_uj)
{
	double d = b - a;
	if (d < 0 && range_uj > 0)
		d += range_uj + 1;
	return d;
}

void meter_analyze(const struct series *s, bool is_power, double range_uj, struct meter_stats *st)
{
	memset(st, 0, sizeof(*st));
	st->samples = s->n;
	st->period_s = st->period_p10_s = st->period_p90_s = NAN;
	st->step_min = st->mean_w = st->noise_w = st->spacing_s = NAN;
	if (s->n < 2)
		return;
	double *gap = malloc(s->n * sizeof(*gap));
	double *chg_t = malloc(s->n * sizeof(*chg_t));
	size_t *chg_i = malloc(s->n * sizeof(*chg_i));
	if (!gap || !chg_t || !chg_i)
		goto out;
	for (size_t i = 1; i < s->n; i++)
		gap[i - 1] = (double)(s->t_ns[i] - s->t_ns[i - 1]) / 1e9;
	st->spacing_s = series_quantile(gap, s->n - 1, 0.5);
	/* A change shows at the first sample that reads the new value. */
	size_t nc = 0;
	double step = INFINITY;
	for (size_t i = 1; i < s->n; i++) {
		if (s->v[i] == s->v[i - 1])
			continue;
		double d = is_power ? fabs(s->v[i] - s->v[i - 1])
				    : counter_delta(s->v[i - 1], s->v[i], range_uj);
		if (d > 0 && d < step)
			step = d;
		chg_i[nc++] = i;
	}
	st->changes = nc;
	if (isfinite(step))
		st->step_min = step;
	for (size_t k = 1; k < nc; k++)
		chg_t[k - 1] = (double)(s->t_ns[chg_i[k]] - s->t_ns[chg_i[k - 1]]) / 1e9;
	if (nc >= 2) {
		st->period_s = series_quantile(chg_t, nc - 1, 0.5);
		st->period_p10_s = series_quantile(chg_t, nc - 1, 0.1);
		st->period_p90_s = series_quantile(chg_t, nc - 1, 0.9);
		/* Changes at (nearly) every reading: the meter updates at least as often as it was
		 * read. */
		st->period_bounded = st->period_s < 1.5 * st->spacing_s;
	}
	if (is_power) {
		/* Readings in uW: their mean and spread. */
		double sum = 0, sq = 0;
		for (size_t i = 0; i < s->n; i++)
			sum += s->v[i];
		double mean = sum / (double)s->n;
		for (size_t i = 0; i < s->n; i++)
			sq += (s->v[i] - mean) * (s->v[i] - mean);
		st->mean_w = mean / 1e6;
		st->noise_w = sqrt(sq / (double)s->n) / 1e6;
	} else if (nc >= 2) {
		/*
		 * Counter in uJ: the power over windows of up to 10 updates (uJ per ns is kW).
		 * A change is seen up to one reading late; over one update that timing error
		 * would pass for noise, over ten it weighs a tenth.
		 */
		size_t w = (nc - 1) / 3;
		w = w > 10 ? 10 : w < 1 ? 1 : w;
		double total = 0, sum = 0, sq = 0;
		size_t np = 0;
		for (size_t k = 1; k < nc; k++)
			total += counter_delta(s->v[chg_i[k - 1]], s->v[chg_i[k]], range_uj);
		for (size_t k = 0; k + w < nc; k += w) {
			double d = 0;
			for (size_t j = k + 1; j <= k + w; j++)
				d += counter_delta(s->v[chg_i[j - 1]], s->v[chg_i[j]], range_uj);
			gap[np++] = d / (double)(s->t_ns[chg_i[k + w]] - s->t_ns[chg_i[k]]) * 1e3;
		}
		double span_ns = (double)(s->t_ns[chg_i[nc - 1]] - s->t_ns[chg_i[0]]);
		st->mean_w = total / span_ns * 1e3;
		for (size_t k = 0; k < np; k++)
			sum += gap[k];
		double mean = sum / (double)np;
		for (size_t k = 0; k < np; k++)
			sq += (gap[k] - mean) * (gap[k] - mean);
		st->noise_w = sqrt(sq / (double)np);
	}
out:
	free(gap);
	free(chg_t);
	free(chg_i);
}

/* The smallest of 1, 2, 5, 10, 15, 30, 60, 120, 300, 600 s not below s; above that, s in whole
 * seconds. */
static double nice_up(double s)
{
	static const double steps[] = {1, 2, 5, 10, 15, 30, 60, 120, 300, 600};
	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++)
		if (s <= steps[i])
			return steps[i];
	return ceil(s);
}

void meter_suggest(const struct meter_stats *st, double latency_max_s, struct meter_advice *adv)
{
	/* A meter seen changing fewer than twice has no period to go by: suggesting settings for
	 * it would pass powerd's defaults off as what the meter needs. */
	adv->known = isfinite(st->period_s) || (st->period_bounded && isfinite(st->spacing_s));
	if (!adv->known) {
		adv->interval_s = adv->max_lag_s = NAN;
		return;
	}
	double period = isfinite(st->period_s) ? st->period_s : 0;
	/*
	 * Two updates per sample at least: a slot edge is then off by at most one update's
	 * energy, half a sample's; never below powerd's default of 1 s. When the meter
	 * changed at every reading, only a bound is known: it updates at least as often
	 * as it was read, so sampling that often is enough.
	 */
	double want = 2 * period;
	if (st->period_bounded && isfinite(st->spacing_s)) {
		period = st->spacing_s;
		want = period;
	}
	adv->interval_s = nice_up(want > 1 ? want : 1);
	/*
	 * alignd waits for the first sample after a slot's end: up to one interval, plus
	 * the update period (a reading shows energy up to its last update), plus twice
	 * the worst read or delivery latency seen; rounded up to 100 ms.
	 */
	double lag = adv->interval_s + period + 2 * (latency_max_s > 0 ? latency_max_s : 0);
	adv->max_lag_s = ceil(lag * 10 - 1e-9) / 10;
}

void fit_linear(const double *x, const double *y, size_t n, struct lin_fit *f)
{
	memset(f, 0, sizeof(*f));
	f->n = n;
	f->gain = f->offset = f->r2 = NAN;
	if (n < 2)
		return;
	double mx = 0, my = 0;
	for (size_t i = 0; i < n; i++) {
		mx += x[i];
		my += y[i];
	}
	mx /= (double)n;
	my /= (double)n;
	double sxx = 0, syy = 0, sxy = 0;
	for (size_t i = 0; i < n; i++) {
		sxx += (x[i] - mx) * (x[i] - mx);
		syy += (y[i] - my) * (y[i] - my);
		sxy += (x[i] - mx) * (y[i] - my);
	}
	if (sxx <= 0)
		return;
	f->gain = sxy / sxx;
	f->offset = my - f->gain * mx;
	f->r2 = syy > 0 ? sxy * sxy / (sxx * syy) : 1;
}

double correlation(const double *x, const double *y, size_t n)
{
	if (n < 2)
		return NAN;
	double mx = 0, my = 0;
	for (size_t i = 0; i < n; i++) {
		mx += x[i];
		my += y[i];
	}
	mx /= (double)n;
	my /= (double)n;
	double sxx = 0, syy = 0, sxy = 0;
	for (size_t i = 0; i < n; i++) {
		sxx += (x[i] - mx) * (x[i] - mx);
		syy += (y[i] - my) * (y[i] - my);
		sxy += (x[i] - mx) * (y[i] - my);
	}
	return sxx > 0 && syy > 0 ? sxy / sqrt(sxx * syy) : NAN;
}
