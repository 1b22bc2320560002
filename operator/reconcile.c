/*
 * One reconcile: read the WattBus and what it owns, render, apply every object
 * with server-side apply, remove what is no longer wanted, write the status.
 * The I/O around render.c and status.c; the loop is in main.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kube.h"
#include "log.h"
#include "operator.h"
#include "reconcile.h"

/* Where the API serves each kind the operator applies. */
static const struct {
	const char *kind, *prefix, *plural;
	bool namespaced;
} kinds[] = {
    {"Namespace", "/api/v1", "namespaces", false},
    {"ServiceAccount", "/api/v1", "serviceaccounts", true},
    {"ConfigMap", "/api/v1", "configmaps", true},
    {"Service", "/api/v1", "services", true},
    {"PersistentVolumeClaim", "/api/v1", "persistentvolumeclaims", true},
    {"ClusterRole", "/apis/rbac.authorization.k8s.io/v1", "clusterroles", false},
    {"ClusterRoleBinding", "/apis/rbac.authorization.k8s.io/v1", "clusterrolebindings", false},
    {"DaemonSet", "/apis/apps/v1", "daemonsets", true},
    {"Deployment", "/apis/apps/v1", "deployments", true},
    {"ServiceMonitor", "/apis/monitoring.coreos.com/v1", "servicemonitors", true},
};

#define NS "wattbus"
#define WB_PATH "/apis/wattbus.io/v1alpha1/wattbuses"

static int object_path(const json_t *o, char *buf, size_t len)
{
	const char *kind = json_string_value(json_object_get(o, "kind"));
	const json_t *md = json_object_get(o, "metadata");
	const char *name = json_string_value(json_object_get(md, "name"));
	const char *ns = json_string_value(json_object_get(md, "namespace"));
	for (size_t i = 0; kind && name && i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		if (strcmp(kinds[i].kind, kind) != 0)
			continue;
		if (kinds[i].namespaced)
			snprintf(buf, len, "%s/namespaces/%s/%s/%s", kinds[i].prefix, ns ? ns : NS,
				 kinds[i].plural, name);
		else
			snprintf(buf, len, "%s/%s/%s", kinds[i].prefix, kinds[i].plural, name);
		return 0;
	}
	return -1;
}

/* GET a list: its items (borrowed from *list) and resourceVersion; -1 with err. */
static int get_list(const struct kube *k, const char *path, json_t **list, char *rv, size_t rvlen,
		    char *err, size_t errlen)
{
	long status;
	if (kube_call(k, "GET", path, NULL, NULL, &status, list, err, errlen) < 0 ||
	    status != 200) {
		json_decref(*list);
		*list = NULL;
		return -1;
	}
	const char *v = json_string_value(
	    json_object_get(json_object_get(*list, "metadata"), "resourceVersion"));
	if (!v || !json_is_array(json_object_get(*list, "items"))) {
		snprintf(err, errlen, "GET %s: not a list", path);
		json_decref(*list);
		*list = NULL;
		return -1;
	}
	snprintf(rv, rvlen, "%s", v);
	return 0;
}

static const json_t *item(const json_t *list, const char *name)
{
	size_t i;
	json_t *o;
	json_array_foreach(json_object_get(list, "items"), i, o)
	{
		const char *n =
		    json_string_value(json_object_get(json_object_get(o, "metadata"), "name"));
		if (n && strcmp(n, name) == 0)
			return o;
	}
	return NULL;
}

static void now_rfc3339(char *buf, size_t len)
{
	time_t t = time(NULL);
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

int op_reconcile(const struct kube *k, struct op_watch *w, char *err, size_t errlen)
{
	json_t *wbs = NULL, *dss = NULL, *deps = NULL, *cms = NULL, *env = NULL, *status = NULL;
	struct op_render r = {0};
	char apply_err[768] = "", path[512];
	bool no_monitor = false;
	int rc = -1;
	long code;

	if (get_list(k, WB_PATH, &wbs, w->rv_wattbus, sizeof(w->rv_wattbus), err, errlen) < 0)
		goto out;
	const json_t *wb = item(wbs, OP_NAME);
	if (!wb || json_object_get(json_object_get(wb, "metadata"), "deletionTimestamp")) {
		/* Nothing to run: the owner references let the API server remove the children. */
		if (get_list(k, "/apis/apps/v1/namespaces/" NS "/daemonsets", &dss,
			     w->rv_daemonsets, sizeof(w->rv_daemonsets), err, errlen) < 0 ||
		    get_list(k, "/apis/apps/v1/namespaces/" NS "/deployments", &deps,
			     w->rv_deployments, sizeof(w->rv_deployments), err, errlen) < 0 ||
		    get_list(k, "/api/v1/namespaces/" NS "/configmaps", &cms, w->rv_configmaps,
			     sizeof(w->rv_configmaps), err, errlen) < 0)
			goto out;
		rc = 0;
		goto out;
	}
	const char *cm = json_string_value(
	    json_object_get(json_object_get(json_object_get(wb, "spec"), "config"), "name"));
	/* The variables ConfigMap: listed, so that a change of it is watched too (it is hashed). */
	if (get_list(k, "/api/v1/namespaces/" NS "/configmaps", &cms, w->rv_configmaps,
		     sizeof(w->rv_configmaps), err, errlen) < 0)
		goto out;
	if (cm) {
		const json_t *got = item(cms, cm);
		if (got)
			env = json_incref(json_object_get(got, "data"));
		else
			snprintf(apply_err, sizeof(apply_err),
				 "configmap %s/%s named by spec.config: not found", NS, cm);
	}
	char rerr[256];
	if (op_render(wb, env, &r, rerr, sizeof(rerr)) < 0) {
		snprintf(apply_err, sizeof(apply_err), "spec refused: %s", rerr);
	} else {
		size_t i;
		json_t *o;
		json_array_foreach(r.objects, i, o)
		{
			if (object_path(o, path, sizeof(path)) < 0)
				continue;
			strncat(path, "?fieldManager=" OP_FIELD_MANAGER "&force=true",
				sizeof(path) - strlen(path) - 1);
			char *body = json_dumps(o, JSON_COMPACT);
			json_t *ans = NULL;
			char e2[512];
			int c = kube_call(k, "PATCH", path, "application/apply-patch+yaml", body,
					  &code, &ans, e2, sizeof(e2));
			free(body);
			json_decref(ans);
			if (c < 0) {
				snprintf(err, errlen, "%s", e2);
				goto out;
			}
			/* Without the Prometheus Operator there is no ServiceMonitor kind: not an
			 * error. */
			if (code == 404 && strcmp(json_string_value(json_object_get(o, "kind")),
						  "ServiceMonitor") == 0) {
				no_monitor = true;
				continue;
			}
			if (code < 200 || code >= 300) {
				if (!apply_err[0])
					snprintf(apply_err, sizeof(apply_err), "apply: %s", e2);
				log_warnx("apply: %s", e2);
			}
		}
		if (!r.model_server) {
			/* modeld no longer wanted: its Deployment and Service go, the claim stays.
			 */
			static const char *const gone[] = {
			    "/apis/apps/v1/namespaces/" NS "/deployments/wattbus-modeld",
			    "/api/v1/namespaces/" NS "/services/wattbus-modeld"};
			for (size_t g = 0; g < 2; g++) {
				json_t *ans = NULL;
				char e2[512];
				if (kube_call(k, "DELETE", gone[g], NULL, NULL, &code, &ans, e2,
					      sizeof(e2)) < 0) {
					snprintf(err, errlen, "%s", e2);
					goto out;
				}
				json_decref(ans);
				if (code != 404 && (code < 200 || code >= 300) && !apply_err[0])
					snprintf(apply_err, sizeof(apply_err), "%s", e2);
			}
		}
	}
	if (get_list(k, "/apis/apps/v1/namespaces/" NS "/daemonsets", &dss, w->rv_daemonsets,
		     sizeof(w->rv_daemonsets), err, errlen) < 0 ||
	    get_list(k, "/apis/apps/v1/namespaces/" NS "/deployments", &deps, w->rv_deployments,
		     sizeof(w->rv_deployments), err, errlen) < 0)
		goto out;
	char now[32];
	now_rfc3339(now, sizeof(now));
	status = op_status(
	    wb, item(dss, "wattbus"), item(deps, "wattbus-modeld"), r.model_server || r.refused[0],
	    r.refused_reason, r.refused, apply_err[0] ? apply_err : NULL,
	    no_monitor ? "no ServiceMonitor: the Prometheus Operator's CRD is not installed" : NULL,
	    now);
	if (r.objects)
		json_object_set_new(status, "configHash", json_string(r.config_hash));
	/* Written only when it changed: an unchanged status is no event to wake on. */
	if (!json_equal(status, json_object_get(wb, "status"))) {
		json_t *patch = json_pack("{sO}", "status", status);
		char *body = json_dumps(patch, JSON_COMPACT);
		json_t *ans = NULL;
		int c = kube_call(k, "PATCH", WB_PATH "/" OP_NAME "/status",
				  "application/merge-patch+json", body, &code, &ans, err, errlen);
		free(body);
		json_decref(patch);
		json_decref(ans);
		if (c < 0 || code < 200 || code >= 300)
			goto out;
		log_info("status: %s", apply_err[0] ? apply_err : "reconciled");
	}
	rc = 0;
out:
	op_render_clear(&r);
	json_decref(status);
	json_decref(env);
	json_decref(wbs);
	json_decref(dss);
	json_decref(deps);
	json_decref(cms);
	return rc;
}
