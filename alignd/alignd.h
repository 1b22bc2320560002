/*
 * alignd's private header: prototypes grouped by file. alignd turns power
 * samples and usage samples into aligned slots; everything here is pure code
 * (no sockets, no clocks read, no files), driven by main.c and the unit tests,
 * except state.c's align_save and align_load, which write and read the state file.
 */
#ifndef ALIGND_H
#define ALIGND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "budget.h"
#include "codec.h"
#include "table.h"

/*
 * Process and cgroup tables, power curves and slots waiting for power are
 * charged to one budget (lib/budget.h) shared by every host; a table with no
 * budget (NULL) is not limited.
 */

/* ---- curve.c: one zone's cumulative energy over time ---- */

struct curve_sample {
	uint64_t t_ns;
	uint64_t e_uj; /* bridged cumulative energy: continuous across powerd epochs */
};

/* A span with no measurement (a counter discontinuity); E is flat across it. */
struct curve_gap {
	uint64_t from_ns, to_ns;
};

#define CURVE_GAPS 8
#define GPU_RING 64 /* power samples of a GPU zone whose process weights are kept */

struct gpu_sample {
	uint64_t from_ns, t_ns; /* the interval (from, t] its SM times cover */
	bool exclusive, used;
	struct wb_gpu_proc *procs;
	size_t n;
};

struct gpu_ring {
	struct gpu_sample e[GPU_RING];
	size_t next;
};

struct curve {
	uint64_t id; /* unique for this curve's life; carries that name another id are stale */
	char name[64];
	char zone[16];
	char path[256];
	uint64_t index;
	struct curve_sample *s; /* oldest first */
	size_t n, cap, max_samples;
	uint64_t first_t_ns;		   /* first sample ever, for coverage after pruning */
	struct curve_gap gaps[CURVE_GAPS]; /* most recent discontinuities, a ring */
	size_t ngaps;			   /* total recorded; the ring holds the last CURVE_GAPS */
	uint64_t raw_last_uj;		   /* energy_uj of the last sample as received */
	uint64_t epoch;			   /* producer epoch of raw_last_uj */
	uint64_t range_uj;		   /* max_energy_range_uj last announced */
	uint64_t last_recv_ns;		   /* when this zone was last in a sample */
	struct wb_budget *budget;	   /* charged for the samples (set by the owner) */
	char uuid[96], model[96], vendor[16]; /* a GPU zone's identity, as last announced */
	struct gpu_ring *gpu;		      /* a GPU zone's process weights; NULL: none */
};

enum curve_event {
	CURVE_APPENDED,	     /* the sample continues the curve */
	CURVE_BRIDGED,	     /* a new epoch whose counter continues: no energy lost */
	CURVE_DISCONTINUITY, /* counter reset or went back: flat gap recorded */
	CURVE_STALE,	     /* not after the last sample: ignored */
	CURVE_NOMEM,
};

enum curve_pos {
	CURVE_NONE,   /* no samples */
	CURVE_BEFORE, /* t before the first sample: value of the first sample */
	CURVE_INSIDE, /* interpolated (or exactly on a sample) */
	CURVE_AFTER,  /* after the last sample: extrapolated from the last rate */
};

/* A new curve (id unique, given by the caller); NULL on ENOMEM. The caller owns it.
 * Its samples are charged to c->budget once the caller sets it. */
struct curve *curve_new(uint64_t id, size_t max_samples);
void curve_destroy(struct curve **self_p);
/*
 * Add a sample. bridge_max_w > 0 refuses to bridge a new epoch whose counter
 * continues but implies more than that average power over the outage. A step
 * that would take the curve past WB_WIRE_MAX is a discontinuity.
 * *delta_uj (optional) gets the energy the sample adds.
 */
enum curve_event curve_add(struct curve *c, uint64_t t_ns, uint64_t epoch, uint64_t energy_uj,
			   uint64_t range_uj, double bridge_max_w, uint64_t *delta_uj);
/* E(t), floored to whole microjoules; exact rational interpolation. */
enum curve_pos curve_at(const struct curve *c, uint64_t t_ns, uint64_t *e_uj);
/* Nanoseconds of [t0, t1] with samples on both sides and no discontinuity. */
uint64_t curve_covered_ns(const struct curve *c, uint64_t t0_ns, uint64_t t1_ns);
/* Whether a recorded discontinuity overlaps (t0, t1]. */
bool curve_gap_in(const struct curve *c, uint64_t t0_ns, uint64_t t1_ns);
/* Drop samples no boundary at or after keep_from_ns needs (keeps the last one at or before it). */
void curve_prune(struct curve *c, uint64_t keep_from_ns);
uint64_t curve_last_t(const struct curve *c);
/*
 * The producer's clock was set back to t_ns: drop the samples at or after it (stamped
 * by the clock that ran ahead), keeping the counter they read, so that the next
 * sample's energy counts from the last sample kept. Returns the samples dropped.
 */
size_t curve_rewind(struct curve *c, uint64_t t_ns);

/* ---- gpu.c: a GPU zone's process weights per power sample ---- */

/* Keep the identity and processes a power sample at t_ns (interval_ns after the one before)
 * gave zone z of curve c. 0 or -1 (budget or ENOMEM: the weights of that sample are dropped). */
int gpu_ring_add(struct curve *c, uint64_t t_ns, uint64_t interval_ns,
		 const struct wb_power_zone *z);
/* The slot zone z of (t0, t1]: c's identity, and every process listed by a sample whose
 * interval overlaps the slot, with its SM time in the slot (each sample's in proportion to the
 * overlap) summed. 0, or -1 on ENOMEM (no processes). */
int gpu_slot_fill(const struct curve *c, uint64_t t0_ns, uint64_t t1_ns, struct wb_slot_zone *z);
void gpu_ring_free(struct curve *c);

/* ---- carry.c: integer slot energies whose sum is exact ---- */

/*
 * What one usage host has been given of one zone's curve. E(t) is computed
 * exactly and floored; a slot gets floor(E(t1)) minus what was emitted so far,
 * so the fractional remainder of each boundary stays in the next slot and the
 * slot energies telescope to E(last) - E(first). An extrapolated boundary that
 * overshot is held back from the following slots until the curve catches up.
 */
struct carry {
	char name[64];	     /* zone name */
	uint64_t curve_id;   /* 0: no baseline yet */
	uint64_t emitted_uj; /* curve value up to which energy has been handed out */
	bool ahead;	     /* emitted_uj came from an extrapolation not yet confirmed */
	bool seen;	     /* touched in the current resolution (prunes vanished zones) */
};

void carry_set(struct carry *c, uint64_t curve_id, uint64_t base_uj, bool extrapolated);
/* Energy of a slot whose end has curve value target_uj; never negative. */
uint64_t carry_take(struct carry *c, uint64_t target_uj, bool extrapolated);

/* ---- proctab.c: last cumulative values per (pid, start_ns) ---- */

struct proc_entry {
	uint64_t pid, start_ns;
	uint64_t cpu_ns, cycles, instructions, cache_misses;
	uint32_t gen; /* message generation that last listed it */
	bool exited;  /* listed as exited in the message being walked: removed after it */
	bool used;
};

struct proctab {
	WB_TABLE(struct proc_entry); /* .budget: charged for slots; kept by proctab_clear */
	uint32_t gen;
};

int proctab_init(struct proctab *pt, size_t max);
void proctab_free(struct proctab *pt);
void proctab_clear(struct proctab *pt);
struct proc_entry *proctab_find(struct proctab *pt, uint64_t pid, uint64_t start_ns);
/* Insert a zeroed entry; NULL when the table holds max entries, the budget has no room to
 * grow it, or on ENOMEM. */
struct proc_entry *proctab_insert(struct proctab *pt, uint64_t pid, uint64_t start_ns);
void proctab_remove(struct proctab *pt, struct proc_entry *e);
/* Remove every entry whose gen differs from gen; returns how many. */
size_t proctab_sweep(struct proctab *pt, uint32_t gen);
/* Bytes the table would hold after adding n entries not in it. */
size_t proctab_bytes_for(const struct proctab *pt, size_t n);

/* ---- idtab.c: what ids name, per id (cgroup identities, executables' paths) ---- */

/* The table's entry; the item (a struct wb_cgroup, a struct wb_exe) follows it. */
struct id_entry {
	uint64_t id;
	uint64_t stamp; /* last slot that attached it */
	uint32_t gen;	/* the full message that last named it */
	bool used;
};

struct idtab {
	struct wb_table tab; /* .budget: charged for slots */
	size_t item_size;
	size_t id_off; /* where an item holds its id */
	uint32_t gen;
};

void idtab_init(struct idtab *t, size_t item_size, size_t id_off, size_t max);
void idtab_free(struct idtab *t);
/* The item of id (owned by the table: stale after the next put or sweep), or NULL. */
void *idtab_find(const struct idtab *t, uint64_t id);
/* Insert or update id with a copy of item; NULL when full or on ENOMEM. */
void *idtab_put(struct idtab *t, uint64_t id, const void *item);
/* Remove every entry whose gen differs from gen; returns how many. */
size_t idtab_sweep(struct idtab *t, uint32_t gen);
/* Bytes the table would hold after adding n ids not in it. */
size_t idtab_bytes_for(const struct idtab *t, size_t n);
/*
 * Copy into out the items that the n processes (proc_size bytes apart, the id
 * at id_off) name, each once: out has room for min(n, entries). stamp: a new
 * number per call. Returns how many.
 */
size_t idtab_attach(struct idtab *t, const void *procs, size_t n, size_t proc_size, size_t id_off,
		    uint64_t stamp, void *out);

/* ---- usage.c: usage deltas of one host ---- */

struct usage_counts {
	uint64_t procs_new;	  /* first seen, started in the slot: counted in full */
	uint64_t procs_baselined; /* first seen, could have run before t0: counted from here */
	uint64_t procs_backwards; /* a cumulative value went down: delta 0 */
	uint64_t procs_dropped;	  /* table full */
	uint64_t cpu_resets;	  /* /proc/stat totals went down (reboot) */
};

struct usage_state {
	struct proctab procs;
	struct idtab cgroups; /* struct wb_cgroup */
	struct idtab exes;    /* struct wb_exe */
	bool complete;	      /* every live process of the host is in procs */
	struct wb_cpu_times cpu;
	uint64_t slot_stamp;
};

/* budget (NULL: none) is charged for the process, cgroup and executable tables. */
int usage_init(struct usage_state *us, size_t max_procs, size_t max_cgroups, size_t max_exes,
	       struct wb_budget *budget);
void usage_free(struct usage_state *us);
/* Forget the process table (new usaged epoch, host dropped); cgroup and exe ids stay valid. */
void usage_forget_procs(struct usage_state *us);
/* First message of a host: remember its values, no slot. */
void usage_baseline(struct usage_state *us, const struct wb_usage *u, struct usage_counts *cnt);
/*
 * Fill out's cpu, procs, cgroups and exes with the deltas of u against what was
 * seen before (slot [t0_ns, u->t]). lost: usage messages missed before u.
 * Returns 0, or -1 on ENOMEM (out untouched).
 */
int usage_slot(struct usage_state *us, const struct wb_usage *u, uint64_t t0_ns, uint64_t lost,
	       struct wb_aligned *out, struct usage_counts *cnt);
/* Bytes the tables would grow by to take u (its processes, cgroups and exes not yet in them). */
size_t usage_growth(struct usage_state *us, const struct wb_usage *u);

/* ---- align.c: hosts, pairing, waiting, resolution ---- */

struct align_conf {
	uint64_t max_lag_ns; /* 0: two power intervals of the power host */
	uint64_t snap_ns;    /* a slot end this close after the last power sample does not wait */
	uint64_t host_timeout_ns; /* a host silent this long is dropped */
	uint64_t max_skew_ns;	  /* |arrival - t| beyond this is logged and counted; 0: off */
	double bridge_max_w;	  /* see curve_add; 0: no limit */
	uint64_t max_slot_ns; /* [global] max_slot: a longer span between usage samples is no slot;
				 0: off */
	size_t max_hosts, max_procs, max_cgroups, max_exes, max_pending, max_samples;
	size_t budget_bytes; /* all hosts' tables, curves and waiting slots together; 0: no limit */
	/* usage host -> power host ("node1=bmc1"); parsed by align_conf_map */
	size_t nmap;
	struct align_map {
		char usage_host[64];
		char power_host[64];
	} * map;
};

/*
 * Curves one power host keeps: beyond it the least recently updated zone is
 * evicted (zones renamed, two producers under one host name), well below the
 * 256 zones an aligned message may carry.
 */
#define ALIGN_ZONES_MAX 64

struct align_counters {
	uint64_t slots, slots_no_power, slots_extrapolated, slots_gap, slots_forced;
	uint64_t power_bridged, power_discontinuities, power_stale, power_samples;
	uint64_t power_zones_evicted; /* past ALIGN_ZONES_MAX */
	uint64_t usage_stale, usage_epochs, usage_baselines;
	uint64_t clock_skew, hosts_dropped, hosts_refused;
	uint64_t budget_refused; /* frames of new hosts refused: they would exceed budget_bytes */
	uint64_t
	    budget_short; /* frames of known hosts kept in part (procs_dropped, curves pruned) */
	uint64_t slots_too_long;   /* usage samples further apart than max_slot: a new baseline */
	uint64_t clock_rewinds;	   /* a host's time line set back after WB_REWIND_SAMPLES samples
				      behind it */
	uint64_t totals_saturated; /* a zone total held at the wire's maximum */
	uint64_t gpu_weights_dropped; /* a GPU sample's process weights not kept (budget, ENOMEM) */
	struct usage_counts usage;
};

struct align;

/* Called for every aligned slot; msg is owned by align and cleared after the call. */
typedef void(align_emit_fn)(struct wb_msg *msg, void *arg);

/* Parse "usagehost=powerhost" items into conf->map (replacing it). Returns 0 or -1 (err filled). */
int align_conf_map(struct align_conf *conf, char *const *items, size_t n, char *err, size_t errlen);
void align_conf_free(struct align_conf *conf);

/* The engine; NULL on ENOMEM. conf is copied (map included). */
struct align *align_new(const struct align_conf *conf, align_emit_fn *emit, void *arg);
void align_destroy(struct align **self_p);
/* Apply a new conf (SIGHUP): limits, lag, timeouts, host map. Returns 0 or -1. */
int align_reconf(struct align *a, const struct align_conf *conf);
/* Feed a power sample received at recv_ns (alignd's wall clock). */
void align_power(struct align *a, const struct wb_power *p, uint64_t recv_ns);
/* A power message of a deliberate second meter ([global] extra_power_src): zones of its own
 * beside the host's producer's; the host's time line stays the producer's. */
void align_power_meter(struct align *a, const struct wb_power *p, uint64_t recv_ns);
/* Feed a usage sample; lost: messages of its producer missed before it. */
void align_usage(struct align *a, const struct wb_usage *u, uint64_t lost, uint64_t recv_ns);
/* Resolve slots whose wait is over and drop silent hosts (align_sweep). */
void align_tick(struct align *a, uint64_t now_ns);
/* Drop silent hosts and samples no slot can need, once a second (when due: cheap otherwise). */
void align_sweep(struct align *a, uint64_t now_ns);
/*
 * Wall-clock time at which align_tick next has work (a waiting slot's wait
 * ends, or the sweep of silent hosts is due: once a second, which alignd's
 * align_sweep at every message does, so here 2 s later, for a silence); at or
 * before now: call it now. Valid until the next align_power, align_usage or
 * align_tick.
 */
uint64_t align_next_tick_ns(const struct align *a);
/*
 * Whether alignd's timer, armed for armed_ns, serves a deadline_ns that it would
 * arm for at_ns (the deadline, or tick from now if that is sooner; one clock for
 * all three): it fires no earlier than the deadline and no later than at_ns, to
 * zloop's millisecond. A deadline that moved later (the sweep, riding on the
 * messages) moves the timer; one already due does not push it further at every
 * message.
 */
bool align_timer_keeps(uint64_t armed_ns, uint64_t deadline_ns, uint64_t at_ns);
/* Resolve every waiting slot now (extrapolating), e.g. before exit. */
void align_flush(struct align *a, uint64_t now_ns);
const struct align_counters *align_counters(const struct align *a);
/* ---- state.c: the state file ---- */
/* Save what a restart needs to lose nothing (after align_flush; fsync'd when sync). Returns 0 or -1
 * (logged). */
int align_save(struct align *a, const char *path, uint64_t now_ns, bool sync);
/* Resume from a state saved at most max_age_ns ago, before any message. 0, or -1: not used. */
int align_load(struct align *a, const char *path, uint64_t now_ns, uint64_t max_age_ns);
size_t align_nhosts(const struct align *a, size_t *npower);
/* Bytes charged to the memory budget now. */
size_t align_budget_used(const struct align *a);

#endif
