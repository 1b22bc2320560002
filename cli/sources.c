/*
 * powerd's meter sources as the CLI runs them (doctor, probe): the options
 * powerd would take on given sysfs, /dev and /proc roots (the defaults of its own
 * key table, powerd/conf.c), and each source of powerd/sources.c tried in table
 * order, with its zones or powerd's own words for why it has none.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "log.h"
#include "../powerd/powerd.h"

int cli_pd_set(struct cli_pd_roots *r, const char *key, const char *value, const char *flag)
{
	char err[WB_CONF_ERR_MAX];
	if (pd_conf_set(r->conf, key, value, err, sizeof(err)) < 0) {
		fprintf(stderr, "wattbus: %s: %s\n", flag, err);
		return -1;
	}
	return 0;
}

int cli_pd_opts(struct cli_pd_roots *r, const char *sys, const char *dev, const char *proc)
{
	memset(r, 0, sizeof(*r));
	snprintf(r->cpuinfo, sizeof(r->cpuinfo), "%s/cpuinfo", proc);
	char msr_root[4096 + 8];
	snprintf(msr_root, sizeof(msr_root), "%s/cpu", dev);
	if (!(r->conf = pd_conf_new())) {
		fprintf(stderr, "wattbus: out of memory\n");
		return -1;
	}
	if (cli_pd_set(r, "sysfs_root", sys, "--sysfs-root") < 0 ||
	    cli_pd_set(r, "msr_root", msr_root, "--dev-root") < 0 ||
	    cli_pd_set(r, "proc_root", proc, "--proc-root") < 0)
		return -1;
	pd_opts_from_conf(&r->o, r->conf, 0, 0);
	r->o.cpuinfo_path = r->cpuinfo;
	r->o.retry = false; /* the verdict now, not a source that keeps trying */
	return 0;
}

void cli_pd_opts_free(struct cli_pd_roots *r)
{
	pd_conf_destroy(&r->conf);
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
