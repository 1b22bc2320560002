/*
 * Idle/active split of one zone's energy in one slot: Kepler's CPU-usage ratio
 * (the default), a fixed idle power, or an idle power learned as the intercept
 * of zone power against CPU usage over recent slots.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "estimd.h"

const char *idle_method_name(enum idle_method method)
{
	switch (method) {
	case IDLE_RATIO:
		return "ratio";
	case IDLE_FIXED:
		return "fixed";
	case IDLE_REGRESSION:
		return "regression";
	}
	return "?";
}

int idle_parse_fixed(const char *const *entries, size_t n, struct idle_conf *conf, char *err,
		     size_t errlen)
{
	conf->nfixed = 0;
	for (size_t i = 0; i < n; i++) {
		const char *e = entries[i];
		const char *eq = strchr(e, '=');
		if (!eq || eq == e || (size_t)(eq - e) >= sizeof(conf->fixed[0].key)) {
			snprintf(err, errlen, "idle_w: '%s' is not ZONE=WATTS (e.g. package=20)",
				 e);
			return -1;
		}
		char *end;
		double w = strtod(eq + 1, &end);
		if (end == eq + 1 || *end || !isfinite(w) || w < 0 || w > 1e6) {
			snprintf(err, errlen, "idle_w: '%s': watts must be a number from 0 to 1e6",
				 e);
			return -1;
		}
		if (conf->nfixed >= IDLE_FIXED_MAX) {
			snprintf(err, errlen, "idle_w: more than %d entries", IDLE_FIXED_MAX);
			return -1;
		}
		struct idle_fixed *f = &conf->fixed[conf->nfixed++];
		snprintf(f->key, sizeof(f->key), "%.*s", (int)(eq - e), e);
		f->watts = w;
	}
	return 0;
}

void idle_reg_free(struct idle_reg *r)
{
	free(r->u);
	free(r->p);
	memset(r, 0, sizeof(*r));
}

const struct idle_fixed *idle_find_fixed(const struct idle_conf *conf, const char *name,
					 const char *zone)
{
	for (size_t i = 0; i < conf->nfixed; i++)
		if (strcmp(conf->fixed[i].key, name) == 0)
			return &conf->fixed[i];
	for (size_t i = 0; i < conf->nfixed; i++)
		if (strcmp(conf->fixed[i].key, zone) == 0)
			return &conf->fixed[i];
	return NULL;
}

static uint64_t idle_of_watts(double watts, double slot_s, uint64_t energy_uj)
{
	double uj = watts * slot_s * 1e6;
	if (!(uj > 0))
		return 0;
	if (uj >= (double)energy_uj)
		return energy_uj;
	uint64_t v = (uint64_t)llround(uj);
	return v > energy_uj ? energy_uj : v;
}

static void ratio_split(uint64_t energy_uj, uint64_t busy_ns, uint64_t total_ns,
			uint64_t *active_uj)
{
	if (total_ns == 0) {
		/* No CPU time in the slot says nothing ran: all idle. */
		*active_uj = 0;
		return;
	}
	if (busy_ns > total_ns)
		busy_ns = total_ns;
	*active_uj = (uint64_t)((unsigned __int128)energy_uj * busy_ns / total_ns);
}

/* Remember (u, p) and refit the intercept when the window shows enough spread in usage. */
static void reg_learn(const struct idle_conf *conf, struct idle_reg *r, double u, double p)
{
	if (r->cap != conf->window) {
		idle_reg_free(r);
		r->cap = conf->window ? conf->window : 1;
		r->u = calloc(r->cap, sizeof(double));
		r->p = calloc(r->cap, sizeof(double));
		if (!r->u || !r->p) {
			idle_reg_free(r);
			return;
		}
	}
	r->u[r->head] = u;
	r->p[r->head] = p;
	r->head = (r->head + 1) % r->cap;
	if (r->n < r->cap)
		r->n++;
	if (r->n < conf->min_slots || r->n < 2)
		return;
	double mu = 0, mp = 0;
	for (size_t i = 0; i < r->n; i++) {
		mu += r->u[i];
		mp += r->p[i];
	}
	mu /= (double)r->n;
	mp /= (double)r->n;
	double suu = 0, sup = 0;
	for (size_t i = 0; i < r->n; i++) {
		suu += (r->u[i] - mu) * (r->u[i] - mu);
		sup += (r->u[i] - mu) * (r->p[i] - mp);
	}
	/*
	 * Under sustained full load every u is near 1 and the intercept is an
	 * extrapolation from nothing: keep the last idle power learned while the
	 * load varied.
	 */
	if (sqrt(suu / (double)r->n) < conf->min_spread)
		return;
	double slope = sup / suu;
	double a = mp - slope * mu;
	if (!isfinite(a))
		return;
	r->idle_w = a > 0 ? a : 0;
	r->valid = true;
}

enum idle_method idle_split(const struct idle_conf *conf, struct idle_reg *reg, const char *name,
			    const char *zone, uint64_t energy_uj, double slot_s, uint64_t busy_ns,
			    uint64_t total_ns, uint64_t *active_uj, uint64_t *idle_uj)
{
	enum idle_method used = IDLE_RATIO;
	uint64_t idle = 0;
	if (conf->method == IDLE_FIXED) {
		const struct idle_fixed *f = idle_find_fixed(conf, name, zone);
		if (f) {
			idle = idle_of_watts(f->watts, slot_s, energy_uj);
			used = IDLE_FIXED;
		}
	} else if (conf->method == IDLE_REGRESSION && reg) {
		if (slot_s > 0 && total_ns > 0) {
			double u =
			    (double)(busy_ns < total_ns ? busy_ns : total_ns) / (double)total_ns;
			reg_learn(conf, reg, u, (double)energy_uj / 1e6 / slot_s);
		}
		if (reg->valid) {
			idle = idle_of_watts(reg->idle_w, slot_s, energy_uj);
			used = IDLE_REGRESSION;
		}
	}
	if (used == IDLE_RATIO) {
		ratio_split(energy_uj, busy_ns, total_ns, active_uj);
		*idle_uj = energy_uj - *active_uj;
	} else {
		*idle_uj = idle;
		*active_uj = energy_uj - idle;
	}
	return used;
}
