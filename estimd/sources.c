/*
 * The model sources' table (one row each, src_<name>.c), estimd's config section
 * laid out from their keys, and what the sources share: using a model and the
 * bound it is held to.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sources.h"

extern const struct est_source est_file_source, est_bus_source, est_server_source,
    est_sidecar_source, est_train_source;

/* Table order is the order of their keys in the section and of their hooks at every slot. */
const struct est_source *const est_sources[] = {
    &est_file_source, &est_bus_source, &est_server_source, &est_sidecar_source, &est_train_source,
};
const size_t est_nsources = sizeof(est_sources) / sizeof(est_sources[0]);

static size_t conf_off[EST_SOURCES_MAX]; /* each source's settings in the section */

/* Offsets that keep any member of a settings struct aligned. */
static size_t align_up(size_t n)
{
	size_t a = _Alignof(max_align_t);
	return (n + a - 1) / a * a;
}

struct wb_conf_key *est_sources_keys(const struct wb_conf_key *head, size_t nhead,
				     const struct wb_conf_key *tail, size_t ntail, size_t *nkeys,
				     size_t *conf_size)
{
	_Static_assert(sizeof(est_sources) / sizeof(est_sources[0]) <= EST_SOURCES_MAX,
		       "EST_SOURCES_MAX is too small for est_sources");
	size_t n = nhead + ntail, size = align_up(sizeof(struct estimd_conf));
	for (size_t i = 0; i < est_nsources; i++) {
		if (est_sources[i]->init)
			est_sources[i]->init();
		n += est_sources[i]->nkeys;
		conf_off[i] = size;
		size = align_up(size + est_sources[i]->conf_size);
	}
	struct wb_conf_key *k = calloc(n, sizeof(*k));
	if (!k)
		return NULL;
	size_t o = 0;
	memcpy(k, head, nhead * sizeof(*k));
	o += nhead;
	for (size_t i = 0; i < est_nsources; i++)
		for (size_t j = 0; j < est_sources[i]->nkeys; j++) {
			k[o] = est_sources[i]->keys[j];
			k[o++].off += conf_off[i];
		}
	memcpy(k + o, tail, ntail * sizeof(*k));
	*nkeys = n;
	*conf_size = size;
	return k;
}

void *est_source_conf(const void *conf, size_t i)
{
	return (char *)conf + conf_off[i];
}

int est_sources_conf(const void *conf, struct est_conf *ec, char *err, size_t errlen)
{
	for (size_t i = 0; i < est_nsources; i++)
		if (est_sources[i]->conf &&
		    est_sources[i]->conf(est_source_conf(conf, i), conf, ec, err, errlen) < 0)
			return -1;
	return 0;
}

double est_zone_bound_w(const struct est_app *app)
{
	double w = wb_daemon_global(app->d)->max_zone_w;
	return w > 0 ? w : WB_ZONE_MAX_W;
}

void est_use_model(struct est_app *app, struct model *m, const char *how)
{
	estimator_set_model(app->est, m);
	app->ratio_logged = false;
	if (!m) {
		log_info("no power model: slots without power get no zones");
		return;
	}
	char desc[1024];
	model_describe(m, desc, sizeof(desc));
	log_info("%s model %s", how, desc);
	if (m->ncategorical)
		log_warnx(
		    "model %s: %zu Categorical_Variables entries ignored (wattbus has no categorical features)",
		    m->name, m->ncategorical);
	for (size_t i = 0; i < m->nzones; i++)
		for (size_t f = 0; f < m->zones[i].nfeat; f++)
			if (m->zones[i].feat[f].id == FEAT_UNMEASURED &&
			    m->zones[i].feat[f].weight != 0)
				log_warnx(
				    "model %s: %s feature %s is not measured by wattbus and counts as 0",
				    m->name, m->zones[i].zone, m->zones[i].feat[f].name);
}

void est_offer_model(struct est_app *app, struct model *m)
{
	const struct model *cur = estimator_model(app->est);
	if (cur && strcmp(cur->name, m->name) == 0 && strcmp(cur->origin, m->origin) == 0) {
		free(m); /* the one in use already */
		return;
	}
	(*app->models_received)++;
	est_use_model(app, m, "switched to");
}
