/*
 * What `wattbus vmpub` tells a guest: the VM's cumulative energy per host zone
 * in estimd's count, followed by lib/follow.h's rule, and never a total it does
 * not know. Pure: estimates in, zones out.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"

/* The zone named like ez, made (nothing followed) when new; NULL when VM_TOTALS_ZONES_MAX are held.
 */
static struct vm_zone *vm_zone_get(struct vm_totals *v, const struct wb_est_zone *ez)
{
	for (size_t i = 0; i < v->nz; i++)
		if (strcmp(v->zones[i].name, ez->name) == 0)
			return &v->zones[i];
	if (v->nz >= VM_TOTALS_ZONES_MAX)
		return NULL;
	struct vm_zone *z = &v->zones[v->nz++];
	memset(z, 0, sizeof(*z));
	snprintf(z->name, sizeof(z->name), "%s", ez->name);
	snprintf(z->zone, sizeof(z->zone), "%s", ez->zone);
	z->index = ez->index;
	return z;
}

/* One zone of the VM's estimate: the VM's total, and what it added since the last one sent. */
static void vm_zone_put(struct wb_est_zone *out, const struct vm_zone *z, uint64_t added_uj)
{
	memset(out, 0, sizeof(*out));
	snprintf(out->name, sizeof(out->name), "%s", z->name);
	snprintf(out->zone, sizeof(out->zone), "%s", z->zone);
	out->index = z->index;
	out->total_uj = z->f.last_uj;
	out->energy_uj = out->active_uj = added_uj;
}

/* The VM's estimate of slot e (cli.h says which, and why no guess). */
size_t vm_totals_build(struct vm_totals *v, const struct wb_estimate *e, struct wb_est_zone *zones)
{
	const struct wb_est_group *g = NULL;
	for (size_t i = 0; i < e->n_vms; i++)
		if (strcmp(e->vms[i].id, v->vm) == 0)
			g = &e->vms[i];
	uint64_t count = wb_follow_count(e->env.src, e->total_epoch);
	size_t n = 0;
	if (g && g->n_total_uj == e->n_zones && g->n_energy_uj == e->n_zones && count) {
		for (size_t i = 0; i < e->n_zones; i++) {
			struct vm_zone *z = vm_zone_get(v, &e->zones[i]);
			if (!z)
				continue;
			struct wb_follow_step st = {count, g->total_uj[i], g->energy_uj[i], 0, 0};
			uint64_t added = wb_follow_step(&z->f, &st, NULL);
			vm_zone_put(&zones[n++], z, added);
		}
		return n;
	}
	if (g || !count) {
		/* a stale slot (no totals in it), or a VM whose totals did not fit estimd's budget
		 */
		return 0;
	}
	bool known = false, other = false;
	for (size_t i = 0; i < v->nz; i++) {
		known |= v->zones[i].f.have && v->zones[i].f.count == count;
		other |= v->zones[i].f.have && v->zones[i].f.count != count;
	}
	if (known) {
		for (size_t i = 0; i < v->nz; i++)
			if (v->zones[i].f.have && v->zones[i].f.count == count)
				vm_zone_put(&zones[n++], &v->zones[i], 0);
		return n;
	}
	if (!other) {
		return 0;
	}
	/* A new count, seen to start after one vmpub followed: the VM is at 0 in it. */
	for (size_t i = 0; i < e->n_zones; i++) {
		struct vm_zone *z = vm_zone_get(v, &e->zones[i]);
		if (!z)
			continue;
		struct wb_follow_step st = {count, 0, 0, 0, 0};
		wb_follow_step(&z->f, &st, NULL);
		vm_zone_put(&zones[n++], z, 0);
	}
	return n;
}
