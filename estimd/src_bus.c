/*
 * Model source "bus": models other estimd instances trained and published
 * (model/ messages from model_from), checked and switched in on the fly.
 */
#include <stddef.h>
#include <stdlib.h>

#include "sources.h"

struct bus_conf {
	struct wb_strlist model_from;
};

static const struct wb_conf_key keys[] = {
    {"model_from", WB_CONF_LIST | WB_CONF_RESTART, offsetof(struct bus_conf, model_from), "", 0, 0,
     NULL, "endpoints of estimd instances whose trained models replace the model on the fly"},
};

struct bus_state {
	struct est_app *app;
	struct wb_ratelimit rl;
	uint64_t *models_rejected;
};

static const struct wb_stat_row stats[] = {
    WB_STAT_ROW(struct bus_state, models_rejected, "models_rejected"),
};

static void on_model(struct wb_daemon *d, const struct wb_msg *msg, const struct wb_rx *rx,
		     void *arg)
{
	struct bus_state *s = arg;
	struct est_app *app = s->app;
	if (msg->kind != WB_MODEL)
		return;
	struct model *m = malloc(sizeof(*m));
	char err[MODEL_ERR_MAX];
	if (!m)
		return;
	bool ok = model_from_msg(&msg->model, m, err, sizeof(err)) == 0;
	if (ok && model_check_grid(m, est_zone_bound_w(app), err, sizeof(err)) < 0) {
		(*app->models_implausible)++;
		ok = false;
	}
	if (!ok) {
		(*s->models_rejected)++;
		log_rl(&s->rl, WB_LOG_WARN, "model rejected, keeping %s: %s",
		       estimator_model(app->est) ? estimator_model(app->est)->name : "none", err);
		free(m);
		return;
	}
	est_offer_model(app, m);
}

static int bus_start(struct est_app *app, void *state, const void *sconf, bool *usage, char *err,
		     size_t errlen)
{
	static const char *const prefixes[] = {"model/", NULL};
	const struct bus_conf *bc = sconf;
	struct bus_state *s = state;
	s->app = app;
	s->rl = (struct wb_ratelimit)WB_RATELIMIT_INIT;
	*usage = false;
	if (bc->model_from.n &&
	    wb_daemon_subscribe(app->d, &bc->model_from, prefixes, on_model, s) < 0) {
		snprintf(err, errlen, "cannot subscribe to the model_from endpoints");
		return -1;
	}
	return 0;
}

const struct est_source est_bus_source = {
    .name = "bus",
    EST_SOURCE_KEYS(keys, struct bus_conf),
    EST_SOURCE_STATE(struct bus_state, stats),
    EST_SOURCE_HOOKS(NULL, bus_start, NULL, NULL, NULL, NULL)};
