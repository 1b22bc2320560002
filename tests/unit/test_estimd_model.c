/*
 * estimd power models: the shipped Kepler model-db weights evaluated against
 * hand computations, the curve-fit forms, the core ratio, writing and
 * re-reading Kepler JSON and model messages, and bad model files rejected
 * with the file and the JSON key.
 */
#include <math.h>
#include <unistd.h>

#include "codec.h"
#include "../../estimd/estimd.h"
#include "unit.h"

#define SHIPPED "data/models/ec2-0.7.11_rapl-sysfs_AbsPower_BPFOnly_SGDRegressorTrainer_1.json"
/* The model-db file as shared with the project (../shared beside the checkout), when present. */
#define SHARED                                                                                     \
	"../shared/data/kepler-model-db/ec2-0.7.11_rapl-sysfs_AbsPower_BPFOnly_SGDRegressorTrainer_1.json"

static const char *shared_path(void)
{
	static char path[4096];
	const char *root = getenv("WB_ROOT");
	snprintf(path, sizeof(path), "%s/%s", root && root[0] ? root : ".", SHARED);
	return path;
}

static const char *shipped_path(void)
{
	static char path[4096];
	const char *root = getenv("WB_ROOT");
	snprintf(path, sizeof(path), "%s/%s", root && root[0] ? root : ".", SHIPPED);
	return path;
}

static void check_ec2_model(const struct model *m)
{
	double x[FEAT_COUNT] = {0};
	x[FEAT_CPU_TIME_MS] = 36000; /* 36 of the 72 CPUs busy */
	int pkg = model_find_zone(m, "package"), dram = model_find_zone(m, "dram");
	CHECK(pkg >= 0 && dram >= 0);
	if (pkg < 0 || dram < 0)
		return;
	/* By hand: 72.59861443995234 + 183.3146104970995 * 36000 / 71901.33333333333 =
	 * 164.38169650466485 */
	CHECK_NEAR(model_zone_power_w(m, &m->zones[pkg], x), 164.38169650466485, 1e-9);
	/* 21.28678915321566 + 7.78700657590542 * 36000 / 71901.33333333333 = 25.185635304412603 */
	CHECK_NEAR(model_zone_power_w(m, &m->zones[dram], x), 25.185635304412603, 1e-9);
	/* At rest: the bias. */
	double zero[FEAT_COUNT] = {0};
	CHECK_NEAR(model_zone_power_w(m, &m->zones[pkg], zero), 72.59861443995234, 1e-12);
	/* core and uncore are all zeros in model-db's file: they model nothing. */
	CHECK(!model_zone_active(m, &m->zones[model_find_zone(m, "core")]));
	CHECK(model_zone_active(m, &m->zones[pkg]));
	CHECK(m->form == MODEL_LINEAR);
	CHECK(m->output == MODEL_ABS);
}

static void test_shipped_weights_by_hand(void)
{
	struct model m;
	char err[MODEL_ERR_MAX];
	int rc = model_load_file(shipped_path(), NULL, &m, err, sizeof(err));
	if (rc < 0)
		printf("# %s\n", err);
	CHECK(rc == 0);
	check_ec2_model(&m);
	CHECK_U64(m.cores, 72); /* machine_spec added from model-db's node_type_index (i3.metal) */
	CHECK_STR(m.name, "ec2-0.7.11_rapl-sysfs_AbsPower_BPFOnly_SGDRegressorTrainer_1");
	/* The file as model-db publishes it (no machine_spec) reads the same. */
	if (access(shared_path(), R_OK) == 0) {
		CHECK(model_load_file(shared_path(), NULL, &m, err, sizeof(err)) == 0);
		check_ec2_model(&m);
		CHECK_U64(m.cores, 0);
	}
}

/* Model mode end to end: a 2-CPU host, one process busy for the whole 1 s slot. */
static void test_model_mode_slot(void)
{
	struct model *m = malloc(sizeof(*m));
	char err[MODEL_ERR_MAX];
	CHECK(model_load_file(shipped_path(), NULL, m, err, sizeof(err)) == 0);
	struct est_conf c = {.mode = EST_AUTO, .idle.method = IDLE_RATIO};
	struct estimator *e = estimator_new(&c);
	estimator_set_model(e, m);
	CHECK_NEAR(estimator_core_ratio(e, 2), 2.0 / 72.0, 1e-15);
	CHECK_NEAR(estimator_core_ratio(e, 144), 1.0, 0); /* never above 1 */

	struct wb_msg msg = {.kind = WB_ALIGNED};
	struct wb_aligned *a = &msg.aligned;
	snprintf(a->env.host, sizeof(a->env.host), "vm1");
	a->t0 = 1000000000000ull;
	a->t1 = a->t0 + 1000000000ull;
	a->ncpu = 2;
	a->cpu.user_ns = 1000000000;
	a->cpu.idle_ns = 1000000000;
	a->procs = wb_array_new(1, sizeof(*a->procs));
	a->n_procs = 1;
	a->procs[0] = (struct wb_slot_proc){.pid = 42, .comm = "burn", .cpu_ns = 1000000000};
	struct wb_estimate out;
	struct est_result res;
	CHECK(estimator_slot(e, a, &out, &res, err, sizeof(err)) == 0);
	CHECK(!res.measured);
	CHECK_STR(out.mode, "model");
	CHECK_STR(out.model, "ec2-0.7.11_rapl-sysfs_AbsPower_BPFOnly_SGDRegressorTrainer_1");
	CHECK_U64(out.n_zones, 2); /* package and dram; core and uncore model nothing */
	/*
	 * By hand, package: idle 72.59861443995234 W * 2/72 = 2.016628178887565 W -> 2016628 uJ;
	 * active 183.3146104970995 * 1000 / 71901.33333333333 = 2.549530057353125 W -> 2549530 uJ.
	 */
	CHECK_STR(out.zones[0].zone, "package");
	CHECK_U64(out.zones[0].idle_uj, 2016628);
	CHECK_U64(out.zones[0].active_uj, 2549530);
	CHECK_U64(out.zones[0].energy_uj, 2016628 + 2549530);
	/* dram: idle 21.28678915321566 * 2/72 = 0.5912996987 W; active 7.78700657590542 * 1000 /
	 * 71901.33 = 0.1083013 W */
	CHECK_STR(out.zones[1].zone, "dram");
	CHECK_U64(out.zones[1].idle_uj, 591300);
	CHECK_U64(out.zones[1].active_uj, 108301);
	/* The one busy process gets all of the active energy. */
	CHECK_U64(out.procs[0].energy_uj[0], 2549530);
	CHECK_U64(out.procs[0].energy_uj[1], 108301);
	/* With the core ratio off (model_cores = host cores), the whole idle power counts. */
	c.model_cores = 2;
	estimator_set_conf(e, &c);
	CHECK(estimator_slot(e, a, &out, &res, err, sizeof(err)) == 0);
	CHECK_U64(out.zones[0].idle_uj, 72598614);
	/* A model within the schema can still claim 1e39 W: counted, and clipped to the zone's
	 * bound (lib/plaus.h's WB_ZONE_MAX_W, 5000 W for the 1 s slot), all of it idle (as is
	 * P(0)). */
	struct model *huge = malloc(sizeof(*huge));
	*huge = *m;
	huge->zones[model_find_zone(huge, "package")].bias_w = 1e39;
	estimator_set_model(e, huge);
	CHECK(estimator_slot(e, a, &out, &res, err, sizeof(err)) == 0);
	CHECK_U64(res.model_implausible, 1);
	CHECK(strstr(res.implausible, "zone package: 1e+39 W") != NULL);
	CHECK_U64(out.zones[0].energy_uj, 5000000000);
	CHECK_U64(out.zones[0].idle_uj, 5000000000);
	estimator_destroy(&e);
	wb_msg_clear(&msg);
}

static const char log_json[] =
    "{\"package\": {\"All_Weights\": {\"Categorical_Variables\": {}, \"Numerical_Variables\": {\"bpf_cpu_time_ms\": {\"scale\": 71901.33333333333}, \"bpf_page_cache_hit\": {\"scale\": 1.0}}, \"CurveFit_Weights\": [52.51018993185623, 46.60573934771109, 22.07181593220226]}}, \"core\": {\"All_Weights\": {\"Categorical_Variables\": {}, \"Numerical_Variables\": {\"bpf_cpu_time_ms\": {\"scale\": 71901.33333333333}, \"bpf_page_cache_hit\": {\"scale\": 1.0}}, \"CurveFit_Weights\": [0.0, 1.0, 0.0]}}}";

static void test_curve_forms(void)
{
	struct model m;
	char err[MODEL_ERR_MAX];
	double x[FEAT_COUNT] = {0};
	x[FEAT_CPU_TIME_MS] = 36000;
	/* model-db's logarithmic fit (its file name says the trainer): a*ln(b*u + 1) + c. */
	CHECK(model_parse(log_json, sizeof(log_json) - 1,
			  "rapl-sysfs/AbsPower/BPFOnly/LogarithmicRegressionTrainer_1.json", NULL,
			  &m, err, sizeof(err)) == 0);
	CHECK(m.form == MODEL_LOGARITHMIC);
	/* By hand: u = 36000/71901.333 = 0.5006860; 52.51019*ln(46.605739*0.500686+1) + 22.071816 =
	 * 189.679582585 */
	CHECK_NEAR(model_zone_power_w(&m, &m.zones[0], x), 189.679582585039, 1e-6);
	CHECK(!model_zone_active(&m, &m.zones[1]));
	/* The same weights with no trainer named anywhere are ambiguous (3 weights: log or exp). */
	CHECK(model_parse(log_json, sizeof(log_json) - 1, "weights.json", NULL, &m, err,
			  sizeof(err)) == -1);
	CHECK(
	    strstr(
		err,
		"weights.json: package.All_Weights.CurveFit_Weights: 3 curve-fit weights fit the logarithmic and the exponential form alike;") !=
	    NULL);
	/* ...unless the configured trainer says. */
	struct model_hint hint = {"ExponentialRegressionTrainer", "auto", 0};
	CHECK(model_parse(log_json, sizeof(log_json) - 1, "weights.json", &hint, &m, err,
			  sizeof(err)) == 0);
	CHECK(m.form == MODEL_EXPONENTIAL);

	/* Logistic, 4 weights [A, x0, k, off]: at u = x0 it is A/2 + off = 100/2 + 20 = 70. */
	const char logistic[] =
	    "{\"package\": {\"All_Weights\": {\"Numerical_Variables\": {\"bpf_cpu_time_ms\": {\"scale\": 1000}}, \"CurveFit_Weights\": [100, 0.5, 10, 20]}}}";
	CHECK(model_parse(logistic, sizeof(logistic) - 1, "l.json", NULL, &m, err, sizeof(err)) ==
	      0);
	CHECK(m.form == MODEL_LOGISTIC);
	x[FEAT_CPU_TIME_MS] = 500;
	CHECK_NEAR(model_zone_power_w(&m, &m.zones[0], x), 70.0, 1e-12);

	/* Exponential a*e^(b*u) + c with a=10, b=2, c=5 at u=0.5: 10e + 5 = 32.18281828459045 */
	const char expo[] =
	    "{\"model_name\": \"ExponentialRegressionTrainer_1\", \"dram\": {\"All_Weights\": {\"Numerical_Variables\": {\"bpf_cpu_time_ms\": {\"scale\": 1000}}, \"CurveFit_Weights\": [10, 2, 5]}}}";
	CHECK(model_parse(expo, sizeof(expo) - 1, "e.json", NULL, &m, err, sizeof(err)) == 0);
	CHECK(m.form == MODEL_EXPONENTIAL);
	CHECK_NEAR(model_zone_power_w(&m, &m.zones[0], x), 32.18281828459045, 1e-12);
	CHECK_STR(m.name, "ExponentialRegressionTrainer_1");

	/* DynPower from the file name. */
	CHECK(model_parse(logistic, sizeof(logistic) - 1,
			  "x/rapl-sysfs/DynPower/BPFOnly/LogisticRegressionTrainer_4.json", NULL,
			  &m, err, sizeof(err)) == 0);
	CHECK(m.output == MODEL_DYN);
}

struct bad_case {
	const char *json;
	const char *want; /* substring of the error: the file and the JSON key */
};

static void test_bad_files(void)
{
	static const struct bad_case bad[] = {
	    {"{\"model_name\": \"x\"}", "bad.json: package: missing: no zone"},
	    {"{\"package\": {}}", "bad.json: package.All_Weights: missing"},
	    {"{\"package\": {\"All_Weights\": {\"Bias_Weight\": 1}}}",
	     "bad.json: package.All_Weights.Numerical_Variables: missing"},
	    {"{\"package\": {\"All_Weights\": {\"Numerical_Variables\": {}}}}",
	     "bad.json: package.All_Weights.Numerical_Variables: no features"},
	    {"{\"package\": {\"All_Weights\": {\"Numerical_Variables\": {\"bpf_cpu_time_ms\": {\"weight\": 2}}}}}",
	     "bad.json: package.All_Weights.Numerical_Variables.bpf_cpu_time_ms.scale: missing"},
	    {"{\"package\": {\"All_Weights\": {\"Numerical_Variables\": {\"bpf_cpu_time_ms\": {\"scale\": 0, \"weight\": 2}}}}}",
	     "bad.json: package.All_Weights.Numerical_Variables.bpf_cpu_time_ms.scale: 0 is not a positive scale"},
	    {"{\"package\": {\"All_Weights\": {\"Numerical_Variables\": {\"bpf_cpu_time_ms\": {\"scale\": -3}}}}}",
	     "bad.json: package.All_Weights.Numerical_Variables.bpf_cpu_time_ms.scale: -3 is not a positive scale"},
	    {"{\"package\": {\"All_Weights\": {\"Bias_Weight\": NaN, \"Numerical_Variables\": {\"bpf_cpu_time_ms\": {\"scale\": 1, \"weight\": 2}}}}}",
	     "bad.json: package.All_Weights.Bias_Weight: NaN is not a finite number"},
	    {"{\"package\": {\"All_Weights\": {\"Numerical_Variables\": {\"bpf_cpu_time_ms\": {\"scale\": 1, \"weight\": -Infinity}}}}}",
	     "bad.json: package.All_Weights.Numerical_Variables.bpf_cpu_time_ms.weight: -Infinity is not a finite number"},
	    {"{\"package\": {\"All_Weights\": {\"Numerical_Variables\": {\"bpf_cpu_time_ms\": {\"scale\": \"1\"}}}}}",
	     "bad.json: package.All_Weights.Numerical_Variables.bpf_cpu_time_ms.scale: expected a number, got a string"},
	    {"{\"dram\": {\"All_Weights\": {\"Numerical_Variables\": {\"bpf_cpu_time_ms\": {\"scale\": 1}}, \"CurveFit_Weights\": [1, NaN, 3, 4]}}}",
	     "bad.json: dram.All_Weights.CurveFit_Weights[1]: NaN is not a finite number"},
	    {"{\"package\": {\"All_Weights\": {\"Numerical_Variables\": {\"bpf_cpu_time_ms\": {\"scale\": 1}}, \"CurveFit_Weights\": [1, 2]}}}",
	     "bad.json: package.All_Weights.CurveFit_Weights: 2 curve-fit weights fit no form;"},
	    {"{\"model_name\": \"SGDRegressorTrainer_1\", \"package\": {\"All_Weights\": {\"Numerical_Variables\": {\"bpf_cpu_time_ms\": {\"scale\": 1}}, \"CurveFit_Weights\": [1, 2, 3]}}}",
	     "bad.json: package.All_Weights.CurveFit_Weights: present, but model_name says the model is linear"},
	    {"{\"machine_spec\": {\"cores\": 0}, \"package\": {\"All_Weights\": {\"Numerical_Variables\": {\"bpf_cpu_time_ms\": {\"scale\": 1}}}}}",
	     "bad.json: machine_spec.cores:"},
	    {"{\"package\": {\"All_Weights\": {\"Numerical_Variables\": {\"x\": {\"scale\": 1}}}}, \"package\": {}}",
	     "bad.json:1:"}, /* duplicate key: jansson's position */
	    {"{\"package\": ", "bad.json:1:"},
	    {"[1, 2]", "bad.json: expected a JSON object of zones"},
	    {"", "bad.json:"},
	};
	struct model m, keep;
	char err[MODEL_ERR_MAX];
	CHECK(model_load_file(shipped_path(), NULL, &keep, err, sizeof(err)) == 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		int rc = model_parse(bad[i].json, strlen(bad[i].json), "bad.json", NULL, &m, err,
				     sizeof(err));
		CHECK(rc == -1);
		if (!strstr(err, bad[i].want)) {
			printf("#   case %zu: error '%s', expected '%s'\n", i, err, bad[i].want);
			CHECK(false);
		}
	}
	CHECK(model_load_file("/nonexistent/model.json", NULL, &m, err, sizeof(err)) == -1);
	CHECK(strstr(err, "/nonexistent/model.json: No such file") != NULL);
	/* A rejected file leaves the running model alone: the estimator only swaps after a good
	 * parse. */
	struct est_conf c = {.mode = EST_MODEL};
	struct estimator *e = estimator_new(&c);
	struct model *km = malloc(sizeof(*km));
	*km = keep;
	estimator_set_model(e, km);
	CHECK(model_parse("{}", 2, "bad.json", NULL, &m, err, sizeof(err)) == -1);
	CHECK_STR(estimator_model(e)->name, keep.name);
	estimator_destroy(&e);
}

/* Written as Kepler JSON and as a model message, a model reads back with the same predictions. */
static void test_roundtrips(void)
{
	struct model m = {0}, back;
	char err[MODEL_ERR_MAX];
	snprintf(m.name, sizeof(m.name), "wattbus-h1-7");
	m.form = MODEL_LINEAR;
	m.output = MODEL_ABS;
	m.cores = 16;
	m.train_slots = 480;
	m.test_slots = 120;
	m.nzones = 2;
	snprintf(m.zones[0].zone, 16, "package");
	m.zones[0].bias_w = 40;
	m.zones[0].nfeat = 2;
	m.zones[0].feat[0] =
	    (struct model_feat){"bpf_cpu_time_ms", FEAT_CPU_TIME_MS, 30, 4000, 8000};
	m.zones[0].feat[1] =
	    (struct model_feat){"cpu_instructions", FEAT_CPU_INSTRUCTIONS, 5, 1e10, 2e10};
	m.zones[0].mae_w = 1.25;
	m.zones[0].mape = 2.5;
	snprintf(m.zones[1].zone, 16, "dram");
	m.zones[1].bias_w = 8;
	m.zones[1].nfeat = 1;
	m.zones[1].feat[0] =
	    (struct model_feat){"bpf_cpu_time_ms", FEAT_CPU_TIME_MS, 2, 4000, 8000};
	double x[FEAT_COUNT] = {12000, 0, 3e10, 0};
	/* 40 + 30*(12000-8000)/4000 + 5*(3e10-2e10)/1e10 = 75 */
	CHECK_NEAR(model_zone_power_w(&m, &m.zones[0], x), 75, 1e-9);

	char *json = model_to_kepler_json(&m, err, sizeof(err));
	CHECK(json != NULL);
	CHECK(json && strstr(json, "\"All_Weights\"") && strstr(json, "\"Bias_Weight\"") &&
	      strstr(json, "\"Numerical_Variables\"") && strstr(json, "\"cores\": 16"));
	CHECK(json &&
	      model_parse(json, strlen(json), "trained.json", NULL, &back, err, sizeof(err)) == 0);
	free(json);
	CHECK_STR(back.name, "wattbus-h1-7");
	CHECK(back.form == MODEL_LINEAR);
	CHECK_U64(back.cores, 16);
	CHECK_U64(back.train_slots, 480);
	CHECK_NEAR(model_zone_power_w(&back, &back.zones[0], x), 75, 1e-9);
	CHECK_NEAR(back.zones[0].mape, 2.5, 1e-12);

	struct wb_msg msg = {.kind = WB_MODEL};
	CHECK(model_to_msg(&m, &msg.model, err, sizeof(err)) == 0);
	snprintf(msg.model.env.host, sizeof(msg.model.env.host), "h1");
	snprintf(msg.model.env.kind, sizeof(msg.model.env.kind), "model");
	snprintf(msg.model.env.src, sizeof(msg.model.env.src), "estimd");
	msg.model.env.v = 1;
	msg.model.t = 1;
	CHECK_U64(msg.model.n_features, 2);
	char *buf;
	size_t len;
	struct wb_err werr;
	CHECK(wb_encode(&msg, &buf, &len, &werr) == 0);
	struct wb_msg dec;
	CHECK(wb_decode(buf, len, &dec, &werr) == 0);
	free(buf);
	CHECK(model_from_msg(&dec.model, &back, err, sizeof(err)) == 0);
	CHECK_STR(back.origin, "bus:h1");
	CHECK_NEAR(model_zone_power_w(&back, &back.zones[0], x), 75, 1e-9);
	/* dram has no instructions weight: 8 + 2*(12000-8000)/4000 = 10 */
	CHECK_NEAR(model_zone_power_w(&back, &back.zones[1], x), 10, 1e-9);
	CHECK_NEAR(back.zones[0].mae_w, 1.25, 1e-12);

	/* A message with mismatched arrays or an unknown zone is refused with the key. */
	dec.model.zones[1].n_weights = 1;
	CHECK(model_from_msg(&dec.model, &back, err, sizeof(err)) == -1);
	CHECK(strstr(err, "zones[1].weights: 1 weights for 2 features") != NULL);
	dec.model.zones[1].n_weights = 2;
	snprintf(dec.model.zones[1].zone, 16, "gpu");
	CHECK(model_from_msg(&dec.model, &back, err, sizeof(err)) == -1);
	CHECK(strstr(err, "zones[1].zone: 'gpu'") != NULL);
	snprintf(dec.model.type, sizeof(dec.model.type), "Watts");
	CHECK(model_from_msg(&dec.model, &back, err, sizeof(err)) == -1);
	CHECK(strstr(err, "type:") != NULL);
	wb_msg_clear(&dec);
	wb_msg_clear(&msg);

	/* Curve fits have no message form; in Kepler's JSON they read back the same curve. */
	struct model c;
	memset(&c, 0, sizeof(c));
	snprintf(c.name, sizeof(c.name), "LogisticRegressionTrainer-wattbus-h");
	c.form = MODEL_LOGISTIC;
	c.nzones = 1;
	snprintf(c.zones[0].zone, sizeof(c.zones[0].zone), "package");
	c.zones[0].nfeat = 1;
	snprintf(c.zones[0].feat[0].name, sizeof(c.zones[0].feat[0].name), "bpf_cpu_time_ms");
	c.zones[0].feat[0].id = FEAT_CPU_TIME_MS;
	c.zones[0].feat[0].scale = 4000;
	c.zones[0].ncurve = 4;
	double cw[4] = {80, 0.5, 12, 20};
	memcpy(c.zones[0].curve, cw, sizeof(cw));
	CHECK(model_to_msg(&c, &msg.model, err, sizeof(err)) == -1);
	char *cj = model_to_kepler_json(&c, err, sizeof(err));
	CHECK(cj != NULL);
	struct model cb;
	CHECK(cj && model_parse(cj, strlen(cj), "curve.json", NULL, &cb, err, sizeof(err)) == 0);
	free(cj);
	CHECK(cb.form == MODEL_LOGISTIC && cb.nzones == 1 && cb.zones[0].ncurve == 4);
	double xc[FEAT_COUNT] = {0};
	for (double ms = 0; ms <= 4000; ms += 500) {
		xc[FEAT_CPU_TIME_MS] = ms;
		CHECK_NEAR(model_zone_power_w(&cb, &cb.zones[0], xc),
			   model_zone_power_w(&c, &c.zones[0], xc), 1e-9);
	}
}

/*
 * machine_spec as kepler-model-server writes it: NodeTypeSpec.get_json() keys each attribute
 * f"{attr}" of its NodeAttribute(str, Enum): "cores" on Python <= 3.10, "NodeAttribute.CORES" on
 * 3.11 and later. Whatever the spelling, the model's cores give the core ratio on a 2-CPU host's
 * idle power: 40 W * 2/96.
 */
static void spec_spelling(const char *spec_json)
{
	char text[1024], err[MODEL_ERR_MAX];
	snprintf(
	    text, sizeof(text),
	    "{\"model_name\": \"SGDRegressorTrainer_0\", \"machine_spec\": %s, \"package\": {\"All_Weights\": {\"Bias_Weight\": 40, \"Categorical_Variables\": {}, \"Numerical_Variables\": {\"bpf_cpu_time_ms\": {\"scale\": 1000, \"weight\": 1}}}}}",
	    spec_json);
	struct model *m = malloc(sizeof(*m));
	int rc = model_parse(text, strlen(text), "http://server/model", NULL, m, err, sizeof(err));
	if (rc < 0)
		printf("#   %s: %s\n", spec_json, err);
	CHECK(rc == 0);
	CHECK_U64(m->cores, 96);
	struct est_conf c = {.mode = EST_AUTO, .idle.method = IDLE_RATIO};
	struct estimator *e = estimator_new(&c);
	estimator_set_model(e, m);
	CHECK_NEAR(estimator_core_ratio(e, 2), 2.0 / 96.0, 1e-15);
	struct wb_msg msg = {.kind = WB_ALIGNED};
	struct wb_aligned *a = &msg.aligned;
	snprintf(a->env.host, sizeof(a->env.host), "vm1");
	a->t0 = 1000000000000ull;
	a->t1 = a->t0 + 1000000000ull;
	a->ncpu = 2;
	a->cpu.user_ns = 1000000000;
	a->cpu.idle_ns = 1000000000;
	a->procs = wb_array_new(1, sizeof(*a->procs));
	a->n_procs = 1;
	a->procs[0] = (struct wb_slot_proc){.pid = 42, .comm = "burn", .cpu_ns = 1000000000};
	struct wb_estimate out;
	struct est_result res;
	CHECK(estimator_slot(e, a, &out, &res, err, sizeof(err)) == 0);
	CHECK_U64(out.n_zones, 1);
	/* idle 40 W * 2/96 = 0.8333 W; active 1000 ms/s * 1 / 1000 = 1 W */
	CHECK_U64(out.zones[0].idle_uj, 833333);
	CHECK_U64(out.zones[0].active_uj, 1000000);
	estimator_destroy(&e);
	wb_msg_clear(&msg);
}

static void test_spec_cores_python310(void)
{
	spec_spelling(
	    "{\"processor\": \"intel_xeon_platinum_8259cl\", \"cores\": 96, \"chips\": 2, "
	    "\"memory\": 377, \"frequency\": 3500}");
}

static void test_spec_cores_python311(void)
{
	spec_spelling("{\"NodeAttribute.PROCESSOR\": \"intel_xeon_platinum_8259cl\", "
		      "\"NodeAttribute.CORES\": 96, \"NodeAttribute.CHIPS\": 2, "
		      "\"NodeAttribute.MEMORY\": 377, \"NodeAttribute.FREQ\": 3500}");
}

static void test_spec_cores_float_and_both(void)
{
	/* 96.0 (a float from pandas), and both spellings agreeing (a spec loaded from one
	 * and written with the other) */
	spec_spelling("{\"NodeAttribute.CORES\": 96.0}");
	spec_spelling(
	    "{\"cores\": 96, \"NodeAttribute.CORES\": 96, \"NodeAttribute.CHIPS\": null}");
	/* unknown in one spelling (null), known in the other */
	spec_spelling("{\"cores\": null, \"NodeAttribute.CORES\": 96}");
	/* two spellings that disagree: refused, naming both */
	const char *two =
	    "{\"machine_spec\": {\"cores\": 96, \"NodeAttribute.CORES\": 48}, \"package\": {\"All_Weights\": {\"Numerical_Variables\": {\"bpf_cpu_time_ms\": {\"scale\": 1}}}}}";
	struct model m;
	char err[MODEL_ERR_MAX];
	CHECK(model_parse(two, strlen(two), "s.json", NULL, &m, err, sizeof(err)) == -1);
	CHECK(
	    strstr(
		err,
		"s.json: machine_spec.NodeAttribute.CORES: 48 logical CPUs, but machine_spec.cores says 96") !=
	    NULL);
	const char *bad =
	    "{\"machine_spec\": {\"NodeAttribute.CORES\": 0}, \"package\": {\"All_Weights\": {\"Numerical_Variables\": {\"bpf_cpu_time_ms\": {\"scale\": 1}}}}}";
	CHECK(model_parse(bad, strlen(bad), "s.json", NULL, &m, err, sizeof(err)) == -1);
	CHECK(strstr(err, "s.json: machine_spec.NodeAttribute.CORES: expected 1 to 65536") != NULL);
}

/* A model-mode slot of a host of ncpu CPUs, one process busy for cpu_ms of the 1 s slot. */
static void slot_at(struct wb_msg *msg, uint64_t ncpu, double cpu_ms, uint64_t t0_s)
{
	memset(msg, 0, sizeof(*msg));
	msg->kind = WB_ALIGNED;
	struct wb_aligned *a = &msg->aligned;
	snprintf(a->env.host, sizeof(a->env.host), "vm1");
	a->t0 = t0_s * 1000000000ull;
	a->t1 = a->t0 + 1000000000ull;
	a->ncpu = ncpu;
	a->cpu.user_ns = (uint64_t)(cpu_ms * 1e6);
	a->cpu.idle_ns = ncpu * 1000000000ull - a->cpu.user_ns;
	a->procs = wb_array_new(1, sizeof(*a->procs));
	a->n_procs = 1;
	a->procs[0] = (struct wb_slot_proc){.pid = 42, .comm = "burn", .cpu_ns = a->cpu.user_ns};
}

/*
 * model-db's LogarithmicRegressionTrainer_5 (BPFOnly, the model Kepler's server picks for an
 * 8488C-like VM) has package P(0) = -612.03 W. estimd published P(x) - P(0), 700.80 W at
 * 960 CPU-ms/s; Kepler's estimator answers 88.77 W (clipped at 0). Through estimd's own path,
 * on a 96-CPU host, every slot's package power is Kepler's answer, all of it active.
 */
static void test_negative_idle_logreg5(void)
{
	static const struct {
		double cpu_ms, kepler_w; /* the golden set's answers (p0..p5) */
	} vec[] = {{0, 0.0},
		   {960, 88.7700141109857},
		   {24000, 298.4891444033102},
		   {48000, 343.6499603043626},
		   {72000, 370.0673510972273},
		   {96000, 388.8107900924731}};
	char path[4096], err[MODEL_ERR_MAX];
	const char *root = getenv("WB_ROOT");
	snprintf(
	    path, sizeof(path),
	    "%s/tests/data/kepler-model-db/ec2-0.7.11/rapl-sysfs/AbsPower/BPFOnly/LogarithmicRegressionTrainer_5/weight.json",
	    root && root[0] ? root : ".");
	struct model *m = malloc(sizeof(*m));
	CHECK(model_load_file(path, NULL, m, err, sizeof(err)) == 0);
	CHECK(m->form == MODEL_LOGARITHMIC);
	CHECK(model_check_grid(m, WB_ZONE_MAX_W, err, sizeof(err)) == 0);
	struct est_conf c = {.mode = EST_AUTO, .idle.method = IDLE_RATIO};
	struct estimator *e = estimator_new(&c);
	estimator_set_model(e, m);
	for (size_t i = 0; i < sizeof(vec) / sizeof(vec[0]); i++) {
		struct wb_msg msg;
		struct wb_estimate out;
		struct est_result res;
		slot_at(&msg, 96, vec[i].cpu_ms, 1000 + i);
		CHECK(estimator_slot(e, &msg.aligned, &out, &res, err, sizeof(err)) == 0);
		CHECK_STR(out.zones[0].zone, "package");
		CHECK_U64(out.zones[0].idle_uj, 0);
		CHECK_NEAR((double)out.zones[0].energy_uj / 1e6, vec[i].kepler_w, 1e-6);
		CHECK_U64(res.model_implausible, 0);
		/* dram: the curve at 0 page cache hits, all idle */
		CHECK_STR(out.zones[1].zone, "dram");
		CHECK_NEAR((double)out.zones[1].idle_uj / 1e6, 31.384477124183, 1e-6);
		CHECK_U64(out.zones[1].active_uj, 0);
		wb_msg_clear(&msg);
	}
	estimator_destroy(&e);
}

/* A trainer fed 100 slots of package power p_w(x) at x = x0, x0 + dx, ... CPU-ms/s. */
static void train_package(struct trainer *t, double (*p_w)(double x), double x0, double dx)
{
	struct train_conf tc = {
	    .window = 200, .min_slots = 20, .every = 1000000, .holdout_every = 5};
	CHECK(trainer_init(t, &tc) == 0);
	for (int i = 0; i < 100; i++) {
		double x[FEAT_COUNT] = {0}, y[TRAIN_ZONES] = {-1, -1, -1, -1, -1};
		x[FEAT_CPU_TIME_MS] = x0 + dx * i;
		y[0] = p_w(x[FEAT_CPU_TIME_MS]);
		trainer_add_sample(t, x, y);
	}
}

static double high_load_line(double x)
{
	return -20 + 0.06 * x;
}

static double steep_curve(double x)
{
	return 0.5 * exp(0.0012 * x) + 20;
}

/*
 * An honest fit of slots recorded only at high load (900-1000 CPU-ms/s on one CPU, 34-40 W on
 * a line through -20 W at rest) has a bias of -20 W. estimd published P(x) - P(0) = 60 W at
 * 1000 CPU-ms/s where the model says 40 W; the rule publishes the model's 40 W, all active,
 * and 0 W (not -20) for an idle slot.
 */
static void test_negative_bias_trained(void)
{
	struct trainer t;
	train_package(&t, high_load_line, 900, 1);
	struct model *m = malloc(sizeof(*m));
	char err[MODEL_ERR_MAX];
	CHECK(trainer_fit(&t, "wattbus-high-load", 1, m, err, sizeof(err)) == 0);
	trainer_free(&t);
	double zero[FEAT_COUNT] = {0};
	CHECK_NEAR(model_zone_power_w(m, &m->zones[0], zero), -20, 1e-6);
	struct est_conf c = {.mode = EST_AUTO, .idle.method = IDLE_RATIO};
	struct estimator *e = estimator_new(&c);
	estimator_set_model(e, m);
	struct wb_msg msg;
	struct wb_estimate out;
	struct est_result res;
	slot_at(&msg, 1, 1000, 2000);
	CHECK(estimator_slot(e, &msg.aligned, &out, &res, err, sizeof(err)) == 0);
	CHECK_STR(out.zones[0].zone, "package");
	CHECK_NEAR((double)out.zones[0].energy_uj / 1e6, 40, 1e-5);
	CHECK_U64(out.zones[0].idle_uj, 0);
	wb_msg_clear(&msg);
	slot_at(&msg, 1, 0, 2001);
	CHECK(estimator_slot(e, &msg.aligned, &out, &res, err, sizeof(err)) == 0);
	CHECK_U64(out.zones[0].energy_uj, 0);
	wb_msg_clear(&msg);
	estimator_destroy(&e);
}

/* A fit that is right on the host (4 CPUs) and infinite at 1e6 CPU-ms/s is never handed out. */
static void test_trainer_grid_refusal(void)
{
	struct trainer t;
	train_package(&t, steep_curve, 0, 40);
	struct model m;
	char err[MODEL_ERR_MAX];
	CHECK(trainer_fit_form(&t, MODEL_EXPONENTIAL, "steep", 4, &m, err, sizeof(err)) == -2);
	CHECK(
	    strstr(
		err,
		"model steep: zone package gives inf W at bpf_cpu_time_ms=1e+06: not finite, refused") !=
	    NULL);
	/* the linear fit of the same samples is finite everywhere */
	CHECK(trainer_fit_form(&t, MODEL_LINEAR, "flat", 4, &m, err, sizeof(err)) == 0);
	trainer_free(&t);
	/* Finite but beyond any zone within the features' scales (where it was trained): refused;
	 * a model that only passes the bound far beyond its scales is not (the slot clips it). */
	const char *huge =
	    "{\"model_name\": \"SGDRegressorTrainer_9\", \"package\": {\"All_Weights\": {\"Bias_Weight\": 1e39, \"Numerical_Variables\": {\"bpf_cpu_time_ms\": {\"scale\": 1000, \"weight\": 1}}}}}";
	CHECK(model_parse(huge, strlen(huge), "huge.json", NULL, &m, err, sizeof(err)) == 0);
	CHECK(model_check_grid(&m, WB_ZONE_MAX_W, err, sizeof(err)) == -1);
	CHECK_STR(
	    err,
	    "model SGDRegressorTrainer_9: zone package gives 1e+39 W at zero usage, within its training range: above the zone's bound of 5000 W, refused");
	const char *steep =
	    "{\"model_name\": \"SGDRegressorTrainer_8\", \"package\": {\"All_Weights\": {\"Bias_Weight\": 10, \"Numerical_Variables\": {\"bpf_cpu_time_ms\": {\"scale\": 1000, \"weight\": 1000}}}}}";
	CHECK(model_parse(steep, strlen(steep), "steep.json", NULL, &m, err, sizeof(err)) == 0);
	CHECK(model_check_grid(&m, WB_ZONE_MAX_W, err, sizeof(err)) == 0);
	m.zones[0].feat[0].weight = 6000; /* 6010 W at its scale */
	CHECK(model_check_grid(&m, WB_ZONE_MAX_W, err, sizeof(err)) == -1);
	CHECK(strstr(err, "gives 6010 W at bpf_cpu_time_ms=1000, within its training range") !=
	      NULL);
}

static const struct unit_case cases[] = {
    {"a trainer's fit that is not finite on the grid is refused", test_trainer_grid_refusal},
    {"LogarithmicRegressionTrainer_5 (P(0) = -612 W): Kepler's answer, not P(x) - P(0)",
     test_negative_idle_logreg5},
    {"a trained model with a negative bias: the model's power, not more",
     test_negative_bias_trained},
    {"machine_spec cores as Python <= 3.10 writes it (cores)", test_spec_cores_python310},
    {"machine_spec cores as Python >= 3.11 writes it (NodeAttribute.CORES)",
     test_spec_cores_python311},
    {"machine_spec cores as a float, in both spellings, conflicting",
     test_spec_cores_float_and_both},
    {"shipped model-db weights equal hand computations", test_shipped_weights_by_hand},
    {"model mode slot: core ratio on idle, usage on active", test_model_mode_slot},
    {"curve-fit forms: logarithmic, logistic, exponential", test_curve_forms},
    {"bad model files rejected with file and key", test_bad_files},
    {"Kepler JSON and model message round trips", test_roundtrips},
};

UNIT_MAIN(cases)
