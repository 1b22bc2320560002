/*
 * The last cumulative values seen per process of one host, keyed by
 * (pid, start_ns) so that a reused pid is a new process: a lib/table.h table.
 */
#include "alignd.h"

int proctab_init(struct proctab *pt, size_t max)
{
	wb_table_init(&pt->tab, sizeof(struct proc_entry), offsetof(struct proc_entry, pid), 2,
		      offsetof(struct proc_entry, used), 256, max);
	pt->gen = 0;
	return 0;
}

void proctab_free(struct proctab *pt)
{
	wb_table_free(&pt->tab);
}

void proctab_clear(struct proctab *pt)
{
	wb_table_free(&pt->tab);
	pt->gen = 0;
}

struct proc_entry *proctab_find(struct proctab *pt, uint64_t pid, uint64_t start_ns)
{
	return wb_table_find(&pt->tab, pid, start_ns);
}

size_t proctab_bytes_for(const struct proctab *pt, size_t n)
{
	return wb_table_bytes_for(&pt->tab, n);
}

struct proc_entry *proctab_insert(struct proctab *pt, uint64_t pid, uint64_t start_ns)
{
	struct proc_entry *e = wb_table_insert(&pt->tab, pid, start_ns);
	if (e)
		e->gen = pt->gen;
	return e;
}

void proctab_remove(struct proctab *pt, struct proc_entry *e)
{
	wb_table_remove(&pt->tab, e);
}

static bool same_gen(void *arg, const void *entry)
{
	return ((const struct proc_entry *)entry)->gen == *(const uint32_t *)arg;
}

size_t proctab_sweep(struct proctab *pt, uint32_t gen)
{
	return wb_table_sweep(&pt->tab, same_gen, &gen);
}
