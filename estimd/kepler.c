/*
 * Kepler's model server and estimator sidecar, from the client side: the
 * ModelRequest estimd posts to a model server, and the PowerRequest and its
 * answer exchanged with the general estimator (one JSON object each way, no
 * length prefix: the server reads until the text ends with '}', the client
 * reads at most 4096 bytes). Pure: sidecar.c does the socket exchange.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "estimd.h"

static void km_add(struct kepler_metrics *km, const char *name, int id)
{
	if (km->n < KEPLER_METRICS_MAX) {
		km->name[km->n] = name;
		km->id[km->n] = id;
		km->n++;
	}
}

void kepler_metrics_from(const char (*counters)[16], size_t ncounters, struct kepler_metrics *km)
{
	static const struct {
		const char *counter, *feature;
		int id;
	} map[] = {
	    {"cycles", "cpu_cycles", FEAT_CPU_CYCLES},
	    {"instructions", "cpu_instructions", FEAT_CPU_INSTRUCTIONS},
	    {"cache_misses", "cache_miss", FEAT_CACHE_MISS},
	};
	memset(km, 0, sizeof(*km));
	km_add(km, "bpf_cpu_time_ms", FEAT_CPU_TIME_MS);
	km_add(km, "bpf_page_cache_hit", FEAT_UNMEASURED);
	for (size_t m = 0; m < sizeof(map) / sizeof(map[0]); m++)
		for (size_t i = 0; counters && i < ncounters; i++)
			if (strncmp(counters[i], map[m].counter, 16) == 0) {
				km_add(km, map[m].feature, map[m].id);
				break;
			}
}

static json_t *metrics_json(const struct kepler_metrics *km)
{
	json_t *a = json_array();
	for (size_t i = 0; i < km->n; i++)
		json_array_append_new(a, json_string(km->name[i]));
	return a;
}

char *kepler_model_request(const struct kepler_metrics *km, const char *output_type,
			   const struct km_spec *spec)
{
	json_t *req = json_pack("{s:o,s:s,s:s,s:b,s:i,s:s,s:s}", "metrics", metrics_json(km),
				"output_type", output_type, "source", "rapl-sysfs", "weight", 1,
				"node_type", -1, "trainer_name", "", "filter", "");
	if (!req)
		return NULL;
	if (spec)
		json_object_set_new(req, "machine_spec", km_spec_json(spec));
	char *s = json_dumps(req, JSON_COMPACT);
	json_decref(req);
	return s;
}

char *kepler_power_request(const struct kepler_metrics *km, const char *output_type,
			   const double x[FEAT_COUNT], const char *arch)
{
	json_t *row = json_array(), *zero = json_array();
	for (size_t i = 0; i < km->n; i++) {
		int id = km->id[i];
		json_array_append_new(row, json_real(id >= 0 && id < FEAT_COUNT ? x[id] : 0.0));
		json_array_append_new(zero, json_real(0.0));
	}
	json_t *req =
	    json_pack("{s:o,s:[o,o],s:s,s:s,s:[s],s:[s],s:s,s:s}", "metrics", metrics_json(km),
		      "values", row, zero, "output_type", output_type, "source", "rapl-sysfs",
		      "system_features", "cpu_architecture", "system_values",
		      arch ? arch : "unknown", "trainer_name", "", "filter", "");
	if (!req)
		return NULL;
	char *s = json_dumps(req, JSON_COMPACT);
	json_decref(req);
	return s;
}

static bool kepler_zone(const char *z)
{
	static const char *const zones[] = {"package", "core", "uncore", "dram", "platform"};
	for (size_t i = 0; i < sizeof(zones) / sizeof(zones[0]); i++)
		if (strcmp(z, zones[i]) == 0)
			return true;
	return false;
}

static int power_value(const json_t *v, const char *key, size_t row, double *out, char *err,
		       size_t errlen)
{
	if (!json_is_number(v)) {
		snprintf(err, errlen, "powers.%s[%zu]: expected a number", key, row);
		return -1;
	}
	/* Whether it is a power a zone can draw is kepler_powers_check's to say. */
	*out = json_number_value(v);
	return 0;
}

int kepler_powers_parse(const char *text, size_t len, struct kepler_powers *out, char *err,
			size_t errlen)
{
	memset(out, 0, sizeof(*out));
	out->core_ratio = 1.0;
	json_error_t je;
	json_t *root = json_loadb(text, len, 0, &je);
	if (!root) {
		snprintf(err, errlen, "not JSON: %s", je.text);
		return -1;
	}
	int rc = -1;
	const json_t *msg = json_object_get(root, "msg");
	const json_t *powers = json_object_get(root, "powers");
	const json_t *ratio = json_object_get(root, "core_ratio");
	if (!json_is_object(root)) {
		snprintf(err, errlen, "expected a JSON object");
		goto out;
	}
	if (msg && json_is_string(msg) && json_string_length(msg) > 0) {
		snprintf(err, errlen, "msg: %.200s", json_string_value(msg));
		goto out;
	}
	if (!json_is_object(powers) || json_object_size(powers) == 0) {
		snprintf(err, errlen, "powers: missing or empty");
		goto out;
	}
	if (ratio) {
		if (!json_is_number(ratio) || !(json_number_value(ratio) > 0) ||
		    !isfinite(json_number_value(ratio))) {
			snprintf(err, errlen, "core_ratio: expected a number above 0");
			goto out;
		}
		out->core_ratio = json_number_value(ratio);
	}
	const char *zone;
	const json_t *rows;
	json_object_foreach((json_t *)powers, zone, rows)
	{
		if (!kepler_zone(zone)) {
			snprintf(err, errlen,
				 "powers.%.32s: not one of package, core, uncore, dram, platform",
				 zone);
			goto out;
		}
		if (!json_is_array(rows) || json_array_size(rows) != 2) {
			snprintf(err, errlen, "powers.%s: expected 2 values (one per row asked)",
				 zone);
			goto out;
		}
		if (out->n >= MODEL_ZONES_MAX) {
			snprintf(err, errlen, "powers: more than %d zones", MODEL_ZONES_MAX);
			goto out;
		}
		snprintf(out->zone[out->n], sizeof(out->zone[0]), "%s", zone);
		if (power_value(json_array_get(rows, 0), zone, 0, &out->p_w[out->n], err, errlen) <
			0 ||
		    power_value(json_array_get(rows, 1), zone, 1, &out->p0_w[out->n], err, errlen) <
			0)
			goto out;
		out->n++;
	}
	rc = 0;
out:
	json_decref(root);
	if (rc < 0)
		out->n = 0;
	return rc;
}

int kepler_powers_check(const struct kepler_powers *kp, double max_w, char *err, size_t errlen)
{
	/* Kepler's estimator clips every value at 0 and answers idle below total for the models
	 * it serves here; anything else is not its answer, or not a zone's power. */
	for (size_t i = 0; i < kp->n; i++) {
		struct wb_zone_power zp;
		enum wb_power_fault f = wb_plaus_zone_power(kp->p_w[i], kp->p0_w[i], max_w, &zp);
		if (f != WB_POWER_OK) {
			snprintf(
			    err, errlen,
			    "powers.%s: %g W at the slot's features, %g W at zero usage: %s (bound %g W)",
			    kp->zone[i], kp->p_w[i], kp->p0_w[i], wb_power_fault_name(f), max_w);
			return -1;
		}
	}
	return 0;
}

bool kepler_answer_complete(const char *text, size_t len)
{
	json_error_t je;
	json_t *j = json_loadb(text, len, 0, &je);
	bool complete = j != NULL;
	json_decref(j);
	return complete;
}
