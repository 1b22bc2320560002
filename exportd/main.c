/*
 * wattbus-exportd: subscribes to estimate and stat messages, keeps its own energy
 * accumulators and serves them on HTTP /metrics under Kepler's metric names,
 * with the pipeline's health as wattbus_*. See wattbus-exportd(8).
 */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "clock.h"
#include "daemon.h"
#include "exportd.h"
#include "log.h"

struct exportd_conf {
	char *pub;
	struct wb_strlist sub;
	struct wb_httpd_conf http;
	struct wb_strlist levels;
	struct wb_strlist metrics;
	int64_t node_type;
	struct wb_strlist metrics_allow;
	struct wb_strlist metrics_deny;
	char *node_name;
	int64_t max_series;
	int64_t max_terminated;
	uint64_t terminated_ttl_ns;
	uint64_t stale_after_ns;
	uint64_t stage_timeout_ns;
	int64_t max_hosts;
	int64_t max_producers;
	int64_t gzip_level;
	char *procfs;
	char *state_file;
	uint64_t state_every_ns;
	char *kube_source;
	char *kube_url;
	char *kube_node;
	char *kube_token_file;
	char *kube_ca_file;
	bool kube_insecure;
	uint64_t kube_interval_ns;
	uint64_t kube_timeout_ns;
	int64_t kube_max_bytes;
};

#define K(name, type, field, def, min, max, help)                                                  \
	{                                                                                          \
		name, type, offsetof(struct exportd_conf, field), def, min, max, NULL, help        \
	}
static const struct wb_conf_key exportd_keys[] = {
    K("pub", WB_CONF_STR, pub, "ipc://%r/exportd.sock", 0, 0,
      "endpoint exportd's stat messages are published on"),
    K("sub", WB_CONF_LIST, sub,
      "ipc://%r/estimd.sock,ipc://%r/powerd.sock,ipc://%r/usaged.sock,ipc://%r/alignd.sock,ipc://%r/exportd.sock,ipc://%r/modeld.sock",
      0, 0, "endpoints to read estimate/ and stat/ messages from"),
    K("levels", WB_CONF_LIST, levels, "node,process,container,pod,vm", 0, 0,
      "workload levels exported (Kepler's metricsLevel): node, process, container, pod, vm"),
    K("metrics", WB_CONF_LIST, metrics, "kepler", 0, 0,
      "metric profiles served: kepler (Kepler >= 0.10's names and labels), kepler-0.9 (Kepler 0.9's, as its dashboards and model server's trainers query them), or both"),
    K("node_type", WB_CONF_INT, node_type, "0", 0, 1e6,
      "kepler-0.9: the value of kepler_node_node_info, the node type kepler-model-server's trainers file this machine's data under (0: theirs by default)"),
    K("metrics_allow", WB_CONF_GLOBS, metrics_allow, "", 0, 0,
      "metric names (shell patterns) to export; empty: all"),
    K("metrics_deny", WB_CONF_GLOBS, metrics_deny, "", 0, 0,
      "metric names (shell patterns) never exported; wins over metrics_allow"),
    K("node_name", WB_CONF_STR, node_name, "", 0, 0,
      "value of the node_name label; empty: the host name each estimate carries"),
    K("max_series", WB_CONF_INT, max_series, "500000", 1, 1e9,
      "workload series (process, container, pod, vm) exported at most; the rest are dropped and counted"),
    K("max_terminated", WB_CONF_INT, max_terminated, "500", 0, 1e7,
      "terminated workloads kept per host and level (oldest go first)"),
    K("terminated_ttl", WB_CONF_DURATION, terminated_ttl_ns, "10m", 0, 30 * 86400e9,
      "how long a terminated workload stays exported (0: until max_terminated pushes it out)"),
    K("stale_after", WB_CONF_DURATION, stale_after_ns, "5m", 0, 30 * 86400e9,
      "a workload absent from the estimates this long is shown as terminated (0: only on exit)"),
    K("stage_timeout", WB_CONF_DURATION, stage_timeout_ns, "0", 0, 86400e9,
      "wattbus_stage_up is 0 when a stage's last stat is older (0: three stat intervals)"),
    K("max_hosts", WB_CONF_INT, max_hosts, "256", 1, 1e6, "hosts whose estimates are kept"),
    K("max_producers", WB_CONF_INT, max_producers, "1024", 1, 1e6,
      "stat producers (host, stage, src) kept"),
    WB_HTTPD_KEYS(struct exportd_conf, http, ":9102", "64"),
    K("gzip_level", WB_CONF_INT, gzip_level, "1", 0, 9,
      "gzip level when the scraper accepts gzip (0: never compress)"),
    K("procfs", WB_CONF_STR, procfs, "/proc", 0, 0, "procfs mount read for kepler_node_cpu_info"),
    K("state_file", WB_CONF_STR, state_file, "%r/exportd.state", 0, 0,
      "where the node energy counters are saved, so that a restart continues them (empty: nowhere)"),
    K("state_every", WB_CONF_DURATION | WB_CONF_OFF0, state_every_ns, "1s", 100e6, 3600e9,
      "also save the state this often while running (0: at stop only; else 100ms to 1h)"),
    {"kube_source", WB_CONF_ENUM | WB_CONF_RESTART, offsetof(struct exportd_conf, kube_source),
     "none", 0, 0, "none|kubelet|apiserver",
     "where pod and container names come from: none (pod_name shows the uid), the kubelet's /pods, or the API server's pods of kube_node"},
    K("kube_url", WB_CONF_STR | WB_CONF_RESTART, kube_url, "", 0, 0,
      "base URL of the kubelet or API server; empty: https://127.0.0.1:10250 (kubelet), https://kubernetes.default.svc (apiserver)"),
    K("kube_node", WB_CONF_STR | WB_CONF_RESTART, kube_node, "", 0, 0,
      "apiserver: the node whose pods are listed (spec.nodeName); empty: node_name, else [global] host, else the host name"),
    K("kube_token_file", WB_CONF_STR | WB_CONF_RESTART, kube_token_file,
      "/var/run/secrets/kubernetes.io/serviceaccount/token", 0, 0,
      "bearer token, read again at every poll (projected tokens rotate); empty: none"),
    K("kube_ca_file", WB_CONF_STR | WB_CONF_RESTART, kube_ca_file,
      "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt", 0, 0,
      "PEM bundle the server's certificate is verified with; empty: the system's"),
    K("kube_insecure", WB_CONF_BOOL | WB_CONF_RESTART, kube_insecure, "false", 0, 0,
      "do not verify the server's certificate (a kubelet with a self-signed serving certificate)"),
    K("kube_interval", WB_CONF_DURATION | WB_CONF_RESTART, kube_interval_ns, "15s", 1e9, 86400e9,
      "how often the names are asked for"),
    K("kube_timeout", WB_CONF_DURATION | WB_CONF_RESTART, kube_timeout_ns, "10s", 1e8, 600e9,
      "deadline of one poll"),
    K("kube_max_bytes", WB_CONF_INT | WB_CONF_RESTART, kube_max_bytes, "8388608", 4096, 1e9,
      "a longer answer is refused (counted as kube_too_big) and the last names stay"),
};
#undef K

/* A node name is a DNS subdomain: nothing in it needs escaping in the query. */
static bool node_name_ok(const char *s)
{
	for (const char *p = s; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-' ||
		      *p == '.'))
			return false;
	return true;
}

static int check_conf(const void *conf, char *err, size_t errlen)
{
	const struct exportd_conf *c = conf;
	unsigned levels;
	if (levels_parse(&c->levels, &levels, err, errlen) < 0)
		return -1;
	unsigned profiles;
	if (profiles_parse(&c->metrics, &profiles, err, errlen) < 0)
		return -1;
	if (wb_httpd_conf_check(&c->http, err, errlen) < 0)
		return -1;
	if (!node_name_ok(c->kube_node)) {
		snprintf(
		    err, errlen,
		    "kube_node: \"%s\" is not a node name (lower-case letters, digits, '-' and '.')",
		    c->kube_node);
		return -1;
	}
	return 0;
}

static const struct wb_stage exportd_stage =
    WB_STAGE("exportd", "Serve the pipeline's estimates to Prometheus under Kepler's metric names.",
	     exportd_keys, struct exportd_conf, check_conf);

struct exportd {
	struct wb_daemon *d;
	struct accum *acc;
	struct stages *st;
	struct http *http;
	struct kube *kube;
	struct wb_cpuinfo_cpu *cpus;
	size_t ncpus;
	struct exportd_counters ctr;
	struct render_filter filter;
	int64_t node_type;
	uint64_t stage_timeout_ns;
	struct wb_ratelimit rl;
	uint64_t *c_estimates, *c_rejected, *c_stat_rejected, *c_series, *c_dropped, *c_scrapes;
	uint64_t *c_state_write_failed, *c_state_load_failed;
	struct wb_checkpoint cp; /* state_every as started (a reload keeps it) */
	struct wb_ratelimit rl_state;
	char arch[72];
};

static void limits_from(const struct exportd_conf *c, unsigned levels, struct accum_limits *lim)
{
	*lim = (struct accum_limits){
	    .levels = levels,
	    .max_series = (size_t)c->max_series,
	    .max_terminated = (size_t)c->max_terminated,
	    .terminated_ttl_ns = c->terminated_ttl_ns,
	    .stale_after_ns = c->stale_after_ns,
	    .max_hosts = (size_t)c->max_hosts,
	    .node_name = c->node_name,
	};
}

/* The physical bound of [global], for the totals' steps. */
static struct wb_plaus bound_of(struct wb_daemon *d)
{
	const struct wb_global *g = wb_daemon_global(d);
	return (struct wb_plaus){.max_zone_w = g->max_zone_w, .max_host_w = g->max_host_w};
}

static void set_counter(uint64_t *c, uint64_t v)
{
	if (c)
		*c = v;
}

/* Mirror exportd's own counters into its stat message. */
static void mirror(struct exportd *x)
{
	uint64_t est = 0, rej = 0, srej = 0, dropped = 0;
	for (size_t i = 0; i < x->acc->nhosts; i++)
		est += x->acc->hosts[i]->estimates;
	for (int r = 0; r < ACC_R_COUNT; r++)
		rej += x->acc->rejected[r];
	for (int r = 0; r < ST_R_COUNT; r++)
		srej += x->st->rejected[r];
	for (int l = 0; l < EX_NLEVELS; l++)
		dropped += x->acc->dropped[l];
	set_counter(x->c_estimates, est);
	set_counter(x->c_rejected, rej);
	set_counter(x->c_stat_rejected, srej);
	set_counter(x->c_series, accum_series(x->acc));
	set_counter(x->c_dropped, dropped);
	set_counter(x->c_scrapes, x->ctr.http.requests[1]);
}

static void on_estimate(struct exportd *x, const struct wb_estimate *e, const struct wb_rx *rx)
{
	enum accum_reason why;
	if (rx->new_epoch)
		log_info("estimate/%s: %s restarted (epoch %" PRIu64
			 "); the counters go on from their totals",
			 e->env.host, e->env.src, e->env.epoch);
	if (accum_add(x->acc, e, &why) < 0) {
		/* a replay or a second estimd is not a fault of the message; the rest are */
		log_rl(&x->rl, why == ACC_R_STALE ? WB_LOG_INFO : WB_LOG_WARN,
		       "estimate/%s from %s seq %" PRIu64 " [%" PRIu64 ", %" PRIu64
		       "]: not applied (%s)",
		       e->env.host, e->env.src, e->env.seq, e->t0, e->t1, accum_reason_name(why));
		return;
	}
	struct ex_host *h = accum_host(x->acc, e->env.host);
	if (h) {
		if (h->estimates == 1)
			log_info("estimate/%s: first slot from %s (%zu zones, mode %s)",
				 e->env.host, e->env.src, h->nzones, e->mode);
		h->last_recv_ns = rx->recv_ns;
	}
	/* Only estimates change the node counters: the checkpoint rides on them. */
	wb_checkpoint_changed(&x->cp);
}

static void on_msg(struct wb_daemon *d, const struct wb_msg *msg, const struct wb_rx *rx, void *arg)
{
	struct exportd *x = arg;
	if (msg->kind == WB_ESTIMATE) {
		on_estimate(x, &msg->estimate, rx);
	} else if (msg->kind == WB_STAT) {
		enum stages_reason why;
		if (stages_add(x->st, &msg->stat, rx->recv_ns, &why) < 0)
			log_rl(&x->rl, WB_LOG_WARN,
			       "stat/%s from %s (%s) seq %" PRIu64 ": not applied (%s)",
			       msg->stat.env.host, msg->stat.stage, msg->stat.env.src,
			       msg->stat.env.seq, stages_reason_name(why));
	}
	mirror(x);
}

static void on_scrape(void *arg, struct rbuf *out)
{
	struct exportd *x = arg;
	const char *compiler =
#ifdef __clang__
	    "clang " __clang_version__;
#else
	    "gcc " __VERSION__;
#endif
	struct render_input in = {
	    .acc = x->acc,
	    .st = x->st,
	    .cpus = x->cpus,
	    .ncpus = x->ncpus,
	    .ctr = &x->ctr,
	    .now_ns = wb_now_ns(),
	    .stage_timeout_ns = x->stage_timeout_ns,
	    .version = WB_VERSION,
	    .arch = x->arch,
#ifdef WB_REVISION
	    .revision = WB_REVISION,
#endif
	    .compiler = compiler,
	    .node_type = x->node_type,
	};
	render_metrics(&in, &x->filter, out);
	mirror(x);
}

static void on_names(void *arg, const struct kube_names *names)
{
	struct exportd *x = arg;
	x->acc->kube = names;
}

/* Start polling the kubelet or the API server when kube_source says so. Returns 0, -1 (a runtime
 * failure) or -2 (no usable node name: a configuration error). */
static int start_kube(struct exportd *x, const struct exportd_conf *c)
{
	bool apiserver = !strcmp(c->kube_source, "apiserver");
	if (!strcmp(c->kube_source, "none"))
		return 0;
	char host[256] = "";
	/* on a DaemonSet, [global] host is the node's name (WATTBUS_GLOBAL_HOST, spec.nodeName);
	 * the host name is the pod's */
	const char *node = c->kube_node[0]		  ? c->kube_node
			   : c->node_name[0]		  ? c->node_name
			   : wb_daemon_global(x->d)->host ? wb_daemon_global(x->d)->host
							  : "";
	if (apiserver && !node[0]) {
		if (gethostname(host, sizeof host - 1) < 0 || !host[0]) {
			log_errx("kube_node: empty, and no host name to use instead");
			return -2;
		}
		node = host;
	}
	if (apiserver && !node_name_ok(node)) {
		log_errx(
		    "kube_node: \"%s\" (from node_name, [global] host or the host name) is not a node name; set kube_node",
		    node);
		return -2;
	}
	struct kube_opts ko = {
	    .apiserver = apiserver,
	    .url = c->kube_url[0]
		       ? c->kube_url
		       : (apiserver ? "https://kubernetes.default.svc" : "https://127.0.0.1:10250"),
	    .node = node,
	    .token_file = c->kube_token_file,
	    .ca_file = c->kube_ca_file,
	    .insecure = c->kube_insecure,
	    .interval_ns = c->kube_interval_ns,
	    .timeout_ns = c->kube_timeout_ns,
	    .max_bytes = (size_t)c->kube_max_bytes,
	};
	x->kube = kube_new(x->d, &ko, on_names, x);
	return x->kube ? 0 : -1;
}

/* Go's names for the architecture, as kepler_build_info's arch label shows them. */
static void arch_name(char *buf, size_t len)
{
	struct utsname u;
	const char *m = uname(&u) == 0 ? u.machine : "";
	if (!strcmp(m, "x86_64"))
		m = "amd64";
	else if (!strcmp(m, "aarch64"))
		m = "arm64";
	else if (!strcmp(m, "i686") || !strcmp(m, "i386"))
		m = "386";
	snprintf(buf, len, "%s", m);
}

static void load_cpuinfo(struct exportd *x, const struct exportd_conf *c)
{
	char *path;
	free(x->cpus);
	x->cpus = NULL;
	x->ncpus = 0;
	if (asprintf(&path, "%s/cpuinfo", c->procfs[0] ? c->procfs : "/proc") < 0)
		return;
	char err[4200];
	int n = wb_cpuinfo_read(path, &x->cpus, err, sizeof err);
	free(path);
	if (n < 0)
		log_warnx("cpuinfo: %s: kepler_node_cpu_info not exported", err);
	x->ncpus = n > 0 ? (size_t)n : 0;
}

static uint64_t stage_timeout(struct exportd *x, const struct exportd_conf *c)
{
	return c->stage_timeout_ns ? c->stage_timeout_ns
				   : 3 * wb_daemon_global(x->d)->stat_interval_ns;
}

static void apply_filter(struct exportd *x, const struct exportd_conf *c, unsigned levels)
{
	char err[WB_CONF_ERR_MAX];
	unsigned profiles = 1u << EX_PROF_KEPLER;
	if (profiles_parse(&c->metrics, &profiles, err, sizeof err) < 0)
		log_errx("%s", err); /* not reached: check_conf refused it */
	x->filter = (struct render_filter){.profiles = profiles,
					   .levels = levels,
					   .allow = &c->metrics_allow,
					   .deny = &c->metrics_deny};
	x->node_type = c->node_type;
}

static int on_reload(struct wb_daemon *d, void *new_conf, void *arg)
{
	struct exportd *x = arg;
	const struct exportd_conf *old = wb_daemon_conf(d), *c = new_conf;
	unsigned levels;
	char err[WB_CONF_ERR_MAX];
	if (levels_parse(&c->levels, &levels, err, sizeof err) < 0) {
		log_errx("reload: %s", err);
		return -1;
	}
	struct accum_limits lim;
	limits_from(c, levels, &lim);
	lim.bound = bound_of(d);
	accum_set_limits(x->acc, &lim);
	x->st->max = (size_t)c->max_producers;
	/* the new conf replaces the old one once we return 0: point at its lists */
	apply_filter(x, c, levels);
	x->stage_timeout_ns = stage_timeout(x, c);
	load_cpuinfo(x, c);
	bool http_same =
	    wb_httpd_conf_same(&old->http, &c->http) && old->gzip_level == c->gzip_level;
	if (!http_same)
		log_warnx(
		    "reload: the HTTP settings (listen, limits, gzip, TLS, auth) keep their old values until a restart");
	if (old->state_every_ns != c->state_every_ns)
		log_warnx("reload: state_every keeps its old value until a restart");
	if (strcmp(old->pub, c->pub) || old->sub.n != c->sub.n)
		log_warnx("reload: pub and sub keep their old values until a restart");
	return 0;
}

/* Save the node counters (lib/daemon.h's checkpoint: only after a change). */
static int save_state(void *arg, bool sync)
{
	struct exportd *x = arg;
	const struct exportd_conf *c = wb_daemon_conf(x->d);
	char err[WB_CONF_ERR_MAX];
	if (!c->state_file[0])
		return 0;
	if (accum_save(x->acc, c->state_file, sync, err, sizeof err) < 0) {
		(*x->c_state_write_failed)++;
		wb_daemon_stats(x->d)->checkpoint_failures++;
		log_rl(&x->rl_state, WB_LOG_WARN, "state %s", err);
		return -1;
	}
	return 0;
}

static void load_state(struct exportd *x, const char *path)
{
	char err[WB_CONF_ERR_MAX];
	size_t n;
	if (!path[0] || access(path, F_OK) != 0)
		return;
	if (accum_load(x->acc, path, &n, err, sizeof err) < 0) {
		(*x->c_state_load_failed)++;
		log_warnx("state %s: ignored; the node counters start from 0", err);
		return;
	}
	log_info("state %s: node counters of %zu hosts resumed", path, n);
}

int main(int argc, char **argv)
{
	struct exportd x = {.rl = WB_RATELIMIT_INIT, .rl_state = WB_RATELIMIT_INIT};
	x.d = wb_daemon_new(&exportd_stage, argc, argv);
	struct exportd_conf *c = wb_daemon_conf(x.d);
	int rc = WB_EXIT_FAILURE;
	char err[WB_CONF_ERR_MAX];
	unsigned levels;
	char *password = NULL;
	if (levels_parse(&c->levels, &levels, err, sizeof err) < 0) {
		log_errx("%s", err);
		rc = WB_EXIT_USAGE;
		goto out;
	}
	struct accum_limits lim;
	limits_from(c, levels, &lim);
	lim.bound = bound_of(x.d);
	x.acc = accum_new(&lim);
	x.st = stages_new((size_t)c->max_producers);
	if (!x.acc || !x.st) {
		log_errx("out of memory");
		goto out;
	}
	apply_filter(&x, c, levels);
	x.stage_timeout_ns = stage_timeout(&x, c);
	arch_name(x.arch, sizeof x.arch);
	load_cpuinfo(&x, c);

	static const struct wb_stat_row rows[] = {
	    WB_STAT_ROW(struct exportd, c_estimates, "estimates"),
	    WB_STAT_ROW(struct exportd, c_rejected, "estimates_rejected"),
	    WB_STAT_ROW(struct exportd, c_stat_rejected, "stats_rejected"),
	    WB_STAT_ROW(struct exportd, c_series, "series"),
	    WB_STAT_ROW(struct exportd, c_dropped, "series_dropped"),
	    WB_STAT_ROW(struct exportd, c_scrapes, "http_2xx"),
	    WB_STAT_ROW(struct exportd, c_state_write_failed, "state_write_failed"),
	    WB_STAT_ROW(struct exportd, c_state_load_failed, "state_load_failed"),
	};
	wb_stats_bind(wb_daemon_stats(x.d), &x, rows, sizeof(rows) / sizeof(rows[0]));
	load_state(&x, c->state_file);

	if (c->http.auth_user[0] &&
	    !(password = wb_httpd_read_password(c->http.auth_password_file))) {
		rc = WB_EXIT_USAGE;
		goto out;
	}
	struct http_opts ho = {
	    .srv = wb_httpd_opts_of(&c->http),
	    .gzip_level = (int)c->gzip_level,
	};
	ho.srv.auth_user = c->http.auth_user[0] ? c->http.auth_user : NULL;
	ho.srv.auth_pass = password;
	x.http = http_new(&ho, wb_daemon_loop(x.d), on_scrape, &x, &x.ctr);
	if (password) {
		explicit_bzero(password, strlen(password));
		free(password);
	}
	if (!x.http)
		goto out;
	static const char *const prefixes[] = {"estimate/", "stat/", NULL};
	if (wb_daemon_subscribe(x.d, &c->sub, prefixes, on_msg, &x) < 0) {
		log_errx("cannot subscribe to the sub endpoints");
		goto out;
	}
	wb_daemon_on_reload(x.d, on_reload, &x);
	wb_daemon_set_mode(x.d, c->http.tls_cert[0] ? "https" : "http");
	log_info("serving /metrics and /healthz on %s%s (port %u), levels %s%s%s%s%s",
		 c->http.tls_cert[0] ? "https " : "", c->http.listen, http_port(x.http),
		 levels & 1u << EX_NODE ? "node " : "", levels & 1u << EX_PROCESS ? "process " : "",
		 levels & 1u << EX_CONTAINER ? "container " : "",
		 levels & 1u << EX_POD ? "pod " : "", levels & 1u << EX_VM ? "vm" : "");
	wb_checkpoint_init(&x.cp, x.d, c->state_file[0] ? c->state_every_ns : 0, false, save_state,
			   &x);
	int kr = start_kube(&x, c);
	if (kr < 0) {
		rc = kr == -2 ? WB_EXIT_USAGE : WB_EXIT_FAILURE;
		goto out;
	}
	rc = wb_daemon_run(x.d);
	/* a reload may have replaced c */
	wb_checkpoint_stop(&x.cp); /* with the state_file of the last reload */
out:
	kube_destroy(&x.kube);
	if (x.acc)
		x.acc->kube = NULL;
	http_destroy(&x.http);
	accum_destroy(&x.acc);
	stages_destroy(&x.st);
	free(x.cpus);
	wb_daemon_destroy(&x.d);
	return rc;
}
