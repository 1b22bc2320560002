/*
 * estimd's model sources: where the power model of a meterless slot comes from (a
 * model file, a model server, the bus, estimd's own trainer, Kepler's estimator
 * sidecar). Each is one file, src_<name>.c, defining a struct est_source that
 * brings its keys, defaults, help, stat counters and hooks; sources.c lists them
 * and main.c iterates the list. Unlike estimd.h's modules these are wiring: they
 * talk to the bus, the loop and peers through lib/daemon.h.
 */
#ifndef ESTIMD_SOURCES_H
#define ESTIMD_SOURCES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bus.h"
#include "config.h"
#include "daemon.h"
#include "estimd.h"
#include "log.h"

/* The settings of estimd that are no source's own (main.c's key table). */
struct estimd_conf {
	char *pub;
	struct wb_strlist sub;
	char *mode;
	int64_t model_cores;
	char *idle_method;
	struct wb_strlist idle_w;
	struct wb_strlist gpu_idle_w;
	int64_t idle_window;
	char *attribute_by;
	char *share_base;
	bool attribute_platform;
	bool vm_idle;
	char *state_file;
	uint64_t state_every_ns;
	int64_t budget_mib;
};

/* What every source may use of the running daemon. */
struct est_app {
	struct wb_daemon *d;
	const struct estimd_conf *conf; /* the common settings, replaced at a reload */
	struct estimator *est;
	bool ratio_logged; /* the core ratio of the model in use was logged */
	uint64_t *models_received, *models_implausible;
};

struct est_source {
	const char *name;
	/* Its keys, with offsets into its own settings struct of conf_size bytes (main.c places
	 * it in estimd's section and lists the keys after its own, in table order). */
	const struct wb_conf_key *keys;
	size_t nkeys;
	size_t conf_size;
	/* Its run-time state, state_size bytes zeroed at start and handed to every hook; stats
	 * are rows of its `uint64_t *` fields (WB_STAT_ROW on the state's struct). */
	size_t state_size;
	const struct wb_stat_row *stats;
	size_t nstats;
	/* Before the section is laid out: fill what its keys take from elsewhere (NULL: none). */
	void (*init)(void);
	/*
	 * On -n, at start and before a reload: check the settings (err names the key; a config
	 * error) and set what the estimator takes from them in ec. c is the common settings.
	 * NULL: nothing to check.
	 */
	int (*conf)(const void *sconf, const struct estimd_conf *c, struct est_conf *ec, char *err,
		    size_t errlen);
	/* At start, once the estimator exists: 0, or -1 (err; the stage exits as on a bad config
	 * with usage, else with failure when *usage is false). */
	int (*start)(struct est_app *app, void *state, const void *sconf, bool *usage, char *err,
		     size_t errlen);
	/* Each slot before it is estimated; model_mode: it has no power to measure. */
	void (*slot)(struct est_app *app, void *state, const struct wb_aligned *a, bool model_mode);
	/* Each slot estimated, with what happened (res.trained is main's, freed after). */
	void (*result)(struct est_app *app, void *state, const struct wb_aligned *a,
		       const struct est_result *res);
	/* A reload that passed every conf hook; sconf: the new settings (the old ones, old_sconf,
	 * are freed after). */
	void (*reload)(struct est_app *app, void *state, const void *old_sconf, const void *sconf);
	/* At stop (or a failed start, for a source started): let go of what it holds. */
	void (*stop)(struct est_app *app, void *state);
};

/* A row's settings and state, from its file's key table and structs. */
#define EST_SOURCE_KEYS(k, conf_type)                                                              \
	.keys = (k), .nkeys = sizeof(k) / sizeof((k)[0]), .conf_size = sizeof(conf_type)
#define EST_SOURCE_STATE(state_type, st)                                                           \
	.state_size = sizeof(state_type), .stats = (st), .nstats = sizeof(st) / sizeof((st)[0])
/* A row's hooks, in the struct's order (NULL where it has none). */
#define EST_SOURCE_HOOKS(conf_fn, start_fn, slot_fn, result_fn, reload_fn, stop_fn)                \
	.conf = (conf_fn), .start = (start_fn), .slot = (slot_fn), .result = (result_fn),          \
	.reload = (reload_fn), .stop = (stop_fn)

/* ---- sources.c: the table, estimd's section laid out, and what sources share ---- */

#define EST_SOURCES_MAX 16 /* rows est_sources may have (a static check holds it) */
extern const struct est_source *const est_sources[];
extern const size_t est_nsources;

/*
 * estimd's key table: head, then each source's keys in table order, then tail
 * (head's and tail's offsets into struct estimd_conf, which begins the section). A
 * malloc'd table (NULL on ENOMEM), the section's size in *conf_size; est_source_conf
 * then finds each source's settings in the section.
 */
struct wb_conf_key *est_sources_keys(const struct wb_conf_key *head, size_t nhead,
				     const struct wb_conf_key *tail, size_t ntail, size_t *nkeys,
				     size_t *conf_size);
/* Source i's settings in estimd's section conf (after est_sources_keys). */
void *est_source_conf(const void *conf, size_t i);
/* Every source's conf hook on the section. Returns 0 or -1 (err). */
int est_sources_conf(const void *conf, struct est_conf *ec, char *err, size_t errlen);

/* The bound a model's or sidecar's zone power is clipped to: [global] max_zone_w, or lib/plaus.h's
 * default where that is 0 (no bound on received energy still leaves a model bounded). */
double est_zone_bound_w(const struct est_app *app);
/* Use model m from now on (ownership taken; NULL: none), logged with how ("loaded"). */
void est_use_model(struct est_app *app, struct model *m, const char *how);
/* A model a source brought while running: used unless it is the one in use (same name and
 * origin, then freed); counted as received. Ownership taken. */
void est_offer_model(struct est_app *app, struct model *m);

#endif
