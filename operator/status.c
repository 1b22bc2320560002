/*
 * The WattBus status from what was observed: the DaemonSet's counts, and the
 * conditions Reconciled, Available (kepler-operator's six ordered steps, with
 * its reasons) and ModelServerAvailable. Pure: JSON in, JSON out.
 */
#include <stdio.h>
#include <string.h>

#include "operator.h"

const char *op_cond_status_str(enum op_cond_status s)
{
	return s == OP_TRUE ? "True" : s == OP_FALSE ? "False" : "Unknown";
}

static void set(struct op_cond *c, enum op_cond_status s, const char *reason)
{
	c->status = s;
	snprintf(c->reason, sizeof(c->reason), "%s", reason);
}

static json_int_t num(const json_t *o, const char *key)
{
	return json_integer_value(json_object_get(o, key));
}

void op_available(const json_t *daemonset, struct op_cond *c)
{
	memset(c, 0, sizeof(*c));
	if (!daemonset) {
		set(c, OP_FALSE, "DaemonSetNotFound");
		snprintf(c->message, sizeof(c->message), "daemonset wattbus/wattbus not found");
		return;
	}
	const json_t *st = json_object_get(daemonset, "status");
	json_int_t gen = num(json_object_get(daemonset, "metadata"), "generation");
	json_int_t ogen = num(st, "observedGeneration");
	json_int_t desired = num(st, "desiredNumberScheduled"), ready = num(st, "numberReady");
	json_int_t updated = num(st, "updatedNumberScheduled"), avail = num(st, "numberAvailable");
	json_int_t unavail = num(st, "numberUnavailable");
	/* 1. The controller has not seen the newest spec: nothing below describes it. */
	if (gen > ogen) {
		set(c, OP_UNKNOWN, "DaemonSetOutOfSync");
		snprintf(
		    c->message, sizeof(c->message),
		    "generation %lld of daemonset wattbus/wattbus is out of sync with the observed generation %lld",
		    (long long)gen, (long long)ogen);
	} else if (ready == 0 || desired == 0) {
		set(c, OP_FALSE, "DaemonSetPodsNotRunning");
		snprintf(
		    c->message, sizeof(c->message),
		    "daemonset wattbus/wattbus is not rolled out to any node; check nodeSelector and tolerations");
	} else if (updated < desired) {
		set(c, OP_UNKNOWN, "DaemonSetRolloutInProgress");
		snprintf(
		    c->message, sizeof(c->message),
		    "waiting for daemonset wattbus/wattbus rollout to finish: %lld of %lld pods updated",
		    (long long)updated, (long long)desired);
	} else if (avail < desired) {
		set(c, OP_UNKNOWN, "DaemonSetPartiallyAvailable");
		snprintf(
		    c->message, sizeof(c->message),
		    "rollout of daemonset wattbus/wattbus in progress: %lld of %lld updated pods available",
		    (long long)avail, (long long)desired);
	} else if (unavail > 0) {
		set(c, OP_FALSE, "DaemonSetPartiallyAvailable");
		snprintf(c->message, sizeof(c->message),
			 "waiting for daemonset wattbus/wattbus to roll out on %lld nodes",
			 (long long)unavail);
	} else {
		set(c, OP_TRUE, "DaemonSetReady");
		snprintf(
		    c->message, sizeof(c->message),
		    "daemonset wattbus/wattbus is deployed to all nodes and available; ready %lld/%lld",
		    (long long)ready, (long long)desired);
	}
}

void op_model_available(bool wanted, const char *refused, const json_t *deployment,
			struct op_cond *c)
{
	memset(c, 0, sizeof(*c));
	if (refused && refused[0]) {
		set(c, OP_FALSE, "ExternalStorageUnsupported");
		snprintf(c->message, sizeof(c->message), "%s", refused);
		return;
	}
	if (!wanted) {
		set(c, OP_FALSE, "ModelServerDisabled");
		snprintf(c->message, sizeof(c->message), "spec.modelServer.enabled is false");
		return;
	}
	if (!deployment) {
		set(c, OP_FALSE, "DeploymentNotFound");
		snprintf(c->message, sizeof(c->message),
			 "deployment wattbus/wattbus-modeld not found");
		return;
	}
	const json_t *st = json_object_get(deployment, "status");
	json_int_t gen = num(json_object_get(deployment, "metadata"), "generation");
	if (gen > num(st, "observedGeneration")) {
		set(c, OP_UNKNOWN, "DeploymentOutOfSync");
		snprintf(c->message, sizeof(c->message),
			 "generation %lld of deployment wattbus/wattbus-modeld not observed yet",
			 (long long)gen);
	} else if (num(st, "availableReplicas") < 1) {
		set(c, OP_FALSE, "ModelServerUnavailable");
		snprintf(c->message, sizeof(c->message),
			 "deployment wattbus/wattbus-modeld has no available replica");
	} else {
		set(c, OP_TRUE, "ModelServerReady");
		snprintf(c->message, sizeof(c->message),
			 "wattbus-modeld serves at http://wattbus-modeld.wattbus:8100");
	}
}

/* One condition, keeping the old lastTransitionTime when the status did not change. */
static json_t *condition(const json_t *old_status, const char *type, const struct op_cond *c,
			 json_int_t gen, const char *now)
{
	const char *since = now;
	size_t i;
	json_t *o;
	json_array_foreach(json_object_get(old_status, "conditions"), i, o)
	{
		const char *t = json_string_value(json_object_get(o, "type"));
		const char *s = json_string_value(json_object_get(o, "status"));
		const char *at = json_string_value(json_object_get(o, "lastTransitionTime"));
		if (t && s && at && strcmp(t, type) == 0 &&
		    strcmp(s, op_cond_status_str(c->status)) == 0)
			since = at;
	}
	return json_pack("{ss ss ss ss sI ss}", "type", type, "status",
			 op_cond_status_str(c->status), "reason", c->reason, "message", c->message,
			 "observedGeneration", (json_int_t)gen, "lastTransitionTime", since);
}

json_t *op_status(const json_t *wattbus, const json_t *daemonset, const json_t *modeld,
		  bool model_wanted, const char *refused_reason, const char *refused,
		  const char *reconcile_err, const char *note, const char *now)
{
	json_int_t gen = num(json_object_get(wattbus, "metadata"), "generation");
	const json_t *old = json_object_get(wattbus, "status");
	json_t *st = json_pack("{sI}", "observedGeneration", (json_int_t)gen);
	static const char *const counts[] = {"desiredNumberScheduled", "currentNumberScheduled",
					     "updatedNumberScheduled", "numberReady",
					     "numberAvailable",	       "numberUnavailable",
					     "numberMisscheduled"};
	const json_t *dst = json_object_get(daemonset, "status");
	for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++)
		json_object_set_new(st, counts[i], json_integer(num(dst, counts[i])));

	struct op_cond rec = {0}, avail, model;
	if (reconcile_err) {
		set(&rec, OP_FALSE, "ReconcileError");
		snprintf(rec.message, sizeof(rec.message), "%s", reconcile_err);
	} else if (refused_reason && refused_reason[0]) {
		set(&rec, OP_FALSE, refused_reason);
		snprintf(rec.message, sizeof(rec.message), "%s", refused ? refused : "");
	} else {
		set(&rec, OP_TRUE, "ReconcileSuccess");
		snprintf(rec.message, sizeof(rec.message), "every object applied%s%s",
			 note ? "; " : "", note ? note : "");
	}
	op_available(daemonset, &avail);
	op_model_available(model_wanted, refused, modeld, &model);
	json_object_set_new(st, "conditions",
			    json_pack("[ooo]", condition(old, "Reconciled", &rec, gen, now),
				      condition(old, "Available", &avail, gen, now),
				      condition(old, "ModelServerAvailable", &model, gen, now)));
	return st;
}
