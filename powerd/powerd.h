/*
 * wattbus-powerd's private header: zones, the wrap-correcting counter and the
 * power integrator, the meter sources (one file each, listed in sources.c, each
 * bringing its own keys and counters), [powerd]'s key table, source detection and
 * the seam `wattbus probe` reads zones through. Prototypes are grouped by file.
 */
#ifndef PD_POWERD_H
#define PD_POWERD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "bus.h"
#include "config.h"
#include "log.h"
#include "wb_msgs.h"

#define PD_ZONES_MAX 256 /* schemas/power.json: zones maxItems */
#define PD_PATH_MAX 4096
#define PD_WHY_MAX 2048

#define PD_SOURCES_MAX 16	 /* bits of pd_set.used and of a source mask */
#define PD_SOURCE_COUNTERS_MAX 8 /* uint64_t counters of a source's own (pd_source_counts) */

struct pd_set;
struct pd_zone;
struct pd_opts;

/* PD_READ_NONE: no fresh reading to give (a held one went stale); the zone sits this sample out
 * without an error counted (the source counts its own failures). */
enum pd_read_err { PD_READ_OK = 0, PD_READ_IO = -1, PD_READ_PARSE = -2, PD_READ_NONE = -3 };

/*
 * A meter source. Each is defined in its own file (powerd/<name>.c) and listed
 * once in sources.c; detection, sampling, `-n`, [powerd]'s keys, the stat counters
 * and `wattbus doctor` walk that table. Only discover is required.
 */
struct pd_source {
	const char *name;
	bool in_auto;	  /* tried by `source = auto`, in table order; the first usable wins */
	const char *note; /* said after its name in the help of `source` ("simulated ..."); NULL */
	/* Its settings: keys of [powerd] (flags too, docs/wattbus.conf), their offsets into a
	 * struct of conf_size bytes of its own, which pd_source_conf gives its ops; NULL: none. */
	const struct wb_conf_key *keys;
	size_t nkeys, conf_size;
	const char *power_from; /* power zones: what the watts are, for the start-up log */
	/* Add the zones found; returns how many (or 1 for a source whose zones come later), or
	 * 0 with why saying what was tried and what to do about it. */
	int (*discover)(struct pd_set *set, const struct pd_opts *opts, char *why, size_t whylen);
	/* Settings this source needs when named in `source` (checked by -n); NULL: none. */
	int (*check)(const struct pd_opts *opts, char *err, size_t errlen);
	/* Read one zone: counter ticks, or uW for a power zone. NULL: the source accounts its
	 * readings itself as they arrive (exec), and publishes the zones that had news. */
	enum pd_read_err (*read)(struct pd_zone *z, uint64_t *value, char *err, size_t errlen);
	/* Once per sample, before the zones are read (exec's sample mode runs its command). */
	void (*sample)(struct pd_set *set, uint64_t t_ns, uint64_t mono_ns);
	/* A descriptor for the daemon to watch (-1: none) and what to do when it is readable;
	 * tend runs at every sample tick (restarts what stopped). */
	int (*watch_fd)(struct pd_set *set);
	int (*on_readable)(struct pd_set *set);
	int (*tend)(struct pd_set *set);
	/* Release what a zone holds (an open device) and the source's state in the set. */
	void (*close_zone)(struct pd_zone *z);
	void (*destroy)(struct pd_set *set);
	/* Add what the source knows beyond energy to a zone going out (a GPU's uuid and
	 * processes); NULL: nothing. */
	void (*annotate)(const struct pd_zone *z, struct wb_power_zone *pz);
	/* Advice appended when a read is refused for permissions (EACCES, EPERM). */
	const char *(*permission_hint)(void);
	/* Counters of its own: rows (WB_STAT_ROW) of a struct of uint64_t that pd_source_counts
	 * gives it, published as stat counters while the source is in use; NULL: none. */
	const struct wb_stat_row *stats;
	size_t nstats;
	/* A sample's readings are still on their way (exec's sample-mode run, a job): the sample
	 * is published when they are in (pd_set_sample_end). NULL: never. */
	bool (*busy)(struct pd_set *set);
};

/* ---- sources.c: the table of sources ---- */

extern const struct pd_source *const pd_sources[];
extern const unsigned pd_nsources;
/* The source's position in pd_sources (its bit in masks), or -1 when not listed. */
int pd_source_index(const struct pd_source *src);
const struct pd_source *pd_source_find(const char *name);
/* "auto, rapl, msr, ...": the names `source` accepts. */
void pd_source_names(char *buf, size_t size);

/* [powerd]'s own keys (powerd/conf.c); each source's settings follow in the same block. */
struct pd_conf {
	char *pub;
	uint64_t interval_ns;
	struct wb_strlist source;
	char *sysfs_root;
	double max_power_w;
};

/* What every source needs to know; filled from [powerd] and [global] by main.c. */
struct pd_opts {
	/* [powerd] as set: struct pd_conf, then each source's settings (pd_source_conf) */
	const void *conf;
	const char *sysfs_root;	  /* "/sys" */
	const char *cpuinfo_path; /* "/proc/cpuinfo": the CPU model (msr's unit quirks) */
	double max_power_w;	  /* highest plausible power of any zone: max_power_w or [global] */
	uint64_t interval_ns;
	/* A source whose meter fails at start keeps trying, its zones coming with its first good
	 * reading (powerd); without it the source is refused with the reason (the CLI's verdict).
	 */
	bool retry;
	int reconnect_max_ms; /* [global] reconnect_max, for a source that subscribes (bus) */
};

/* ---- conf.c: [powerd]'s keys, powerd's own then each source's in table order ---- */

/* The composed section (its dst NULL), the one table powerd, its flags, docs/wattbus.conf and the
 * CLI's runs of the sources read; conf_size: the size of its block. */
const struct wb_conf_section *pd_conf_section(size_t *conf_size);
/* The options from a [powerd] block: max_zone_w is [global]'s (max_power_w 0 takes it, and
 * WB_ZONE_MAX_W when it is 0 too), reconnect_max_ms [global] reconnect_max; cpuinfo_path
 * "/proc/cpuinfo" and retry set, as powerd runs. */
void pd_opts_from_conf(struct pd_opts *o, const void *conf, double max_zone_w,
		       int reconnect_max_ms);
/* The settings of src in opts->conf: the struct its keys describe. */
const void *pd_source_conf(const struct pd_opts *opts, const struct pd_source *src);
/* A [powerd] block at the defaults (the CLI, tests); NULL when out of memory. */
void *pd_conf_new(void);
/* Set one key of a block as a flag would ("--exec"). Returns 0 or -1 with err. */
int pd_conf_set(void *conf, const char *key, const char *value, char *err, size_t errlen);
void pd_conf_destroy(void **conf_p);
/* The keys of src whose value in conf is not the default, comma-separated ("" when none).
 * Returns how many. */
size_t pd_conf_source_set(const void *conf, const struct pd_source *src, char *buf, size_t len);

/* ---- counter.c: wrap-corrected counters and integrated power (pure) ---- */

enum pd_verdict {
	PD_FIRST,   /* baseline taken: nothing added */
	PD_OK,	    /* the increment was added */
	PD_WRAP,    /* the increment across one hardware wrap was added */
	PD_REBASED, /* the counter restarted: new baseline confirmed, the gap's energy is unknown */
	PD_BACKWARDS, /* rejected: went backwards without a plausible wrap */
	PD_JUMP,      /* rejected: rose faster than the highest plausible power */
	PD_RANGE,     /* rejected: beyond the counter's range, or power beyond the plausible */
	PD_STALE,     /* ignored: not later than the previous reading */
};

const char *pd_verdict_name(enum pd_verdict v);
static inline bool pd_verdict_added(enum pd_verdict v)
{
	return v == PD_FIRST || v == PD_OK || v == PD_WRAP || v == PD_REBASED;
}

/*
 * A hardware energy counter: raw values 0..modulus-1 (modulus 0: never wraps),
 * uJ = raw * uj_mul / uj_div. total_ticks is the wrap-corrected sum, starting
 * from the first raw reading so that a restarted powerd continues the count.
 */
struct pd_counter {
	uint64_t modulus;
	uint64_t uj_mul, uj_div;
	uint64_t max_uw; /* highest plausible power */
	bool have;
	uint64_t last_raw, last_mono_ns;
	bool have_cand; /* an implausible reading waiting for confirmation */
	uint64_t cand_raw, cand_mono_ns;
	uint64_t total_ticks;
};

void counter_init(struct pd_counter *c, uint64_t modulus, uint64_t uj_mul, uint64_t uj_div,
		  uint64_t max_uw);
enum pd_verdict counter_update(struct pd_counter *c, uint64_t raw, uint64_t mono_ns);
uint64_t counter_uj(const struct pd_counter *c);
/* The counter's range in uJ (max_energy_range_uj), 0 when it does not wrap. */
uint64_t counter_range_uj(const struct pd_counter *c);

/*
 * Power readings (uW) integrated by trapezoids into microjoules, with the
 * sub-microjoule remainder kept so that rounding never loses energy. The
 * step is the wall-clock step between readings (sample times on the grid)
 * unless the wall clock was stepped, then the monotonic one.
 */
struct pd_integrator {
	uint64_t max_uw, max_gap_ns;
	bool have;
	uint64_t last_uw, last_t_ns, last_mono_ns;
	unsigned __int128 rem; /* energy below 1 uJ, in units of 0.5 uW*ns */
	uint64_t total_uj;
};

void integ_init(struct pd_integrator *in, uint64_t max_uw, uint64_t max_gap_ns);
/*
 * The longest gap between two power readings that is bridged by a trapezoid: max(10 intervals,
 * 10 s), the one rule of every source that integrates a reading taken at each sample (a longer
 * one rebases). A held BMC reading has its own bound, the hold.
 */
uint64_t integ_bridge_ns(uint64_t interval_ns);
/*
 * The time between two samples (wall t and monotonic mono, each after its last_ value): the
 * wall-clock step, so that energy between samples on the grid is exact, unless the wall clock
 * was set (back, or off the monotonic step by more than half of it plus INTEG_CLOCK_STEP_NS),
 * then the monotonic one. 0 when the monotonic clock did not advance.
 */
uint64_t integ_step_ns(uint64_t last_t_ns, uint64_t last_mono_ns, uint64_t t_ns, uint64_t mono_ns);
enum pd_verdict integ_add(struct pd_integrator *in, uint64_t uw, uint64_t t_ns, uint64_t mono_ns);

/* ---- zone.c: zones and one sample of all zones ---- */

struct pd_zone {
	char name[64], kind[16], path[256];
	const struct pd_source *src;
	unsigned index;
	bool is_power; /* integrated power (hwmon power*, exec W) rather than a counter */
	struct pd_counter ctr;
	struct pd_integrator integ;
	char file[PD_PATH_MAX];	  /* rapl, hwmon: the sysfs file read every sample */
	int fd;			  /* msr: the device; rapl, hwmon: file; kept open */
	struct timespec fd_ctime; /* rapl, hwmon: the file's ctime when fd was opened */
	uint32_t reg;		  /* msr: the energy-status register */
	uint64_t avg_interval_ms; /* hwmon power*_average: the meter's averaging window */
	bool updated;		  /* a valid reading to publish in the sample under way */
	bool published;		  /* published at least once */
	uint64_t readings;	  /* valid readings so far (pd_zone_describe) */
	/* redfish, ipmi: the meter's latest watts (uW), held between its updates until hold_ns old
	 */
	uint64_t held_uw, held_mono_ns, hold_ns;
	uint64_t energy_uj; /* cumulative, what goes on the wire */
	struct wb_ratelimit rl;
	/* its entry in power messages but for the energy (name, zone, path, source, index): made
	 * once by pd_set_add and copied at each sample */
	struct wb_power_zone wire;
};

/* Counters published in stat messages (see docs/powerd.md). */
struct pd_counts {
	uint64_t samples, samples_missed, zone_samples_skipped;
	uint64_t read_errors, parse_errors, backwards, implausible, rebased, wraps;
	uint64_t lateness_max_ns, lateness_sum_ns, lateness_mean_ns;
	uint64_t clock_steps; /* sample times not after the last one published: not published */
	/* each source's own counters, by its index (pd_source_counts, pd_source.stats) */
	uint64_t src[PD_SOURCES_MAX][PD_SOURCE_COUNTERS_MAX];
};

/* The rows of struct pd_counts published as stat counters, whatever the sources. */
extern const struct wb_stat_row pd_stat_rows[];
extern const size_t pd_nstat_rows;

struct pd_exec;

struct pd_set {
	struct pd_zone *zones;
	size_t n, cap;
	const struct pd_opts *opts;
	struct pd_counts counts;
	void *state[PD_SOURCES_MAX]; /* each source's own state, by its index */
	unsigned used;		     /* bit per source (index) that contributed zones */
};

struct pd_set *pd_set_new(const struct pd_opts *opts);
void pd_set_destroy(struct pd_set **self_p);
/* Add a copy of z (name made unique); returns its index or -1 when full. */
int pd_set_add(struct pd_set *set, const struct pd_zone *z);
struct pd_zone *pd_set_find(struct pd_set *set, const char *name);
/* A zone's name from its kind and its index among the zones of that kind: "package-0", ...;
 * "platform" and "psys" for the first of those, then "platform-1", ... */
void pd_zone_name(struct pd_zone *z, const char *kind, unsigned idx);
/* A platform zone of a source whose meter answers slowly (a BMC): named after the platform zones
 * already in set, given in watts, its reading held hold_ns (pd_zone_read_held). */
void pd_held_zone_init(struct pd_set *set, struct pd_zone *z, const struct pd_source *src,
		       uint64_t hold_ns);
/* Keep uw as the zone's latest reading, from now. */
void pd_zone_hold(struct pd_zone *z, uint64_t uw);
/* The longest gap a power zone's integrator bridges at this interval: a held reading's hold plus
 * one interval, else integ_bridge_ns. */
uint64_t pd_zone_bridge_ns(const struct pd_zone *z, uint64_t interval_ns);
/* A zero zone with its rate limit and fd set up. */
void pd_zone_init(struct pd_zone *z, const struct pd_source *src, const char *kind, unsigned index);
/* A source's slot for its own state in the set (exec's running command). */
void **pd_set_state(struct pd_set *set, const struct pd_source *src);
/* A source's own counters in the set: the struct its stat rows describe (zeroed at first). */
void *pd_source_counts(struct pd_set *set, const struct pd_source *src);
/* A stat counter of the set by its published name ("parse_errors", "exec_failures"): powerd's
 * own or a source's; 0 when there is none by that name. */
uint64_t pd_set_counter(const struct pd_set *set, const char *name);

/*
 * One sample at grid time t_ns, in two steps so that no source's wait holds the loop: begin runs
 * the sources' sample ops (exec's sample mode starts its run) and reads the zones that are read
 * (pd_source.read); while pd_set_busy the sample's readings are still on their way (the loop
 * watches the sources' descriptors); end fills out->zones with the zones that had a valid
 * reading (out->zones allocated with wb_array_new; the caller clears the message) and returns
 * their number.
 */
void pd_set_sample_begin(struct pd_set *set, uint64_t t_ns, uint64_t mono_ns);
bool pd_set_busy(struct pd_set *set);
size_t pd_set_sample_end(struct pd_set *set, uint64_t t_ns, struct wb_power *out);
/* What came since the last sample (pd_set_wait), begin, pd_set_wait while busy (at most the
 * interval and WB_JOB_STOP_NS), end: a whole sample for a caller without powerd's loop (tests). */
size_t pd_set_sample(struct pd_set *set, uint64_t t_ns, uint64_t mono_ns, struct wb_power *out);

/*
 * ---- zone.c: the seam for a reader outside powerd's loop (wattbus probe) ----
 * A set opened by the sources' discover (cli/sources.c) is read through these, never through
 * struct pd_zone: each zone's description, unit and latest reading; a read now of a zone that
 * is read; and the sources' own waits (exec's runs and stream) driven as powerd's loop does.
 */
struct pd_zone_desc {
	const char *name, *kind, *source, *path;
	bool is_power; /* readings in uW (power); else a counter, in uJ before wrap correction */
	bool polled;   /* pd_zone_poll reads it now; else its readings come as they arrive */
	double uj_per_tick; /* a counter's step: uJ per tick (1 for power) */
	uint64_t range_uj;  /* the counter's range (max_energy_range_uj), 0: it does not wrap */
	double wrap_uj;	    /* what a wrap takes off a counter's reading (its modulus), 0: none */
	uint64_t readings;  /* valid readings so far: a new one when it changes */
	double last;	    /* the latest valid reading, uJ or uW */
	uint64_t last_mono_ns; /* when it was taken (the meter's own time where it gives one) */
};
size_t pd_set_nzones(const struct pd_set *set);
void pd_zone_describe(const struct pd_set *set, size_t i, struct pd_zone_desc *d);
/* Read zone i now (a polled zone): its reading in uJ (a counter, before wrap correction) or uW.
 * Not accounted (powerd's totals are not touched). */
enum pd_read_err pd_zone_poll(struct pd_set *set, size_t i, double *value, char *err,
			      size_t errlen);
/* Wait up to wait_ns for the sources in use (their descriptors, as powerd's loop watches them)
 * and take what they have; tend them. Returns whether the set is still busy. */
bool pd_set_wait(struct pd_set *set, uint64_t wait_ns);
/* Account one reading of zone z (counter raw ticks or power uW); counts and logs the verdict. */
enum pd_verdict pd_zone_account(struct pd_set *set, struct pd_zone *z, uint64_t value,
				uint64_t t_ns, uint64_t mono_ns);
/* The read op of a source whose meter answers slowly (a BMC): the latest reading (uW) that the
 * source stored in held_uw, or PD_READ_NONE when there is none or it is older than hold_ns. */
enum pd_read_err pd_zone_read_held(struct pd_zone *z, uint64_t *value, char *err, size_t errlen);
/* Seconds until the counter of z can wrap at max_power_w (0: it does not wrap). */
double pd_zone_min_safe_s(const struct pd_zone *z, double max_power_w);

/* ---- sysfs.c: reading sysfs-style files (every source may use these) ---- */

/* Read a sysfs-style file holding one unsigned decimal integer. err says why on failure; on
 * PD_READ_IO errno is the cause. */
enum pd_read_err pd_read_u64(const char *path, uint64_t *value, char *err, size_t errlen);
/* pd_read_u64 of the zone's file, kept open in z->fd from one sample to the next (a source's
 * read op); pd_zone_close_file closes it (its close_zone op). */
enum pd_read_err pd_zone_read_file(struct pd_zone *z, uint64_t *value, char *err, size_t errlen);
void pd_zone_close_file(struct pd_zone *z);
/* snprintf that may truncate (paths, names): returns 0, or -1 when the text did not fit. */
int pd_fmt(char *buf, size_t size, const char *fmt, ...) WB_PRINTF(3, 4);
/* Read a short text file, trailing newline removed. Returns 0 or -1 (errno set). */
int pd_read_text(const char *path, char *buf, size_t size);
/* A BMC's USER:PASSWORD (one line) from a file only powerd's uid may read or write (the config key
 * names it in messages). Returns 0, or -1 with err saying why. */
int pd_read_credentials(const char *key, const char *path, char *user, size_t ulen, char *password,
			size_t plen, char *err, size_t errlen);

/* ---- rapl.c: powercap sysfs ---- */

extern const struct pd_source rapl_source;
/* The permission-denied explanation for energy_uj (CVE-2020-8694). */
const char *rapl_permission_hint(void);
/* Add the powercap zones under <sysfs_root>/class/powercap. Returns the number added; why says why
 * 0. */
int rapl_discover(struct pd_set *set, const struct pd_opts *opts, char *why, size_t whylen);
/* Socket index of a powercap zone name ("package-1", "package-0-die-1"), or -1. */
int rapl_package_index(const char *name, int *die);

/* ---- msr.c: RAPL registers through /dev/cpu/N/msr ---- */

extern const struct pd_source msr_source;
enum pd_cpu_vendor { PD_CPU_UNKNOWN, PD_CPU_INTEL, PD_CPU_AMD };

struct pd_cpu_id {
	enum pd_cpu_vendor vendor;
	unsigned family, model;
};

/* Read vendor, family and model of the first CPU from a /proc/cpuinfo-style file. */
int msr_cpu_id(const char *path, struct pd_cpu_id *id);
/* An energy unit as a fraction: uJ = ticks * mul / div. */
struct pd_unit {
	uint64_t mul, div;
};

/*
 * Energy units of the package/core/uncore, DRAM and psys registers on this
 * CPU, given the energy-status unit (ESU) of the power-unit register: 1/2^ESU J,
 * except where the kernel's powercap driver knows better (server DRAM 15.3 uJ,
 * Sapphire Rapids and later psys 1 J).
 */
void msr_units(const struct pd_cpu_id *id, unsigned esu, struct pd_unit *pkg, struct pd_unit *dram,
	       struct pd_unit *psys);
int msr_discover(struct pd_set *set, const struct pd_opts *opts, char *why, size_t whylen);
enum pd_read_err msr_read(struct pd_zone *z, uint64_t *raw, char *err, size_t errlen);
void msr_close(struct pd_zone *z);

/* ---- hwmon.c: hwmon power and energy, ACPI power meters ---- */

extern const struct pd_source hwmon_source;
/* Zone kind from an hwmon label and device name ("package", "gpu", "platform", ...). */
const char *hwmon_kind(const char *label, const char *devname);
int hwmon_discover(struct pd_set *set, const struct pd_opts *opts, char *why, size_t whylen);

/* ---- exec.c: readings printed by a command ---- */

extern const struct pd_source exec_source;
enum pd_exec_unit { PD_UNIT_UJ, PD_UNIT_W };

struct pd_exec_line {
	char zone[64];
	char kind[16];
	enum pd_exec_unit unit;
	uint64_t value;	   /* uJ, or uW for watts */
	uint64_t range_uj; /* uj with range=N: the counter wraps after N */
	uint64_t t_ns;	   /* @NS: when the meter took it (ns since the Unix epoch); 0: when read */
};

/* Parse one line. Returns 1 (a reading), 0 (blank or comment) or -1 (err says why). */
int exec_parse_line(const char *line, struct pd_exec_line *out, char *err, size_t errlen);
/* Sample mode: start the start-up run, whose lines name the zones (powerd takes them when it
 * ends; without opts->retry it is waited for). Stream mode: start the command. */
int exec_discover(struct pd_set *set, const struct pd_opts *opts, char *why, size_t whylen);
/* Stream mode: the descriptor to watch, the same for the life of the source (-1: not stream mode).
 */
int exec_stream_fd(struct pd_set *set);
bool exec_stream_running(struct pd_set *set);
/* Stream mode: read what is available and account complete lines. Returns 0, or -1 when the command
 * ended. */
int exec_stream_read(struct pd_set *set);
/* Stream mode: restart the command if it ended at least a second ago. Returns 1 if restarted. */
int exec_stream_tend(struct pd_set *set);

/* ---- redfish.c: a BMC's chassis power over Redfish ---- */

extern const struct pd_source redfish_source;

/* ---- ipmi.c: a BMC's DCMI power reading through libfreeipmi ---- */

extern const struct pd_source ipmi_source;
/* ---- bus.c: a VM's energy measured by its host (wattbus vmpub) ---- */

extern const struct pd_source bus_source;

/* ---- nvml.c: NVIDIA GPUs through libnvidia-ml, loaded at run time ---- */

extern const struct pd_source nvml_source;

/* ---- fake.c: a simulated meter (package, core, dram from the CPU load in /proc/stat) ---- */

extern const struct pd_source fake_source;

/* ---- detect.c: which sources to use ---- */

/* Parse the `source` list into a bit set of source indexes; "auto" gives 0. Returns 0 or -1 (err).
 */
int detect_parse_sources(char *const *names, size_t n, unsigned *mask, char *err, size_t errlen);
/* The settings check of each source in mask (see pd_source.check). Returns 0 or -1 (err). */
int detect_check(unsigned mask, const struct pd_opts *opts, char *err, size_t errlen);
/*
 * Open the sources: each one named in mask, or with mask 0 the first usable of
 * the sources tried automatically. Logs what it tried and why each failed.
 * Returns the number of usable sources (0: no usable meter).
 */
size_t detect_open(struct pd_set *set, unsigned mask);
/* "rapl", "rapl+hwmon", or "none". */
void detect_mode(const struct pd_set *set, char *buf, size_t size);
/* Log each zone with its range and minimum safe interval; warn when the interval is not safe. */
void detect_log_zones(const struct pd_set *set);

#endif
