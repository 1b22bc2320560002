/*
 * Choosing the meters: the sources named in `source`, or the first usable of
 * those sources.c lets `auto` try. When nothing works, say what was tried and
 * why each failed, so that an operator can fix it (permissions, a missing module).
 */
#include <stdio.h>
#include <string.h>

#include "powerd.h"

int detect_parse_sources(char *const *names, size_t n, unsigned *mask, char *err, size_t errlen)
{
	*mask = 0;
	bool is_auto = false;
	for (size_t i = 0; i < n; i++) {
		if (!strcmp(names[i], "auto")) {
			is_auto = true;
			continue;
		}
		const struct pd_source *src = pd_source_find(names[i]);
		if (!src) {
			char known[256];
			pd_source_names(known, sizeof(known));
			snprintf(err, errlen, "source: unknown source '%s' (%s)", names[i], known);
			return -1;
		}
		*mask |= 1u << pd_source_index(src);
	}
	if (is_auto && *mask) {
		snprintf(err, errlen, "source: 'auto' cannot be combined with named sources");
		return -1;
	}
	return 0;
}

int detect_check(unsigned mask, const struct pd_opts *opts, char *err, size_t errlen)
{
	for (unsigned s = 0; s < pd_nsources; s++)
		if ((mask & (1u << s)) && pd_sources[s]->check &&
		    pd_sources[s]->check(opts, err, errlen) < 0)
			return -1;
	return 0;
}

size_t detect_open(struct pd_set *set, unsigned mask)
{
	static char why[PD_SOURCES_MAX][PD_WHY_MAX];
	bool tried[PD_SOURCES_MAX] = {false};
	size_t usable = 0;
	for (unsigned s = 0; s < pd_nsources; s++) {
		const struct pd_source *src = pd_sources[s];
		bool wanted = mask ? (mask & (1u << s)) != 0 : src->in_auto;
		if (!wanted || (!mask && usable))
			continue;
		why[s][0] = '\0';
		tried[s] = true;
		int n = src->discover(set, set->opts, why[s], sizeof(why[s]));
		if (n > 0) {
			usable++;
			/* a source whose zones come later (exec stream, a BMC) has none yet */
			size_t have = 0;
			for (size_t i = 0; i < set->n; i++)
				have += set->zones[i].src == src;
			if (have)
				log_info("%s: %zu zone%s", src->name, have, have == 1 ? "" : "s");
			else
				log_info("%s: zones come with its first readings", src->name);
		} else if (mask) {
			log_warnx("source %s is not usable: %s", src->name, why[s]);
		}
	}
	for (unsigned s = 0; s < pd_nsources && !mask; s++) {
		char keys[256];
		if (!pd_sources[s]->in_auto &&
		    pd_conf_source_set(set->opts->conf, pd_sources[s], keys, sizeof(keys)))
			log_info(
			    "%s set, but source = auto never uses %s; name it in source to use it",
			    keys, pd_sources[s]->name);
	}
	if (usable)
		return usable;
	log_warnx(
	    "no usable power meter; publishing only stat messages (mode none), so that the other stages estimate power with a model. Tried:");
	for (unsigned s = 0; s < pd_nsources; s++)
		if (tried[s])
			log_warnx("  %s: %s", pd_sources[s]->name, why[s]);
	return 0;
}

void detect_mode(const struct pd_set *set, char *buf, size_t size)
{
	size_t len = 0;
	buf[0] = '\0';
	for (unsigned s = 0; s < pd_nsources; s++)
		if (set->used & (1u << s))
			len += (size_t)snprintf(buf + len, len < size ? size - len : 0, "%s%s",
						len ? "+" : "", pd_sources[s]->name);
	if (!buf[0])
		snprintf(buf, size, "none");
}

void detect_log_zones(const struct pd_set *set)
{
	const struct pd_opts *o = set->opts;
	double interval_s = (double)o->interval_ns / 1e9;
	for (size_t i = 0; i < set->n; i++) {
		const struct pd_zone *z = &set->zones[i];
		double safe_s = pd_zone_min_safe_s(z, o->max_power_w);
		if (z->is_power) {
			log_info("zone %s (%s, %s): power integrated by trapezoids, %s", z->name,
				 z->kind, z->path,
				 z->src->power_from ? z->src->power_from : "from microwatts");
		} else if (safe_s > 0) {
			log_info(
			    "zone %s (%s, %s): counter range %llu uJ; at max_power_w %.0f W it wraps no sooner than %.1f s (minimum safe interval); interval %.3f s is %s",
			    z->name, z->kind, z->path,
			    (unsigned long long)counter_range_uj(&z->ctr), o->max_power_w, safe_s,
			    interval_s, interval_s < safe_s ? "safe" : "NOT safe");
			if (interval_s >= safe_s)
				log_warnx(
				    "zone %s: interval %.3f s is not shorter than %.1f s, the time this counter takes to wrap at %.0f W; two wraps between samples would look like one",
				    z->name, interval_s, safe_s, o->max_power_w);
		} else {
			log_info("zone %s (%s, %s): counter without a wrap range", z->name, z->kind,
				 z->path);
		}
	}
}
