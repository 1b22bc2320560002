/*
 * A model request (Kepler's ModelRequest, the body of POST /model): parsed
 * strictly, every fault named, and answered from the store by Kepler's rules.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "modeld.h"

void md_request_free(struct md_request *r)
{
	for (size_t i = 0; i < r->nmetrics; i++)
		free(r->metrics[i]);
	free(r->metrics);
	r->metrics = NULL;
	r->nmetrics = 0;
}

static int get_str(const json_t *body, const char *key, char *out, size_t outlen, char *err,
		   size_t errlen)
{
	const json_t *v = json_object_get(body, key);
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_string(v)) {
		snprintf(err, errlen, "%s: expected a string", key);
		return -1;
	}
	if (strlen(json_string_value(v)) >= outlen) {
		snprintf(err, errlen, "%s: longer than %zu characters", key, outlen - 1);
		return -1;
	}
	snprintf(out, outlen, "%s", json_string_value(v));
	return 0;
}

static int get_bool(const json_t *body, const char *key, bool *out, char *err, size_t errlen)
{
	const json_t *v = json_object_get(body, key);
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_boolean(v)) {
		snprintf(err, errlen, "%s: expected true or false", key);
		return -1;
	}
	*out = json_is_true(v);
	return 0;
}

int md_request_parse(const char *body, size_t len, struct md_request *r, char *err, size_t errlen)
{
	static const char *const known[] = {
	    "metrics", "output_type",	"source",	"node_type",	   "weight", "trainer_name",
	    "filter",  "pipeline_name", "machine_spec", "loose_node_type", NULL};
	memset(r, 0, sizeof *r);
	snprintf(r->source, sizeof r->source, "rapl-sysfs");
	r->node_type = -1;
	r->loose_node_type = true;
	json_error_t jerr;
	json_t *j = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!j) {
		snprintf(err, errlen, "not JSON: %s (line %d, column %d)", jerr.text, jerr.line,
			 jerr.column);
		md_one_line(err);
		return -1;
	}
	int rc = -1;
	if (!json_is_object(j)) {
		snprintf(err, errlen, "expected a JSON object (a ModelRequest)");
		goto out;
	}
	const char *key;
	json_t *v;
	json_object_foreach(j, key, v)
	{
		size_t k = 0;
		while (known[k] && strcmp(known[k], key))
			k++;
		if (!known[k]) {
			snprintf(err, errlen, "unknown key \"%.64s\"", key);
			goto out;
		}
	}
	const json_t *metrics = json_object_get(j, "metrics");
	if (!json_is_array(metrics)) {
		snprintf(err, errlen, "metrics: expected a list of feature names");
		goto out;
	}
	if (json_array_size(metrics) > 256) {
		snprintf(err, errlen, "metrics: more than 256 names");
		goto out;
	}
	r->metrics = calloc(json_array_size(metrics) + 1, sizeof *r->metrics);
	if (!r->metrics) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	size_t i;
	json_array_foreach(metrics, i, v)
	{
		if (!json_is_string(v)) {
			snprintf(err, errlen, "metrics[%zu]: expected a string", i);
			goto out;
		}
		if (!(r->metrics[r->nmetrics] = strdup(json_string_value(v)))) {
			snprintf(err, errlen, "out of memory");
			goto out;
		}
		r->nmetrics++;
	}
	if (!json_is_string(json_object_get(j, "output_type"))) {
		snprintf(err, errlen, "output_type: expected \"AbsPower\" or \"DynPower\"");
		goto out;
	}
	if (get_str(j, "output_type", r->output, sizeof r->output, err, errlen) < 0)
		goto out;
	if (strcmp(r->output, "AbsPower") && strcmp(r->output, "DynPower")) {
		snprintf(err, errlen, "output_type: unknown \"%.32s\" (AbsPower or DynPower)",
			 json_string_value(json_object_get(j, "output_type")));
		goto out;
	}
	if (get_str(j, "source", r->source, sizeof r->source, err, errlen) < 0 ||
	    get_str(j, "trainer_name", r->trainer, sizeof r->trainer, err, errlen) < 0 ||
	    get_str(j, "pipeline_name", r->pipeline, sizeof r->pipeline, err, errlen) < 0 ||
	    get_bool(j, "weight", &r->weight, err, errlen) < 0 ||
	    get_bool(j, "loose_node_type", &r->loose_node_type, err, errlen) < 0)
		goto out;
	/* Kepler: any source naming rapl is rapl-sysfs */
	if (strstr(r->source, "rapl") || !r->source[0])
		snprintf(r->source, sizeof r->source, "rapl-sysfs");
	const json_t *nt = json_object_get(j, "node_type");
	if (json_is_integer(nt)) {
		json_int_t n = json_integer_value(nt);
		if (n < -1 || n > 1000000) {
			snprintf(err, errlen, "node_type: %lld is not -1 (any) or a node type",
				 (long long)n);
			goto out;
		}
		r->node_type = (int)n;
	} else if (json_is_string(nt)) {
		int64_t n;
		if (wb_parse_int(json_string_value(nt), &n) < 0 || n < -1 || n > 1000000) {
			snprintf(err, errlen, "node_type: \"%.32s\" is not a node type",
				 json_string_value(nt));
			goto out;
		}
		r->node_type = (int)n;
	} else if (nt && !json_is_null(nt)) {
		snprintf(err, errlen, "node_type: expected an integer");
		goto out;
	}
	char filter[512] = "";
	if (get_str(j, "filter", filter, sizeof filter, err, errlen) < 0 ||
	    md_filter_parse(filter, &r->filter, err, errlen) < 0)
		goto out;
	if (km_spec_parse(json_object_get(j, "machine_spec"), KM_ZERO_UNKNOWN, &r->spec, err,
			  errlen) < 0)
		goto out;
	rc = 0;
out:
	json_decref(j);
	if (rc < 0) {
		md_request_free(r);
		md_one_line(err);
	}
	return rc;
}

/* ---- selection ---- */
struct pipe_choice {
	int node_type; /* -1: any */
	double similarity;
};

static void resolve(const struct md_pipeline *p, const struct md_request *r, struct pipe_choice *c)
{
	memset(c, 0, sizeof *c);
	c->node_type = -1;
	if (r->node_type >= 0) {
		c->node_type = r->node_type;
		c->similarity = 1;
	} else if (!km_spec_empty(&r->spec)) {
		c->node_type = md_node_type_of(p->types, p->ntypes, &r->spec, &c->similarity);
	}
}

static double cores_of(const struct md_pipeline *p, int node_type)
{
	for (size_t i = 0; i < p->ntypes; i++)
		if (p->types[i].index == node_type)
			return p->types[i].spec.cores;
	return 0;
}

static bool features_in(const struct md_model *m, char *const *metrics, size_t n)
{
	for (size_t f = 0; f < m->nfeat; f++) {
		size_t i = 0;
		while (i < n && strcmp(m->features[f], metrics[i]))
			i++;
		if (i == n)
			return false;
	}
	return true;
}

/* Is the model's group valid for the metrics? Kepler's groups by their features, others
 * (ThirdParty, a group folder Kepler's server does not try) by the model's own. */
static bool group_valid(const struct md_model *m, const struct md_request *r, size_t *order)
{
	const struct md_group *g = md_group_find(m->group);
	if (g && g->features) {
		*order = (size_t)(g - md_groups);
		return md_group_valid(g, r->metrics, r->nmetrics);
	}
	*order = md_ngroups;
	return features_in(m, r->metrics, r->nmetrics);
}

struct counts {
	size_t in_groups, of_type, weighted, passed;
};

/* A model of pipeline p that answers the request's source, output and trainer, in the feature
 * group of order go among those the request's metrics cover. */
static bool candidate(const struct md_model *m, const struct md_pipeline *p,
		      const struct md_request *r, size_t go)
{
	size_t order;
	return !strcmp(m->pipeline, p->name) && !strcmp(m->source, r->source) &&
	       !strcmp(m->output, r->output) && group_valid(m, r, &order) && order == go &&
	       (!r->trainer[0] || strstr(m->name, r->trainer));
}

const struct md_model *md_select(const struct md_store *self, const struct md_request *r, char *why,
				 size_t whylen)
{
	const struct md_model *best = NULL;
	bool best_fallback = false;
	double best_sim = 0;
	struct counts n = {0};
	bool named = r->pipeline[0] != '\0', found_pipe = false;
	for (size_t pi = 0; pi < self->npipes; pi++) {
		const struct md_pipeline *p = &self->pipes[pi];
		if (named ? strcmp(p->name, r->pipeline) != 0 : p->apart)
			continue; /* untrusted trainers' models: only when their pipeline is named
				   */
		found_pipe = true;
		struct pipe_choice c;
		resolve(p, r, &c);
		/* per pipeline and group: does the node type have models there? */
		for (size_t go = 0; go <= md_ngroups; go++) {
			bool any_of_type = false, any = false;
			double most_cores = 0; /* of the group's node types: the loose fallback */
			for (size_t i = 0; i < self->nmodels; i++) {
				const struct md_model *m = self->models[i];
				if (!candidate(m, p, r, go))
					continue;
				any = true;
				n.in_groups++;
				if (c.node_type < 0 || m->node_type == c.node_type)
					any_of_type = true;
				double cores = cores_of(p, m->node_type);
				if (cores > most_cores)
					most_cores = cores;
			}
			if (!any || (!any_of_type && !r->loose_node_type))
				continue;
			bool fallback = !any_of_type;
			for (size_t i = 0; i < self->nmodels; i++) {
				const struct md_model *m = self->models[i];
				if (!candidate(m, p, r, go))
					continue;
				if (!fallback && c.node_type >= 0 && m->node_type != c.node_type)
					continue;
				/* the loose fallback: the group's node types with the most cores,
				 * else all */
				if (fallback && most_cores > 0 &&
				    cores_of(p, m->node_type) != most_cores)
					continue;
				n.of_type++;
				if (r->weight &&
				    (!md_trainer_weight_capable(m->trainer) || !m->weight))
					continue;
				n.weighted++;
				if (!md_filter_pass(&r->filter, m->meta) || isnan(m->mae))
					continue;
				n.passed++;
				double sim = c.node_type < 0 ? 0 : c.similarity;
				bool better;
				if (!best)
					better = true;
				else if (fallback != best_fallback)
					better = !fallback;
				else if (sim != best_sim)
					better = sim > best_sim;
				else
					better = m->mae < best->mae;
				if (better) {
					best = m;
					best_fallback = fallback;
					best_sim = sim;
				}
			}
		}
	}
	if (best)
		return best;
	if (named && !found_pipe)
		snprintf(why, whylen, "no pipeline named %s", r->pipeline);
	else if (!n.in_groups)
		snprintf(why, whylen,
			 "no %s model for source %s whose feature group the metrics cover%s%s",
			 r->output, r->source, r->trainer[0] ? " and trainer " : "", r->trainer);
	else if (!n.of_type)
		snprintf(why, whylen,
			 "no %s model of the requested node type (loose_node_type false)",
			 r->output);
	else if (!n.weighted)
		snprintf(why, whylen, "no weight-capable %s model of that node type", r->output);
	else
		snprintf(why, whylen, "no %s model passes the filter (or has a known mae)",
			 r->output);
	return NULL;
}

json_t *md_weight_answer(const struct md_store *self, const struct md_model *m)
{
	json_t *w = json_deep_copy(m->weight);
	if (!w)
		return NULL;
	json_object_set_new(w, "model_name", json_string(m->name));
	json_t *spec = json_object_get(m->meta, "machine_spec");
	if (json_is_object(spec)) {
		json_object_set(w, "machine_spec", spec);
	} else {
		for (size_t pi = 0; pi < self->npipes; pi++) {
			const struct md_pipeline *p = &self->pipes[pi];
			if (strcmp(p->name, m->pipeline))
				continue;
			for (size_t t = 0; t < p->ntypes; t++)
				if (p->types[t].index == m->node_type)
					json_object_set_new(w, "machine_spec",
							    km_spec_json(&p->types[t].spec));
		}
	}
	json_object_set_new(w, "mae", json_real(m->mae));
	return w;
}
