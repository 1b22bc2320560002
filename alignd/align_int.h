/*
 * The alignment engine's own structures, shared by align.c (the engine, pure)
 * and state.c (saving and resuming them, the engine's only file I/O). Nothing
 * outside alignd/ includes it.
 */
#ifndef WB_ALIGN_INT_H
#define WB_ALIGN_INT_H

#include <czmq.h>

#include "alignd.h"
#include "log.h"
#include "plaus.h"

/* Distinct zone names whose totals one usage host keeps: a total_epoch holds at most this many. */
#define TOTALS_MAX 256

struct pending {
	struct wb_msg msg; /* WB_ALIGNED, usage part filled */
	uint64_t recv_ns;  /* arrival of the usage message that closed it */
	size_t bytes;	   /* charged to the budget while it waits */
};

/* Energy of one zone handed out in a usage host's slots since its total_epoch. */
struct zone_total {
	char name[64];
	uint64_t uj;
};

struct uhost {
	char name[64];
	char power_name[64];
	/* Cumulative totals on the wire (aligned.total_epoch, zones[].total_uj): they let a
	 * consumer recover the energy of slots it never received. */
	uint64_t total_epoch; /* 0: not started */
	struct zone_total *totals;
	size_t ntotals;
	bool live;   /* tables present; false once silent for host_timeout */
	bool have_t; /* last_t, epoch and the node totals are known */
	uint64_t last_recv_ns;
	uint64_t epoch;
	uint64_t last_t;   /* t0 of the next slot */
	uint64_t lost_acc; /* usage messages lost since the last slot */
	struct usage_state us;
	struct carry *carries;
	size_t ncarries, capcarries;
	struct pending *q; /* ring of slots waiting for power */
	size_t qhead, qlen, qcap;
	struct wb_rewind rewind;
	size_t widx;  /* index in align.waiting while waiting */
	bool waiting; /* in align.waiting: has slots waiting for power */
};

struct phost {
	char name[64];
	bool have_t;
	uint64_t last_recv_ns, last_t, interval_ns;
	uint64_t epoch;
	uint64_t keep_from_ns; /* scratch for pruning */
	/* Silent for host_timeout: its slots go without zones, and each curve keeps its last
	 * sample so that its return is bridged (or a gap) and the carries paid back exactly. */
	bool away;
	struct wb_rewind rewind;
	struct curve **curves;
	size_t ncurves;
	struct wb_budget *budget;
};

struct align {
	struct align_conf conf;
	align_emit_fn *emit;
	void *arg;
	zhashx_t *uhosts; /* name -> struct uhost */
	zhashx_t *phosts; /* name -> struct phost */
	struct uhost **waiting;
	size_t nwaiting, capwaiting;
	uint64_t next_curve_id;
	uint64_t last_total_epoch; /* total epochs are unique within this alignd */
	uint64_t last_sweep_ns;
	struct wb_budget budget;
	struct align_counters cnt;
	struct wb_ratelimit rl_skew, rl_power, rl_usage, rl_host, rl_state;
};

/* Find or create (NULL: refused, counted); align.c. */
struct uhost *uhost_get(struct align *a, const char *name);
struct phost *phost_get(struct align *a, const char *name);
struct curve *curve_of(struct align *a, struct phost *ph, const char *zone_name, uint64_t recv_ns);
struct carry *carry_of(struct uhost *uh, const char *zone_name);
struct zone_total *total_get(struct uhost *uh, const char *name);
struct wb_cpu_times cpu_at_boundary(const struct uhost *uh);

#endif
