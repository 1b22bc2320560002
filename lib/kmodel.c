/*
 * Kepler's model format, one reader and writer for the three places that need
 * it (estimd's model files and requests, modeld's store, `wattbus train`).
 * Followed from kepler-model-server (util/train_types.py NodeAttribute,
 * train/profiler/node_type_index.py NodeTypeSpec, train/trainer/__init__.py
 * save_metadata) and kepler-model-db's published pipelines.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "config.h"
#include "kmodel.h"

/* Kepler's NodeAttribute: value, member, wattbus's model-message key (or NULL), unit, bound. */
static const struct spec_attr {
	const char *name, *member, *alias, *unit;
	uint64_t max;
	size_t off;
} attrs[] = {
    {"cores", "CORES", NULL, "logical CPUs", 65536, offsetof(struct km_spec, cores)},
    {"chips", "CHIPS", NULL, "chips", 1024, offsetof(struct km_spec, chips)},
    {"memory", "MEMORY", "memory_gib", "GiB", 1ull << 30, offsetof(struct km_spec, memory_gib)},
    {"frequency", "FREQ", "frequency_mhz", "MHz", 1000000, offsetof(struct km_spec, frequency_mhz)},
};
#define NATTRS (sizeof(attrs) / sizeof(attrs[0]))

/* key spells the attribute of value name, member member or alias, with or without
 * "NodeAttribute.", in any case. */
static bool key_is(const char *key, const char *name, const char *member, const char *alias)
{
	static const char prefix[] = "NodeAttribute.";
	if (strncasecmp(key, prefix, sizeof(prefix) - 1) == 0)
		key += sizeof(prefix) - 1;
	return !strcasecmp(key, name) || !strcasecmp(key, member) ||
	       (alias && !strcasecmp(key, alias));
}

/* A value of a: 0 for null and for a 0 that says "not known" (enum km_spec_zero), or -1 with err.
 */
static int attr_value(const struct spec_attr *a, const char *key, const json_t *v,
		      enum km_spec_zero zero, uint64_t *out, char *err, size_t errlen)
{
	*out = 0;
	if (json_is_null(v))
		return 0;
	double d = NAN;
	if (json_is_number(v))
		d = json_number_value(v);
	else if (json_is_string(v) && wb_parse_double(json_string_value(v), &d) < 0)
		d = NAN;
	uint64_t min = zero == KM_ZERO_CORES_REFUSED && a->off == offsetof(struct km_spec, cores);
	if (!(d >= (double)min && d <= (double)a->max) || d != floor(d)) {
		snprintf(
		    err, errlen,
		    "machine_spec.%.120s: expected %llu to %llu %s (a whole number), or null when not known",
		    key, (unsigned long long)min, (unsigned long long)a->max, a->unit);
		return -1;
	}
	*out = (uint64_t)d;
	return 0;
}

int km_spec_parse(const json_t *obj, enum km_spec_zero zero, struct km_spec *out, char *err,
		  size_t errlen)
{
	memset(out, 0, sizeof(*out));
	if (!obj || json_is_null(obj))
		return 0;
	if (!json_is_object(obj)) {
		snprintf(err, errlen, "machine_spec: expected an object");
		return -1;
	}
	const char *seen[NATTRS + 1] = {0}; /* the key that stated each (attrs, then processor) */
	const char *key;
	const json_t *v;
	json_object_foreach((json_t *)obj, key, v)
	{
		if (key_is(key, "processor", "PROCESSOR", NULL)) {
			if (json_is_null(v))
				continue;
			if (!json_is_string(v)) {
				snprintf(err, errlen, "machine_spec.%.120s: expected a string",
					 key);
				return -1;
			}
			char p[sizeof(out->processor)];
			wb_processor_name(json_string_value(v), p, sizeof(p));
			if (!p[0])
				continue;
			if (seen[NATTRS] && strcmp(p, out->processor)) {
				snprintf(
				    err, errlen,
				    "machine_spec.%.120s: \"%.128s\", but machine_spec.%.120s says \"%s\"",
				    key, p, seen[NATTRS], out->processor);
				return -1;
			}
			snprintf(out->processor, sizeof(out->processor), "%s", p);
			seen[NATTRS] = key;
			continue;
		}
		for (size_t i = 0; i < NATTRS; i++) {
			const struct spec_attr *a = &attrs[i];
			if (!key_is(key, a->name, a->member, a->alias))
				continue;
			uint64_t n, *dst = (uint64_t *)((char *)out + a->off);
			if (attr_value(a, key, v, zero, &n, err, errlen) < 0)
				return -1;
			if (n == 0)
				break;
			if (seen[i] && *dst != n) {
				snprintf(
				    err, errlen,
				    "machine_spec.%.120s: %llu %s, but machine_spec.%.120s says %llu",
				    key, (unsigned long long)n, a->unit, seen[i],
				    (unsigned long long)*dst);
				return -1;
			}
			*dst = n;
			seen[i] = key;
			break;
		}
		/* other keys (vendor, threads_per_core) Kepler ignores too */
	}
	return 0;
}

static json_t *count_or_null(uint64_t n)
{
	return n ? json_integer((json_int_t)n) : json_null();
}

json_t *km_spec_json(const struct km_spec *s)
{
	json_t *o = json_object();
	json_object_set_new(o, "processor",
			    s->processor[0] ? json_string(s->processor) : json_null());
	for (size_t i = 0; i < NATTRS; i++)
		json_object_set_new(
		    o, attrs[i].name,
		    count_or_null(*(const uint64_t *)((const char *)s + attrs[i].off)));
	return o;
}

bool km_spec_empty(const struct km_spec *s)
{
	return !s->processor[0] && !s->cores && !s->chips && !s->memory_gib && !s->frequency_mhz;
}

double km_folded_bias(const struct km_zone *z)
{
	double b = z->bias_w;
	for (size_t i = 0; i < z->nfeat; i++)
		b -= z->feat[i].weight * z->feat[i].mean / z->feat[i].scale;
	return b;
}

static json_t *zone_json(const struct km_zone *z)
{
	json_t *nv = json_object();
	if (z->ncurve == 0) {
		for (size_t f = 0; f < z->nfeat; f++)
			json_object_set_new(nv, z->feat[f].name,
					    json_pack("{s:f,s:f}", "scale", z->feat[f].scale,
						      "weight", z->feat[f].weight));
		return json_pack("{s:{s:f,s:{},s:o}}", "All_Weights", "Bias_Weight",
				 km_folded_bias(z), "Categorical_Variables", "Numerical_Variables",
				 nv);
	}
	/* model-db's curve fits: features with their scale only, the curve's weights apart */
	json_t *cf = json_array();
	for (size_t f = 0; f < z->nfeat; f++)
		json_object_set_new(nv, z->feat[f].name,
				    json_pack("{s:f}", "scale", z->feat[f].scale));
	for (size_t c = 0; c < z->ncurve; c++)
		json_array_append_new(cf, json_real(z->curve[c]));
	return json_pack("{s:{s:{},s:o,s:o}}", "All_Weights", "Categorical_Variables",
			 "Numerical_Variables", nv, "CurveFit_Weights", cf);
}

/* An error figure as JSON: the known one, or 0 (weight.json's wattbus zones say 0 for unknown). */
static double known_or(double v, double unknown)
{
	return isfinite(v) && v >= 0 ? v : unknown;
}

json_t *km_weight_json(const struct km_zone *zones, size_t nzones, const char *model_name,
		       const struct km_spec *spec, const char *output, uint64_t train_slots,
		       uint64_t test_slots)
{
	json_t *root = json_object();
	if (model_name)
		json_object_set_new(root, "model_name", json_string(model_name));
	if (spec)
		json_object_set_new(root, "machine_spec", km_spec_json(spec));
	json_t *errs = json_object();
	for (size_t i = 0; i < nzones; i++) {
		json_object_set_new(root, zones[i].zone, zone_json(&zones[i]));
		json_object_set_new(errs, zones[i].zone,
				    json_pack("{s:f,s:f}", "mae_w", known_or(zones[i].mae_w, 0),
					      "mape", known_or(zones[i].mape, 0)));
	}
	if (output)
		json_object_set_new(root, "wattbus",
				    json_pack("{s:s,s:I,s:I,s:O}", "output", output, "train_slots",
					      (json_int_t)train_slots, "test_slots",
					      (json_int_t)test_slots, "zones", errs));
	json_decref(errs);
	return root;
}

static void set_str(json_t *o, const char *key, const char *s)
{
	if (s)
		json_object_set_new(o, key, json_string(s));
}

static json_t *strings(const char *const *s, size_t n)
{
	json_t *a = json_array();
	for (size_t i = 0; i < n; i++)
		json_array_append_new(a, json_string(s[i]));
	return a;
}

json_t *km_meta_json(const struct km_meta *m, const struct km_zone *zones, size_t nzones)
{
	json_t *o = json_object();
	set_str(o, "model_name", m->model_name);
	set_str(o, "trainer", m->trainer);
	set_str(o, "model_class", m->model_class);
	set_str(o, "model_file", m->model_file);
	json_object_set_new(o, "features", strings(m->features, m->nfeatures));
	json_object_set_new(o, "fe_files", json_array());
	set_str(o, "output_type", m->output_type);
	json_object_set_new(o, "mae", json_real(known_or(m->mae, -1)));
	json_object_set_new(o, "mape", json_real(known_or(m->mape, -1)));
	if (m->node_type >= 0)
		json_object_set_new(o, "node_type", json_integer(m->node_type));
	if (m->spec)
		json_object_set_new(o, "machine_spec", km_spec_json(m->spec));
	for (size_t z = 0; z < nzones; z++) {
		char key[48];
		snprintf(key, sizeof(key), "%.16s_mae", zones[z].zone);
		json_object_set_new(o, key, json_real(known_or(zones[z].mae_w, -1)));
		snprintf(key, sizeof(key), "%.16s_mape", zones[z].zone);
		json_object_set_new(o, key, json_real(known_or(zones[z].mape, -1)));
	}
	set_str(o, "wattbus_host", m->host);
	set_str(o, "wattbus_src", m->src);
	set_str(o, "wattbus_name", m->name);
	if (m->t_ns)
		json_object_set_new(o, "wattbus_t", json_integer((json_int_t)m->t_ns));
	json_object_set_new(o, "wattbus_train_slots", json_integer((json_int_t)m->train_slots));
	json_object_set_new(o, "wattbus_test_slots", json_integer((json_int_t)m->test_slots));
	if (m->recordings)
		json_object_set_new(o, "wattbus_recordings",
				    strings(m->recordings, m->nrecordings));
	return o;
}

const char *km_meta_host(const json_t *meta)
{
	const json_t *h = json_object_get(meta, "wattbus_host");
	return json_is_string(h) ? json_string_value(h) : "";
}
