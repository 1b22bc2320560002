/*
 * estimd's private header: the modules that turn aligned slots into estimates
 * (idle/active split, attribution, power models, online training), grouped by
 * file. None needs root; all are pure code (no sockets, no clocks read, no
 * files) except state.c (the totals' state file), sidecar.c (the estimator
 * sidecar's socket), modelio.c (model files) and spec.c (reads procfs and
 * sysfs). main.c and the model sources (sources.h) wire them to the bus.
 */
#ifndef ESTIMD_H
#define ESTIMD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

#include "budget.h"
#include "kmodel.h"
#include "wb_msgs.h"
#include "plaus.h"

/* ---- features.c: Kepler's model features, computed from one slot, per second ---- */

enum feat_id {
	FEAT_CPU_TIME_MS,      /* bpf_cpu_time_ms: process on-CPU time, ms per second */
	FEAT_CPU_CYCLES,       /* cpu_cycles per second */
	FEAT_CPU_INSTRUCTIONS, /* cpu_instructions per second */
	FEAT_CACHE_MISS,       /* cache_miss per second */
	FEAT_COUNT,
	FEAT_UNMEASURED =
	    -1, /* a Kepler feature wattbus does not measure (bpf_page_cache_hit, irq): 0 */
};

const char *feat_name(enum feat_id id);
/* Kepler's feature name -> id, or FEAT_UNMEASURED. */
int feat_from_name(const char *name);
/* Slot length in seconds (0 when t1 <= t0). */
double feat_slot_s(const struct wb_aligned *a);
/*
 * Feature values of the slot, per second of slot: x[FEAT_*]. Process CPU time
 * sums the listed processes (pid 0, the idle task, excluded), as Kepler's eBPF
 * source does. Returns 0, or -1 when the slot has no length.
 */
int feat_from_slot(const struct wb_aligned *a, double x[FEAT_COUNT]);

/* ---- model.c: Kepler model-db weights (linear and curve-fit), wattbus model messages ---- */

/* A form is a row of model_forms (forms.c), its index one of these. */
enum model_form {
	MODEL_LINEAR,
	MODEL_LOGARITHMIC,
	MODEL_LOGISTIC,
	MODEL_EXPONENTIAL,
	MODEL_FORM_COUNT,
};
#define MODEL_CURVE_MAX 4 /* parameters of the largest curve form (logistic) */
enum model_output { MODEL_ABS, MODEL_DYN };

#define MODEL_FEATS_MAX 32
#define MODEL_ZONES_MAX 8
#define MODEL_ERR_MAX 512

struct model_feat {
	char name[64];
	int id; /* enum feat_id, or FEAT_UNMEASURED */
	double weight, scale, mean;
};

struct model_zone {
	char zone[16]; /* package, core, uncore, dram, platform */
	double bias_w;
	size_t nfeat;
	struct model_feat feat[MODEL_FEATS_MAX]; /* in file order */
	size_t curve_feat;	       /* the one feature a curve fit reads: model_curve_feature */
	double curve[MODEL_CURVE_MAX]; /* CurveFit_Weights */
	size_t ncurve;
	double mae_w, mape; /* held-out error when known (trained by wattbus), else 0 */
};

struct model {
	char name[128];
	char origin[256]; /* file path, or "bus:HOST" */
	enum model_form form;
	enum model_output output;
	uint64_t cores; /* logical CPUs of the machine it was trained on (machine_spec.cores); 0
			   unknown */
	uint64_t train_slots, test_slots;
	double mae_w; /* the whole model's error as Kepler's weights answer states it (mae); 0
			 unknown */
	size_t ncategorical; /* Categorical_Variables entries, which wattbus cannot evaluate
				(ignored) */
	size_t nzones;
	struct model_zone zones[MODEL_ZONES_MAX];
};

/* How to read a weights file whose JSON does not say it (Kepler takes these from its config). */
struct model_hint {
	const char *
	    trainer; /* NULL/"auto", or a model-db trainer name (LogarithmicRegressionTrainer...) */
	const char *output; /* NULL/"auto", "AbsPower" or "DynPower" */
	uint64_t cores;	    /* >0: overrides machine_spec.cores */
};

const char *model_output_name(enum model_output output);
/*
 * Parse Kepler model-db weights JSON. origin (the file name) names the input in
 * errors and, as model-db names its files after the trainer and the output
 * type, tells the form when the JSON does not. Returns 0, or -1 with err
 * "ORIGIN: KEY: reason" (KEY as a dotted JSON path). *out is overwritten.
 */
int model_parse(const char *text, size_t len, const char *origin, const struct model_hint *hint,
		struct model *out, char *err, size_t errlen);
/* The model's index of zone (package...), or -1. */
int model_find_zone(const struct model *m, const char *zone);
/* A zone that is all zeros (model-db publishes such for zones it did not train) models nothing. */
bool model_zone_active(const struct model *m, const struct model_zone *z);
/*
 * The feature a curve fit of zone reads, as kepler-model-server's curve-fit
 * trainer fitted it (main_feature(group, zone)): for dram cache_miss, else
 * bpf_page_cache_hit; for the other zones cpu_instructions, else bpf_cpu_time_ms;
 * else the first. Its index in feat[] (0 without features).
 */
size_t model_curve_feature(const struct model_zone *z);
/* Power of one zone in watts at features x (per second). NaN when the form is undefined there. */
double model_zone_power_w(const struct model *m, const struct model_zone *z,
			  const double x[FEAT_COUNT]);
/* The zone's own feature values v[0..z->nfeat) (feat[] order) from the slot's features x. */
void model_zone_feats(const struct model_zone *z, const double x[FEAT_COUNT], double *v);
/* model_zone_power_w at the zone's own feature values v (model_zone_feats). */
double model_zone_eval_w(const struct model *m, const struct model_zone *z, const double *v);
/*
 * A zone's power by lib/plaus.h's rule (wb_plaus_zone_power under max_w) from the
 * model's answers at v and at zero usage (AbsPower; idle scaled by ratio, the core
 * ratio), or its answer at v as the active power (DynPower: idle 0, the caller adds
 * a configured one). Returns the fault of the model's answer.
 */
enum wb_power_fault model_zone_split(const struct model *m, const struct model_zone *z,
				     const double *v, double ratio, double max_w,
				     struct wb_zone_power *out);
/*
 * Evaluate every active zone on a grid of feature values before the model is
 * used: each feature the zone reads alone and all of them together, from 0 to
 * 10x its scale and by decades to past what one node reaches (1e6 CPU-ms/s,
 * 1e13 cycles or instructions/s, ...). Returns 0, or -1 with err naming the
 * model, the zone and the first point whose output is not finite, or (max_w >
 * 0) above max_w where every feature is within its scale (the range the model
 * was trained on: no zone draws more there).
 */
int model_check_grid(const struct model *m, double max_w, char *err, size_t errlen);
/*
 * Kepler weights JSON of a model (linear: means folded into the bias; curve
 * fits: feature scales and CurveFit_Weights). malloc'd, or NULL (err).
 */
char *model_to_kepler_json(const struct model *m, char *err, size_t errlen);
/* The model's zones as lib/kmodel.h writes them (weight.json, metadata.json); their
 * features go to feats. Valid while m is. */
void model_km_zones(const struct model *m, struct km_zone zones[MODEL_ZONES_MAX],
		    struct km_feat feats[MODEL_ZONES_MAX][MODEL_FEATS_MAX]);
/*
 * A linear model as a model message (arrays owned by msg, freed by wb_msg_clear).
 * Returns 0, or -1 when the model has a curve-fit form or too many features.
 */
int model_to_msg(const struct model *m, struct wb_model *msg, char *err, size_t errlen);
/* A received model message, checked, as a model. Returns 0 or -1 (err names the key). */
int model_from_msg(const struct wb_model *msg, struct model *out, char *err, size_t errlen);
/* One line on a model for the log: name, origin, form, zones and their error. */
void model_describe(const struct model *m, char *buf, size_t size);

/* ---- forms.c: the model forms, one row each ---- */

struct model_form_def {
	const char *name; /* "logarithmic": logs, errors, wattbus train */
	const char
	    *trainer; /* model-db's trainer that publishes it, written in files wattbus makes */
	const char *trainer_also; /* another trainer name that says the form (NULL: none) */
	size_t nparams;		  /* CurveFit_Weights (0: linear weights, no curve) */
	/* value at u for parameters c, and its gradient in c into grad (nparams entries); NaN where
	 * the form is undefined. NULL for linear (model_zone_eval_w weighs the features). */
	double (*eval)(const double *c, double u, double *grad);
	/* The parameters y depends on linearly, y = c[amp] * shape(u) + c[offset]: each start of
	 * a fit solves them by least squares, and a zone with both 0 models nothing. */
	size_t amp, offset;
	const double (*starts)[MODEL_CURVE_MAX]; /* a fit's starting points (shape parameters) */
	size_t nstarts;
};

/* Indexed by enum model_form. */
extern const struct model_form_def model_forms[MODEL_FORM_COUNT];
const char *model_form_name(enum model_form form);
/* "auto|SGDRegressorTrainer|...": every row's trainer names, as a config key's choices. */
void model_trainer_names(char *buf, size_t size);
/* Parameters of a curve form (0 for linear). */
size_t model_curve_len(enum model_form form);
/* A curve form's value at u for parameters c, and (grad, model_curve_len entries; may be NULL)
 * its gradient in c. NaN where the form is undefined. */
double model_curve_eval(enum model_form form, const double *c, double u, double *grad);

/* ---- modelio.c: model files ---- */

/* Read and parse a file (at most 4 MiB). Same contract as model_parse. */
int model_load_file(const char *path, const struct model_hint *hint, struct model *out, char *err,
		    size_t errlen);
/* Write model_to_kepler_json to path atomically (temp file + rename). Returns 0 or -1 (err). */
int model_save_file(const struct model *m, const char *path, char *err, size_t errlen);

/* ---- spec.c: this machine's spec, as Kepler's model server matches node types ---- */

/*
 * This machine's spec (lib/kmodel.h's struct km_spec, as Kepler's profiler
 * measures it: logical CPUs, sockets as distinct physical ids (at least 1),
 * MemTotal in whole GiB rounded down, max(cpufreq maximum, cpu MHz) to 100 MHz).
 * Read the spec from procfs_root/cpuinfo, procfs_root/meminfo and
 * sysfs_root/devices/system/cpu/cpu*\/cpufreq/cpuinfo_max_freq. Missing
 * figures stay 0 (processor ""). Returns 0, or -1 when cpuinfo cannot be read (err).
 */
int mspec_read(const char *procfs_root, const char *sysfs_root, struct km_spec *out, char *err,
	       size_t errlen);
/* The same, with the roots from $WATTBUS_PROCFS_ROOT and $WATTBUS_SYSFS_ROOT (default /proc, /sys).
 */
int mspec_read_env(struct km_spec *out, char *err, size_t errlen);
/* The spec as a model message carries it; cores, when not 0, replaces the spec's (the trainer's
 * host's). */
void mspec_to_msg(const struct km_spec *s, uint64_t cores, struct wb_model_spec *out);

/* ---- kepler.c: Kepler's model server request and estimator sidecar protocol ---- */

#define KEPLER_METRICS_MAX 8

struct kepler_metrics {
	size_t n;
	const char *name[KEPLER_METRICS_MAX];
	int id[KEPLER_METRICS_MAX]; /* enum feat_id, or FEAT_UNMEASURED (sent as 0) */
};

/*
 * The feature names estimd supplies: bpf_cpu_time_ms and bpf_page_cache_hit
 * (which wattbus does not measure and sends as 0, as Kepler's BPF groups need
 * it), and cpu_cycles, cpu_instructions, cache_miss when the slot's counters
 * (usaged's) include cycles, instructions, cache_misses. counters may be NULL.
 */
void kepler_metrics_from(const char (*counters)[16], size_t ncounters, struct kepler_metrics *km);
/* A ModelRequest (POST /model) for weights of output_type; spec may be NULL. malloc'd JSON. */
char *kepler_model_request(const struct kepler_metrics *km, const char *output_type,
			   const struct km_spec *spec);
/*
 * A PowerRequest for the estimator sidecar with two rows: the slot's features
 * x, and all zeros (the idle power); arch: the machine's (uname), NULL: "unknown".
 * malloc'd JSON without a newline.
 */
char *kepler_power_request(const struct kepler_metrics *km, const char *output_type,
			   const double x[FEAT_COUNT], const char *arch);

struct kepler_powers {
	size_t n;
	char zone[MODEL_ZONES_MAX][16];
	double p_w[MODEL_ZONES_MAX];  /* at the slot's features */
	double p0_w[MODEL_ZONES_MAX]; /* at zero usage */
	double core_ratio;	      /* the answer's, 1 when absent */
};

/*
 * Parse the sidecar's answer to kepler_power_request. Returns 0, or -1 with
 * err naming the key (a non-empty msg, no powers, a zone not of Kepler's, a
 * row count other than 2, a value not a number); kepler_powers_check says
 * whether the powers are plausible.
 */
int kepler_powers_parse(const char *text, size_t len, struct kepler_powers *out, char *err,
			size_t errlen);
/*
 * The plausibility of a parsed answer, by lib/plaus.h's rule under max_w: every
 * zone's powers finite, not negative, within the bound, and the zero-usage one not
 * above the other. Returns 0, or -1 with err naming the zone, its values and why.
 */
int kepler_powers_check(const struct kepler_powers *kp, double max_w, char *err, size_t errlen);
/* Whether the answer read so far is whole (parses as JSON). */
bool kepler_answer_complete(const char *text, size_t len);

/* ---- sidecar.c: the estimator sidecar, a peer kept ---- */

/*
 * Whether estimd may trust the socket at path: it must be a socket owned by root or self, in a
 * directory owned by root or self that neither its group nor others can write, or a sticky one
 * (others cannot replace a file they do not own there). 0, or -1 (refused, why says which
 * rule), or -2 (no such file: no sidecar there yet).
 */
int sidecar_socket_check(const char *path, uid_t self, char *why, size_t whylen);

enum sidecar_status {
	SIDECAR_ANSWERED,    /* an answer came (kepler_powers_parse says whether it is one) */
	SIDECAR_TIMEOUT,     /* asked, no answer within the slot's wait (the exchange goes on; its
				answer is read and dropped), or none within answer_max; a warm-up:
				asked, not waited for */
	SIDECAR_BUSY,	     /* not asked: an earlier exchange still waits for its answer */
	SIDECAR_BACKOFF,     /* not asked: unreachable lately, tried again after a backoff */
	SIDECAR_UNREACHABLE, /* no socket, refused, closed without an answer, a send/recv error */
	SIDECAR_REFUSED,     /* the socket or the process on it fails the ownership rule */
	SIDECAR_ERROR,	     /* out of memory, no thread */
};

/* What an exchange brought back. */
struct sidecar_done {
	enum sidecar_status status;
	bool warm_up;
	bool cancelled; /* by sidecar_set_path */
	double ms;	/* from the request to its end */
	char buf[4097];
	size_t len;
	char err[384];
};

struct sidecar;
/*
 * The sidecar at path (a unix stream socket). wait_ns: how long a slot waits for its answer;
 * answer_max_ns: how long an exchange keeps its connection for the answer (late ones are read
 * and dropped) before closing it. NULL with err.
 */
struct sidecar *sidecar_new(const char *path, uint64_t wait_ns, uint64_t answer_max_ns, char *err,
			    size_t errlen);
void sidecar_set_times(struct sidecar *s, uint64_t wait_ns, uint64_t answer_max_ns);
/* A unix socket's path is shorter than this (sockaddr_un). */
#define SIDECAR_PATH_MAX 108
/* Ask the sidecar at path from the next exchange on (the backoff starts over; an exchange in
 * flight is cancelled); path shorter than SIDECAR_PATH_MAX (else ignored). */
void sidecar_set_path(struct sidecar *s, const char *path);
/* Cancels the exchange in flight without waiting. NULL-safe, nulls *self_p. */
void sidecar_destroy(struct sidecar **self_p);
const char *sidecar_path(const struct sidecar *s);
/*
 * The slot's exchange: ask with req and wait up to wait_ns (warm_up: do not wait; the
 * warm-up's answer comes through sidecar_collect). SIDECAR_ANSWERED fills d; any other status
 * says with err why the local model stands in. Call sidecar_collect first: an exchange that
 * has ended is handed over there.
 */
enum sidecar_status sidecar_ask(struct sidecar *s, const char *req, bool warm_up,
				struct sidecar_done *d, char *err, size_t errlen);
/*
 * The exchange a slot stopped waiting for (or the warm-up): its fd (job.h) turns readable when
 * it ends (-1: none in flight); sidecar_collect then hands it over (true with d). Until then
 * sidecar_ask answers SIDECAR_BUSY.
 */
int sidecar_fd(const struct sidecar *s);
bool sidecar_collect(struct sidecar *s, struct sidecar_done *d);

/* ---- attrib.c: exact integer attribution ---- */

struct attrib_scratch {
	struct attrib_rem *rem;
	size_t cap;
};

void attrib_scratch_free(struct attrib_scratch *s);
/*
 * Split amount_uj over n parts in proportion to w[i] / denom, and the share
 * (denom - sum w) / denom into *rest_uj. denom 0 (or below sum w) means sum w.
 * Floors first, then the leftover microjoules one each to the largest
 * remainders (ties: lower index, the rest last), so that
 * sum out[i] + *rest_uj == amount_uj exactly. Returns 0, or -1 on ENOMEM.
 */
int attrib_split(uint64_t amount_uj, const uint64_t *w, size_t n, uint64_t denom, uint64_t *out,
		 uint64_t *rest_uj, struct attrib_scratch *s);

/* ---- idle.c: idle/active split per zone and slot ---- */

enum idle_method {
	IDLE_RATIO,	 /* Kepler >= 0.10: active = E * busy / total */
	IDLE_FIXED,	 /* idle = configured watts * slot length */
	IDLE_REGRESSION, /* idle = intercept of zone power against CPU usage over recent slots */
};

#define IDLE_FIXED_MAX 32

struct idle_fixed {
	char key[64]; /* zone name (package-0) or zone kind (package) */
	double watts;
};

struct idle_conf {
	enum idle_method method;
	struct idle_fixed fixed[IDLE_FIXED_MAX];
	size_t nfixed;
	size_t window;	   /* regression: slots kept */
	size_t min_slots;  /* regression: slots needed before the intercept is used */
	double min_spread; /* regression: standard deviation of usage needed to refit */
};

/* Regression state of one zone. */
struct idle_reg {
	double *u, *p; /* ring of (usage ratio, zone watts) */
	size_t n, head, cap;
	double idle_w; /* last intercept fitted with enough spread */
	bool valid;
};

/* "package=20,dram-0=4.5" entries -> conf->fixed. Returns 0 or -1 (err names the entry). */
int idle_parse_fixed(const char *const *entries, size_t n, struct idle_conf *conf, char *err,
		     size_t errlen);
const char *idle_method_name(enum idle_method method);
void idle_reg_free(struct idle_reg *r);
/* A configured idle power for a zone: its own entry (package-1) wins over its kind's (package). */
const struct idle_fixed *idle_find_fixed(const struct idle_conf *conf, const char *name,
					 const char *zone);
/*
 * Split energy_uj of one zone into active and idle for a slot of slot_s
 * seconds with busy/total CPU time. reg is the zone's regression state (may be
 * NULL for other methods). Returns the method actually used: the ratio method
 * stands in when a fixed value is missing for the zone or the regression has
 * not learned an idle power yet.
 */
enum idle_method idle_split(const struct idle_conf *conf, struct idle_reg *reg, const char *name,
			    const char *zone, uint64_t energy_uj, double slot_s, uint64_t busy_ns,
			    uint64_t total_ns, uint64_t *active_uj, uint64_t *idle_uj);

/* ---- gpu.c: idle/active and process shares of GPU zones ---- */

struct gpu_idle {
	double min_w; /* lowest power of a slot with no compute process */
	bool have;
};

struct gpu_scratch {
	struct wb_gpu_proc *procs;
	bool *taken;
	size_t cap;
};

/* A zone a GPU source describes (uuid given): split by gpu_split and gpu_weights. */
bool gpu_zone(const struct wb_slot_zone *sz);
/*
 * Idle and active of GPU zone sz in a slot of slot_s seconds: idle at the power conf fixes for
 * the zone (its name or "gpu"), else at the lowest power st has seen in a slot whose samples
 * listed no compute process (0 before one is seen); st learns from this slot the power over
 * measured_s, the seconds of the slot its energy covers (0: not measured whole, nothing learned).
 * *idle_w: the power used.
 */
void gpu_split(const struct idle_conf *conf, struct gpu_idle *st, const struct wb_slot_zone *sz,
	       double slot_s, double measured_s, uint64_t *active_uj, uint64_t *idle_uj,
	       double *idle_w);
/*
 * Weights w[0..a->n_procs) of the slot's processes on GPU zone sz, and the denominator: the
 * weights of every process the GPU listed, so that the share of one absent from the slot's
 * processes stays unattributed. SM time; 1 each when no process has any or for the one process
 * of an exclusive GPU. Returns 0, or -1 on ENOMEM.
 */
int gpu_weights(const struct wb_slot_zone *sz, const struct wb_aligned *a, uint64_t *w,
		uint64_t *denom, struct gpu_scratch *s);
void gpu_scratch_free(struct gpu_scratch *s);

/* ---- train.c: online least squares per zone, Kepler weights out ---- */

#define TRAIN_ZONES 5 /* package, core, uncore, dram, platform */

struct train_conf {
	size_t window;	      /* slots kept (train and test together) */
	size_t min_slots;     /* training slots needed before a fit */
	size_t every;	      /* fit every this many slots */
	size_t holdout_every; /* every k-th slot is held out for testing */
};

struct train_sample {
	double x[FEAT_COUNT];
	double y_w[TRAIN_ZONES]; /* zone power, watts; < 0: zone absent */
	bool test;
};

struct trainer {
	struct train_conf conf;
	struct train_sample *ring;
	size_t n, head;
	uint64_t seen, since_fit, fits;
	bool zone_seen[TRAIN_ZONES];
};

const char *train_zone_name(int i);
/* Kepler zone of a RAPL/meter zone kind (psys -> platform), or -1. */
int train_zone_index(const char *kind);
int trainer_init(struct trainer *t, const struct train_conf *conf);
void trainer_free(struct trainer *t);
/* Add one measured slot. Returns 1 when a fit is due, 0 otherwise, -1 when the slot is unusable. */
int trainer_add(struct trainer *t, const struct wb_aligned *a);
/* Add one sample directly (tests, and trainer_add). Same return. */
int trainer_add_sample(struct trainer *t, const double x[FEAT_COUNT],
		       const double y_w[TRAIN_ZONES]);
/*
 * Fit every zone seen from the training samples of the window (standardised
 * features, least squares), measure MAE and MAPE on the held-out samples, and
 * write a linear AbsPower model named name into *out. Returns 0, -1 when
 * there are too few samples, or -2 when the fit fails model_check_grid (err
 * says why).
 */
int trainer_fit(struct trainer *t, const char *name, uint64_t cores, struct model *out, char *err,
		size_t errlen);
/*
 * As trainer_fit for any form: linear is trainer_fit; the curve-fit forms
 * (logarithmic, logistic, exponential) are fitted per zone on CPU time scaled
 * by its largest training value, as model-db's curve fits take their first
 * feature (Levenberg-Marquardt from several starting points), with the same
 * held-out MAE and MAPE.
 */
int trainer_fit_form(struct trainer *t, enum model_form form, const char *name, uint64_t cores,
		     struct model *out, char *err, size_t errlen);

/* ---- totals.c: cumulative node energy per host and zone, across lost slots and restarts ---- */

#define TOTALS_ZONES_MAX 256 /* zone names one host's count holds (an estimate has at most 256) */
#define TOTALS_HOSTS_MAX 4096

struct tot_zone {
	char name[64];
	bool in_have;	/* in_uj is known (alignd's total_uj in the same total_epoch) */
	uint64_t in_uj; /* alignd's total_uj of the zone in the last slot */
	uint64_t total_uj, active_uj, idle_uj; /* ours: active_uj + idle_uj == total_uj */
};

#define TOTALS_VMS_MAX 4096 /* VMs one host's count holds; the least recently seen goes first */

/* One VM's cumulative energy, per zone of its host (uj[k] belongs to the host's z[k]). */
struct tot_vm {
	char id[128];
	uint64_t used;
	uint64_t *uj;
	size_t n;
};

struct tot_host {
	char host[64];
	struct tot_vm *vm;
	size_t nvm, vmcap;
	uint64_t epoch;	   /* our total_epoch for this host */
	char in_src[32];   /* the aligned producer of in_epoch */
	uint64_t in_epoch; /* alignd's total_epoch of the last slot */
	bool have_t;
	uint64_t last_t1;	 /* end of the last slot counted */
	struct wb_rewind rewind; /* slots of a new alignd count behind last_t1: a clock set back */
	uint64_t used;
	struct tot_zone *z;
	size_t nz, zcap;
};

struct totals {
	struct tot_host *h;
	size_t n, cap, max;
	struct wb_budget *budget; /* charged for the zones of every host (NULL: none) */
	uint64_t last_epoch;	  /* total epochs are unique within this estimd */
	uint64_t tick;
	struct wb_plaus
	    bound; /* [global] max_zone_w, max_host_w: how far alignd's totals may step */
};

struct tot_result {
	bool stale;	       /* the slot ended no later than the last one: it added nothing */
	uint64_t recovered_uj; /* energy beyond the slot's own: slots never received */
	uint64_t epoch;	       /* total_epoch of the host */
	unsigned implausible;  /* zones whose alignd total jumped more than a zone can draw: not
				  trusted */
	unsigned saturated;    /* zones whose total is held at the wire's maximum */
	bool rewound; /* the host's time line was set back: counting continues from this slot */
};

int totals_init(struct totals *t, size_t max_hosts);
/* Whether the totals count host, or a new record for it with nz zones fits the budget. */
bool totals_admits(const struct totals *t, const char *host, size_t nz);
void totals_free(struct totals *t);
/*
 * Advance the host's totals by slot a, whose estimated zones are zones[0..nz)
 * (in measured mode, zones[i] is a's zones[i]), and fill their *_total_uj.
 * Measured: by the difference of alignd's total_uj to the last slot of the
 * same src and total_epoch (lost slots included), else by the slot's energy.
 * Model mode: lost slots (a time gap within one alignd total_epoch) count at
 * this slot's power. The part of a slot before the end of the last one is not
 * counted again. The extra energy is split into active and idle in the slot's
 * own ratio. Returns 0, or -1 (no length, ENOMEM: zones untouched).
 */
int totals_slot(struct totals *t, const struct wb_aligned *a, struct wb_est_zone *zones, size_t nz,
		bool measured, uint64_t busy, uint64_t total, struct tot_result *res);
/*
 * Advance the cumulative energy of each VM of the host's last counted slot by
 * its energy in that slot: vms[g].energy_uj[i] (zone zones[i]) plus, when
 * idle_uj is not NULL, idle_uj[g * nz + i] (its share of idle); fill each
 * vms[g].total_uj from pool (ngroups x nz values, owned by the caller). Call it
 * after totals_slot, for a slot that was not stale; a new count of the host
 * starts every VM at 0 with it. Returns 0, or -1 (ENOMEM, the budget: totals
 * of the VMs that did not fit are left out of the message).
 */
int totals_vms(struct totals *t, const char *host, const struct wb_est_zone *zones, size_t nz,
	       struct wb_est_group *vms, size_t ngroups, const uint64_t *idle_uj, uint64_t *pool);
struct estimator;
/*
 * The learned idle power of every GPU zone, as the state file holds it: {"HOST": {"ZONE": W}}
 * (a minimum learned over the run, lost at a restart otherwise); a new reference, NULL on ENOMEM.
 */
json_t *estimator_gpu_idle_to_json(const struct estimator *e);
/*
 * Resume the learned GPU idle powers from that object (before any slot). An entry that is not a
 * host and zone name of 1 to 63 bytes with a power in [0, WB_ZONE_MAX_W] is skipped; returns how
 * many were taken.
 */
size_t estimator_gpu_idle_from_json(struct estimator *e, const json_t *o);

/* The totals as their state file holds them (saved at now_ns); a new reference, NULL on ENOMEM. */
json_t *totals_to_json(const struct totals *t, uint64_t now_ns);
/*
 * Resume from a state totals_to_json built (before any slot), checked as a whole first.
 * Returns 0 (*nhosts read) or -1 (why says what is wrong with it; nothing used).
 */
int totals_from_json(struct totals *t, const json_t *root, size_t *nhosts, char *why, size_t len);

/* ---- state.c: the totals' state file ---- */

/* Write the totals and the learned GPU idle powers to path atomically (JSON; fsync'd when sync).
 * Returns 0 or -1 (err names the file). */
int estimd_state_save(struct estimator *e, const char *path, uint64_t now_ns, bool sync, char *err,
		      size_t errlen);
/* Resume from a saved state (before any slot), checked as a whole first. Returns 0 (*nhosts
 * hosts' totals, *ngpus GPU zones' idle read) or -1 (err). */
int estimd_state_load(struct estimator *e, const char *path, size_t *nhosts, size_t *ngpus,
		      char *err, size_t errlen);

/* ---- estimate.c: one aligned slot -> one estimate ---- */

enum est_mode { EST_AUTO, EST_MEASURED, EST_MODEL };
enum est_by { EST_BY_CPU, EST_BY_INSTRUCTIONS };
enum est_base { EST_BASE_NODE, EST_BASE_PROCS };

struct est_conf {
	enum est_mode mode;
	enum est_by by;
	enum est_base base;
	struct idle_conf idle;
	struct idle_conf gpu_idle; /* fixed idle power of GPU zones (gpu_idle_w); none: learned */
	bool train;
	bool vm_idle; /* a VM's cumulative energy includes its share of idle (CPU time of the
			 node's) */
	struct train_conf train_conf;
	uint64_t model_cores; /* >0: the model's machine cores, overriding the file */
	double max_zone_w;    /* a zone's power from a model or sidecar is clipped to it (0:
				 WB_ZONE_MAX_W) */
	size_t budget_bytes;  /* learning state and totals of all hosts together; 0: no limit */
	/* platform zones (a BMC's whole-machine power): their active energy goes to workloads too;
	 * false (Kepler's rule): all of it stays unattributed */
	bool attribute_platform;
	struct wb_plaus bound; /* the physical bound ([global] max_zone_w, max_host_w) */
};

/* What happened in one slot, for counters and logs. */
struct est_result {
	bool measured;		 /* measured mode (else model mode) */
	bool no_model;		 /* model mode without a model: zones left empty */
	bool external;		 /* model mode with the sidecar's powers (estimator_set_external) */
	unsigned idle_fallbacks; /* zones where the ratio method stood in */
	unsigned model_implausible;	 /* zones whose model gave a power not finite (0 W used) or
					    above the bound (the bound used) */
	char implausible[MODEL_ERR_MAX]; /* the first such zone, for the log */
	struct model *trained;		 /* a new model from training; the caller owns it */
	bool stale;	       /* ended no later than the host's last slot: totals unchanged */
	uint64_t recovered_uj; /* energy of aligned slots never received, now in the totals */
	unsigned totals_implausible, totals_saturated; /* see struct tot_result */
	bool clock_rewound;			       /* see struct tot_result */
	bool vm_totals_short; /* VMs left without a cumulative total (memory, the budget) */
	char train_err[MODEL_ERR_MAX]; /* why a due fit failed, else "" */
	bool train_implausible;	       /* the fit failed the grid check (train_err says where) */
	bool budget_refused;	       /* a new host the memory budget has no room for: rejected */
	bool budget_short; /* learning state left out for the budget (idle ratio, no training) */
};

struct estimator;

struct estimator *estimator_new(const struct est_conf *conf);
void estimator_destroy(struct estimator **self_p);
/* Replace the configuration (reload); per-host learning state is kept where it still applies. */
int estimator_set_conf(struct estimator *e, const struct est_conf *conf);
/*
 * The next slot in model mode takes its zones from these powers (the estimator
 * sidecar's answer) instead of the local model; name goes into the estimate's
 * model. Used for one slot only (NULL clears it).
 */
void estimator_set_external(struct estimator *e, const struct kepler_powers *kp, const char *name);
/* kepler_powers_check under the estimator's zone bound (max_zone_w). */
int estimator_check_external(const struct estimator *e, const struct kepler_powers *kp, char *err,
			     size_t errlen);
/* Use model m from now on (ownership taken; NULL: no model). The previous one is freed. */
void estimator_set_model(struct estimator *e, struct model *m);
const struct model *estimator_model(const struct estimator *e);
/* Core ratio applied to the model's idle power for a host of ncpu logical CPUs (Kepler:
 * min(ncpu/cores, 1)). */
double estimator_core_ratio(const struct estimator *e, uint64_t ncpu);
/*
 * Estimate one slot. On success *out holds the estimate; its arrays belong to
 * the estimator and stay valid until the next call (do not wb_msg_clear it),
 * except exes, which is a's: valid while a is.
 * Returns 0, or -1 with err when the slot cannot be used (rejected, counted by
 * the caller).
 */
int estimator_slot(struct estimator *e, const struct wb_aligned *a, struct wb_estimate *out,
		   struct est_result *res, char *err, size_t errlen);
/* The node totals (totals.c), to save and load them. */
struct totals *estimator_totals(struct estimator *e);
/* Bytes charged to the memory budget now. */
size_t estimator_budget_used(const struct estimator *e);

#endif
