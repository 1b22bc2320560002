/*
 * The set of zones powerd publishes and one sample of them: read each zone through its source,
 * account the reading, count and log (rate-limited, with the path) whatever
 * is wrong, and leave that zone out of the sample while the others go on.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bus.h"
#include "clock.h"
#include "codec.h"
#include "grow.h"
#include "job.h"
#include "powerd.h"

struct pd_set *pd_set_new(const struct pd_opts *opts)
{
	struct pd_set *set = calloc(1, sizeof(*set));
	if (!set) {
		log_errx("out of memory");
		return NULL;
	}
	set->opts = opts;
	return set;
}

void pd_set_destroy(struct pd_set **self_p)
{
	if (!self_p || !*self_p)
		return;
	struct pd_set *set = *self_p;
	for (size_t i = 0; i < set->n; i++)
		if (set->zones[i].src->close_zone)
			set->zones[i].src->close_zone(&set->zones[i]);
	for (unsigned s = 0; s < pd_nsources; s++)
		if (pd_sources[s]->destroy)
			pd_sources[s]->destroy(set);
	free(set->zones);
	free(set);
	*self_p = NULL;
}

void **pd_set_state(struct pd_set *set, const struct pd_source *src)
{
	return &set->state[pd_source_index(src)];
}

void *pd_source_counts(struct pd_set *set, const struct pd_source *src)
{
	return set->counts.src[pd_source_index(src)];
}

#define R(f) WB_STAT_ROW(struct pd_counts, f, #f)
const struct wb_stat_row pd_stat_rows[] = {
    R(samples),	     R(samples_missed),	 R(zone_samples_skipped), R(read_errors),
    R(parse_errors), R(backwards),	 R(implausible),	  R(rebased),
    R(wraps),	     R(lateness_max_ns), R(lateness_mean_ns),	  R(lateness_sum_ns),
    R(clock_steps),
};
#undef R
const size_t pd_nstat_rows = sizeof(pd_stat_rows) / sizeof(pd_stat_rows[0]);

static uint64_t row_value(const void *base, const struct wb_stat_row *rows, size_t n,
			  const char *name, bool *found)
{
	for (size_t i = 0; i < n && !*found; i++)
		if (!strcmp(rows[i].name, name)) {
			*found = true;
			return *(const uint64_t *)((const char *)base + rows[i].off);
		}
	return 0;
}

uint64_t pd_set_counter(const struct pd_set *set, const char *name)
{
	bool found = false;
	uint64_t v = row_value(&set->counts, pd_stat_rows, pd_nstat_rows, name, &found);
	for (unsigned s = 0; s < pd_nsources && !found; s++)
		if (pd_sources[s]->stats)
			v = row_value(set->counts.src[s], pd_sources[s]->stats,
				      pd_sources[s]->nstats, name, &found);
	return v;
}

void pd_zone_init(struct pd_zone *z, const struct pd_source *src, const char *kind, unsigned index)
{
	memset(z, 0, sizeof(*z));
	z->src = src;
	z->index = index;
	z->fd = -1;
	snprintf(z->kind, sizeof(z->kind), "%s", kind);
}

void pd_zone_name(struct pd_zone *z, const char *kind, unsigned idx)
{
	/* a machine has one as a rule: the first has no number */
	if (idx == 0 && (!strcmp(kind, "platform") || !strcmp(kind, "psys")))
		snprintf(z->name, sizeof(z->name), "%s", kind);
	else
		snprintf(z->name, sizeof(z->name), "%s-%u", kind, idx);
}

void pd_held_zone_init(struct pd_set *set, struct pd_zone *z, const struct pd_source *src,
		       uint64_t hold_ns)
{
	unsigned n = 0;
	for (size_t i = 0; i < set->n; i++)
		n += !strcmp(set->zones[i].kind, "platform");
	pd_zone_init(z, src, "platform", n);
	pd_zone_name(z, "platform", n);
	z->is_power = true;
	z->hold_ns = hold_ns;
	integ_init(&z->integ, (uint64_t)(set->opts->max_power_w * 1e6),
		   pd_zone_bridge_ns(z, set->opts->interval_ns));
}

uint64_t pd_zone_bridge_ns(const struct pd_zone *z, uint64_t interval_ns)
{
	return z->hold_ns ? z->hold_ns + interval_ns : integ_bridge_ns(interval_ns);
}

void pd_zone_hold(struct pd_zone *z, uint64_t uw)
{
	z->held_uw = uw;
	z->held_mono_ns = wb_mono_ns();
}

struct pd_zone *pd_set_find(struct pd_set *set, const char *name)
{
	for (size_t i = 0; i < set->n; i++)
		if (strcmp(set->zones[i].name, name) == 0)
			return &set->zones[i];
	return NULL;
}

int pd_set_add(struct pd_set *set, const struct pd_zone *z)
{
	if (set->n >= PD_ZONES_MAX) {
		log_warnx("%s: more than %d zones, ignoring %s", z->path, PD_ZONES_MAX, z->name);
		return -1;
	}
	if (wb_grow(&set->zones, &set->cap, set->n + 1, sizeof(*set->zones), 16) < 0) {
		log_errx("out of memory adding zone %s", z->name);
		return -1;
	}
	struct pd_zone *nz = &set->zones[set->n];
	*nz = *z;
	nz->rl = (struct wb_ratelimit)WB_RATELIMIT_INIT;
	/* Names are unique per host: a clash (two sources, same kind) gets the source appended,
	 * then a number. */
	if (pd_set_find(set, nz->name)) {
		char base[64];
		snprintf(base, sizeof(base), "%s", nz->name);
		snprintf(nz->name, sizeof(nz->name), "%.40s-%s", base, nz->src->name);
		for (unsigned k = 2; pd_set_find(set, nz->name); k++)
			snprintf(nz->name, sizeof(nz->name), "%.40s-%s-%u", base, nz->src->name, k);
		log_info("zone %s from %s is also %s elsewhere; published as %s", base, nz->path,
			 base, nz->name);
	}
	struct wb_power_zone *w = &nz->wire;
	memset(w, 0, sizeof(*w));
	snprintf(w->name, sizeof(w->name), "%s", nz->name);
	snprintf(w->zone, sizeof(w->zone), "%s", nz->kind);
	snprintf(w->path, sizeof(w->path), "%s", nz->path);
	snprintf(w->source, sizeof(w->source), "%s", nz->src->name);
	w->index = nz->index;
	set->used |= 1u << pd_source_index(nz->src);
	return (int)set->n++;
}

double pd_zone_min_safe_s(const struct pd_zone *z, double max_power_w)
{
	if (z->is_power || max_power_w <= 0)
		return 0;
	uint64_t range = counter_range_uj(&z->ctr);
	return range ? (double)range / 1e6 / max_power_w : 0;
}

static uint64_t zone_total_uj(const struct pd_zone *z)
{
	return z->is_power ? z->integ.total_uj : counter_uj(&z->ctr);
}

enum pd_verdict pd_zone_account(struct pd_set *set, struct pd_zone *z, uint64_t value,
				uint64_t t_ns, uint64_t mono_ns)
{
	struct pd_counts *c = &set->counts;
	uint64_t last_raw = z->ctr.last_raw, last_ns = z->ctr.last_mono_ns;
	enum pd_verdict v = z->is_power ? integ_add(&z->integ, value, t_ns, mono_ns)
					: counter_update(&z->ctr, value, mono_ns);
	const char *what = z->path;
	switch (v) {
	case PD_FIRST:
	case PD_OK:
		break;
	case PD_WRAP:
		c->wraps++;
		log_debug("%s: %s wrapped (%llu -> %llu, range %llu)", z->name, what,
			  (unsigned long long)last_raw, (unsigned long long)value,
			  (unsigned long long)z->ctr.modulus);
		break;
	case PD_REBASED:
		c->rebased++;
		log_rl(&z->rl, WB_LOG_WARN,
		       "%s: %s: %s; counting goes on from here, the energy in the gap is unknown",
		       z->name, what,
		       z->is_power ? "no reading for too long to interpolate"
				   : "the counter restarted (two readings agree on the new value)");
		break;
	case PD_BACKWARDS:
		c->backwards++;
		log_rl(
		    &z->rl, WB_LOG_WARN,
		    "%s: %s: counter went back from %llu to %llu, not a plausible wrap (range %llu, %.3f s); sample skipped",
		    z->name, what, (unsigned long long)last_raw, (unsigned long long)value,
		    (unsigned long long)(z->ctr.modulus ? z->ctr.modulus - 1 : 0),
		    (double)(mono_ns - last_ns) / 1e9);
		break;
	case PD_JUMP:
		c->implausible++;
		log_rl(
		    &z->rl, WB_LOG_WARN,
		    "%s: %s: counter jumped from %llu to %llu in %.3f s, more than max_power_w %.0f W; sample skipped",
		    z->name, what, (unsigned long long)last_raw, (unsigned long long)value,
		    (double)(mono_ns - last_ns) / 1e9, set->opts->max_power_w);
		break;
	case PD_RANGE:
		c->implausible++;
		if (z->is_power)
			log_rl(&z->rl, WB_LOG_WARN,
			       "%s: %s: %llu uW is beyond max_power_w %.0f W; sample skipped",
			       z->name, what, (unsigned long long)value, set->opts->max_power_w);
		else
			log_rl(&z->rl, WB_LOG_WARN,
			       "%s: %s: %llu is beyond the counter's range %llu; sample skipped",
			       z->name, what, (unsigned long long)value,
			       (unsigned long long)(z->ctr.modulus - 1));
		break;
	case PD_STALE:
		break;
	}
	if (pd_verdict_added(v)) {
		z->energy_uj = zone_total_uj(z);
		z->readings++;
	}
	return v;
}

void pd_set_sample_begin(struct pd_set *set, uint64_t t_ns, uint64_t mono_ns)
{
	struct pd_counts *c = &set->counts;
	c->samples++;
	/* A source with no zones yet is sampled too: a sample is how its zones come (exec). */
	for (unsigned s = 0; s < pd_nsources; s++)
		if ((set->used & (1u << s)) && pd_sources[s]->sample)
			pd_sources[s]->sample(set, t_ns, mono_ns);
	for (size_t i = 0; i < set->n; i++) {
		struct pd_zone *z = &set->zones[i];
		if (!z->src->read)
			continue; /* pushed zones are accounted as their readings arrive */
		char err[PD_PATH_MAX + 128];
		uint64_t value;
		enum pd_read_err rc = z->src->read(z, &value, err, sizeof(err));
		if (rc == PD_READ_NONE) {
			log_debug("%s: %s; sample skipped", z->name, err);
		} else if (rc == PD_READ_IO) {
			bool perm = (errno == EACCES || errno == EPERM) && z->src->permission_hint;
			c->read_errors++;
			log_rl(&z->rl, WB_LOG_WARN, "%s: %s; sample skipped%s%s", z->name, err,
			       perm ? ": " : "", perm ? z->src->permission_hint() : "");
		} else if (rc == PD_READ_PARSE) {
			c->parse_errors++;
			log_rl(&z->rl, WB_LOG_WARN, "%s: %s; sample skipped", z->name, err);
		} else {
			z->updated =
			    pd_verdict_added(pd_zone_account(set, z, value, t_ns, mono_ns));
		}
	}
}

bool pd_set_busy(struct pd_set *set)
{
	for (unsigned s = 0; s < pd_nsources; s++)
		if ((set->used & (1u << s)) && pd_sources[s]->busy && pd_sources[s]->busy(set))
			return true;
	return false;
}

size_t pd_set_sample_end(struct pd_set *set, uint64_t t_ns, struct wb_power *out)
{
	struct pd_counts *c = &set->counts;
	out->t = t_ns;
	out->interval_ns = set->opts->interval_ns;
	out->zones = NULL;
	out->n_zones = 0;
	if (set->n == 0)
		return 0;
	out->zones = wb_array_new(set->n, sizeof(*out->zones));
	if (!out->zones) {
		log_errx("out of memory for a sample of %zu zones", set->n);
		c->zone_samples_skipped += set->n;
		return 0;
	}
	for (size_t i = 0; i < set->n; i++) {
		struct pd_zone *z = &set->zones[i];
		/* a zone read this sample, or pushed ones that had news since the last */
		bool ok = z->updated;
		z->updated = false;
		if (!ok) {
			c->zone_samples_skipped++;
			continue;
		}
		struct wb_power_zone *pz = &out->zones[out->n_zones++];
		*pz = z->wire;
		pz->energy_uj = z->energy_uj;
		pz->max_energy_range_uj = z->is_power ? 0 : counter_range_uj(&z->ctr);
		if (z->src->annotate)
			z->src->annotate(z, pz);
		z->published = true;
	}
	return out->n_zones;
}

size_t pd_set_sample(struct pd_set *set, uint64_t t_ns, uint64_t mono_ns, struct wb_power *out)
{
	pd_set_wait(set, 0); /* what came since the last sample (a start-up run) first */
	pd_set_sample_begin(set, t_ns, mono_ns);
	uint64_t end = wb_mono_ns() + set->opts->interval_ns + WB_JOB_STOP_NS;
	while (pd_set_busy(set) && wb_mono_ns() < end)
		pd_set_wait(set, end - wb_mono_ns());
	return pd_set_sample_end(set, t_ns, out);
}

size_t pd_set_nzones(const struct pd_set *set)
{
	return set->n;
}

void pd_zone_describe(const struct pd_set *set, size_t i, struct pd_zone_desc *d)
{
	const struct pd_zone *z = &set->zones[i];
	double tick = z->ctr.uj_div ? (double)z->ctr.uj_mul / (double)z->ctr.uj_div : 1;
	*d = (struct pd_zone_desc){
	    .name = z->name,
	    .kind = z->kind,
	    .source = z->src->name,
	    .path = z->path,
	    .is_power = z->is_power,
	    .polled = z->src->read != NULL,
	    .uj_per_tick = tick,
	    .range_uj = z->is_power ? 0 : counter_range_uj(&z->ctr),
	    .wrap_uj = z->ctr.modulus && !z->is_power ? (double)z->ctr.modulus * tick - 1 : 0,
	    .readings = z->readings,
	    .last = z->is_power ? (double)z->integ.last_uw : (double)z->ctr.last_raw * tick,
	    .last_mono_ns = z->is_power ? z->integ.last_mono_ns : z->ctr.last_mono_ns,
	};
}

enum pd_read_err pd_zone_poll(struct pd_set *set, size_t i, double *value, char *err, size_t errlen)
{
	struct pd_zone *z = &set->zones[i];
	if (!z->src->read) {
		snprintf(err, errlen, "%s: its readings come as they arrive, not when asked",
			 z->name);
		return PD_READ_NONE;
	}
	uint64_t v;
	enum pd_read_err rc = z->src->read(z, &v, err, errlen);
	if (rc == PD_READ_OK) {
		struct pd_zone_desc d;
		pd_zone_describe(set, i, &d);
		*value = z->is_power ? (double)v : (double)v * d.uj_per_tick;
	}
	return rc;
}

bool pd_set_wait(struct pd_set *set, uint64_t wait_ns)
{
	struct pollfd pfd[PD_SOURCES_MAX];
	unsigned src[PD_SOURCES_MAX], n = 0;
	for (unsigned s = 0; s < pd_nsources; s++) {
		if (!(set->used & (1u << s)))
			continue;
		if (pd_sources[s]->tend)
			pd_sources[s]->tend(set);
		int fd = pd_sources[s]->watch_fd ? pd_sources[s]->watch_fd(set) : -1;
		if (fd >= 0 && pd_sources[s]->on_readable) {
			pfd[n] = (struct pollfd){.fd = fd, .events = POLLIN};
			src[n++] = s;
		}
	}
	uint64_t ms = (wait_ns + WB_NS_PER_MS - 1) / WB_NS_PER_MS;
	if (poll(pfd, n, ms > 60000 ? 60000 : (int)ms) > 0)
		for (unsigned k = 0; k < n; k++)
			if (pfd[k].revents)
				pd_sources[src[k]]->on_readable(set);
	return pd_set_busy(set);
}

enum pd_read_err pd_zone_read_held(struct pd_zone *z, uint64_t *value, char *err, size_t errlen)
{
	if (!z->held_mono_ns) {
		snprintf(err, errlen, "%s: no reading yet", z->path);
		return PD_READ_NONE;
	}
	uint64_t age = wb_mono_ns() - z->held_mono_ns;
	if (age > z->hold_ns) {
		snprintf(err, errlen, "%s: last reading %.1f s old, more than %.1f s", z->path,
			 (double)age / 1e9, (double)z->hold_ns / 1e9);
		return PD_READ_NONE;
	}
	*value = z->held_uw;
	return PD_READ_OK;
}
