/* modeld's offline trainer (POST /train): Kepler's TrainRequest in, a pipeline zip out. */
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#include <jansson.h>
#include <zip.h>

#include "../../modeld/modeld.h"
#include "unit.h"

#define STEP_S 3.0
#define T0 1700000000.0

/* A deterministic uniform in [0, 1): the same samples on every run. */
static double uni(unsigned *s)
{
	*s = *s * 1103515245u + 12345u;
	return (double)((*s >> 8) & 0xffff) / 65536.0;
}

static json_t *series(json_t *labels, json_t *values)
{
	return json_pack("{s:o, s:o}", "metric", labels, "values", values);
}

/*
 * Prometheus results of a node whose package draws 20 W + 30 W per busy CPU (+-noise_w),
 * split over two sockets and the modes as exportd's 0.9 profile serves them, the busy CPUs
 * spread over two containers' CPU time. idle: no CPU busy.
 */
static json_t *response(size_t points, bool idle, double noise_w, unsigned seed)
{
	json_t *cpu[2] = {json_array(), json_array()}, *pkg[4];
	double c[2] = {0, 0}, e[4] = {0, 0, 0, 0};
	for (int k = 0; k < 4; k++)
		pkg[k] = json_array();
	for (size_t i = 0; i < points; i++) {
		double t = T0 + (double)i * STEP_S;
		if (i) {
			double b0 = idle ? 0 : 2 * uni(&seed), b1 = idle ? 0 : 2 * uni(&seed);
			double p = 20 + 30 * (b0 + b1) + noise_w * (2 * uni(&seed) - 1);
			c[0] += b0 * 1000 * STEP_S;
			c[1] += b1 * 1000 * STEP_S;
			for (int s = 0; s < 2; s++) {
				e[2 * s] += 10 * STEP_S;	       /* idle, per socket */
				e[2 * s + 1] += (p - 20) / 2 * STEP_S; /* dynamic */
			}
		}
		for (int k = 0; k < 2; k++) {
			char v[32];
			snprintf(v, sizeof v, "%.3f", c[k]);
			json_array_append_new(cpu[k], json_pack("[f, s]", t, v));
		}
		for (int k = 0; k < 4; k++) {
			char v[32];
			snprintf(v, sizeof v, "%.6f", e[k]);
			json_array_append_new(pkg[k], json_pack("[f, s]", t, v));
		}
	}
	json_t *r = json_object(), *cl = json_array(), *pl = json_array();
	for (int k = 0; k < 2; k++)
		json_array_append_new(
		    cl, series(json_pack("{s:s, s:s, s:s}", "node_name", "m1", "container_id",
					 k ? "b" : "a", "source", "bpf"),
			       cpu[k]));
	for (int k = 0; k < 4; k++)
		json_array_append_new(
		    pl, series(json_pack("{s:s, s:s, s:s, s:s}", "node_name", "m1", "package",
					 k / 2 ? "1" : "0", "mode", k % 2 ? "dynamic" : "idle",
					 "source", "rapl-sysfs"),
			       pkg[k]));
	json_object_set_new(r, "kepler_container_bpf_cpu_time_ms_total", cl);
	json_object_set_new(r, "kepler_node_package_joules_total", pl);
	json_object_set_new(r, "kepler_node_node_info",
			    json_pack("[{s:{s:s, s:s, s:s}, s:[[f, s]]}]", "metric", "processor",
				      "Intel(R) Xeon(R) Platinum 8259CL CPU @ 2.50GHz", "cores",
				      "8", "chips", "2", "values", T0, "0"));
	return r;
}

static json_t *request(size_t points, const char *isolator)
{
	return json_pack("{s:s, s:s, s:{s:[s, s], s:[s], s:o, s:s, s:{}}, s:o}", "name", "law",
			 "energy_source", "rapl-sysfs", "trainer", "abs_trainers",
			 "SGDRegressorTrainer", "PolynomialRegressionTrainer", "dyn_trainers",
			 "SGDRegressorTrainer", "idle_prom_response", response(11, true, 0, 7),
			 "isolator", isolator, "isolator_args", "prom_response",
			 response(points, false, 0.5, 1));
}

static char workdir[256];

/* md_train on the request (taken over): the status; err filled on a refusal. */
static int train(json_t *req, struct md_train_result *res, char *err, size_t errlen)
{
	char *body = json_dumps(req, JSON_COMPACT);
	json_decref(req);
	int st = md_train(body, strlen(body), workdir, res, err, errlen);
	free(body);
	return st;
}

/* A file of the answer's archive, parsed. */
static json_t *zip_json(const struct md_train_result *res, const char *name)
{
	zip_error_t ze;
	zip_source_t *src = zip_source_buffer_create(res->zip, res->len, 0, &ze);
	zip_t *z = src ? zip_open_from_source(src, ZIP_RDONLY, &ze) : NULL;
	json_t *j = NULL;
	zip_stat_t st;
	if (z && zip_stat(z, name, 0, &st) == 0) {
		char *buf = malloc(st.size);
		zip_file_t *f = zip_fopen(z, name, 0);
		if (f && zip_fread(f, buf, st.size) == (zip_int64_t)st.size)
			j = json_loadb(buf, st.size, 0, NULL);
		if (f)
			zip_fclose(f);
		free(buf);
	}
	if (z)
		zip_discard(z);
	else
		zip_source_free(src);
	return j;
}

/* The power a weight.json zone gives at busy CPUs (ms of CPU time per second = 1000 x busy). */
static double power_at(const json_t *weight, const char *zone, double busy)
{
	json_t *w = json_object_get(json_object_get(weight, zone), "All_Weights");
	json_t *f = json_object_get(json_object_get(w, "Numerical_Variables"), "bpf_cpu_time_ms");
	return json_real_value(json_object_get(w, "Bias_Weight")) +
	       json_real_value(json_object_get(f, "weight")) /
		   json_real_value(json_object_get(f, "scale")) * 1000 * busy;
}

static void test_law(void)
{
	struct md_train_result res;
	char err[MD_ERR_MAX] = "";
	int st = train(request(101, "ProfileBackgroundIsolator"), &res, err, sizeof err);
	CHECK(st == 0);
	if (st) {
		printf("#   %s\n", err);
		return;
	}
	CHECK_U64(res.intervals, 100);
	CHECK_STR(res.skipped, "PolynomialRegressionTrainer");
	CHECK(res.abs_mae_w > 0 && res.abs_mae_w < 0.5); /* noise +-0.5 W: mean 0.25 W */
	const char *base = "rapl-sysfs/AbsPower/ThirdParty/SGDRegressorTrainer_0/";
	char path[128];
	snprintf(path, sizeof path, "%sweight.json", base);
	json_t *w = zip_json(&res, path);
	CHECK(w != NULL);
	/* the law, within the held-out MAE, over the range trained on (0 to 4 busy CPUs) */
	for (double busy = 0; busy <= 4; busy += 1)
		CHECK_NEAR(power_at(w, "package", busy), 20 + 30 * busy, res.abs_mae_w);
	json_decref(w);
	/* DynPower: the idle profile's 20 W taken out */
	w = zip_json(&res, "rapl-sysfs/DynPower/ThirdParty/SGDRegressorTrainer_0/weight.json");
	CHECK(w != NULL);
	for (double busy = 0; busy <= 4; busy += 1)
		CHECK_NEAR(power_at(w, "package", busy), 30 * busy, res.dyn_mae_w);
	json_decref(w);
	snprintf(path, sizeof path, "%smetadata.json", base);
	json_t *m = zip_json(&res, path);
	CHECK_STR(json_string_value(json_object_get(m, "output_type")), "AbsPower");
	CHECK_STR(
	    json_string_value(json_object_get(json_object_get(m, "machine_spec"), "processor")),
	    "intel_xeon_platinum_8259cl");
	CHECK_U64(json_integer_value(json_object_get(m, "wattbus_train_slots")), 80);
	json_decref(m);
	m = zip_json(&res, "metadata.json");
	CHECK_STR(json_string_value(json_object_get(m, "name")), "law");
	CHECK_STR(json_string_value(json_object_get(m, "isolator")), "ProfileBackgroundIsolator");
	json_decref(m);
	free(res.zip);
	/* MinIdleIsolator: the lowest power seen is taken out, so the bias is below 0 */
	st = train(request(101, "MinIdleIsolator"), &res, err, sizeof err);
	CHECK(st == 0);
	w = zip_json(&res, "rapl-sysfs/DynPower/ThirdParty/SGDRegressorTrainer_0/weight.json");
	CHECK(w && power_at(w, "package", 0) < -1);
	json_decref(w);
	free(res.zip);
}

/* The seed's spelling of prom_response; a counter that went down leaves its interval out. */
static void test_spelling_and_reset(void)
{
	json_t *req = request(41, "NoneIsolator");
	json_t *prom = json_object_get(req, "prom_response");
	json_incref(prom);
	json_object_del(req, "prom_response");
	/* the exporter restarted: package 0's dynamic counter starts over at point 20 */
	json_t *vals = json_object_get(
	    json_array_get(json_object_get(prom, "kepler_node_package_joules_total"), 1), "values");
	for (size_t i = 20; i < json_array_size(vals); i++)
		json_array_set_new(json_array_get(vals, i), 1, json_string("0.5"));
	json_object_set_new(req, "prome_response", prom);
	struct md_train_result res;
	char err[MD_ERR_MAX] = "";
	CHECK(train(req, &res, err, sizeof err) == 0);
	/* 40 intervals, the one of the reset left out (Kepler's extractor carries the rate
	 * before over); after it the counter stands still, a rate of 0, and those stay */
	CHECK_U64(res.intervals, 39);
	free(res.zip);
}

static void expect_refusal(json_t *req, const char *field)
{
	struct md_train_result res;
	char err[MD_ERR_MAX] = "";
	int st = train(req, &res, err, sizeof err);
	CHECK_U64(st, 400);
	if (strncmp(err, field, strlen(field)) != 0) {
		printf("#   expected the refusal to name %s: %s\n", field, err);
		unit_failed_checks++;
	}
	CHECK(res.zip == NULL);
}

static void test_refusals(void)
{
	struct md_train_result res;
	char err[MD_ERR_MAX];
	CHECK_U64(md_train("{", 1, workdir, &res, err, sizeof err), 400);
	CHECK(strstr(err, "not JSON") != NULL);
	json_t *r = request(21, "MinIdleIsolator");
	json_object_del(r, "name");
	expect_refusal(r, "name:");
	r = request(21, "MinIdleIsolator");
	json_object_set_new(r, "name", json_string("../etc"));
	expect_refusal(r, "name:");
	r = request(21, "MinIdleIsolator");
	json_object_set_new(r, "energy_source", json_string("battery"));
	expect_refusal(r, "energy_source:");
	r = request(21, "MinIdleIsolator");
	json_object_del(r, "trainer");
	expect_refusal(r, "trainer:");
	r = request(21, "MinIdleIsolator");
	json_object_set_new(json_object_get(r, "trainer"), "abs_trainers",
			    json_pack("[s]", "XgboostFitTrainer"));
	expect_refusal(r, "trainer.abs_trainers:");
	r = request(21, "MinIdleIsolator");
	json_object_set_new(json_object_get(r, "trainer"), "dyn_trainers", json_pack("[i]", 3));
	expect_refusal(r, "trainer.dyn_trainers[0]:");
	r = request(21, "Guess");
	expect_refusal(r, "trainer.isolator:");
	r = request(21, "ProfileBackgroundIsolator");
	json_object_del(json_object_get(r, "trainer"), "idle_prom_response");
	expect_refusal(r, "trainer.idle_prom_response:");
	r = request(21, "MinIdleIsolator");
	json_object_del(r, "prom_response");
	expect_refusal(r, "prom_response:");
	r = request(21, "MinIdleIsolator");
	json_object_set_new(r, "prome_response", json_object());
	expect_refusal(r, "prom_response:"); /* both spellings */
	r = request(21, "MinIdleIsolator");
	json_array_set_new(
	    json_object_get(json_array_get(json_object_get(json_object_get(r, "prom_response"),
							   "kepler_node_package_joules_total"),
					   2),
			    "values"),
	    5, json_string("12"));
	expect_refusal(r, "prom_response.kepler_node_package_joules_total[2].values[5]:");
	r = request(21, "MinIdleIsolator");
	json_object_set_new(r, "energy_source", json_string("acpi")); /* no platform series */
	expect_refusal(r, "prom_response:");
	r = request(4, "MinIdleIsolator"); /* 3 intervals: too few to train and hold out */
	expect_refusal(r, "prom_response:");
	/* nothing left behind in the work folder */
	char cmd[512];
	snprintf(cmd, sizeof cmd, "test -z \"$(ls -A '%s')\"", workdir);
	CHECK(system(cmd) == 0);
}

static void setup(void)
{
	unit_tmp(workdir, sizeof workdir, "modeld-train-XXXXXX");
	if (!mkdtemp(workdir))
		abort();
}

static void test_all(void)
{
	setup();
	test_law();
	test_spelling_and_reset();
	test_refusals();
	char cmd[512];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", workdir);
	CHECK(system(cmd) == 0);
}

static const struct unit_case cases[] = {
    {"a TrainRequest of a known law: recovered, refusals named, resets left out", test_all},
};

UNIT_MAIN(cases)
