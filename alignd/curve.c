/*
 * One zone's cumulative energy as a function of time: the power samples of a
 * host, bridged across powerd restarts, interpolated exactly at any instant.
 * A new epoch whose counter continues is joined without loss; anything else is
 * a discontinuity, kept as a flat gap so that no energy is ever invented.
 */
#include <stdlib.h>
#include <string.h>

#include "alignd.h"
#include "plaus.h"

struct curve *curve_new(uint64_t id, size_t max_samples)
{
	struct curve *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->id = id;
	c->max_samples = max_samples < 4 ? 4 : max_samples;
	return c;
}

void curve_destroy(struct curve **self_p)
{
	if (!self_p || !*self_p)
		return;
	wb_budget_move((*self_p)->budget, (*self_p)->cap * sizeof(*(*self_p)->s), 0);
	gpu_ring_free(*self_p);
	free((*self_p)->s);
	free(*self_p);
	*self_p = NULL;
}

uint64_t curve_last_t(const struct curve *c)
{
	return c->n ? c->s[c->n - 1].t_ns : 0;
}

size_t curve_rewind(struct curve *c, uint64_t t_ns)
{
	size_t keep = c->n;
	while (keep > 1 && c->s[keep - 1].t_ns >= t_ns)
		keep--;
	if (keep == c->n || c->s[keep - 1].t_ns >= t_ns)
		return 0; /* nothing to drop, or only the first sample: the caller starts the curve
			     over */
	/* The counter read at the dropped samples went up by what E did since the last kept one. */
	uint64_t back = c->s[c->n - 1].e_uj - c->s[keep - 1].e_uj;
	c->raw_last_uj = c->raw_last_uj >= back ? c->raw_last_uj - back : 0;
	size_t dropped = c->n - keep;
	c->n = keep;
	size_t ng = c->ngaps < CURVE_GAPS ? c->ngaps : CURVE_GAPS;
	for (size_t i = 0; i < ng; i++)
		if (c->gaps[i].to_ns >= t_ns)
			c->gaps[i] = (struct curve_gap){0, 0};
	return dropped;
}

static int make_room(struct curve *c)
{
	if (c->n < c->cap)
		return 0;
	size_t cap = c->cap ? c->cap * 2 : 16;
	if (cap > c->max_samples)
		cap = c->max_samples;
	/* Out of budget the curve stays at its size, as at max_samples. */
	bool room = wb_budget_fits(c->budget, (cap - c->cap) * sizeof(*c->s));
	if (c->cap >= c->max_samples || (!room && c->n >= 4)) {
		/* At the cap the oldest quarter goes: boundaries that old are long resolved. */
		size_t drop = c->n / 4;
		memmove(c->s, c->s + drop, (c->n - drop) * sizeof(*c->s));
		c->n -= drop;
		return 0;
	}
	if (!room)
		return -1;
	struct curve_sample *s = realloc(c->s, cap * sizeof(*s));
	if (!s)
		return -1;
	wb_budget_move(c->budget, c->cap * sizeof(*s), cap * sizeof(*s));
	c->s = s;
	c->cap = cap;
	return 0;
}

static void record_gap(struct curve *c, uint64_t from_ns, uint64_t to_ns)
{
	c->gaps[c->ngaps % CURVE_GAPS] = (struct curve_gap){from_ns, to_ns};
	c->ngaps++;
}

/*
 * How much energy lies between the last sample of the old epoch and the first
 * of the new one, if the counter provably continues. The hardware counter runs
 * from 0 to max_energy_range_uj inclusive, so powerd adds range + 1 at each
 * wrap and starts from the hardware reading: after a restart the new value is
 * either at least the old one (no wraps added yet) or at least the old one
 * modulo range + 1 (the hardware reading it came from).
 */
static bool bridge(const struct curve *c, uint64_t dt_ns, uint64_t energy_uj, uint64_t range_uj,
		   double max_w, uint64_t *delta_uj)
{
	uint64_t range = c->range_uj ? c->range_uj : range_uj;
	bool cont = false;
	if (energy_uj >= c->raw_last_uj) {
		*delta_uj = energy_uj - c->raw_last_uj;
		cont = true;
	} else if (range && range < UINT64_MAX && energy_uj <= range &&
		   energy_uj >= c->raw_last_uj % (range + 1)) {
		*delta_uj = energy_uj - c->raw_last_uj % (range + 1);
		cont = true;
	}
	/* uJ per ns * 1e3 is watts. */
	if (cont && max_w > 0 && dt_ns > 0 && (double)*delta_uj * 1e3 / (double)dt_ns > max_w)
		cont = false;
	return cont;
}

enum curve_event curve_add(struct curve *c, uint64_t t_ns, uint64_t epoch, uint64_t energy_uj,
			   uint64_t range_uj, double bridge_max_w, uint64_t *delta_uj)
{
	uint64_t delta = 0;
	enum curve_event ev = CURVE_APPENDED;
	uint64_t e;
	if (delta_uj)
		*delta_uj = 0;
	if (c->n == 0) {
		e = energy_uj;
		c->first_t_ns = t_ns;
	} else {
		const struct curve_sample *last = &c->s[c->n - 1];
		if (t_ns <= last->t_ns)
			return CURVE_STALE;
		if (epoch != c->epoch) {
			ev = bridge(c, t_ns - last->t_ns, energy_uj, range_uj, bridge_max_w, &delta)
				 ? CURVE_BRIDGED
				 : CURVE_DISCONTINUITY;
		} else if (energy_uj < c->raw_last_uj) {
			/* powerd promised monotonic values: do not guess a wrap */
			ev = CURVE_DISCONTINUITY;
		} else {
			delta = energy_uj - c->raw_last_uj;
		}
		/* Slot energies and totals are differences of E: E past the wire's maximum
		 * (a counter range near 2^63 bridged) would make every later slot unencodable. */
		uint64_t room = last->e_uj < WB_WIRE_MAX ? WB_WIRE_MAX - last->e_uj : 0;
		if (ev != CURVE_DISCONTINUITY && delta > room)
			ev = CURVE_DISCONTINUITY;
		if (ev == CURVE_DISCONTINUITY)
			delta = 0;
		e = last->e_uj + delta;
	}
	if (make_room(c) < 0)
		return CURVE_NOMEM;
	if (ev == CURVE_DISCONTINUITY)
		record_gap(c, c->s[c->n - 1].t_ns, t_ns);
	c->s[c->n++] = (struct curve_sample){t_ns, e};
	c->raw_last_uj = energy_uj;
	c->epoch = epoch;
	if (range_uj)
		c->range_uj = range_uj;
	if (delta_uj)
		*delta_uj = delta;
	return ev;
}

static const struct curve_gap *gap_ending_at(const struct curve *c, uint64_t t_ns)
{
	size_t n = c->ngaps < CURVE_GAPS ? c->ngaps : CURVE_GAPS;
	for (size_t i = 0; i < n; i++)
		if (c->gaps[i].to_ns == t_ns)
			return &c->gaps[i];
	return NULL;
}

/* ea + (eb - ea) * (t - ta) / (tb - ta), floored, without overflow. */
static uint64_t lerp(uint64_t ta, uint64_t ea, uint64_t tb, uint64_t eb, uint64_t t)
{
	unsigned __int128 num = (unsigned __int128)(eb - ea) * (t - ta);
	return ea + (uint64_t)(num / (tb - ta));
}

enum curve_pos curve_at(const struct curve *c, uint64_t t_ns, uint64_t *e_uj)
{
	if (c->n == 0)
		return CURVE_NONE;
	const struct curve_sample *s = c->s;
	size_t n = c->n;
	if (t_ns < s[0].t_ns) {
		*e_uj = s[0].e_uj;
		return CURVE_BEFORE;
	}
	if (t_ns >= s[n - 1].t_ns) {
		if (t_ns == s[n - 1].t_ns || n < 2 || gap_ending_at(c, s[n - 1].t_ns)) {
			*e_uj = s[n - 1].e_uj; /* no rate to go on: flat */
			return t_ns == s[n - 1].t_ns ? CURVE_INSIDE : CURVE_AFTER;
		}
		const struct curve_sample *a = &s[n - 2], *b = &s[n - 1];
		unsigned __int128 num = (unsigned __int128)(b->e_uj - a->e_uj) * (t_ns - b->t_ns);
		unsigned __int128 e = b->e_uj + num / (b->t_ns - a->t_ns);
		*e_uj = e > INT64_MAX ? INT64_MAX : (uint64_t)e;
		return CURVE_AFTER;
	}
	/* Largest i with s[i].t <= t; s[i + 1] exists. */
	size_t lo = 0, hi = n - 1;
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		if (s[mid].t_ns <= t_ns)
			lo = mid;
		else
			hi = mid;
	}
	*e_uj = lerp(s[lo].t_ns, s[lo].e_uj, s[lo + 1].t_ns, s[lo + 1].e_uj, t_ns);
	return CURVE_INSIDE;
}

static uint64_t overlap(uint64_t a0, uint64_t a1, uint64_t b0, uint64_t b1)
{
	uint64_t lo = a0 > b0 ? a0 : b0, hi = a1 < b1 ? a1 : b1;
	return hi > lo ? hi - lo : 0;
}

uint64_t curve_covered_ns(const struct curve *c, uint64_t t0_ns, uint64_t t1_ns)
{
	if (c->n == 0)
		return 0;
	uint64_t lo = t0_ns > c->first_t_ns ? t0_ns : c->first_t_ns;
	uint64_t hi = t1_ns < curve_last_t(c) ? t1_ns : curve_last_t(c);
	if (hi <= lo)
		return 0;
	uint64_t cov = hi - lo;
	size_t n = c->ngaps < CURVE_GAPS ? c->ngaps : CURVE_GAPS;
	for (size_t i = 0; i < n; i++) {
		uint64_t o = overlap(lo, hi, c->gaps[i].from_ns, c->gaps[i].to_ns);
		cov = o < cov ? cov - o : 0;
	}
	return cov;
}

bool curve_gap_in(const struct curve *c, uint64_t t0_ns, uint64_t t1_ns)
{
	size_t n = c->ngaps < CURVE_GAPS ? c->ngaps : CURVE_GAPS;
	for (size_t i = 0; i < n; i++)
		if (c->gaps[i].from_ns < t1_ns && c->gaps[i].to_ns > t0_ns)
			return true;
	return false;
}

void curve_prune(struct curve *c, uint64_t keep_from_ns)
{
	if (c->n < 2 || c->s[1].t_ns > keep_from_ns)
		return;
	/* Largest i with s[i].t <= keep_from: a boundary at keep_from interpolates from it. */
	size_t lo = 1, hi = c->n;
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		if (c->s[mid].t_ns <= keep_from_ns)
			lo = mid;
		else
			hi = mid;
	}
	size_t i = lo;
	memmove(c->s, c->s + i, (c->n - i) * sizeof(*c->s));
	c->n -= i;
}
