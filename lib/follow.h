/*
 * Following an upstream cumulative total across its counts: how much a consumer's
 * own counter advances when a message brings a producer's total (estimd's node
 * totals in exportd, a VM's total from `wattbus vmpub` in powerd's bus source and
 * in vmpub itself). One rule for every stage, so that a total that goes back means
 * the same thing everywhere:
 *
 *   The counter advances by the difference of the upstream total only between two
 *   steps of the same count (same src and total_epoch), when the total did not go
 *   back and the difference is within the physical bound over the time since the
 *   last step counted. In every other case (the first step, a new count, a total
 *   that went back, a difference past the bound) it advances by the step's own
 *   energy (a slot's, the part not counted yet) and takes the step's total as its
 *   new baseline. A step without a total advances by its own energy and forgets the
 *   baseline. The counter never holds, never adds a whole count, never goes back.
 *
 * Why: within one count a difference holds every message lost since the last one
 * (a lost message costs resolution, never energy). A total that goes back within
 * its count is a producer resumed from a checkpoint older than its last message:
 * what it told since that checkpoint was counted once already and is not told
 * again, so its next total is a new baseline and the step's own energy is the new
 * energy; holding at the old value instead (what powerd's bus source did) loses the
 * new energy until the total passes the old one again, up to a checkpoint's worth
 * each time. A new count cannot be diffed with (schemas: differences only within
 * one src and total_epoch): adding all of it (what the bus source did) counts twice
 * whatever the count holds from before the last step counted (a second producer, a
 * slot sent again after a restart), so the step's own energy is what is known to be
 * new; what is lost is only the steps of the new count that never arrived. A wrap
 * is never assumed: the wire's totals do not wrap (hardware wraps are corrected in
 * powerd), so a total near 2^63 followed by a small one is a total that went back.
 * Energy with no time to draw it in (past the bound) is not trusted. Everything
 * added is >= 0 and the caller's counter saturates (wb_sat_add), so a Prometheus
 * counter built from it never goes back.
 *
 * The caller keeps one struct wb_follow per followed total (per host and zone), and
 * orders the steps: a step no later than the last one counted is not a step
 * (schemas/README.md, "Totals", rule 1). Pure: no clock, no I/O.
 */
#ifndef WB_FOLLOW_H
#define WB_FOLLOW_H

#include <stdbool.h>
#include <stdint.h>

/* One followed total: the baseline its next step is diffed with. Zeroed: nothing followed. */
struct wb_follow {
	bool have;	  /* count and last_uj hold a baseline */
	uint64_t count;	  /* the count last_uj belongs to (wb_follow_count) */
	uint64_t last_uj; /* the upstream total at the last step */
};

/* What one step added. */
enum wb_follow_how {
	WB_FOLLOW_DIFF,	       /* same count, forward, within the bound: the totals' difference */
	WB_FOLLOW_FIRST,       /* nothing followed before: the step's own energy */
	WB_FOLLOW_NEW_COUNT,   /* another count than the baseline's: the step's own */
	WB_FOLLOW_BACK,	       /* the total went back within its count: the step's own */
	WB_FOLLOW_IMPLAUSIBLE, /* forward by more than the bound allows: the step's own */
	WB_FOLLOW_NONE,	       /* the step has no total: the step's own, the baseline forgotten */
};

struct wb_follow_step {
	uint64_t count;	   /* the count of total_uj (wb_follow_count); 0: the step has no total */
	uint64_t total_uj; /* the upstream total, cumulative within count */
	uint64_t own_uj;   /* the step's own energy: what it adds when totals are not diffed */
	uint64_t since_ns; /* time since the last step counted: the bound's window */
	double max_w; /* the physical bound (exportd: [global] max_zone_w; powerd's bus source: its
			 max_power_w); <= 0: none */
};

/* The count named by a producer's src and its total_epoch; 0 when total_epoch is 0 (no totals). */
uint64_t wb_follow_count(const char *src, uint64_t total_epoch);

/*
 * One step of the total: returns the energy the consumer's counter advances by
 * (the rule above), and sets *how (when not NULL). f's baseline becomes the
 * step's total (or is forgotten, WB_FOLLOW_NONE).
 */
uint64_t wb_follow_step(struct wb_follow *f, const struct wb_follow_step *s,
			enum wb_follow_how *how);

/* "difference", "first", "new count", "went back", "implausible", "no total". */
const char *wb_follow_how_name(enum wb_follow_how how);

#endif
