/*
 * estimd against Kepler's real estimator: every weight.json model of model-db's
 * ec2-0.7.11 on the 8 vectors Kepler's estimator answered (tests/data/
 * kepler-estimator-golden, reduced by tools/kepler_golden.py), each zone's node
 * power by estimd's own path (model file read, grid check, model_zone_split) held
 * to Kepler's answer clipped at 0 within 0.5 % or 0.05 W. Two decisions, shown in
 * docs/estimd.md: a curve fit reads the feature kepler-model-server's trainer fitted
 * it on (where Kepler's estimator reads another, the test holds estimd to the curve
 * on the trainer's feature and lists how far that is from Kepler's answer), and a
 * model whose curve overflows is refused by the grid check, never evaluated.
 */
#include <math.h>

#include <jansson.h>

#include "../../estimd/estimd.h"
#include "unit.h"

#define GOLDEN "tests/data/kepler-estimator-golden/ec2-0.7.11.jsonl"
#define MODELS "tests/data/kepler-model-db/ec2-0.7.11"
#define TOL_W 0.05
#define TOL_REL 0.005

static const char *root(void)
{
	const char *r = getenv("WB_ROOT");
	return r && r[0] ? r : ".";
}

/* A value of the reduced file: a number, or "Infinity", "-Infinity", "NaN". */
static double value(const json_t *v)
{
	if (json_is_number(v))
		return json_number_value(v);
	const char *s = json_string_value(v);
	if (s && strcmp(s, "Infinity") == 0)
		return INFINITY;
	if (s && strcmp(s, "-Infinity") == 0)
		return -INFINITY;
	return NAN;
}

static double clip0(double w)
{
	return w > 0 ? w : 0;
}

static bool overflows(double w)
{
	return !isfinite(w) || fabs(w) > WB_ZONE_MAX_W;
}

struct tally {
	size_t models, refused, compared, matched, decisions, decisions_differ;
	double max_dev_w, max_dev_rel;
};

static void compare(const char *what, double got, double want, struct tally *t)
{
	double dev = fabs(got - want);
	double tol = TOL_REL * fabs(want) > TOL_W ? TOL_REL * fabs(want) : TOL_W;
	t->compared++;
	if (dev > t->max_dev_w)
		t->max_dev_w = dev;
	if (want != 0 && dev / fabs(want) > t->max_dev_rel)
		t->max_dev_rel = dev / fabs(want);
	if (dev <= tol) {
		t->matched++;
		return;
	}
	printf("#   %s: estimd %.9g W, expected %.9g W\n", what, got, want);
	CHECK(dev <= tol);
}

/* The records of one model: lines [from, to) of the golden set. */
static void check_model(json_t *recs, size_t from, size_t to, struct tally *t)
{
	const json_t *r0 = json_array_get(recs, from);
	const char *name = json_string_value(json_object_get(r0, "model"));
	char path[4096], err[MODEL_ERR_MAX];
	snprintf(path, sizeof(path), "%s/%s/%s", root(), MODELS,
		 json_string_value(json_object_get(r0, "weight_json")));
	struct model m;
	/* No hint: model-db's folder names the trainer, its path the output type. */
	if (model_load_file(path, NULL, &m, err, sizeof(err)) < 0) {
		printf("#   %s: %s\n", name, err);
		CHECK(0);
		return;
	}
	t->models++;
	CHECK(strcmp(model_output_name(m.output),
		     json_string_value(json_object_get(r0, "output_type"))) == 0);
	/* Overflow: the power the trainer's curve gives (or a linear model's answer) is not
	 * finite or beyond any zone's bound on some vector. */
	bool overflow = false;
	for (size_t i = from; i < to; i++) {
		const json_t *r = json_array_get(recs, i);
		const json_t *raw = json_object_get(r, "trainer_raw");
		const json_t *src = raw ? raw : json_object_get(r, "kepler");
		const char *zone;
		const json_t *pair;
		json_object_foreach((json_t *)src, zone, pair)
		{
			overflow |= overflows(value(json_array_get(pair, 0))) ||
				    overflows(value(json_array_get(pair, 1)));
		}
	}
	if (model_check_grid(&m, WB_ZONE_MAX_W, err, sizeof(err)) < 0) {
		t->refused++;
		printf("# refused: %s: %s\n", name, err);
		CHECK(overflow);
		return;
	}
	if (overflow)
		printf("#   %s overflows on the golden vectors but passed the grid check\n", name);
	CHECK(!overflow);
	for (size_t i = from; i < to; i++) {
		const json_t *r = json_array_get(recs, i);
		const char *vec = json_string_value(json_object_get(r, "vector_id"));
		const json_t *feats = json_object_get(r, "features");
		const json_t *kfeat = json_object_get(r, "kepler_feature");
		const json_t *tfeat = json_object_get(r, "trainer_feature");
		const json_t *raw = json_object_get(r, "trainer_raw");
		const char *zone;
		const json_t *pair;
		json_object_foreach(json_object_get(r, "kepler"), zone, pair)
		{
			double want = value(json_array_get(pair, 0)),
			       want0 = value(json_array_get(pair, 1));
			bool decision =
			    kfeat && strcmp(json_string_value(json_object_get(kfeat, zone)),
					    json_string_value(json_object_get(tfeat, zone))) != 0;
			if (decision) {
				/* the curve on the trainer's feature, clipped at 0 as Kepler clips
				 */
				const json_t *rp = json_object_get(raw, zone);
				double kep = want;
				want = clip0(value(json_array_get(rp, 0)));
				want0 = clip0(value(json_array_get(rp, 1)));
				t->decisions++;
				double d = fabs(want - kep);
				if (d > (TOL_REL * kep > TOL_W ? TOL_REL * kep : TOL_W)) {
					t->decisions_differ++;
					printf(
					    "# decision: %s %s %s: %.3f W on %s, Kepler's estimator %.3f W on %s\n",
					    name, zone, vec, want,
					    json_string_value(json_object_get(tfeat, zone)), kep,
					    json_string_value(json_object_get(kfeat, zone)));
				}
			}
			struct wb_zone_power zp = {0};
			int zi = model_find_zone(&m, zone);
			if (zi >= 0 && model_zone_active(&m, &m.zones[zi])) {
				const struct model_zone *z = &m.zones[zi];
				double v[MODEL_FEATS_MAX];
				for (size_t f = 0; f < z->nfeat; f++) {
					const json_t *x = json_object_get(feats, z->feat[f].name);
					CHECK(x != NULL);
					v[f] = x ? json_number_value(x) : 0;
				}
				model_zone_split(&m, z, v, 1.0, WB_ZONE_MAX_W, &zp);
			}
			char what[512];
			snprintf(what, sizeof(what), "%s %s %s", name, zone, vec);
			compare(what, zp.node_w, want, t);
			CHECK(zp.node_w >= 0 && zp.node_w <= WB_ZONE_MAX_W);
			if (m.output == MODEL_ABS) {
				/* idle: P(0) clipped, at most the node power */
				snprintf(what, sizeof(what), "%s %s %s idle", name, zone, vec);
				compare(what, zp.idle_w, want0 < want ? want0 : want, t);
			}
		}
	}
}

static void test_golden(void)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", root(), GOLDEN);
	FILE *f = fopen(path, "r");
	CHECK(f != NULL);
	if (!f)
		return;
	json_t *recs = json_array();
	char *line = NULL;
	size_t cap = 0;
	while (getline(&line, &cap, f) > 0) {
		json_error_t je;
		json_t *r = json_loads(line, 0, &je);
		CHECK(r != NULL);
		if (r)
			json_array_append_new(recs, r);
	}
	free(line);
	fclose(f);
	CHECK_U64(json_array_size(recs), 78 * 8);
	struct tally t = {0};
	size_t from = 0;
	for (size_t i = 1; i <= json_array_size(recs); i++) {
		const char *a =
		    json_string_value(json_object_get(json_array_get(recs, from), "model"));
		const json_t *ri = json_array_get(recs, i);
		if (ri && strcmp(a, json_string_value(json_object_get(ri, "model"))) == 0)
			continue;
		check_model(recs, from, i, &t);
		from = i;
	}
	printf(
	    "# golden: %zu models read, %zu refused by the grid check; %zu node and idle powers compared, %zu within 0.5 %% or 0.05 W, largest deviation %.3g W (%.3g relative); %zu zone-vectors on the trainer's feature, %zu of them away from Kepler's answer\n",
	    t.models, t.refused, t.compared, t.matched, t.max_dev_w, t.max_dev_rel, t.decisions,
	    t.decisions_differ);
	CHECK_U64(t.models, 78);
	CHECK_U64(t.matched, t.compared);
	/* the overflowing exponential fits: BPFOnly _0/_4/_5, BPFIRQ _1/_4/_5 (dram on page cache
	 * hits) */
	CHECK_U64(t.refused, 6);
	json_decref(recs);
}

static const struct unit_case cases[] = {
    {"every model-db ec2-0.7.11 weight.json model against Kepler's estimator", test_golden},
};
UNIT_MAIN(cases)
