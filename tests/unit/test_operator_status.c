/*
 * wattbus-operator's pure core: the Available rule on DaemonSet states (kepler-
 * operator's six ordered steps), ModelServerAvailable, the status document with
 * its transition times, and wattbus.conf's keys set from a spec.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unit.h"

#include "../../operator/operator.h"

/* A DaemonSet of generation GEN with these status counts. */
static json_t *ds(int gen, int ogen, int desired, int ready, int updated, int avail, int unavail)
{
	return json_pack("{s{si} s{si si si si si si}}", "metadata", "generation", gen, "status",
			 "observedGeneration", ogen, "desiredNumberScheduled", desired,
			 "numberReady", ready, "updatedNumberScheduled", updated, "numberAvailable",
			 avail, "numberUnavailable", unavail);
}

static void test_available_steps(void)
{
	static const struct {
		int gen, ogen, desired, ready, updated, avail, unavail;
		enum op_cond_status status;
		const char *reason;
	} rows[] = {
	    /* 1. the DaemonSet controller has not seen generation 3 yet, whatever the counts */
	    {3, 2, 4, 4, 4, 4, 0, OP_UNKNOWN, "DaemonSetOutOfSync"},
	    /* 2. no node to run on (nodeSelector matches none), or none ready */
	    {1, 1, 0, 0, 0, 0, 0, OP_FALSE, "DaemonSetPodsNotRunning"},
	    {1, 1, 4, 0, 4, 0, 4, OP_FALSE, "DaemonSetPodsNotRunning"},
	    /* 3. a config change rolling: 1 of 4 pods has the new template */
	    {2, 2, 4, 4, 1, 4, 0, OP_UNKNOWN, "DaemonSetRolloutInProgress"},
	    /* 4. all updated, 3 of 4 available */
	    {2, 2, 4, 3, 4, 3, 1, OP_UNKNOWN, "DaemonSetPartiallyAvailable"},
	    /* 5. available counts all, yet a node reports none available (minReadySeconds) */
	    {2, 2, 4, 4, 4, 4, 1, OP_FALSE, "DaemonSetPartiallyAvailable"},
	    /* 6. everything up */
	    {2, 2, 4, 4, 4, 4, 0, OP_TRUE, "DaemonSetReady"},
	    /* an observed generation ahead of the object's is not "out of sync" */
	    {2, 3, 1, 1, 1, 1, 0, OP_TRUE, "DaemonSetReady"},
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		json_t *d = ds(rows[i].gen, rows[i].ogen, rows[i].desired, rows[i].ready,
			       rows[i].updated, rows[i].avail, rows[i].unavail);
		struct op_cond c;
		op_available(d, &c);
		if (c.status != rows[i].status || strcmp(c.reason, rows[i].reason) != 0)
			printf("#   row %zu: %s %s (%s), expected %s %s\n", i,
			       op_cond_status_str(c.status), c.reason, c.message,
			       op_cond_status_str(rows[i].status), rows[i].reason);
		CHECK(c.status == rows[i].status);
		CHECK_STR(c.reason, rows[i].reason);
		CHECK(c.message[0] != 0);
		json_decref(d);
	}
	struct op_cond c;
	op_available(NULL, &c);
	CHECK(c.status == OP_FALSE);
	CHECK_STR(c.reason, "DaemonSetNotFound");
}

static void test_available_messages(void)
{
	json_t *d = ds(2, 2, 4, 4, 1, 4, 0);
	struct op_cond c;
	op_available(d, &c);
	CHECK_STR(c.message,
		  "waiting for daemonset wattbus/wattbus rollout to finish: 1 of 4 pods updated");
	json_decref(d);
	d = ds(2, 2, 5, 5, 5, 5, 0);
	op_available(d, &c);
	CHECK_STR(c.message,
		  "daemonset wattbus/wattbus is deployed to all nodes and available; ready 5/5");
	json_decref(d);
}

static void test_model_server(void)
{
	struct op_cond c;
	op_model_available(false, NULL, NULL, &c);
	CHECK(c.status == OP_FALSE);
	CHECK_STR(c.reason, "ModelServerDisabled");
	op_model_available(true, "external is not supported", NULL, &c);
	CHECK_STR(c.reason, "ExternalStorageUnsupported");
	CHECK_STR(c.message, "external is not supported");
	op_model_available(true, NULL, NULL, &c);
	CHECK_STR(c.reason, "DeploymentNotFound");
	json_t *d = json_pack("{s{si} s{si si}}", "metadata", "generation", 1, "status",
			      "observedGeneration", 1, "availableReplicas", 0);
	op_model_available(true, NULL, d, &c);
	CHECK(c.status == OP_FALSE);
	CHECK_STR(c.reason, "ModelServerUnavailable");
	json_object_set_new(json_object_get(d, "status"), "availableReplicas", json_integer(1));
	op_model_available(true, NULL, d, &c);
	CHECK(c.status == OP_TRUE);
	CHECK_STR(c.reason, "ModelServerReady");
	json_object_set_new(json_object_get(d, "metadata"), "generation", json_integer(2));
	op_model_available(true, NULL, d, &c);
	CHECK(c.status == OP_UNKNOWN);
	CHECK_STR(c.reason, "DeploymentOutOfSync");
	json_decref(d);
}

static const json_t *cond(const json_t *st, const char *type)
{
	size_t i;
	json_t *c;
	json_array_foreach(json_object_get(st, "conditions"), i, c)
	{
		if (strcmp(json_string_value(json_object_get(c, "type")), type) == 0)
			return c;
	}
	return NULL;
}

/* A string member of the condition of that type; NULL when there is none. */
static const char *cond_str(const json_t *st, const char *type, const char *member)
{
	return json_string_value(json_object_get(cond(st, type), member));
}

static void test_status_document(void)
{
	json_t *wb = json_pack("{s{ss si}}", "metadata", "name", "wattbus", "generation", 7);
	json_t *d = ds(2, 2, 4, 3, 4, 3, 1);
	json_t *st = op_status(wb, d, NULL, false, NULL, NULL, NULL, NULL, "2026-01-01T00:00:00Z");
	CHECK_U64(json_integer_value(json_object_get(st, "observedGeneration")), 7);
	CHECK_U64(json_integer_value(json_object_get(st, "desiredNumberScheduled")), 4);
	CHECK_U64(json_integer_value(json_object_get(st, "numberAvailable")), 3);
	CHECK_U64(json_integer_value(json_object_get(st, "numberUnavailable")), 1);
	CHECK_STR(cond_str(st, "Reconciled", "reason"), "ReconcileSuccess");
	CHECK_STR(cond_str(st, "Available", "status"), "Unknown");
	CHECK_STR(cond_str(st, "Available", "reason"), "DaemonSetPartiallyAvailable");
	CHECK_U64(json_integer_value(json_object_get(cond(st, "Available"), "observedGeneration")),
		  7);
	CHECK_STR(cond_str(st, "Reconciled", "message"), "every object applied");
	json_t *stn = op_status(wb, d, NULL, false, NULL, NULL, NULL, "no ServiceMonitor",
				"2026-01-01T00:00:00Z");
	CHECK_STR(cond_str(stn, "Reconciled", "message"),
		  "every object applied; no ServiceMonitor");
	json_decref(stn);

	/* Later: Available keeps its status, so its transition time stays; Reconciled fails. */
	json_object_set_new(wb, "status", st);
	json_t *st2 = op_status(wb, d, NULL, false, NULL, NULL, "apply DaemonSet wattbus: 409",
				NULL, "2026-01-01T00:05:00Z");
	CHECK_STR(cond_str(st2, "Available", "lastTransitionTime"), "2026-01-01T00:00:00Z");
	CHECK_STR(cond_str(st2, "Reconciled", "status"), "False");
	CHECK_STR(cond_str(st2, "Reconciled", "reason"), "ReconcileError");
	CHECK_STR(cond_str(st2, "Reconciled", "message"), "apply DaemonSet wattbus: 409");
	CHECK_STR(cond_str(st2, "Reconciled", "lastTransitionTime"), "2026-01-01T00:05:00Z");

	/* External storage: Reconciled False with the reason, and the model server says so too. */
	json_t *st3 = op_status(wb, d, NULL, true, "ExternalStorageUnsupported", "no external",
				NULL, NULL, "2026-01-01T00:06:00Z");
	CHECK_STR(cond_str(st3, "Reconciled", "reason"), "ExternalStorageUnsupported");
	CHECK_STR(cond_str(st3, "ModelServerAvailable", "reason"), "ExternalStorageUnsupported");
	json_decref(st2);
	json_decref(st3);
	json_decref(d);
	json_decref(wb);
}

/* op_conf_set on conf_text: a key set where it stands, or added at the end of its section. */
static const char conf_text[] =
    "[global]\nhost = a\n\n[usaged]\n; why\ninterval = 3s\ncounters = true\n\n[exportd]\nlisten = :9102\n";
static const struct {
	const char *section, *key, *value, *want;
} conf_sets[] = {
    {"usaged", "interval", "5s",
     "[global]\nhost = a\n\n[usaged]\n; why\ninterval = 5s\ncounters = true\n\n[exportd]\nlisten = :9102\n"},
    /* An absent key goes at the end of its section, before the blank line. */
    {"usaged", "mode", "procfs",
     "[global]\nhost = a\n\n[usaged]\n; why\ninterval = 3s\ncounters = true\nmode = procfs\n\n[exportd]\nlisten = :9102\n"},
    /* ... or at the end of the text for the last section. */
    {"exportd", "levels", "node",
     "[global]\nhost = a\n\n[usaged]\n; why\ninterval = 3s\ncounters = true\n\n[exportd]\nlisten = :9102\nlevels = node\n"},
    /* A key of the same name in another section is not touched. */
    {"exportd", "host", "b",
     "[global]\nhost = a\n\n[usaged]\n; why\ninterval = 3s\ncounters = true\n\n[exportd]\nlisten = :9102\nhost = b\n"},
};

static void test_conf_set(void)
{
	const char *text = conf_text;
	char *s;
	for (size_t i = 0; i < sizeof(conf_sets) / sizeof(conf_sets[0]); i++) {
		s = op_conf_set(text, conf_sets[i].section, conf_sets[i].key, conf_sets[i].value);
		CHECK_STR(s, conf_sets[i].want);
		free(s);
	}
	/* A key that starts like another is another key. */
	s = op_conf_set(text, "usaged", "count", "1");
	CHECK(strstr(s, "counters = true\ncount = 1\n") != NULL);
	free(s);
	/* Empty: an existing key is emptied, an absent one not added. */
	s = op_conf_set(text, "exportd", "listen", "");
	CHECK(strstr(s, "[exportd]\nlisten =\n") != NULL);
	free(s);
	s = op_conf_set(text, "exportd", "metrics_allow", "");
	CHECK_STR(s, text);
	free(s);
	CHECK(op_conf_set(text, "estimd", "mode", "model") == NULL);
}

static void test_render_hash(void)
{
	char err[256];
	struct op_render a, b, c;
	json_t *wb = json_pack("{s{ss ss} s{ss}}", "metadata", "name", "wattbus", "uid", "u-1",
			       "spec", "interval", "3s");
	CHECK(op_render(wb, NULL, &a, err, sizeof(err)) == 0);
	/* Placement is no configuration: same hash. */
	json_object_set_new(json_object_get(wb, "spec"), "nodeSelector",
			    json_pack("{ss}", "kubernetes.io/os", "linux"));
	CHECK(op_render(wb, NULL, &b, err, sizeof(err)) == 0);
	CHECK_STR(a.config_hash, b.config_hash);
	json_object_set_new(json_object_get(wb, "spec"), "interval", json_string("5s"));
	CHECK(op_render(wb, NULL, &c, err, sizeof(err)) == 0);
	CHECK(strcmp(a.config_hash, c.config_hash) != 0);
	op_render_clear(&a);
	op_render_clear(&b);
	op_render_clear(&c);
	/* A wrong type is named. */
	json_object_set_new(json_object_get(wb, "spec"), "exporter",
			    json_pack("{ss}", "port", "9102"));
	CHECK(op_render(wb, NULL, &a, err, sizeof(err)) == -1);
	CHECK_STR(err, "spec.exporter.port: wrong type, not an integer");
	CHECK(a.objects == NULL);
	json_decref(wb);
}

static const struct unit_case cases[] = {
    {"the Available rule, step by step", test_available_steps},
    {"the Available messages", test_available_messages},
    {"ModelServerAvailable", test_model_server},
    {"the status document and its transition times", test_status_document},
    {"wattbus.conf keys set from the spec", test_conf_set},
    {"the config hash follows the configuration only", test_render_hash},
};
UNIT_MAIN(cases)
