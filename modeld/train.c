/*
 * The offline trainer (POST /train): Kepler's TrainRequest (kepler-model-server,
 * train/offline_trainer.py) turned into training samples the way Kepler's
 * DefaultExtractor does (util/prom_types.py, train/extractor/extractor.py): each
 * counter series differenced over consecutive points and divided by their distance,
 * the features (kepler_container_<feature>_total) summed over workloads, the power
 * (kepler_node_<component>_joules_total of the requested source) summed over modes
 * and packages, per node. The samples go to estimd's own trainer (estimd/train.c, as
 * `wattbus train` and estimd use it), the models are filed by the store's own writer
 * (md_store_put) into a scratch store, and the pipeline folder is zipped by the
 * archive writer modeld serves models with: the answer is the folder Kepler's
 * trainer zips (shutil.make_archive of the pipeline), and importing it serves it.
 */
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "../estimd/estimd.h"
#include "json.h"
#include "log.h"
#include "modeld.h"
#include "spec.h"
#include "train.h"

#define NODES_MAX 256		      /* distinct node_name/instance labels in one request */
#define HOLDOUT_EVERY 5		      /* every 5th interval held out, as `wattbus train` */
#define MIN_TRAIN (HOLDOUT_EVERY - 1) /* Kepler's own test data has 6 intervals in all */
#define SAMPLES_MAX 1000000	      /* intervals kept; the body limit bounds them well below */
#define ZONE_KIND(z) (FEAT_COUNT + (z))

/* Kepler's PowerSourceMap (util/train_types.py): the components an energy source meters. */
static const struct {
	const char *source;
	const char *components[5];
} power_sources[] = {
    {"rapl-sysfs", {"package", "core", "uncore", "dram"}},
    {"rapl-msr", {"package", "core", "uncore", "dram"}},
    {"acpi", {"platform"}},
    {"hmc", {"platform"}},
    {"redfish", {"platform"}},
    {"trained_power_model", {"package", "core", "uncore", "dram"}},
};
#define NSOURCES (sizeof power_sources / sizeof power_sources[0])

/* Kepler's isolators (train/isolator/isolator.py) and how wattbus takes the idle power out. */
enum isolator { ISO_MIN, ISO_NONE, ISO_PROFILE };

/* One counter's rate over one interval of one series. */
struct contrib {
	uint32_t node;
	int kind; /* enum feat_id, or ZONE_KIND(zone) */
	bool reset;
	double t0, t1, rate;
};

struct conv {
	const char *field; /* "prom_response", "trainer.idle_prom_response" */
	const char *source;
	char (*nodes)[64];
	size_t nnodes;
	uint32_t (*zone_series)[TRAIN_ZONES]; /* per node: the series a zone's sum needs */
	struct contrib *c;
	size_t n, cap;
	bool zone_asked[TRAIN_ZONES];
};

struct sample {
	double x[FEAT_COUNT], y[TRAIN_ZONES];
};

static int node_of(struct conv *cv, const json_t *labels, char *err, size_t errlen)
{
	/* exportd serves several hosts with node_name; Kepler's own series have instance */
	const char *name = wb_json_str(labels, "node_name");
	if (!name[0])
		name = wb_json_str(labels, "instance");
	for (size_t i = 0; i < cv->nnodes; i++)
		if (!strncmp(cv->nodes[i], name, 63))
			return (int)i;
	if (cv->nnodes == NODES_MAX) {
		snprintf(err, errlen, "%s: series of more than %d nodes", cv->field, NODES_MAX);
		return -1;
	}
	snprintf(cv->nodes[cv->nnodes], 64, "%s", name);
	memset(cv->zone_series[cv->nnodes], 0, sizeof cv->zone_series[0]);
	return (int)cv->nnodes++;
}

static int push(struct conv *cv, const struct contrib *c, char *err, size_t errlen)
{
	if (cv->n == cv->cap) {
		size_t cap = cv->cap ? cv->cap * 2 : 1024;
		struct contrib *v = realloc(cv->c, cap * sizeof *v);
		if (!v) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		cv->c = v;
		cv->cap = cap;
	}
	cv->c[cv->n++] = *c;
	return 0;
}

/* A sample value: Prometheus sends it as a string ("NaN" included), a client may send a number. */
static bool value_of(const json_t *v, double *out)
{
	if (json_is_number(v)) {
		*out = json_number_value(v);
		return true;
	}
	if (!json_is_string(v))
		return false;
	char *end;
	errno = 0;
	*out = strtod(json_string_value(v), &end);
	return end != json_string_value(v) && !*end && errno != ERANGE;
}

/* The rates of every series of one query (Kepler's matrix result: [{metric, values}]). A query
 * that is not there adds nothing. 0, or -1 with err naming the element. */
static int add_query(struct conv *cv, const json_t *resp, const char *query, int kind, char *err,
		     size_t errlen)
{
	const json_t *list = json_object_get(resp, query);
	if (!list)
		return 0;
	if (!json_is_array(list)) {
		snprintf(err, errlen, "%s.%s: not a list of series ({metric, values})", cv->field,
			 query);
		return -1;
	}
	size_t i;
	const json_t *s;
	json_array_foreach(list, i, s)
	{
		const json_t *labels = json_object_get(s, "metric"),
			     *values = json_object_get(s, "values");
		if (!json_is_object(labels) || !json_is_array(values)) {
			snprintf(
			    err, errlen,
			    "%s.%s[%zu]: not a series (an object with metric {labels} and values [[time, \"value\"], ...])",
			    cv->field, query, i);
			return -1;
		}
		if (kind >= FEAT_COUNT && strcmp(wb_json_str(labels, "source"), cv->source))
			continue; /* another meter's (Kepler filters on source too) */
		int node = node_of(cv, labels, err, errlen);
		if (node < 0)
			return -1;
		if (kind >= FEAT_COUNT)
			cv->zone_series[node][kind - FEAT_COUNT]++;
		double pt = NAN, pv = NAN;
		size_t k;
		const json_t *p;
		json_array_foreach(values, k, p)
		{
			double t, v;
			if (!json_is_array(p) || json_array_size(p) != 2 ||
			    !json_is_number(json_array_get(p, 0)) ||
			    !value_of(json_array_get(p, 1), &v)) {
				snprintf(err, errlen,
					 "%s.%s[%zu].values[%zu]: not a [time, \"value\"] pair",
					 cv->field, query, i, k);
				return -1;
			}
			t = json_number_value(json_array_get(p, 0));
			if (!(t > pt) && !isnan(pt)) {
				snprintf(err, errlen,
					 "%s.%s[%zu].values[%zu]: time %.3f does not follow %.3f",
					 cv->field, query, i, k, t, pt);
				return -1;
			}
			if (isfinite(v) && isfinite(pv)) {
				struct contrib c = {.node = (uint32_t)node,
						    .kind = kind,
						    .reset = v < pv,
						    .t0 = pt,
						    .t1 = t,
						    .rate = (v - pv) / (t - pt)};
				if (push(cv, &c, err, errlen) < 0)
					return -1;
			}
			pt = t;
			pv = v;
		}
	}
	return 0;
}

static int cmp_contrib(const void *a, const void *b)
{
	const struct contrib *x = a, *y = b;
	if (x->node != y->node)
		return x->node < y->node ? -1 : 1;
	if (x->t0 != y->t0)
		return x->t0 < y->t0 ? -1 : 1;
	if (x->t1 != y->t1)
		return x->t1 < y->t1 ? -1 : 1;
	return 0;
}

/*
 * The samples of one Prometheus response: one per node and interval [t0, t1] that has the
 * CPU time and the power of a zone. A zone's power needs every one of the node's series of
 * it (each mode, each package) over that interval; a counter that went down (a restart)
 * leaves the interval out. *out malloc'd. 0, or -1 with err.
 */
static int samples_of(const json_t *resp, const char *field, const char *source, size_t si,
		      struct sample **out, size_t *nout, char *err, size_t errlen)
{
	struct conv cv = {.field = field, .source = source};
	int rc = -1;
	*out = NULL;
	*nout = 0;
	cv.nodes = calloc(NODES_MAX, sizeof *cv.nodes);
	cv.zone_series = calloc(NODES_MAX, sizeof *cv.zone_series);
	if (!cv.nodes || !cv.zone_series) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	for (int f = 0; f < FEAT_COUNT; f++) {
		char q[128];
		/* Kepler's trainer reads the containers' counters; the processes' when those
		 * are all there is */
		snprintf(q, sizeof q, "kepler_container_%s_total", feat_name(f));
		if (!json_object_get(resp, q))
			snprintf(q, sizeof q, "kepler_process_%s_total", feat_name(f));
		if (add_query(&cv, resp, q, f, err, errlen) < 0)
			goto out;
	}
	for (size_t c = 0; c < 5 && power_sources[si].components[c]; c++) {
		char q[128];
		int z = train_zone_index(power_sources[si].components[c]);
		snprintf(q, sizeof q, "kepler_node_%s_joules_total",
			 power_sources[si].components[c]);
		cv.zone_asked[z] = true;
		if (add_query(&cv, resp, q, ZONE_KIND(z), err, errlen) < 0)
			goto out;
	}
	qsort(cv.c, cv.n, sizeof *cv.c, cmp_contrib);
	struct sample *smp = NULL;
	size_t ns = 0, cap = 0;
	for (size_t i = 0; i < cv.n;) {
		size_t j = i;
		struct sample s;
		memset(&s, 0, sizeof s);
		uint32_t count[TRAIN_ZONES] = {0};
		bool reset = false, zreset[TRAIN_ZONES] = {false}, cpu = false;
		for (; j < cv.n && !cmp_contrib(&cv.c[i], &cv.c[j]); j++) {
			const struct contrib *c = &cv.c[j];
			if (c->kind < FEAT_COUNT) {
				s.x[c->kind] += c->rate;
				reset |= c->reset;
				cpu |= c->kind == FEAT_CPU_TIME_MS;
			} else {
				int z = c->kind - FEAT_COUNT;
				s.y[z] += c->rate;
				count[z]++;
				zreset[z] |= c->reset;
			}
		}
		bool any = false;
		for (int z = 0; z < TRAIN_ZONES; z++) {
			if (!count[z] || count[z] != cv.zone_series[cv.c[i].node][z] || zreset[z])
				s.y[z] = -1;
			any |= s.y[z] >= 0;
		}
		i = j;
		if (!cpu || reset || !any || ns == SAMPLES_MAX)
			continue;
		if (ns == cap) {
			cap = cap ? cap * 2 : 256;
			struct sample *v = realloc(smp, cap * sizeof *v);
			if (!v) {
				free(smp);
				snprintf(err, errlen, "out of memory");
				goto out;
			}
			smp = v;
		}
		smp[ns++] = s;
	}
	*out = smp;
	*nout = ns;
	rc = 0;
out:
	free(cv.c);
	free(cv.nodes);
	free(cv.zone_series);
	return rc;
}

/* ---- the request ---- */
struct treq {
	const char *name, *source;
	size_t si;
	const json_t *prom, *idle;
	enum isolator iso;
	bool abs, dyn;
	char skipped[256];
};

#define WATTBUS_TRAINER "SGDRegressorTrainer"

/* A trainer list: whether it names the one wattbus trains; the others go to skipped. */
static int trainers(const json_t *req, const char *key, bool *wanted, char *skipped, size_t skiplen,
		    char *err, size_t errlen)
{
	const json_t *list = json_object_get(req, key);
	*wanted = false;
	if (!list || json_is_null(list))
		return 0;
	if (!json_is_array(list)) {
		snprintf(err, errlen, "trainer.%s: not a list of trainer names", key);
		return -1;
	}
	size_t i;
	const json_t *v;
	json_array_foreach(list, i, v)
	{
		if (!json_is_string(v)) {
			snprintf(err, errlen, "trainer.%s[%zu]: not a trainer name", key, i);
			return -1;
		}
		if (!strcmp(json_string_value(v), WATTBUS_TRAINER)) {
			*wanted = true;
		} else if (!strstr(skipped, json_string_value(v))) {
			size_t l = strlen(skipped);
			snprintf(skipped + l, skiplen - l, "%s%.64s", l ? "," : "",
				 json_string_value(v));
		}
	}
	if (json_array_size(list) && !*wanted) {
		char shown[128];
		snprintf(shown, sizeof shown, "%s", json_string_value(json_array_get(list, 0)));
		md_one_line(shown);
		snprintf(
		    err, errlen,
		    "trainer.%s: none of its trainers is one wattbus trains (\"%s\"...; wattbus trains %s, estimd's least squares)",
		    key, shown, WATTBUS_TRAINER);
		return -1;
	}
	return 0;
}

static bool folder_name(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > 63 || s[0] == '.')
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '_' || *s == '-' || *s == '.'))
			return false;
	return true;
}

static int parse(const json_t *root, struct treq *r, char *err, size_t errlen)
{
	memset(r, 0, sizeof *r);
	if (!json_is_object(root)) {
		snprintf(err, errlen, "the body is not a JSON object (Kepler's TrainRequest)");
		return -1;
	}
	const json_t *v = json_object_get(root, "name");
	if (!json_is_string(v) || !folder_name(json_string_value(v))) {
		snprintf(
		    err, errlen,
		    "name: the pipeline's name is needed, 1 to 63 of [A-Za-z0-9._-], not starting with a dot");
		return -1;
	}
	r->name = json_string_value(v);
	v = json_object_get(root, "energy_source");
	r->si = NSOURCES;
	for (size_t i = 0; json_is_string(v) && i < NSOURCES; i++)
		if (!strcmp(json_string_value(v), power_sources[i].source))
			r->si = i;
	if (r->si == NSOURCES) {
		snprintf(
		    err, errlen,
		    "energy_source: one of Kepler's PowerSourceMap is needed (rapl-sysfs, rapl-msr, acpi, hmc, redfish, trained_power_model)");
		return -1;
	}
	r->source = power_sources[r->si].source;
	if (json_is_true(json_object_get(root, "use_vm_metrics"))) {
		snprintf(err, errlen,
			 "use_vm_metrics: true is not supported (wattbus trains on node power)");
		return -1;
	}
	const json_t *prom = json_object_get(root, "prom_response"),
		     *prome = json_object_get(root, "prome_response");
	if (prom && prome) {
		snprintf(
		    err, errlen,
		    "prom_response: given twice (also as prome_response, the seed's spelling)");
		return -1;
	}
	r->prom = prom ? prom : prome;
	if (!json_is_object(r->prom)) {
		snprintf(
		    err, errlen,
		    "prom_response: an object of query name -> Prometheus matrix result ([{metric, values}]) is needed");
		return -1;
	}
	const json_t *t = json_object_get(root, "trainer");
	if (!json_is_object(t)) {
		snprintf(
		    err, errlen,
		    "trainer: an object is needed ({abs_trainers, dyn_trainers, idle_prom_response, isolator, isolator_args})");
		return -1;
	}
	if (trainers(t, "abs_trainers", &r->abs, r->skipped, sizeof r->skipped, err, errlen) < 0 ||
	    trainers(t, "dyn_trainers", &r->dyn, r->skipped, sizeof r->skipped, err, errlen) < 0)
		return -1;
	if (!r->abs && !r->dyn) {
		snprintf(
		    err, errlen,
		    "trainer.abs_trainers: both it and dyn_trainers are empty: nothing to train");
		return -1;
	}
	r->idle = json_object_get(t, "idle_prom_response");
	if (json_is_null(r->idle))
		r->idle = NULL;
	if (r->idle && !json_is_object(r->idle)) {
		snprintf(err, errlen,
			 "trainer.idle_prom_response: an object like prom_response is needed");
		return -1;
	}
	const json_t *args = json_object_get(t, "isolator_args");
	if (args && !json_is_null(args) && !json_is_object(args)) {
		snprintf(err, errlen, "trainer.isolator_args: an object is needed");
		return -1;
	}
	v = json_object_get(t, "isolator");
	const char *iso = json_is_string(v) ? json_string_value(v) : "";
	if (v && !json_is_null(v) && !json_is_string(v)) {
		snprintf(err, errlen, "trainer.isolator: an isolator's name is needed");
		return -1;
	}
	if (!iso[0] || !strcmp(iso, "MinIdleIsolator")) {
		r->iso = ISO_MIN;
	} else if (!strcmp(iso, "NoneIsolator")) {
		r->iso = ISO_NONE;
	} else if (!strcmp(iso, "ProfileBackgroundIsolator") || !strcmp(iso, "TrainIsolator")) {
		r->iso = ISO_PROFILE;
		if (r->dyn && !r->idle) {
			snprintf(err, errlen,
				 "trainer.idle_prom_response: %s needs the idle state's response",
				 iso);
			return -1;
		}
	} else {
		char shown[64];
		snprintf(shown, sizeof shown, "%s", iso);
		md_one_line(shown);
		snprintf(
		    err, errlen,
		    "trainer.isolator: \"%s\" is not one of MinIdleIsolator, NoneIsolator, ProfileBackgroundIsolator, TrainIsolator",
		    shown);
		return -1;
	}
	return 0;
}

/* The machine spec of the node type: kepler_node_node_info's labels (exportd's 0.9 profile
 * serves the machine's; Kepler's value is the node type). Several machines: refused. */
static int spec_of(const json_t *prom, struct wb_model_spec *spec, char *err, size_t errlen)
{
	memset(spec, 0, sizeof *spec);
	const json_t *list = json_object_get(prom, "kepler_node_node_info");
	size_t i;
	const json_t *s;
	bool seen = false;
	json_array_foreach(list, i, s)
	{
		const json_t *l = json_object_get(s, "metric");
		struct wb_model_spec one = {0};
		wb_processor_name(wb_json_str(l, "processor"), one.processor, sizeof one.processor);
		one.cores = strtoull(wb_json_str(l, "cores"), NULL, 10);
		one.chips = strtoull(wb_json_str(l, "chips"), NULL, 10);
		if (seen && (strcmp(one.processor, spec->processor) || one.cores != spec->cores ||
			     one.chips != spec->chips)) {
			snprintf(
			    err, errlen,
			    "prom_response.kepler_node_node_info[%zu]: a second machine spec (%s, %llu cores): train one node type per request",
			    i, one.processor, (unsigned long long)one.cores);
			return -1;
		}
		*spec = one;
		seen = true;
	}
	return 0;
}

/* Mean power per zone of the idle response (ProfileBackgroundIsolator's profile), or the lowest
 * of the training samples (MinIdleIsolator); 0 for NoneIsolator. */
static int idle_power(const struct treq *r, const struct sample *smp, size_t n,
		      double idle[TRAIN_ZONES], char *err, size_t errlen)
{
	for (int z = 0; z < TRAIN_ZONES; z++)
		idle[z] = r->iso == ISO_MIN ? INFINITY : 0;
	if (r->iso == ISO_MIN) {
		for (size_t i = 0; i < n; i++)
			for (int z = 0; z < TRAIN_ZONES; z++)
				if (smp[i].y[z] >= 0 && smp[i].y[z] < idle[z])
					idle[z] = smp[i].y[z];
		for (int z = 0; z < TRAIN_ZONES; z++)
			if (isinf(idle[z]))
				idle[z] = 0;
		return 0;
	}
	if (r->iso == ISO_NONE)
		return 0;
	struct sample *is;
	size_t ni;
	if (samples_of(r->idle, "trainer.idle_prom_response", r->source, r->si, &is, &ni, err,
		       errlen) < 0)
		return -1;
	for (int z = 0; z < TRAIN_ZONES; z++) {
		size_t k = 0;
		bool needed = false;
		for (size_t i = 0; i < n && !needed; i++)
			needed = smp[i].y[z] >= 0;
		for (size_t i = 0; i < ni; i++)
			if (is[i].y[z] >= 0) {
				idle[z] += is[i].y[z];
				k++;
			}
		if (needed && !k) {
			free(is);
			snprintf(
			    err, errlen,
			    "trainer.idle_prom_response: no interval of kepler_node_%s_joules_total with source=\"%s\" and the CPU time",
			    train_zone_name(z), r->source);
			return -1;
		}
		if (k)
			idle[z] /= (double)k;
	}
	free(is);
	return 0;
}

/* Train one output type and file it in the store as host's. Its held-out MAE, or -1 with err. */
static double train_one(struct md_store *st, const struct sample *smp, size_t n, const double *idle,
			const struct wb_model_spec *spec, const char *host, uint64_t now_ns,
			char *err, size_t errlen)
{
	struct trainer t;
	struct train_conf tc = {.window = n < 4 ? 4 : n,
				.min_slots = MIN_TRAIN,
				.every = SIZE_MAX,
				.holdout_every = HOLDOUT_EVERY};
	if (trainer_init(&t, &tc) < 0) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		double y[TRAIN_ZONES];
		for (int z = 0; z < TRAIN_ZONES; z++)
			y[z] = smp[i].y[z] < 0 ? -1
			       : idle	       ? fmax(0, smp[i].y[z] - idle[z])
					       : smp[i].y[z];
		trainer_add_sample(&t, smp[i].x, y);
	}
	struct model m;
	char why[MODEL_ERR_MAX];
	int rc = trainer_fit(&t, WATTBUS_TRAINER, spec->cores, &m, why, sizeof why);
	trainer_free(&t);
	if (rc < 0) {
		snprintf(err, errlen, "prom_response: %s (%zu usable intervals)", why, n);
		return -1;
	}
	m.output = idle ? MODEL_DYN : MODEL_ABS;
	struct wb_msg msg = {.kind = WB_MODEL};
	if (model_to_msg(&m, &msg.model, why, sizeof why) < 0) {
		snprintf(err, errlen, "%s", why);
		return -1;
	}
	msg.model.spec = *spec;
	snprintf(msg.model.env.host, sizeof msg.model.env.host, "%s", host);
	msg.model.t = now_ns;
	const struct md_model *filed;
	enum md_put_result put = md_store_put(st, &msg.model, now_ns, &filed, why, sizeof why);
	double mae = msg.model.mae;
	wb_msg_clear(&msg);
	/* kept: the store holds a better model of another trainer (the bus's replacement rule) */
	if (put != MD_PUT_NEW && put != MD_PUT_REPLACED && put != MD_PUT_KEPT) {
		snprintf(err, errlen, "filing the model: %s", why);
		return -1;
	}
	return mae;
}

static int unlink_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	return remove(path) < 0 && errno != ENOENT ? -1 : 0;
}

/* Kepler's pipeline metadata.json keys beside the store's (name, publisher). */
static int pipeline_meta(const char *dir, const struct treq *r, const json_t *root, char *err,
			 size_t errlen)
{
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/metadata.json", dir);
	json_t *meta = wb_json_load(path, 0, err, errlen);
	if (!meta)
		return -1;
	const json_t *t = json_object_get(root, "trainer");
	const json_t *iso = json_object_get(t, "isolator");
	json_object_set_new(meta, "abs_trainers", json_pack("[s]", WATTBUS_TRAINER));
	json_object_set_new(meta, "dyn_trainers",
			    r->dyn ? json_pack("[s]", WATTBUS_TRAINER) : json_array());
	json_object_set_new(meta, "isolator",
			    json_string(json_is_string(iso) && json_string_value(iso)[0]
					    ? json_string_value(iso)
					    : "MinIdleIsolator"));
	json_object_set_new(meta, "energy_sources", json_pack("[s]", r->source));
	json_object_set_new(meta, "trainer", json_string("wattbus-modeld /train"));
	if (!r->abs)
		json_object_set_new(meta, "abs_trainers", json_array());
	if (r->skipped[0])
		json_object_set_new(meta, "skipped_trainers", json_string(r->skipped));
	int rc = wb_json_save(meta, path, true, err, errlen);
	json_decref(meta);
	return rc;
}

int md_train(const char *body, size_t len, const char *workdir, struct md_train_result *res,
	     char *err, size_t errlen)
{
	memset(res, 0, sizeof *res);
	res->abs_mae_w = res->dyn_mae_w = -1;
	json_error_t jerr;
	json_t *root = json_loadb(body, len, 0, &jerr);
	if (!root) {
		snprintf(err, errlen, "the body is not JSON: line %d: %s", jerr.line, jerr.text);
		return 400;
	}
	struct treq r;
	struct sample *smp = NULL;
	size_t n = 0;
	struct wb_model_spec spec;
	double idle[TRAIN_ZONES];
	struct md_store *st = NULL;
	char tmp[PATH_MAX] = "";
	int status = 400;
	if (parse(root, &r, err, errlen) < 0 || spec_of(r.prom, &spec, err, errlen) < 0 ||
	    samples_of(r.prom, "prom_response", r.source, r.si, &smp, &n, err, errlen) < 0)
		goto out;
	if (n == 0) {
		snprintf(
		    err, errlen,
		    "prom_response: no interval with kepler_container_bpf_cpu_time_ms_total and a kepler_node_<component>_joules_total of source=\"%s\" (%s's components)",
		    r.source, r.source);
		goto out;
	}
	if (n < HOLDOUT_EVERY) {
		snprintf(
		    err, errlen,
		    "prom_response: %zu usable intervals, %d needed (%d to train on, 1 held out to measure the error)",
		    n, HOLDOUT_EVERY, HOLDOUT_EVERY - 1);
		goto out;
	}
	res->intervals = n;
	snprintf(res->name, sizeof res->name, "%s", r.name);
	snprintf(res->skipped, sizeof res->skipped, "%s", r.skipped);
	if (r.dyn && idle_power(&r, smp, n, idle, err, errlen) < 0)
		goto out;
	status = 500;
	if (snprintf(tmp, sizeof tmp, "%s/.train-XXXXXX", workdir) >= (int)sizeof tmp ||
	    !mkdtemp(tmp)) {
		snprintf(err, errlen, "%s: cannot make a scratch folder: %s", workdir,
			 strerror(errno));
		tmp[0] = '\0';
		goto out;
	}
	if (!(st = md_store_new(tmp, r.name, r.source)) || md_store_load(st, err, errlen) < 0)
		goto out;
	status = 400;
	if (r.abs && (res->abs_mae_w = train_one(st, smp, n, NULL, &spec, "offline-trainer", 0, err,
						 errlen)) < 0)
		goto out;
	if (r.dyn && (res->dyn_mae_w = train_one(st, smp, n, idle, &spec, "offline-trainer", 0, err,
						 errlen)) < 0)
		goto out;
	status = 500;
	struct md_pipeline *p = md_store_pipeline(st, r.name);
	if (!p) {
		snprintf(err, errlen, "the pipeline %s was not written", r.name);
		goto out;
	}
	if (pipeline_meta(p->dir, &r, root, err, errlen) < 0)
		goto out;
	/* the archive writer modeld answers weight=false with, given the whole folder */
	struct md_model folder = {.dir = p->dir};
	if (md_model_zip(&folder, &res->zip, &res->len, err, errlen) < 0)
		goto out;
	status = 0;
out:
	md_store_destroy(&st);
	if (tmp[0] && nftw(tmp, unlink_cb, 16, FTW_DEPTH | FTW_PHYS) < 0)
		log_warnx("%s: cannot remove the scratch folder: %s", tmp, strerror(errno));
	free(smp);
	json_decref(root);
	if (status)
		md_one_line(err);
	return status;
}

int md_train_into(struct md_store *st, const json_t *prom, const char *host, uint64_t now_ns,
		  struct md_train_result *res, char *err, size_t errlen)
{
	memset(res, 0, sizeof *res);
	res->abs_mae_w = res->dyn_mae_w = -1;
	struct treq r = {
	    .name = st->pipeline, .prom = prom, .iso = ISO_MIN, .abs = true, .dyn = true};
	r.si = NSOURCES;
	for (size_t i = 0; i < NSOURCES; i++)
		if (!strcmp(st->source, power_sources[i].source))
			r.si = i;
	if (r.si == NSOURCES) {
		snprintf(err, errlen, "source %s is not one of Kepler's PowerSourceMap",
			 st->source);
		return -1;
	}
	r.source = power_sources[r.si].source;
	struct sample *smp = NULL;
	size_t n = 0;
	struct wb_model_spec spec;
	double idle[TRAIN_ZONES];
	int rc = -1;
	if (spec_of(prom, &spec, err, errlen) < 0 ||
	    samples_of(prom, "prometheus", r.source, r.si, &smp, &n, err, errlen) < 0)
		goto out;
	if (n < HOLDOUT_EVERY) {
		snprintf(
		    err, errlen,
		    "%zu usable intervals of kepler_container_bpf_cpu_time_ms_total and kepler_node_<component>_joules_total{source=\"%s\"}, %d needed",
		    n, r.source, HOLDOUT_EVERY);
		goto out;
	}
	res->intervals = n;
	snprintf(res->name, sizeof res->name, "%s", st->pipeline);
	if (idle_power(&r, smp, n, idle, err, errlen) < 0 ||
	    (res->abs_mae_w = train_one(st, smp, n, NULL, &spec, host, now_ns, err, errlen)) < 0 ||
	    (res->dyn_mae_w = train_one(st, smp, n, idle, &spec, host, now_ns, err, errlen)) < 0)
		goto out;
	rc = 0;
out:
	free(smp);
	return rc;
}
