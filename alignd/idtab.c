/*
 * What one host's usage messages say about the ids their processes name: the
 * identity of each cgroup (container, pod, VM, service) and the path of each
 * executable, as usage messages announce them (every one in a full message,
 * new ones in the others). Slots attach those their processes use. A
 * lib/table.h table of entries, each an id_entry followed by its item.
 */
#include <string.h>

#include "alignd.h"

static void *item_of(const struct id_entry *e)
{
	return (char *)e + sizeof(*e);
}

void idtab_init(struct idtab *t, size_t item_size, size_t id_off, size_t max)
{
	/* Entries stay 8-byte aligned, as the items' uint64_t members need. */
	size_t size = sizeof(struct id_entry) + (item_size + 7) / 8 * 8;
	wb_table_init(&t->tab, size, offsetof(struct id_entry, id), 1,
		      offsetof(struct id_entry, used), 64, max);
	t->item_size = item_size;
	t->id_off = id_off;
	t->gen = 0;
}

void idtab_free(struct idtab *t)
{
	wb_table_free(&t->tab);
}

void *idtab_find(const struct idtab *t, uint64_t id)
{
	struct id_entry *e = wb_table_find(&t->tab, id, 0);
	return e ? item_of(e) : NULL;
}

size_t idtab_bytes_for(const struct idtab *t, size_t n)
{
	return wb_table_bytes_for(&t->tab, n);
}

void *idtab_put(struct idtab *t, uint64_t id, const void *item)
{
	struct id_entry *e = wb_table_find(&t->tab, id, 0);
	if (!e && !(e = wb_table_insert(&t->tab, id, 0)))
		return NULL;
	memcpy(item_of(e), item, t->item_size);
	e->gen = t->gen;
	return item_of(e);
}

static bool same_gen(void *arg, const void *entry)
{
	return ((const struct id_entry *)entry)->gen == *(const uint32_t *)arg;
}

size_t idtab_sweep(struct idtab *t, uint32_t gen)
{
	return wb_table_sweep(&t->tab, same_gen, &gen);
}

size_t idtab_attach(struct idtab *t, const void *procs, size_t n, size_t proc_size, size_t id_off,
		    uint64_t stamp, void *out)
{
	size_t nout = 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t id;
		memcpy(&id, (const char *)procs + i * proc_size + id_off, sizeof(id));
		struct id_entry *e = id ? wb_table_find(&t->tab, id, 0) : NULL;
		if (!e || e->stamp == stamp)
			continue;
		e->stamp = stamp;
		memcpy((char *)out + nout++ * t->item_size, item_of(e), t->item_size);
	}
	return nout;
}
