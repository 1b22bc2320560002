/*
 * Following an upstream cumulative total across its counts: the one rule for a
 * total that goes back, a new count, a lost message and a step past the bound
 * (follow.h says which and why).
 */
#include <string.h>

#include "follow.h"
#include "hash.h"
#include "plaus.h"

uint64_t wb_follow_count(const char *src, uint64_t total_epoch)
{
	if (!total_epoch)
		return 0;
	/* never 0, which says "no total" */
	uint64_t c = wb_hash2(wb_hash_str(src ? src : ""), total_epoch);
	return c ? c : 1;
}

uint64_t wb_follow_step(struct wb_follow *f, const struct wb_follow_step *s,
			enum wb_follow_how *how)
{
	enum wb_follow_how h;
	uint64_t add = s->own_uj;
	if (!s->count) {
		h = WB_FOLLOW_NONE;
	} else if (!f->have) {
		h = WB_FOLLOW_FIRST;
	} else if (f->count != s->count) {
		h = WB_FOLLOW_NEW_COUNT;
	} else if (s->total_uj < f->last_uj) {
		h = WB_FOLLOW_BACK;
	} else {
		uint64_t d = s->total_uj - f->last_uj;
		/* No more than the step's own needs no bound: that passed it on receipt. */
		if (d > s->own_uj && s->max_w > 0 &&
		    d > wb_plaus_energy_max_uj(s->since_ns, s->max_w)) {
			h = WB_FOLLOW_IMPLAUSIBLE;
		} else {
			h = WB_FOLLOW_DIFF;
			add = d;
		}
	}
	if (h == WB_FOLLOW_NONE) {
		memset(f, 0, sizeof(*f));
	} else {
		f->have = true;
		f->count = s->count;
		f->last_uj = s->total_uj;
	}
	if (how)
		*how = h;
	return add;
}

const char *wb_follow_how_name(enum wb_follow_how how)
{
	static const char *const names[] = {
	    [WB_FOLLOW_DIFF] = "difference",	     [WB_FOLLOW_FIRST] = "first",
	    [WB_FOLLOW_NEW_COUNT] = "new count",     [WB_FOLLOW_BACK] = "went back",
	    [WB_FOLLOW_IMPLAUSIBLE] = "implausible", [WB_FOLLOW_NONE] = "no total",
	};
	return (unsigned)how < sizeof(names) / sizeof(names[0]) ? names[how] : "unknown";
}
