/*
 * The objects of a WattBus: deploy/kubernetes's own objects (embedded at build
 * time) with what the spec sets patched in, owner references and the config
 * hash added. Pure: JSON in, JSON out, no I/O.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"
#include "operator.h"

static json_t *bundle_get(char *err, size_t errlen)
{
	static json_t *bundle;
	json_error_t je;
	if (!bundle)
		bundle = json_loads(wb_op_bundle, 0, &je);
	if (!bundle)
		snprintf(err, errlen, "embedded bundle: %s", je.text);
	return bundle;
}

/* The schema's defaults into OBJ, recursively, as the API server fills them in. */
static void apply_defaults(const json_t *schema, json_t *obj)
{
	const json_t *props = json_object_get(schema, "properties");
	if (json_is_object(obj) && props) {
		const char *name;
		json_t *p;
		json_object_foreach((json_t *)props, name, p)
		{
			json_t *def = json_object_get(p, "default");
			if (!json_object_get(obj, name) && def)
				json_object_set_new(obj, name, json_deep_copy(def));
			json_t *v = json_object_get(obj, name);
			if (v)
				apply_defaults(p, v);
		}
	}
}

json_t *op_spec(const json_t *wattbus, char *err, size_t errlen)
{
	json_t *bundle = bundle_get(err, errlen);
	if (!bundle)
		return NULL;
	json_t *spec_schema = json_object_get(
	    json_object_get(json_object_get(bundle, "schema"), "properties"), "spec");
	const json_t *given = wattbus ? json_object_get(wattbus, "spec") : NULL;
	if (given && !json_is_object(given)) {
		snprintf(err, errlen, "spec: not an object");
		return NULL;
	}
	json_t *spec = given ? json_deep_copy(given) : json_object();
	apply_defaults(spec_schema, spec);
	return spec;
}

char *op_conf_set(const char *text, const char *section, const char *key, const char *value)
{
	char head[128];
	snprintf(head, sizeof(head), "[%s]", section);
	size_t klen = strlen(key);
	const char *sec = NULL, *end = NULL, *line_at = NULL, *line_end = NULL;
	for (const char *p = text; *p;) {
		const char *nl = strchr(p, '\n');
		const char *e = nl ? nl + 1 : p + strlen(p);
		const char *s = p;
		while (*s == ' ' || *s == '\t')
			s++;
		if (*s == '[') {
			if (sec && !end)
				end = p;
			if (!sec && strncmp(s, head, strlen(head)) == 0)
				sec = e;
		} else if (sec && !end && !line_at && strncmp(s, key, klen) == 0) {
			const char *q = s + klen;
			while (*q == ' ' || *q == '\t')
				q++;
			if (*q == '=') {
				line_at = p;
				line_end = e;
			}
		}
		p = e;
	}
	if (!sec)
		return NULL;
	if (!end)
		end = text + strlen(text);
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);
	if (!f)
		return NULL;
	if (line_at) {
		fwrite(text, 1, (size_t)(line_at - text), f);
		fprintf(f, "%s =%s%s\n", key, value[0] ? " " : "", value);
		fputs(line_end, f);
	} else if (!value[0]) {
		fputs(text, f);
	} else {
		/* After the section's last non-blank line. */
		const char *at = end;
		while (at > sec && (at[-1] == '\n') && (at - 1 == sec || at[-2] == '\n'))
			at--;
		fwrite(text, 1, (size_t)(at - text), f);
		if (at > text && at[-1] != '\n')
			fputc('\n', f);
		fprintf(f, "%s = %s\n", key, value);
		fputs(at, f);
	}
	if (fclose(f) != 0) {
		free(out);
		return NULL;
	}
	return out;
}

void op_render_clear(struct op_render *r)
{
	json_decref(r->objects);
	memset(r, 0, sizeof(*r));
}

static json_t *find(json_t *objects, const char *kind, const char *name)
{
	size_t i;
	json_t *o;
	json_array_foreach(objects, i, o)
	{
		json_t *md = json_object_get(o, "metadata");
		if (strcmp(json_string_value(json_object_get(o, "kind")) ?: "", kind) == 0 &&
		    strcmp(json_string_value(json_object_get(md, "name")) ?: "", name) == 0)
			return o;
	}
	return NULL;
}

static json_t *pod_spec(json_t *owner)
{
	return json_object_get(json_object_get(json_object_get(owner, "spec"), "template"), "spec");
}

static json_t *container(json_t *owner, const char *name)
{
	size_t i;
	json_t *c;
	json_array_foreach(json_object_get(pod_spec(owner), "containers"), i, c)
	{
		if (strcmp(json_string_value(json_object_get(c, "name")) ?: "", name) == 0)
			return c;
	}
	return NULL;
}

/* A spec value of TYPE at PATH (dotted, under spec), or NULL and err. */
static json_t *want(const json_t *spec, const char *path, json_type type, char *err, size_t errlen)
{
	char buf[128];
	snprintf(buf, sizeof(buf), "%s", path);
	json_t *v = (json_t *)spec;
	for (char *save = NULL, *part = strtok_r(buf, ".", &save); part && v;
	     part = strtok_r(NULL, ".", &save))
		v = json_object_get(v, part);
	static const char *const names[] = {"an object", "an array",  "a string",  "an integer",
					    "a number",	 "a boolean", "a boolean", "null"};
	if (!v || json_typeof(v) != type) {
		if (!(type == JSON_TRUE && v && json_is_boolean(v))) {
			snprintf(err, errlen, "spec.%s: %s, not %s", path,
				 v ? "wrong type" : "missing", names[type]);
			return NULL;
		}
	}
	return v;
}

#define WANT(path, type)                                                                           \
	({                                                                                         \
		json_t *v_ = want(spec, path, type, err, errlen);                                  \
		if (!v_)                                                                           \
			goto fail;                                                                 \
		v_;                                                                                \
	})
#define WANT_STR(path) json_string_value(WANT(path, JSON_STRING))

/* A list of strings as one comma-separated value (LIST_SEP between items). */
static int join(const json_t *arr, const char *sep, char *buf, size_t len)
{
	size_t i, at = 0;
	json_t *v;
	buf[0] = 0;
	json_array_foreach(arr, i, v)
	{
		if (!json_is_string(v))
			return -1;
		int n = snprintf(buf + at, len - at, "%s%s", i ? sep : "", json_string_value(v));
		if (n < 0 || (size_t)n >= len - at)
			return -1;
		at += (size_t)n;
	}
	return 0;
}

static int set_conf(json_t *cm, const char *section, const char *key, const char *value, char *err,
		    size_t errlen)
{
	json_t *data = json_object_get(cm, "data");
	const char *text = json_string_value(json_object_get(data, "wattbus.conf"));
	char *next = text ? op_conf_set(text, section, key, value) : NULL;
	if (!next) {
		snprintf(err, errlen, "configmap.yaml: wattbus.conf has no [%s]", section);
		return -1;
	}
	json_object_set_new(data, "wattbus.conf", json_string(next));
	free(next);
	return 0;
}

#define CONF(section, key, value)                                                                  \
	do {                                                                                       \
		if (set_conf(cm, section, key, value, err, errlen) < 0)                            \
			goto fail;                                                                 \
	} while (0)

static void set_image(json_t *owner, const char *image)
{
	size_t i;
	json_t *c;
	json_array_foreach(json_object_get(pod_spec(owner), "containers"), i, c)
	    json_object_set_new(c, "image", json_string(image));
}

static void set_env_from(json_t *owner, const char *cm_name)
{
	size_t i;
	json_t *c;
	json_array_foreach(json_object_get(pod_spec(owner), "containers"), i, c)
	{
		json_object_set_new(c, "envFrom",
				    json_pack("[{s{ss}}]", "configMapRef", "name", cm_name));
	}
}

/* The stage containers' resources from spec.resources (a container not named keeps its own). */
static void set_resources(json_t *owner, const json_t *resources)
{
	const char *name;
	json_t *r;
	json_object_foreach((json_t *)resources, name, r)
	{
		json_t *c = container(owner, name);
		if (c && json_is_object(r))
			json_object_set(c, "resources", r);
	}
}

static uint64_t fnv_more(uint64_t h, const char *s)
{
	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 0x100000001b3ull;
	}
	h ^= 0xff; /* a separator no string holds: "a","bc" and "ab","c" differ */
	return h * 0x100000001b3ull;
}

int op_render(const json_t *wattbus, const json_t *user_env, struct op_render *out, char *err,
	      size_t errlen)
{
	memset(out, 0, sizeof(*out));
	json_t *bundle = bundle_get(err, errlen);
	if (!bundle)
		return -1;
	json_t *spec = op_spec(wattbus, err, errlen);
	if (!spec)
		return -1;
	json_t *objs = json_array();
	size_t i;
	json_t *entry;
	json_array_foreach(json_object_get(bundle, "objects"), i, entry)
	    json_array_append_new(objs, json_deep_copy(json_object_get(entry, "object")));
	json_t *cm = find(objs, "ConfigMap", "wattbus-config");
	json_t *ds = find(objs, "DaemonSet", "wattbus");
	json_t *svc = find(objs, "Service", "wattbus-exportd");
	json_t *md = find(objs, "Deployment", "wattbus-modeld");
	json_t *pvc = find(objs, "PersistentVolumeClaim", "wattbus-models");
	if (!cm || !ds || !svc || !md || !pvc || !container(ds, "exportd") ||
	    !container(md, "modeld")) {
		snprintf(err, errlen,
			 "embedded deploy/kubernetes lacks an object the operator patches");
		goto fail;
	}
	char buf[1024];

	/* Settings: each onto its wattbus.conf key (docs/KUBERNETES.md's table). */
	CONF("usaged", "interval", WANT_STR("interval"));
	CONF("powerd", "interval", WANT_STR("powerInterval"));
	json_int_t port = json_integer_value(WANT("exporter.port", JSON_INTEGER));
	if (port < 1 || port > 65535) {
		snprintf(err, errlen, "spec.exporter.port: %lld is not a port", (long long)port);
		goto fail;
	}
	snprintf(buf, sizeof(buf), ":%lld", (long long)port);
	CONF("exportd", "listen", buf);
	if (join(WANT("exporter.levels", JSON_ARRAY), ",", buf, sizeof(buf)) < 0) {
		snprintf(err, errlen, "spec.exporter.levels: not a list of names");
		goto fail;
	}
	CONF("exportd", "levels", buf);
	json_t *allow = json_object_get(json_object_get(spec, "exporter"), "metricsAllow");
	if (allow && join(allow, ", ", buf, sizeof(buf)) < 0) {
		snprintf(err, errlen, "spec.exporter.metricsAllow: not a list of patterns");
		goto fail;
	}
	CONF("exportd", "metrics_allow", allow ? buf : "");
	CONF("usaged", "counters",
	     json_is_true(WANT("sources.counters", JSON_TRUE)) ? "true" : "false");
	CONF("exportd", "kube_source", WANT_STR("sources.kubeNames"));
	CONF("powerd", "source",
	     json_is_true(WANT("sources.gpu", JSON_TRUE)) ? "rapl,nvml" : "auto");

	/* exportd's port wherever it shows: the container, the Service. */
	json_t *eport = json_array_get(json_object_get(container(ds, "exportd"), "ports"), 0);
	json_object_set_new(eport, "containerPort", json_integer(port));
	json_object_set_new(
	    json_array_get(json_object_get(json_object_get(svc, "spec"), "ports"), 0), "port",
	    json_integer(port));

	/* The stages' image (before the sidecar, which has its own). */
	const char *image = WANT_STR("image");
	set_image(ds, image);
	set_image(md, image);

	/* The estimator sidecar: its socket in the pod's shared emptyDir. */
	json_t *sc = WANT("estimatorSidecar", JSON_OBJECT);
	if (json_is_true(json_object_get(sc, "enabled"))) {
		const char *img = json_string_value(json_object_get(sc, "image"));
		if (!img || !img[0]) {
			snprintf(err, errlen,
				 "spec.estimatorSidecar.image: an enabled sidecar needs one");
			goto fail;
		}
		const char *mnt = WANT_STR("estimatorSidecar.mountPath");
		json_array_append_new(
		    json_object_get(pod_spec(ds), "containers"),
		    json_pack("{ss ss ss s{sb sb si si sb s{s[s]}} s[{ss ss}]}", "name",
			      "estimator", "image", img, "imagePullPolicy", "IfNotPresent",
			      "securityContext", "allowPrivilegeEscalation", 0,
			      "readOnlyRootFilesystem", 1, "runAsUser", 65532, "runAsGroup", 2150,
			      "runAsNonRoot", 1, "capabilities", "drop", "ALL", "volumeMounts",
			      "name", "run", "mountPath", mnt));
		CONF("estimd", "estimator", "unix:/run/wattbus/estimator.sock");
	} else {
		CONF("estimd", "estimator", "");
	}

	/* The model server and its store. */
	json_t *ms = WANT("modelServer", JSON_OBJECT);
	bool model = json_is_true(json_object_get(ms, "enabled"));
	const char *stype = WANT_STR("modelServer.storage.type");
	bool keep_pvc = model && strcmp(stype, "local") == 0;
	if (model && strcmp(stype, "external") == 0) {
		snprintf(out->refused_reason, sizeof(out->refused_reason),
			 "ExternalStorageUnsupported");
		snprintf(
		    out->refused, sizeof(out->refused),
		    "spec.modelServer.storage.type external is not supported (local, hostPath or nfs): wattbus-modeld is not deployed");
		model = false;
	}
	out->model_server = model;
	CONF("estimd", "model_server", model ? "http://wattbus-modeld.wattbus:8100" : "");
	CONF("estimd", "model_refresh", WANT_STR("modelServer.samplingPeriod"));
	if (model) {
		json_t *st = json_object_get(ms, "storage");
		json_t *vol = json_array_get(json_object_get(pod_spec(md), "volumes"), 0);
		json_t *src = NULL;
		if (strcmp(stype, "hostPath") == 0)
			src = json_pack("{s{ssss}}", "hostPath", "path",
					WANT_STR("modelServer.storage.path"), "type",
					"DirectoryOrCreate");
		else if (strcmp(stype, "nfs") == 0)
			src = json_pack("{s{ssss}}", "nfs", "server",
					WANT_STR("modelServer.storage.server"), "path",
					WANT_STR("modelServer.storage.path"));
		if (src) {
			json_object_del(vol, "persistentVolumeClaim");
			json_object_update(vol, src);
			json_decref(src);
		}
		json_t *pspec = json_object_get(pvc, "spec");
		json_object_set_new(
		    json_object_get(json_object_get(pspec, "resources"), "requests"), "storage",
		    json_string(WANT_STR("modelServer.storage.size")));
		json_t *cls = json_object_get(st, "storageClassName");
		if (json_is_string(cls))
			json_object_set(pspec, "storageClassName", cls);
	}

	/* The pods: placement, resources, extra variables. */
	json_t *ns = json_object_get(spec, "nodeSelector");
	if (json_is_object(ns) && json_object_size(ns))
		json_object_set(pod_spec(ds), "nodeSelector", ns);
	json_t *tol = json_object_get(spec, "tolerations");
	if (json_is_array(tol))
		json_object_set(pod_spec(ds), "tolerations", tol);
	json_t *res = json_object_get(spec, "resources");
	if (json_is_object(res)) {
		set_resources(ds, res);
		set_resources(md, res);
	}
	const char *env_cm = NULL;
	json_t *config = json_object_get(spec, "config");
	if (config) {
		env_cm = WANT_STR("config.name");
		set_env_from(ds, env_cm);
		set_env_from(md, env_cm);
	}

	/* The config hash: wattbus.conf and the variables the pods are given. */
	uint64_t h = fnv_more(
	    0xcbf29ce484222325ull,
	    json_string_value(json_object_get(json_object_get(cm, "data"), "wattbus.conf")));
	if (env_cm) {
		h = fnv_more(h, env_cm);
		/* jansson iterates in insertion order: sort for a hash of the content alone. */
		char *dump = json_dumps(user_env ? user_env : json_null(),
					JSON_SORT_KEYS | JSON_COMPACT | JSON_ENCODE_ANY);
		h = fnv_more(h, dump ? dump : "");
		free(dump);
	}
	snprintf(out->config_hash, sizeof(out->config_hash), "%016llx", (unsigned long long)h);

	/* What every object carries: kustomization's labels, the manager, the owner. */
	const char *uid =
	    wattbus
		? json_string_value(json_object_get(json_object_get(wattbus, "metadata"), "uid"))
		: NULL;
	json_t *result = json_array();
	json_t *o;
	json_array_foreach(objs, i, o)
	{
		const char *kind = json_string_value(json_object_get(o, "kind"));
		bool modeld_obj =
		    o == md || o == pvc ||
		    (strcmp(kind, "Service") == 0 &&
		     strcmp(
			 json_string_value(json_object_get(json_object_get(o, "metadata"), "name")),
			 "wattbus-modeld") == 0);
		if (modeld_obj && !model)
			continue;
		if (o == pvc && !keep_pvc)
			continue;
		json_t *meta = json_object_get(o, "metadata");
		json_t *labels = json_object_get(meta, "labels");
		if (!labels) {
			labels = json_object();
			json_object_set_new(meta, "labels", labels);
		}
		json_object_update(labels, json_object_get(bundle, "labels"));
		json_object_set_new(labels, "app.kubernetes.io/managed-by",
				    json_string(OP_FIELD_MANAGER));
		if (uid && strcmp(kind, "Namespace") != 0 && o != pvc)
			json_object_set_new(
			    meta, "ownerReferences",
			    json_pack("[{ss ss ss ss sb sb}]", "apiVersion",
				      json_string_value(json_object_get(bundle, "apiVersion")),
				      "kind", json_string_value(json_object_get(bundle, "kind")),
				      "name", OP_NAME, "uid", uid, "controller", 1,
				      "blockOwnerDeletion", 1));
		if (o == ds) {
			json_t *tmeta = json_object_get(
			    json_object_get(json_object_get(ds, "spec"), "template"), "metadata");
			json_t *ann = json_object_get(tmeta, "annotations");
			if (!ann) {
				ann = json_object();
				json_object_set_new(tmeta, "annotations", ann);
			}
			json_object_set_new(ann, OP_HASH_ANNOTATION, json_string(out->config_hash));
		}
		json_array_append(result, o);
	}
	json_decref(objs);
	json_decref(spec);
	out->objects = result;
	return 0;
fail:
	json_decref(objs);
	json_decref(spec);
	memset(out, 0, sizeof(*out));
	return -1;
}
