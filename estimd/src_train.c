/*
 * Model source "train": estimd's own trainer (train.c, run by the estimator on
 * measured slots); each model it fits is written to model_out and published as
 * a model message for estimd instances on meterless hosts.
 */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "sources.h"

struct train_settings {
	bool train;
	int64_t train_window, train_every, train_min, holdout_every;
	char *model_out;
};

static const struct wb_conf_key keys[] = {
    {"train", WB_CONF_BOOL, offsetof(struct train_settings, train), "true", 0, 0, NULL,
     "fit a power model from measured slots and publish it"},
    {"train_window", WB_CONF_INT, offsetof(struct train_settings, train_window), "600", 20, 1000000,
     NULL, "slots kept for training and testing"},
    {"train_every", WB_CONF_INT, offsetof(struct train_settings, train_every), "60", 1, 1000000,
     NULL, "slots between fits"},
    {"train_min", WB_CONF_INT, offsetof(struct train_settings, train_min), "30", 2, 1000000, NULL,
     "training slots needed before the first fit"},
    {"holdout_every", WB_CONF_INT, offsetof(struct train_settings, holdout_every), "5", 2, 1000,
     NULL, "every k-th slot is held out to measure the model's error"},
    {"model_out", WB_CONF_STR, offsetof(struct train_settings, model_out), "", 0, 0, NULL,
     "file each trained model is written to in Kepler's format (empty: none)"},
};

struct train_state {
	struct est_app *app;
	const struct train_settings *conf;
	struct wb_ratelimit rl;
	uint64_t *models_trained, *model_write_failed;
};

static const struct wb_stat_row stats[] = {
    WB_STAT_ROW(struct train_state, models_trained, "models_trained"),
    WB_STAT_ROW(struct train_state, model_write_failed, "model_write_failed"),
};

static int train_conf_of(const void *sconf, const struct estimd_conf *c, struct est_conf *ec,
			 char *err, size_t errlen)
{
	const struct train_settings *t = sconf;
	ec->train = t->train;
	ec->train_conf = (struct train_conf){
	    .window = (size_t)t->train_window,
	    .min_slots = (size_t)t->train_min,
	    .every = (size_t)t->train_every,
	    .holdout_every = (size_t)t->holdout_every,
	};
	if (t->train_min >= t->train_window) {
		snprintf(err, errlen,
			 "train_min (%" PRId64 ") must be below train_window (%" PRId64 ")",
			 t->train_min, t->train_window);
		return -1;
	}
	return 0;
}

static void publish(struct train_state *s, const struct wb_aligned *a, const struct model *m)
{
	struct est_app *app = s->app;
	char desc[1024], err[MODEL_ERR_MAX];
	model_describe(m, desc, sizeof(desc));
	log_info("trained model %s", desc);
	(*s->models_trained)++;
	if (s->conf->model_out[0] && model_save_file(m, s->conf->model_out, err, sizeof(err)) < 0) {
		(*s->model_write_failed)++;
		log_rl(&s->rl, WB_LOG_WARN, "cannot write the trained model: %s", err);
	}
	struct wb_msg msg = {.kind = WB_MODEL};
	if (model_to_msg(m, &msg.model, err, sizeof(err)) < 0) {
		log_rl(&s->rl, WB_LOG_WARN, "cannot publish the trained model: %s", err);
		return;
	}
	snprintf(msg.model.env.host, sizeof(msg.model.env.host), "%s", a->env.host);
	/* The trainer's machine, so that a model server files it under its node type: this
	 * machine's spec when the slots are this host's, else only their CPUs. */
	struct km_spec spec = {0};
	if (strcmp(a->env.host, wb_daemon_global(app->d)->host) == 0 &&
	    mspec_read_env(&spec, err, sizeof(err)) < 0)
		memset(&spec, 0, sizeof(spec));
	mspec_to_msg(&spec, m->cores, &msg.model.spec);
	msg.model.t = wb_now_ns();
	wb_daemon_send(app->d, &msg);
	wb_msg_clear(&msg);
}

static void train_result(struct est_app *app, void *state, const struct wb_aligned *a,
			 const struct est_result *res)
{
	struct train_state *s = state;
	*app->models_implausible += res->train_implausible;
	if (res->train_err[0])
		log_rl(&s->rl, res->train_implausible ? WB_LOG_WARN : WB_LOG_INFO,
		       "training on %s: %s", a->env.host, res->train_err);
	if (res->trained)
		publish(s, a, res->trained);
}

static int train_start(struct est_app *app, void *state, const void *sconf, bool *usage, char *err,
		       size_t errlen)
{
	struct train_state *s = state;
	s->app = app;
	s->conf = sconf;
	s->rl = (struct wb_ratelimit)WB_RATELIMIT_INIT;
	return 0;
}

static void train_reload(struct est_app *app, void *state, const void *old_sconf, const void *sconf)
{
	((struct train_state *)state)->conf = sconf;
}

const struct est_source est_train_source = {
    .name = "train",
    EST_SOURCE_KEYS(keys, struct train_settings),
    EST_SOURCE_STATE(struct train_state, stats),
    EST_SOURCE_HOOKS(train_conf_of, train_start, NULL, train_result, train_reload, NULL)};
