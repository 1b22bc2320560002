/*
 * The dictionaries a usage message carries for the ids its processes name
 * (cgroups, executables): id -> item, and which items each message carries,
 * the loss-tolerance scheme of schemas/usage.json: every item the processes
 * name in a full message; in the others, those first sent in the last
 * retire_after messages. Pure code on a lib/table.h table; items live outside
 * it, so that a table of a few large items stays small.
 */
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "table.h"
#include "usaged.h"

#define UNSENT UINT64_MAX

struct dict_entry {
	uint64_t id;
	uint64_t first_sent; /* message number, UNSENT until then */
	uint64_t last_used;  /* message number */
	uint64_t stamp;	     /* the fill that last took it: each item once per message */
	void *item;
	bool used;
};

struct dict {
	WB_TABLE(struct dict_entry);
	size_t item_size;
	uint64_t msgno, stamp;
};

struct dict *dict_new(size_t item_size, size_t max)
{
	struct dict *self = calloc(1, sizeof(*self));
	if (!self)
		return NULL;
	wb_table_init(&self->tab, sizeof(struct dict_entry), offsetof(struct dict_entry, id), 1,
		      offsetof(struct dict_entry, used), 64, max);
	self->item_size = item_size;
	return self;
}

void dict_destroy(struct dict **self_p)
{
	if (!self_p || !*self_p)
		return;
	struct dict *self = *self_p;
	for (struct dict_entry *e = wb_table_next(&self->tab, NULL); e;
	     e = wb_table_next(&self->tab, e))
		free(e->item);
	wb_table_free(&self->tab);
	free(self);
	*self_p = NULL;
}

void dict_begin(struct dict *self, uint64_t msgno)
{
	self->msgno = msgno;
}

size_t dict_count(const struct dict *self)
{
	return self->n;
}

bool dict_full(const struct dict *self)
{
	return self->n >= self->max;
}

void *dict_get(struct dict *self, uint64_t id)
{
	struct dict_entry *e = id ? wb_table_find(&self->tab, id, 0) : NULL;
	if (!e)
		return NULL;
	e->last_used = self->msgno;
	return e->item;
}

void *dict_set(struct dict *self, uint64_t id)
{
	if (!id)
		return NULL;
	struct dict_entry *e = wb_table_find(&self->tab, id, 0);
	if (!e) {
		void *item = malloc(self->item_size);
		if (!item)
			return NULL;
		e = wb_table_insert(&self->tab, id, 0);
		if (!e) {
			free(item);
			return NULL;
		}
		e->item = item;
	}
	memset(e->item, 0, self->item_size);
	e->first_sent = UNSENT; /* new, or changed: sent again */
	e->last_used = self->msgno;
	return e->item;
}

int dict_fill(struct dict *self, const void *procs, size_t nprocs, size_t proc_size, size_t id_off,
	      bool full, uint64_t retire_after, void **out, size_t *nout)
{
	size_t n = 0, nsel = 0;
	uint64_t stamp = ++self->stamp;
	*out = NULL;
	*nout = 0;
	if (!self->n)
		return 0;
	/* Two passes over the processes (count, then copy) instead of a list of the chosen. */
	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < nprocs; i++) {
			uint64_t id;
			memcpy(&id, (const char *)procs + i * proc_size + id_off, sizeof(id));
			struct dict_entry *e = id ? wb_table_find(&self->tab, id, 0) : NULL;
			if (!e || e->stamp == stamp)
				continue;
			e->stamp = stamp;
			e->last_used = self->msgno;
			if (!(full || e->first_sent == UNSENT ||
			      e->first_sent + retire_after > self->msgno))
				continue;
			if (pass == 0) {
				nsel++;
				continue;
			}
			if (e->first_sent == UNSENT)
				e->first_sent = self->msgno;
			memcpy((char *)*out + n++ * self->item_size, e->item, self->item_size);
		}
		if (pass == 0) {
			if (!nsel)
				return 0;
			*out = wb_array_new(nsel, self->item_size);
			if (!*out)
				return -1;
			stamp = ++self->stamp;
		}
	}
	*nout = n;
	return 0;
}

struct evict_arg {
	uint64_t unused_msgs, msgno;
};

static bool keep_used(void *arg, const void *entry)
{
	const struct evict_arg *a = arg;
	const struct dict_entry *e = entry;
	if (e->last_used + a->unused_msgs >= a->msgno)
		return true;
	free(e->item);
	return false;
}

void dict_evict(struct dict *self, uint64_t unused_msgs)
{
	struct evict_arg a = {unused_msgs, self->msgno};
	wb_table_sweep(&self->tab, keep_used, &a);
}
