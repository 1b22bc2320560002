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
#include <sys/utsname.h>
#include <unistd.h>

#include "clock.h"
#include "daemon.h"
#include "estimd.h"
#include "httpc.h"
#include "log.h"

#define DEFAULT_MODEL_FILE "ec2-0.7.11_rapl-sysfs_AbsPower_BPFOnly_SGDRegressorTrainer_1.json"
#define DEFAULT_MODEL WB_DATADIR "/models/" DEFAULT_MODEL_FILE
#define TRAINERS                                                                                   \
	"auto|SGDRegressorTrainer|LinearRegressionTrainer|LogarithmicRegressionTrainer|"           \
	"LogisticRegressionTrainer|ExponentialRegressionTrainer"

struct estimd_conf {
	char *pub;
	struct wb_strlist sub;
	char *mode;
	char *model;
	char *model_trainer;
	char *model_type;
	int64_t model_cores;
	struct wb_strlist model_from;
	char *model_server;
	uint64_t model_refresh_ns;
	uint64_t model_retry_ns;
	uint64_t model_server_timeout_ns;
	char *estimator;
	uint64_t estimator_timeout_ns;
	uint64_t estimator_answer_max_ns;
	char *idle_method;
	struct wb_strlist idle_w;
	struct wb_strlist gpu_idle_w;
	int64_t idle_window;
	char *attribute_by;
	char *share_base;
	bool attribute_platform;
	bool train;
	bool vm_idle;
	int64_t train_window;
	int64_t train_every;
	int64_t train_min;
	int64_t holdout_every;
	char *model_out;
	char *state_file;
	uint64_t state_every_ns;
	int64_t budget_mib;
};

#define OFF(field) offsetof(struct estimd_conf, field)

static const struct wb_conf_key keys[] = {
    {"pub", WB_CONF_STR, OFF(pub), "ipc://%r/estimd.sock", 0, 0, NULL,
     "endpoint estimates and models are published on"},
    {"sub", WB_CONF_LIST, OFF(sub), "ipc://%r/alignd.sock", 0, 0, NULL,
     "endpoints of alignd (aligned/ messages)"},
    {"mode", WB_CONF_ENUM, OFF(mode), "auto", 0, 0, "auto|measured|model",
     "auto: measured when a slot has power zones, else the power model"},
    {"model", WB_CONF_STR, OFF(model), DEFAULT_MODEL, 0, 0, NULL,
     "Kepler model-db weights JSON for slots without power (empty: none)"},
    {"model_trainer", WB_CONF_ENUM, OFF(model_trainer), "auto", 0, 0, TRAINERS,
     "form of the model file when neither its model_name nor its file name tells"},
    {"model_type", WB_CONF_ENUM, OFF(model_type), "auto", 0, 0, "auto|AbsPower|DynPower",
     "AbsPower: node power; DynPower: active power (auto: from the file name)"},
    {"model_cores", WB_CONF_INT, OFF(model_cores), "0", 0, 65536, NULL,
     "logical CPUs of the model's machine, for the core ratio (0: machine_spec.cores)"},
    {"model_from", WB_CONF_LIST, OFF(model_from), "", 0, 0, NULL,
     "endpoints of estimd instances whose trained models replace the model on the fly"},
    {"model_server", WB_CONF_STR, OFF(model_server), "", 0, 0, NULL,
     "Kepler model server (http://HOST:8100, wattbus-modeld or Kepler's own) asked for the best model for this machine at start and every model_refresh (empty: none)"},
    {"model_refresh", WB_CONF_DURATION, OFF(model_refresh_ns), "1h", 1e9, 30 * 86400e9, NULL,
     "how often the model server is asked again"},
    {"model_retry", WB_CONF_DURATION, OFF(model_retry_ns), "10s", 1e8, 86400e9, NULL,
     "first retry after a failed model server request; doubles after each failure, up to model_refresh"},
    {"model_server_timeout", WB_CONF_DURATION, OFF(model_server_timeout_ns), "10s", 1e8, 600e9,
     NULL, "deadline of one model server request"},
    {"estimator", WB_CONF_STR, OFF(estimator), "", 0, 0, NULL,
     "Kepler estimator sidecar, unix:PATH: asked for the power of every slot in model mode; the local model stands in when it does not answer in time (empty: none)"},
    {"estimator_timeout", WB_CONF_DURATION, OFF(estimator_timeout_ns), "200ms", 1e6, 10e9, NULL,
     "how long a slot waits for the estimator sidecar's answer before the local model stands in; the exchange goes on (at most 10 s: the slot's wait holds the loop, WatchdogSec is 30 s)"},
    {"estimator_answer_max", WB_CONF_DURATION, OFF(estimator_answer_max_ns), "30s", 1e9, 600e9,
     NULL,
     "how long one exchange keeps its connection for the sidecar's answer, read and dropped when it comes after its slot's wait; covers Kepler's first answer, which loads the model (seconds); later slots do not ask meanwhile"},
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
    {"train", WB_CONF_BOOL, OFF(train), "true", 0, 0, NULL,
     "fit a power model from measured slots and publish it"},
    {"train_window", WB_CONF_INT, OFF(train_window), "600", 20, 1000000, NULL,
     "slots kept for training and testing"},
    {"train_every", WB_CONF_INT, OFF(train_every), "60", 1, 1000000, NULL, "slots between fits"},
    {"train_min", WB_CONF_INT, OFF(train_min), "30", 2, 1000000, NULL,
     "training slots needed before the first fit"},
    {"holdout_every", WB_CONF_INT, OFF(holdout_every), "5", 2, 1000, NULL,
     "every k-th slot is held out to measure the model's error"},
    {"model_out", WB_CONF_STR, OFF(model_out), "", 0, 0, NULL,
     "file each trained model is written to in Kepler's format (empty: none)"},
    {"state_file", WB_CONF_STR, OFF(state_file), "%r/estimd.state", 0, 0, NULL,
     "where the node energy totals and learned GPU idle powers are saved, so that a restart continues them (empty: nowhere)"},
    {"state_every", WB_CONF_DURATION | WB_CONF_OFF0, OFF(state_every_ns), "1s", 100e6, 3600e9, NULL,
     "also save the state this often while running, so that a crash loses no energy (0: at stop only; else 100ms to 1h)"},
    {"budget_mib", WB_CONF_INT, OFF(budget_mib), "256", 0, 1048576, NULL,
     "MiB that the learning state (idle regressions, training) and node totals of all hosts may hold together; a new host beyond it is refused (0: no limit)"},
};
#define NKEYS (sizeof(keys) / sizeof(keys[0]))

static int est_conf_from(const struct estimd_conf *c, struct est_conf *ec, char *err, size_t errlen)
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
	ec->train = c->train;
	ec->attribute_platform = c->attribute_platform;
	ec->vm_idle = c->vm_idle;
	ec->train_conf = (struct train_conf){
	    .window = (size_t)c->train_window,
	    .min_slots = (size_t)c->train_min,
	    .every = (size_t)c->train_every,
	    .holdout_every = (size_t)c->holdout_every,
	};
	if (c->train_min >= c->train_window) {
		snprintf(err, errlen,
			 "train_min (%" PRId64 ") must be below train_window (%" PRId64 ")",
			 c->train_min, c->train_window);
		return -1;
	}
	if (c->estimator[0] && (strncmp(c->estimator, "unix:", 5) != 0 || !c->estimator[5])) {
		snprintf(err, errlen,
			 "estimator '%s': expected unix:PATH (Kepler's estimator sidecar socket)",
			 c->estimator);
		return -1;
	}
	if (c->estimator[0] && strlen(c->estimator + 5) >= SIDECAR_PATH_MAX) {
		snprintf(err, errlen, "estimator '%s': a unix socket's path has at most %d bytes",
			 c->estimator, SIDECAR_PATH_MAX - 1);
		return -1;
	}
	if (c->model_server[0] && strncmp(c->model_server, "http://", 7) != 0 &&
	    strncmp(c->model_server, "https://", 8) != 0) {
		snprintf(err, errlen, "model_server '%s': expected an http:// or https:// URL",
			 c->model_server);
		return -1;
	}
	ec->model_cores = (uint64_t)c->model_cores;
	ec->max_zone_w = WB_ZONE_MAX_W; /* [global] max_zone_w, set once the daemon has it */
	ec->budget_bytes = (size_t)c->budget_mib << 20;
	return 0;
}

/* The bound a model's or sidecar's zone power is clipped to: [global] max_zone_w, or lib/plaus.h's
 * default where that is 0 (no bound on received energy still leaves a model bounded). */
static double zone_bound_w(struct wb_daemon *d)
{
	double w = wb_daemon_global(d)->max_zone_w;
	return w > 0 ? w : WB_ZONE_MAX_W;
}

/* The built-in default model is where `make install` puts it; a build tree runs without it. */
static bool default_model_missing(const struct estimd_conf *c)
{
	return strcmp(c->model, DEFAULT_MODEL) == 0 && access(c->model, F_OK) < 0 &&
	       errno == ENOENT;
}

/*
 * The configured model file, or NULL when none is configured or the default is
 * not installed outside model mode (main warns). Returns 0 or -1 (err).
 */
static int load_model(const struct estimd_conf *c, double max_zone_w, struct model **out, char *err,
		      size_t errlen)
{
	*out = NULL;
	if (!c->model[0])
		return 0;
	if (default_model_missing(c)) {
		if (strcmp(c->mode, "model") != 0)
			return 0;
		snprintf(
		    err, errlen,
		    "mode model needs a power model, and the default %s is not installed (make install puts it there): set --model FILE (model = FILE in [estimd]), e.g. data/models/*.json of the source tree",
		    c->model);
		return -1;
	}
	struct model *m = malloc(sizeof(*m));
	if (!m) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	struct model_hint hint = {c->model_trainer, c->model_type, (uint64_t)c->model_cores};
	if (model_load_file(c->model, &hint, m, err, errlen) < 0 ||
	    model_check_grid(m, max_zone_w, err, errlen) < 0) {
		free(m);
		return -1;
	}
	*out = m;
	return 0;
}

/* Config checks, run on -n, at start and on every reload: a bad model file is a bad config. */
static int check_conf(const void *conf, char *err, size_t errlen)
{
	const struct estimd_conf *c = conf;
	struct est_conf ec;
	if (est_conf_from(c, &ec, err, errlen) < 0)
		return -1;
	struct model *m;
	/* [global] is not at hand here: -n checks a model file against the default bound */
	if (load_model(c, WB_ZONE_MAX_W, &m, err, errlen) < 0)
		return -1;
	free(m);
	return 0;
}

static const struct wb_stage stage = WB_STAGE(
    "estimd",
    "Split node energy into idle and active, attribute it to processes, containers, pods and VMs.",
    keys, struct estimd_conf, check_conf);

struct app {
	struct wb_daemon *d;
	struct estimd_conf *conf;
	struct estimator *est;
	char mode[32];
	bool ratio_logged;
	struct wb_checkpoint cp; /* the state file's */
	struct wb_ratelimit rl_slot, rl_model, rl_train, rl_mode, rl_state;
	uint64_t *slots, *slots_measured, *slots_model, *slots_rejected, *slots_no_model,
	    *idle_fallbacks, *model_implausible, *models_implausible, *models_trained,
	    *models_received, *models_rejected, *model_write_failed, *slots_stale, *slots_recovered,
	    *recovered_uj, *state_write_failed, *budget_short;
	uint64_t *totals_implausible, *totals_saturated, *clock_rewinds, *vm_totals_short;
	/* model server client */
	struct wb_httpc_job *ms_job;
	int ms_timer;		/* pending request timer, or -1 */
	uint64_t ms_backoff_ns; /* next retry delay after a failure; 0: none failed yet */
	char ms_asked[64];	/* counters the last request named */
	char slot_counters[64]; /* counters of the last slot */
	struct wb_ratelimit rl_ms, rl_est;
	uint64_t *ms_requests, *ms_unreachable, *ms_refused, *ms_bad_answer, *ms_models;
	uint64_t *est_requests, *est_answered, *est_timeout, *est_gone, *est_bad_answer,
	    *est_implausible;
	uint64_t *est_late, *est_busy, *est_refused;
	struct sidecar *sc; /* the estimator sidecar, or NULL */
};

static void use_model(struct app *app, struct model *m, const char *how)
{
	estimator_set_model(app->est, m);
	app->ratio_logged = false;
	if (!m) {
		log_info("no power model: slots without power get no zones");
		return;
	}
	char desc[1024];
	model_describe(m, desc, sizeof(desc));
	log_info("%s model %s", how, desc);
	if (m->ncategorical)
		log_warnx(
		    "model %s: %zu Categorical_Variables entries ignored (wattbus has no categorical features)",
		    m->name, m->ncategorical);
	for (size_t i = 0; i < m->nzones; i++)
		for (size_t f = 0; f < m->zones[i].nfeat; f++)
			if (m->zones[i].feat[f].id == FEAT_UNMEASURED &&
			    m->zones[i].feat[f].weight != 0)
				log_warnx(
				    "model %s: %s feature %s is not measured by wattbus and counts as 0",
				    m->name, m->zones[i].zone, m->zones[i].feat[f].name);
}

/* ---- the model server: asked at start, every model_refresh, and after failures with backoff ----
 */

static void ms_schedule(struct app *app, uint64_t delay_ns);

/* The counters of a slot as one string, to tell when usaged's feature set changed. */
static void counters_key(const struct wb_aligned *a, char *buf, size_t size)
{
	size_t o = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < a->n_counters && o < size; i++)
		o += (size_t)snprintf(buf + o, size - o, "%s%.16s", i ? "," : "", a->counters[i]);
}

/* URL/model (Kepler's clients append /model to MODEL_SERVER_URL; a trailing / is not doubled). */
static void ms_url(const struct app *app, char *buf, size_t size)
{
	size_t n = strlen(app->conf->model_server);
	while (n > 0 && app->conf->model_server[n - 1] == '/')
		n--;
	snprintf(buf, size, "%.*s/model", (int)n, app->conf->model_server);
}

static void ms_failed(struct app *app, uint64_t *counter, const char *what, const char *err)
{
	(*counter)++;
	uint64_t max = app->conf->model_refresh_ns;
	app->ms_backoff_ns =
	    app->ms_backoff_ns ? app->ms_backoff_ns * 2 : app->conf->model_retry_ns;
	if (app->ms_backoff_ns > max)
		app->ms_backoff_ns = max;
	const struct model *cur = estimator_model(app->est);
	log_rl(&app->rl_ms, WB_LOG_WARN,
	       "model server %s: %s; keeping model %s, next try in %.1f s", what, err,
	       cur ? cur->name : "none", (double)app->ms_backoff_ns / 1e9);
	ms_schedule(app, app->ms_backoff_ns);
}

static void ms_answer(struct app *app, enum wb_httpc_result res, struct wb_httpc_resp *resp,
		      const char *err)
{
	char url[1100], perr[MODEL_ERR_MAX];
	ms_url(app, url, sizeof(url));
	if (res == WB_HTTPC_STATUS) {
		ms_failed(app, app->ms_refused, "refused the request", err);
		return;
	}
	if (res != WB_HTTPC_OK) {
		ms_failed(app, app->ms_unreachable, "unreachable", err);
		return;
	}
	struct model *m = malloc(sizeof(*m));
	/* weight=true asks for weights JSON; AbsPower was asked for. */
	struct model_hint hint = {NULL, "AbsPower", (uint64_t)app->conf->model_cores};
	if (!m)
		snprintf(perr, sizeof(perr), "out of memory");
	if (!m || model_parse(resp->body ? resp->body : "", resp->len, url, &hint, m, perr,
			      sizeof(perr)) < 0) {
		free(m);
		ms_failed(app, app->ms_bad_answer, "answered no model estimd can use", perr);
		return;
	}
	if (model_check_grid(m, zone_bound_w(app->d), perr, sizeof(perr)) < 0) {
		free(m);
		(*app->models_implausible)++;
		ms_failed(app, app->ms_bad_answer, "answered a model estimd refuses", perr);
		return;
	}
	app->ms_backoff_ns = 0;
	(*app->ms_models)++;
	const struct model *cur = estimator_model(app->est);
	if (cur && strcmp(cur->name, m->name) == 0 && strcmp(cur->origin, m->origin) == 0) {
		free(m); /* the one in use already */
	} else {
		(*app->models_received)++;
		use_model(app, m, "switched to");
	}
	ms_schedule(app, app->conf->model_refresh_ns);
}

static int on_ms_done(struct wb_daemon *d, int fd, void *arg)
{
	struct app *app = arg;
	struct wb_httpc_resp resp;
	char err[1024];
	enum wb_httpc_result res = wb_httpc_job_finish(app->ms_job, &resp, err, sizeof(err));
	app->ms_job = NULL;
	ms_answer(app, res, &resp, err);
	wb_httpc_resp_free(&resp);
	return -1; /* the job's fd is closed: stop watching it */
}

static void ms_start(struct app *app)
{
	if (app->ms_job || !app->conf->model_server[0])
		return;
	struct kepler_metrics km;
	/* usaged's counters as the last slot named them (none before the first slot). */
	char names[4][16];
	size_t n = 0;
	snprintf(app->ms_asked, sizeof(app->ms_asked), "%s", app->slot_counters);
	char tmp[64];
	snprintf(tmp, sizeof(tmp), "%s", app->slot_counters);
	for (char *save = NULL, *t = strtok_r(tmp, ",", &save); t && n < 4;
	     t = strtok_r(NULL, ",", &save))
		snprintf(names[n++], sizeof(names[0]), "%s", t);
	kepler_metrics_from((const char(*)[16])names, n, &km);
	struct mspec spec;
	char err[1024];
	bool have_spec = mspec_read_env(&spec, err, sizeof(err)) == 0;
	if (!have_spec)
		log_rl(&app->rl_ms, WB_LOG_WARN,
		       "machine spec: %s; asking the model server without one", err);
	char *body = kepler_model_request(&km, "AbsPower", have_spec ? &spec : NULL);
	char url[1100];
	ms_url(app, url, sizeof(url));
	struct wb_httpc_opts opts = {
	    .timeout_ms = (long)(app->conf->model_server_timeout_ns / WB_NS_PER_MS),
	    .accept = "application/json",
	};
	(*app->ms_requests)++;
	if (!body) {
		ms_failed(app, app->ms_unreachable, "request", "out of memory");
		return;
	}
	log_debug("model server: POST %s %s", url, body);
	app->ms_job = wb_httpc_start("POST", url, body, strlen(body), &opts, err, sizeof(err));
	free(body);
	if (!app->ms_job) {
		ms_failed(app, app->ms_unreachable, "request", err);
		return;
	}
	if (wb_daemon_watch_fd(app->d, wb_httpc_job_fd(app->ms_job), on_ms_done, app) < 0) {
		/* Nothing would collect it, and the loop never waits on a peer: tried again later.
		 */
		wb_httpc_job_cancel(&app->ms_job);
		ms_failed(app, app->ms_unreachable, "request", "cannot watch the request's fd");
	}
}

static int on_ms_timer(zloop_t *loop, int timer_id, void *arg)
{
	struct app *app = arg;
	app->ms_timer = -1;
	ms_start(app);
	return 0;
}

static void ms_schedule(struct app *app, uint64_t delay_ns)
{
	if (app->ms_timer >= 0)
		wb_daemon_timer_end(app->d, app->ms_timer);
	app->ms_timer = wb_daemon_timer_once(app->d, delay_ns, on_ms_timer, app);
}

/* ---- the estimator sidecar: one PowerRequest per slot in model mode (sidecar.c) ---- */

/*
 * The hand-off from the transport to the values: the sidecar's answer becomes the slot's
 * powers, or is refused with its reason (the local model stands in).
 */
static void sidecar_take(struct app *app, const struct sidecar_done *d, const char *host,
			 const char *local)
{
	struct kepler_powers kp;
	char err[MODEL_ERR_MAX];
	if (kepler_powers_parse(d->buf, d->len, &kp, err, sizeof(err)) < 0) {
		(*app->est_bad_answer)++;
		log_rl(
		    &app->rl_est, WB_LOG_WARN,
		    "estimator sidecar %s: answer refused: %s; slot of %s from the local model %s",
		    sidecar_path(app->sc), err, host, local);
		return;
	}
	if (estimator_check_external(app->est, &kp, err, sizeof(err)) < 0) {
		(*app->est_implausible)++;
		log_rl(
		    &app->rl_est, WB_LOG_WARN,
		    "estimator sidecar %s: answer refused as implausible: %s; slot of %s from the local model %s",
		    sidecar_path(app->sc), err, host, local);
		return;
	}
	(*app->est_answered)++;
	estimator_set_external(app->est, &kp, "estimator");
}

/* An exchange no slot waits for any more (a late answer, the warm-up) has ended. */
static int on_sidecar_done(struct wb_daemon *d_, int fd, void *arg)
{
	struct app *app = arg;
	struct sidecar_done d;
	if (!app->sc || !sidecar_collect(app->sc, &d))
		return -1;
	const char *path = sidecar_path(app->sc);
	if (d.cancelled) {
		log_info("estimator sidecar: an exchange cancelled for the new estimator %s", path);
	} else if (d.status == SIDECAR_ANSWERED && d.warm_up) {
		log_info("estimator sidecar %s: the warm-up request answered in %.0f ms", path,
			 d.ms);
	} else if (d.status == SIDECAR_ANSWERED) {
		(*app->est_late)++;
		log_rl(
		    &app->rl_est, WB_LOG_INFO,
		    "estimator sidecar %s: an answer came %.0f ms after its request, after its slot stopped waiting: read and dropped",
		    path, d.ms);
	} else {
		(*(d.status == SIDECAR_REFUSED ? app->est_refused : app->est_gone))++;
		log_rl(&app->rl_est, WB_LOG_WARN, "estimator sidecar %s%s",
		       d.warm_up ? "warm-up: " : "", d.err);
	}
	return -1; /* the job's fd is closed: one watch per exchange */
}

/* The exchange goes on without a slot waiting: collected when it ends, on the loop. */
static void sidecar_watch(struct app *app)
{
	int fd = sidecar_fd(app->sc);
	if (fd >= 0 && wb_daemon_watch_fd(app->d, fd, on_sidecar_done, app) < 0) {
		/* Without the watch it would never be collected, and no slot would ask again. */
		log_errx(
		    "estimator sidecar: cannot watch an exchange; the sidecar is asked no more");
		sidecar_destroy(&app->sc);
	}
}

/* The warm-up at start: Kepler's estimator loads its model at the first request (seconds). */
static void sidecar_warm_up(struct app *app)
{
	struct kepler_metrics km;
	double x[FEAT_COUNT] = {0};
	kepler_metrics_from(NULL, 0, &km);
	struct utsname u;
	char *req = kepler_power_request(&km, "AbsPower", x, uname(&u) == 0 ? u.machine : NULL);
	struct sidecar_done d;
	char err[MODEL_ERR_MAX];
	if (!req)
		return;
	enum sidecar_status st = sidecar_ask(app->sc, req, true, &d, err, sizeof(err));
	free(req);
	if (st == SIDECAR_TIMEOUT) /* asked, not waited for: collected on the loop */
		sidecar_watch(app);
	else if (st == SIDECAR_BUSY) /* an exchange before the reload, watched already */
		return;
	if (st == SIDECAR_REFUSED) {
		(*app->est_refused)++;
		log_warnx("estimator sidecar refused: %s; the local model stands in", err);
	} else if (st != SIDECAR_TIMEOUT) {
		log_info("estimator sidecar: no warm-up: %s; tried again at the slots", err);
	}
}

static void sidecar_slot(struct app *app, const struct wb_aligned *a)
{
	double x[FEAT_COUNT];
	if (feat_from_slot(a, x) < 0)
		return; /* estimator_slot rejects it */
	struct kepler_metrics km;
	kepler_metrics_from((const char(*)[16])a->counters, a->n_counters, &km);
	struct utsname u;
	char *req = kepler_power_request(&km, "AbsPower", x, uname(&u) == 0 ? u.machine : NULL);
	if (!req)
		return;
	struct sidecar_done d;
	char err[MODEL_ERR_MAX];
	(*app->est_requests)++;
	enum sidecar_status st = sidecar_ask(app->sc, req, false, &d, err, sizeof(err));
	free(req);
	const struct model *m = estimator_model(app->est);
	const char *local = m ? m->name : "none";
	switch (st) {
	case SIDECAR_ANSWERED:
		sidecar_take(app, &d, a->env.host, local);
		return;
	case SIDECAR_BUSY:
		(*app->est_busy)++;
		return; /* the first slot that waited said so */
	case SIDECAR_TIMEOUT:
		(*app->est_timeout)++;
		sidecar_watch(app);
		break;
	case SIDECAR_REFUSED:
		(*app->est_refused)++;
		log_rl(&app->rl_est, WB_LOG_WARN,
		       "estimator sidecar refused: %s; slot of %s from the local model %s", err,
		       a->env.host, local);
		return;
	case SIDECAR_BACKOFF:
	case SIDECAR_UNREACHABLE:
	case SIDECAR_ERROR:
		(*app->est_gone)++;
		break;
	}
	log_rl(&app->rl_est, WB_LOG_WARN,
	       "estimator sidecar %s; slot of %s from the local model %s", err, a->env.host, local);
}

static void set_mode(struct app *app, const char *mode)
{
	if (strcmp(app->mode, mode) == 0)
		return;
	snprintf(app->mode, sizeof(app->mode), "%s", mode);
	wb_daemon_set_mode(app->d, mode);
	/* Slots of a metered and a meterless host may alternate: rate-limited. */
	log_rl(&app->rl_mode, WB_LOG_INFO, "mode %s", mode);
}

static void publish_trained(struct app *app, const struct wb_aligned *a, struct model *m)
{
	char desc[1024], err[MODEL_ERR_MAX];
	model_describe(m, desc, sizeof(desc));
	log_info("trained model %s", desc);
	(*app->models_trained)++;
	if (app->conf->model_out[0] &&
	    model_save_file(m, app->conf->model_out, err, sizeof(err)) < 0) {
		(*app->model_write_failed)++;
		log_rl(&app->rl_train, WB_LOG_WARN, "cannot write the trained model: %s", err);
	}
	struct wb_msg msg = {.kind = WB_MODEL};
	if (model_to_msg(m, &msg.model, err, sizeof(err)) < 0) {
		log_rl(&app->rl_train, WB_LOG_WARN, "cannot publish the trained model: %s", err);
		return;
	}
	snprintf(msg.model.env.host, sizeof(msg.model.env.host), "%s", a->env.host);
	/* The trainer's machine, so that a model server files it under its node type: this
	 * machine's spec when the slots are this host's, else only their CPUs. */
	struct mspec spec = {0};
	if (strcmp(a->env.host, wb_daemon_global(app->d)->host) == 0 &&
	    mspec_read_env(&spec, err, sizeof(err)) < 0)
		memset(&spec, 0, sizeof(spec));
	mspec_to_msg(&spec, m->cores, &msg.model.spec);
	msg.model.t = wb_now_ns();
	wb_daemon_send(app->d, &msg);
	wb_msg_clear(&msg);
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
	counters_key(a, app->slot_counters, sizeof(app->slot_counters));
	/* usaged's features changed since the model server was asked: ask again now. */
	if (app->conf->model_server[0] && !app->ms_job &&
	    strcmp(app->slot_counters, app->ms_asked) != 0)
		ms_schedule(app, WB_NS_PER_MS);
	bool model_mode = strcmp(app->conf->mode, "model") == 0 ||
			  (strcmp(app->conf->mode, "auto") == 0 && a->n_zones == 0);
	if (app->sc && app->conf->estimator[0] && model_mode)
		sidecar_slot(app, a);
	if (estimator_slot(app->est, a, &out.estimate, &res, err, sizeof(err)) < 0) {
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
		       estimator_model(app->est)->name, res.model_implausible, a->env.host,
		       res.implausible);
	/* The local model's core ratio (the sidecar's answer carries its own). */
	if (!res.measured && !res.no_model && !res.external && !app->ratio_logged) {
		const struct model *m = estimator_model(app->est);
		log_info("model %s on %s: %" PRIu64 " CPUs, core ratio %.4f applied to idle power",
			 m->name, a->env.host, a->ncpu, estimator_core_ratio(app->est, a->ncpu));
		app->ratio_logged = true;
	}
	set_mode(app, res.measured ? "measured" : res.no_model ? "model (none)" : "model");
	/* The estimate's arrays belong to the estimator: sent, never cleared here. */
	wb_daemon_send(d, &out);
	wb_checkpoint_changed(&app->cp); /* the totals moved: the checkpoint rides on the slots */
	*app->models_implausible += res.train_implausible;
	if (res.train_err[0])
		log_rl(&app->rl_train, res.train_implausible ? WB_LOG_WARN : WB_LOG_INFO,
		       "training on %s: %s", a->env.host, res.train_err);
	if (res.trained) {
		publish_trained(app, a, res.trained);
		free(res.trained);
	}
}

static void on_model(struct wb_daemon *d, const struct wb_msg *msg, const struct wb_rx *rx,
		     void *arg)
{
	struct app *app = arg;
	if (msg->kind != WB_MODEL)
		return;
	struct model *m = malloc(sizeof(*m));
	char err[MODEL_ERR_MAX];
	if (!m)
		return;
	bool ok = model_from_msg(&msg->model, m, err, sizeof(err)) == 0;
	if (ok && model_check_grid(m, zone_bound_w(app->d), err, sizeof(err)) < 0) {
		(*app->models_implausible)++;
		ok = false;
	}
	if (!ok) {
		(*app->models_rejected)++;
		log_rl(&app->rl_model, WB_LOG_WARN, "model rejected, keeping %s: %s",
		       estimator_model(app->est) ? estimator_model(app->est)->name : "none", err);
		free(m);
		return;
	}
	const struct model *cur = estimator_model(app->est);
	if (cur && strcmp(cur->name, m->name) == 0 && strcmp(cur->origin, m->origin) == 0) {
		free(m); /* the same model again */
		return;
	}
	(*app->models_received)++;
	use_model(app, m, "switched to");
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
	if (estimd_state_save(app->est, app->conf->state_file, wb_now_ns(), sync, err,
			      sizeof(err)) < 0) {
		(*app->state_write_failed)++;
		wb_daemon_stats(app->d)->checkpoint_failures++;
		log_rl(&app->rl_state, WB_LOG_WARN, "state %s", err);
		return -1;
	}
	return 0;
}

static bool same_list(const struct wb_strlist *a, const struct wb_strlist *b)
{
	if (a->n != b->n)
		return false;
	for (size_t i = 0; i < a->n; i++)
		if (strcmp(a->v[i], b->v[i]) != 0)
			return false;
	return true;
}

/* The physical bound of [global], for the totals (the bus applies it on receipt). */
static struct wb_plaus bound_of(struct wb_daemon *d)
{
	const struct wb_global *g = wb_daemon_global(d);
	return (struct wb_plaus){.max_zone_w = g->max_zone_w, .max_host_w = g->max_host_w};
}

static int on_reload(struct wb_daemon *d, void *new_conf, void *arg)
{
	struct app *app = arg;
	struct estimd_conf *c = new_conf;
	struct est_conf ec;
	char err[MODEL_ERR_MAX];
	struct model *m;
	if (est_conf_from(c, &ec, err, sizeof(err)) < 0 ||
	    load_model(c, zone_bound_w(d), &m, err, sizeof(err)) < 0) {
		log_errx("reload: %s; keeping the running config and model", err);
		return -1;
	}
	ec.bound = bound_of(d);
	ec.max_zone_w = zone_bound_w(d);
	estimator_set_conf(app->est, &ec);
	use_model(app, m, "reloaded");
	if (strcmp(c->pub, app->conf->pub) != 0 || !same_list(&c->sub, &app->conf->sub) ||
	    !same_list(&c->model_from, &app->conf->model_from) ||
	    c->state_every_ns != app->conf->state_every_ns)
		log_warnx(
		    "reload: new pub, sub, model_from or state_every take effect at the next restart");
	bool new_sidecar = strcmp(c->estimator, app->conf->estimator) != 0;
	app->conf = c;
	/* One sidecar for the process (an exchange in flight ends with it, watched on the loop);
	 * a new path is asked from the next exchange on. */
	if (c->estimator[0] && !app->sc &&
	    !(app->sc = sidecar_new(c->estimator + 5, c->estimator_timeout_ns,
				    c->estimator_answer_max_ns, err, sizeof(err))))
		log_errx("reload: estimator %s; no sidecar asked", err);
	if (app->sc) {
		sidecar_set_times(app->sc, c->estimator_timeout_ns, c->estimator_answer_max_ns);
		if (new_sidecar && c->estimator[0]) {
			sidecar_set_path(app->sc, c->estimator + 5);
			sidecar_warm_up(app);
		}
	}
	/* The model file replaced the model server's: ask it again now. */
	if (c->model_server[0] && !app->ms_job)
		ms_schedule(app, WB_NS_PER_MS);
	return 0;
}

int main(int argc, char **argv)
{
	struct wb_daemon *d = wb_daemon_new(&stage, argc, argv);
	struct app app = {.d = d, .conf = wb_daemon_conf(d)};
	app.rl_slot = app.rl_model = app.rl_train = app.rl_mode = app.rl_state = app.rl_ms =
	    app.rl_est = (struct wb_ratelimit)WB_RATELIMIT_INIT;
	app.ms_timer = -1;
	struct wb_stats *st = wb_daemon_stats(d);
	static const struct wb_stat_row counters[] = {
	    WB_STAT_ROW(struct app, slots, "slots"),
	    WB_STAT_ROW(struct app, slots_measured, "slots_measured"),
	    WB_STAT_ROW(struct app, slots_model, "slots_model"),
	    WB_STAT_ROW(struct app, slots_rejected, "slots_rejected"),
	    WB_STAT_ROW(struct app, slots_no_model, "slots_no_model"),
	    WB_STAT_ROW(struct app, idle_fallbacks, "idle_fallbacks"),
	    WB_STAT_ROW(struct app, model_implausible, "model_implausible"),
	    WB_STAT_ROW(struct app, models_implausible, "models_implausible"),
	    WB_STAT_ROW(struct app, models_trained, "models_trained"),
	    WB_STAT_ROW(struct app, models_received, "models_received"),
	    WB_STAT_ROW(struct app, models_rejected, "models_rejected"),
	    WB_STAT_ROW(struct app, model_write_failed, "model_write_failed"),
	    WB_STAT_ROW(struct app, slots_stale, "slots_stale"),
	    WB_STAT_ROW(struct app, slots_recovered, "slots_recovered"),
	    WB_STAT_ROW(struct app, recovered_uj, "recovered_uj"),
	    WB_STAT_ROW(struct app, totals_implausible, "totals_implausible"),
	    WB_STAT_ROW(struct app, totals_saturated, "totals_saturated"),
	    WB_STAT_ROW(struct app, clock_rewinds, "clock_rewinds"),
	    WB_STAT_ROW(struct app, vm_totals_short, "vm_totals_short"),
	    WB_STAT_ROW(struct app, state_write_failed, "state_write_failed"),
	    WB_STAT_ROW(struct app, budget_short, "budget_short"),
	    WB_STAT_ROW(struct app, ms_requests, "model_server_requests"),
	    WB_STAT_ROW(struct app, ms_unreachable, "model_server_unreachable"),
	    WB_STAT_ROW(struct app, ms_refused, "model_server_refused"),
	    WB_STAT_ROW(struct app, ms_bad_answer, "model_server_bad_answer"),
	    WB_STAT_ROW(struct app, ms_models, "model_server_models"),
	    WB_STAT_ROW(struct app, est_requests, "estimator_requests"),
	    WB_STAT_ROW(struct app, est_answered, "estimator_answered"),
	    WB_STAT_ROW(struct app, est_timeout, "estimator_timeout"),
	    WB_STAT_ROW(struct app, est_gone, "estimator_unreachable"),
	    WB_STAT_ROW(struct app, est_bad_answer, "estimator_bad_answer"),
	    WB_STAT_ROW(struct app, est_implausible, "estimator_implausible"),
	    WB_STAT_ROW(struct app, est_late, "estimator_late"),
	    WB_STAT_ROW(struct app, est_busy, "estimator_busy"),
	    WB_STAT_ROW(struct app, est_refused, "estimator_refused"),
	};
	wb_stats_bind(st, &app, counters, sizeof(counters) / sizeof(counters[0]));

	char err[MODEL_ERR_MAX];
	struct est_conf ec;
	struct model *m;
	if (est_conf_from(app.conf, &ec, err, sizeof(err)) < 0 ||
	    load_model(app.conf, zone_bound_w(d), &m, err, sizeof(err)) < 0) {
		log_errx("%s", err);
		wb_daemon_destroy(&d);
		return WB_EXIT_USAGE;
	}
	ec.bound = bound_of(d);
	ec.max_zone_w = zone_bound_w(d);
	if (!(app.est = estimator_new(&ec)))
		fatalx(WB_EXIT_FAILURE, "out of memory");
	if (default_model_missing(app.conf))
		log_warnx(
		    "the default model %s is not installed (make install puts it there): a host without a meter gets no energy; set --model FILE (model = FILE in [estimd])",
		    app.conf->model);
	use_model(&app, m, "loaded");
	if (app.conf->state_file[0]) {
		size_t n, ngpu;
		if (estimd_state_load(app.est, app.conf->state_file, &n, &ngpu, err, sizeof(err)) <
		    0) {
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
	static const char *const model_prefixes[] = {"model/", NULL};
	int rc = WB_EXIT_FAILURE;
	if (wb_daemon_subscribe(d, &app.conf->sub, aligned_prefixes, on_aligned, &app) < 0) {
		log_errx("cannot subscribe to the sub endpoints");
		goto out;
	}
	if (app.conf->model_from.n &&
	    wb_daemon_subscribe(d, &app.conf->model_from, model_prefixes, on_model, &app) < 0) {
		log_errx("cannot subscribe to the model_from endpoints");
		goto out;
	}
	wb_daemon_on_reload(d, on_reload, &app);
	if (app.conf->model_server[0]) {
		log_info("model server %s: asked now and every %.0f s", app.conf->model_server,
			 (double)app.conf->model_refresh_ns / 1e9);
		ms_schedule(&app, WB_NS_PER_MS);
	}
	if (app.conf->estimator[0]) {
		if (!(app.sc = sidecar_new(app.conf->estimator + 5, app.conf->estimator_timeout_ns,
					   app.conf->estimator_answer_max_ns, err, sizeof(err)))) {
			log_errx("estimator %s", err);
			rc = WB_EXIT_USAGE;
			goto out;
		}
		log_info(
		    "estimator sidecar %s: asked for every slot in model mode, waited for %.0f ms, its answer read for up to %.0f s; the local model stands in",
		    app.conf->estimator, (double)app.conf->estimator_timeout_ns / 1e6,
		    (double)app.conf->estimator_answer_max_ns / 1e9);
		sidecar_warm_up(&app);
	}
	/* dirty: the first checkpoint writes the file, so it shows from the start that saving
	 * works */
	wb_checkpoint_init(&app.cp, d, app.conf->state_file[0] ? app.conf->state_every_ns : 0, true,
			   save_state, &app);
	set_mode(&app, ec.mode == EST_MEASURED ? "measured"
		       : ec.mode == EST_MODEL  ? "model"
					       : "auto");
	rc = wb_daemon_run(d);
	wb_checkpoint_stop(&app.cp);
	wb_httpc_job_cancel(&app.ms_job); /* a hung model server never holds the stop */
out:
	sidecar_destroy(&app.sc);
	estimator_destroy(&app.est);
	wb_daemon_destroy(&d);
	return rc;
}
