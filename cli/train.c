/*
 * wattbus train: fit a power model offline from `wattbus record` recordings of
 * a metered host's aligned slots, with estimd's own trainer (estimd/train.c),
 * in every form estimd reads; the best by held-out error is written in
 * Kepler's format (weight.json, metadata.json) or published as a model message.
 */
#include <errno.h>
#include <getopt.h> /* optind */
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "bus.h"
#include "cli.h"
#include "clock.h"
#include "../estimd/estimd.h"
#include "json.h"
#include "log.h"

/* estimd's forms (estimd/forms.c): each is fitted, named and written by its row. */
static const struct model_form_def *const forms = model_forms;
#define NFORMS MODEL_FORM_COUNT

struct train_opts {
	const char *out_dir, *endpoint, *form, *host, *name;
	uint64_t wait_ns;
	int64_t holdout, min_slots;
	struct wb_sockopts so;
};
#define OFF(m) offsetof(struct train_opts, m)
static const struct cli_flag train_flags[] = {
    CLI_STR("out", 'o', OFF(out_dir), NULL, "DIR",
	    "write DIR/weight.json and DIR/metadata.json (default: . unless --publish)"),
    CLI_STR("publish", 'p', OFF(endpoint), NULL, "EP",
	    "publish the model as a model message on EP (a modeld subscribes there)"),
    CLI_DURATION("wait", 'w', OFF(wait_ns), "30s", 0, 0, "D",
		 "with --publish: wait up to D for a subscriber"),
    CLI_STR(
	"form", 'f', OFF(form), "auto", "F",
	"auto (every form, the lowest held-out MAE wins), linear, logarithmic, logistic, exponential"),
    CLI_STR("host", 'H', OFF(host), NULL, "HOST",
	    "the host whose slots to train on (needed when the recordings hold several)"),
    CLI_INT("holdout-every", 'k', OFF(holdout), "5", 2, 1000, "K",
	    "every K-th slot is held out to measure the error"),
    CLI_INT("min-slots", 'm', OFF(min_slots), "20", 2, 100000000, "N", "training slots needed"),
    CLI_STR("name", 'n', OFF(name), NULL, "NAME", "model name (default TRAINER-wattbus-HOST)"),
    CLI_CURVE_PUB(OFF(so)),
};
static const struct cli_verb train_verb = {
    CLI_VERB("train", train_flags, struct train_opts, 1, -1), .synopsis = "[OPTIONS] RECORDING...",
    .notes =
	"The machine spec written with the model is this machine's (train on the recorded host);\n"
	"WATTBUS_PROCFS_ROOT and WATTBUS_SYSFS_ROOT point elsewhere.\n"};

struct scan {
	const char *host_filter;
	char host[64];
	bool many_hosts;
	char other_host[64];
	size_t aligned, usable, skipped, undecodable;
	uint64_t ncpu;
	struct trainer *t; /* NULL: first pass, count only */
};

/* One aligned message of a recording: counted (first pass) or trained on (second). */
static int scan_one(uint64_t recv_ns, const char *topic, const void *body, size_t len, void *arg)
{
	struct scan *sc = arg;
	if (strncmp(topic, "aligned/", 8) != 0)
		return 0;
	struct wb_msg msg;
	struct wb_err err;
	if (wb_frame_check(topic, body, len, &msg, &err) < 0) {
		if (!sc->t)
			sc->undecodable++;
		return 0;
	}
	const struct wb_aligned *a = &msg.aligned;
	bool mine;
	if (sc->host_filter) {
		mine = strcmp(a->env.host, sc->host_filter) == 0;
	} else if (!sc->host[0]) {
		snprintf(sc->host, sizeof(sc->host), "%s", a->env.host);
		mine = true;
	} else {
		mine = strcmp(a->env.host, sc->host) == 0;
		if (!mine && !sc->many_hosts) {
			sc->many_hosts = true;
			snprintf(sc->other_host, sizeof(sc->other_host), "%s", a->env.host);
		}
	}
	if (mine && !sc->t) {
		sc->aligned++;
		if (sc->host_filter && !sc->host[0])
			snprintf(sc->host, sizeof(sc->host), "%s", a->env.host);
	}
	if (mine && sc->t) {
		if (trainer_add(sc->t, a) < 0)
			sc->skipped++;
		else
			sc->usable++;
		if (a->ncpu)
			sc->ncpu = a->ncpu;
	}
	wb_msg_clear(&msg);
	return 0;
}

/* One pass over the recordings: count the host's slots, or feed them to the trainer. */
static int scan_files(char **paths, int n, struct scan *sc)
{
	for (int i = 0; i < n; i++)
		if (record_each(paths[i], scan_one, sc) < 0)
			return -1;
	return 0;
}

/* The error the choice goes by: the zones' held-out MAE added up (the node's, as zones add). */
static double total_mae(const struct model *m)
{
	double s = 0;
	for (size_t i = 0; i < m->nzones; i++)
		s += m->zones[i].mae_w;
	return s;
}

/* Percentages do not add up: the worst zone's. */
static double worst_mape(const struct model *m)
{
	double w = 0;
	for (size_t i = 0; i < m->nzones; i++)
		if (m->zones[i].mape > w)
			w = m->zones[i].mape;
	return w;
}

/* metadata.json as lib/kmodel.h writes it: Kepler's trainers' keys, wattbus's as wattbus_*. */
static json_t *metadata_json(const struct model *m, const struct km_spec *spec, const char *trainer,
			     char **paths, int npaths, const struct scan *sc)
{
	struct km_feat feats[MODEL_ZONES_MAX][MODEL_FEATS_MAX];
	struct km_zone zones[MODEL_ZONES_MAX];
	model_km_zones(m, zones, feats);
	const char *names[MODEL_FEATS_MAX];
	size_t nnames = m->nzones ? m->zones[0].nfeat : 0;
	for (size_t f = 0; f < nnames; f++)
		names[f] = m->zones[0].feat[f].name;
	/* the machine's spec, with the recorded host's cores */
	struct km_spec ms = *spec;
	ms.cores = m->cores;
	struct km_meta md = {.model_name = m->name,
			     .trainer = trainer,
			     .model_class = m->form == MODEL_LINEAR ? "scikit" : "curvefit",
			     .model_file = "weight.json",
			     .output_type = model_output_name(m->output),
			     .features = names,
			     .nfeatures = nnames,
			     .mae = total_mae(m),
			     .mape = worst_mape(m),
			     .node_type = -1,
			     .spec = &ms,
			     .host = sc->host,
			     .train_slots = m->train_slots,
			     .test_slots = m->test_slots,
			     .recordings = (const char *const *)paths,
			     .nrecordings = (size_t)npaths};
	return km_meta_json(&md, zones, m->nzones);
}

static int publish(const struct model *m, const char *endpoint, uint64_t wait_ns,
		   const struct wb_sockopts *so, const char *host, const struct km_spec *spec)
{
	struct wb_msg msg = {.kind = WB_MODEL};
	char err[MODEL_ERR_MAX];
	if (model_to_msg(m, &msg.model, err, sizeof(err)) < 0) {
		log_errx("cannot publish: %s", err);
		return -1;
	}
	mspec_to_msg(spec, m->cores, &msg.model.spec);
	snprintf(msg.model.env.host, sizeof(msg.model.env.host), "%s", host);
	msg.model.t = wb_now_ns();
	struct wb_pub *pub = wb_pub_new(endpoint, "train", host, so);
	int rc = -1;
	if (!pub)
		goto out;
	if (!wb_pub_wait_subscriber(pub, (int)(wait_ns / WB_NS_PER_MS))) {
		log_errx("%s: no subscriber after %.1f s; the model was not published", endpoint,
			 (double)wait_ns / 1e9);
		goto out;
	}
	if (wb_pub_send(pub, &msg) < 0) {
		log_errx("%s: cannot send the model", endpoint);
		goto out;
	}
	fprintf(stderr, "wattbus train: model %s published on %s\n", m->name, endpoint);
	rc = 0;
out:
	wb_pub_destroy(&pub);
	wb_msg_clear(&msg);
	return rc;
}

int cmd_train(int argc, char **argv)
{
	struct train_opts o;
	int first, parsed = cli_parse(&train_verb, argc, argv, &o, &first);
	if (parsed >= 0)
		return parsed;
	/* The operands, RECORDING..., are argv[optind...] (cli_parse leaves getopt's optind there).
	 */
	const char *out_dir = o.out_dir, *endpoint = o.endpoint, *form_arg = o.form,
		   *name_arg = o.name;
	uint64_t wait_ns = o.wait_ns;
	long long holdout = o.holdout, min_slots = o.min_slots;
	struct wb_sockopts so = o.so;
	struct scan sc = {.host_filter = o.host};
	int want = -1; /* -1: every form */
	if (strcmp(form_arg, "auto") != 0) {
		for (size_t i = 0; i < NFORMS; i++)
			if (strcmp(form_arg, forms[i].name) == 0)
				want = (int)i;
		if (want < 0) {
			fprintf(
			    stderr,
			    "wattbus train: --form: '%s' is not auto, linear, logarithmic, logistic or exponential\n",
			    form_arg);
			return 2;
		}
	}
	if (name_arg &&
	    (strlen(name_arg) == 0 || strlen(name_arg) >= sizeof(((struct model *)0)->name))) {
		fprintf(stderr, "wattbus train: --name: 1 to 127 characters\n");
		return 2;
	}
	if (!out_dir && !endpoint)
		out_dir = ".";

	/* First pass: which host, how many slots (the trainer keeps them all). */
	if (scan_files(argv + optind, argc - optind, &sc) < 0)
		return 1;
	if (sc.many_hosts) {
		log_errx(
		    "the recordings hold aligned slots of several hosts (%s, %s, ...): choose one with --host",
		    sc.host, sc.other_host);
		return 2;
	}
	if (sc.aligned == 0) {
		if (sc.host_filter)
			log_errx(
			    "no aligned slots of host %s in the recordings (record alignd's endpoint, prefix aligned/)",
			    sc.host_filter);
		else
			log_errx(
			    "no aligned slots in the recordings (record alignd's endpoint, prefix aligned/)");
		return 1;
	}
	struct trainer t;
	struct train_conf tc = {.window = sc.aligned < 4 ? 4 : sc.aligned,
				.min_slots = (size_t)min_slots,
				.every = SIZE_MAX,
				.holdout_every = (size_t)holdout};
	if (trainer_init(&t, &tc) < 0) {
		log_errx("out of memory for %zu slots", sc.aligned);
		return 1;
	}
	sc.t = &t;
	if (scan_files(argv + optind, argc - optind, &sc) < 0) {
		trainer_free(&t);
		return 1;
	}
	fprintf(
	    stderr,
	    "wattbus train: %s: %zu aligned slots, %zu usable (%zu without power, with a gap or extrapolated)%s\n",
	    sc.host, sc.aligned, sc.usable, sc.skipped,
	    sc.undecodable ? "; some messages did not decode" : "");

	struct km_spec spec;
	char err[MODEL_ERR_MAX];
	if (mspec_read_env(&spec, err, sizeof(err)) < 0)
		log_warnx("machine spec: %s; the model carries none", err);
	if (spec.cores && sc.ncpu && spec.cores != sc.ncpu)
		log_warnx(
		    "this machine has %" PRIu64 " CPUs, the recorded host %s %" PRIu64
		    ": the model's spec is this machine's but its cores are the host's; train on the recorded host",
		    spec.cores, sc.host, sc.ncpu);

	struct model *fit = calloc(NFORMS, sizeof(*fit));
	bool ok[NFORMS] = {false};
	int best = -1;
	if (!fit) {
		trainer_free(&t);
		log_errx("out of memory");
		return 1;
	}
	printf("%-12s %-9s %8s %8s %10s %8s\n", "form", "zone", "train", "held-out", "MAE W",
	       "MAPE %");
	for (size_t i = 0; i < NFORMS; i++) {
		if (want >= 0 && (size_t)want != i)
			continue;
		char name[128];
		if (name_arg)
			snprintf(name, sizeof(name), "%s", name_arg);
		else
			snprintf(name, sizeof(name), "%s-wattbus-%.63s", forms[i].trainer, sc.host);
		for (char *p = name; *p; p++)
			if (*p == '_')
				*p = '-'; /* Kepler splits model names on '_' */
		if (trainer_fit_form(&t, (enum model_form)i, name, sc.ncpu, &fit[i], err,
				     sizeof(err)) < 0) {
			printf("%-12s %s\n", forms[i].name, err);
			continue;
		}
		ok[i] = true;
		for (size_t z = 0; z < fit[i].nzones; z++)
			printf("%-12s %-9s %8" PRIu64 " %8" PRIu64 " %10.3f %8.2f\n", forms[i].name,
			       fit[i].zones[z].zone, fit[i].train_slots, fit[i].test_slots,
			       fit[i].zones[z].mae_w, fit[i].zones[z].mape);
		if (best < 0 || total_mae(&fit[i]) < total_mae(&fit[best]))
			best = (int)i;
	}
	trainer_free(&t);
	int rc = 1;
	if (best < 0) {
		log_errx("no model could be fitted");
		goto out;
	}
	struct model *m = &fit[best];
	printf("chosen: %s (%s), held-out MAE %.3f W over its zones\n", m->name, forms[best].name,
	       total_mae(m));

	if (out_dir) {
		char path[PATH_MAX];
		if (mkdir(out_dir, 0755) < 0 && errno != EEXIST) {
			log_errx("%s: cannot create: %s", out_dir, strerror(errno));
			goto out;
		}
		snprintf(path, sizeof(path), "%s/weight.json", out_dir);
		if (model_save_file(m, path, err, sizeof(err)) < 0) {
			log_errx("%s", err);
			goto out;
		}
		json_t *md =
		    metadata_json(m, &spec, forms[best].trainer, argv + optind, argc - optind, &sc);
		snprintf(path, sizeof(path), "%s/metadata.json", out_dir);
		int sr = wb_json_save(md, path, true, err, sizeof(err));
		json_decref(md);
		if (sr < 0) {
			log_errx("%s", err);
			goto out;
		}
		fprintf(stderr, "wattbus train: wrote %s/weight.json and %s/metadata.json\n",
			out_dir, out_dir);
	}
	if (endpoint) {
		const struct model *pm = m;
		if (m->form != MODEL_LINEAR) {
			/* The model message carries linear weights only. */
			if (!ok[0]) {
				log_errx(
				    "the %s fit won, and a model message carries linear weights only, and the linear fit failed: nothing to publish",
				    forms[best].name);
				goto out;
			}
			log_warnx(
			    "the %s fit won, but a model message carries linear weights only: publishing the linear fit %s (held-out MAE %.3f W)",
			    forms[best].name, fit[0].name, total_mae(&fit[0]));
			pm = &fit[0];
		}
		if (publish(pm, endpoint, wait_ns, &so, sc.host, &spec) < 0)
			goto out;
	}
	rc = 0;
out:
	free(fit);
	return rc;
}
