/*
 * Model source "sidecar": Kepler's estimator sidecar (unix:PATH), asked for the
 * power of every slot in model mode; the local model stands in when it does not
 * answer within the slot's wait. The exchange itself is sidecar.c's.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>

#include "sources.h"

struct sidecar_conf {
	char *estimator;
	uint64_t estimator_timeout_ns, estimator_answer_max_ns;
};

static const struct wb_conf_key keys[] = {
    {"estimator", WB_CONF_STR, offsetof(struct sidecar_conf, estimator), "", 0, 0, NULL,
     "Kepler estimator sidecar, unix:PATH: asked for the power of every slot in model mode; the local model stands in when it does not answer in time (empty: none)"},
    {"estimator_timeout", WB_CONF_DURATION, offsetof(struct sidecar_conf, estimator_timeout_ns),
     "200ms", 1e6, 10e9, NULL,
     "how long a slot waits for the estimator sidecar's answer before the local model stands in; the exchange goes on (at most 10 s: the slot's wait holds the loop, WatchdogSec is 30 s)"},
    {"estimator_answer_max", WB_CONF_DURATION,
     offsetof(struct sidecar_conf, estimator_answer_max_ns), "30s", 1e9, 600e9, NULL,
     "how long one exchange keeps its connection for the sidecar's answer, read and dropped when it comes after its slot's wait; covers Kepler's first answer, which loads the model (seconds); later slots do not ask meanwhile"},
};

struct sidecar_state {
	struct est_app *app;
	const struct sidecar_conf *conf;
	struct sidecar *sc; /* NULL: none */
	struct wb_ratelimit rl;
	uint64_t *requests, *answered, *timeout, *unreachable, *bad_answer, *implausible, *late,
	    *busy, *refused;
};

/* estimator_<field> */
#define ROW(f) WB_STAT_ROW(struct sidecar_state, f, "estimator_" #f)
static const struct wb_stat_row stats[] = {ROW(requests),    ROW(answered),   ROW(timeout),
					   ROW(unreachable), ROW(bad_answer), ROW(implausible),
					   ROW(late),	     ROW(busy),	      ROW(refused)};

static int sidecar_conf(const void *sconf, const struct estimd_conf *c, struct est_conf *ec,
			char *err, size_t errlen)
{
	const struct sidecar_conf *sc = sconf;
	if (sc->estimator[0] && (strncmp(sc->estimator, "unix:", 5) != 0 || !sc->estimator[5])) {
		snprintf(err, errlen,
			 "estimator '%s': expected unix:PATH (Kepler's estimator sidecar socket)",
			 sc->estimator);
		return -1;
	}
	if (sc->estimator[0] && strlen(sc->estimator + 5) >= SIDECAR_PATH_MAX) {
		snprintf(err, errlen, "estimator '%s': a unix socket's path has at most %d bytes",
			 sc->estimator, SIDECAR_PATH_MAX - 1);
		return -1;
	}
	return 0;
}

/*
 * The hand-off from the transport to the values: the sidecar's answer becomes the slot's
 * powers, or is refused with its reason (the local model stands in).
 */
static void take(struct sidecar_state *s, const struct sidecar_done *d, const char *host,
		 const char *local)
{
	struct kepler_powers kp;
	char err[MODEL_ERR_MAX];
	if (kepler_powers_parse(d->buf, d->len, &kp, err, sizeof(err)) < 0) {
		(*s->bad_answer)++;
		log_rl(
		    &s->rl, WB_LOG_WARN,
		    "estimator sidecar %s: answer refused: %s; slot of %s from the local model %s",
		    sidecar_path(s->sc), err, host, local);
		return;
	}
	if (estimator_check_external(s->app->est, &kp, err, sizeof(err)) < 0) {
		(*s->implausible)++;
		log_rl(
		    &s->rl, WB_LOG_WARN,
		    "estimator sidecar %s: answer refused as implausible: %s; slot of %s from the local model %s",
		    sidecar_path(s->sc), err, host, local);
		return;
	}
	(*s->answered)++;
	estimator_set_external(s->app->est, &kp, "estimator");
}

/* An exchange no slot waits for any more (a late answer, the warm-up) has ended. */
static int on_done(struct wb_daemon *d_, int fd, void *arg)
{
	struct sidecar_state *s = arg;
	struct sidecar_done d;
	if (!s->sc || !sidecar_collect(s->sc, &d))
		return -1;
	const char *path = sidecar_path(s->sc);
	if (d.cancelled) {
		log_info("estimator sidecar: an exchange cancelled for the new estimator %s", path);
	} else if (d.status == SIDECAR_ANSWERED && d.warm_up) {
		log_info("estimator sidecar %s: the warm-up request answered in %.0f ms", path,
			 d.ms);
	} else if (d.status == SIDECAR_ANSWERED) {
		(*s->late)++;
		log_rl(
		    &s->rl, WB_LOG_INFO,
		    "estimator sidecar %s: an answer came %.0f ms after its request, after its slot stopped waiting: read and dropped",
		    path, d.ms);
	} else {
		(*(d.status == SIDECAR_REFUSED ? s->refused : s->unreachable))++;
		log_rl(&s->rl, WB_LOG_WARN, "estimator sidecar %s%s", d.warm_up ? "warm-up: " : "",
		       d.err);
	}
	return -1; /* the job's fd is closed: one watch per exchange */
}

/* The exchange goes on without a slot waiting: collected when it ends, on the loop. */
static void watch(struct sidecar_state *s)
{
	int fd = sidecar_fd(s->sc);
	if (fd >= 0 && wb_daemon_watch_fd(s->app->d, fd, on_done, s) < 0) {
		/* Without the watch it would never be collected, and no slot would ask again. */
		log_errx(
		    "estimator sidecar: cannot watch an exchange; the sidecar is asked no more");
		sidecar_destroy(&s->sc);
	}
}

/* The warm-up at start: Kepler's estimator loads its model at the first request (seconds). */
static void warm_up(struct sidecar_state *s)
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
	enum sidecar_status st = sidecar_ask(s->sc, req, true, &d, err, sizeof(err));
	free(req);
	if (st == SIDECAR_TIMEOUT) /* asked, not waited for: collected on the loop */
		watch(s);
	else if (st == SIDECAR_BUSY) /* an exchange before the reload, watched already */
		return;
	if (st == SIDECAR_REFUSED) {
		(*s->refused)++;
		log_warnx("estimator sidecar refused: %s; the local model stands in", err);
	} else if (st != SIDECAR_TIMEOUT) {
		log_info("estimator sidecar: no warm-up: %s; tried again at the slots", err);
	}
}

static void sidecar_slot(struct est_app *app, void *state, const struct wb_aligned *a,
			 bool model_mode)
{
	struct sidecar_state *s = state;
	if (!s->sc || !s->conf->estimator[0] || !model_mode)
		return;
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
	(*s->requests)++;
	enum sidecar_status st = sidecar_ask(s->sc, req, false, &d, err, sizeof(err));
	free(req);
	const struct model *m = estimator_model(app->est);
	const char *local = m ? m->name : "none";
	switch (st) {
	case SIDECAR_ANSWERED:
		take(s, &d, a->env.host, local);
		return;
	case SIDECAR_BUSY:
		(*s->busy)++;
		return; /* the first slot that waited said so */
	case SIDECAR_TIMEOUT:
		(*s->timeout)++;
		watch(s);
		break;
	case SIDECAR_REFUSED:
		(*s->refused)++;
		log_rl(&s->rl, WB_LOG_WARN,
		       "estimator sidecar refused: %s; slot of %s from the local model %s", err,
		       a->env.host, local);
		return;
	case SIDECAR_BACKOFF:
	case SIDECAR_UNREACHABLE:
	case SIDECAR_ERROR:
		(*s->unreachable)++;
		break;
	}
	log_rl(&s->rl, WB_LOG_WARN, "estimator sidecar %s; slot of %s from the local model %s", err,
	       a->env.host, local);
}

static int sidecar_start(struct est_app *app, void *state, const void *sconf, bool *usage,
			 char *err, size_t errlen)
{
	struct sidecar_state *s = state;
	s->app = app;
	s->conf = sconf;
	s->rl = (struct wb_ratelimit)WB_RATELIMIT_INIT;
	*usage = true;
	if (!s->conf->estimator[0])
		return 0;
	char why[MODEL_ERR_MAX];
	if (!(s->sc = sidecar_new(s->conf->estimator + 5, s->conf->estimator_timeout_ns,
				  s->conf->estimator_answer_max_ns, why, sizeof(why)))) {
		snprintf(err, errlen, "estimator %s", why);
		return -1;
	}
	log_info(
	    "estimator sidecar %s: asked for every slot in model mode, waited for %.0f ms, its answer read for up to %.0f s; the local model stands in",
	    s->conf->estimator, (double)s->conf->estimator_timeout_ns / 1e6,
	    (double)s->conf->estimator_answer_max_ns / 1e9);
	warm_up(s);
	return 0;
}

static void sidecar_reload(struct est_app *app, void *state, const void *old_sconf,
			   const void *sconf)
{
	struct sidecar_state *s = state;
	const struct sidecar_conf *c = sconf;
	char err[MODEL_ERR_MAX];
	bool new_path = strcmp(c->estimator, s->conf->estimator) != 0;
	s->conf = c;
	/* One sidecar for the process (an exchange in flight ends with it, watched on the loop);
	 * a new path is asked from the next exchange on. */
	if (c->estimator[0] && !s->sc &&
	    !(s->sc = sidecar_new(c->estimator + 5, c->estimator_timeout_ns,
				  c->estimator_answer_max_ns, err, sizeof(err))))
		log_errx("reload: estimator %s; no sidecar asked", err);
	if (s->sc) {
		sidecar_set_times(s->sc, c->estimator_timeout_ns, c->estimator_answer_max_ns);
		if (new_path && c->estimator[0]) {
			sidecar_set_path(s->sc, c->estimator + 5);
			warm_up(s);
		}
	}
}

static void sidecar_stop(struct est_app *app, void *state)
{
	struct sidecar_state *s = state;
	sidecar_destroy(&s->sc);
}

const struct est_source est_sidecar_source = {.name = "sidecar",
					      EST_SOURCE_KEYS(keys, struct sidecar_conf),
					      EST_SOURCE_STATE(struct sidecar_state, stats),
					      EST_SOURCE_HOOKS(sidecar_conf, sidecar_start,
							       sidecar_slot, NULL, sidecar_reload,
							       sidecar_stop)};
