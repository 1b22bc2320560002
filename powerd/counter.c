/*
 * Turning hardware readings into cumulative microjoules: energy counters that
 * wrap at their range, and power readings integrated by trapezoids. Pure code:
 * readings and times in, verdicts out; nothing here touches files or logs.
 */
#include "powerd.h"

#define NS_PER_S 1000000000ull
/*
 * RAPL counters advance about every millisecond, so a reading can hold up to
 * that much more energy than the time between reads accounts for; the
 * plausibility limit allows this much extra time.
 */
#define COUNTER_SLACK_NS 2000000ull
/* A wall-clock step between readings that differs this much from the monotonic step means the clock
 * was set. */
#define INTEG_CLOCK_STEP_NS 50000000ull

const char *pd_verdict_name(enum pd_verdict v)
{
	switch (v) {
	case PD_FIRST:
		return "first";
	case PD_OK:
		return "ok";
	case PD_WRAP:
		return "wrap";
	case PD_REBASED:
		return "rebased";
	case PD_BACKWARDS:
		return "backwards";
	case PD_JUMP:
		return "jump";
	case PD_RANGE:
		return "range";
	case PD_STALE:
		return "stale";
	}
	return "?";
}

void counter_init(struct pd_counter *c, uint64_t modulus, uint64_t uj_mul, uint64_t uj_div,
		  uint64_t max_uw)
{
	*c = (struct pd_counter){.modulus = modulus,
				 .uj_mul = uj_mul ? uj_mul : 1,
				 .uj_div = uj_div ? uj_div : 1,
				 .max_uw = max_uw};
}

static uint64_t ticks_to_uj(const struct pd_counter *c, uint64_t ticks)
{
	unsigned __int128 v = (unsigned __int128)ticks * c->uj_mul / c->uj_div;
	return v > UINT64_MAX ? UINT64_MAX : (uint64_t)v;
}

/*
 * The increment from (from, from_ns) to (raw, mono_ns): PD_OK or PD_WRAP with
 * *ticks set, or why it is not believable. One wrap at most is assumed: two
 * wraps between readings look exactly like one (hence the minimum safe
 * interval, range / highest power, in docs/powerd.md).
 */
static enum pd_verdict counter_step(const struct pd_counter *c, uint64_t from, uint64_t from_ns,
				    uint64_t raw, uint64_t mono_ns, uint64_t *ticks)
{
	enum pd_verdict v;
	if (raw >= from) {
		*ticks = raw - from;
		v = PD_OK;
	} else if (c->modulus) {
		*ticks = c->modulus - from + raw;
		v = PD_WRAP;
	} else {
		return PD_BACKWARDS;
	}
	uint64_t elapsed_ns = mono_ns > from_ns ? mono_ns - from_ns : 0;
	unsigned __int128 limit_uj =
	    (unsigned __int128)c->max_uw * (elapsed_ns + COUNTER_SLACK_NS) / NS_PER_S;
	if ((unsigned __int128)ticks_to_uj(c, *ticks) > limit_uj)
		return v == PD_WRAP ? PD_BACKWARDS : PD_JUMP;
	return v;
}

/*
 * A reading that is not believable against the last good one is held as a
 * candidate. If a later reading is believable against the last good one, the
 * candidate was a glitch and nothing was lost. If a later reading has moved
 * on from the candidate at a believable rate, the hardware counter really
 * restarted (a driver reload, a firmware reset): the count goes on with what
 * the new counter measured since the candidate; the gap before it is unknown
 * and adds nothing. A candidate that does not move (a stuck bad value) never
 * becomes the new baseline, so returning to the old count invents nothing.
 */
enum pd_verdict counter_update(struct pd_counter *c, uint64_t raw, uint64_t mono_ns)
{
	if (c->modulus && raw >= c->modulus)
		return PD_RANGE;
	if (!c->have) {
		c->have = true;
		c->last_raw = raw;
		c->last_mono_ns = mono_ns;
		c->total_ticks = raw;
		return PD_FIRST;
	}
	uint64_t ticks = 0;
	enum pd_verdict v = counter_step(c, c->last_raw, c->last_mono_ns, raw, mono_ns, &ticks);
	if (v == PD_OK || v == PD_WRAP) {
		c->total_ticks += ticks;
		c->last_raw = raw;
		c->last_mono_ns = mono_ns;
		c->have_cand = false;
		return v;
	}
	if (c->have_cand) {
		enum pd_verdict vc =
		    counter_step(c, c->cand_raw, c->cand_mono_ns, raw, mono_ns, &ticks);
		if ((vc == PD_OK || vc == PD_WRAP) && ticks > 0) {
			c->total_ticks += ticks;
			c->last_raw = raw;
			c->last_mono_ns = mono_ns;
			c->have_cand = false;
			return PD_REBASED;
		}
		if (vc == PD_OK)
			return v; /* the same bad value again: keep the first sighting */
	}
	c->have_cand = true;
	c->cand_raw = raw;
	c->cand_mono_ns = mono_ns;
	return v;
}

uint64_t counter_uj(const struct pd_counter *c)
{
	return ticks_to_uj(c, c->total_ticks);
}

uint64_t counter_range_uj(const struct pd_counter *c)
{
	return c->modulus ? ticks_to_uj(c, c->modulus - 1) : 0;
}

/* A reading lost for a few seconds (a GPU reset, a slow meter) is bridged however short the
 * interval; at 1 s and above, ten missed samples are. */
#define INTEG_BRIDGE_MIN_NS (10 * NS_PER_S)
#define INTEG_BRIDGE_INTERVALS 10

uint64_t integ_bridge_ns(uint64_t interval_ns)
{
	if (interval_ns > UINT64_MAX / INTEG_BRIDGE_INTERVALS)
		return UINT64_MAX;
	uint64_t n = INTEG_BRIDGE_INTERVALS * interval_ns;
	return n > INTEG_BRIDGE_MIN_NS ? n : INTEG_BRIDGE_MIN_NS;
}

void integ_init(struct pd_integrator *in, uint64_t max_uw, uint64_t max_gap_ns)
{
	*in = (struct pd_integrator){.max_uw = max_uw, .max_gap_ns = max_gap_ns};
}

static uint64_t absdiff(uint64_t a, uint64_t b)
{
	return a > b ? a - b : b - a;
}

uint64_t integ_step_ns(uint64_t last_t_ns, uint64_t last_mono_ns, uint64_t t_ns, uint64_t mono_ns)
{
	if (mono_ns <= last_mono_ns)
		return 0;
	uint64_t dt_mono = mono_ns - last_mono_ns;
	/*
	 * The grid step makes the energy between two published samples exactly the
	 * trapezoid over their times; reading lateness only shifts energy between
	 * neighbouring samples. A set wall clock would invent or drop time, so then
	 * the monotonic step is used.
	 */
	if (t_ns > last_t_ns &&
	    absdiff(t_ns - last_t_ns, dt_mono) <= dt_mono / 2 + INTEG_CLOCK_STEP_NS)
		return t_ns - last_t_ns;
	return dt_mono;
}

enum pd_verdict integ_add(struct pd_integrator *in, uint64_t uw, uint64_t t_ns, uint64_t mono_ns)
{
	if (uw > in->max_uw)
		return PD_RANGE;
	if (!in->have) {
		in->have = true;
		in->last_uw = uw;
		in->last_t_ns = t_ns;
		in->last_mono_ns = mono_ns;
		return PD_FIRST;
	}
	if (mono_ns <= in->last_mono_ns)
		return PD_STALE;
	uint64_t dt = integ_step_ns(in->last_t_ns, in->last_mono_ns, t_ns, mono_ns);
	uint64_t prev_uw = in->last_uw;
	in->last_uw = uw;
	in->last_t_ns = t_ns;
	in->last_mono_ns = mono_ns;
	if (in->max_gap_ns && dt > in->max_gap_ns)
		return PD_REBASED; /* too long without readings to interpolate: new baseline */
	in->rem += (unsigned __int128)(prev_uw + uw) * dt;
	in->total_uj += (uint64_t)(in->rem / (2 * NS_PER_S));
	in->rem %= 2 * NS_PER_S;
	return PD_OK;
}
