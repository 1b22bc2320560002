/*
 * powerd's meter sources as the CLI runs them (doctor, probe): the options
 * powerd would take on given sysfs, /dev and /proc roots, and each source of
 * powerd/sources.c tried in table order, with its zones or powerd's own words
 * for why it has none.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "clock.h"
#include "log.h"
#include "../powerd/powerd.h"

void cli_pd_opts(struct cli_pd_roots *r, const char *sys, const char *dev, const char *proc)
{
	snprintf(r->msr_root, sizeof(r->msr_root), "%s/cpu", dev);
	snprintf(r->cpuinfo, sizeof(r->cpuinfo), "%s/cpuinfo", proc);
	memset(&r->o, 0, sizeof(r->o));
	r->o.sysfs_root = sys;
	r->o.msr_root = r->msr_root;
	r->o.cpuinfo_path = r->cpuinfo;
	r->o.proc_root = proc;
	r->o.max_power_w = 5000;
	r->o.interval_ns = WB_NS_PER_SEC;
	r->o.exec_timeout_ns = WB_NS_PER_SEC;
}

unsigned cli_pd_discover(const struct pd_opts *o, const char *only, struct cli_pd_try *out,
			 unsigned max)
{
	unsigned n = 0;
	int level = log_get_level();
	log_set_level(WB_LOG_ERR); /* the sources' start-up lines are powerd's, not the CLI's */
	for (unsigned i = 0; i < pd_nsources && n < max; i++) {
		const struct pd_source *src = pd_sources[i];
		if (only ? strcmp(src->name, only) != 0 : !src->in_auto)
			continue;
		struct pd_set *set = pd_set_new(o);
		if (!set)
			break;
		struct cli_pd_try *t = &out[n++];
		t->name = src->name;
		t->set = NULL;
		t->why[0] = '\0';
		t->zones = src->discover(set, o, t->why, sizeof(t->why));
		if (t->zones > 0)
			t->set = set;
		else
			pd_set_destroy(&set);
	}
	log_set_level(level);
	return n;
}
