/* lib/kmodel: machine_spec in Kepler's spellings, weight.json and metadata.json as written. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kmodel.h"
#include "unit.h"

static int parse(const char *text, enum km_spec_zero zero, struct km_spec *s, char *err,
		 size_t errlen)
{
	json_error_t je;
	json_t *j = json_loads(text, JSON_DECODE_ANY, &je);
	CHECK(j != NULL);
	err[0] = '\0';
	int rc = km_spec_parse(j, zero, s, err, errlen);
	json_decref(j);
	return rc;
}

static void spec_spellings(void)
{
	struct km_spec s;
	char err[256];
	/* Python >= 3.11's member names (FREQ, not FREQUENCY), any case, a float and a string
	 * count, wattbus's memory_gib, and keys Kepler ignores */
	CHECK(
	    parse(
		"{\"NodeAttribute.PROCESSOR\": \"Intel(R) Xeon(R) Platinum 8259CL CPU @ 2.50GHz\", "
		"\"nodeattribute.cores\": 96.0, \"NodeAttribute.FREQ\": \"3500\", \"CHIPS\": 2, "
		"\"memory_gib\": 377, \"vendor\": \"intel\", \"threads_per_core\": 2}",
		KM_ZERO_CORES_REFUSED, &s, err, sizeof err) == 0);
	CHECK_STR(s.processor, "intel_xeon_platinum_8259cl");
	CHECK_U64(s.cores, 96);
	CHECK_U64(s.chips, 2);
	CHECK_U64(s.memory_gib, 377);
	CHECK_U64(s.frequency_mhz, 3500);
	/* Python <= 3.10's values; null in one spelling, known in the other */
	CHECK(parse("{\"frequency\": 3900, \"NodeAttribute.FREQ\": null, \"memory\": 31, "
		    "\"cores\": null, \"NodeAttribute.CORES\": 8}",
		    KM_ZERO_CORES_REFUSED, &s, err, sizeof err) == 0);
	CHECK_U64(s.frequency_mhz, 3900);
	CHECK_U64(s.memory_gib, 31);
	CHECK_U64(s.cores, 8);
	CHECK(!s.processor[0] && s.chips == 0);
	/* both spellings agreeing */
	CHECK(parse("{\"cores\": 96, \"NodeAttribute.CORES\": 96.0}", KM_ZERO_CORES_REFUSED, &s,
		    err, sizeof err) == 0);
	CHECK_U64(s.cores, 96);
	/* nothing: NULL, null, {} */
	CHECK(km_spec_parse(NULL, KM_ZERO_CORES_REFUSED, &s, err, sizeof err) == 0 &&
	      km_spec_empty(&s));
	CHECK(parse("null", KM_ZERO_CORES_REFUSED, &s, err, sizeof err) == 0 && km_spec_empty(&s));
	CHECK(parse("{}", KM_ZERO_CORES_REFUSED, &s, err, sizeof err) == 0 && km_spec_empty(&s));
}

static void spec_refusals(void)
{
	struct km_spec s;
	char err[256];
	static const struct {
		const char *text, *want;
	} bad[] = {
	    {"{\"cores\": 96, \"NodeAttribute.CORES\": 48}",
	     "machine_spec.NodeAttribute.CORES: 48 logical CPUs, but machine_spec.cores says 96"},
	    {"{\"NodeAttribute.FREQ\": 3500, \"frequency_mhz\": 3000}",
	     "machine_spec.frequency_mhz: 3000 MHz, but machine_spec.NodeAttribute.FREQ says 3500"},
	    {"{\"processor\": \"intel_xeon_e5_2686v4\", \"NodeAttribute.PROCESSOR\": \"amd_epyc\"}",
	     "machine_spec.NodeAttribute.PROCESSOR: \"amd_epyc\", but machine_spec.processor says \"intel_xeon_e5_2686v4\""},
	    {"{\"cores\": 2.5}", "machine_spec.cores: expected 1 to 65536 logical CPUs"},
	    {"{\"cores\": 0}", "machine_spec.cores: expected 1 to 65536 logical CPUs"},
	    {"{\"chips\": -1}", "machine_spec.chips: expected 0 to 1024 chips"},
	    {"{\"cores\": 65537}", "machine_spec.cores: expected 1 to 65536"},
	    {"{\"memory\": \"lots\"}", "machine_spec.memory: expected 0 to 1073741824 GiB"},
	    {"{\"cores\": true}", "machine_spec.cores: expected"},
	    {"{\"processor\": 5}", "machine_spec.processor: expected a string"},
	    {"[96]", "machine_spec: expected an object"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		int rc = parse(bad[i].text, KM_ZERO_CORES_REFUSED, &s, err, sizeof err);
		if (rc == 0 || !strstr(err, bad[i].want))
			printf("#   %s: \"%s\", not %s\n", bad[i].text, err, bad[i].want);
		CHECK(rc < 0 && strstr(err, bad[i].want));
	}
	/* a 0 says "not known", as Kepler's attr_has_value, but for a model's own cores */
	CHECK(parse("{\"cores\": 8, \"chips\": 0, \"NodeAttribute.MEMORY\": 0, \"memory\": 16}",
		    KM_ZERO_CORES_REFUSED, &s, err, sizeof err) == 0);
	CHECK_U64(s.cores, 8);
	CHECK_U64(s.chips, 0);
	CHECK_U64(s.memory_gib, 16);
	/* a request's or a node type's 0 says "not known", as Kepler's attr_has_value */
	CHECK(parse("{\"cores\": 0, \"NodeAttribute.CORES\": 16, \"frequency\": 0}",
		    KM_ZERO_UNKNOWN, &s, err, sizeof err) == 0);
	CHECK_U64(s.cores, 16);
	CHECK_U64(s.frequency_mhz, 0);
	CHECK(parse("{\"cores\": -1}", KM_ZERO_UNKNOWN, &s, err, sizeof err) < 0);
	CHECK(strstr(err, "machine_spec.cores: expected 0 to 65536") != NULL);
}

/* Dump and load again: what a reader of the file sees. */
static json_t *reloaded(json_t *j)
{
	char *text = json_dumps(j, JSON_REAL_PRECISION(17));
	json_decref(j);
	CHECK(text != NULL);
	json_error_t je;
	json_t *r = json_loads(text, 0, &je);
	free(text);
	CHECK(r != NULL);
	return r;
}

static void spec_round_trip(void)
{
	struct km_spec in = {"intel_xeon_e5_2686v4", 72, 0, 503, 3000}, out;
	json_t *j = reloaded(km_spec_json(&in));
	/* Kepler's five keys, null for what is not known */
	CHECK_U64(json_object_size(j), 5);
	CHECK(json_is_null(json_object_get(j, "chips")));
	CHECK_U64(json_integer_value(json_object_get(j, "memory")), 503);
	char err[256];
	CHECK(km_spec_parse(j, KM_ZERO_CORES_REFUSED, &out, err, sizeof err) == 0);
	CHECK(memcmp(&in, &out, sizeof in) == 0);
	json_decref(j);
}

static double num(const json_t *o, const char *key)
{
	return json_number_value(json_object_get(o, key));
}

/* Kepler's linear form at x: Bias_Weight + sum(weight * x / scale). */
static double kepler_linear(const json_t *zone, const char *const *names, const double *x, size_t n)
{
	const json_t *aw = json_object_get(zone, "All_Weights");
	const json_t *nv = json_object_get(aw, "Numerical_Variables");
	double p = num(aw, "Bias_Weight");
	for (size_t i = 0; i < n; i++) {
		const json_t *f = json_object_get(nv, names[i]);
		p += num(f, "weight") * x[i] / num(f, "scale");
	}
	return p;
}

static const struct km_feat feats[] = {{"cpu_cycles", 2, 3, 4}, {"cache_miss", 5, 1, 10}};
static const double curve[] = {80, 0.5, 3, 20};
static const struct km_zone zones[] = {
    {.zone = "package", .bias_w = 10, .feat = feats, .nfeat = 2, .mae_w = 1.5, .mape = NAN},
    {.zone = "dram",
     .bias_w = 99,
     .feat = feats,
     .nfeat = 1,
     .curve = curve,
     .ncurve = 4,
     .mae_w = 0,
     .mape = 3},
};

static void weight_round_trip(void)
{
	struct km_spec spec = {.cores = 96};
	json_t *w =
	    reloaded(km_weight_json(zones, 2, "SGDRegressorTrainer_3", &spec, "DynPower", 80, 20));
	/* the means folded into the bias: 10 - 3*4/2 - 1*10/5 = 2, and the same power as with
	 * the means at any point: 10 + 3*(6-4)/2 + 1*(20-10)/5 = 15 */
	const json_t *pkg = json_object_get(w, "package");
	CHECK_NEAR(num(json_object_get(pkg, "All_Weights"), "Bias_Weight"), 2, 1e-12);
	const char *names[] = {"cpu_cycles", "cache_miss"};
	CHECK_NEAR(kepler_linear(pkg, names, (double[]){6, 20}, 2), 15, 1e-12);
	CHECK_NEAR(kepler_linear(pkg, names, (double[]){0, 0}, 2), 2, 1e-12);
	CHECK_NEAR(km_folded_bias(&zones[0]), 2, 1e-12);
	/* a curve fit: scales only, its weights apart, no bias */
	const json_t *aw = json_object_get(json_object_get(w, "dram"), "All_Weights");
	const json_t *cc =
	    json_object_get(json_object_get(aw, "Numerical_Variables"), "cpu_cycles");
	CHECK_NEAR(num(cc, "scale"), 2, 0);
	CHECK(json_object_get(cc, "weight") == NULL);
	CHECK(json_object_get(aw, "Bias_Weight") == NULL);
	CHECK_U64(json_object_size(json_object_get(aw, "Numerical_Variables")), 1);
	const json_t *cf = json_object_get(aw, "CurveFit_Weights");
	CHECK_U64(json_array_size(cf), 4);
	CHECK_NEAR(json_number_value(json_array_get(cf, 1)), 0.5, 0);
	CHECK_STR(json_string_value(json_object_get(w, "model_name")), "SGDRegressorTrainer_3");
	struct km_spec back;
	char err[256];
	CHECK(km_spec_parse(json_object_get(w, "machine_spec"), KM_ZERO_CORES_REFUSED, &back, err,
			    sizeof err) == 0);
	CHECK_U64(back.cores, 96);
	/* wattbus's figures under "wattbus"; an error not known is 0 there */
	const json_t *wb = json_object_get(w, "wattbus");
	CHECK_STR(json_string_value(json_object_get(wb, "output")), "DynPower");
	CHECK_U64(json_integer_value(json_object_get(wb, "test_slots")), 20);
	const json_t *pz = json_object_get(json_object_get(wb, "zones"), "package");
	CHECK_NEAR(num(pz, "mae_w"), 1.5, 0);
	CHECK(json_is_number(json_object_get(pz, "mape")) && num(pz, "mape") == 0);
	json_decref(w);
	/* modeld's form: the zones alone */
	w = km_weight_json(zones, 1, NULL, NULL, NULL, 0, 0);
	CHECK_U64(json_object_size(w), 1);
	json_decref(w);
}

static void meta_round_trip(void)
{
	struct km_spec spec = {"intel_xeon_platinum_8259cl", 4, 1, 16, 3500};
	const char *features[] = {"bpf_cpu_time_ms", "cpu_cycles"};
	const char *recs[] = {"a.rec"};
	struct km_meta md = {.model_name = "SGDRegressorTrainer_3",
			     .trainer = "SGDRegressorTrainer",
			     .model_class = "xgboost",
			     .model_file = "SGDRegressorTrainer_3.json",
			     .output_type = "AbsPower",
			     .features = features,
			     .nfeatures = 2,
			     .mae = NAN,
			     .mape = 4.5,
			     .node_type = 3,
			     .spec = &spec,
			     .host = "node-a",
			     .t_ns = 123,
			     .train_slots = 80,
			     .test_slots = 20,
			     .recordings = recs,
			     .nrecordings = 1};
	json_t *m = reloaded(km_meta_json(&md, zones, 2));
	CHECK_STR(json_string_value(json_object_get(m, "trainer")), "SGDRegressorTrainer");
	CHECK_STR(json_string_value(json_array_get(json_object_get(m, "features"), 1)),
		  "cpu_cycles");
	CHECK_U64(json_array_size(json_object_get(m, "fe_files")), 0);
	CHECK(json_is_array(json_object_get(m, "fe_files")));
	CHECK_NEAR(num(m, "mae"), -1, 0); /* not known */
	CHECK_NEAR(num(m, "mape"), 4.5, 0);
	CHECK_U64(json_integer_value(json_object_get(m, "node_type")), 3);
	/* one pair per zone of weight.json: a known 0 stays 0, an unknown is -1, no other zone */
	CHECK_NEAR(num(m, "package_mae"), 1.5, 0);
	CHECK_NEAR(num(m, "package_mape"), -1, 0);
	CHECK(json_is_number(json_object_get(m, "dram_mae")) && num(m, "dram_mae") == 0);
	CHECK_NEAR(num(m, "dram_mape"), 3, 0);
	CHECK(json_object_get(m, "core_mae") == NULL && json_object_get(m, "platform_mae") == NULL);
	struct km_spec back;
	char err[256];
	CHECK(km_spec_parse(json_object_get(m, "machine_spec"), KM_ZERO_CORES_REFUSED, &back, err,
			    sizeof err) == 0);
	CHECK(memcmp(&back, &spec, sizeof spec) == 0);
	/* wattbus's keys flat (Kepler's estimator makes every nested object a Model) */
	CHECK_STR(km_meta_host(m), "node-a");
	CHECK_U64(json_integer_value(json_object_get(m, "wattbus_t")), 123);
	CHECK_U64(json_integer_value(json_object_get(m, "wattbus_train_slots")), 80);
	CHECK_STR(json_string_value(json_array_get(json_object_get(m, "wattbus_recordings"), 0)),
		  "a.rec");
	CHECK(json_object_get(m, "wattbus_src") == NULL); /* not given: left out */
	const char *key;
	const json_t *v;
	json_object_foreach(m, key, v) if (strcmp(key, "machine_spec")) CHECK(!json_is_object(v));
	json_decref(m);
	/* node_type unknown, no spec: left out */
	md.node_type = -1;
	md.spec = NULL;
	m = km_meta_json(&md, zones, 0);
	CHECK(json_object_get(m, "node_type") == NULL &&
	      json_object_get(m, "machine_spec") == NULL);
	json_decref(m);
	m = json_pack("{s:i}", "wattbus_host", 5);
	CHECK_STR(km_meta_host(m), "");
	json_decref(m);
}

static const struct unit_case cases[] = {
    {"machine_spec in every spelling Kepler writes", spec_spellings},
    {"machine_spec refusals name the key as spelt; 0 is not known but for a model's cores",
     spec_refusals},
    {"machine_spec written and read back", spec_round_trip},
    {"weight.json: one bias folding, curve fits, wattbus's figures", weight_round_trip},
    {"metadata.json: Kepler's keys, a pair per zone, wattbus's flat", meta_round_trip},
};

UNIT_MAIN(cases)
