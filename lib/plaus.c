/*
 * Plausibility rules shared by the stages: the message times checked on receipt
 * (a table of where each kind keeps its times), saturating sums and marks,
 * and the one rule that turns a model's answer into a zone's power.
 */
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>

#include "plaus.h"

/* Where each kind keeps its times: t, or the slot t0 .. t1. */
static const struct {
	const char *t0, *t1; /* key names, for the error message */
	size_t off0, off1;   /* offsets in struct wb_msg; off1 == 0: no slot */
} times[WB_NKINDS] = {
    [WB_POWER] = {"t", NULL, offsetof(struct wb_msg, power.t), 0},
    [WB_USAGE] = {"t", NULL, offsetof(struct wb_msg, usage.t), 0},
    [WB_ALIGNED] = {"t0", "t1", offsetof(struct wb_msg, aligned.t0),
		    offsetof(struct wb_msg, aligned.t1)},
    [WB_ESTIMATE] = {"t0", "t1", offsetof(struct wb_msg, estimate.t0),
		     offsetof(struct wb_msg, estimate.t1)},
    [WB_MODEL] = {"t", NULL, offsetof(struct wb_msg, model.t), 0},
    [WB_STAT] = {"t", NULL, offsetof(struct wb_msg, stat.t), 0},
};

static uint64_t field(const struct wb_msg *msg, size_t off)
{
	return *(const uint64_t *)((const char *)msg + off);
}

static int time_check(const struct wb_plaus *p, const char *key, uint64_t t, uint64_t now_ns,
		      struct wb_err *err)
{
	if (p->max_ahead_ns && t > now_ns && t - now_ns > p->max_ahead_ns) {
		err->reason = WB_R_IMPLAUSIBLE_TIME;
		snprintf(err->msg, sizeof(err->msg),
			 "%s %" PRIu64 " is %.3f s ahead of this host's clock (max_ahead %.3f s)",
			 key, t, (double)(t - now_ns) / 1e9, (double)p->max_ahead_ns / 1e9);
		return -1;
	}
	if (p->max_behind_ns && t < now_ns && now_ns - t > p->max_behind_ns) {
		err->reason = WB_R_IMPLAUSIBLE_TIME;
		snprintf(err->msg, sizeof(err->msg),
			 "%s %" PRIu64 " is %.3f s behind this host's clock (max_behind %.3f s)",
			 key, t, (double)(now_ns - t) / 1e9, (double)p->max_behind_ns / 1e9);
		return -1;
	}
	return 0;
}

int wb_plaus_check(const struct wb_plaus *p, const struct wb_msg *msg, uint64_t now_ns,
		   struct wb_err *err)
{
	if (!p || msg->kind < 0 || msg->kind >= WB_NKINDS || !times[msg->kind].t0)
		return 0;
	uint64_t t0 = field(msg, times[msg->kind].off0);
	if (time_check(p, times[msg->kind].t0, t0, now_ns, err) < 0)
		return -1;
	if (!times[msg->kind].off1)
		return 0;
	uint64_t t1 = field(msg, times[msg->kind].off1);
	if (time_check(p, times[msg->kind].t1, t1, now_ns, err) < 0)
		return -1;
	if (t1 < t0) {
		err->reason = WB_R_IMPLAUSIBLE_TIME;
		snprintf(err->msg, sizeof(err->msg),
			 "slot t0 %" PRIu64 " .. t1 %" PRIu64 " goes back", t0, t1);
		return -1;
	}
	if (p->max_slot_ns && t1 - t0 > p->max_slot_ns) {
		err->reason = WB_R_IMPLAUSIBLE_TIME;
		snprintf(err->msg, sizeof(err->msg),
			 "slot of %.3f s is longer than max_slot %.3f s", (double)(t1 - t0) / 1e9,
			 (double)p->max_slot_ns / 1e9);
		return -1;
	}
	return 0;
}

uint64_t wb_mark_next(uint64_t *last, uint64_t t)
{
	uint64_t next = t > *last ? t : *last + 1;
	if (*last >= WB_WIRE_MAX || next > WB_WIRE_MAX)
		next = t ? t : 1;
	if (next > WB_WIRE_MAX)
		next = WB_WIRE_MAX;
	*last = next;
	return next;
}

uint64_t wb_plaus_energy_max_uj(uint64_t dt_ns, double max_w)
{
	/* W * ns / 1e3 is uJ */
	double e = max_w * (double)dt_ns / 1e3;
	if (!(e >= 0))
		return 0;
	return e >= (double)WB_WIRE_MAX ? WB_WIRE_MAX : (uint64_t)e;
}

bool wb_rewind_see(struct wb_rewind *r, uint64_t t)
{
	r->n = r->n && t > r->last_t ? r->n + 1 : 1;
	r->last_t = t;
	if (r->n < WB_REWIND_SAMPLES)
		return false;
	r->n = 0;
	return true;
}

static double clip_w(double w, double max_w)
{
	if (!isfinite(w) || w < 0)
		return 0;
	return w > max_w ? max_w : w;
}

enum wb_power_fault wb_plaus_zone_power(double p_w, double p0_w, double max_w,
					struct wb_zone_power *out)
{
	if (!(max_w >= 0))
		max_w = 0;
	out->node_w = clip_w(p_w, max_w);
	out->idle_w = clip_w(p0_w, max_w);
	if (out->idle_w > out->node_w)
		out->idle_w = out->node_w;
	out->active_w = out->node_w - out->idle_w;
	if (!isfinite(p_w) || !isfinite(p0_w))
		return WB_POWER_NONFINITE;
	if (p_w > max_w || p0_w > max_w)
		return WB_POWER_ABOVE;
	if (p_w < 0 || p0_w < 0)
		return WB_POWER_NEGATIVE;
	if (p0_w > p_w)
		return WB_POWER_IDLE_ABOVE;
	return WB_POWER_OK;
}

const char *wb_power_fault_name(enum wb_power_fault f)
{
	switch (f) {
	case WB_POWER_OK:
		return "plausible";
	case WB_POWER_NONFINITE:
		return "not finite";
	case WB_POWER_ABOVE:
		return "above the zone's bound";
	case WB_POWER_NEGATIVE:
		return "negative";
	case WB_POWER_IDLE_ABOVE:
		return "idle above total";
	}
	return "?";
}
