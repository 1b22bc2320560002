/*
 * wattbus-estimd: aligned slots in, estimates out. Measured energy (or a power
 * model's, on a host without a meter) is split into idle and active and the
 * active part attributed to processes, containers, pods, VMs and services;
 * with a meter it also trains a Kepler-format power model and publishes it.
 */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "daemon.h"
#include "estimd.h"
#include "log.h"
#include "sources.h"

#define OFF(field) offsetof(struct estimd_conf, field)

/* estimd's own keys, before and after the model sources' (sources.c, in table order). */
static const struct wb_conf_key head_keys[] = {
    {"pub", WB_CONF_STR | WB_CONF_RESTART, OFF(pub), "ipc://%r/estimd.sock", 0, 0, NULL,
     "endpoint estimates and models are published on"},
    {"sub", WB_CONF_LIST | WB_CONF_RESTART, OFF(sub), "ipc://%r/alignd.sock", 0, 0, NULL,
     "endpoints of alignd (aligned/ messages)"},
    {"mode", WB_CONF_ENUM, OFF(mode), "auto", 0, 0, "auto|measured|model",
     "auto: measured when a slot has power zones, else the power model"},
};
static const struct wb_conf_key tail_keys[] = {
    {"model_cores", WB_CONF_INT, OFF(model_cores), "0", 0, 65536, NULL,
     "logical CPUs of the model's machine, for the core ratio (0: machine_spec.cores)"},
    {"idle_method", WB_CONF_ENUM, OFF(idle_method), "ratio", 0, 0, "ratio|fixed|regression",
     "idle/active split: ratio (Kepler), fixed idle_w, or regression over recent slots"},
    {"idle_w", WB_CONF_LIST, OFF(idle_w), "", 0, 0, NULL,
     "fixed idle power, ZONE=WATTS (a zone name like package-0, or a kind like package)"},
    {"gpu_idle_w", WB_CONF_LIST, OFF(gpu_idle_w), "", 0, 0, NULL,
     "idle power of GPU zones, ZONE=WATTS (gpu-0=17, or gpu=17 for all); unset: the lowest power seen with no compute process"},
    {"idle_window", WB_CONF_INT, OFF(idle_window), "300", 10, 100000, NULL,
     "slots the idle regression looks back"},
    {"attribute_by", WB_CONF_ENUM, OFF(attribute_by), "cpu", 0, 0, "cpu|instructions",
     "share of active energy by CPU time, or by instructions where counters exist"},
    {"share_base", WB_CONF_ENUM, OFF(share_base), "node", 0, 0, "node|procs",
     "node: of the node's busy CPU time (the rest unattributed); procs: of the processes'"},
    {"attribute_platform", WB_CONF_BOOL, OFF(attribute_platform), "false", 0, 0, NULL,
     "also attribute platform zones (a BMC's whole-machine power) to workloads; false: left unattributed, as Kepler does"},
    {"vm_idle", WB_CONF_BOOL, OFF(vm_idle), "false", 0, 0, NULL,
     "a VM's cumulative energy (estimate vms[].total_uj, what a guest gets) includes its share of the node's idle energy, by its CPU time of the node's"},
    {"state_file", WB_CONF_STR, OFF(state_file), "%r/estimd.state", 0, 0, NULL,
     "where the node energy totals and learned GPU idle powers are saved, so that a restart continues them (empty: nowhere)"},
    {"state_every", WB_CONF_DURATION | WB_CONF_OFF0 | WB_CONF_RESTART, OFF(state_every_ns), "1s",
     100e6, 3600e9, NULL,
     "also save the state this often while running, so that a crash loses no energy (0: at stop only; else 100ms to 1h)"},
    {"budget_mib", WB_CONF_INT, OFF(budget_mib), "256", 0, 1048576, NULL,
     "MiB that the learning state (idle regressions, training) and node totals of all hosts may hold together; a new host beyond it is refused (0: no limit)"},
};

/* max_zone_w: [global]'s, which a model file is checked against (WB_ZONE_MAX_W on -n). */
static int est_conf_from(const struct estimd_conf *c, double max_zone_w, struct est_conf *ec,
			 char *err, size_t errlen)
{
	memset(ec, 0, sizeof(*ec));
	ec->mode = strcmp(c->mode, "measured") == 0 ? EST_MEASURED
		   : strcmp(c->mode, "model") == 0  ? EST_MODEL
						    : EST_AUTO;
	ec->by = strcmp(c->attribute_by, "instructions") == 0 ? EST_BY_INSTRUCTIONS : EST_BY_CPU;
	ec->base = strcmp(c->share_base, "procs") == 0 ? EST_BASE_PROCS : EST_BASE_NODE;
	ec->idle.method = strcmp(c->idle_method, "fixed") == 0	      ? IDLE_FIXED
			  : strcmp(c->idle_method, "regression") == 0 ? IDLE_REGRESSION
								      : IDLE_RATIO;
	if (idle_parse_fixed((const char *const *)c->idle_w.v, c->idle_w.n, &ec->idle, err,
			     errlen) < 0)
		return -1;
	char gerr[256];
	if (idle_parse_fixed((const char *const *)c->gpu_idle_w.v, c->gpu_idle_w.n, &ec->gpu_idle,
			     gerr, sizeof(gerr)) < 0) {
		snprintf(err, errlen, "gpu_%s", gerr); /* "idle_w: ..." names the other key */
		return -1;
	}
	if (ec->idle.method == IDLE_FIXED && ec->idle.nfixed == 0) {
		snprintf(err, errlen,
			 "idle_method fixed needs idle_w (e.g. idle_w = package=20,dram=4)");
		return -1;
	}
	ec->idle.window = (size_t)c->idle_window;
	ec->idle.min_slots = ec->idle.window < 30 ? ec->idle.window : 30;
	ec->idle.min_spread = 0.05;
	ec->attribute_platform = c->attribute_platform;
	ec->vm_idle = c->vm_idle;
	ec->model_cores = (uint64_t)c->model_cores;
	ec->max_zone_w = max_zone_w;
	ec->budget_bytes = (size_t)c->budget_mib << 20;
	/* each model source's settings (the trainer's go into ec) */
	return est_sources_conf(c, ec, err, errlen);
}

/* Config checks, run on -n, at start and on every reload: a bad model file is a bad config. */
static int check_conf(const void *conf, char *err, size_t errlen)
{
	struct est_conf ec;
	/* [global] is not at hand here: -n checks a model file against the default bound */
	return est_conf_from(conf, WB_ZONE_MAX_W, &ec, err, errlen);
}

/* keys and conf_size: estimd's own and the model sources', laid out by main */
static struct wb_stage stage = {
    .name = "estimd",
    .summary =
	"Split node energy into idle and active, attribute it to processes, containers, pods and VMs.",
    .check = check_conf,
};

struct app {
	struct est_app pub; /* what the model sources see */
	struct estimd_conf *conf;
	void *src_state[EST_SOURCES_MAX]; /* each model source's, est_sources order */
	size_t started;			  /* sources started, which stop */
	char mode[32];
	struct wb_checkpoint cp; /* the state file's */
	struct wb_ratelimit rl_slot, rl_mode, rl_state;
	uint64_t *slots, *slots_measured, *slots_model, *slots_rejected, *slots_no_model,
	    *idle_fallbacks, *model_implausible, *slots_stale, *slots_recovered, *recovered_uj,
	    *state_write_failed, *budget_short;
	uint64_t *totals_implausible, *totals_saturated, *clock_rewinds, *vm_totals_short;
};

static void set_mode(struct app *app, const char *mode)
{
	if (strcmp(app->mode, mode) == 0)
		return;
	snprintf(app->mode, sizeof(app->mode), "%s", mode);
	wb_daemon_set_mode(app->pub.d, mode);
	/* Slots of a metered and a meterless host may alternate: rate-limited. */
	log_rl(&app->rl_mode, WB_LOG_INFO, "mode %s", mode);
}

static void on_aligned(struct wb_daemon *d, const struct wb_msg *msg, const struct wb_rx *rx,
		       void *arg)
{
	struct app *app = arg;
	if (msg->kind != WB_ALIGNED)
		return;
	const struct wb_aligned *a = &msg->aligned;
	struct wb_msg out = {.kind = WB_ESTIMATE};
	struct est_result res;
	char err[MODEL_ERR_MAX];
	(*app->slots)++;
	bool model_mode = strcmp(app->conf->mode, "model") == 0 ||
			  (strcmp(app->conf->mode, "auto") == 0 && a->n_zones == 0);
	for (size_t i = 0; i < est_nsources; i++)
		if (est_sources[i]->slot)
			est_sources[i]->slot(&app->pub, app->src_state[i], a, model_mode);
	if (estimator_slot(app->pub.est, a, &out.estimate, &res, err, sizeof(err)) < 0) {
		if (res.budget_refused)
			wb_stats_reject(wb_daemon_stats(d), WB_R_BUDGET);
		(*app->slots_rejected)++;
		log_rl(&app->rl_slot, WB_LOG_WARN, "slot rejected: %s", err);
		return;
	}
	(*(res.measured ? app->slots_measured : app->slots_model))++;
	if (res.stale) {
		(*app->slots_stale)++;
		log_rl(
		    &app->rl_slot, WB_LOG_INFO,
		    "slot [%" PRIu64 ", %" PRIu64
		    "] of %s ends no later than the last one (alignd resent it after a restart?): estimated, not added to the totals",
		    a->t0, a->t1, a->env.host);
	}
	if (res.recovered_uj) {
		(*app->slots_recovered)++;
		*app->recovered_uj = wb_sat_add(*app->recovered_uj, res.recovered_uj, NULL);
		log_rl(&app->rl_slot, WB_LOG_INFO,
		       "%s: %" PRIu64 " uJ of aligned slots never received (%" PRIu64
		       " lost before seq %" PRIu64 ") carried into the node totals",
		       a->env.host, res.recovered_uj, rx->lost, a->env.seq);
	}
	*app->idle_fallbacks += res.idle_fallbacks;
	*app->budget_short += res.budget_short;
	*app->totals_implausible += res.totals_implausible;
	*app->totals_saturated += res.totals_saturated;
	*app->vm_totals_short += res.vm_totals_short;
	if (res.vm_totals_short)
		log_rl(
		    &app->rl_slot, WB_LOG_WARN,
		    "%s: VMs of slot [%" PRIu64 ", %" PRIu64
		    "] left without their cumulative total_uj: out of memory or the memory budget (budget_mib) is full",
		    a->env.host, a->t0, a->t1);
	if (res.clock_rewound) {
		(*app->clock_rewinds)++;
		log_warnx(
		    "%s: %d slots of a new alignd count in a row end before the last one counted: the host's clock was set back; its totals continue from slot [%" PRIu64
		    ", %" PRIu64 "]",
		    a->env.host, WB_REWIND_SAMPLES, a->t0, a->t1);
	}
	if (res.totals_implausible)
		log_rl(
		    &app->rl_slot, WB_LOG_WARN,
		    "%s: alignd's total_uj jumped by more than a zone can draw since the last slot (max_zone_w %.0f W): only the slot's own energy is counted",
		    a->env.host, wb_daemon_global(d)->max_zone_w);
	*app->model_implausible += res.model_implausible;
	if (res.no_model) {
		(*app->slots_no_model)++;
		log_rl(&app->rl_slot, WB_LOG_WARN,
		       "slot from %s has no power and there is no model: no zones estimated",
		       a->env.host);
	}
	if (res.model_implausible)
		log_rl(&app->rl_slot, WB_LOG_WARN,
		       "model %s gave an implausible power for %u zones of %s (clipped): %s",
		       estimator_model(app->pub.est)->name, res.model_implausible, a->env.host,
		       res.implausible);
	/* The local model's core ratio (the sidecar's answer carries its own). */
	if (!res.measured && !res.no_model && !res.external && !app->pub.ratio_logged) {
		const struct model *m = estimator_model(app->pub.est);
		log_info("model %s on %s: %" PRIu64 " CPUs, core ratio %.4f applied to idle power",
			 m->name, a->env.host, a->ncpu,
			 estimator_core_ratio(app->pub.est, a->ncpu));
		app->pub.ratio_logged = true;
	}
	set_mode(app, res.measured ? "measured" : res.no_model ? "model (none)" : "model");
	/* The estimate's arrays belong to the estimator: sent, never cleared here. */
	wb_daemon_send(d, &out);
	wb_checkpoint_changed(&app->cp); /* the totals moved: the checkpoint rides on the slots */
	for (size_t i = 0; i < est_nsources; i++)
		if (est_sources[i]->result)
			est_sources[i]->result(&app->pub, app->src_state[i], a, &res);
	free(res.trained);
}

/*
 * Save the node totals (lib/daemon.h's checkpoint: after a slot moved them, and
 * at the stop). A crash of the process loses nothing written (rename).
 */
static int save_state(void *arg, bool sync)
{
	struct app *app = arg;
	char err[MODEL_ERR_MAX];
	if (!app->conf->state_file[0])
		return 0;
	if (estimd_state_save(app->pub.est, app->conf->state_file, wb_now_ns(), sync, err,
			      sizeof(err)) < 0) {
		(*app->state_write_failed)++;
		wb_daemon_stats(app->pub.d)->checkpoint_failures++;
		log_rl(&app->rl_state, WB_LOG_WARN, "state %s", err);
		return -1;
	}
	return 0;
}

/* The physical bound of [global], for the totals (the bus applies it on receipt). */
static struct wb_plaus bound_of(struct wb_daemon *d)
{
	const struct wb_global *g = wb_daemon_global(d);
	return (struct wb_plaus){.max_zone_w = g->max_zone_w, .max_host_w = g->max_host_w};
}

/* The bound a model's or sidecar's zone power is clipped to (sources.c). */
static double zone_bound_w(struct app *app)
{
	return est_zone_bound_w(&app->pub);
}

static int on_reload(struct wb_daemon *d, void *new_conf, void *arg)
{
	struct app *app = arg;
	struct estimd_conf *c = new_conf;
	struct est_conf ec;
	char err[MODEL_ERR_MAX];
	if (est_conf_from(c, zone_bound_w(app), &ec, err, sizeof(err)) < 0) {
		log_errx("reload: %s; keeping the running config and model", err);
		return -1;
	}
	ec.bound = bound_of(d);
	estimator_set_conf(app->pub.est, &ec);
	char later[256];
	const struct wb_conf_section sec = {"estimd", stage.keys, stage.nkeys, NULL};
	if (wb_conf_restart_changes(&sec, app->conf, c, later, sizeof(later)))
		log_warnx("reload: new %s take effect at the next restart", later);
	const struct estimd_conf *old = app->conf;
	app->conf = c;
	app->pub.conf = c;
	for (size_t i = 0; i < est_nsources; i++)
		if (est_sources[i]->reload)
			est_sources[i]->reload(&app->pub, app->src_state[i],
					       est_source_conf(old, i), est_source_conf(c, i));
	return 0;
}

/* Start each model source in table order; 0, or -1 with the exit code in *rc. */
static int start_sources(struct app *app, int *rc)
{
	char err[MODEL_ERR_MAX];
	struct wb_stats *st = wb_daemon_stats(app->pub.d);
	for (size_t i = 0; i < est_nsources; i++) {
		const struct est_source *src = est_sources[i];
		if (src->state_size && !(app->src_state[i] = calloc(1, src->state_size)))
			fatalx(WB_EXIT_FAILURE, "out of memory");
		wb_stats_bind(st, app->src_state[i], src->stats, src->nstats);
		bool usage = false;
		app->started = i + 1;
		if (src->start &&
		    src->start(&app->pub, app->src_state[i], est_source_conf(app->conf, i), &usage,
			       err, sizeof(err)) < 0) {
			log_errx("%s", err);
			*rc = usage ? WB_EXIT_USAGE : WB_EXIT_FAILURE;
			return -1;
		}
	}
	return 0;
}

static void stop_sources(struct app *app)
{
	for (size_t i = app->started; i-- > 0;) {
		if (est_sources[i]->stop)
			est_sources[i]->stop(&app->pub, app->src_state[i]);
		free(app->src_state[i]);
		app->src_state[i] = NULL;
	}
	app->started = 0;
}

int main(int argc, char **argv)
{
	struct wb_conf_key *keys = est_sources_keys(
	    head_keys, sizeof(head_keys) / sizeof(head_keys[0]), tail_keys,
	    sizeof(tail_keys) / sizeof(tail_keys[0]), &stage.nkeys, &stage.conf_size);
	if (!keys)
		fatalx(WB_EXIT_FAILURE, "out of memory");
	stage.keys = keys;
	struct wb_daemon *d = wb_daemon_new(&stage, argc, argv);
	struct app app = {.pub = {.d = d}, .conf = wb_daemon_conf(d)};
	app.pub.conf = app.conf;
	app.rl_slot = app.rl_mode = app.rl_state = (struct wb_ratelimit)WB_RATELIMIT_INIT;
	struct wb_stats *st = wb_daemon_stats(d);
	static const struct wb_stat_row counters[] = {
	    WB_STAT_ROW(struct app, slots, "slots"),
	    WB_STAT_ROW(struct app, slots_measured, "slots_measured"),
	    WB_STAT_ROW(struct app, slots_model, "slots_model"),
	    WB_STAT_ROW(struct app, slots_rejected, "slots_rejected"),
	    WB_STAT_ROW(struct app, slots_no_model, "slots_no_model"),
	    WB_STAT_ROW(struct app, idle_fallbacks, "idle_fallbacks"),
	    WB_STAT_ROW(struct app, model_implausible, "model_implausible"),
	    WB_STAT_ROW(struct app, pub.models_implausible, "models_implausible"),
	    WB_STAT_ROW(struct app, pub.models_received, "models_received"),
	    WB_STAT_ROW(struct app, slots_stale, "slots_stale"),
	    WB_STAT_ROW(struct app, slots_recovered, "slots_recovered"),
	    WB_STAT_ROW(struct app, recovered_uj, "recovered_uj"),
	    WB_STAT_ROW(struct app, totals_implausible, "totals_implausible"),
	    WB_STAT_ROW(struct app, totals_saturated, "totals_saturated"),
	    WB_STAT_ROW(struct app, clock_rewinds, "clock_rewinds"),
	    WB_STAT_ROW(struct app, vm_totals_short, "vm_totals_short"),
	    WB_STAT_ROW(struct app, state_write_failed, "state_write_failed"),
	    WB_STAT_ROW(struct app, budget_short, "budget_short"),
	};
	wb_stats_bind(st, &app, counters, sizeof(counters) / sizeof(counters[0]));

	char err[MODEL_ERR_MAX];
	struct est_conf ec;
	int rc = WB_EXIT_FAILURE;
	if (est_conf_from(app.conf, zone_bound_w(&app), &ec, err, sizeof(err)) < 0) {
		log_errx("%s", err);
		rc = WB_EXIT_USAGE;
		goto out;
	}
	ec.bound = bound_of(d);
	if (!(app.pub.est = estimator_new(&ec)))
		fatalx(WB_EXIT_FAILURE, "out of memory");
	if (start_sources(&app, &rc) < 0)
		goto out;
	if (app.conf->state_file[0]) {
		size_t n, ngpu;
		if (estimd_state_load(app.pub.est, app.conf->state_file, &n, &ngpu, err,
				      sizeof(err)) < 0) {
			if (errno != ENOENT)
				log_warnx("state %s: ignored, starting clean", err);
		} else {
			log_info(
			    "state %s: node totals of %zu hosts resumed, learned GPU idle of %zu zones",
			    app.conf->state_file, n, ngpu);
		}
	}
	log_info("idle %s, attribution by %s of %s CPU time, training %s",
		 idle_method_name(ec.idle.method),
		 ec.by == EST_BY_INSTRUCTIONS ? "instructions" : "cpu",
		 ec.base == EST_BASE_PROCS ? "process" : "node", ec.train ? "on" : "off");

	static const char *const aligned_prefixes[] = {"aligned/", NULL};
	rc = WB_EXIT_FAILURE;
	if (wb_daemon_subscribe(d, &app.conf->sub, aligned_prefixes, on_aligned, &app) < 0) {
		log_errx("cannot subscribe to the sub endpoints");
		goto out;
	}
	wb_daemon_on_reload(d, on_reload, &app);
	/* dirty: the first checkpoint writes the file, so it shows from the start that saving
	 * works */
	wb_checkpoint_init(&app.cp, d, app.conf->state_file[0] ? app.conf->state_every_ns : 0, true,
			   save_state, &app);
	set_mode(&app, ec.mode == EST_MEASURED ? "measured"
		       : ec.mode == EST_MODEL  ? "model"
					       : "auto");
	rc = wb_daemon_run(d);
	wb_checkpoint_stop(&app.cp);
out:
	stop_sources(&app); /* a hung model server or sidecar never holds the stop */
	estimator_destroy(&app.pub.est);
	wb_daemon_destroy(&d);
	free(keys);
	return rc;
}
