/*
 * Model source "file": a Kepler model-db weights file (the built-in default, or
 * model = FILE), loaded at start and at every reload, checked on a grid first.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sources.h"

#define DEFAULT_MODEL_FILE "ec2-0.7.11_rapl-sysfs_AbsPower_BPFOnly_SGDRegressorTrainer_1.json"
#define DEFAULT_MODEL WB_DATADIR "/models/" DEFAULT_MODEL_FILE
/* model_trainer's choices: each form's trainer names (forms.c), filled by file_init */
static char trainers[512];

struct file_conf {
	char *model;
	char *model_trainer;
	char *model_type;
};

#define OFF(field) offsetof(struct file_conf, field)

static const struct wb_conf_key keys[] = {
    {"model", WB_CONF_STR, OFF(model), DEFAULT_MODEL, 0, 0, NULL,
     "Kepler model-db weights JSON for slots without power (empty: none)"},
    {"model_trainer", WB_CONF_ENUM, OFF(model_trainer), "auto", 0, 0, trainers,
     "form of the model file when neither its model_name nor its file name tells"},
    {"model_type", WB_CONF_ENUM, OFF(model_type), "auto", 0, 0, "auto|AbsPower|DynPower",
     "AbsPower: node power; DynPower: active power (auto: from the file name)"},
};

static void file_init(void)
{
	model_trainer_names(trainers, sizeof(trainers));
}

/* The built-in default model is where `make install` puts it; a build tree runs without it. */
static bool default_model_missing(const struct file_conf *fc)
{
	return strcmp(fc->model, DEFAULT_MODEL) == 0 && access(fc->model, F_OK) < 0 &&
	       errno == ENOENT;
}

/*
 * The configured model file, or NULL when none is configured or the default is
 * not installed outside model mode (start warns). Returns 0 or -1 (err).
 */
static int load_model(const struct file_conf *fc, const struct estimd_conf *c, double max_zone_w,
		      struct model **out, char *err, size_t errlen)
{
	*out = NULL;
	if (!fc->model[0])
		return 0;
	if (default_model_missing(fc)) {
		if (strcmp(c->mode, "model") != 0)
			return 0;
		snprintf(
		    err, errlen,
		    "mode model needs a power model, and the default %s is not installed (make install puts it there): set --model FILE (model = FILE in [estimd]), e.g. data/models/*.json of the source tree",
		    fc->model);
		return -1;
	}
	struct model *m = malloc(sizeof(*m));
	if (!m) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	struct model_hint hint = {fc->model_trainer, fc->model_type, (uint64_t)c->model_cores};
	if (model_load_file(fc->model, &hint, m, err, errlen) < 0 ||
	    model_check_grid(m, max_zone_w, err, errlen) < 0) {
		free(m);
		return -1;
	}
	*out = m;
	return 0;
}

/* A bad model file is a bad config: on -n, at start and before a reload. */
static int file_conf(const void *sconf, const struct estimd_conf *c, struct est_conf *ec, char *err,
		     size_t errlen)
{
	struct model *m;
	/* against [global] max_zone_w (the default bound on -n, where [global] is not at hand) */
	if (load_model(sconf, c, ec->max_zone_w > 0 ? ec->max_zone_w : WB_ZONE_MAX_W, &m, err,
		       errlen) < 0)
		return -1;
	free(m);
	return 0;
}

static int file_start(struct est_app *app, void *state, const void *sconf, bool *usage, char *err,
		      size_t errlen)
{
	const struct file_conf *fc = sconf;
	struct model *m;
	*usage = true;
	if (load_model(fc, app->conf, est_zone_bound_w(app), &m, err, errlen) < 0)
		return -1;
	if (default_model_missing(fc))
		log_warnx(
		    "the default model %s is not installed (make install puts it there): a host without a meter gets no energy; set --model FILE (model = FILE in [estimd])",
		    fc->model);
	est_use_model(app, m, "loaded");
	return 0;
}

/* The file replaces whatever model the other sources brought meanwhile. */
static void file_reload(struct est_app *app, void *state, const void *old_sconf, const void *sconf)
{
	struct model *m;
	char err[MODEL_ERR_MAX];
	if (load_model(sconf, app->conf, est_zone_bound_w(app), &m, err, sizeof(err)) < 0) {
		log_errx("reload: %s; keeping the running model", err);
		return;
	}
	est_use_model(app, m, "reloaded");
}

const struct est_source est_file_source = {
    .name = "file",
    EST_SOURCE_KEYS(keys, struct file_conf),
    .init = file_init,
    EST_SOURCE_HOOKS(file_conf, file_start, NULL, NULL, file_reload, NULL)};
