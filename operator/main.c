/*
 * wattbus-operator: turns the WattBus resource into the objects of
 * deploy/kubernetes and reports their state in its status. See wattbus-operator(8).
 */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kube.h"
#include "log.h"
#include "operator.h"
#include "reconcile.h"

#define SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"
/* A watch is ended and everything read again at least this often (a resync). */
#define RESYNC_MS (300 * 1000L)
#define BACKOFF_MIN_MS 500L
#define BACKOFF_MAX_MS (30 * 1000L)

static volatile sig_atomic_t stop_flag;

static void on_signal(int sig)
{
	stop_flag = 1;
}

/* Wait MS, or less when a stop comes (seen within 100 ms). */
static void pause_ms(long ms)
{
	for (long left = ms; left > 0 && !stop_flag; left -= 100) {
		struct timespec ts = {0, (left < 100 ? left : 100) * 1000000L};
		nanosleep(&ts, NULL);
	}
}

/*
 * Reconcile, then watch the WattBus, the DaemonSets, Deployments and ConfigMaps from where
 * the reconcile read them; any event, a watch's end or an error reconciles again
 * (after a backoff when the API server could not be asked).
 */
static int run(const struct kube *k)
{
	struct sigaction sa = {.sa_handler = on_signal};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	char err[768];
	if (kube_load(err, sizeof(err)) < 0) {
		log_errx("%s", err);
		return 1;
	}
	log_info("watching %s for WattBus %s", k->url, OP_NAME);
	long backoff = BACKOFF_MIN_MS;
	bool down = false;
	while (!stop_flag) {
		struct op_watch w;
		memset(&w, 0, sizeof(w));
		err[0] = 0;
		if (op_reconcile(k, &w, err, sizeof(err)) < 0) {
			if (stop_flag)
				break;
			log_warnx("reconcile: %s; again in %ld ms", err, backoff);
			down = true;
			pause_ms(backoff);
			backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
			continue;
		}
		if (down)
			log_info("reconcile: %s answers again", k->url);
		down = false;
		backoff = BACKOFF_MIN_MS;
		char p0[256], p1[256], p2[256];
		snprintf(
		    p0, sizeof(p0),
		    "/apis/wattbus.io/v1alpha1/wattbuses?watch=1&resourceVersion=%s&timeoutSeconds=%ld",
		    w.rv_wattbus, RESYNC_MS / 1000);
		snprintf(
		    p1, sizeof(p1),
		    "/apis/apps/v1/namespaces/wattbus/daemonsets?watch=1&resourceVersion=%s&timeoutSeconds=%ld",
		    w.rv_daemonsets, RESYNC_MS / 1000);
		snprintf(
		    p2, sizeof(p2),
		    "/apis/apps/v1/namespaces/wattbus/deployments?watch=1&resourceVersion=%s&timeoutSeconds=%ld",
		    w.rv_deployments, RESYNC_MS / 1000);
		char p3[256];
		snprintf(
		    p3, sizeof(p3),
		    "/api/v1/namespaces/wattbus/configmaps?watch=1&resourceVersion=%s&timeoutSeconds=%ld",
		    w.rv_configmaps, RESYNC_MS / 1000);
		const char *const paths[] = {p0, p1, p2, p3};
		if (kube_watch_any(k, paths, 4, RESYNC_MS + 10000, err, sizeof(err)) < 0 &&
		    !stop_flag) {
			log_warnx("watch: %s; reading everything again in %ld ms", err, backoff);
			pause_ms(backoff);
		}
	}
	log_info("stopped");
	return 0;
}

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: wattbus-operator --render [--spec FILE] [--env FILE]\n"
	    "       wattbus-operator [--url URL] [--token-file FILE] [--ca-file FILE] [--timeout MS] [-v]\n"
	    "  --render      print the objects a WattBus resource makes (JSON documents between ---) and exit\n"
	    "  --spec FILE   the WattBus resource, as JSON (kubectl get wattbus wattbus -o json); default: the default spec\n"
	    "  --env FILE    the data of the ConfigMap spec.config names, as JSON (it is part of the config hash)\n"
	    "  --url URL     the API server (default https://kubernetes.default.svc)\n"
	    "  --token-file FILE, --ca-file FILE   default: the pod's service account's (empty: none, the system's CAs)\n"
	    "  --timeout MS  deadline of one request (default 10000)\n"
	    "  -v            log debug messages\n");
}

static json_t *load(const char *path, const char *what)
{
	json_error_t je;
	json_t *j = json_load_file(path, 0, &je);
	if (!j)
		fprintf(stderr, "wattbus-operator: %s %s: line %d: %s\n", what, path, je.line,
			je.text);
	else if (!json_is_object(j)) {
		fprintf(stderr, "wattbus-operator: %s %s: not a JSON object\n", what, path);
		json_decref(j);
		j = NULL;
	}
	return j;
}

static int render(const char *spec_path, const char *env_path)
{
	json_t *wb = NULL, *env = NULL;
	if (spec_path && !(wb = load(spec_path, "--spec")))
		return 2;
	if (env_path && !(env = load(env_path, "--env"))) {
		json_decref(wb);
		return 2;
	}
	struct op_render r;
	char err[256];
	int rc = 0;
	if (op_render(wb, env, &r, err, sizeof(err)) < 0) {
		fprintf(stderr, "wattbus-operator: %s: %s\n",
			spec_path ? spec_path : "default spec", err);
		rc = 2;
	} else {
		if (r.refused[0])
			fprintf(stderr, "wattbus-operator: %s: %s\n", r.refused_reason, r.refused);
		size_t i;
		json_t *o;
		json_array_foreach(r.objects, i, o)
		{
			char *s = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
			printf("---\n%s\n", s);
			free(s);
		}
		op_render_clear(&r);
	}
	json_decref(wb);
	json_decref(env);
	return fflush(stdout) == 0 ? rc : 1;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"render", no_argument, NULL, 'R'},	       {"spec", required_argument, NULL, 'S'},
	    {"env", required_argument, NULL, 'E'},     {"help", no_argument, NULL, 'h'},
	    {"url", required_argument, NULL, 'U'},     {"token-file", required_argument, NULL, 'T'},
	    {"ca-file", required_argument, NULL, 'C'}, {"timeout", required_argument, NULL, 'O'},
	    {"version", no_argument, NULL, 'V'},       {NULL, 0, NULL, 0}};
	const char *spec = NULL, *env = NULL;
	bool do_render = false;
	struct kube k = {.url = "https://kubernetes.default.svc",
			 .token_file = SA_DIR "/token",
			 .ca_file = SA_DIR "/ca.crt",
			 .timeout_ms = 10000,
			 .stop = &stop_flag};
	int level = WB_LOG_INFO;
	char *end;
	int c;
	while ((c = getopt_long(argc, argv, "hv", opts, NULL)) != -1) {
		switch (c) {
		case 'U':
			k.url = optarg;
			break;
		case 'T':
			k.token_file = optarg;
			break;
		case 'C':
			k.ca_file = optarg;
			break;
		case 'O':
			k.timeout_ms = strtol(optarg, &end, 10);
			if (*end || k.timeout_ms < 100 || k.timeout_ms > 600000) {
				fprintf(
				    stderr,
				    "wattbus-operator: --timeout: '%s' is not a number of milliseconds in [100, 600000]\n",
				    optarg);
				return 2;
			}
			break;
		case 'v':
			level = WB_LOG_DEBUG;
			break;
		case 'R':
			do_render = true;
			break;
		case 'S':
			spec = optarg;
			break;
		case 'E':
			env = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf("wattbus-operator %s\n", WB_VERSION);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "wattbus-operator: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	if (do_render)
		return render(spec, env);
	if (spec || env) {
		fprintf(stderr, "wattbus-operator: --spec and --env go with --render\n");
		return 2;
	}
	size_t ulen = strlen(k.url);
	if (strncmp(k.url, "http://", 7) != 0 && strncmp(k.url, "https://", 8) != 0) {
		fprintf(stderr, "wattbus-operator: --url: '%s' is not an http:// or https:// URL\n",
			k.url);
		return 2;
	}
	static char url[512];
	snprintf(url, sizeof(url), "%.*s", (int)(ulen && k.url[ulen - 1] == '/' ? ulen - 1 : ulen),
		 k.url);
	k.url = url;
	log_init("wattbus-operator", level);
	return run(&k);
}
