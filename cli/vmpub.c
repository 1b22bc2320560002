/*
 * wattbus vmpub: the host's measurement of one VM, published for its guest.
 * Reads estimd's estimates of this host and publishes, for the named VM only,
 * an estimate of host VM whose zones carry the VM's cumulative energy
 * (zones[].total_uj from vms[].total_uj, in estimd's total_epoch). One process
 * per VM, each on its own endpoint with its own CURVE allow directory, so a
 * guest can only ever receive its own VM's energy (docs/VM.md).
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bus.h"
#include "cli.h"
#include "clock.h"
#include "log.h"

#define VMPUB_ZONES_MAX 256

struct vmpub {
	const char *vm, *host;
	struct wb_pub *pub;
	bool have;	/* last_* hold a count */
	uint64_t epoch; /* estimd's total_epoch of last_* */
	size_t nz;
	struct wb_est_zone zones[VMPUB_ZONES_MAX];
	uint64_t frames, sent, send_failed, no_totals, other_hosts, rejected;
	struct wb_ratelimit rl;
};

static void vmpub_usage(FILE *out)
{
	fprintf(
	    out,
	    "usage: wattbus vmpub [--sub ENDPOINT] [--host HOST] [--curve-cert FILE --curve-allow DIR] VM ENDPOINT\n"
	    "  VM              the VM's name as estimd reports it (the libvirt domain name)\n"
	    "  ENDPOINT        where the VM's guest subscribes (binds; e.g. tcp://192.168.122.1:5610)\n"
	    "  -s, --sub EP    estimd's endpoint (default: estimd.sock in the runtime dir)\n"
	    "  -H, --host HOST the host whose estimates hold the VM (default: this host's name)\n"
	    "  --curve-cert FILE  serve tcp:// with CURVE using this certificate (FILE_secret beside it)\n"
	    "  --curve-allow DIR  the public certificate of this VM's guest, alone in DIR\n");
}

/*
 * The VM's estimate for slot e: its zones with the VM's totals. A slot without
 * the VM (none of its processes ran) repeats the last totals of the same count,
 * so the guest hears from the host every slot. Returns 1 when there is something
 * to send, 0 when not (a stale slot, a count not yet known).
 */
static int vmpub_build(struct vmpub *v, const struct wb_estimate *e, struct wb_estimate *out,
		       struct wb_est_zone *zones)
{
	const struct wb_est_group *g = NULL;
	for (size_t i = 0; i < e->n_vms; i++)
		if (strcmp(e->vms[i].id, v->vm) == 0)
			g = &e->vms[i];
	size_t nz = e->n_zones < VMPUB_ZONES_MAX ? e->n_zones : VMPUB_ZONES_MAX;
	if (g && g->n_total_uj == e->n_zones && g->n_energy_uj == e->n_zones) {
		for (size_t i = 0; i < nz; i++) {
			struct wb_est_zone *z = &zones[i];
			memset(z, 0, sizeof(*z));
			snprintf(z->name, sizeof(z->name), "%s", e->zones[i].name);
			snprintf(z->zone, sizeof(z->zone), "%s", e->zones[i].zone);
			z->index = e->zones[i].index;
			z->energy_uj = z->active_uj = g->energy_uj[i];
			z->total_uj = g->total_uj[i];
		}
	} else if (g || !e->total_epoch) {
		/* a stale slot (no totals in it), or a VM whose totals did not fit estimd's budget
		 */
		v->no_totals++;
		return 0;
	} else if (v->have && v->epoch == e->total_epoch) {
		nz = v->nz;
		for (size_t i = 0; i < nz; i++) {
			zones[i] = v->zones[i];
			zones[i].energy_uj = zones[i].active_uj = 0;
		}
	} else {
		/* A count without the VM in it yet: 0, or, when vmpub has just started, a
		 * guess that may be below what the guest was told in this count, which the guest
		 * holds its count against (powerd/bus.c). */
		for (size_t i = 0; i < nz; i++) {
			struct wb_est_zone *z = &zones[i];
			memset(z, 0, sizeof(*z));
			snprintf(z->name, sizeof(z->name), "%s", e->zones[i].name);
			snprintf(z->zone, sizeof(z->zone), "%s", e->zones[i].zone);
			z->index = e->zones[i].index;
		}
	}
	if (nz == 0)
		return 0;
	memset(out, 0, sizeof(*out));
	snprintf(out->env.host, sizeof(out->env.host), "%s", v->vm);
	out->t0 = e->t0;
	out->t1 = e->t1;
	snprintf(out->mode, sizeof(out->mode), "%s", e->mode);
	snprintf(out->model, sizeof(out->model), "%s", e->model);
	out->ncpu = e->ncpu;
	out->total_epoch = e->total_epoch;
	out->zones = zones;
	out->n_zones = nz;
	v->have = true;
	v->epoch = e->total_epoch;
	v->nz = nz;
	memcpy(v->zones, zones, nz * sizeof(*zones));
	return 1;
}

static void vmpub_one(struct vmpub *v, const struct wb_msg *m)
{
	static struct wb_est_zone zones[VMPUB_ZONES_MAX];
	if (m->kind != WB_ESTIMATE)
		return;
	if (strcmp(m->estimate.env.host, v->host) != 0) {
		v->other_hosts++;
		return;
	}
	v->frames++;
	struct wb_estimate out;
	if (vmpub_build(v, &m->estimate, &out, zones) <= 0)
		return;
	struct wb_msg msg = {.kind = WB_ESTIMATE};
	msg.estimate = out;
	if (wb_pub_send(v->pub, &msg) == 0) {
		v->sent++;
	} else {
		v->send_failed++;
		log_rl(&v->rl, WB_LOG_WARN,
		       "vmpub %s: could not send the estimate of slot [%" PRIu64 ", %" PRIu64 "]",
		       v->vm, out.t0, out.t1);
	}
}

int cmd_vmpub(int argc, char **argv)
{
	static const struct option opts[] = {{"sub", required_argument, NULL, 's'},
					     {"host", required_argument, NULL, 'H'},
					     {"curve-cert", required_argument, NULL, 'C'},
					     {"curve-allow", required_argument, NULL, 'A'},
					     {"help", no_argument, NULL, 'h'},
					     {NULL, 0, NULL, 0}};
	struct wb_sockopts so = {0};
	const char *sub = NULL;
	char hostname[64] = "", ep[512], looked[1024];
	struct vmpub v = {.rl = WB_RATELIMIT_INIT};
	int c;
	while ((c = getopt_long(argc, argv, "s:H:h", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			sub = optarg;
			break;
		case 'H':
			v.host = optarg;
			break;
		case 'C':
			so.curve_cert = optarg;
			break;
		case 'A':
			so.curve_allow = optarg;
			break;
		case 'h':
			vmpub_usage(stdout);
			return 0;
		default:
			vmpub_usage(stderr);
			return 2;
		}
	}
	if (argc - optind != 2) {
		vmpub_usage(stderr);
		return 2;
	}
	v.vm = argv[optind];
	if (!v.vm[0] || strlen(v.vm) > 63) {
		fprintf(
		    stderr,
		    "wattbus vmpub: VM '%s': needs 1 to 63 bytes (it becomes the host name of the guest's stream)\n",
		    v.vm);
		return 2;
	}
	if (so.curve_cert && (!so.curve_allow || !so.curve_allow[0])) {
		fprintf(
		    stderr,
		    "wattbus vmpub: --curve-cert needs --curve-allow DIR holding only VM %s's public certificate: without it any key gets in\n",
		    v.vm);
		return 2;
	}
	if (!v.host) {
		if (gethostname(hostname, sizeof(hostname) - 1) < 0) {
			fprintf(stderr,
				"wattbus vmpub: cannot read this host's name: give --host\n");
			return 2;
		}
		v.host = hostname;
	}
	if (!sub) {
		if (cli_find_socket("estimd.sock", ep, sizeof(ep), looked, sizeof(looked)) < 0) {
			fprintf(
			    stderr,
			    "wattbus vmpub: no estimd socket found (looked in %s): give --sub\n",
			    looked);
			return 2;
		}
		sub = ep;
	}
	v.pub = wb_pub_new(argv[optind + 1], "vmpub", v.vm, &so);
	if (!v.pub)
		return 1;
	struct wb_sub *s = wb_sub_new(&(struct wb_sockopts){0});
	char prefix[WB_TOPIC_MAX];
	snprintf(prefix, sizeof(prefix), "estimate/%s", v.host);
	if (!s || wb_sub_connect(s, sub) < 0 || wb_sub_subscribe(s, prefix) < 0) {
		fprintf(stderr, "wattbus vmpub: cannot subscribe to %s\n", sub);
		wb_sub_destroy(&s);
		wb_pub_destroy(&v.pub);
		return 1;
	}
	log_info("vmpub %s: estimates of %s from %s, the VM's energy on %s", v.vm, v.host, sub,
		 argv[optind + 1]);
	struct wb_stats stats = {0};
	while (!cli_interrupted()) {
		if (wb_sub_wait(s, 1000) <= 0)
			continue;
		struct wb_msg m;
		struct wb_rx rx;
		struct wb_err err;
		int rc = wb_sub_recv(s, &m, &rx, &err, &stats);
		if (rc < 0)
			break;
		if (rc == 0) {
			v.rejected++;
			continue;
		}
		vmpub_one(&v, &m);
		wb_msg_clear(&m);
	}
	log_info("vmpub %s: %" PRIu64 " estimates of %s, %" PRIu64 " sent, %" PRIu64
		 " failed to send, %" PRIu64 " without the VM's totals, %" PRIu64
		 " rejected, %" PRIu64 " lost",
		 v.vm, v.frames, v.host, v.sent, v.send_failed, v.no_totals, v.rejected,
		 stats.lost);
	wb_sub_destroy(&s);
	wb_pub_destroy(&v.pub);
	return 0;
}
