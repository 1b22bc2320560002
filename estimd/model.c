/*
 * Power models in Kepler's model-db weights format: read (linear and the
 * curve-fit forms), evaluated per zone, written back, and carried on the bus
 * as wattbus model messages. Every rejection names the input and the JSON key.
 * Pure: modelio.c reads and writes the files.
 */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "codec.h"
#include "estimd.h"
#include "kmodel.h"

static const char *const kepler_zones[] = {"package", "core", "uncore", "dram", "platform"};
#define NKEPLER_ZONES (sizeof(kepler_zones) / sizeof(kepler_zones[0]))

const char *model_output_name(enum model_output output)
{
	return output == MODEL_DYN ? "DynPower" : "AbsPower";
}

static bool is_kepler_zone(const char *name)
{
	for (size_t i = 0; i < NKEPLER_ZONES; i++)
		if (strcmp(name, kepler_zones[i]) == 0)
			return true;
	return false;
}

static int fail(char *err, size_t errlen, const char *origin, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static int fail(char *err, size_t errlen, const char *origin, const char *key, const char *fmt, ...)
{
	char msg[MODEL_ERR_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (key && key[0])
		snprintf(err, errlen, "%s: %s: %s", origin, key, msg);
	else
		snprintf(err, errlen, "%s: %s", origin, msg);
	return -1;
}

static const char *json_type_name(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT:
		return "an object";
	case JSON_ARRAY:
		return "an array";
	case JSON_STRING:
		return "a string";
	case JSON_INTEGER:
		return "an integer";
	case JSON_REAL:
		return "a number";
	case JSON_TRUE:
	case JSON_FALSE:
		return "a boolean";
	case JSON_NULL:
		return "null";
	}
	return "?";
}

/*
 * Python's json module (which model-db's trainers use) writes NaN, Infinity and
 * -Infinity bare, which is not JSON; jansson would stop at them with only a
 * line and column. Quote them, so that the reader meets a string where it wants
 * a number and can name the key.
 */
static char *quote_nonfinite(const char *text, size_t len, size_t *out_len)
{
	static const char *const words[] = {"-Infinity", "Infinity", "-NaN", "NaN"};
	char *out = malloc(len * 2 + 3);
	if (!out)
		return NULL;
	size_t o = 0;
	bool in_string = false;
	for (size_t i = 0; i < len; i++) {
		char c = text[i];
		if (in_string) {
			out[o++] = c;
			if (c == '\\' && i + 1 < len)
				out[o++] = text[++i];
			else if (c == '"')
				in_string = false;
			continue;
		}
		if (c == '"') {
			in_string = true;
			out[o++] = c;
			continue;
		}
		bool done = false;
		for (size_t w = 0; w < sizeof(words) / sizeof(words[0]) && !done; w++) {
			size_t wl = strlen(words[w]);
			if (len - i >= wl && memcmp(text + i, words[w], wl) == 0) {
				out[o++] = '"';
				memcpy(out + o, words[w], wl);
				o += wl;
				out[o++] = '"';
				i += wl - 1;
				done = true;
			}
		}
		if (!done)
			out[o++] = c;
	}
	*out_len = o;
	return out;
}

struct reader {
	const char *origin;
	char *err;
	size_t errlen;
};

static int read_number(struct reader *r, const json_t *v, const char *key, double *out)
{
	if (json_is_string(v)) {
		/* quote_nonfinite() turned bare NaN and Infinity into these strings. */
		static const char *const nonfinite[] = {"NaN", "-NaN", "Infinity", "-Infinity"};
		for (size_t i = 0; i < sizeof(nonfinite) / sizeof(nonfinite[0]); i++)
			if (strcmp(json_string_value(v), nonfinite[i]) == 0)
				return fail(r->err, r->errlen, r->origin, key,
					    "%s is not a finite number", nonfinite[i]);
	}
	if (!json_is_number(v))
		return fail(r->err, r->errlen, r->origin, key, "expected a number, got %s",
			    json_type_name(v));
	double d = json_number_value(v);
	if (!isfinite(d))
		return fail(r->err, r->errlen, r->origin, key, "not a finite number");
	*out = d;
	return 0;
}

static int read_zone(struct reader *r, const char *zname, const json_t *zv, struct model *m)
{
	char key[320];
	struct model_zone *z = &m->zones[m->nzones];
	memset(z, 0, sizeof(*z));
	snprintf(z->zone, sizeof(z->zone), "%s", zname);
	if (!json_is_object(zv))
		return fail(r->err, r->errlen, r->origin, zname, "expected an object, got %s",
			    json_type_name(zv));
	const json_t *aw = json_object_get(zv, "All_Weights");
	snprintf(key, sizeof(key), "%s.All_Weights", zname);
	if (!aw)
		return fail(r->err, r->errlen, r->origin, key, "missing");
	if (!json_is_object(aw))
		return fail(r->err, r->errlen, r->origin, key, "expected an object, got %s",
			    json_type_name(aw));

	const json_t *bias = json_object_get(aw, "Bias_Weight");
	snprintf(key, sizeof(key), "%s.All_Weights.Bias_Weight", zname);
	/* Kepler writes it with omitempty: absent means 0. */
	if (bias && read_number(r, bias, key, &z->bias_w) < 0)
		return -1;

	const json_t *cat = json_object_get(aw, "Categorical_Variables");
	if (cat) {
		snprintf(key, sizeof(key), "%s.All_Weights.Categorical_Variables", zname);
		if (!json_is_object(cat))
			return fail(r->err, r->errlen, r->origin, key, "expected an object, got %s",
				    json_type_name(cat));
		m->ncategorical += json_object_size(cat);
	}

	const json_t *nv = json_object_get(aw, "Numerical_Variables");
	snprintf(key, sizeof(key), "%s.All_Weights.Numerical_Variables", zname);
	if (!nv)
		return fail(r->err, r->errlen, r->origin, key, "missing");
	if (!json_is_object(nv))
		return fail(r->err, r->errlen, r->origin, key, "expected an object, got %s",
			    json_type_name(nv));
	if (json_object_size(nv) == 0)
		return fail(r->err, r->errlen, r->origin, key, "no features");
	if (json_object_size(nv) > MODEL_FEATS_MAX)
		return fail(r->err, r->errlen, r->origin, key, "%zu features, at most %d",
			    json_object_size(nv), MODEL_FEATS_MAX);
	const char *fname;
	const json_t *fv;
	json_object_foreach((json_t *)nv, fname, fv)
	{
		struct model_feat *f = &z->feat[z->nfeat];
		snprintf(key, sizeof(key), "%s.All_Weights.Numerical_Variables.%s", zname, fname);
		if (strlen(fname) == 0 || strlen(fname) >= sizeof(f->name))
			return fail(r->err, r->errlen, r->origin, key,
				    "feature names are 1 to %zu characters", sizeof(f->name) - 1);
		if (!json_is_object(fv))
			return fail(r->err, r->errlen, r->origin, key, "expected an object, got %s",
				    json_type_name(fv));
		snprintf(f->name, sizeof(f->name), "%s", fname);
		f->id = feat_from_name(fname);
		const json_t *scale = json_object_get(fv, "scale");
		const json_t *weight = json_object_get(fv, "weight");
		size_t klen = strlen(key);
		snprintf(key + klen, sizeof(key) - klen, ".scale");
		if (!scale)
			return fail(r->err, r->errlen, r->origin, key, "missing");
		if (read_number(r, scale, key, &f->scale) < 0)
			return -1;
		if (!(f->scale > 0))
			return fail(r->err, r->errlen, r->origin, key,
				    "%g is not a positive scale (features are divided by it)",
				    f->scale);
		snprintf(key + klen, sizeof(key) - klen, ".weight");
		if (weight && read_number(r, weight, key, &f->weight) < 0)
			return -1;
		z->nfeat++;
	}
	z->curve_feat = model_curve_feature(z);

	const json_t *cf = json_object_get(aw, "CurveFit_Weights");
	if (cf) {
		snprintf(key, sizeof(key), "%s.All_Weights.CurveFit_Weights", zname);
		if (!json_is_array(cf))
			return fail(r->err, r->errlen, r->origin, key, "expected an array, got %s",
				    json_type_name(cf));
		if (json_array_size(cf) > 4)
			return fail(r->err, r->errlen, r->origin, key,
				    "%zu weights, no curve-fit form has more than 4",
				    json_array_size(cf));
		for (size_t i = 0; i < json_array_size(cf); i++) {
			char ikey[340];
			snprintf(ikey, sizeof(ikey), "%s[%zu]", key, i);
			if (read_number(r, json_array_get(cf, i), ikey, &z->curve[i]) < 0)
				return -1;
		}
		z->ncurve = json_array_size(cf);
	}
	m->nzones++;
	return 0;
}

static int read_meta(struct reader *r, const json_t *meta, struct model *m)
{
	char key[128];
	if (!json_is_object(meta))
		return fail(r->err, r->errlen, r->origin, "wattbus", "expected an object, got %s",
			    json_type_name(meta));
	const char *names[2] = {"train_slots", "test_slots"};
	uint64_t *dst[2] = {&m->train_slots, &m->test_slots};
	for (int i = 0; i < 2; i++) {
		const json_t *v = json_object_get(meta, names[i]);
		if (!v)
			continue;
		snprintf(key, sizeof(key), "wattbus.%s", names[i]);
		if (!json_is_integer(v) || json_integer_value(v) < 0)
			return fail(r->err, r->errlen, r->origin, key, "expected a count");
		*dst[i] = (uint64_t)json_integer_value(v);
	}
	const json_t *zones = json_object_get(meta, "zones");
	if (!zones)
		return 0;
	if (!json_is_object(zones))
		return fail(r->err, r->errlen, r->origin, "wattbus.zones", "expected an object");
	const char *zname;
	const json_t *zv;
	json_object_foreach((json_t *)zones, zname, zv)
	{
		int zi = model_find_zone(m, zname);
		if (zi < 0 || !json_is_object(zv))
			continue; /* error figures of a zone the model lacks say nothing */
		double *err_dst[2] = {&m->zones[zi].mae_w, &m->zones[zi].mape};
		const char *err_names[2] = {"mae_w", "mape"};
		for (int i = 0; i < 2; i++) {
			const json_t *v = json_object_get(zv, err_names[i]);
			if (!v)
				continue;
			snprintf(key, sizeof(key), "wattbus.zones.%.15s.%s", zname, err_names[i]);
			if (read_number(r, v, key, err_dst[i]) < 0)
				return -1;
		}
	}
	return 0;
}

/* model-db trainer name -> form (the first row whose trainer s names); -1 when it names none. */
static int trainer_form(const char *s)
{
	if (!s)
		return -1;
	for (int f = 0; f < MODEL_FORM_COUNT; f++)
		if (strstr(s, model_forms[f].trainer) ||
		    (model_forms[f].trainer_also && strstr(s, model_forms[f].trainer_also)))
			return f;
	return -1;
}

static int output_from(const char *s)
{
	if (!s)
		return -1;
	if (strstr(s, "DynPower"))
		return MODEL_DYN;
	if (strstr(s, "AbsPower"))
		return MODEL_ABS;
	return -1;
}

static int resolve_form(struct reader *r, const struct model_hint *hint, const char *model_name,
			struct model *m)
{
	int form = -1;
	const char *why = NULL;
	if (hint && hint->trainer && hint->trainer[0] && strcmp(hint->trainer, "auto") != 0) {
		form = trainer_form(hint->trainer);
		if (form < 0)
			return fail(r->err, r->errlen, r->origin, NULL,
				    "trainer '%s' publishes no weights wattbus can evaluate",
				    hint->trainer);
		why = "the configured trainer";
	}
	if (form < 0 && (form = trainer_form(model_name)) >= 0)
		why = "model_name";
	if (form < 0) {
		const char *base = strrchr(r->origin, '/');
		if ((form = trainer_form(base ? base + 1 : r->origin)) >= 0)
			why = "the file name";
	}
	if (form < 0) {
		/* model-db's folders: .../LogarithmicRegressionTrainer_5/weight.json */
		const char *end = strrchr(r->origin, '/'), *dir = end;
		while (dir && dir > r->origin && dir[-1] != '/')
			dir--;
		char name[128];
		if (dir && end - dir > 0 && (size_t)(end - dir) < sizeof(name)) {
			memcpy(name, dir, (size_t)(end - dir));
			name[end - dir] = '\0';
			if ((form = trainer_form(name)) >= 0)
				why = "the folder name";
		}
	}
	const struct model_zone *z0 = &m->zones[0];
	if (form < 0) {
		/* Nothing names the trainer: the JSON must say it by itself, by the number of its
		 * curve-fit weights, when one form alone has that many. */
		char names[256] = "";
		size_t nfit = 0, o = 0;
		for (int f = 0; f < MODEL_FORM_COUNT; f++) {
			if (model_forms[f].nparams != z0->ncurve)
				continue;
			form = nfit++ ? form : f;
			if (o < sizeof(names))
				o += (size_t)snprintf(names + o, sizeof(names) - o, "%s%s",
						      nfit > 1 ? " and the " : "the ",
						      model_forms[f].name);
		}
		if (nfit != 1) {
			char key[64];
			snprintf(key, sizeof(key), "%s.All_Weights.CurveFit_Weights", z0->zone);
			return fail(
			    r->err, r->errlen, r->origin, key,
			    "%zu curve-fit weights fit %s form%s; name the trainer (model_name, the model-db file name, or model_trainer)",
			    z0->ncurve, nfit ? names : "no", nfit ? " alike" : "");
		}
		why = "the weights";
	}
	m->form = (enum model_form)form;
	for (size_t i = 0; i < m->nzones; i++) {
		const struct model_zone *z = &m->zones[i];
		char key[64];
		snprintf(key, sizeof(key), "%s.All_Weights.CurveFit_Weights", z->zone);
		size_t want = model_curve_len(m->form);
		if (want == 0 && z->ncurve)
			return fail(r->err, r->errlen, r->origin, key,
				    "present, but %s says the model is linear", why);
		if (want && z->ncurve == 0)
			return fail(r->err, r->errlen, r->origin, key,
				    "missing (the %s form needs %zu)", model_form_name(m->form),
				    want);
		if (want && z->ncurve != want)
			return fail(r->err, r->errlen, r->origin, key,
				    "%zu weights, the %s form needs %zu", z->ncurve,
				    model_form_name(m->form), want);
	}
	return 0;
}

/* The model's cores from its machine_spec, in any spelling (lib/kmodel.h); the rest says nothing
 * to estimd, but a spec that is not one is refused whole. */
static int read_spec_cores(struct reader *r, const json_t *spec, struct model *out)
{
	struct km_spec ks;
	char kerr[MODEL_ERR_MAX];
	if (km_spec_parse(spec, KM_ZERO_CORES_REFUSED, &ks, kerr, sizeof(kerr)) < 0)
		return fail(r->err, r->errlen, r->origin, NULL, "%s", kerr);
	out->cores = ks.cores;
	return 0;
}

int model_parse(const char *text, size_t len, const char *origin, const struct model_hint *hint,
		struct model *out, char *err, size_t errlen)
{
	struct reader r = {origin ? origin : "(model)", err, errlen};
	memset(out, 0, sizeof(*out));
	size_t qlen;
	char *quoted = quote_nonfinite(text, len, &qlen);
	if (!quoted)
		return fail(err, errlen, r.origin, NULL, "out of memory");
	json_error_t jerr;
	json_t *root = json_loadb(quoted, qlen, JSON_REJECT_DUPLICATES, &jerr);
	free(quoted);
	if (!root) {
		snprintf(err, errlen, "%s:%d:%d: %s", r.origin, jerr.line, jerr.column, jerr.text);
		return -1;
	}
	int rc = -1;
	const char *model_name = NULL;
	if (!json_is_object(root)) {
		fail(err, errlen, r.origin, NULL, "expected a JSON object of zones, got %s",
		     json_type_name(root));
		goto done;
	}
	const char *key;
	const json_t *v;
	json_object_foreach(root, key, v)
	{
		if (is_kepler_zone(key)) {
			if (read_zone(&r, key, v, out) < 0)
				goto done;
		} else if (strcmp(key, "model_name") == 0) {
			if (!json_is_string(v) || json_string_length(v) == 0 ||
			    json_string_length(v) >= sizeof(out->name)) {
				fail(err, errlen, r.origin, key,
				     "expected a name of 1 to %zu characters",
				     sizeof(out->name) - 1);
				goto done;
			}
			model_name = json_string_value(v);
		} else if (strcmp(key, "machine_spec") == 0) {
			if (read_spec_cores(&r, v, out) < 0)
				goto done;
		} else if (strcmp(key, "mae") == 0 && json_is_number(v) &&
			   isfinite(json_number_value(v)) && json_number_value(v) >= 0)
			/* A model server's weights answer states the model's error. */
			out->mae_w = json_number_value(v);
		/* Other keys (Kepler ignores them too) are left alone. */
	}
	if (out->nzones == 0) {
		fail(
		    err, errlen, r.origin, "package",
		    "missing: no zone (expected at least one of package, core, uncore, dram, platform)");
		goto done;
	}
	const json_t *meta = json_object_get(root, "wattbus");
	if (meta && read_meta(&r, meta, out) < 0)
		goto done;
	if (resolve_form(&r, hint, model_name, out) < 0)
		goto done;

	int output = -1;
	if (hint && hint->output && hint->output[0] && strcmp(hint->output, "auto") != 0)
		output = output_from(hint->output);
	if (output < 0)
		output = output_from(model_name);
	if (output < 0)
		output = output_from(r.origin);
	out->output = output < 0 ? MODEL_ABS : (enum model_output)output;
	if (hint && hint->cores)
		out->cores = hint->cores;

	if (model_name) {
		snprintf(out->name, sizeof(out->name), "%s", model_name);
	} else {
		const char *base = strrchr(r.origin, '/');
		base = base ? base + 1 : r.origin;
		size_t n = strlen(base);
		if (strcmp(base, "weight.json") == 0 && base - r.origin >= 2) {
			/* model-db's folders are named after the model: NAME/weight.json */
			const char *dir = base - 1;
			while (dir > r.origin && dir[-1] != '/')
				dir--;
			n = (size_t)(base - 1 - dir);
			base = dir;
		}
		if (n > 5 && strcmp(base + n - 5, ".json") == 0)
			n -= 5;
		if (n >= sizeof(out->name))
			n = sizeof(out->name) - 1;
		memcpy(out->name, base, n);
		out->name[n] = '\0';
	}
	snprintf(out->origin, sizeof(out->origin), "%s", r.origin);
	rc = 0;
done:
	json_decref(root);
	if (rc < 0)
		memset(out, 0, sizeof(*out));
	return rc;
}

int model_find_zone(const struct model *m, const char *zone)
{
	for (size_t i = 0; i < m->nzones; i++)
		if (strcmp(m->zones[i].zone, zone) == 0)
			return (int)i;
	return -1;
}

bool model_zone_active(const struct model *m, const struct model_zone *z)
{
	const struct model_form_def *f = &model_forms[m->form];
	if (f->nparams)
		return z->curve[f->amp] != 0 || z->curve[f->offset] != 0;
	if (z->bias_w != 0)
		return true;
	for (size_t i = 0; i < z->nfeat; i++)
		if (z->feat[i].weight != 0)
			return true;
	return false;
}

/* Index of the feature named name in z, or -1. */
static int zone_feat(const struct model_zone *z, const char *name)
{
	for (size_t i = 0; i < z->nfeat; i++)
		if (strcmp(z->feat[i].name, name) == 0)
			return (int)i;
	return -1;
}

size_t model_curve_feature(const struct model_zone *z)
{
	/*
	 * kepler-model-server's CurveFitTrainer fits each zone on main_feature(group,
	 * zone): the group's dram feature for dram, its main feature otherwise. The
	 * weights do not name the group, but its features tell the two apart: counter
	 * groups (CounterOnly, Basic, CounterIRQCombined, Full) fit cpu_instructions
	 * and dram cache_miss, BPF groups (BPFOnly, BPFIRQ) bpf_cpu_time_ms and dram
	 * bpf_page_cache_hit. Kepler's estimator picks by another rule, which for
	 * BPFIRQ, Basic and CounterIRQCombined reads a feature the curve was not fitted
	 * on (docs/estimd.md).
	 */
	static const char *const dram_order[] = {"cache_miss", "bpf_page_cache_hit"};
	static const char *const main_order[] = {"cpu_instructions", "cpu_instr",
						 "bpf_cpu_time_ms"};
	int i;
	if (strcmp(z->zone, "dram") == 0)
		for (size_t k = 0; k < sizeof(dram_order) / sizeof(dram_order[0]); k++)
			if ((i = zone_feat(z, dram_order[k])) >= 0)
				return (size_t)i;
	for (size_t k = 0; k < sizeof(main_order) / sizeof(main_order[0]); k++)
		if ((i = zone_feat(z, main_order[k])) >= 0)
			return (size_t)i;
	return 0;
}

double model_zone_eval_w(const struct model *m, const struct model_zone *z, const double *v)
{
	if (m->form == MODEL_LINEAR) {
		double p = z->bias_w;
		for (size_t i = 0; i < z->nfeat; i++)
			if (z->feat[i].weight != 0)
				p +=
				    z->feat[i].weight * (v[i] - z->feat[i].mean) / z->feat[i].scale;
		return p;
	}
	/* model-db's curve fits read one feature per zone. */
	size_t k = z->curve_feat < z->nfeat ? z->curve_feat : 0;
	double u = z->nfeat ? (v[k] - z->feat[k].mean) / z->feat[k].scale : 0.0;
	return model_curve_eval(m->form, z->curve, u, NULL);
}

void model_zone_feats(const struct model_zone *z, const double x[FEAT_COUNT], double *v)
{
	for (size_t i = 0; i < z->nfeat; i++) {
		int id = z->feat[i].id;
		v[i] = id >= 0 && id < FEAT_COUNT ? x[id] : 0.0;
	}
}

double model_zone_power_w(const struct model *m, const struct model_zone *z,
			  const double x[FEAT_COUNT])
{
	double v[MODEL_FEATS_MAX];
	model_zone_feats(z, x, v);
	return model_zone_eval_w(m, z, v);
}

enum wb_power_fault model_zone_split(const struct model *m, const struct model_zone *z,
				     const double *v, double ratio, double max_w,
				     struct wb_zone_power *out)
{
	double zero[MODEL_FEATS_MAX] = {0};
	double p = model_zone_eval_w(m, z, v);
	if (m->output == MODEL_DYN)
		return wb_plaus_zone_power(p, 0, max_w, out);
	enum wb_power_fault f = wb_plaus_zone_power(p, model_zone_eval_w(m, z, zero), max_w, out);
	/* Kepler scales the idle (zero-usage) power by the core ratio; usage adds the rest. */
	if (ratio >= 0 && ratio < 1) {
		out->idle_w *= ratio;
		out->node_w = out->idle_w + out->active_w;
	}
	return f;
}

/* Past what one node's features reach, per second; a feature not listed goes to 10x its scale. */
static const struct {
	const char *name;
	double max;
} feat_ceiling[] = {
    {"bpf_cpu_time_ms", 1e6},	/* 1,000 CPUs busy */
    {"cpu_cycles", 1e13},	/* 2,000 CPUs at 5 GHz */
    {"cpu_instructions", 1e13}, /* ... at an IPC of 1 */
    {"cpu_instr", 1e13},	{"cache_miss", 1e12},	 {"bpf_page_cache_hit", 1e8},
    {"bpf_block_irq", 1e7},	{"bpf_net_rx_irq", 1e7}, {"bpf_net_tx_irq", 1e7},
};

static double feat_max(const struct model_feat *f)
{
	double max = 10 * f->scale;
	for (size_t i = 0; i < sizeof(feat_ceiling) / sizeof(feat_ceiling[0]); i++)
		if (strcmp(f->name, feat_ceiling[i].name) == 0 && feat_ceiling[i].max > max)
			max = feat_ceiling[i].max;
	return max;
}

/*
 * 0, or -1 with err when the zone's output at v is not finite, or above max_w (> 0) where every
 * feature is within its scale (in_range). only: the one feature set, or -1 for all.
 */
static int grid_point(const struct model *m, const struct model_zone *z, const double *v, int only,
		      bool in_range, double max_w, char *err, size_t errlen)
{
	double p = model_zone_eval_w(m, z, v);
	bool above = in_range && max_w > 0 && p > max_w;
	if (isfinite(p) && !above)
		return 0;
	char at[256];
	size_t o = 0;
	bool zero = true;
	for (size_t i = 0; i < z->nfeat; i++)
		zero &= v[i] == 0;
	for (size_t i = 0; i < z->nfeat && o < sizeof(at) && !zero; i++)
		if (only < 0 || (size_t)only == i)
			o += (size_t)snprintf(at + o, sizeof(at) - o, "%s%s=%g", o ? ", " : "",
					      z->feat[i].name, v[i]);
	if (zero)
		snprintf(at, sizeof(at), "zero usage");
	if (above)
		snprintf(
		    err, errlen,
		    "model %s: zone %s gives %g W at %s%s, within its training range: above the zone's bound of %g W, refused",
		    m->name, z->zone, p, at,
		    !zero && only >= 0 && z->nfeat > 1 ? " (the other features 0)" : "", max_w);
	else
		snprintf(err, errlen, "model %s: zone %s gives %g W at %s%s: not finite, refused",
			 m->name, z->zone, p, at,
			 !zero && only >= 0 && z->nfeat > 1 ? " (the other features 0)" : "");
	return -1;
}

int model_check_grid(const struct model *m, double max_w, char *err, size_t errlen)
{
	static const double of_scale[] = {0.01, 0.1, 0.25, 0.5, 1, 2, 5, 10};
	for (size_t zi = 0; zi < m->nzones; zi++) {
		const struct model_zone *z = &m->zones[zi];
		double v[MODEL_FEATS_MAX] = {0};
		if (!model_zone_active(m, z))
			continue;
		if (grid_point(m, z, v, -1, true, max_w, err, errlen) < 0)
			return -1;
		/* each feature alone (the point named is then one feature): multiples of its scale,
		 * and by decades from 1 to its maximum */
		for (size_t f = 0; f < z->nfeat; f++) {
			memset(v, 0, sizeof(v));
			for (size_t k = 0; k < sizeof(of_scale) / sizeof(of_scale[0]); k++) {
				v[f] = of_scale[k] * z->feat[f].scale;
				if (grid_point(m, z, v, (int)f, of_scale[k] <= 1, max_w, err,
					       errlen) < 0)
					return -1;
			}
			double max = feat_max(&z->feat[f]);
			for (double x = 1; x <= max * 1.0001; x *= 10) {
				v[f] = x;
				if (grid_point(m, z, v, (int)f, x <= z->feat[f].scale, max_w, err,
					       errlen) < 0)
					return -1;
			}
			v[f] = max;
			if (grid_point(m, z, v, (int)f, false, max_w, err, errlen) < 0)
				return -1;
		}
		/* all features together at the same multiple of their scales, then at their maxima
		 */
		for (size_t k = 0; k < sizeof(of_scale) / sizeof(of_scale[0]); k++) {
			for (size_t i = 0; i < z->nfeat; i++)
				v[i] = of_scale[k] * z->feat[i].scale;
			if (grid_point(m, z, v, -1, of_scale[k] <= 1, max_w, err, errlen) < 0)
				return -1;
		}
		for (size_t i = 0; i < z->nfeat; i++)
			v[i] = feat_max(&z->feat[i]);
		if (grid_point(m, z, v, -1, false, max_w, err, errlen) < 0)
			return -1;
	}
	return 0;
}

void model_km_zones(const struct model *m, struct km_zone zones[MODEL_ZONES_MAX],
		    struct km_feat feats[MODEL_ZONES_MAX][MODEL_FEATS_MAX])
{
	for (size_t i = 0; i < m->nzones; i++) {
		const struct model_zone *z = &m->zones[i];
		for (size_t f = 0; f < z->nfeat; f++)
			feats[i][f] = (struct km_feat){z->feat[f].name, z->feat[f].scale,
						       z->feat[f].weight, z->feat[f].mean};
		zones[i] = (struct km_zone){.zone = z->zone,
					    .bias_w = z->bias_w,
					    .feat = feats[i],
					    .nfeat = z->nfeat,
					    .curve = z->curve,
					    .ncurve = m->form == MODEL_LINEAR ? 0 : z->ncurve,
					    .mae_w = z->mae_w,
					    .mape = z->mape};
	}
}

char *model_to_kepler_json(const struct model *m, char *err, size_t errlen)
{
	struct km_feat feats[MODEL_ZONES_MAX][MODEL_FEATS_MAX];
	struct km_zone zones[MODEL_ZONES_MAX];
	model_km_zones(m, zones, feats);
	struct km_spec spec = {.cores = m->cores};
	/* Kepler ignores keys it does not know; estimd reads the held-out error back from
	 * "wattbus". */
	json_t *root = km_weight_json(zones, m->nzones, m->name, m->cores ? &spec : NULL,
				      model_output_name(m->output), m->train_slots, m->test_slots);
	char *text = json_dumps(root, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
	json_decref(root);
	if (!text)
		snprintf(err, errlen, "%s: cannot encode JSON (out of memory?)", m->name);
	return text;
}

/* Index of name in the message's feature list, adding it; -1 when full. */
static int feature_slot(char (*features)[64], size_t *n, const char *name)
{
	for (size_t i = 0; i < *n; i++)
		if (strcmp(features[i], name) == 0)
			return (int)i;
	if (*n >= MODEL_FEATS_MAX)
		return -1;
	snprintf(features[*n], 64, "%s", name);
	return (int)(*n)++;
}

int model_to_msg(const struct model *m, struct wb_model *msg, char *err, size_t errlen)
{
	memset(msg, 0, sizeof(*msg));
	if (m->form != MODEL_LINEAR) {
		snprintf(err, errlen,
			 "%s: only linear models travel as model messages (this one is %s)",
			 m->name, model_form_name(m->form));
		return -1;
	}
	snprintf(msg->name, sizeof(msg->name), "%s", m->name);
	snprintf(msg->type, sizeof(msg->type), "%s", model_output_name(m->output));
	msg->ncpu = m->cores;
	msg->train_slots = m->train_slots;
	msg->test_slots = m->test_slots;
	/* The whole model's held-out error, as modeld ranks it: MAE added up, the worst MAPE. */
	for (size_t i = 0; i < m->nzones; i++) {
		msg->mae += m->zones[i].mae_w > 0 ? m->zones[i].mae_w : 0;
		if (m->zones[i].mape > msg->mape)
			msg->mape = m->zones[i].mape;
	}
	msg->features = wb_array_new(MODEL_FEATS_MAX, sizeof(*msg->features));
	msg->zones = wb_array_new(m->nzones, sizeof(*msg->zones));
	if (!msg->features || !msg->zones)
		goto nomem;
	for (size_t i = 0; i < m->nzones; i++)
		for (size_t f = 0; f < m->zones[i].nfeat; f++)
			if (feature_slot(msg->features, &msg->n_features,
					 m->zones[i].feat[f].name) < 0) {
				snprintf(err, errlen, "%s: more than %d distinct features", m->name,
					 MODEL_FEATS_MAX);
				goto fail;
			}
	struct km_feat feats[MODEL_ZONES_MAX][MODEL_FEATS_MAX];
	struct km_zone kz[MODEL_ZONES_MAX];
	model_km_zones(m, kz, feats);
	for (size_t i = 0; i < m->nzones; i++) {
		const struct model_zone *z = &m->zones[i];
		struct wb_model_zone *mz = &msg->zones[msg->n_zones++];
		snprintf(mz->zone, sizeof(mz->zone), "%s", z->zone);
		mz->bias_w = km_folded_bias(&kz[i]);
		mz->mae_w = z->mae_w;
		mz->mape = z->mape;
		mz->weights = wb_array_new(msg->n_features, sizeof(double));
		mz->scales = wb_array_new(msg->n_features, sizeof(double));
		if (!mz->weights || !mz->scales)
			goto nomem;
		mz->n_weights = mz->n_scales = msg->n_features;
		for (size_t f = 0; f < msg->n_features; f++)
			mz->scales[f] = 1.0;
		for (size_t f = 0; f < z->nfeat; f++) {
			int at = feature_slot(msg->features, &msg->n_features, z->feat[f].name);
			mz->weights[at] = z->feat[f].weight;
			mz->scales[at] = z->feat[f].scale;
		}
	}
	return 0;
nomem:
	snprintf(err, errlen, "%s: out of memory", m->name);
fail : {
	struct wb_msg wrap = {.kind = WB_MODEL, .model = *msg};
	wb_msg_clear(&wrap);
	memset(msg, 0, sizeof(*msg));
	return -1;
}
}

int model_from_msg(const struct wb_model *msg, struct model *out, char *err, size_t errlen)
{
	char origin[160];
	snprintf(origin, sizeof(origin), "model %.60s from %.63s", msg->name, msg->env.host);
	memset(out, 0, sizeof(*out));
	int output = output_from(msg->type);
	if (output < 0 ||
	    (strcmp(msg->type, "AbsPower") != 0 && strcmp(msg->type, "DynPower") != 0))
		return fail(err, errlen, origin, "type", "'%s' is neither AbsPower nor DynPower",
			    msg->type);
	if (msg->n_features > MODEL_FEATS_MAX)
		return fail(err, errlen, origin, "features", "%zu features, at most %d",
			    msg->n_features, MODEL_FEATS_MAX);
	if (msg->n_zones > MODEL_ZONES_MAX)
		return fail(err, errlen, origin, "zones", "%zu zones, at most %d", msg->n_zones,
			    MODEL_ZONES_MAX);
	for (size_t i = 0; i < msg->n_zones; i++) {
		const struct wb_model_zone *mz = &msg->zones[i];
		char key[64];
		snprintf(key, sizeof(key), "zones[%zu].zone", i);
		if (!is_kepler_zone(mz->zone))
			return fail(err, errlen, origin, key,
				    "'%s' is not one of package, core, uncore, dram, platform",
				    mz->zone);
		if (model_find_zone(out, mz->zone) >= 0)
			return fail(err, errlen, origin, key, "'%s' twice", mz->zone);
		snprintf(key, sizeof(key), "zones[%zu].weights", i);
		if (mz->n_weights != msg->n_features)
			return fail(err, errlen, origin, key, "%zu weights for %zu features",
				    mz->n_weights, msg->n_features);
		snprintf(key, sizeof(key), "zones[%zu].scales", i);
		if (mz->n_scales != msg->n_features)
			return fail(err, errlen, origin, key, "%zu scales for %zu features",
				    mz->n_scales, msg->n_features);
		snprintf(key, sizeof(key), "zones[%zu].means", i);
		if (mz->n_means != 0 && mz->n_means != msg->n_features)
			return fail(err, errlen, origin, key, "%zu means for %zu features",
				    mz->n_means, msg->n_features);
		struct model_zone *z = &out->zones[out->nzones];
		snprintf(z->zone, sizeof(z->zone), "%s", mz->zone);
		z->bias_w = mz->bias_w;
		z->mae_w = mz->mae_w;
		z->mape = mz->mape;
		for (size_t f = 0; f < msg->n_features; f++) {
			snprintf(key, sizeof(key), "zones[%zu].scales[%zu]", i, f);
			if (!(mz->scales[f] > 0) || !isfinite(mz->scales[f]) ||
			    !isfinite(mz->weights[f]))
				return fail(err, errlen, origin, key,
					    "not a positive finite scale");
			struct model_feat *mf = &z->feat[z->nfeat++];
			snprintf(mf->name, sizeof(mf->name), "%s", msg->features[f]);
			mf->id = feat_from_name(mf->name);
			mf->weight = mz->weights[f];
			mf->scale = mz->scales[f];
			mf->mean = mz->n_means ? mz->means[f] : 0.0;
		}
		out->nzones++;
	}
	if (out->nzones == 0)
		return fail(err, errlen, origin, "zones", "no zone");
	snprintf(out->name, sizeof(out->name), "%s", msg->name);
	snprintf(out->origin, sizeof(out->origin), "bus:%s", msg->env.host);
	out->form = MODEL_LINEAR;
	out->output = (enum model_output)output;
	out->cores = msg->ncpu;
	out->train_slots = msg->train_slots;
	out->test_slots = msg->test_slots;
	return 0;
}

void model_describe(const struct model *m, char *buf, size_t size)
{
	size_t o = 0;
#define PUT(...)                                                                                   \
	do {                                                                                       \
		if (o < size)                                                                      \
			o += (size_t)snprintf(buf + o, size - o, __VA_ARGS__);                     \
	} while (0)
	PUT("%s (%s %s from %s", m->name, model_form_name(m->form), model_output_name(m->output),
	    m->origin);
	if (m->cores)
		PUT(", trained on %" PRIu64 " CPUs", m->cores);
	if (m->train_slots)
		PUT(", %" PRIu64 " training and %" PRIu64 " held-out slots", m->train_slots,
		    m->test_slots);
	PUT("; zones");
	bool any_err = false;
	for (size_t i = 0; i < m->nzones; i++) {
		const struct model_zone *z = &m->zones[i];
		if (!model_zone_active(m, z))
			continue;
		PUT(" %s", z->zone);
		if (m->test_slots > 0 || z->mae_w > 0 || z->mape > 0) {
			PUT(" (held-out MAE %.2f W, MAPE %.1f %%)", z->mae_w, z->mape);
			any_err = true;
		}
	}
	if (!any_err && m->mae_w > 0)
		PUT("; MAE %.2f W as its model server states it", m->mae_w);
	else if (!any_err)
		PUT("; held-out error not recorded in the model");
	PUT(")");
#undef PUT
}
