/*
 * The statistics behind wattbus probe and compare: a meter's update period,
 * step, power and noise from its readings, the alignd settings they give, and
 * the linear fit of one meter against another.
 */
#include <math.h>

#include "../../cli/cli.h"
#include "unit.h"

#define MS 1000000ull

static bool near(double v, double want, double tol)
{
	if (fabs(v - want) <= tol)
		return true;
	printf("#   %g is not %g +- %g\n", v, want, tol);
	return false;
}

/* Read every 1 ms; the counter steps by 500 uJ every 20 ms and wraps past 9999. */
static void test_counter_period_step_wrap(void)
{
	struct series s = {0};
	double v = 9000;
	for (uint64_t i = 0; i <= 2000; i++) {
		if (i && i % 20 == 0)
			v = fmod(v + 500, 10000);
		CHECK(series_add(&s, 1000 * MS + i * MS, v) == 0);
	}
	struct meter_stats st;
	meter_analyze(&s, false, 9999, &st);
	CHECK_U64(st.samples, 2001);
	CHECK_U64(st.changes, 100);
	CHECK(near(st.spacing_s, 0.001, 1e-9));
	CHECK(near(st.period_s, 0.020, 1e-9));
	CHECK(!st.period_bounded);
	CHECK(
	    near(st.step_min, 500, 1e-9)); /* the wraps (9500 -> 0) count as one step, not -9500 */
	CHECK(near(st.mean_w, 0.025, 1e-9)); /* 500 uJ per 20 ms */
	CHECK(near(st.noise_w, 0, 1e-6));
	/* Without its range the wrap would look like a huge step back. */
	meter_analyze(&s, false, 0, &st);
	CHECK(st.mean_w < 0 || st.noise_w > 1);
	series_free(&s);
}

/* Power readings (uW) read every 10 ms, alternating 10 W and 12 W every 100 ms. */
static void test_power_readings(void)
{
	struct series s = {0};
	for (uint64_t i = 0; i < 1000; i++)
		series_add(&s, i * 10 * MS, (i / 10) % 2 ? 12e6 : 10e6);
	struct meter_stats st;
	meter_analyze(&s, true, 0, &st);
	CHECK(near(st.period_s, 0.1, 1e-9));
	CHECK(near(st.step_min, 2e6, 1e-6));
	CHECK(near(st.mean_w, 11, 1e-9));
	CHECK(near(st.noise_w, 1, 1e-9));
	series_free(&s);
}

/* A change at every reading: the period is only known to be at most the spacing. */
static void test_bounded(void)
{
	struct series s = {0};
	for (uint64_t i = 0; i < 100; i++)
		series_add(&s, i * 100 * MS, (double)i * 1000);
	struct meter_stats st;
	meter_analyze(&s, false, 0, &st);
	CHECK(st.period_bounded);
	CHECK(near(st.spacing_s, 0.1, 1e-9));
	CHECK(near(st.mean_w, 0.01, 1e-9));
	/* Every second reading: a period of two spacings, known. */
	series_free(&s);
	for (uint64_t i = 0; i < 100; i++)
		series_add(&s, i * 100 * MS, (double)(i / 2) * 1000);
	meter_analyze(&s, false, 0, &st);
	CHECK(!st.period_bounded);
	CHECK(near(st.period_s, 0.2, 1e-9));
	series_free(&s);
}

static void test_too_few(void)
{
	struct series s = {0};
	struct meter_stats st;
	meter_analyze(&s, false, 0, &st);
	CHECK(isnan(st.period_s) && isnan(st.mean_w));
	series_add(&s, 0, 5);
	series_add(&s, MS, 5);
	meter_analyze(&s, false, 0, &st);
	CHECK_U64(st.changes, 0);
	CHECK(isnan(st.period_s) && isnan(st.step_min));
	series_free(&s);
}

static void test_suggest(void)
{
	struct meter_stats st = {.period_s = 0.001, .spacing_s = 0.0001};
	struct meter_advice a;
	meter_suggest(&st, 0.01, &a);
	CHECK(near(a.interval_s, 1, 0));     /* RAPL: powerd's default */
	CHECK(near(a.max_lag_s, 1.1, 1e-9)); /* 1 + 0.001 + 0.02, up to 100 ms */
	st.period_s = 5;		     /* a BMC */
	meter_suggest(&st, 0.1, &a);
	CHECK(near(a.interval_s, 10, 0));
	CHECK(near(a.max_lag_s, 15.2, 1e-9));
	st.period_s = 0.7;
	meter_suggest(&st, 0, &a);
	CHECK(near(a.interval_s, 2, 0));
	CHECK(near(a.max_lag_s, 2.7, 1e-9));
	/* Only a bound: the spacing it was read at stands for the period. */
	st = (struct meter_stats){.period_s = 3, .spacing_s = 3, .period_bounded = true};
	meter_suggest(&st, 0, &a);
	CHECK(near(a.interval_s, 5, 0));
	CHECK(near(a.max_lag_s, 8, 1e-9));
	st = (struct meter_stats){
	    .period_s = 1, .spacing_s = 1, .period_bounded = true}; /* powerd's 1 s on the bus */
	meter_suggest(&st, 0.015, &a);
	CHECK(a.known);
	CHECK(near(a.interval_s, 1, 0));
	CHECK(near(a.max_lag_s, 2.1, 1e-9));
}

/* A meter seen changing fewer than twice has no period: nothing is suggested for it (powerd's
 * defaults were, as if measured). */
static void test_suggest_no_change(void)
{
	struct series s = {0};
	for (uint64_t i = 0; i < 20; i++)
		CHECK(series_add(&s, 1000000000ull + i * 100000000ull, 5000) == 0);
	struct meter_stats st;
	struct meter_advice a;
	meter_analyze(&s, false, 0, &st);
	CHECK(st.changes == 0);
	meter_suggest(&st, 0.01, &a);
	CHECK(!a.known && isnan(a.interval_s) && isnan(a.max_lag_s));
	s.v[10] = s.v[11] = 6000; /* two changes, 0.2 s apart */
	for (size_t i = 12; i < s.n; i++)
		s.v[i] = 7000;
	meter_analyze(&s, false, 0, &st);
	CHECK(st.changes == 2);
	meter_suggest(&st, 0.01, &a);
	CHECK(a.known && near(a.interval_s, 1, 0));
	for (size_t i = 10; i < s.n; i++)
		s.v[i] = 6000; /* one change */
	meter_analyze(&s, false, 0, &st);
	CHECK(st.changes == 1);
	meter_suggest(&st, 0.01, &a);
	CHECK(!a.known);
	series_free(&s);
}

static void test_fit(void)
{
	double x[] = {1, 2, 3, 4, 5}, y[5], c[5] = {7, 7, 7, 7, 7};
	for (int i = 0; i < 5; i++)
		y[i] = 2 * x[i] + 3;
	struct lin_fit f;
	fit_linear(x, y, 5, &f);
	CHECK(near(f.gain, 2, 1e-12) && near(f.offset, 3, 1e-12) && near(f.r2, 1, 1e-12));
	y[2] += 1;
	fit_linear(x, y, 5, &f);
	CHECK(f.r2 < 1 && f.r2 > 0.9);
	fit_linear(c, y, 5, &f);
	CHECK(isnan(f.gain));
	for (int i = 0; i < 5; i++)
		y[i] = -x[i];
	CHECK(near(correlation(x, y, 5), -1, 1e-12));
	CHECK(isnan(correlation(x, c, 5)));
	CHECK(near(series_quantile(x, 5, 0.5), 3, 0));
	CHECK(near(series_quantile(x, 5, 0.1), 1.4, 1e-12));
}

static const struct unit_case cases[] = {
    {"a counter's period, step and power, across its wrap", test_counter_period_step_wrap},
    {"power readings: period, step, mean and noise", test_power_readings},
    {"a change at every reading bounds the period", test_bounded},
    {"too few readings: unknown, not zero", test_too_few},
    {"alignd settings from the period and the latency", test_suggest},
    {"no settings suggested for a meter that did not change twice", test_suggest_no_change},
    {"linear fit, correlation and quantiles", test_fit},
};

UNIT_MAIN(cases)
