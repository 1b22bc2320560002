/*
 * estimd's model sources table (estimd/sources.c): the section laid out from each
 * source's keys, each source's settings found where its keys wrote them, its conf
 * hook's checks, and the forms table (estimd/forms.c) behind model_trainer.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../estimd/sources.h"
#include "unit.h"

static const struct wb_conf_key head[] = {
    {"pub", WB_CONF_STR, offsetof(struct estimd_conf, pub), "ipc://x", 0, 0, NULL, "pub"},
    {"mode", WB_CONF_ENUM, offsetof(struct estimd_conf, mode), "auto", 0, 0, "auto|measured|model",
     "mode"},
};
static const struct wb_conf_key tail[] = {
    {"model_cores", WB_CONF_INT, offsetof(struct estimd_conf, model_cores), "0", 0, 65536, NULL,
     "cores"},
};
#define NHEAD (sizeof(head) / sizeof(head[0]))
#define NTAIL (sizeof(tail) / sizeof(tail[0]))

/* The section of head, the sources and tail at its defaults, in conf (conf_size bytes). */
static struct wb_conf_section section(struct wb_conf_key **keys, char *conf, size_t cap)
{
	size_t nkeys, size;
	*keys = est_sources_keys(head, NHEAD, tail, NTAIL, &nkeys, &size);
	CHECK(*keys != NULL);
	CHECK(size <= cap);
	memset(conf, 0, cap);
	struct wb_conf_section sec = {"estimd", *keys, nkeys, conf};
	char err[WB_CONF_ERR_MAX];
	CHECK(wb_conf_defaults(&sec, 1, err, sizeof(err)) == 0);
	return sec;
}

static _Alignas(max_align_t) char conf_buf[4096];

static void test_layout(void)
{
	struct wb_conf_key *keys;
	struct wb_conf_section sec = section(&keys, conf_buf, sizeof(conf_buf));
	/* head, every source's keys in table order, tail; no name twice */
	size_t want = NHEAD + NTAIL, o = NHEAD;
	for (size_t i = 0; i < est_nsources; i++)
		want += est_sources[i]->nkeys;
	CHECK(sec.nkeys == want);
	CHECK_STR(keys[0].name, "pub");
	CHECK_STR(keys[sec.nkeys - 1].name, "model_cores");
	for (size_t i = 0; i < est_nsources; i++)
		for (size_t j = 0; j < est_sources[i]->nkeys; j++, o++) {
			CHECK_STR(keys[o].name, est_sources[i]->keys[j].name);
			/* each source's settings lie beyond the common ones and before the next's
			 */
			CHECK(keys[o].off >= sizeof(struct estimd_conf));
			CHECK((char *)est_source_conf(conf_buf, i) + est_sources[i]->keys[j].off ==
			      conf_buf + keys[o].off);
			CHECK(est_sources[i]->keys[j].off < est_sources[i]->conf_size);
		}
	for (size_t a = 0; a < sec.nkeys; a++)
		for (size_t b = a + 1; b < sec.nkeys; b++)
			CHECK(strcmp(keys[a].name, keys[b].name) != 0);
	wb_conf_free(&sec, 1);
	free(keys);
}

/* The defaults reach the estimator's conf through the trainer's row, and its check holds. */
static void test_conf_hooks(void)
{
	struct wb_conf_key *keys;
	struct wb_conf_section sec = section(&keys, conf_buf, sizeof(conf_buf));
	char err[512];
	struct est_conf ec = {0};
	CHECK(wb_conf_set(&sec, "model", "", "--model", err, sizeof(err)) == 0);
	CHECK(est_sources_conf(conf_buf, &ec, err, sizeof(err)) == 0);
	CHECK(ec.train);
	CHECK_U64(ec.train_conf.window, 600);
	CHECK_U64(ec.train_conf.min_slots, 30);
	CHECK_U64(ec.train_conf.every, 60);
	CHECK_U64(ec.train_conf.holdout_every, 5);
	CHECK(wb_conf_set(&sec, "train", "false", "--train", err, sizeof(err)) == 0);
	CHECK(wb_conf_set(&sec, "train_window", "50", "--train_window", err, sizeof(err)) == 0);
	CHECK(est_sources_conf(conf_buf, &ec, err, sizeof(err)) == 0);
	CHECK(!ec.train);
	CHECK_U64(ec.train_conf.window, 50);

	CHECK(wb_conf_set(&sec, "train_min", "50", "--train_min", err, sizeof(err)) == 0);
	CHECK(est_sources_conf(conf_buf, &ec, err, sizeof(err)) == -1);
	CHECK_STR(err, "train_min (50) must be below train_window (50)");
	CHECK(wb_conf_set(&sec, "train_min", "30", "--train_min", err, sizeof(err)) == 0);

	CHECK(wb_conf_set(&sec, "estimator", "tcp:1", "--estimator", err, sizeof(err)) == 0);
	CHECK(est_sources_conf(conf_buf, &ec, err, sizeof(err)) == -1);
	CHECK_STR(err, "estimator 'tcp:1': expected unix:PATH (Kepler's estimator sidecar socket)");
	CHECK(wb_conf_set(&sec, "estimator", "unix:/run/e.sock", "--estimator", err, sizeof(err)) ==
	      0);
	CHECK(est_sources_conf(conf_buf, &ec, err, sizeof(err)) == 0);

	CHECK(wb_conf_set(&sec, "model_server", "ftp://m", "--model_server", err, sizeof(err)) ==
	      0);
	CHECK(est_sources_conf(conf_buf, &ec, err, sizeof(err)) == -1);
	CHECK_STR(err, "model_server 'ftp://m': expected an http:// or https:// URL");
	CHECK(wb_conf_set(&sec, "model_server", "http://m:8100", "--model_server", err,
			  sizeof(err)) == 0);

	/* The file source loads its file as the check: a missing one is a config error. */
	CHECK(wb_conf_set(&sec, "model", "/nonexistent/m.json", "--model", err, sizeof(err)) == 0);
	CHECK(est_sources_conf(conf_buf, &ec, err, sizeof(err)) == -1);
	CHECK(strstr(err, "/nonexistent/m.json") != NULL);
	wb_conf_free(&sec, 1);
	free(keys);
}

/* model_trainer accepts exactly the trainer names of the forms' rows, after the layout. */
static void test_trainer_choices(void)
{
	size_t nkeys, size;
	struct wb_conf_key *keys = est_sources_keys(head, NHEAD, tail, NTAIL, &nkeys, &size);
	const char *got = NULL;
	for (size_t i = 0; i < nkeys; i++)
		if (strcmp(keys[i].name, "model_trainer") == 0)
			got = keys[i].choices;
	CHECK(got != NULL);
	CHECK_STR(
	    got,
	    "auto|SGDRegressorTrainer|LinearRegressionTrainer|LogarithmicRegressionTrainer|LogisticRegressionTrainer|ExponentialRegressionTrainer");
	free(keys);
}

/* Each form's row: its parameter count, its eval where it has one, a fit's starts. */
static void test_forms(void)
{
	for (int f = 0; f < MODEL_FORM_COUNT; f++) {
		const struct model_form_def *fd = &model_forms[f];
		CHECK(fd->nparams <= MODEL_CURVE_MAX);
		CHECK((fd->eval != NULL) == (fd->nparams > 0));
		CHECK(!fd->nparams || (fd->nstarts > 0 && fd->amp < fd->nparams &&
				       fd->offset < fd->nparams && fd->amp != fd->offset));
		if (!fd->nparams)
			continue;
		/* the offset adds, the amplitude scales: y = amp * shape + offset at every start */
		for (size_t s = 0; s < fd->nstarts; s++) {
			double c[MODEL_CURVE_MAX], g[MODEL_CURVE_MAX];
			memcpy(c, fd->starts[s], sizeof(c));
			c[fd->amp] = 1;
			c[fd->offset] = 0;
			double shape = model_curve_eval((enum model_form)f, c, 0.4, g);
			c[fd->amp] = 3;
			c[fd->offset] = 5;
			CHECK_NEAR(model_curve_eval((enum model_form)f, c, 0.4, g), 3 * shape + 5,
				   1e-9);
			CHECK_NEAR(g[fd->offset], 1, 1e-12);
			CHECK_NEAR(g[fd->amp], shape, 1e-9);
		}
	}
	CHECK(isnan(model_curve_eval(MODEL_LINEAR, NULL, 0.5, NULL)));
	CHECK_STR(model_form_name(MODEL_LOGISTIC), "logistic");
	CHECK_U64(model_curve_len(MODEL_LOGISTIC), 4);
	CHECK_U64(model_curve_len(MODEL_EXPONENTIAL), 3);
}

static const struct unit_case cases[] = {
    {"the section: head, each source's keys in table order, tail; each at its own settings",
     test_layout},
    {"each source's conf hook: the trainer's settings reach the estimator, bad ones refused",
     test_conf_hooks},
    {"model_trainer accepts the trainer names of the forms table", test_trainer_choices},
    {"each form row: parameters, eval and gradient, amplitude and offset, starts", test_forms},
};

UNIT_MAIN(cases)
