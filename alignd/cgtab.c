/*
 * The identity of each cgroup of one host (container, pod, VM, service), as
 * usage messages announce it: every cgroup in a full message, new ones in the
 * others. Slots attach the cgroups their processes ran in. A lib/table.h table.
 */
#include "alignd.h"

int cgtab_init(struct cgtab *t, size_t max)
{
	wb_table_init(&t->tab, sizeof(struct cg_entry), offsetof(struct cg_entry, cg.id), 1,
		      offsetof(struct cg_entry, used), 64, max);
	t->gen = 0;
	return 0;
}

void cgtab_free(struct cgtab *t)
{
	wb_table_free(&t->tab);
}

struct cg_entry *cgtab_find(struct cgtab *t, uint64_t id)
{
	return wb_table_find(&t->tab, id, 0);
}

size_t cgtab_bytes_for(const struct cgtab *t, size_t n)
{
	return wb_table_bytes_for(&t->tab, n);
}

struct cg_entry *cgtab_put(struct cgtab *t, const struct wb_cgroup *cg)
{
	struct cg_entry *e = cgtab_find(t, cg->id);
	if (!e && !(e = wb_table_insert(&t->tab, cg->id, 0)))
		return NULL;
	e->cg = *cg;
	e->gen = t->gen;
	return e;
}

static bool same_gen(void *arg, const void *entry)
{
	return ((const struct cg_entry *)entry)->gen == *(const uint32_t *)arg;
}

size_t cgtab_sweep(struct cgtab *t, uint32_t gen)
{
	return wb_table_sweep(&t->tab, same_gen, &gen);
}
