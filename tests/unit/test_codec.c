/* Codec: round trip of every kind, every truncation, and a table of mutations. */
#include <malloc.h>
#include <math.h>

#include <msgpack.h>

#include "bus.h"
#include "codec.h"
#include "codec_rules.h"
#include "json.h"
#include "unit.h"

/*
 * A message of each kind with every key set to a non-zero value, from
 * tests/data/messages.jsonl (the bats suites use the same file).
 */
static char *valid[WB_NKINDS];

static void load_valid(void)
{
	const char *root = getenv("WB_ROOT");
	char path[512];
	snprintf(path, sizeof(path), "%s/tests/data/messages.jsonl", root ? root : ".");
	FILE *f = fopen(path, "r");
	char line[8192];
	while (f && fgets(line, sizeof(line), f)) {
		json_t *j = json_loads(line, 0, NULL);
		json_t *m = json_object_get(j, "msg");
		const char *kind = json_string_value(json_object_get(m, "kind"));
		enum wb_kind k = kind ? wb_kind_from_name(kind, strlen(kind)) : WB_KIND_NONE;
		if (k != WB_KIND_NONE)
			valid[k] = json_dumps(m, JSON_COMPACT);
		json_decref(j);
	}
	if (f)
		fclose(f);
	for (int k = 0; k < WB_NKINDS; k++)
		if (!valid[k]) {
			printf("Bail out! %s has no %s message\n", path, wb_kinds[k].name);
			exit(1);
		}
}

static int to_msgpack(const char *json_text, char **buf, size_t *len)
{
	json_error_t jerr;
	json_t *j = json_loads(json_text, 0, &jerr);
	if (!j) {
		printf("# bad test JSON: %s\n", jerr.text);
		return -1;
	}
	struct wb_err err;
	int rc = wb_json_to_msgpack(j, buf, len, &err);
	json_decref(j);
	return rc;
}

static void test_round_trip(void)
{
	for (int k = 0; k < WB_NKINDS; k++) {
		char *buf, *again;
		size_t len, len2;
		struct wb_msg msg;
		struct wb_err err;
		CHECK(to_msgpack(valid[k], &buf, &len) == 0);
		int rc = wb_decode(buf, len, &msg, &err);
		if (rc < 0)
			printf("# %s: %s\n", wb_kinds[k].name, err.msg);
		CHECK(rc == 0);
		CHECK(msg.kind == (enum wb_kind)k);
		/* Re-encode, decode again, re-encode: the bytes must be stable. */
		CHECK(wb_encode(&msg, &again, &len2, &err) == 0);
		struct wb_msg msg2;
		CHECK(wb_decode(again, len2, &msg2, &err) == 0);
		char *third;
		size_t len3;
		CHECK(wb_encode(&msg2, &third, &len3, &err) == 0);
		CHECK(len2 == len3 && memcmp(again, third, len2) == 0);
		/* Nothing was dropped: the JSON views of the original and the re-encoded frame are
		 * equal. */
		json_t *a = wb_msgpack_to_json(buf, len, &err),
		       *b = wb_msgpack_to_json(again, len2, &err);
		CHECK(a && b && json_equal(a, b));
		json_decref(a);
		json_decref(b);
		free(third);
		free(again);
		free(buf);
		wb_msg_clear(&msg);
		wb_msg_clear(&msg2);
	}
}

static void test_fields_decoded(void)
{
	char *buf;
	size_t len;
	struct wb_msg m;
	struct wb_err err;
	CHECK(to_msgpack(valid[WB_USAGE], &buf, &len) == 0);
	CHECK(wb_decode(buf, len, &m, &err) == 0);
	CHECK_STR(m.env.host, "node-1");
	CHECK_STR(m.usage.env.src, "usaged/bpf");
	CHECK_U64(m.usage.env.epoch, 3);
	CHECK_U64(m.usage.n_procs, 1);
	CHECK_U64(m.usage.procs[0].pid, 42);
	CHECK_STR(m.usage.procs[0].comm, "stress-ng");
	CHECK(m.usage.procs[0].exited);
	CHECK_U64(m.usage.cpu.steal_ns, 8);
	CHECK_U64(m.usage.n_counters, 2);
	CHECK_STR(m.usage.counters[1], "instructions");
	CHECK_STR(m.usage.cgroups[0].container_id, "abc");
	wb_msg_clear(&m);
	free(buf);
	/* A VM's cumulative energy per zone (optional, v stays 1). */
	CHECK(to_msgpack(valid[WB_ESTIMATE], &buf, &len) == 0);
	CHECK(wb_decode(buf, len, &m, &err) == 0);
	CHECK_U64(m.estimate.n_vms, 1);
	CHECK_U64(m.estimate.vms[0].n_total_uj, 1);
	CHECK_U64(m.estimate.vms[0].total_uj[0], 5000);
	wb_msg_clear(&m);
	free(buf);
	CHECK(to_msgpack(valid[WB_MODEL], &buf, &len) == 0);
	CHECK(wb_decode(buf, len, &m, &err) == 0);
	CHECK_NEAR(m.model.zones[0].bias_w, 72.5, 0);
	CHECK_NEAR(m.model.zones[0].scales[0], 71901.5, 0);
	CHECK_U64(m.model.zones[0].n_weights, 1);
	CHECK_NEAR(m.model.mae, 1.5, 0);
	CHECK_NEAR(m.model.mape, 2.5, 0);
	CHECK_STR(m.model.spec.processor, "Intel(R) Xeon(R) Platinum 8259CL CPU @ 2.50GHz");
	CHECK_U64(m.model.spec.cores, 96);
	CHECK_U64(m.model.spec.chips, 2);
	CHECK_U64(m.model.spec.memory_gib, 371);
	CHECK_U64(m.model.spec.frequency_mhz, 3500);
	wb_msg_clear(&m);
	free(buf);
}

/* The model's spec is optional: a model without it (an older trainer) decodes with v 1, and an
 * empty spec is left out of the frame rather than sent as an empty map. */
static void test_model_spec_optional(void)
{
	char *buf, *again;
	size_t len, len2;
	struct wb_msg m;
	struct wb_err err;
	CHECK(
	    to_msgpack(
		"{\"v\":1,\"kind\":\"model\",\"host\":\"h\",\"src\":\"estimd\",\"epoch\":1,\"seq\":1,\"t\":9,\"name\":\"m\",\"type\":\"AbsPower\",\"features\":[\"bpf_cpu_time_ms\"],\"zones\":[{\"zone\":\"package\",\"bias_w\":1,\"weights\":[1],\"scales\":[1]}]}",
		&buf, &len) == 0);
	CHECK(wb_decode(buf, len, &m, &err) == 0);
	CHECK_U64(m.model.spec.cores, 0);
	CHECK_STR(m.model.spec.processor, "");
	CHECK(wb_encode(&m, &again, &len2, &err) == 0);
	json_t *j = wb_msgpack_to_json(again, len2, &err);
	CHECK(j && !json_object_get(j, "spec") && !json_object_get(j, "mae"));
	json_decref(j);
	free(again);
	m.model.spec.cores = 4;
	CHECK(wb_encode(&m, &again, &len2, &err) == 0);
	j = wb_msgpack_to_json(again, len2, &err);
	CHECK(j && json_integer_value(json_object_get(json_object_get(j, "spec"), "cores")) == 4);
	json_decref(j);
	free(again);
	wb_msg_clear(&m);
	free(buf);
	CHECK(to_msgpack(valid[WB_POWER], &buf, &len) == 0);
	CHECK(wb_decode(buf, len, &m, &err) == 0);
	CHECK_U64(m.power.n_zones, 3);
	const struct wb_power_zone *g = &m.power.zones[2];
	CHECK_STR(g->uuid, "GPU-5fb2");
	CHECK_STR(g->model, "NVIDIA H100 80GB HBM3");
	CHECK_STR(g->vendor, "nvidia");
	CHECK(g->mig && g->exclusive);
	CHECK_U64(g->n_gpu_procs, 2);
	CHECK_U64(g->gpu_procs[0].pid, 4242);
	CHECK_U64(g->gpu_procs[0].sm_ns, 600000000);
	CHECK_U64(g->gpu_procs[1].sm_ns, 1);
	CHECK_U64(m.power.zones[0].n_gpu_procs, 0);
	CHECK_STR(m.power.zones[0].uuid, "");
	wb_msg_clear(&m);
	free(buf);
	CHECK(to_msgpack(valid[WB_ALIGNED], &buf, &len) == 0);
	CHECK(wb_decode(buf, len, &m, &err) == 0);
	CHECK_U64(m.aligned.zones[0].gpu_samples, 2);
	CHECK_U64(m.aligned.zones[0].gpu_procs[0].pid, 4242);
	wb_msg_clear(&m);
	free(buf);
	CHECK(to_msgpack(valid[WB_ESTIMATE], &buf, &len) == 0);
	CHECK(wb_decode(buf, len, &m, &err) == 0);
	CHECK_NEAR(m.estimate.zones[0].idle_w, 17.5, 0);
	CHECK_STR(m.estimate.zones[0].uuid, "GPU-5fb2");
	wb_msg_clear(&m);
	free(buf);
}

static void test_every_truncation(void)
{
	for (int k = 0; k < WB_NKINDS; k++) {
		char *buf;
		size_t len;
		CHECK(to_msgpack(valid[k], &buf, &len) == 0);
		int bad = 0;
		for (size_t cut = 0; cut < len; cut++) {
			struct wb_msg m;
			struct wb_err err;
			if (wb_decode(buf, cut, &m, &err) == 0) {
				printf("# %s cut at %zu of %zu decoded\n", wb_kinds[k].name, cut,
				       len);
				wb_msg_clear(&m);
				bad++;
			} else if (err.reason != WB_R_MALFORMED) {
				printf("# %s cut at %zu: reason %s\n", wb_kinds[k].name, cut,
				       wb_reason_name(err.reason));
				bad++;
			}
		}
		CHECK(bad == 0);
		free(buf);
	}
}

/* Mutations expressed on the JSON of a valid message. */
struct mutation {
	enum wb_kind base;
	const char *what;
	const char *path;  /* "zones.0.energy_uj": object keys and array indexes */
	const char *value; /* JSON text to put there; NULL deletes */
	int ok;
	enum wb_reason reason;
	const char *in_msg;
};

static const struct mutation mutations[] = {
    {WB_POWER, "string where an integer goes", "zones.0.energy_uj", "\"12\"", 0, WB_R_TYPE,
     "zones[0].energy_uj"},
    {WB_POWER, "missing required key", "interval_ns", NULL, 0, WB_R_MISSING, "interval_ns"},
    {WB_POWER, "missing key in an element", "zones.1.name", NULL, 0, WB_R_MISSING, "zones[1]"},
    {WB_POWER, "unknown version", "v", "2", 0, WB_R_VERSION, "version 2"},
    {WB_POWER, "version as string", "v", "\"1\"", 0, WB_R_VERSION, "v:"},
    {WB_POWER, "unknown kind", "kind", "\"powr\"", 0, WB_R_KIND, "powr"},
    {WB_POWER, "missing kind", "kind", NULL, 0, WB_R_KIND, "kind"},
    {WB_POWER, "host too long", "host",
     "\"0123456789012345678901234567890123456789012345678901234567890123\"", 0, WB_R_BOUND, "host"},
    {WB_POWER, "empty host", "host", "\"\"", 0, WB_R_BOUND, "host"},
    {WB_POWER, "negative energy", "zones.0.energy_uj", "-5", 0, WB_R_BOUND, "zones[0].energy_uj"},
    {WB_POWER, "interval below bound", "interval_ns", "10", 0, WB_R_BOUND, "interval_ns"},
    {WB_POWER, "zones not an array", "zones", "{}", 0, WB_R_TYPE, "zones"},
    {WB_POWER, "unknown key ignored", "colour", "\"blue\"", 1, 0, NULL},
    {WB_POWER, "nil optional key", "zones.0.path", "null", 1, 0, NULL},
    {WB_POWER, "nil required key", "t", "null", 0, WB_R_TYPE, "t"},
    {WB_POWER, "GPU process pid beyond pid_max", "zones.2.gpu_procs.0.pid", "4194305", 0,
     WB_R_BOUND, "zones[2].gpu_procs[0].pid"},
    {WB_POWER, "GPU process without sm_ns", "zones.2.gpu_procs.1.sm_ns", NULL, 0, WB_R_MISSING,
     "zones[2].gpu_procs[1]"},
    {WB_POWER, "GPU uuid too long", "zones.2.uuid",
     "\"GPU-0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123\"",
     0, WB_R_BOUND, "zones[2].uuid"},
    {WB_ALIGNED, "GPU sm_ns negative", "zones.0.gpu_procs.0.sm_ns", "-1", 0, WB_R_BOUND,
     "zones[0].gpu_procs[0].sm_ns"},
    {WB_ESTIMATE, "GPU idle_w negative", "zones.0.idle_w", "-1.0", 0, WB_R_BOUND,
     "zones[0].idle_w"},
    {WB_USAGE, "float where integer goes", "procs.0.cpu_ns", "1.5", 0, WB_R_TYPE,
     "procs[0].cpu_ns"},
    {WB_USAGE, "bool as int", "full", "1", 0, WB_R_TYPE, "full"},
    {WB_USAGE, "comm too long", "procs.0.comm", "\"0123456789abcdefg\"", 0, WB_R_BOUND,
     "procs[0].comm"},
    {WB_USAGE, "pid beyond pid_max", "procs.0.pid", "4194305", 0, WB_R_BOUND, "procs[0].pid"},
    {WB_USAGE, "cpu not a map", "cpu", "[1]", 0, WB_R_TYPE, "cpu"},
    {WB_USAGE, "missing cpu key", "cpu.steal_ns", NULL, 0, WB_R_MISSING,
     "cpu: missing required key 'steal_ns'"},
    {WB_USAGE, "counter name not a string", "counters.0", "7", 0, WB_R_TYPE, "counters[0]"},
    {WB_ESTIMATE, "ratio above 1", "cpu_usage_ratio", "1.5", 0, WB_R_BOUND, "cpu_usage_ratio"},
    {WB_ESTIMATE, "integer in a float key", "cpu_usage_ratio", "1", 1, 0, NULL},
    {WB_ESTIMATE, "energy array item wrong type", "procs.0.energy_uj.0", "\"x\"", 0, WB_R_TYPE,
     "procs[0].energy_uj[0]"},
    /* integer arrays are read in a loop of their own: its way out at each fault */
    {WB_ESTIMATE, "energy array, a negative third item", "procs.0.energy_uj", "[1, 300, -3]", 0,
     WB_R_BOUND, "procs[0].energy_uj[2]"},
    {WB_ESTIMATE, "energy array, a float second item", "procs.0.energy_uj", "[70000, 1.5]", 0,
     WB_R_TYPE, "procs[0].energy_uj[1]"},
    {WB_ESTIMATE, "energy array, every integer width", "procs.0.energy_uj",
     "[0, 127, 128, 255, 256, 65535, 65536, 4294967295, 4294967296, 9223372036854775807]", 1, 0,
     NULL},
    {WB_MODEL, "zero scale", "zones.0.scales.0", "0.0", 0, WB_R_BOUND, "zones[0].scales[0]"},
    {WB_MODEL, "no zones", "zones", "[]", 0, WB_R_BOUND, "zones"},
    {WB_STAT, "top-level seq too big", "seq", "9223372036854775807", 1, 0, NULL},
    {WB_USAGE, "exe id 0", "exes.0.id", "0", 0, WB_R_BOUND, "exes[0].id"},
    {WB_USAGE, "exe without path", "exes.0.path", NULL, 0, WB_R_MISSING, "exes[0]"},
    {WB_USAGE, "empty exe path", "exes.0.path", "\"\"", 0, WB_R_BOUND, "exes[0].path"},
    {WB_USAGE, "exe path of 512 bytes", "exes.0.path",
     "\"/0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890\"",
     0, WB_R_BOUND, "exes[0].path"},
    {WB_USAGE, "exe_id negative", "procs.0.exe_id", "-1", 0, WB_R_BOUND, "procs[0].exe_id"},
    {WB_USAGE, "exe_id not in exes is no fault", "procs.0.exe_id", "78", 1, 0, NULL},
    {WB_USAGE, "exes not an array", "exes", "{}", 0, WB_R_TYPE, "exes"},
    {WB_ALIGNED, "aligned exe path a number", "exes.0.path", "5", 0, WB_R_TYPE, "exes[0].path"},
    {WB_ESTIMATE, "estimate exe_id a string", "procs.0.exe_id", "\"9\"", 0, WB_R_TYPE,
     "procs[0].exe_id"},
    /* Names are data: an identity (x-identity in the schema) holds no control character, and
     * the refusal names the key and the character; data from a kernel or kubelet may. */
    {WB_POWER, "host with a newline", "host", "\"node1\\nforged\"", 0, WB_R_TYPE,
     "host: control character U+000A at byte 5"},
    {WB_POWER, "host with an escape sequence", "host", "\"n\\u001b[2J\"", 0, WB_R_TYPE,
     "host: control character U+001B at byte 1"},
    {WB_POWER, "src with DEL", "src", "\"powerd\\u007f\"", 0, WB_R_TYPE,
     "src: control character U+007F"},
    {WB_POWER, "zone name with a C1 CSI", "zones.1.name", "\"dram\\u009b2J\"", 0, WB_R_TYPE,
     "zones[1].name: control character U+009B at byte 4"},
    {WB_POWER, "zone kind with a tab", "zones.0.zone", "\"pack\\tage\"", 0, WB_R_TYPE,
     "zones[0].zone: control character U+0009"},
    {WB_POWER, "source with a CR", "zones.0.source", "\"rapl\\r\"", 0, WB_R_TYPE,
     "zones[0].source"},
    {WB_POWER, "host with a quote and U+00A0 (not C1) is a name", "host", "\"n'o\\\"d\\u00a0e\"", 1,
     0, NULL},
    {WB_POWER, "zone path is data", "zones.0.path", "\"/sys/x\\u001b[2J\"", 1, 0, NULL},
    {WB_POWER, "GPU model is data", "zones.2.model", "\"H100\\n\"", 1, 0, NULL},
    {WB_USAGE, "counter name with a newline", "counters.0", "\"cyc\\nles\"", 0, WB_R_TYPE,
     "counters[0]: control character U+000A"},
    {WB_USAGE, "comm is data", "procs.0.comm", "\"a\\u001b[2J\\n\"", 1, 0, NULL},
    {WB_ALIGNED, "power_host with a newline", "power_host", "\"a\\nb\"", 0, WB_R_TYPE,
     "power_host: control character"},
    {WB_ESTIMATE, "model name with a newline", "model", "\"m\\ninfo: forged\"", 0, WB_R_TYPE,
     "model: control character U+000A at byte 1"},
    {WB_ESTIMATE, "mode with a bell", "mode", "\"measured\\u0007\"", 0, WB_R_TYPE, "mode"},
    {WB_ESTIMATE, "container name is data", "containers.0.name", "\"c\\u001b]0;x\\u0007\"", 1, 0,
     NULL},
    {WB_MODEL, "model name with an escape", "name", "\"x\\u001b[2J\"", 0, WB_R_TYPE,
     "name: control character U+001B"},
    {WB_MODEL, "node type (processor) with a newline", "spec.processor", "\"Xeon\\n\"", 0,
     WB_R_TYPE, "spec.processor: control character U+000A at byte 4"},
    {WB_MODEL, "feature with a C1", "features.0", "\"\\u0085cpu\"", 0, WB_R_TYPE,
     "features[0]: control character U+0085 at byte 0"},
    {WB_STAT, "stat counter name with a newline", "rejected_by.0.name", "\"x\\ny\"", 0, WB_R_TYPE,
     "rejected_by[0].name"},
};

/* Walk "a.0.b" in j and set or delete the last step. */
static int apply_path(json_t *j, const char *path, const char *value)
{
	char buf[128];
	snprintf(buf, sizeof(buf), "%s", path);
	char *save, *tok = strtok_r(buf, ".", &save);
	while (tok) {
		char *next = strtok_r(NULL, ".", &save);
		bool idx = tok[0] >= '0' && tok[0] <= '9';
		if (!next) {
			json_t *v = value ? json_loads(value, JSON_DECODE_ANY, NULL) : NULL;
			if (value && !v)
				return -1;
			if (idx)
				return value ? json_array_set_new(j, (size_t)atoi(tok), v)
					     : json_array_remove(j, (size_t)atoi(tok));
			return value ? json_object_set_new(j, tok, v) : json_object_del(j, tok);
		}
		j = idx ? json_array_get(j, (size_t)atoi(tok)) : json_object_get(j, tok);
		if (!j)
			return -1;
		tok = next;
	}
	return -1;
}

static void test_mutations(void)
{
	for (size_t i = 0; i < sizeof(mutations) / sizeof(mutations[0]); i++) {
		const struct mutation *mu = &mutations[i];
		json_t *j = json_loads(valid[mu->base], 0, NULL);
		CHECK(apply_path(j, mu->path, mu->value) == 0);
		char *buf;
		size_t len;
		struct wb_err err = {0};
		CHECK(wb_json_to_msgpack(j, &buf, &len, &err) == 0);
		struct wb_msg m;
		int rc = wb_decode(buf, len, &m, &err);
		if ((rc == 0) != mu->ok) {
			printf("# mutation '%s': decode %s (%s)\n", mu->what,
			       rc == 0 ? "accepted" : "rejected", err.msg);
			unit_failed_checks++;
		} else if (!mu->ok && (err.reason != mu->reason || !strstr(err.msg, mu->in_msg))) {
			printf(
			    "# mutation '%s': reason %s, message \"%s\"; expected %s with \"%s\"\n",
			    mu->what, wb_reason_name(err.reason), err.msg,
			    wb_reason_name(mu->reason), mu->in_msg);
			unit_failed_checks++;
		}
		if (rc == 0)
			wb_msg_clear(&m);
		free(buf);
		json_decref(j);
	}
}

static int raw_decode(msgpack_sbuffer *sb, struct wb_err *err)
{
	struct wb_msg m;
	int rc = wb_decode(sb->data, sb->size, &m, err);
	if (rc == 0)
		wb_msg_clear(&m);
	return rc;
}

static void pack_s(msgpack_packer *pk, const char *s)
{
	msgpack_pack_str(pk, strlen(s));
	msgpack_pack_str_body(pk, s, strlen(s));
}

/* Faults JSON cannot express: bytes, NaN, duplicate keys, huge headers. */
static void test_binary_faults(void)
{
	struct wb_err err;
	char *buf;
	size_t len;
	CHECK(to_msgpack(valid[WB_STAT], &buf, &len) == 0);
	char *longer = malloc(len + 1);
	memcpy(longer, buf, len);
	longer[len] = (char)0xc0;
	struct wb_msg m;
	CHECK(wb_decode(longer, len + 1, &m, &err) < 0 && err.reason == WB_R_TRAILING);
	free(longer);
	free(buf);

	static const unsigned char huge_array[] = {0xdd, 0xff, 0xff, 0xff, 0xff};
	CHECK(wb_decode(huge_array, sizeof(huge_array), &m, &err) < 0 &&
	      err.reason == WB_R_MALFORMED);
	static const unsigned char huge_str[] = {0x81, 0xa1, 'v', 0xdb, 0x7f, 0xff, 0xff, 0xff};
	CHECK(wb_decode(huge_str, sizeof(huge_str), &m, &err) < 0 && err.reason == WB_R_MALFORMED);
	static const unsigned char bad_byte[] = {0x81, 0xa1, 'v', 0xc1};
	CHECK(wb_decode(bad_byte, sizeof(bad_byte), &m, &err) < 0 && err.reason == WB_R_MALFORMED);
	unsigned char deep[64];
	memset(deep, 0x91, sizeof(deep));
	deep[63] = 0x01;
	CHECK(wb_decode(deep, sizeof(deep), &m, &err) < 0 && err.reason == WB_R_MALFORMED &&
	      strstr(err.msg, "nested"));
	static const unsigned char array_top[] = {0x91, 0x01};
	CHECK(wb_decode(array_top, sizeof(array_top), &m, &err) < 0 && err.reason == WB_R_NOT_MAP);

	msgpack_sbuffer sb;
	msgpack_packer pk;
	/* A duplicate key. */
	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	msgpack_pack_map(&pk, 3);
	pack_s(&pk, "kind");
	pack_s(&pk, "stat");
	pack_s(&pk, "v");
	msgpack_pack_uint8(&pk, 1);
	pack_s(&pk, "v");
	msgpack_pack_uint8(&pk, 1);
	CHECK(raw_decode(&sb, &err) < 0 && err.reason == WB_R_DUPLICATE && strstr(err.msg, "v:"));
	msgpack_sbuffer_destroy(&sb);

	/* A key holding a NUL is a different, unknown key: "t\0x" must not be taken for "t". */
	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	msgpack_pack_map(&pk, 7);
	pack_s(&pk, "v");
	msgpack_pack_uint8(&pk, 1);
	pack_s(&pk, "kind");
	pack_s(&pk, "stat");
	msgpack_pack_str(&pk, 3);
	msgpack_pack_str_body(&pk, "t\0x", 3);
	msgpack_pack_uint8(&pk, 1);
	pack_s(&pk, "host");
	pack_s(&pk, "h");
	pack_s(&pk, "src");
	pack_s(&pk, "s");
	pack_s(&pk, "epoch");
	msgpack_pack_uint8(&pk, 1);
	pack_s(&pk, "seq");
	msgpack_pack_uint8(&pk, 1);
	CHECK(raw_decode(&sb, &err) < 0 && err.reason == WB_R_MISSING && strstr(err.msg, "'t'"));
	msgpack_sbuffer_destroy(&sb);

	/* NaN in a float key, invalid UTF-8 and a NUL in strings. */
	const struct {
		const char *key;
		enum wb_reason reason;
	} cases[] = {
	    {"nan", WB_R_BOUND}, {"utf8", WB_R_TYPE}, {"nul", WB_R_TYPE}, {"intkey", WB_R_TYPE}};
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		msgpack_sbuffer_init(&sb);
		msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
		msgpack_pack_map(&pk, 7);
		pack_s(&pk, "v");
		msgpack_pack_uint8(&pk, 1);
		pack_s(&pk, "kind");
		pack_s(&pk, "estimate");
		if (c == 1) {
			pack_s(&pk, "host");
			msgpack_pack_str(&pk, 2);
			msgpack_pack_str_body(&pk, "\xc3\x28", 2);
		} else if (c == 2) {
			pack_s(&pk, "host");
			msgpack_pack_str(&pk, 3);
			msgpack_pack_str_body(&pk, "a\0b", 3);
		} else if (c == 3) {
			msgpack_pack_uint8(&pk, 7);
			msgpack_pack_uint8(&pk, 7);
		} else {
			pack_s(&pk, "host");
			pack_s(&pk, "h");
		}
		pack_s(&pk, "src");
		pack_s(&pk, "s");
		pack_s(&pk, "epoch");
		msgpack_pack_uint8(&pk, 1);
		pack_s(&pk, "seq");
		msgpack_pack_uint8(&pk, 1);
		pack_s(&pk, "cpu_usage_ratio");
		msgpack_pack_double(&pk, NAN);
		int rc = raw_decode(&sb, &err);
		if (rc == 0 || err.reason != cases[c].reason) {
			printf("# binary case %s: rc %d reason %s (%s)\n", cases[c].key, rc,
			       wb_reason_name(err.reason), err.msg);
			unit_failed_checks++;
		}
		msgpack_sbuffer_destroy(&sb);
	}
}

/* Executables: exe_id on processes and the exes dictionary of usage, aligned and estimate. */
static void test_exes(void)
{
	char *buf;
	size_t len;
	struct wb_msg m;
	struct wb_err err;
	CHECK(to_msgpack(valid[WB_USAGE], &buf, &len) == 0);
	CHECK(wb_decode(buf, len, &m, &err) == 0);
	CHECK_U64(m.usage.procs[0].exe_id, 77);
	CHECK_U64(m.usage.n_exes, 1);
	CHECK_U64(m.usage.exes[0].id, 77);
	CHECK_STR(m.usage.exes[0].path, "/usr/bin/stress-ng");
	wb_msg_clear(&m);
	/* Invalid UTF-8 in a path is a type fault naming it. */
	char *p = memmem(buf, len, "/usr/bin/stress-ng", 18);
	CHECK(p != NULL);
	if (p) {
		p[5] = (char)0xff;
		CHECK(wb_decode(buf, len, &m, &err) < 0 && err.reason == WB_R_TYPE &&
		      strstr(err.msg, "exes[0].path"));
	}
	free(buf);
	CHECK(to_msgpack(valid[WB_ALIGNED], &buf, &len) == 0);
	CHECK(wb_decode(buf, len, &m, &err) == 0);
	CHECK_U64(m.aligned.procs[0].exe_id, 9);
	CHECK_U64(m.aligned.n_exes, 1);
	CHECK_STR(m.aligned.exes[0].path, "/bin/a (deleted)");
	wb_msg_clear(&m);
	free(buf);
	CHECK(to_msgpack(valid[WB_ESTIMATE], &buf, &len) == 0);
	CHECK(wb_decode(buf, len, &m, &err) == 0);
	CHECK_U64(m.estimate.procs[0].exe_id, 9);
	CHECK_U64(m.estimate.n_exes, 1);
	CHECK_STR(m.estimate.exes[0].path, "/bin/a");
	wb_msg_clear(&m);
	free(buf);

	/* A message without the keys: exe_id 0, no exes (optional keys, v stays 1). */
	json_t *j = json_loads(valid[WB_USAGE], 0, NULL);
	json_object_del(j, "exes");
	json_object_del(json_array_get(json_object_get(j, "procs"), 0), "exe_id");
	CHECK(wb_json_to_msgpack(j, &buf, &len, &err) == 0);
	CHECK(wb_decode(buf, len, &m, &err) == 0);
	CHECK_U64(m.usage.procs[0].exe_id, 0);
	CHECK_U64(m.usage.n_exes, 0);
	wb_msg_clear(&m);
	free(buf);

	/* More entries than the schema's 65536 is a bound fault, not an allocation. */
	json_t *many = json_array();
	for (int i = 0; i < 65537; i++)
		json_array_append_new(many, json_pack("{s:i, s:s}", "id", i + 1, "path", "/x"));
	json_object_set_new(j, "exes", many);
	CHECK(wb_json_to_msgpack(j, &buf, &len, &err) == 0);
	CHECK(wb_decode(buf, len, &m, &err) < 0 && err.reason == WB_R_BOUND &&
	      strstr(err.msg, "exes"));
	free(buf);
	json_decref(j);
}

static void test_topic_check(void)
{
	char *buf;
	size_t len;
	struct wb_msg m;
	struct wb_err err;
	CHECK(to_msgpack(valid[WB_POWER], &buf, &len) == 0);
	CHECK(wb_frame_check("power/node-1", buf, len, &m, &err) == 0);
	wb_msg_clear(&m);
	CHECK(wb_frame_check("power/node-2", buf, len, &m, &err) < 0 && err.reason == WB_R_TOPIC);
	CHECK(wb_frame_check("usage/node-1", buf, len, &m, &err) < 0 && err.reason == WB_R_TOPIC);
	free(buf);
}

/* The encoder applies the receiver's bounds, naming the key: a producer fails loudly. */
static void test_encode_value_bounds(void)
{
	char *buf, *out;
	size_t len;
	struct wb_msg m;
	struct wb_err err;
	CHECK(to_msgpack(valid[WB_USAGE], &buf, &len) == 0);
	CHECK(wb_decode(buf, len, &m, &err) == 0);
	m.usage.cpu.idle_ns =
	    9290000000000000000ull; /* /proc/stat on a 512-thread host after 208 days */
	CHECK(wb_encode(&m, &out, &len, &err) < 0 && err.reason == WB_R_BOUND &&
	      strstr(err.msg, "cpu.idle_ns"));
	m.usage.cpu.idle_ns = 1;
	m.usage.env.host[0] = '\0';
	CHECK(wb_encode(&m, &out, &len, &err) < 0 && err.reason == WB_R_BOUND &&
	      strstr(err.msg, "host"));
	snprintf(m.usage.env.host, sizeof(m.usage.env.host), "h");
	snprintf(m.usage.procs[0].comm, sizeof(m.usage.procs[0].comm), "\xff\xfe");
	CHECK(wb_encode(&m, &out, &len, &err) < 0 && err.reason == WB_R_TYPE &&
	      strstr(err.msg, "procs[0].comm"));
	snprintf(m.usage.procs[0].comm, sizeof(m.usage.procs[0].comm), "ok");
	CHECK(wb_encode(&m, &out, &len, &err) == 0);
	free(out);
	/* A producer cannot publish a name a receiver would refuse. */
	snprintf(m.usage.env.src, sizeof(m.usage.env.src), "usaged\x1b[2J");
	CHECK(wb_encode(&m, &out, &len, &err) < 0 && err.reason == WB_R_TYPE &&
	      strstr(err.msg, "src: control character U+001B at byte 6"));
	snprintf(m.usage.env.src, sizeof(m.usage.env.src), "usaged");
	snprintf(m.usage.procs[0].comm, sizeof(m.usage.procs[0].comm), "a\x1b[2J\n");
	CHECK(wb_encode(&m, &out, &len, &err) == 0); /* comm is data */
	free(out);
	wb_msg_clear(&m);
	free(buf);
	CHECK(to_msgpack(valid[WB_ESTIMATE], &buf, &len) == 0);
	CHECK(wb_decode(buf, len, &m, &err) == 0);
	m.estimate.cpu_usage_ratio = NAN;
	CHECK(wb_encode(&m, &out, &len, &err) < 0 && err.reason == WB_R_BOUND &&
	      strstr(err.msg, "cpu_usage_ratio"));
	m.estimate.cpu_usage_ratio = 0.5;
	CHECK(m.estimate.n_procs > 0 && m.estimate.procs[0].n_energy_uj > 0);
	m.estimate.procs[0].energy_uj[m.estimate.procs[0].n_energy_uj - 1] = 9223372036854775808ull;
	CHECK(wb_encode(&m, &out, &len, &err) < 0 && err.reason == WB_R_BOUND &&
	      strstr(err.msg, "procs[0].energy_uj["));
	wb_msg_clear(&m);
	free(buf);
}

/* A frame whose containers declare more objects than WB_OBJECTS_MAX is refused before they are
 * read. */
static void test_object_limit(void)
{
	size_t n = WB_OBJECTS_MAX + 16;
	unsigned char *b = malloc(n + 5);
	b[0] = 0xdd;
	b[1] = (unsigned char)(n >> 24);
	b[2] = (unsigned char)(n >> 16);
	b[3] = (unsigned char)(n >> 8);
	b[4] = (unsigned char)n;
	memset(b + 5, 0xc0, n);
	struct wb_msg m;
	struct wb_err err;
	CHECK(wb_decode(b, n + 5, &m, &err) < 0 && err.reason == WB_R_TOO_BIG &&
	      strstr(err.msg, "objects"));
	free(b);
}

static void test_encode_bounds(void)
{
	struct wb_msg m = {.kind = WB_POWER};
	m.power.env.v = 1;
	snprintf(m.power.env.kind, sizeof(m.power.env.kind), "power");
	snprintf(m.power.env.host, sizeof(m.power.env.host), "h");
	snprintf(m.power.env.src, sizeof(m.power.env.src), "s");
	m.power.interval_ns = 1000000000;
	m.power.n_zones = 300;
	m.power.zones = wb_array_new(300, sizeof(struct wb_power_zone));
	char *out;
	size_t len;
	struct wb_err err;
	CHECK(wb_encode(&m, &out, &len, &err) < 0 && err.reason == WB_R_BOUND &&
	      strstr(err.msg, "zones"));
	wb_msg_clear(&m);
	CHECK(m.power.zones == NULL && m.kind == WB_KIND_NONE);
}

/* The frame re-packed by msgpack-c's own packer (msgpack_pack_object) is the same bytes. */
static bool same_as_msgpack_c(const char *buf, size_t len)
{
	msgpack_unpacked up;
	msgpack_unpacked_init(&up);
	size_t off = 0;
	bool same = false;
	if (msgpack_unpack_next(&up, buf, len, &off) == MSGPACK_UNPACK_SUCCESS && off == len) {
		msgpack_sbuffer sb;
		msgpack_sbuffer_init(&sb);
		msgpack_packer pk;
		msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
		same = msgpack_pack_object(&pk, up.data) == 0 && sb.size == len &&
		       memcmp(sb.data, buf, len) == 0;
		msgpack_sbuffer_destroy(&sb);
	}
	msgpack_unpacked_destroy(&up);
	return same;
}

static void test_encode_bytes(void)
{
	for (int k = 0; k < WB_NKINDS; k++) {
		char *buf, *out;
		size_t len, olen;
		struct wb_msg msg;
		struct wb_err err;
		CHECK(to_msgpack(valid[k], &buf, &len) == 0);
		CHECK(wb_decode(buf, len, &msg, &err) == 0);
		CHECK(wb_encode(&msg, &out, &olen, &err) == 0);
		CHECK(same_as_msgpack_c(out, olen));
		free(out);
		free(buf);
		wb_msg_clear(&msg);
	}
	/* Every integer width and string header, and maps whose optional keys are left out. */
	static const uint64_t ints[] = {0,
					1,
					127,
					128,
					255,
					256,
					65535,
					65536,
					4294967295ull,
					4294967296ull,
					9223372036854775807ull};
	static const size_t lens[] = {0, 1, 31, 32, 255};
	size_t nz = sizeof(ints) / sizeof(ints[0]);
	struct wb_msg m = {.kind = WB_POWER};
	m.power.env.v = wb_kinds[WB_POWER].version;
	snprintf(m.power.env.kind, sizeof(m.power.env.kind), "power");
	snprintf(m.power.env.host, sizeof(m.power.env.host), "h");
	snprintf(m.power.env.src, sizeof(m.power.env.src), "s");
	m.power.env.epoch = 1;
	m.power.t = 1700000000000000000ull;
	m.power.interval_ns = 1000000000;
	m.power.n_zones = nz;
	m.power.zones = wb_array_new(nz, sizeof(struct wb_power_zone));
	for (size_t i = 0; i < nz; i++) {
		struct wb_power_zone *z = &m.power.zones[i];
		snprintf(z->name, sizeof(z->name), "z%zu", i);
		snprintf(z->zone, sizeof(z->zone), "package");
		z->index = ints[i] > 65535 ? 65535 - i : ints[i]; /* the schema's bound */
		memset(z->path, i % 2 ? 'p' : 0, lens[i % 5]);
		if (i == 4)
			memcpy(z->path, "\xc3\xa9t\xc3\xa9", 6); /* non-ASCII, valid */
		z->energy_uj = ints[i];
		z->max_energy_range_uj = ints[nz - 1 - i];
	}
	char *out, *again;
	size_t olen, alen;
	struct wb_err err;
	int rc = wb_encode(&m, &out, &olen, &err);
	if (rc < 0)
		printf("# %s\n", err.msg);
	CHECK(rc == 0);
	CHECK(same_as_msgpack_c(out, olen));
	/* A second encode (the buffer sized from the first) writes the same bytes. */
	CHECK(wb_encode(&m, &again, &alen, &err) == 0);
	CHECK(alen == olen && memcmp(out, again, olen) == 0);
	struct wb_msg back;
	CHECK(wb_decode(out, olen, &back, &err) == 0);
	CHECK(back.power.n_zones == nz && back.power.zones[10].energy_uj == ints[10] &&
	      back.power.zones[3].path[31] == 'p' && back.power.zones[3].path[32] == '\0');
	wb_msg_clear(&back);
	free(again);
	free(out);
	/* Strings the encoder still refuses: bad UTF-8 after an ASCII run, and a lone continuation
	 * byte. */
	memcpy(m.power.zones[1].path, "abcdefghij\xc3(", 13);
	CHECK(wb_encode(&m, &out, &olen, &err) < 0 && err.reason == WB_R_TYPE &&
	      strstr(err.msg, "zones[1].path"));
	memcpy(m.power.zones[1].path, "abcdefgh\x80", 10);
	CHECK(wb_encode(&m, &out, &olen, &err) < 0 && err.reason == WB_R_TYPE &&
	      strstr(err.msg, "UTF-8"));
	wb_msg_clear(&m);
}

/*
 * Integer arrays inside items: every width read back as written, in the pool
 * of the message, and the pool gone with wb_msg_clear (valgrind sees a leak).
 */
static void test_int_arrays(void)
{
	static const uint64_t ints[] = {
	    0,	   127,	  128,		 255,		256,
	    65535, 65536, 4294967295ull, 4294967296ull, 9223372036854775807ull};
	const size_t n = sizeof(ints) / sizeof(ints[0]);
	struct wb_msg m;
	struct wb_err err;
	char *buf, *out;
	size_t len, olen;
	CHECK(to_msgpack(valid[WB_ESTIMATE], &buf, &len) == 0);
	CHECK(wb_decode(buf, len, &m, &err) == 0);
	free(buf);
	uint64_t *mine[3];
	for (int p = 0; p < 3; p++)
		mine[p] = calloc(n, sizeof(uint64_t));
	for (size_t i = 0; i < n; i++)
		for (int p = 0; p < 3; p++)
			mine[p][i] = ints[(i + (size_t)p) % n];
	struct wb_est_proc procs[3];
	for (int p = 0; p < 3; p++) {
		procs[p] = m.estimate.procs[0];
		procs[p].pid = 10 + (uint64_t)p;
		procs[p].energy_uj = mine[p];
		procs[p].n_energy_uj = n;
	}
	struct wb_msg built = m;
	built.estimate.procs = procs;
	built.estimate.n_procs = 3;
	CHECK(wb_encode(&built, &out, &olen, &err) == 0);
	struct wb_msg back;
	CHECK(wb_decode(out, olen, &back, &err) == 0);
	CHECK(back.estimate.n_procs == 3);
	for (int p = 0; p < 3 && back.estimate.n_procs == 3; p++) {
		CHECK(back.estimate.procs[p].n_energy_uj == n);
		for (size_t i = 0; i < n && back.estimate.procs[p].n_energy_uj == n; i++)
			CHECK_U64(back.estimate.procs[p].energy_uj[i], mine[p][i]);
	}
	wb_msg_clear(&back);
	free(out);
	for (int p = 0; p < 3; p++)
		free(mine[p]);
	wb_msg_clear(&m);
}

/* Strings in items: ASCII and UTF-8 read back alike, on the fast path or not. */
static void test_item_strings(void)
{
	static const char *const comms[] = {"bash", "h\xc3\xa9llo", "\xe6\x97\xa5\xe6\x9c\xac",
					    "0123456789abcde"};
	const size_t n = sizeof(comms) / sizeof(comms[0]);
	struct wb_msg m;
	struct wb_err err;
	char *buf, *out;
	size_t len, olen;
	CHECK(to_msgpack(valid[WB_USAGE], &buf, &len) == 0);
	CHECK(wb_decode(buf, len, &m, &err) == 0);
	free(buf);
	struct wb_proc procs[4];
	for (size_t i = 0; i < n; i++) {
		procs[i] = m.usage.procs[0];
		procs[i].pid = 100 + i;
		snprintf(procs[i].comm, sizeof(procs[i].comm), "%s", comms[i]);
	}
	struct wb_msg built = m;
	built.usage.procs = procs;
	built.usage.n_procs = n;
	CHECK(wb_encode(&built, &out, &olen, &err) == 0);
	struct wb_msg back;
	CHECK(wb_decode(out, olen, &back, &err) == 0);
	CHECK(back.usage.n_procs == n);
	for (size_t i = 0; i < n && back.usage.n_procs == n; i++)
		CHECK_STR(back.usage.procs[i].comm, comms[i]);
	wb_msg_clear(&back);
	free(out);
	wb_msg_clear(&m);
}

/* The string rule byte by byte, as the codec said it before the rules were shared: the reference
 * that rule_str's 8-bytes-at-a-time ASCII check must agree with. */
static enum str_fault str_rule_bytewise(const struct wb_field *f, const uint8_t *s, size_t n)
{
	if (n < f->min_len || n > f->max_len)
		return STR_LEN;
	if (memchr(s, '\0', n))
		return STR_NUL;
	for (size_t i = 0, len; i < n; i += len)
		if (!(len = wb_utf8_seq_len(s + i, n - i)))
			return STR_UTF8;
	for (size_t i = 0, len; f->ident && i < n; i += len) {
		len = wb_utf8_seq_len(s + i, n - i);
		if (wb_utf8_is_control(s + i, len))
			return STR_CONTROL;
	}
	return STR_OK;
}

/* rule_str against the byte-wise rule: every byte value, and a two-byte sequence, at every
 * position of strings of 0 to 19 bytes (words and tails), for a name and for data. */
static void test_string_rule(void)
{
	struct wb_field name = {.type = WB_T_STR, .min_len = 1, .max_len = 18, .ident = 1};
	struct wb_field data = {.type = WB_T_STR, .min_len = 0, .max_len = 18, .ident = 0};
	static const char *const seqs[] = {"\xc3\xa9", "\xc2\x85", "\xc2\xa0", "\xed\xa0",
					   "\xc0\xaf"};
	unsigned wrong = 0, seen[STR_CONTROL + 1] = {0};
	uint8_t s[24];
	for (int fi = 0; fi < 2; fi++) {
		const struct wb_field *f = fi ? &data : &name;
		for (size_t n = 0; n < 20; n++)
			for (size_t p = 0; p < (n ? n : 1); p++)
				for (int b = 0; b < 256 + 5; b++) {
					memset(s, 'a', sizeof(s));
					if (n && b < 256)
						s[p] = (uint8_t)b;
					else if (n && p + 1 < n)
						memcpy(s + p, seqs[b - 256], 2);
					enum str_fault got = rule_str(f, s, n),
						       want = str_rule_bytewise(f, s, n);
					wrong += got != want;
					seen[want]++;
				}
	}
	CHECK_U64(wrong, 0);
	for (int k = STR_OK; k <= STR_CONTROL; k++)
		CHECK(seen[k] > 0);
}

/*
 * An item's absent keys read as 0 and "" even where its array takes memory a
 * message before held: the items are zeroed as they are read, not allocated
 * zeroed. Each round frees a full message and decodes a sparse one of the same
 * size, which malloc serves from the block just freed; M_PERTURB fills what
 * malloc hands out with non-zero bytes besides.
 */
static void test_items_zeroed(void)
{
	struct wb_msg m;
	struct wb_err err;
	char *buf;
	size_t len;
	CHECK(to_msgpack(valid[WB_USAGE], &buf, &len) == 0);
	CHECK(wb_decode(buf, len, &m, &err) == 0);
	free(buf);
	enum { N = 3000 };
	struct wb_proc *full = calloc(N, sizeof(*full)), *sparse = calloc(N, sizeof(*sparse));
	for (size_t i = 0; i < N; i++) {
		full[i] = m.usage.procs[0]; /* every key set */
		full[i].pid = sparse[i].pid = 1000 + i;
		full[i].exited = true;
		sparse[i].start_ns = full[i].start_ns;
	}
	char *fbuf, *sbuf;
	size_t flen, slen;
	struct wb_msg built = m;
	built.usage.procs = full;
	built.usage.n_procs = N;
	CHECK(wb_encode(&built, &fbuf, &flen, &err) == 0);
	built.usage.procs = sparse;
	CHECK(wb_encode(&built, &sbuf, &slen, &err) == 0);
	int dirty = 0;
	mallopt(M_PERTURB, 0x5a); /* malloc'd bytes are not zero, reused or not */
	for (int round = 0; round < 3; round++) {
		struct wb_msg a, b;
		CHECK(wb_decode(fbuf, flen, &a, &err) == 0);
		CHECK(a.usage.n_procs == N && a.usage.procs[N - 1].cpu_ns &&
		      a.usage.procs[N - 1].comm[0]);
		wb_msg_clear(&a);
		CHECK(wb_decode(sbuf, slen, &b, &err) == 0);
		for (size_t i = 0; i < b.usage.n_procs; i++) {
			const struct wb_proc *p = &b.usage.procs[i];
			dirty += p->pid != 1000 + i || p->comm[0] || p->cgroup_id || p->exe_id ||
				 p->cpu_ns || p->cycles || p->instructions || p->cache_misses ||
				 p->exited;
		}
		wb_msg_clear(&b);
	}
	mallopt(M_PERTURB, 0);
	CHECK_U64(dirty, 0);
	free(fbuf);
	free(sbuf);
	free(full);
	free(sparse);
	wb_msg_clear(&m);
}

static const struct unit_case cases[] = {
    {"round trip of every kind", test_round_trip},
    {"decoded fields", test_fields_decoded},
    {"the model's spec and errors are optional", test_model_spec_optional},
    {"every truncation is rejected as malformed", test_every_truncation},
    {"mutations give the right reason and key", test_mutations},
    {"exe_id and exes decode, and their faults are named", test_exes},
    {"binary faults (trailing, huge headers, NaN, UTF-8, duplicates)", test_binary_faults},
    {"topic must be KIND/HOST", test_topic_check},
    {"encoder refuses arrays beyond their bound", test_encode_bounds},
    {"encoder refuses values beyond their bounds, naming the key", test_encode_value_bounds},
    {"frames with too many objects are refused before reading them", test_object_limit},
    {"the encoder writes the bytes msgpack-c's packer writes", test_encode_bytes},
    {"integer arrays in items: every width read back, the pool freed", test_int_arrays},
    {"strings in items: ASCII and UTF-8 read back alike", test_item_strings},
    {"items' absent keys are zero in reused memory", test_items_zeroed},
    {"the string rule, 8 bytes at a time, is the byte-wise rule", test_string_rule},
};
int main(void)
{
	load_valid();
	return unit_run(cases, sizeof(cases) / sizeof(cases[0]), __FILE__);
}
