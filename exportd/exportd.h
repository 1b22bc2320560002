/*
 * exportd's private header: the modules' prototypes, grouped by file. rbuf,
 * accum, stages and render are pure (no sockets, no clock reads, no files) so
 * that tests/unit/test_exportd_*.c drive them directly; main.c, http.c and
 * kube.c do the I/O, state.c the state file, main.c reads /proc/cpuinfo
 * through lib/cpuinfo.c.
 */
#ifndef WB_EXPORTD_H
#define WB_EXPORTD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "config.h"
#include "cpuinfo.h"
#include "follow.h"
#include "httpd.h"
#include "plaus.h"
#include "table.h"
#include "wb_msgs.h"

/* Workload levels, as Kepler's metricsLevel names them. */
enum ex_level { EX_NODE, EX_PROCESS, EX_CONTAINER, EX_POD, EX_VM, EX_NLEVELS };
#define EX_LEVELS_ALL ((1u << EX_NLEVELS) - 1)

/* ---- rbuf.c: a growable output buffer and Prometheus text helpers ---- */
struct rbuf_gz;
struct rbuf {
	char *p;
	size_t len, cap;
	bool oom;	    /* an allocation failed; the content is incomplete */
	struct rbuf_gz *gz; /* between rbuf_gzip_begin and _end: text is compressed as it comes */
};
/* Text beyond this many bytes is deflated as it is written (a gzip'd scrape holds no more). */
#define RBUF_GZ_CHUNK (256u << 10)

void rbuf_reset(struct rbuf *b);
void rbuf_free(struct rbuf *b);
/* Take the bytes out (malloc'd, owned by the caller); the buffer is left empty. */
char *rbuf_steal(struct rbuf *b, size_t *len);
void rbuf_put(struct rbuf *b, const char *s, size_t n);
void rbuf_puts(struct rbuf *b, const char *s);
void rbuf_putc(struct rbuf *b, char c);
void rbuf_printf(struct rbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void rbuf_u64(struct rbuf *b, uint64_t v);
/* v / 10^decimals with exactly that many decimals: 1234567 with 6 -> "1.234567". */
void rbuf_fixed(struct rbuf *b, uint64_t v, unsigned decimals);
/* A double as Prometheus reads it (%.17g, NaN, +Inf). */
void rbuf_double(struct rbuf *b, double v);
/* A label value: \ " and newline escaped, invalid UTF-8 replaced by U+FFFD. */
void rbuf_label_value(struct rbuf *b, const char *s, size_t maxlen);
/* name="value" (with a leading comma when first is false). */
void rbuf_label(struct rbuf *b, bool first, const char *name, const char *value, size_t maxlen);
/*
 * Compress what is written to b from now on as one gzip member at level 1..9:
 * the text is deflated in chunks of RBUF_GZ_CHUNK as it comes, so a large
 * exposition is never held whole. b must be empty. Returns 0 or -1 (b unchanged).
 */
int rbuf_gzip_begin(struct rbuf *b, int level);
/* End the member: b then holds the gzip bytes. Returns 0, or -1 with b->oom set. */
int rbuf_gzip_end(struct rbuf *b);

/* ---- kubenames.c: pod and container names from a Kubernetes PodList (pure) ---- */
#define KUBE_NAME_MAX 253 /* a DNS subdomain: the longest pod name or namespace */
struct kube_pod {
	char *uid, *name, *ns;
};
struct kube_container {
	char *id; /* the runtime's id without its "containerd://" prefix */
	char *name, *pod_uid;
};
struct kube_names;
/*
 * Parse a PodList (kubelet /pods, API server /api/v1/pods): every pod's uid,
 * name and namespace; every container instance's id (init, regular and
 * ephemeral containers, and the previous instance of one that restarted) and
 * name. Pods without uid or name are left out and counted in *skipped. NULL
 * with err when body is not JSON or not a PodList.
 */
struct kube_names *kube_names_parse(const char *body, size_t len, size_t *skipped, char *err,
				    size_t errlen);
void kube_names_destroy(struct kube_names **self_p);
/* NULL when unknown (self may be NULL). */
const struct kube_pod *kube_names_pod(const struct kube_names *self, const char *uid);
const struct kube_container *kube_names_container(const struct kube_names *self, const char *id);
size_t kube_names_npods(const struct kube_names *self);
size_t kube_names_ncontainers(const struct kube_names *self);

/* ---- kube.c: polls the kubelet or the API server for the names (I/O) ---- */
struct wb_daemon;
struct kube_opts {
	bool apiserver;		/* the API server's pod list of node, else the kubelet's /pods */
	const char *url;	/* base URL: https://HOST:PORT */
	const char *node;	/* apiserver: spec.nodeName to select */
	const char *token_file; /* bearer token, read again at every poll (tokens rotate) */
	const char *ca_file;	/* "" : the system's bundle */
	bool insecure;		/* skip TLS verification */
	uint64_t interval_ns, timeout_ns;
	size_t max_bytes;
};
typedef void(kube_names_fn)(void *arg, const struct kube_names *names);
struct kube;
/*
 * Poll at once and every interval, never blocking the loop (wb_httpc_start).
 * fn gets each new table (owned by kube, valid until the next call). Failures
 * keep the last good table and count in the stage's stat counters. NULL on
 * failure (logged).
 */
struct kube *kube_new(struct wb_daemon *d, const struct kube_opts *opts, kube_names_fn *fn,
		      void *arg);
/* After the loop ended: a request in flight is waited for (its deadline at most). */
void kube_destroy(struct kube **self_p);

/* ---- accum.c: exportd's own energy accumulators, fed by estimate messages ---- */
struct accum_limits {
	unsigned levels;	    /* bit per enum ex_level: which workloads to track */
	size_t max_series;	    /* workload series over all hosts */
	size_t max_terminated;	    /* terminated workloads kept per host and level */
	uint64_t terminated_ttl_ns; /* how long a terminated workload stays exported */
	uint64_t stale_after_ns;    /* a workload absent this long counts as terminated */
	size_t max_hosts;
	const char *node_name; /* node_name label; NULL or "": the message's host */
	/* [global] max_zone_w, max_host_w: how far estimd's totals may step since the last slot
	 * (the bus bounds them on receipt; this holds across exportd's own restart too) */
	struct wb_plaus bound;
};

/* Why an estimate was not (or not wholly) applied; exported by reason. */
enum accum_reason {
	ACC_R_SLOT,	/* t1 <= t0 */
	ACC_R_ARRAY,	/* a workload's energy_uj has not one entry per zone */
	ACC_R_ZONE_SUM, /* active_uj + idle_uj != energy_uj */
	ACC_R_OVER,	/* workloads got more than the zone's active energy */
	ACC_R_DUP_ZONE, /* the same zone (name and path) twice */
	ACC_R_ZONES,	/* more distinct zones than exportd keeps per host */
	ACC_R_HOSTS,	/* more hosts than max_hosts */
	ACC_R_STALE,	/* t1 not after the last slot applied for the host (replay, duplicate) */
	ACC_R_NOMEM,
	ACC_R_COUNT
};
const char *accum_reason_name(enum accum_reason r);

/* One exported zone: (zone, path) labels; RAPL domains of the same kind on several
 * sockets are summed into one zone whose path is "aggregated-<zone>", as Kepler does. */
struct ex_zone {
	char zone[16];
	char path[272];
	char *labels; /* zone="..",path=".." */
	uint8_t kind; /* its place in the host's kinds */
	uint64_t total_uj, active_uj, idle_uj;
	uint64_t slot_total_uj, slot_active_uj, slot_idle_uj;
	uint64_t slot_t1; /* t1 of the slot the slot_* values belong to */
	/* A GPU zone (estimate zone with a uuid): labelled gpu, gpu_uuid, vendor as Kepler's
	 * kepler_node_gpu_*, never aggregated, and its own kind for workloads. */
	bool gpu;
	uint64_t index;
	char uuid[96], model[96], vendor[16];
	double idle_w; /* of the last slot */
};

/* What makes an exported zone a GPU (NULL: not one). */
struct ex_gpu_id {
	const char *uuid, *model, *vendor;
	uint64_t index;
};

/*
 * A zone kind, the only zone label workload series have: every exported zone of
 * one kind, whatever its path (a measured zone and estimd's model zone while the
 * meter was late, a renumbered hwmon), adds to the same workload series.
 */
struct ex_kind {
	char zone[16]; /* the zone kind, or "gpu:INDEX" for a GPU */
	char *zlabel;  /* zone="..", or gpu="..",vendor=".." */
	bool gpu;
	bool platform; /* the platform zone: its energy is the workloads' only when estimd splits it
			*/
};

#define EX_MAX_ZONES 32
#define EX_MAX_TOTALS 64 /* estimate zones whose node totals a host keeps */

/* The node totals of one estimate zone (estimate.zones[].*total_uj) the node counters follow: the
 * total by lib/follow.h's rule, its active part beside it. */
struct ex_total {
	char name[64];
	struct wb_follow f; /* f.last_uj: total_uj of the last estimate applied */
	uint64_t active_uj; /* its active_total_uj */
};

/* A process, container, pod or VM and its accumulators. */
struct ex_work {
	uint8_t level;
	bool terminated;
	uint8_t nz;	  /* zone kinds in uj */
	uint32_t nseries; /* series it accounts for in the cap */
	uint64_t key;	  /* its key in the host's map of its level (struct ex_wslot) */
	/* identity: processes by (pid, start_ns), groups by id */
	uint64_t pid, start_ns;
	char *id;
	uint64_t ident; /* hash of what the labels were rendered from, to notice exec or rename */
	bool named; /* its labels hold a name from the kubelet: kept when the pod leaves the list */
	char *labels; /* the fixed labels: everything but node_name, state and zone */
	uint64_t cpu_ns;
	uint64_t *uj;	  /* nz accumulated totals, then nz energies of the last slot it ran in */
	uint64_t last_t1; /* last slot it appeared in */
	uint64_t terminated_t1;	       /* host time when it was marked terminated */
	struct ex_work *tprev, *tnext; /* the host's terminated list of its level, oldest first */
};

/*
 * A workload in its host's map of its level, a lib/table.h table: processes
 * keyed by pid, so that a reused pid finds its predecessor among the entries
 * of the key; groups by wb_hash_str(id). The work tells the entries of one key
 * apart (start_ns, id).
 */
struct ex_wslot {
	uint64_t key;
	struct ex_work *w;
	bool used;
};

struct ex_wmap {
	WB_TABLE(struct ex_wslot);
};

/*
 * A platform zone's own last slot (kepler_platform_watts is per BMC reading, while the node
 * metrics sum a kind's zones into one aggregated zone).
 */
struct ex_platform {
	char path[272];
	uint64_t slot_uj, slot_t1;
};
#define EX_MAX_PLATFORM 16

struct ex_host {
	char name[64];
	char *node_label; /* node_name=".." */
	uint64_t last_t0, last_t1, slot_ns;
	uint64_t last_scan_t1; /* when workloads were last checked for staleness */
	uint64_t estimates;
	double cpu_usage_ratio;
	char mode[16];
	uint64_t last_recv_ns; /* wall clock when the last estimate was applied (main sets it) */
	size_t nzones;
	struct ex_zone zones[EX_MAX_ZONES];
	size_t nkinds; /* workloads' energies are per kind */
	struct ex_kind kinds[EX_MAX_ZONES];
	size_t nplat;
	struct ex_platform plat[EX_MAX_PLATFORM];
	/* Node counters follow these (lib/follow.h); the state file names their count by the
	 * (src, total_epoch) of the last estimate. */
	bool tot_have;
	char tot_src[32];
	uint64_t tot_epoch;
	size_t ntot;
	struct ex_total tot[EX_MAX_TOTALS];
	struct ex_wmap works[EX_NLEVELS];
	struct ex_work *term_head[EX_NLEVELS], *term_tail[EX_NLEVELS];
	size_t nterm[EX_NLEVELS];
};

struct accum {
	struct accum_limits lim;
	size_t nhosts;
	struct ex_host **hosts;
	uint64_t series[EX_NLEVELS];
	uint64_t rejected[ACC_R_COUNT];
	uint64_t dropped[EX_NLEVELS]; /* series refused by the cap */
	uint64_t evicted[EX_NLEVELS]; /* terminated workloads removed (ttl, max_terminated, cap) */
	uint64_t clipped;	      /* slots that partly overlapped the previous one */
	uint64_t evicted_hosts;	      /* silent hosts that made room for new ones */
	uint64_t evicted_zones;	      /* silent zones that made room for new ones */
	uint64_t pid_reused;	      /* a new process took over the series of a pid */
	uint64_t underattributed;     /* slots whose workloads got less than the active energy */
	uint64_t recovered;	      /* slots whose node totals carried energy of lost estimates */
	uint64_t recovered_uj;	      /* that energy */
	uint64_t
	    totals_implausible; /* zones whose totals stepped past the bound: the slot counted */
	uint64_t version;	/* +1 per applied estimate */
	char *node_name;	/* our copy of lim.node_name */
	const struct kube_names *kube; /* pod and container names, or NULL (main sets it) */
};

/* NULL on ENOMEM. lim->node_name is copied. */
struct accum *accum_new(const struct accum_limits *lim);
void accum_destroy(struct accum **self_p);
/* Change the limits (reload); workloads of levels no longer tracked are dropped. */
void accum_set_limits(struct accum *self, const struct accum_limits *lim);
/*
 * Check an estimate and add it to the accumulators. Returns 0 when applied,
 * -1 when rejected (*reason set, counted in self->rejected, nothing applied).
 */
int accum_add(struct accum *self, const struct wb_estimate *est, enum accum_reason *reason);
struct ex_host *accum_host(struct accum *self, const char *name);
/* The container, pod or VM id of host h, or NULL (read-only: for rendering). */
const struct ex_work *accum_work(const struct ex_host *h, enum ex_level level, const char *id);
/*
 * Every host's node counters and the totals they were last diffed with, as the
 * state file holds them (workloads are not saved). A new reference, NULL on ENOMEM.
 */
json_t *accum_to_json(const struct accum *self);
/* Restore what accum_to_json built into an empty accum; *nhosts restored. 0, or -1 with err
 * (what is wrong with it; nothing restored). */
int accum_from_json(struct accum *self, const json_t *root, size_t *nhosts, char *err,
		    size_t errlen);
size_t accum_series(const struct accum *self);

/* ---- state.c: the state file of accum's node counters ---- */
/* Save accum_to_json to path (wb_json_save: atomic). 0, or -1 with err. */
int accum_save(const struct accum *self, const char *path, bool sync, char *err, size_t errlen);
/* Restore what accum_save wrote into an empty accum; *nhosts restored. 0, or -1 with err. */
int accum_load(struct accum *self, const char *path, size_t *nhosts, char *err, size_t errlen);

/* ---- stages.c: pipeline health from stat messages ---- */
/* A cumulative counter that survives the producer's restarts. */
struct mono {
	uint64_t base, last;
};
void mono_update(struct mono *m, uint64_t value, bool new_epoch);
uint64_t mono_value(const struct mono *m);

struct stage_named {
	char name[64];
	struct mono m;
};

#define STAGE_NAMED_MAX 64

struct stage_rec {
	char host[64], stage[16], src[32];
	char *labels; /* host="..",stage="..",src=".." */
	char version[32], mode[32];
	uint64_t epoch;
	uint64_t last_recv_ns;
	uint64_t uptime_ns, rss_bytes;
	uint64_t starts; /* epochs seen */
	struct mono frames_in, frames_out, lost, rejected, restarts, cpu_ns, checkpoint_failures;
	size_t nreasons, ncounters;
	struct stage_named reasons[STAGE_NAMED_MAX], counters[STAGE_NAMED_MAX];
};

enum stages_reason { ST_R_DUP_NAME, ST_R_SUM, ST_R_PRODUCERS, ST_R_NOMEM, ST_R_COUNT };
const char *stages_reason_name(enum stages_reason r);

struct stages {
	size_t n, max;
	struct stage_rec **recs;
	uint64_t rejected[ST_R_COUNT];
};

struct stages *stages_new(size_t max_producers);
void stages_destroy(struct stages **self_p);
/* Record a stat message received at recv_ns. Returns 0, or -1 (rejected, *reason set). */
int stages_add(struct stages *self, const struct wb_stat *st, uint64_t recv_ns,
	       enum stages_reason *reason);

/* ---- render.c: the /metrics text ---- */
/* The metric profiles exportd can serve (the metrics key), one bit each. */
enum ex_profile {
	EX_PROF_KEPLER,	  /* Kepler >= 0.10's names and labels (render.c) */
	EX_PROF_KEPLER09, /* Kepler 0.9's (render09.c), as its dashboards and model server ask */
	EX_NPROFILES
};
extern const char *const ex_profile_names[EX_NPROFILES];
/* Configured profiles ("kepler,kepler-0.9") as a bit set; -1 and err on an unknown one. */
int profiles_parse(const struct wb_strlist *names, unsigned *profiles, char *err, size_t errlen);

struct render_filter {
	unsigned profiles; /* bit per enum ex_profile; 0: Kepler's alone */
	unsigned levels;
	const struct wb_strlist *allow; /* fnmatch patterns; empty: all */
	const struct wb_strlist *deny;
};

/* exportd's own counters, kept by main.c and http.c. */
struct exportd_counters {
	struct wb_httpd_counters http; /* kept by the server (lib/httpd.h), auth's included */
	double last_render_s;
};

struct render_input {
	const struct accum *acc;
	const struct stages *st;
	const struct wb_cpuinfo_cpu *cpus; /* /proc/cpuinfo (lib/cpuinfo.h) */
	size_t ncpus;
	const struct exportd_counters *ctr;
	uint64_t now_ns;	   /* wall clock, for ages */
	uint64_t stage_timeout_ns; /* a stage is up when its last stat is younger */
	const char *version, *arch, *revision, *branch, *compiler;
	int64_t node_type; /* kepler_node_node_info's value (Kepler 0.9 profile) */
};

bool render_wanted(const struct render_filter *f, const char *metric, enum ex_level level);

/* One scrape's rendering, shared by the profiles' files. */
struct render_ctx {
	const struct render_input *in;
	const struct render_filter *f;
	struct rbuf *b;
	const char *name; /* current family */
	size_t namelen;
};
/* Start family name (# HELP, # TYPE) when the filter wants it; false: leave it out. level
 * EX_NLEVELS: no workload level. */
bool render_family(struct render_ctx *c, const char *name, const char *type, const char *help,
		   enum ex_level level);
/* name{ : the caller appends the labels, then ends the sample. */
void render_begin(struct render_ctx *c);
/* } v/10^decimals and the newline. */
void render_end_fixed(struct render_ctx *c, uint64_t v, unsigned decimals);

/* ---- render09.c: Kepler 0.9's families from the same accumulators ---- */
void render_kepler09(struct render_ctx *c);
/* Append the whole exposition (text format 0.0.4) to out. */
void render_metrics(const struct render_input *in, const struct render_filter *f, struct rbuf *out);

/* Configured levels ("node,process,...") as a bit set; -1 and err on an unknown one. */
int levels_parse(const struct wb_strlist *names, unsigned *levels, char *err, size_t errlen);
extern const char *const ex_level_names[EX_NLEVELS];

/* ---- http.c: /metrics and /healthz on the shared server (lib/httpd.h) ---- */
struct http_opts {
	struct wb_httpd_opts srv; /* the server's, basic auth included (handler set by http_new) */
	int gzip_level;
};

/* Fill out with the /metrics body. */
typedef void(http_metrics_fn)(void *arg, struct rbuf *out);

struct http;
struct http *http_new(const struct http_opts *opts, void *zloop, http_metrics_fn *fn, void *arg,
		      struct exportd_counters *ctr);
void http_destroy(struct http **self_p);
uint16_t http_port(const struct http *self);
/* Pure helpers, unit-tested. */
bool http_accepts_gzip(const char *accept_encoding);

#endif
