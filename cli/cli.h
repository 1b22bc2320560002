/* The wattbus command-line tool: one function per subcommand, grouped by file. */
#ifndef WB_CLI_H
#define WB_CLI_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "../powerd/powerd.h"
#include "bus.h"
#include "config.h"
#include "follow.h"
#include "vis.h"

/* tap.c */
int cmd_tap(int argc, char **argv);
/* record.c */
int cmd_record(int argc, char **argv);
int cmd_replay(int argc, char **argv);
/*
 * Call fn for every message of a recording (docs/RECORDING.md), in order: its
 * receive time, topic and body. fn returns 0 to go on, anything else to stop.
 * Returns 0 (the whole file read or fn stopped), or -1 (not a recording, or
 * unreadable; logged with the path).
 */
typedef int(record_fn)(uint64_t recv_ns, const char *topic, const void *body, size_t len,
		       void *arg);
int record_each(const char *path, record_fn *fn, void *arg);
/* train.c */
int cmd_train(int argc, char **argv);
/* pub.c */
int cmd_pub(int argc, char **argv);

/* keygen.c */
int cmd_keygen(int argc, char **argv);
/* doctor.c */
int cmd_doctor(int argc, char **argv);
/* vmpub.c */
int cmd_vmpub(int argc, char **argv);
/* vmtotals.c: the VM's totals that vmpub hands to its guest */
#define VM_TOTALS_ZONES_MAX 256
/* A zone of the host as the VM's stream carries it, and the VM's total in it. */
struct vm_zone {
	char name[64], zone[16];
	uint64_t index;
	struct wb_follow f; /* f.last_uj: the VM's total in the zone, in count f.count */
};
struct vm_totals {
	const char *vm; /* the VM's name in estimd's vms[] */
	size_t nz;
	struct vm_zone zones[VM_TOTALS_ZONES_MAX];
};
/*
 * The VM's zones for estimate e into zones (VM_TOTALS_ZONES_MAX): the host's
 * zones with the VM's totals in estimd's count (its total_epoch), each zone's
 * energy_uj what the total added since the last estimate built (lost ones
 * included). A slot without the VM (none of its processes ran) repeats the
 * totals of the same count, so that the guest hears from the host every slot;
 * in a new count the VM is at 0 until it runs (estimd starts every VM at 0 with
 * a count). A total not known (vmpub has just started and the VM has not run
 * yet) is not guessed: a guessed total below what the guest was told is one
 * that went back, and the real one after it would count twice what the guest
 * has. Returns the number of zones (0: nothing to send: a stale slot, totals
 * that did not fit estimd's budget, a total not known yet).
 */
size_t vm_totals_build(struct vm_totals *v, const struct wb_estimate *e, struct wb_est_zone *zones);
/* top.c */
int cmd_top(int argc, char **argv);

/* probe.c */
int cmd_probe(int argc, char **argv);
/* compare.c */
int cmd_compare(int argc, char **argv);

/* sources.c: powerd's own meter sources, as doctor and probe run them */
struct cli_pd_roots {
	struct pd_opts o; /* points into conf and cpuinfo */
	void *conf;	  /* [powerd] at powerd's defaults (its key table), on these roots */
	char cpuinfo[4096];
};
/* powerd's options on these roots (sysfs, /dev, /proc), with the defaults of powerd's key table.
 * Returns 0, or -1 having said why; cli_pd_opts_free releases it either way. */
int cli_pd_opts(struct cli_pd_roots *r, const char *sys, const char *dev, const char *proc);
/* Set one of powerd's keys ("exec", "nvml_library") as the flag flag would. 0, or -1 said. */
int cli_pd_set(struct cli_pd_roots *r, const char *key, const char *value, const char *flag);
void cli_pd_opts_free(struct cli_pd_roots *r);
struct cli_pd_try {
	const char *name;     /* the source */
	struct pd_set *set;   /* its zones (caller destroys), NULL when it has none */
	int zones;	      /* what discover returned */
	char why[PD_WHY_MAX]; /* why none, in powerd's words */
};
/*
 * Try each source `source = auto` tries (or only the one named), in powerd's
 * order, every one of them, not only up to the first usable; up to max.
 * Returns how many were tried.
 */
unsigned cli_pd_discover(const struct pd_opts *o, const char *only, struct cli_pd_try *out,
			 unsigned max);

/* series.c: statistics of sampled meters (pure) */
struct series {
	uint64_t *t_ns; /* when each value was read (monotonic or wall clock, one per series) */
	double *v;	/* uJ (a counter) or uW (a power reading) */
	size_t n, cap;
};
int series_add(struct series *s, uint64_t t_ns, double v);
void series_free(struct series *s);
/* The q-quantile (0..1) of n values, interpolated; NAN when n is 0. */
double series_quantile(const double *v, size_t n, double q);

struct meter_stats {
	size_t samples, changes;
	double spacing_s;		   /* median time between samples */
	double period_s;		   /* median time between changes: the update interval */
	double period_p10_s, period_p90_s; /* its spread */
	bool period_bounded; /* nearly every sample changed: the period is at most spacing_s */
	double step_min;     /* smallest change: uJ (counter) or uW (power) */
	double mean_w;	     /* average power over the run */
	double noise_w;	     /* standard deviation of the power over windows of 10 updates */
};
/* What the samples of one zone say; range_uj: where a counter wraps (0: never). NAN where unknown.
 */
void meter_analyze(const struct series *s, bool is_power, double range_uj, struct meter_stats *st);

struct meter_advice {
	bool known;	   /* false: the meter did not change twice, so its period is unknown */
	double interval_s; /* powerd and usaged `interval`; NAN when not known */
	double max_lag_s;  /* alignd `max_lag`; NAN when not known */
};
void meter_suggest(const struct meter_stats *st, double latency_max_s, struct meter_advice *adv);

struct lin_fit {
	size_t n;
	double gain, offset, r2; /* y = gain * x + offset; NAN when x does not vary */
};
void fit_linear(const double *x, const double *y, size_t n, struct lin_fit *f);
/* Pearson's r of x and y; NAN when either is constant. */
double correlation(const double *x, const double *y, size_t n);

/*
 * flags.c: a verb's flags and --help from its table, as the daemons' come from their key tables.
 * A row is a flag: its value goes, read by lib/config's typed parser (wb_conf_parse) with the
 * row's bounds, into the verb's options struct at off:
 *   WB_CONF_INT      int64_t, [min, max] (max INT64_MAX: no upper bound)
 *   WB_CONF_DURATION uint64_t ns ("2s", "500ms"), [min, max] when min != max
 *   WB_CONF_DOUBLE   double, [min, max] when min != max
 *   WB_CONF_BOOL     bool: a switch without a value, true when given
 *   WB_CONF_STR      const char *: the text as given (argv, or def), not copied
 *   WB_CONF_LIST     struct cli_strs: the flag given again adds one (up to CLI_STRS_MAX)
 *   CLI_OPERAND_ROW  no flag: an operand's name and help for --help, listed before the flags
 * A bad value is a usage error naming the flag: "wattbus tap: --count: 0 is below 1".
 */
#define CLI_STRS_MAX 16
struct cli_strs {
	size_t n;
	const char *v[CLI_STRS_MAX];
};
struct cli_flag {
	const char *name; /* --name */
	char letter;	  /* -l; 0: none */
	int type;	  /* enum wb_conf_type, as above */
	size_t off;	  /* into the verb's options */
	const char *def;  /* default as text (NULL: zero, NULL, empty), shown in --help */
	double min, max;
	const char *arg;  /* what the value is in --help ("N", "D", "FILE"); NULL for a switch */
	const char *help; /* one line; the range and the default are added to it */
};
struct cli_verb {
	const char *name; /* "tap": messages say "wattbus tap: ..." */
	/* after "usage: wattbus NAME "; a further form on a line of its own */
	const char *synopsis;
	const struct cli_flag *flags;
	size_t nflags;
	const char *notes;	/* text after the flags, or NULL */
	int min_args, max_args; /* operands; max -1: any number */
	size_t size;		/* of the options struct, zeroed before the defaults */
};
#define CLI_NFLAGS(a) (sizeof(a) / sizeof((a)[0]))
#define CLI_OPERAND_ROW (-1)
/* Rows by type, each with only what its type uses; CLI_OPERAND: an operand in --help, whose help
 * may go on over lines ("...\n..."). */
/* One row a line reads as a table. */
/* clang-format off */
#define CLI_OPERAND(name, help) {name, 0, CLI_OPERAND_ROW, 0, NULL, 0, 0, NULL, help}
#define CLI_SWITCH(name, letter, off, help) \
	{name, letter, WB_CONF_BOOL, off, NULL, 0, 0, NULL, help}
#define CLI_STR(name, letter, off, def, arg, help) \
	{name, letter, WB_CONF_STR, off, def, 0, 0, arg, help}
#define CLI_LIST(name, letter, off, arg, help) \
	{name, letter, WB_CONF_LIST, off, NULL, 0, 0, arg, help}
#define CLI_INT(name, letter, off, def, min, max, arg, help) \
	{name, letter, WB_CONF_INT, off, def, min, max, arg, help}
#define CLI_DURATION(name, letter, off, def, min, max, arg, help) \
	{name, letter, WB_CONF_DURATION, off, def, min, max, arg, help}
#define CLI_DOUBLE(name, letter, off, def, min, max, arg, help) \
	{name, letter, WB_CONF_DOUBLE, off, def, min, max, arg, help}
/* clang-format on */
/* A verb's name, its table, its options struct and how many operands it takes. */
#define CLI_VERB(name_, flags_, opts_type, min, max)                                               \
	.name = (name_), .flags = (flags_), .nflags = CLI_NFLAGS(flags_),                          \
	.size = sizeof(opts_type), .min_args = (min), .max_args = (max)
/* The CURVE flags, into a struct wb_sockopts at offset so of the verb's options. */
#define CLI_CURVE_CERT(so)                                                                         \
	CLI_STR("curve-cert", 0, (so) + offsetof(struct wb_sockopts, curve_cert), NULL, "FILE",    \
		"our CURVE certificate (FILE_secret beside it), for tcp:// endpoints")
#define CLI_CURVE_PEER(so)                                                                         \
	CLI_STR("curve-peer", 0, (so) + offsetof(struct wb_sockopts, curve_peer), NULL, "FILE",    \
		"the publisher's public certificate")
#define CLI_CURVE_ALLOW(so)                                                                        \
	CLI_STR("curve-allow", 0, (so) + offsetof(struct wb_sockopts, curve_allow), NULL, "DIR",   \
		"public certificates of the subscribers let in (default: any with a key)")
/* The CURVE flags of a subscriber (cert, peer) and of a publisher (cert, allow). */
#define CLI_CURVE_SUB(so) CLI_CURVE_CERT(so), CLI_CURVE_PEER(so)
#define CLI_CURVE_PUB(so) CLI_CURVE_CERT(so), CLI_CURVE_ALLOW(so)
/*
 * Set opts to the table's defaults, then read the flags of argv (argv[0] is the verb; flags and
 * operands may mix). Returns -1 to go on, with the first operand at argv[*first] (getopt's
 * optind says the same); else the exit status for the verb to return at once: 0 after --help
 * (printed on stdout), 2 after a usage error (said on stderr, with the usage).
 */
int cli_parse(const struct cli_verb *v, int argc, char **argv, void *opts, int *first);
/* The verb's --help: usage, operands, every flag with its range and default, notes. */
void cli_usage(const struct cli_verb *v, FILE *out);
/* A usage error after parsing (operands that do not fit): "wattbus NAME: ..." and the usage on
 * stderr. Returns 2. */
int cli_usage_error(const struct cli_verb *v, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* main.c: shared helpers */
/*
 * A subscriber connected to endpoints (comma-separated) and subscribed to each of n prefixes
 * (to everything when n is 0); NULL when that fails (bus.c said why).
 */
struct wb_sub *cli_sub_open(const char *endpoints, const char *const *prefixes, size_t n,
			    const struct wb_sockopts *so);
/*
 * ZeroMQ waits without a word on an ipc:// endpoint where nothing listens (no
 * socket file, or one a stopped process left). True when one of a subscriber's
 * endpoints (comma-separated) is such a one, its path copied into path.
 */
bool cli_ipc_missing(const char *endpoints, char *path, size_t size);
/* Say that path is no socket: "yet" at start (waited_ns 0; only to a terminal), else after waiting
 * that long. */
void cli_say_missing(const char *cmd, const char *path, uint64_t waited_ns);
/* What is at an ipc:// socket's path: a listener, nothing, or a file a stopped process left. */
enum ipc_state { IPC_LISTENING, IPC_NONE, IPC_STALE };
enum ipc_state cli_ipc_state(const char *path);
/*
 * Where the running stages keep their sockets, in the order to look: $WATTBUS_RUNTIME_DIR when
 * set, else run/ beside this program (make run's build/run/), then the default runtime dir (the
 * one rule of top, vmpub and doctor). Fills up to max (at least 2) and returns how many.
 */
size_t cli_runtime_dirs(char (*dirs)[PATH_MAX], size_t max);
/*
 * The ipc endpoint of a stage's socket (file "estimd.sock") in the runtime dir
 * of the running stages: $WATTBUS_RUNTIME_DIR when set, else run/ beside this
 * program (make run's build/run/), then the default runtime dir. Returns 0, or
 * -1 with the paths it tried in looked.
 */
int cli_find_socket(const char *file, char *ep, size_t size, char *looked, size_t looked_size);
/* True once SIGINT or SIGTERM arrived. */
bool cli_interrupted(void);

#endif
