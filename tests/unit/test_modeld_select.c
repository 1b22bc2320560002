/* modeld: Kepler's selection rules (specs, node types, groups, filters, requests) and the store. */
#include <math.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "codec.h"
#include "../../modeld/modeld.h"
#include "spec.h"
#include "unit.h"

static void test_processor(void)
{
	char out[128];
	wb_processor_name("Intel(R) Xeon(R) Platinum 8259CL CPU @ 2.50GHz", out, sizeof out);
	CHECK_STR(out, "intel_xeon_platinum_8259cl");
	wb_processor_name("Intel(R) Xeon(R) CPU E5-2686 v4 @ 2.30GHz", out, sizeof out);
	CHECK_STR(out, "intel_xeon_e5_2686v4");
	wb_processor_name("intel_xeon_platinum_8488c", out, sizeof out);
	CHECK_STR(out, "intel_xeon_platinum_8488c");
	wb_processor_name("AMD EPYC 7R13 Processor", out, sizeof out);
	CHECK_STR(out, "amd_epyc_7r13");
	wb_processor_name("-", out, sizeof out);
	CHECK_STR(out, "");
}

/* ec2-0.7.11's node_type_index.json */
static const struct md_node_type ec2[] = {
    {0, {"intel_xeon_platinum_8259cl", 96, 2, 377, 3500}, 1},
    {1, {"intel_xeon_e5_2686v4", 72, 2, 503, 3000}, 1},
    {2, {"intel_xeon_platinum_8275cl", 96, 2, 188, 3900}, 1},
    {3, {"intel_xeon_platinum_8259cl", 96, 2, 755, 3500}, 1},
    {4, {"intel_xeon_platinum_8252c", 48, 2, 188, 4500}, 1},
    {5, {"intel_xeon_platinum_8488c", 96, 1, 377, 3800}, 1},
};

static void test_node_type(void)
{
	double sim;
	struct km_spec s = {"intel_xeon_platinum_8259cl", 96, 2, 755, 3500};
	CHECK(md_node_type_of(ec2, 6, &s, &sim) == 3);
	CHECK_NEAR(sim, 1, 0);
	/* only the processor: covered by 0 and 3 (one member each): the first */
	struct km_spec p = {"intel_xeon_platinum_8259cl", 0, 0, 0, 0};
	CHECK(md_node_type_of(ec2, 6, &p, &sim) == 0);
	CHECK_NEAR(sim, 1, 0);
	/* covered by none: the most similar; by hand (5 + 1 + 1 + 0.5 (1 - 123/438.5) + 0.5) / 8 */
	struct km_spec m = {"intel_xeon_platinum_8488c", 96, 1, 500, 3800};
	CHECK(md_node_type_of(ec2, 6, &m, &sim) == 5);
	CHECK_NEAR(sim, (5 + 1 + 1 + 0.5 * (1 - 123 / 438.5) + 0.5) / 8, 1e-9);
	struct km_spec e = {"intel_xeon_e5_2686v4", 64, 2, 480, 3000};
	CHECK(md_node_type_of(ec2, 6, &e, &sim) == 1);
	CHECK_NEAR(sim, (5 + (1 - 8 / 68.0) + 1 + 0.5 * (1 - 23 / 491.5) + 0.5) / 8, 1e-9);
	struct km_spec none = {0};
	CHECK(md_node_type_of(ec2, 6, &none, &sim) == -1);
	CHECK(md_node_type_of(ec2, 0, &s, &sim) == -1);
	/* a different processor: the character sets' Jaccard index, halved */
	struct km_spec a = {"ab", 0, 0, 0, 0};
	struct km_spec b = {"ac", 0, 0, 0, 0};
	CHECK_NEAR(md_spec_similarity(&a, &b), (1.0 / 3 * 0.5) * 5 / 8, 1e-12);
}

static void test_groups(void)
{
	const char *bpf[] = {"bpf_page_cache_hit", "bpf_cpu_time_ms"};
	const char *one[] = {"bpf_cpu_time_ms"};
	const char *basic[] = {"cache_miss", "cpu_cycles", "cpu_instructions", "bpf_cpu_time_ms",
			       "bpf_page_cache_hit"};
	CHECK_STR(md_group_of(bpf, 2)->name, "BPFOnly");
	CHECK_STR(md_group_of(basic, 5)->name, "Basic");
	CHECK(md_group_of(one, 1) == NULL);
	char *metrics[] = {"cache_miss", "cpu_cycles", "cpu_instructions", "bpf_cpu_time_ms"};
	CHECK(md_group_valid(md_group_find("CounterOnly"), metrics, 4));
	CHECK(!md_group_valid(md_group_find("BPFOnly"), metrics, 4));
	CHECK(!md_group_valid(md_group_find("Basic"), metrics, 4));
	CHECK(md_trainer_weight_capable("SGDRegressorTrainer"));
	CHECK(!md_trainer_weight_capable("XgboostFitTrainer"));
}

static void test_filter(void)
{
	struct md_filter f;
	char err[256];
	CHECK(md_filter_parse("mae:10;mape:20", &f, err, sizeof err) == 0);
	CHECK_U64(f.n, 2);
	CHECK_STR(f.c[1].key, "mape");
	CHECK_NEAR(f.c[1].value, 20, 0);
	CHECK(md_filter_parse("", &f, err, sizeof err) == 0 && f.n == 0);
	CHECK(md_filter_parse("mae:10;", &f, err, sizeof err) == 0 && f.n == 1);
	CHECK(md_filter_parse("mae", &f, err, sizeof err) < 0);
	CHECK(strstr(err, "\"mae\"") != NULL);
	CHECK(md_filter_parse("mae:ten", &f, err, sizeof err) < 0);
	CHECK(md_filter_parse(":3", &f, err, sizeof err) < 0);
	json_t *meta = json_pack("{s:f, s:f}", "mae", 9.5, "mape", 25.0);
	CHECK(md_filter_parse("mae:10", &f, err, sizeof err) == 0 && md_filter_pass(&f, meta));
	CHECK(md_filter_parse("mae:9.5", &f, err, sizeof err) == 0 && md_filter_pass(&f, meta));
	CHECK(md_filter_parse("mae:10;mape:20", &f, err, sizeof err) == 0 &&
	      !md_filter_pass(&f, meta));
	CHECK(md_filter_parse("abs_max_corr:0.5", &f, err, sizeof err) == 0 &&
	      !md_filter_pass(&f, meta)); /* a key the model lacks fails */
	json_decref(meta);
}

static void test_request(void)
{
	struct md_request r;
	char err[512];
	const char *ok =
	    "{\"metrics\":[\"bpf_cpu_time_ms\"],\"output_type\":\"AbsPower\",\"source\":\"rapl-msr\",\"node_type\":\"3\",\"weight\":true,\"trainer_name\":\"SGD\",\"filter\":\"mae:10\",\"pipeline_name\":\"p\",\"machine_spec\":{\"processor\":\"Intel(R) Xeon(R) Platinum 8259CL CPU @ 2.50GHz\",\"cores\":96,\"vendor\":\"intel\"},\"loose_node_type\":false}";
	CHECK(md_request_parse(ok, strlen(ok), &r, err, sizeof err) == 0);
	CHECK_U64(r.nmetrics, 1);
	CHECK_STR(r.source, "rapl-sysfs");
	CHECK(r.node_type == 3);
	CHECK(r.weight && !r.loose_node_type);
	CHECK_STR(r.spec.processor, "intel_xeon_platinum_8259cl");
	CHECK_NEAR(r.spec.cores, 96, 0);
	CHECK_U64(r.filter.n, 1);
	md_request_free(&r);
	static const struct {
		const char *body, *want;
	} bad[] = {
	    {"{", "not JSON"},
	    {"[]", "expected a JSON object"},
	    {"{\"output_type\":\"AbsPower\"}", "metrics"},
	    {"{\"metrics\":\"cpu\",\"output_type\":\"AbsPower\"}", "metrics"},
	    {"{\"metrics\":[1],\"output_type\":\"AbsPower\"}", "metrics[0]"},
	    {"{\"metrics\":[]}", "output_type"},
	    {"{\"metrics\":[],\"output_type\":\"Power\"}", "unknown \"Power\""},
	    {"{\"metrics\":[],\"output_type\":\"AbsPower\",\"weight\":\"yes\"}", "weight"},
	    {"{\"metrics\":[],\"output_type\":\"AbsPower\",\"node_type\":1.5}", "node_type"},
	    {"{\"metrics\":[],\"output_type\":\"AbsPower\",\"colour\":1}",
	     "unknown key \"colour\""},
	    {"{\"metrics\":[],\"output_type\":\"AbsPower\",\"col\\nour\":1}",
	     "unknown key \"col?our\""},
	    {"{\"a\\\n\":1}", "not JSON"},
	    {"{\"metrics\":[],\"output_type\":\"AbsPower\",\"filter\":\"mae\"}", "filter"},
	    {"{\"metrics\":[],\"output_type\":\"AbsPower\",\"machine_spec\":{\"cores\":\"x\"}}",
	     "machine_spec.cores"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		err[0] = '\0';
		int rc = md_request_parse(bad[i].body, strlen(bad[i].body), &r, err, sizeof err);
		CHECK(rc < 0);
		if (rc < 0 && !strstr(err, bad[i].want))
			printf("#   %s: \"%s\" does not name %s\n", bad[i].body, err, bad[i].want);
		CHECK(rc < 0 && strstr(err, bad[i].want));
		CHECK(!strchr(err, '\n')); /* one line in the log and the answer */
	}
}

/* A model message as estimd publishes it. */
static void make_msg(struct wb_msg *msg, const char *host, double mae)
{
	memset(msg, 0, sizeof *msg);
	msg->kind = WB_MODEL;
	struct wb_model *m = &msg->model;
	snprintf(m->env.host, sizeof m->env.host, "%s", host);
	snprintf(m->env.src, sizeof m->env.src, "estimd");
	snprintf(m->name, sizeof m->name, "trained");
	snprintf(m->type, sizeof m->type, "AbsPower");
	m->mae = mae;
	snprintf(m->spec.processor, sizeof m->spec.processor, "Intel(R) Xeon(R) CPU X @ 2GHz");
	m->spec.cores = 8;
	m->spec.chips = 1;
	m->spec.memory_gib = 16;
	m->spec.frequency_mhz = 3000;
	m->features = wb_array_new(1, sizeof *m->features);
	snprintf(m->features[0], sizeof m->features[0], "bpf_cpu_time_ms");
	m->n_features = 1;
	m->zones = wb_array_new(1, sizeof *m->zones);
	m->n_zones = 1;
	snprintf(m->zones[0].zone, sizeof m->zones[0].zone, "package");
	m->zones[0].bias_w = 10;
	m->zones[0].weights = wb_array_new(1, sizeof(double));
	m->zones[0].scales = wb_array_new(1, sizeof(double));
	m->zones[0].means = wb_array_new(1, sizeof(double));
	m->zones[0].weights[0] = 2;
	m->zones[0].scales[0] = 4;
	m->zones[0].means[0] = 8;
	m->zones[0].n_weights = m->zones[0].n_scales = m->zones[0].n_means = 1;
}

static void test_store(void)
{
	char dir[256];
	unit_tmp(dir, sizeof(dir), "wb-modeld-XXXXXX");
	CHECK(mkdtemp(dir) != NULL);
	char err[512];
	struct md_store *s = md_store_new(dir, "wattbus", "rapl-sysfs");
	CHECK(md_store_load(s, err, sizeof err) == 0);
	struct wb_msg msg;
	const struct md_model *out;
	make_msg(&msg, "a", 5);
	CHECK(md_store_put(s, &msg.model, 0, &out, err, sizeof err) == MD_PUT_NEW);
	CHECK_STR(out->name, "SGDRegressorTrainer_0");
	CHECK_STR(out->group, "ThirdParty");
	CHECK_NEAR(out->mae, 5, 0);
	/* means folded into the bias: 10 - 2 * 8 / 4 */
	json_t *b = json_object_get(
	    json_object_get(json_object_get(out->weight, "package"), "All_Weights"), "Bias_Weight");
	CHECK_NEAR(json_number_value(b), 6, 1e-12);
	wb_msg_clear(&msg);
	/* another host, same machine, worse: kept; better: replaces */
	make_msg(&msg, "b", 7);
	CHECK(md_store_put(s, &msg.model, 0, &out, err, sizeof err) == MD_PUT_KEPT);
	CHECK_NEAR(out->mae, 5, 0);
	msg.model.mae = 4;
	CHECK(md_store_put(s, &msg.model, 0, &out, err, sizeof err) == MD_PUT_REPLACED);
	/* the same host's newer model replaces its own, worse or not; the node type index, which
	 * did not change, is not written again (saves replace the file: a new inode) */
	char index[300];
	struct stat before, after;
	snprintf(index, sizeof index, "%s/wattbus/node_type_index.json", dir);
	CHECK(stat(index, &before) == 0);
	msg.model.mae = 6;
	CHECK(md_store_put(s, &msg.model, 0, &out, err, sizeof err) == MD_PUT_REPLACED);
	CHECK(stat(index, &after) == 0 && after.st_ino == before.st_ino);
	/* another machine: a new node type */
	msg.model.spec.cores = 16;
	CHECK(md_store_put(s, &msg.model, 0, &out, err, sizeof err) == MD_PUT_NEW);
	CHECK_STR(out->name, "SGDRegressorTrainer_1");
	/* an exact fit: mae 0 over held-out slots is known and the best; 0 without them (what an
	 * absent mae decodes to) is unknown, filed and never served */
	msg.model.spec.cores = 4;
	msg.model.mae = 0;
	msg.model.zones[0].mae_w = 0;
	CHECK(md_store_put(s, &msg.model, 0, &out, err, sizeof err) == MD_PUT_NEW);
	CHECK_STR(out->name, "SGDRegressorTrainer_2");
	CHECK(isnan(out->mae));
	msg.model.test_slots = 20;
	CHECK(md_store_put(s, &msg.model, 0, &out, err, sizeof err) == MD_PUT_REPLACED);
	CHECK(out->mae == 0);
	msg.model.test_slots = 0;
	msg.model.n_zones = 1;
	snprintf(msg.model.type, sizeof msg.model.type, "Watts");
	CHECK(md_store_put(s, &msg.model, 0, &out, err, sizeof err) == MD_PUT_ERROR);
	CHECK(strstr(err, "Watts") != NULL);
	wb_msg_clear(&msg);
	md_store_destroy(&s);

	/* reloaded from disk: the same two models; a corrupt one is skipped with its path */
	char bad[600];
	snprintf(bad, sizeof bad, "%s/wattbus/rapl-sysfs/AbsPower/ThirdParty/SGDRegressorTrainer_7",
		 dir);
	CHECK(mkdir(bad, 0700) == 0);
	char path[700];
	snprintf(path, sizeof path, "%s/metadata.json", bad);
	FILE *f = fopen(path, "w");
	fputs("{\"model_name\": ", f);
	fclose(f);
	snprintf(path, sizeof path, "%s/weight.json", bad);
	f = fopen(path, "w");
	fputs("{}", f);
	fclose(f);
	s = md_store_new(dir, "wattbus", "rapl-sysfs");
	CHECK(md_store_load(s, err, sizeof err) == 0);
	CHECK_U64(s->nmodels, 3);
	CHECK_U64(s->skipped, 1);
	CHECK(s->nerrors == 1 && strstr(s->errors[0].path, "SGDRegressorTrainer_7/metadata.json"));
	CHECK(s->nmodels == 3 && !strcmp(s->models[0]->origin, "bus:b"));
	CHECK(s->nmodels == 3 && s->models[0]->mae == 6);
	/* and it serves them: the machine's node type */
	struct md_request r;
	const char *q =
	    "{\"metrics\":[\"bpf_cpu_time_ms\"],\"output_type\":\"AbsPower\",\"weight\":true,\"machine_spec\":{\"processor\":\"Intel(R) Xeon(R) CPU X @ 2GHz\",\"cores\":16,\"chips\":1,\"memory\":16,\"frequency\":3000}}";
	CHECK(md_request_parse(q, strlen(q), &r, err, sizeof err) == 0);
	const struct md_model *m = md_select(s, &r, err, sizeof err);
	CHECK(m && !strcmp(m->name, "SGDRegressorTrainer_1"));
	md_request_free(&r);
	/* the exact fit, reloaded with its mae 0, is served for its machine */
	q = "{\"metrics\":[\"bpf_cpu_time_ms\"],\"output_type\":\"AbsPower\",\"weight\":true,\"machine_spec\":{\"processor\":\"Intel(R) Xeon(R) CPU X @ 2GHz\",\"cores\":4,\"chips\":1,\"memory\":16,\"frequency\":3000}}";
	CHECK(md_request_parse(q, strlen(q), &r, err, sizeof err) == 0);
	m = md_select(s, &r, err, sizeof err);
	CHECK(m && !strcmp(m->name, "SGDRegressorTrainer_2") && m->mae == 0);
	md_request_free(&r);
	md_store_destroy(&s);
	char cmd[600];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	CHECK(system(cmd) == 0);
}

/* The budget refuses before anything changes; untrusted hosts go apart and replace only their
 * own; an import named like the bus's pipelines is refused. */
static void test_policy(void)
{
	char dir[256], err[512], index[300], cmd[600];
	unit_tmp(dir, sizeof(dir), "wb-modeld-XXXXXX");
	CHECK(mkdtemp(dir) != NULL);
	struct md_store *s = md_store_new(dir, "wattbus", "rapl-sysfs");
	char *trusted[] = {"a"};
	struct md_policy pol = {.max_models = 3,
				.max_models_per_host = 2,
				.max_node_types = 2,
				.max_node_types_per_host = 1,
				.max_bytes = 1 << 20,
				.max_bytes_per_host = 1 << 20,
				.max_hosts = 8,
				.models_per_host_per_min = 2,
				.trusted = trusted,
				.ntrusted = 1};
	snprintf(pol.apart, sizeof pol.apart, "apart");
	CHECK(md_store_policy(s, &pol, err, sizeof err) == 0);
	CHECK(md_store_load(s, err, sizeof err) == 0);
	struct wb_msg msg;
	const struct md_model *out;
	make_msg(&msg, "a", 5);
	CHECK(md_store_put(s, &msg.model, 0, &out, err, sizeof err) == MD_PUT_NEW);
	CHECK_STR(out->pipeline, "wattbus");
	/* another machine of the same host: past max_node_types_per_host; nothing written */
	struct stat before, after;
	snprintf(index, sizeof index, "%s/wattbus/node_type_index.json", dir);
	CHECK(stat(index, &before) == 0);
	msg.model.spec.cores = 16;
	CHECK(md_store_put(s, &msg.model, 0, &out, err, sizeof err) == MD_PUT_OVER_BUDGET);
	CHECK(strstr(err, "max_node_types_per_host") != NULL);
	CHECK(stat(index, &after) == 0 && after.st_ino == before.st_ino);
	CHECK(s->nmodels == 1 && s->bus_types == 1);
	/* the rate: a bucket of 2 a minute; the third at once is refused, one 30 s later passes */
	msg.model.spec.cores = 8;
	CHECK(md_store_put(s, &msg.model, 0, &out, err, sizeof err) == MD_PUT_RATE_LIMITED);
	CHECK(md_store_put(s, &msg.model, 30000000000ull, &out, err, sizeof err) ==
	      MD_PUT_REPLACED);
	wb_msg_clear(&msg);
	/* an untrusted host with a lower mae: apart, the trusted model untouched */
	make_msg(&msg, "z", 1e-300);
	CHECK(md_store_put(s, &msg.model, 0, &out, err, sizeof err) == MD_PUT_NEW);
	CHECK_STR(out->pipeline, "apart");
	CHECK(md_store_pipeline(s, "apart")->apart);
	wb_msg_clear(&msg);
	/* another untrusted host: kept out of the untrusted model's place, whatever its mae */
	make_msg(&msg, "y", 1e-301);
	CHECK(md_store_put(s, &msg.model, 0, &out, err, sizeof err) == MD_PUT_KEPT);
	CHECK_STR(out->host, "z");
	/* a new node type past max_node_types (2: wattbus 0 and apart 0) */
	msg.model.spec.cores = 32;
	CHECK(md_store_put(s, &msg.model, 0, &out, err, sizeof err) == MD_PUT_OVER_BUDGET);
	CHECK(strstr(err, "max_node_types (max_node_types = 2)") != NULL);
	wb_msg_clear(&msg);
	/* an import named like the own or untrusted pipeline */
	char imp[300];
	snprintf(imp, sizeof imp, "%s/imp", dir);
	CHECK(mkdir(imp, 0700) == 0);
	snprintf(cmd, sizeof cmd, "echo '{\"name\": \"apart\"}' > '%s/metadata.json'", imp);
	CHECK(system(cmd) == 0);
	CHECK(md_store_import(s, imp, err, sizeof err) < 0);
	CHECK(strstr(err, "refused: its name apart") != NULL);
	md_store_destroy(&s);
	/* reloaded: the accounts are rebuilt from the files */
	s = md_store_new(dir, "wattbus", "rapl-sysfs");
	CHECK(md_store_policy(s, &pol, err, sizeof err) == 0);
	CHECK(md_store_load(s, err, sizeof err) == 0);
	CHECK(s->bus_models == 2 && s->bus_types == 2 && s->bus_bytes > 0);
	md_store_destroy(&s);
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	CHECK(system(cmd) == 0);
}

static const struct unit_case cases[] = {
    {"processor names as Kepler formats them", test_processor},
    {"node type by machine spec (cover, most members, similarity)", test_node_type},
    {"feature groups and weight-capable trainers", test_groups},
    {"filters: parse and pass", test_filter},
    {"model requests: parsed strictly, every fault named", test_request},
    {"the store: node types, replacement, reload, corrupt entries", test_store},
    {"the store's budget, rate and trust", test_policy},
};

UNIT_MAIN(cases)
