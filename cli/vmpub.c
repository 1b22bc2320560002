/*
 * wattbus vmpub: the host's measurement of one VM, published for its guest.
 * Reads estimd's estimates of this host and publishes, for the named VM only,
 * an estimate of host VM whose zones carry the VM's cumulative energy
 * (zones[].total_uj from vms[].total_uj, in estimd's total_epoch). One process
 * per VM, each on its own endpoint with its own CURVE allow directory, so a
 * guest can only ever receive its own VM's energy (docs/VM.md). It runs on
 * lib/daemon like the stages (readiness, watchdog, SIGHUP, its stat messages on
 * a local socket of its own, never on the guest's).
 */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bus.h"
#include "cli.h"
#include "daemon.h"
#include "log.h"

struct vmpub {
	struct vm_totals t;
	const char *host;
	struct wb_daemon *d;
	struct wb_pub *pub; /* the guest's stream (the daemon's PUB carries the stat messages) */
	uint64_t *frames, *sent, *send_failed, *no_totals, *other_hosts;
	struct wb_ratelimit rl;
};

#define R(f) WB_STAT_ROW(struct vmpub, f, "vmpub_" #f)
static const struct wb_stat_row vmpub_stats[] = {
    R(frames), R(sent), R(send_failed), R(no_totals), R(other_hosts),
};
#undef R

struct vmpub_conf {
	char *pub;
	struct wb_strlist sub;
	char *vm, *endpoint;
	char *curve_cert, *curve_allow;
};

#define K(name, type, field, def, help)                                                            \
	{                                                                                          \
		name, (type) | WB_CONF_RESTART, offsetof(struct vmpub_conf, field), def, 0, 0,     \
		    NULL, help                                                                     \
	}
static const struct wb_conf_key vmpub_keys[] = {
    K("vm", WB_CONF_UTF8, vm, "",
      "the VM's name as estimd reports it (the libvirt domain name): the first argument"),
    K("endpoint", WB_CONF_STR, endpoint, "",
      "where the VM's guest subscribes (binds; e.g. tcp://192.168.122.1:5610): the second argument"),
    K("sub", WB_CONF_LIST, sub, "ipc://%r/estimd.sock",
      "estimd's endpoint: the estimates of [global] host (-s is short for --sub)"),
    K("pub", WB_CONF_STR, pub, "",
      "endpoint of vmpub's own stat messages, never the guest's; a flag, as each VM needs its own (default: ipc://%r/vmpub-VM.sock)"),
    K("curve_cert", WB_CONF_STR, curve_cert, "",
      "serve a tcp:// endpoint with CURVE using this certificate (FILE_secret beside it)"),
    K("curve_allow", WB_CONF_STR, curve_allow, "",
      "directory holding the public certificate of this VM's guest alone (needed with curve_cert)"),
};
#undef K

static int vmpub_check(const void *conf, char *err, size_t errlen)
{
	const struct vmpub_conf *c = conf;
	if (!c->vm[0] || strlen(c->vm) > 63) {
		snprintf(
		    err, errlen,
		    "vm '%s': needs 1 to 63 bytes (it becomes the host name of the guest's stream)",
		    c->vm);
		return -1;
	}
	if (!c->endpoint[0]) {
		snprintf(err, errlen, "endpoint: where the VM's guest subscribes is needed");
		return -1;
	}
	if (c->curve_cert[0] && !c->curve_allow[0]) {
		snprintf(
		    err, errlen,
		    "curve_cert needs curve_allow, a directory holding only VM %s's public certificate: without it any key gets in",
		    c->vm);
		return -1;
	}
	return 0;
}

static const struct wb_stage vmpub_stage = {
    .name = "vmpub",
    .summary =
	"One VM's measured energy from estimd, published for its guest (powerd's bus source): wattbus vmpub [OPTIONS] VM ENDPOINT.",
    .keys = vmpub_keys,
    .nkeys = sizeof(vmpub_keys) / sizeof(vmpub_keys[0]),
    .conf_size = sizeof(struct vmpub_conf),
    .check = vmpub_check,
    .program = "wattbus vmpub",
    .man = "wattbus(1) and docs/VM.md",
};

static void vmpub_on_msg(struct wb_daemon *d, const struct wb_msg *m, const struct wb_rx *rx,
			 void *arg)
{
	static struct wb_est_zone zones[VM_TOTALS_ZONES_MAX];
	struct vmpub *v = arg;
	if (m->kind != WB_ESTIMATE)
		return;
	/* the prefix estimate/HOST also matches estimate/HOST2 */
	if (strcmp(m->estimate.env.host, v->host) != 0) {
		(*v->other_hosts)++;
		return;
	}
	(*v->frames)++;
	const struct wb_estimate *e = &m->estimate;
	size_t nz = vm_totals_build(&v->t, e, zones);
	if (!nz) {
		(*v->no_totals)++;
		return;
	}
	struct wb_msg msg = {.kind = WB_ESTIMATE};
	struct wb_estimate *out = &msg.estimate;
	snprintf(out->env.host, sizeof(out->env.host), "%s", v->t.vm);
	out->t0 = e->t0;
	out->t1 = e->t1;
	snprintf(out->mode, sizeof(out->mode), "%s", e->mode);
	snprintf(out->model, sizeof(out->model), "%s", e->model);
	out->ncpu = e->ncpu;
	out->total_epoch = e->total_epoch;
	out->zones = zones;
	out->n_zones = nz;
	if (wb_pub_send(v->pub, &msg) == 0) {
		(*v->sent)++;
		wb_daemon_stats(d)->frames_out++;
	} else {
		(*v->send_failed)++;
		log_rl(&v->rl, WB_LOG_WARN,
		       "vmpub %s: could not send the estimate of slot [%" PRIu64 ", %" PRIu64 "]",
		       v->t.vm, out->t0, out->t1);
	}
}

/* Flags of lib/daemon that take no value; every other --KEY and -c takes one. */
static bool vmpub_flag_alone(const char *a)
{
	static const char *const alone[] = {
	    "--check", "--verbose", "--help", "--version", "--print-config",
	    "-n",      "-v",	    "-h",     "-V"};
	for (size_t i = 0; i < sizeof(alone) / sizeof(alone[0]); i++)
		if (!strcmp(a, alone[i]))
			return true;
	return strncmp(a, "--", 2) != 0 && strcmp(a, "-c") != 0;
}

/*
 * `wattbus vmpub [OPTIONS] VM ENDPOINT` as lib/daemon's flags: VM and ENDPOINT
 * become --vm and --endpoint, -s and -H (vmpub's short flags) --sub and --host,
 * and the stat endpoint defaults to one of this VM's own (one vmpub runs per VM).
 * Returns the new argc; av holds argc + 8 pointers.
 */
static int vmpub_args(int argc, char **argv, char **av, char *pub, size_t publen, bool *help)
{
	const char *pos[2] = {NULL, NULL};
	int npos = 0, n = 0;
	bool alone = false; /* a flag that needs no VM: it prints and exits */
	av[n++] = argv[0];
	av[n++] = "--pub";
	av[n++] = pub;
	*help = false;
	for (int i = 1; i < argc; i++) {
		char *a = argv[i];
		if (a[0] != '-' || !a[1]) {
			if (npos < 2)
				pos[npos] = a;
			npos++;
			continue;
		}
		if (!strcmp(a, "--")) {
			for (i++; i < argc; i++, npos++)
				if (npos < 2)
					pos[npos] = argv[i];
			break;
		}
		*help |= !strcmp(a, "-h") || !strcmp(a, "--help");
		alone |= *help || !strcmp(a, "-V") || !strcmp(a, "--version") ||
			 !strcmp(a, "--print-config");
		if (!strcmp(a, "-s") || !strcmp(a, "-H"))
			a = a[1] == 's' ? "--sub" : "--host";
		av[n++] = a;
		if (!vmpub_flag_alone(a) && !strchr(a, '=') && i + 1 < argc)
			av[n++] = argv[++i];
	}
	if (npos != 2 && !alone)
		return -1;
	/* The VM's own stat socket: its name with what a path or %-expansion would read
	 * otherwise made '_'. */
	char safe[64] = "";
	for (size_t i = 0; pos[0] && pos[0][i] && i < sizeof(safe) - 1; i++) {
		char ch = pos[0][i];
		bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
			  (ch >= '0' && ch <= '9') || ch == '.' || ch == '-' || ch == '_';
		safe[i] = ok ? ch : '_';
		safe[i + 1] = '\0';
	}
	snprintf(pub, publen, "ipc://%%r/vmpub-%s.sock", safe[0] ? safe : "vm");
	if (npos == 2) {
		av[n++] = "--vm";
		av[n++] = (char *)pos[0];
		av[n++] = "--endpoint";
		av[n++] = (char *)pos[1];
	}
	av[n] = NULL;
	return n;
}

int cmd_vmpub(int argc, char **argv)
{
	char **av = calloc((size_t)argc + 8, sizeof(*av));
	char pub[128];
	bool help;
	if (!av) {
		fprintf(stderr, "wattbus vmpub: out of memory\n");
		return 1;
	}
	int n = vmpub_args(argc, argv, av, pub, sizeof(pub), &help);
	if (n < 0 || help) {
		FILE *out = n < 0 ? stderr : stdout;
		fprintf(
		    out,
		    "usage: wattbus vmpub [-s ENDPOINT] [-H HOST] [--curve-cert FILE --curve-allow DIR] [--KEY VALUE ...] VM ENDPOINT\n"
		    "  VM        the VM's name as estimd reports it (the libvirt domain name)\n"
		    "  ENDPOINT  where the VM's guest subscribes (binds; e.g. tcp://192.168.122.1:5610)\n");
		if (n < 0) {
			free(av);
			return 2;
		}
		fputc('\n', out);
	}
	optind = 0; /* lib/daemon parses av from its start */
	struct vmpub v = {.rl = WB_RATELIMIT_INIT};
	v.d = wb_daemon_new(&vmpub_stage, n, av);
	const struct vmpub_conf *c = wb_daemon_conf(v.d);
	const struct wb_global *g = wb_daemon_global(v.d);
	int rc = WB_EXIT_FAILURE;
	wb_stats_bind(wb_daemon_stats(v.d), &v, vmpub_stats,
		      sizeof(vmpub_stats) / sizeof(vmpub_stats[0]));
	v.t.vm = c->vm;
	v.host = g->host;
	struct wb_sockopts so = {.hwm = (int)g->hwm,
				 .curve_cert = c->curve_cert[0] ? c->curve_cert : NULL,
				 .curve_allow = c->curve_allow[0] ? c->curve_allow : NULL};
	v.pub = wb_pub_new(c->endpoint, "vmpub", v.t.vm, &so);
	if (!v.pub) {
		log_errx("vmpub %s: cannot publish on %s", v.t.vm, c->endpoint);
		goto out;
	}
	char prefix[WB_TOPIC_MAX];
	snprintf(prefix, sizeof(prefix), "estimate/%s", v.host);
	const char *const prefixes[] = {prefix, NULL};
	if (wb_daemon_subscribe(v.d, &c->sub, prefixes, vmpub_on_msg, &v) < 0) {
		log_errx("vmpub %s: cannot subscribe to %s", v.t.vm,
			 c->sub.n ? c->sub.v[0] : "(none)");
		goto out;
	}
	wb_daemon_set_mode(v.d, "vm");
	log_info("vmpub %s: estimates of %s from %s, the VM's energy on %s", v.t.vm, v.host,
		 c->sub.v[0], c->endpoint);
	rc = wb_daemon_run(v.d);
	log_info("vmpub %s: %" PRIu64 " estimates of %s, %" PRIu64 " sent, %" PRIu64
		 " failed to send, %" PRIu64 " without the VM's totals, %" PRIu64
		 " rejected, %" PRIu64 " lost",
		 v.t.vm, *v.frames, v.host, *v.sent, *v.send_failed, *v.no_totals,
		 wb_daemon_stats(v.d)->rejected, wb_daemon_stats(v.d)->lost);
out:
	wb_pub_destroy(&v.pub);
	wb_daemon_destroy(&v.d);
	free(av);
	return rc;
}
