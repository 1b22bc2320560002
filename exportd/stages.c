/*
 * Pipeline health from the stat messages every stage publishes: the latest
 * state of each producer (host, stage, src), with its cumulative counters carried
 * across the producer's restarts so that wattbus_stage_*_total never go backwards.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exportd.h"

static const char *const reason_names[ST_R_COUNT] = {
    [ST_R_DUP_NAME] = "duplicate_name",
    [ST_R_SUM] = "rejected_sum",
    [ST_R_PRODUCERS] = "too_many_producers",
    [ST_R_NOMEM] = "nomem",
};

const char *stages_reason_name(enum stages_reason r)
{
	return r < ST_R_COUNT ? reason_names[r] : "unknown";
}

void mono_update(struct mono *m, uint64_t value, bool new_epoch)
{
	/* a new epoch counts from 0 again; a smaller value in the same epoch is a reset too */
	if (new_epoch || value < m->last)
		m->base += m->last;
	m->last = value;
}

uint64_t mono_value(const struct mono *m)
{
	return m->base + m->last;
}

static bool names_unique(const struct wb_counter *c, size_t n)
{
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < i; j++)
			if (!strcmp(c[i].name, c[j].name))
				return false;
	return true;
}

static struct stage_rec *rec_find(struct stages *self, const struct wb_stat *st)
{
	for (size_t i = 0; i < self->n; i++) {
		struct stage_rec *r = self->recs[i];
		if (!strcmp(r->host, st->env.host) && !strcmp(r->stage, st->stage) &&
		    !strcmp(r->src, st->env.src))
			return r;
	}
	return NULL;
}

static struct stage_rec *rec_new(struct stages *self, const struct wb_stat *st,
				 enum stages_reason *reason)
{
	if (self->n >= self->max) {
		*reason = ST_R_PRODUCERS;
		return NULL;
	}
	struct stage_rec **recs = realloc(self->recs, (self->n + 1) * sizeof *recs);
	if (recs)
		self->recs = recs;
	struct stage_rec *r = calloc(1, sizeof *r);
	struct rbuf b = {0};
	if (r) {
		snprintf(r->host, sizeof r->host, "%s", st->env.host);
		snprintf(r->stage, sizeof r->stage, "%s", st->stage);
		snprintf(r->src, sizeof r->src, "%s", st->env.src);
		rbuf_label(&b, true, "host", r->host, sizeof r->host);
		rbuf_label(&b, false, "stage", r->stage, sizeof r->stage);
		rbuf_label(&b, false, "src", r->src, sizeof r->src);
		rbuf_putc(&b, '\0');
	}
	if (!recs || !r || b.oom) {
		free(r);
		rbuf_free(&b);
		*reason = ST_R_NOMEM;
		return NULL;
	}
	size_t len;
	r->labels = rbuf_steal(&b, &len);
	r->epoch = st->env.epoch;
	self->recs[self->n++] = r;
	return r;
}

/* Update the named counters (rejections by reason, stage counters) of one producer. */
static void named_update(struct stage_named *tab, size_t *n, const struct wb_counter *c, size_t nc,
			 bool new_epoch)
{
	/* a name missing from this message was 0 in the new epoch (optional keys are omitted) */
	if (new_epoch)
		for (size_t i = 0; i < *n; i++)
			mono_update(&tab[i].m, 0, true);
	for (size_t i = 0; i < nc; i++) {
		size_t j = 0;
		while (j < *n && strcmp(tab[j].name, c[i].name))
			j++;
		if (j == *n) {
			if (*n >= STAGE_NAMED_MAX)
				continue;
			snprintf(tab[j].name, sizeof tab[j].name, "%s", c[i].name);
			tab[j].m = (struct mono){0};
			(*n)++;
		}
		mono_update(&tab[j].m, c[i].value, false);
	}
}

int stages_add(struct stages *self, const struct wb_stat *st, uint64_t recv_ns,
	       enum stages_reason *reason)
{
	enum stages_reason r = ST_R_COUNT;
	struct stage_rec *rec = NULL;
	if (!names_unique(st->rejected_by, st->n_rejected_by) ||
	    !names_unique(st->counters, st->n_counters)) {
		r = ST_R_DUP_NAME;
		goto reject;
	}
	uint64_t sum = 0;
	for (size_t i = 0; i < st->n_rejected_by; i++)
		if (__builtin_add_overflow(sum, st->rejected_by[i].value, &sum) ||
		    sum > st->rejected) {
			r = ST_R_SUM;
			goto reject;
		}
	rec = rec_find(self, st);
	bool fresh = !rec;
	if (!rec && !(rec = rec_new(self, st, &r)))
		goto reject;
	bool new_epoch = !fresh && st->env.epoch != rec->epoch;
	if (fresh || new_epoch)
		rec->starts++;
	rec->epoch = st->env.epoch;
	rec->last_recv_ns = recv_ns;
	rec->uptime_ns = st->uptime_ns;
	rec->rss_bytes = st->rss_bytes;
	snprintf(rec->version, sizeof rec->version, "%s", st->version);
	snprintf(rec->mode, sizeof rec->mode, "%s", st->mode);
	mono_update(&rec->frames_in, st->frames_in, new_epoch);
	mono_update(&rec->frames_out, st->frames_out, new_epoch);
	mono_update(&rec->lost, st->lost, new_epoch);
	mono_update(&rec->rejected, st->rejected, new_epoch);
	mono_update(&rec->restarts, st->restarts, new_epoch);
	mono_update(&rec->checkpoint_failures, st->checkpoint_failures, new_epoch);
	mono_update(&rec->cpu_ns, st->cpu_ns, new_epoch);
	named_update(rec->reasons, &rec->nreasons, st->rejected_by, st->n_rejected_by, new_epoch);
	named_update(rec->counters, &rec->ncounters, st->counters, st->n_counters, new_epoch);
	return 0;

reject:
	self->rejected[r]++;
	if (reason)
		*reason = r;
	return -1;
}

struct stages *stages_new(size_t max_producers)
{
	struct stages *self = calloc(1, sizeof *self);
	if (self)
		self->max = max_producers;
	return self;
}

void stages_destroy(struct stages **self_p)
{
	if (!self_p || !*self_p)
		return;
	struct stages *self = *self_p;
	for (size_t i = 0; i < self->n; i++) {
		free(self->recs[i]->labels);
		free(self->recs[i]);
	}
	free(self->recs);
	free(self);
	*self_p = NULL;
}
