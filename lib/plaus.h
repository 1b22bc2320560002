/*
 * Plausibility: what a schema-valid message may still not claim. Times within a
 * window around the receiver's clock, slots of bounded length, sums that stay
 * within what the wire carries (0 .. 2^63-1), marks that never pass it, and
 * energies a zone could have drawn. One rule per fault, shared by every stage.
 */
#ifndef WB_PLAUS_H
#define WB_PLAUS_H

#include <stdbool.h>
#include <stdint.h>

#include "codec.h"

/* The largest integer any schema admits: a value past it cannot be encoded. */
#define WB_WIRE_MAX ((uint64_t)INT64_MAX)

/* The highest plausible power of one zone ([global] max_zone_w's default, and powerd's
 * max_power_w and alignd's bridge_max_w when [global] max_zone_w is 0). */
#define WB_ZONE_MAX_W 5000.0
/* The highest plausible power of one host, its zones summed ([global] max_host_w's default):
 * zones overlap (psys holds package, package holds core), so this is well above any one machine. */
#define WB_HOST_MAX_W 50000.0

struct wb_strlist;

/* Receive-side bounds ([global] max_ahead, max_behind, max_slot, max_zone_w, max_host_w,
 * extra_src); 0 turns one off. */
struct wb_plaus {
	uint64_t max_ahead_ns;	/* a time later than the receiver's clock by more is refused */
	uint64_t max_behind_ns; /* a time earlier than the receiver's clock by more is refused */
	uint64_t max_slot_ns;	/* a slot (t0, t1] longer than this is refused */
	double max_zone_w;	/* a zone's energy implying more average power is refused */
	double max_host_w;	/* a host's zones' average powers summed past this are refused */
	bool
	    one_producer; /* a host's power, usage, aligned, estimate come from one src at a time */
	const struct wb_strlist *extra_src; /* srcs allowed to publish power beside a host's own */
};

/*
 * Check every time a message carries (t, or t0 and t1) against now_ns. Returns 0,
 * or -1 with err filled (reason WB_R_IMPLAUSIBLE_TIME, naming the key).
 */
int wb_plaus_check(const struct wb_plaus *p, const struct wb_msg *msg, uint64_t now_ns,
		   struct wb_err *err);

/* a + b, or WB_WIRE_MAX when the sum would pass it (*saturated set, when given). */
static inline uint64_t wb_sat_add(uint64_t a, uint64_t b, bool *saturated)
{
	uint64_t s;
	if (__builtin_add_overflow(a, b, &s) || s > WB_WIRE_MAX) {
		if (saturated)
			*saturated = true;
		return WB_WIRE_MAX;
	}
	return s;
}

/*
 * The next value of a stage-wide mark that names counts (total epochs): t when it
 * is past *last, else *last + 1. A mark that cannot advance within WB_WIRE_MAX
 * (a poisoned value, saved and loaded again) starts again from t, so that one
 * frame never stops a stage from naming new counts. *last is updated.
 */
uint64_t wb_mark_next(uint64_t *last, uint64_t t);

/*
 * A producer's clock that jumped ahead for one sample and came back leaves every
 * later sample "not after the last one" until the clock catches up. After
 * WB_REWIND_SAMPLES consecutive samples behind the last accepted time, each later
 * than the one before, the time line is taken to have been set back: the stage
 * restarts it from the newest sample and counts it.
 */
#define WB_REWIND_SAMPLES 3

struct wb_rewind {
	uint64_t last_t; /* the last sample seen behind */
	unsigned n;	 /* consecutive such samples, each after the one before */
};

/* Feed a sample at t that is not after the accepted time: true when the time line should restart at
 * t. */
bool wb_rewind_see(struct wb_rewind *r, uint64_t t);
/* An accepted sample: the count starts over. */
static inline void wb_rewind_reset(struct wb_rewind *r)
{
	r->n = 0;
}

/* The most energy (uJ) a zone drawing max_w can use in dt_ns, saturated at WB_WIRE_MAX. */
uint64_t wb_plaus_energy_max_uj(uint64_t dt_ns, double max_w);

/* What a power model's (or an estimator sidecar's) answer for one zone claimed that no zone can. */
enum wb_power_fault {
	WB_POWER_OK,
	WB_POWER_NONFINITE,  /* NaN or infinite, at the slot's features or at zero usage */
	WB_POWER_ABOVE,	     /* above the zone's bound */
	WB_POWER_NEGATIVE,   /* below 0 */
	WB_POWER_IDLE_ABOVE, /* the zero-usage (idle) power above the power at the slot's features
			      */
};

/* A zone's power in one slot, as published: node_w == idle_w + active_w, all in [0, max_w]. */
struct wb_zone_power {
	double node_w, idle_w, active_w;
};

/*
 * No impossible watt, one rule for every power a model or a sidecar gives: the
 * zone's node power is p_w (the answer at the slot's features) clipped to
 * [0, max_w] (a non-finite answer counts as 0); its idle power is p0_w (the
 * answer at zero usage) clipped the same way and to the node power; active is
 * the difference, never below 0. Kepler's estimator clips the same way at 0
 * (`y[y < 0] = 0`). Returns the first fault of the answer as given, in the order
 * of enum wb_power_fault (WB_POWER_OK: nothing was clipped); the caller decides
 * which faults refuse the answer.
 */
enum wb_power_fault wb_plaus_zone_power(double p_w, double p0_w, double max_w,
					struct wb_zone_power *out);
/* "not finite", "above the bound", ... for a log line. */
const char *wb_power_fault_name(enum wb_power_fault f);

/* What one zone claims to have drawn: e_uj over dt_ns. */
struct wb_claim {
	const char *zone;
	uint64_t e_uj;
	uint64_t dt_ns;
};

/*
 * The physical bound, the one rule every stage that receives energy applies: each
 * zone's claim at most max_zone_w (e_uj at most wb_plaus_energy_max_uj(dt_ns, max_zone_w);
 * energy in no time is refused), the claims' average powers summed at most max_host_w.
 * what names the stream in the message ("aligned/h1"). Returns 0, or -1 with err filled
 * (reason WB_R_IMPLAUSIBLE_POWER, naming the zone and the watts).
 */
int wb_plaus_power(const struct wb_plaus *p, const char *what, const struct wb_claim *c, size_t n,
		   struct wb_err *err);

/*
 * The bound over a stream, for every kind that carries energy: what each host's zones
 * said last (per kind/host/zone: src, epoch, time, counter), so that a message is
 * judged by what it adds since then.
 *  - power: a zone's counter step within one src and epoch, over the time since its
 *    last sample (a new epoch is a restart: alignd bridges it within bridge_max_w);
 *  - aligned, estimate: a zone's slot energy over the time since the end of the last
 *    slot that carried it (a slot after a silence carries the silence), and, within one
 *    src and total_epoch, the step of its cumulative total_uj over the same time.
 * A zone another src published last is refused (WB_R_DUP_PRODUCER) unless owner says
 * the message's src is the host's producer (it took over). Bounded: the least recently
 * seen hosts are forgotten first when max_zones zone records are held.
 */
struct wb_bound;
struct wb_bound *wb_bound_new(size_t max_zones);
void wb_bound_destroy(struct wb_bound **self_p);
/* Check msg; on success (0) remember it. -1 with err filled: refused, nothing remembered. */
int wb_bound_check(struct wb_bound *self, const struct wb_plaus *p, const struct wb_msg *msg,
		   bool owner, struct wb_err *err);

#endif
