/*
 * estimd as a Kepler client: the machine spec, the ModelRequest, the estimator
 * sidecar's answers; and the trainer's curve fits recovering known curves.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "../../estimd/estimd.h"
#include "spec.h"
#include "unit.h"

static void test_processor_names(void)
{
	static const struct {
		const char *in, *want;
	} cases[] = {
	    {"Intel(R) Xeon(R) Platinum 8259CL CPU @ 2.50GHz", "intel_xeon_platinum_8259cl"},
	    {"Intel(R) Xeon(R) CPU E5-2686 v4 @ 2.30GHz", "intel_xeon_e5_2686v4"},
	    {"AMD EPYC 7R13 Processor", "amd_epyc_7r13"},
	    {"Intel(R) Core(TM) i7-8650U CPU @ 1.90GHz", "intel_core"},
	    {"AMD Ryzen 7 5800X 8-Core Processor", "amd_ryzen_7_5800x_8_core"},
	    {"Quad-Core AMD Opteron(tm) Processor 2356", "quad_core_amd_opteron"},
	    {"AMD Athlon 64 X2 Dual Core Processor 64-Bit Multi-Core 5000+",
	     "amd_athlon_64_x2_dual_core_5000+"},
	    {"Neoverse-N1 3.0 GHz", "neoverse_n1"},
	    {"intel_xeon_platinum_8259cl", "intel_xeon_platinum_8259cl"},
	    {"-", ""},
	    {"", ""},
	};
	char out[128];
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		wb_processor_name(cases[i].in, out, sizeof(out));
		CHECK_STR(out, cases[i].want);
	}
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	CHECK(f != NULL);
	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

static void test_spec_from_fake_tree(void)
{
	char root[256];
	unit_tmp(root, sizeof(root), "wb_spec_XXXXXX");
	CHECK(mkdtemp(root) != NULL);
	char p[512];
	snprintf(p, sizeof(p), "%s/proc", root);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/proc/cpuinfo", root);
	write_file(
	    p,
	    "processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Platinum 8488C\nphysical id\t: 0\ncpu MHz\t\t: 2400.000\n\n"
	    "processor\t: 1\nmodel name\t: Intel(R) Xeon(R) Platinum 8488C\nphysical id\t: 1\ncpu MHz\t\t: 3100.400\n\n"
	    "processor\t: 2\nmodel name\t: Intel(R) Xeon(R) Platinum 8488C\nphysical id\t: 1\ncpu MHz\t\t: 800.000\n\n");
	snprintf(p, sizeof(p), "%s/proc/meminfo", root);
	write_file(p, "MemTotal:       395000000 kB\n");
	struct km_spec s;
	char err[256];
	char proc[300], sys[300];
	snprintf(proc, sizeof(proc), "%s/proc", root);
	snprintf(sys, sizeof(sys), "%s/sys", root);
	/* no cpufreq in sysfs: the highest cpu MHz */
	CHECK(mspec_read(proc, sys, &s, err, sizeof(err)) == 0);
	CHECK_STR(s.processor, "intel_xeon_platinum_8488c");
	CHECK_U64(s.cores, 3);
	CHECK_U64(s.chips, 2);
	CHECK_U64(s.memory_gib, 376); /* 376.7 GiB, rounded down as Kepler does */
	CHECK_U64(s.frequency_mhz, 3100);
	/* cpufreq's maximum wins over cpu MHz */
	snprintf(p, sizeof(p), "mkdir -p %s/sys/devices/system/cpu/cpu1/cpufreq", root);
	CHECK(system(p) == 0);
	snprintf(p, sizeof(p), "%s/sys/devices/system/cpu/cpu1/cpufreq/cpuinfo_max_freq", root);
	write_file(p, "3800000\n");
	CHECK(mspec_read(proc, sys, &s, err, sizeof(err)) == 0);
	CHECK_U64(s.frequency_mhz, 3800);
	/* no cpuinfo: an error naming it */
	CHECK(mspec_read(sys, sys, &s, err, sizeof(err)) == -1);
	CHECK(strstr(err, "/sys/cpuinfo") != NULL);
	snprintf(p, sizeof(p), "rm -rf %s", root);
	CHECK(system(p) == 0);
}

static void test_model_request(void)
{
	char counters[3][16] = {"instructions", "cycles", "branch_misses"};
	struct kepler_metrics km;
	kepler_metrics_from((const char(*)[16])counters, 3, &km);
	CHECK_U64(km.n, 4);
	CHECK_STR(km.name[0], "bpf_cpu_time_ms");
	CHECK_STR(km.name[1], "bpf_page_cache_hit");
	CHECK_STR(km.name[2], "cpu_cycles");
	CHECK_STR(km.name[3], "cpu_instructions");
	struct km_spec spec = {"intel_xeon_e5_2686v4", 72, 2, 503, 3000};
	char *body = kepler_model_request(&km, "AbsPower", &spec);
	json_error_t je;
	json_t *j = body ? json_loads(body, 0, &je) : NULL;
	CHECK(j != NULL);
	if (j) {
		CHECK_STR(json_string_value(json_object_get(j, "output_type")), "AbsPower");
		CHECK(json_is_true(json_object_get(j, "weight")));
		CHECK_U64(json_array_size(json_object_get(j, "metrics")), 4);
		json_t *ms = json_object_get(j, "machine_spec");
		CHECK_STR(json_string_value(json_object_get(ms, "processor")),
			  "intel_xeon_e5_2686v4");
		CHECK_U64(json_integer_value(json_object_get(ms, "cores")), 72);
		CHECK_U64(json_integer_value(json_object_get(ms, "memory")), 503);
		json_decref(j);
	}
	free(body);
}

static void test_sidecar_answers(void)
{
	struct kepler_powers kp;
	char err[256];
	const char *ok =
	    "{\"powers\": {\"package\": [120.5, 100], \"dram\": [9, 7]}, \"msg\": \"\", \"core_ratio\": 0.5}";
	CHECK(kepler_powers_parse(ok, strlen(ok), &kp, err, sizeof(err)) == 0);
	CHECK_U64(kp.n, 2);
	CHECK_NEAR(kp.core_ratio, 0.5, 0);
	int pk = strcmp(kp.zone[0], "package") == 0 ? 0 : 1;
	CHECK_NEAR(kp.p_w[pk], 120.5, 0);
	CHECK_NEAR(kp.p0_w[pk], 100, 0);
	static const struct {
		const char *text, *want;
	} bad[] = {
	    {"{\"powers\": {}, \"msg\": \"no model\"}", "msg: no model"},
	    {"{\"powers\": {}}", "powers: missing or empty"},
	    {"{\"powers\": {\"gpu\": [1, 2]}}", "powers.gpu: not one of"},
	    {"{\"powers\": {\"package\": [1]}}", "powers.package: expected 2 values"},
	    {"{\"powers\": {\"package\": [1, \"x\"]}}", "powers.package[1]: expected a number"},
	    {"{\"powers\": {\"package\": [1, 1]}, \"core_ratio\": -1}",
	     "core_ratio: expected a number above 0"},
	    {"[1, 2]", "expected a JSON object"},
	    {"<html>", "not JSON"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CHECK(kepler_powers_parse(bad[i].text, strlen(bad[i].text), &kp, err,
					  sizeof(err)) == -1);
		if (!strstr(err, bad[i].want))
			printf("#   %s -> %s\n", bad[i].text, err);
		CHECK(strstr(err, bad[i].want) != NULL);
	}
	/* Well-formed answers no zone can draw: each refused by lib/plaus.h's rule, with why. */
	static const struct {
		const char *text, *want;
	} implausible[] = {
	    {"{\"powers\": {\"package\": [1e39, 1]}}",
	     "powers.package: 1e+39 W at the slot's features, 1 W at zero usage: above the zone's bound (bound 5000 W)"},
	    {"{\"powers\": {\"package\": [99999, -99999]}}", "powers.package: 99999 W"},
	    {"{\"powers\": {\"package\": [10, 5], \"dram\": [-1, 0]}}", "powers.dram: -1 W"},
	    {"{\"powers\": {\"dram\": [3, -2]}}", "negative"},
	    {"{\"powers\": {\"package\": [10, 90000]}}", "above the zone's bound"},
	    {"{\"powers\": {\"package\": [10, 90]}}", "idle above total"},
	};
	for (size_t i = 0; i < sizeof(implausible) / sizeof(implausible[0]); i++) {
		const char *t = implausible[i].text;
		CHECK(kepler_powers_parse(t, strlen(t), &kp, err, sizeof(err)) == 0);
		CHECK(kepler_powers_check(&kp, WB_ZONE_MAX_W, err, sizeof(err)) == -1);
		if (!strstr(err, implausible[i].want))
			printf("#   %s -> %s\n", t, err);
		CHECK(strstr(err, implausible[i].want) != NULL);
	}
	/* At the bound, at 0 and idle equal to total are powers a zone can draw. */
	const char *edge = "{\"powers\": {\"package\": [5000, 5000], \"dram\": [0, 0]}}";
	CHECK(kepler_powers_parse(edge, strlen(edge), &kp, err, sizeof(err)) == 0);
	CHECK(kepler_powers_check(&kp, WB_ZONE_MAX_W, err, sizeof(err)) == 0);
}

/* Weights answers as model servers write them: machine_spec with unknowns, mae. */
static void test_weights_answers(void)
{
	const char *ans =
	    "{\"package\": {\"All_Weights\": {\"Bias_Weight\": 50, \"Categorical_Variables\": {}, \"Numerical_Variables\": {\"bpf_cpu_time_ms\": {\"scale\": 1000, \"weight\": 2}}}}, \"model_name\": \"SGDRegressorTrainer_0\", \"mae\": 4.25, \"machine_spec\": {\"processor\": null, \"cores\": 96.0, \"chips\": null}}";
	struct model m;
	char err[512], desc[1024];
	CHECK(model_parse(ans, strlen(ans), "http://s/model", NULL, &m, err, sizeof(err)) == 0);
	CHECK_U64(m.cores, 96);
	CHECK_NEAR(m.mae_w, 4.25, 0);
	model_describe(&m, desc, sizeof(desc));
	CHECK(strstr(desc, "MAE 4.25 W as its model server states it") != NULL);
	const char *nullc =
	    "{\"package\": {\"All_Weights\": {\"Numerical_Variables\": {\"bpf_cpu_time_ms\": {\"scale\": 1}}}}, \"machine_spec\": {\"cores\": null}}";
	CHECK(model_parse(nullc, strlen(nullc), "a", NULL, &m, err, sizeof(err)) == 0);
	CHECK_U64(m.cores, 0);
	const char *badc =
	    "{\"package\": {\"All_Weights\": {\"Numerical_Variables\": {\"bpf_cpu_time_ms\": {\"scale\": 1}}}}, \"machine_spec\": {\"cores\": 2.5}}";
	CHECK(model_parse(badc, strlen(badc), "b", NULL, &m, err, sizeof(err)) == -1);
	CHECK(strstr(err, "b: machine_spec.cores: expected 1 to 65536") != NULL);
}

/* Samples of a known curve of CPU time; trainer_fit_form must pick it up. */
static void fit_known(enum model_form form, double (*truth)(double), double tol_w)
{
	struct trainer t;
	struct train_conf tc = {
	    .window = 200, .min_slots = 20, .every = 1000000, .holdout_every = 5};
	CHECK(trainer_init(&t, &tc) == 0);
	for (int i = 0; i < 200; i++) {
		double x[FEAT_COUNT] = {0}, y[TRAIN_ZONES] = {-1, -1, -1, -1, -1};
		x[FEAT_CPU_TIME_MS] = 4000.0 * ((i * 37) % 200) / 199.0;
		y[0] = truth(x[FEAT_CPU_TIME_MS]);
		trainer_add_sample(&t, x, y);
	}
	struct model m;
	char err[256];
	CHECK(trainer_fit_form(&t, form, "curve", 4, &m, err, sizeof(err)) == 0);
	CHECK(m.form == form && m.nzones == 1 && m.test_slots == 40);
	CHECK(m.zones[0].mae_w < tol_w);
	double x[FEAT_COUNT] = {0};
	for (double ms = 0; ms <= 4000; ms += 250) {
		x[FEAT_CPU_TIME_MS] = ms;
		CHECK_NEAR(model_zone_power_w(&m, &m.zones[0], x), truth(ms), tol_w);
	}
	trainer_free(&t);
}

static double log_truth(double ms)
{
	return 30 * log(0.002 * ms + 1) + 12;
}
static double exp_truth(double ms)
{
	return 5 * exp(0.0006 * ms) + 10;
}
static double lgs_truth(double ms)
{
	return 60 / (1 + exp(-0.004 * (ms - 1500))) + 25;
}

static void test_curve_fits(void)
{
	fit_known(MODEL_LOGARITHMIC, log_truth, 1e-3);
	fit_known(MODEL_EXPONENTIAL, exp_truth, 1e-3);
	fit_known(MODEL_LOGISTIC, lgs_truth, 1e-3);
}

static const struct unit_case cases[] = {
    {"processor names as Kepler's node types spell them", test_processor_names},
    {"machine spec from a fake procfs and sysfs", test_spec_from_fake_tree},
    {"ModelRequest: features from usaged's counters, machine spec", test_model_request},
    {"estimator sidecar answers, good and refused with the key", test_sidecar_answers},
    {"weights answers of model servers: machine_spec unknowns, mae", test_weights_answers},
    {"curve fits recover logarithmic, exponential and logistic curves", test_curve_fits},
};

UNIT_MAIN(cases)
