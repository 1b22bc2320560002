/*
 * Pod and container names from a kubelet's PodList (tests/data/kube/pods.json,
 * the shape of `kubectl get --raw /api/v1/pods`): what is found, what is
 * refused, and how the names land on the pod and container series.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unit.h"

#include "codec.h"
#include "../../exportd/exportd.h"

#define S 1000000000ull

#define WEB_UID "0b6c2f4e-1a2b-4c3d-9e8f-0123456789ab"
#define JOB_UID "5d1e7a90-2b3c-4d5e-8f9a-abcdef012345"
#define ETCD_UID "3c1f0c4b5e6f7a8b9c0d1e2f3a4b5c6d"
#define APP_OLD "5eb7e725e6bac43f2a906437aa7be080081de786a7d12f7b9649be47b69d6ca0"
#define APP_NEW "80d6ae0197c2a3be4ec46d171996105891dedf626ea3040f2dd2bf00e63c436e"
#define MIGRATE "3bc801a33ea83df414e1aeb962a52412835be99db28668ec25de73fdd4733804"
#define REPORT "845e91831319e89c4d656bdb80c278ac09a7230d61e5dfd2e1b1fbb436ac8917"

static char *slurp(const char *rel, size_t *len)
{
	const char *root = getenv("WB_ROOT");
	char path[256];
	snprintf(path, sizeof path, "%s/%s", root ? root : ".", rel);
	FILE *f = fopen(path, "r");
	if (!f)
		return NULL;
	char *buf = malloc(1 << 20);
	*len = fread(buf, 1, (1 << 20) - 1, f);
	buf[*len] = '\0';
	fclose(f);
	return buf;
}

static struct kube_names *parse_str(const char *s, size_t *skipped, char *err, size_t errlen)
{
	return kube_names_parse(s, strlen(s), skipped, err, errlen);
}

static struct kube_names *fixture(void)
{
	size_t len, skipped;
	char err[256] = "";
	char *body = slurp("tests/data/kube/pods.json", &len);
	CHECK(body != NULL);
	if (!body)
		return NULL;
	struct kube_names *k = kube_names_parse(body, len, &skipped, err, sizeof err);
	CHECK_STR(err, "");
	CHECK_U64(skipped, 0);
	free(body);
	return k;
}

static void test_podlist(void)
{
	struct kube_names *k = fixture();
	CHECK(k != NULL);
	CHECK_U64(kube_names_npods(k), 4);
	/* migrate (init), app now and before its restart, envoy, report, etcd; redis is waiting */
	CHECK_U64(kube_names_ncontainers(k), 6);
	const struct kube_pod *p = kube_names_pod(k, WEB_UID);
	CHECK(p && !strcmp(p->name, "web-7d4b9c8f6d-x2x8k") && !strcmp(p->ns, "shop"));
	p = kube_names_pod(k, ETCD_UID); /* a static pod: 32 hex digits, as its cgroup names it */
	CHECK(p && !strcmp(p->name, "etcd-node-a") && !strcmp(p->ns, "kube-system"));
	const struct kube_container *c = kube_names_container(k, APP_NEW);
	CHECK(c && !strcmp(c->name, "app") && !strcmp(c->pod_uid, WEB_UID));
	c = kube_names_container(k, APP_OLD); /* the instance before the restart keeps its name */
	CHECK(c && !strcmp(c->name, "app"));
	c = kube_names_container(k, MIGRATE);
	CHECK(c && !strcmp(c->name, "migrate"));
	CHECK(kube_names_container(k, "containerd://" APP_NEW) == NULL);
	CHECK(kube_names_pod(k, "0b6c2f4e_1a2b_4c3d_9e8f_0123456789ab") == NULL);
	CHECK(kube_names_pod(k, "") == NULL);
	CHECK(kube_names_pod(NULL, WEB_UID) == NULL);
	CHECK(kube_names_container(NULL, APP_NEW) == NULL);
	kube_names_destroy(&k);
	CHECK(k == NULL);
	kube_names_destroy(&k);
}

static void test_refused(void)
{
	static const struct {
		const char *body, *err;
	} bad[] = {
	    {"<html>502 Bad Gateway</html>", "not JSON"},
	    {"", "not JSON"},
	    {"{\"items\": [", "not JSON"},
	    {"[]", "not a PodList"},
	    {"{\"kind\": \"Status\", \"status\": \"Failure\", \"code\": 401}", "not a PodList"},
	    {"{\"items\": {}}", "not a PodList"},
	    {"{\"items\": [{}], \"items\": null}", "not a PodList"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		size_t skipped;
		char err[256] = "";
		struct kube_names *k = parse_str(bad[i].body, &skipped, err, sizeof err);
		CHECK(k == NULL);
		if (!strstr(err, bad[i].err))
			printf("#   body %zu: err \"%s\", expected \"%s\"\n", i, err, bad[i].err);
		CHECK(strstr(err, bad[i].err) != NULL);
		kube_names_destroy(&k);
	}
}

static void test_items_skipped(void)
{
	size_t skipped;
	char err[256] = "";
	/* no uid; a name that is not a string; a NUL inside a name; 254 characters; not an object;
	 * a container without "://" in its id and one without a name; then a good pod */
	char longname[300];
	memset(longname, 'a', 254);
	longname[254] = '\0';
	char body[2048];
	snprintf(
	    body, sizeof body,
	    "{\"items\": [{\"metadata\": {\"name\": \"a\", \"namespace\": \"n\"}},{\"metadata\": {\"name\": 7, \"uid\": \"u2\"}},{\"metadata\": {\"name\": \"b\\u0000c\", \"uid\": \"u3\"}},{\"metadata\": {\"name\": \"%s\", \"uid\": \"u4\"}},42,{\"metadata\": {\"name\": \"ok\", \"uid\": \"u6\"}, \"status\": {\"containerStatuses\": [{\"name\": \"c\", \"containerID\": \"abc\"}, {\"containerID\": \"docker://d1\"}, {\"name\": \"x\", \"containerID\": \"cri-o://d2\"}]}}]}",
	    longname);
	struct kube_names *k = parse_str(body, &skipped, err, sizeof err);
	CHECK(k != NULL);
	CHECK_U64(skipped, 5);
	CHECK_U64(kube_names_npods(k), 1);
	const struct kube_pod *p = kube_names_pod(k, "u6");
	CHECK(p && !strcmp(p->name, "ok") && !strcmp(p->ns, "")); /* no namespace: empty */
	CHECK_U64(kube_names_ncontainers(k), 1);
	const struct kube_container *c = kube_names_container(k, "d2");
	CHECK(c && !strcmp(c->name, "x"));
	kube_names_destroy(&k);
}

/* One slot of host h1 [t0, t1): one zone, the given container and pod groups (ids). */
static void slot(struct accum *a, uint64_t t0, uint64_t t1, const char *ctr, const char *ctr_pod,
		 const char *pod)
{
	struct wb_msg m = {.kind = WB_ESTIMATE};
	struct wb_estimate *e = &m.estimate;
	snprintf(e->env.host, sizeof e->env.host, "h1");
	snprintf(e->env.kind, sizeof e->env.kind, "estimate");
	snprintf(e->env.src, sizeof e->env.src, "estimd");
	snprintf(e->mode, sizeof e->mode, "measured");
	e->t0 = t0;
	e->t1 = t1;
	e->ncpu = 4;
	e->n_zones = 1;
	e->zones = wb_array_new(1, sizeof *e->zones);
	snprintf(e->zones[0].name, sizeof e->zones[0].name, "package-0");
	snprintf(e->zones[0].zone, sizeof e->zones[0].zone, "package");
	e->zones[0].energy_uj = 10000000;
	e->zones[0].active_uj = 4000000;
	e->zones[0].idle_uj = 6000000;
	if (ctr) {
		e->n_containers = 1;
		e->containers = wb_array_new(1, sizeof *e->containers);
		snprintf(e->containers[0].id, sizeof e->containers[0].id, "%s", ctr);
		snprintf(e->containers[0].runtime, sizeof e->containers[0].runtime, "containerd");
		snprintf(e->containers[0].pod_uid, sizeof e->containers[0].pod_uid, "%s", ctr_pod);
		e->containers[0].cpu_ns = S / 2;
		e->containers[0].n_energy_uj = 1;
		e->containers[0].energy_uj = wb_array_new(1, sizeof(uint64_t));
		e->containers[0].energy_uj[0] = 1000000;
	}
	if (pod) {
		e->n_pods = 1;
		e->pods = wb_array_new(1, sizeof *e->pods);
		snprintf(e->pods[0].id, sizeof e->pods[0].id, "%s", pod);
		e->pods[0].cpu_ns = S / 2;
		e->pods[0].n_energy_uj = 1;
		e->pods[0].energy_uj = wb_array_new(1, sizeof(uint64_t));
		e->pods[0].energy_uj[0] = 1000000;
	}
	CHECK(accum_add(a, e, NULL) == 0);
	wb_msg_clear(&m);
}

static char *render(const struct accum *a)
{
	static struct rbuf b;
	rbuf_free(&b);
	struct render_filter all = {.levels = EX_LEVELS_ALL};
	struct render_input in = {.acc = a, .now_ns = 100 * S, .version = "0.1.0"};
	render_metrics(&in, &all, &b);
	rbuf_putc(&b, '\0');
	return b.p;
}

#define HAS(out, s)                                                                                \
	do {                                                                                       \
		CHECK(strstr(out, s) != NULL);                                                     \
		if (!strstr(out, s))                                                               \
			printf("#   missing: %s\n", s);                                            \
	} while (0)

static void test_series_names(void)
{
	struct accum_limits lim = {.levels = EX_LEVELS_ALL,
				   .max_series = 1000,
				   .max_terminated = 10,
				   .terminated_ttl_ns = 600 * S,
				   .stale_after_ns = 3 * S,
				   .max_hosts = 4,
				   .node_name = "node-a"};
	struct accum *a = accum_new(&lim);
	/* before the first answer: the uid and the short id */
	slot(a, 10 * S, 11 * S, REPORT, JOB_UID, JOB_UID);
	char *out = render(a);
	HAS(out, "kepler_pod_cpu_joules_total{node_name=\"node-a\",pod_id=\"" JOB_UID
		 "\",pod_name=\"" JOB_UID
		 "\",pod_namespace=\"\",state=\"running\",zone=\"package\"} 1.000000");
	HAS(out, "container_name=\"845e91831319\"");

	/* the names arrive: the same counters, now under the names */
	struct kube_names *k = fixture();
	a->kube = k;
	slot(a, 11 * S, 12 * S, REPORT, JOB_UID, JOB_UID);
	out = render(a);
	HAS(out,
	    "kepler_pod_cpu_joules_total{node_name=\"node-a\",pod_id=\"" JOB_UID
	    "\",pod_name=\"report-28731540-q7k2p\",pod_namespace=\"batch\",state=\"running\",zone=\"package\"} 2.000000");
	HAS(out, "kepler_container_cpu_joules_total{node_name=\"node-a\",container_id=\"" REPORT
		 "\",container_name=\"report\",runtime=\"containerd\",pod_id=\"" JOB_UID
		 "\",state=\"running\",zone=\"package\"} 2.000000");
	HAS(out, "kepler_container_cpu_seconds_total{node_name=\"node-a\",container_id=\"" REPORT
		 "\",container_name=\"report\",runtime=\"containerd\",pod_id=\"" JOB_UID
		 "\",state=\"running\"} 1.000000000");
	CHECK(strstr(out, "pod_name=\"" JOB_UID "\"") == NULL);

	/* the pod is deleted: a PodList without it; its last slot keeps the names */
	static const char *empty = "{\"kind\": \"PodList\", \"apiVersion\": \"v1\", \"items\": []}";
	size_t skipped;
	char err[64];
	struct kube_names *k2 = parse_str(empty, &skipped, err, sizeof err);
	CHECK(k2 != NULL);
	a->kube = k2;
	kube_names_destroy(&k);
	slot(a, 12 * S, 13 * S, REPORT, JOB_UID, JOB_UID);
	out = render(a);
	HAS(out,
	    "pod_name=\"report-28731540-q7k2p\",pod_namespace=\"batch\",state=\"running\",zone=\"package\"} 3.000000");
	CHECK(strstr(out, "pod_name=\"" JOB_UID "\"") == NULL);
	/* then it stops running and turns terminated, names and all */
	slot(a, 13 * S, 17 * S, NULL, NULL, NULL);
	out = render(a);
	HAS(out,
	    "pod_name=\"report-28731540-q7k2p\",pod_namespace=\"batch\",state=\"terminated\",zone=\"package\"} 3.000000");
	HAS(out, "kepler_container_cpu_seconds_total{node_name=\"node-a\",container_id=\"" REPORT
		 "\",container_name=\"report\",runtime=\"containerd\",pod_id=\"" JOB_UID
		 "\",state=\"terminated\"} 1.500000000");
	/* process CPU time stays without state, as in Kepler */
	CHECK(strstr(out, "kepler_process_cpu_seconds_total{node_name=\"node-a\",pid") == NULL ||
	      !strstr(strstr(out, "kepler_process_cpu_seconds_total{"), "state="));
	a->kube = NULL;
	kube_names_destroy(&k2);
	accum_destroy(&a);
}

static const struct unit_case cases[] = {
    {"a kubelet PodList: pods, init containers, restarted containers", test_podlist},
    {"not JSON, not a PodList: refused with a reason", test_refused},
    {"pods without uid or name, containers without id: left out and counted", test_items_skipped},
    {"names land on the series when they arrive and stay after the pod is deleted",
     test_series_names},
};
UNIT_MAIN(cases)
