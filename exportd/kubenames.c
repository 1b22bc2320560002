/*
 * Pod and container names from a Kubernetes PodList (the kubelet's /pods or the
 * API server's /api/v1/pods): pod uid -> name and namespace, container id ->
 * container name. Pure code: bytes in, an immutable table out.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "exportd.h"
#include "grow.h"

struct kube_names {
	struct kube_pod *pods;
	size_t npods;
	struct kube_container *ctrs;
	size_t nctrs;
};

static int cmp_pod(const void *a, const void *b)
{
	return strcmp(((const struct kube_pod *)a)->uid, ((const struct kube_pod *)b)->uid);
}

static int cmp_ctr(const void *a, const void *b)
{
	return strcmp(((const struct kube_container *)a)->id,
		      ((const struct kube_container *)b)->id);
}

void kube_names_destroy(struct kube_names **self_p)
{
	struct kube_names *k = self_p ? *self_p : NULL;
	if (!k)
		return;
	for (size_t i = 0; i < k->npods; i++) {
		free(k->pods[i].uid);
		free(k->pods[i].name);
		free(k->pods[i].ns);
	}
	for (size_t i = 0; i < k->nctrs; i++) {
		free(k->ctrs[i].id);
		free(k->ctrs[i].name);
		free(k->ctrs[i].pod_uid);
	}
	free(k->pods);
	free(k->ctrs);
	free(k);
	*self_p = NULL;
}

/* A string member of at most max bytes, or NULL. */
static const char *str_at(json_t *o, const char *key, size_t max)
{
	json_t *v = json_object_get(o, key);
	const char *s = json_is_string(v) ? json_string_value(v) : NULL;
	return s && s[0] && strlen(s) <= max && json_string_length(v) == strlen(s) ? s : NULL;
}

/* "containerd://<id>", "cri-o://<id>", "docker://<id>": the id; NULL when not that shape. */
static const char *bare_id(const char *cid)
{
	const char *p = cid ? strstr(cid, "://") : NULL;
	return p && p[3] ? p + 3 : NULL;
}

static int add_ctr(struct kube_names *k, size_t *cap, const char *cid, const char *name,
		   const char *pod_uid)
{
	const char *id = bare_id(cid);
	if (!id)
		return 0; /* not started yet (waiting): no id to match */
	if (wb_grow(&k->ctrs, cap, k->nctrs + 1, sizeof *k->ctrs, 16) < 0)
		return -1;
	struct kube_container *c = &k->ctrs[k->nctrs];
	c->id = strdup(id);
	c->name = strdup(name);
	c->pod_uid = strdup(pod_uid);
	if (!c->id || !c->name || !c->pod_uid) {
		free(c->id);
		free(c->name);
		free(c->pod_uid);
		return -1;
	}
	k->nctrs++;
	return 0;
}

/* Every instance of the pod's containers: running ones and, after a restart, the previous. */
static int add_statuses(struct kube_names *k, size_t *cap, json_t *status, const char *key,
			const char *pod_uid)
{
	json_t *arr = json_object_get(status, key);
	size_t i;
	json_t *cs;
	if (!json_is_array(arr))
		return 0;
	json_array_foreach(arr, i, cs)
	{
		const char *name = str_at(cs, "name", KUBE_NAME_MAX);
		if (!json_is_object(cs) || !name)
			continue;
		if (add_ctr(k, cap, str_at(cs, "containerID", 255), name, pod_uid) < 0)
			return -1;
		json_t *last = json_object_get(json_object_get(cs, "lastState"), "terminated");
		if (json_is_object(last) &&
		    add_ctr(k, cap, str_at(last, "containerID", 255), name, pod_uid) < 0)
			return -1;
	}
	return 0;
}

struct kube_names *kube_names_parse(const char *body, size_t len, size_t *skipped, char *err,
				    size_t errlen)
{
	json_error_t je;
	/* NUL inside a string is allowed here so that one odd pod is left out, not the answer */
	json_t *root = json_loadb(body, len, JSON_ALLOW_NUL, &je);
	struct kube_names *k = NULL;
	size_t pcap = 0, ccap = 0;
	*skipped = 0;
	if (!root) {
		snprintf(err, errlen, "not JSON: line %d: %s", je.line, je.text);
		return NULL;
	}
	json_t *items = json_object_get(root, "items");
	if (!json_is_object(root) || !json_is_array(items)) {
		snprintf(err, errlen, "not a PodList (no \"items\" array)");
		goto fail;
	}
	k = calloc(1, sizeof *k);
	if (!k)
		goto oom;
	size_t i;
	json_t *pod;
	json_array_foreach(items, i, pod)
	{
		json_t *md = json_object_get(pod, "metadata");
		const char *uid = str_at(md, "uid", 63), *name = str_at(md, "name", KUBE_NAME_MAX),
			   *ns = str_at(md, "namespace", KUBE_NAME_MAX);
		if (!json_is_object(pod) || !uid || !name) {
			(*skipped)++;
			continue;
		}
		if (wb_grow(&k->pods, &pcap, k->npods + 1, sizeof *k->pods, 16) < 0)
			goto oom;
		struct kube_pod *p = &k->pods[k->npods];
		p->uid = strdup(uid);
		p->name = strdup(name);
		p->ns = strdup(ns ? ns : "");
		if (!p->uid || !p->name || !p->ns) {
			free(p->uid);
			free(p->name);
			free(p->ns);
			goto oom;
		}
		k->npods++;
		json_t *st = json_object_get(pod, "status");
		if (add_statuses(k, &ccap, st, "initContainerStatuses", uid) < 0 ||
		    add_statuses(k, &ccap, st, "containerStatuses", uid) < 0 ||
		    add_statuses(k, &ccap, st, "ephemeralContainerStatuses", uid) < 0)
			goto oom;
	}
	if (k->npods)
		qsort(k->pods, k->npods, sizeof *k->pods, cmp_pod);
	if (k->nctrs)
		qsort(k->ctrs, k->nctrs, sizeof *k->ctrs, cmp_ctr);
	json_decref(root);
	return k;
oom:
	snprintf(err, errlen, "out of memory");
fail:
	kube_names_destroy(&k);
	json_decref(root);
	return NULL;
}

const struct kube_pod *kube_names_pod(const struct kube_names *k, const char *uid)
{
	if (!k || !k->npods || !uid[0])
		return NULL;
	struct kube_pod key = {.uid = (char *)uid};
	return bsearch(&key, k->pods, k->npods, sizeof *k->pods, cmp_pod);
}

const struct kube_container *kube_names_container(const struct kube_names *k, const char *id)
{
	if (!k || !k->nctrs || !id[0])
		return NULL;
	struct kube_container key = {.id = (char *)id};
	return bsearch(&key, k->ctrs, k->nctrs, sizeof *k->ctrs, cmp_ctr);
}

size_t kube_names_npods(const struct kube_names *k)
{
	return k ? k->npods : 0;
}

size_t kube_names_ncontainers(const struct kube_names *k)
{
	return k ? k->nctrs : 0;
}
