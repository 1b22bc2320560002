/*
 * Usage deltas of one host: usage messages carry cumulative values and may be
 * lost, so every delta is taken against the last value seen for the same
 * (pid, start_ns), and node CPU time against the last /proc/stat totals.
 *
 * A process not in the table is either new or was never reported to us. It is
 * counted in full when it provably started inside the slot: its start is after
 * t0 (boot_ns known), or the table was complete at t0 (a full message seen and
 * no message lost since, so every process alive at t0 was in it). Otherwise it
 * counts from this report on: CPU time from before t0 is never credited to the
 * slot, and the node totals still hold it (estimd reports it unattributed).
 */
#include <stdlib.h>
#include <string.h>

#include "alignd.h"

int usage_init(struct usage_state *us, size_t max_procs, size_t max_cgroups, size_t max_exes,
	       struct wb_budget *budget)
{
	memset(us, 0, sizeof(*us));
	proctab_init(&us->procs, max_procs);
	idtab_init(&us->cgroups, sizeof(struct wb_cgroup), offsetof(struct wb_cgroup, id),
		   max_cgroups);
	idtab_init(&us->exes, sizeof(struct wb_exe), offsetof(struct wb_exe, id), max_exes);
	us->procs.budget = us->cgroups.tab.budget = us->exes.tab.budget = budget;
	return 0;
}

size_t usage_growth(struct usage_state *us, const struct wb_usage *u)
{
	size_t np = 0, nc = 0, nx = 0;
	for (size_t i = 0; i < u->n_procs; i++)
		np += !proctab_find(&us->procs, u->procs[i].pid, u->procs[i].start_ns);
	for (size_t i = 0; i < u->n_cgroups; i++)
		nc += !idtab_find(&us->cgroups, u->cgroups[i].id);
	for (size_t i = 0; i < u->n_exes; i++)
		nx += !idtab_find(&us->exes, u->exes[i].id);
	size_t now = (us->procs.cap * sizeof(*us->procs.slots)) + wb_table_bytes(&us->cgroups.tab) +
		     wb_table_bytes(&us->exes.tab);
	size_t after = proctab_bytes_for(&us->procs, np) + idtab_bytes_for(&us->cgroups, nc) +
		       idtab_bytes_for(&us->exes, nx);
	return after > now ? after - now : 0;
}

void usage_free(struct usage_state *us)
{
	proctab_free(&us->procs);
	idtab_free(&us->cgroups);
	idtab_free(&us->exes);
	us->complete = false;
}

void usage_forget_procs(struct usage_state *us)
{
	proctab_clear(&us->procs);
	us->complete = false;
}

/* Take n items of a message's dictionary (cgroups, exes): a full message names every one in use. */
static void remember(struct idtab *t, bool full, const void *items, size_t n)
{
	if (full)
		t->gen++;
	for (size_t i = 0; i < n; i++) {
		const void *item = (const char *)items + i * t->item_size;
		uint64_t id;
		memcpy(&id, (const char *)item + t->id_off, sizeof(id));
		idtab_put(t, id, item); /* full table: the slot goes without it */
	}
	if (full)
		idtab_sweep(t, t->gen);
}

static void remember_ids(struct usage_state *us, const struct wb_usage *u)
{
	remember(&us->cgroups, u->full, u->cgroups, u->n_cgroups);
	remember(&us->exes, u->full, u->exes, u->n_exes);
}

/* The items of t that the slot's n processes name, each once, in a new array (NULL: none). */
static void *attach(struct usage_state *us, struct idtab *t, const struct wb_slot_proc *procs,
		    size_t n, size_t id_off, size_t *nout)
{
	*nout = 0;
	if (!n || !t->tab.n)
		return NULL;
	void *out = wb_array_new(n < t->tab.n ? n : t->tab.n, t->item_size);
	if (out)
		*nout = idtab_attach(t, procs, n, sizeof(*procs), id_off, ++us->slot_stamp, out);
	return out;
}

static uint64_t delta(uint64_t now, uint64_t *last, bool *backwards)
{
	uint64_t d = 0;
	if (now >= *last)
		d = now - *last;
	else
		*backwards = true;
	*last = now;
	return d;
}

/*
 * Walk u's processes against the table; with out, append the ones that ran
 * (or exited) with their deltas. Returns how many were appended.
 */
static size_t walk_procs(struct usage_state *us, const struct wb_usage *u, uint64_t t0_ns,
			 bool complete_at_t0, struct wb_slot_proc *out, struct usage_counts *cnt)
{
	struct proctab *pt = &us->procs;
	size_t nout = 0;
	bool dropped = false;
	pt->gen++;
	for (size_t i = 0; i < u->n_procs; i++) {
		const struct wb_proc *p = &u->procs[i];
		struct wb_slot_proc d = {.pid = p->pid,
					 .start_ns = p->start_ns,
					 .cgroup_id = p->cgroup_id,
					 .exe_id = p->exe_id,
					 .exited = p->exited};
		memcpy(d.comm, p->comm, sizeof(d.comm));
		struct proc_entry *e = proctab_find(pt, p->pid, p->start_ns);
		if (e) {
			bool back = false;
			d.cpu_ns = delta(p->cpu_ns, &e->cpu_ns, &back);
			d.cycles = delta(p->cycles, &e->cycles, &back);
			d.instructions = delta(p->instructions, &e->instructions, &back);
			d.cache_misses = delta(p->cache_misses, &e->cache_misses, &back);
			cnt->procs_backwards += back;
		} else {
			bool fresh = u->boot_ns ? u->boot_ns + p->start_ns > t0_ns : complete_at_t0;
			if (out && fresh) {
				d.cpu_ns = p->cpu_ns;
				d.cycles = p->cycles;
				d.instructions = p->instructions;
				d.cache_misses = p->cache_misses;
				cnt->procs_new++;
			} else if (out) {
				cnt->procs_baselined++;
			}
			e = proctab_insert(pt, p->pid, p->start_ns);
			if (e) {
				e->cpu_ns = p->cpu_ns;
				e->cycles = p->cycles;
				e->instructions = p->instructions;
				e->cache_misses = p->cache_misses;
			} else if (!p->exited) {
				cnt->procs_dropped++;
				dropped = true;
			}
		}
		if (e) {
			/* A repeat after its exit adds only what grew since; the entry goes after
			 * the walk. */
			if (e->exited && e->gen == pt->gen)
				d.exited = false;
			e->gen = pt->gen;
			e->exited |= p->exited;
		}
		if (out && (d.cpu_ns || d.cycles || d.instructions || d.cache_misses || d.exited))
			out[nout++] = d;
	}
	for (size_t i = 0; i < u->n_procs; i++) {
		struct proc_entry *e = u->procs[i].exited
					   ? proctab_find(pt, u->procs[i].pid, u->procs[i].start_ns)
					   : NULL;
		if (e)
			proctab_remove(pt, e);
	}
	if (u->full) {
		/* Everything alive is listed: what is not has exited unseen. */
		proctab_sweep(pt, pt->gen);
		us->complete = true;
	}
	if (dropped)
		us->complete = false;
	return nout;
}

void usage_baseline(struct usage_state *us, const struct wb_usage *u, struct usage_counts *cnt)
{
	us->cpu = u->cpu;
	us->complete = false;
	remember_ids(us, u);
	walk_procs(us, u, u->t, false, NULL, cnt);
}

static void cpu_delta(struct usage_state *us, const struct wb_cpu_times *now,
		      struct wb_cpu_times *out, struct usage_counts *cnt)
{
	const uint64_t *n = (const uint64_t *)now;
	uint64_t *l = (uint64_t *)&us->cpu, *o = (uint64_t *)out;
	size_t nf = sizeof(*now) / sizeof(uint64_t);
	bool reset = false;
	for (size_t i = 0; i < nf; i++)
		reset |= n[i] < l[i];
	/* Totals count from the producer's start (a new epoch zeroes them, align.c);
	 * lower within an epoch means the source restarted and counts from zero. */
	for (size_t i = 0; i < nf; i++)
		o[i] = reset ? n[i] : n[i] - l[i];
	cnt->cpu_resets += reset;
	us->cpu = *now;
}

int usage_slot(struct usage_state *us, const struct wb_usage *u, uint64_t t0_ns, uint64_t lost,
	       struct wb_aligned *out, struct usage_counts *cnt)
{
	struct wb_slot_proc *procs = wb_array_new(u->n_procs, sizeof(*procs));
	if (!procs)
		return -1;
	bool complete_at_t0 = us->complete;
	/*
	 * Messages lost inside this slot may have been the only ones to list a
	 * short-lived process; until the next full message the table may miss it.
	 */
	if (lost)
		us->complete = false;
	cpu_delta(us, &u->cpu, &out->cpu, cnt);
	remember_ids(us, u);
	size_t n = walk_procs(us, u, t0_ns, complete_at_t0, procs, cnt);
	out->procs = procs;
	out->n_procs = n;

	/* The cgroups the slot's processes ran in and the executables they ran, each once. */
	out->cgroups = attach(us, &us->cgroups, procs, n, offsetof(struct wb_slot_proc, cgroup_id),
			      &out->n_cgroups);
	out->exes =
	    attach(us, &us->exes, procs, n, offsetof(struct wb_slot_proc, exe_id), &out->n_exes);
	return 0;
}
