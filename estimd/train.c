/*
 * Online training of a linear power model per Kepler zone from measured slots:
 * a sliding window of (features, zone power) samples, every k-th held out;
 * least squares on standardised features; error measured on the held-out slots.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "estimd.h"

static const char *const train_zones[TRAIN_ZONES] = {"package", "core", "uncore", "dram",
						     "platform"};

const char *train_zone_name(int i)
{
	return i >= 0 && i < TRAIN_ZONES ? train_zones[i] : "?";
}

int train_zone_index(const char *kind)
{
	for (int i = 0; i < TRAIN_ZONES; i++)
		if (strcmp(kind, train_zones[i]) == 0)
			return i;
	if (strcmp(kind, "psys") == 0)
		return 4; /* RAPL's platform domain */
	return -1;
}

int trainer_init(struct trainer *t, const struct train_conf *conf)
{
	memset(t, 0, sizeof(*t));
	t->conf = *conf;
	if (t->conf.window < 4)
		t->conf.window = 4;
	if (t->conf.holdout_every < 2)
		t->conf.holdout_every = 2;
	t->ring = calloc(t->conf.window, sizeof(*t->ring));
	return t->ring ? 0 : -1;
}

void trainer_free(struct trainer *t)
{
	free(t->ring);
	memset(t, 0, sizeof(*t));
}

int trainer_add_sample(struct trainer *t, const double x[FEAT_COUNT], const double y_w[TRAIN_ZONES])
{
	if (!t->ring)
		return -1;
	struct train_sample *s = &t->ring[t->head];
	memcpy(s->x, x, sizeof(s->x));
	memcpy(s->y_w, y_w, sizeof(s->y_w));
	s->test = t->seen % t->conf.holdout_every == t->conf.holdout_every - 1;
	for (int z = 0; z < TRAIN_ZONES; z++)
		if (y_w[z] >= 0)
			t->zone_seen[z] = true;
	t->head = (t->head + 1) % t->conf.window;
	if (t->n < t->conf.window)
		t->n++;
	t->seen++;
	t->since_fit++;
	size_t ntrain = t->n - t->n / t->conf.holdout_every;
	return t->since_fit >= t->conf.every && ntrain >= t->conf.min_slots ? 1 : 0;
}

int trainer_add(struct trainer *t, const struct wb_aligned *a)
{
	double x[FEAT_COUNT], y[TRAIN_ZONES];
	double s = feat_slot_s(a);
	/* A counter reset or an extrapolated end leaves energy that does not match the usage. */
	if (s <= 0 || a->quality.gap || a->quality.extrapolated || feat_from_slot(a, x) < 0)
		return -1;
	bool any = false;
	for (int z = 0; z < TRAIN_ZONES; z++)
		y[z] = -1;
	for (size_t i = 0; i < a->n_zones; i++) {
		/* a simulated meter's joules (powerd's fake source) say nothing about the machine
		 */
		if (wb_path_simulated(a->zones[i].path))
			return -1;
		int z = train_zone_index(a->zones[i].zone);
		if (z < 0)
			continue;
		/* Kepler's zones are node-wide: sockets add up. */
		y[z] = (y[z] < 0 ? 0 : y[z]) + (double)a->zones[i].energy_uj / 1e6 / s;
		any = true;
	}
	return any ? trainer_add_sample(t, x, y) : -1;
}

/*
 * Solve A b = c (p x p, symmetric positive semi-definite; the pivot test is relative) by
 * Cholesky, dropping a feature whose pivot vanishes (it is a combination of the
 * others, e.g. cycles proportional to CPU time): its weight stays 0. Returns how
 * many of the used features were dropped. The linear fit's normal equations and
 * the curve fits' damped steps both go through it.
 */
#define SOLVE_MAX (FEAT_COUNT > MODEL_CURVE_MAX ? FEAT_COUNT : MODEL_CURVE_MAX)
static size_t solve_spd(size_t p, double A[SOLVE_MAX][SOLVE_MAX], const double c[SOLVE_MAX],
			const bool use[SOLVE_MAX], double b[SOLVE_MAX])
{
	double L[SOLVE_MAX][SOLVE_MAX] = {{0}};
	bool on[SOLVE_MAX];
	size_t dropped = 0;
	for (size_t k = 0; k < p; k++) {
		on[k] = use[k];
		b[k] = 0;
		if (!on[k])
			continue;
		double d = A[k][k];
		for (size_t m = 0; m < k; m++)
			if (on[m])
				d -= L[k][m] * L[k][m];
		if (d < 1e-9 * (A[k][k] > 0 ? A[k][k] : 1)) {
			on[k] = false;
			dropped++;
			continue;
		}
		L[k][k] = sqrt(d);
		for (size_t i = k + 1; i < p; i++) {
			double v = A[i][k];
			for (size_t m = 0; m < k; m++)
				if (on[m])
					v -= L[i][m] * L[k][m];
			L[i][k] = v / L[k][k];
		}
	}
	double y[SOLVE_MAX] = {0};
	for (size_t k = 0; k < p; k++) {
		if (!on[k])
			continue;
		double v = c[k];
		for (size_t m = 0; m < k; m++)
			if (on[m])
				v -= L[k][m] * y[m];
		y[k] = v / L[k][k];
	}
	for (size_t k = p; k-- > 0;) {
		if (!on[k])
			continue;
		double v = y[k];
		for (size_t m = k + 1; m < p; m++)
			if (on[m])
				v -= L[m][k] * b[m];
		b[k] = v / L[k][k];
	}
	return dropped;
}

static void fit_zone(const struct trainer *t, int zi, const bool include[FEAT_COUNT],
		     struct model_zone *z)
{
	double mean[FEAT_COUNT] = {0}, sd[FEAT_COUNT] = {0}, ymean = 0;
	size_t n = 0;
	for (size_t i = 0; i < t->n; i++) {
		const struct train_sample *s = &t->ring[i];
		if (s->test || s->y_w[zi] < 0)
			continue;
		for (int j = 0; j < FEAT_COUNT; j++)
			mean[j] += s->x[j];
		ymean += s->y_w[zi];
		n++;
	}
	snprintf(z->zone, sizeof(z->zone), "%s", train_zone_name(zi));
	if (n == 0)
		return;
	for (int j = 0; j < FEAT_COUNT; j++)
		mean[j] /= (double)n;
	ymean /= (double)n;
	for (size_t i = 0; i < t->n; i++) {
		const struct train_sample *s = &t->ring[i];
		if (s->test || s->y_w[zi] < 0)
			continue;
		for (int j = 0; j < FEAT_COUNT; j++)
			sd[j] += (s->x[j] - mean[j]) * (s->x[j] - mean[j]);
	}
	bool use[SOLVE_MAX] = {false};
	for (int j = 0; j < FEAT_COUNT; j++) {
		sd[j] = sqrt(sd[j] / (double)n);
		use[j] = include[j] && sd[j] > 1e-12 * (fabs(mean[j]) + 1);
	}
	double A[SOLVE_MAX][SOLVE_MAX] = {{0}}, c[SOLVE_MAX] = {0}, beta[SOLVE_MAX];
	for (size_t i = 0; i < t->n; i++) {
		const struct train_sample *s = &t->ring[i];
		if (s->test || s->y_w[zi] < 0)
			continue;
		double zv[FEAT_COUNT];
		for (int j = 0; j < FEAT_COUNT; j++)
			zv[j] = use[j] ? (s->x[j] - mean[j]) / sd[j] : 0;
		for (int j = 0; j < FEAT_COUNT; j++) {
			c[j] += zv[j] * (s->y_w[zi] - ymean);
			for (int k = 0; k < FEAT_COUNT; k++)
				A[j][k] += zv[j] * zv[k];
		}
	}
	for (int j = 0; j < FEAT_COUNT; j++) {
		c[j] /= (double)n;
		for (int k = 0; k < FEAT_COUNT; k++)
			A[j][k] /= (double)n;
	}
	solve_spd(FEAT_COUNT, A, c, use, beta);
	z->bias_w = ymean;
	for (int j = 0; j < FEAT_COUNT; j++) {
		if (!include[j])
			continue;
		struct model_feat *f = &z->feat[z->nfeat++];
		snprintf(f->name, sizeof(f->name), "%s", feat_name(j));
		f->id = j;
		f->weight = use[j] ? beta[j] : 0;
		f->scale = use[j] ? sd[j] : 1;
		f->mean = use[j] ? mean[j] : 0;
	}
}

/* MAE and MAPE of zone z (Kepler zone zi) of model m on the held-out samples. */
static void heldout_error(const struct trainer *t, const struct model *m, struct model_zone *z,
			  int zi)
{
	double abs_sum = 0, pct_sum = 0;
	size_t nabs = 0, npct = 0;
	for (size_t i = 0; i < t->n; i++) {
		const struct train_sample *s = &t->ring[i];
		if (!s->test || s->y_w[zi] < 0)
			continue;
		double p = model_zone_power_w(m, z, s->x);
		/* A curve undefined at a held-out point misses it by all of its power. */
		double e = isfinite(p) ? fabs(p - s->y_w[zi]) : fabs(s->y_w[zi]);
		abs_sum += e;
		nabs++;
		if (s->y_w[zi] > 0) {
			pct_sum += e / s->y_w[zi];
			npct++;
		}
	}
	z->mae_w = nabs ? abs_sum / (double)nabs : 0;
	z->mape = npct ? 100 * pct_sum / (double)npct : 0;
}

/* The model's name and counts once its zones are fitted; -1 when no zone had power. */
static int fit_done(struct trainer *t, const char *name, uint64_t cores, size_t ntrain,
		    size_t ntest, struct model *out, char *err, size_t errlen)
{
	if (out->nzones == 0) {
		snprintf(err, errlen, "no zone with power in the window");
		return -1;
	}
	snprintf(out->name, sizeof(out->name), "%s", name);
	snprintf(out->origin, sizeof(out->origin), "training");
	out->output = MODEL_ABS;
	out->cores = cores;
	out->train_slots = ntrain;
	out->test_slots = ntest;
	/* A fit that extrapolates to a non-finite power is never published or written. */
	char gerr[MODEL_ERR_MAX];
	if (model_check_grid(out, WB_ZONE_MAX_W, gerr, sizeof(gerr)) < 0) {
		snprintf(err, errlen, "%s", gerr);
		return -2;
	}
	t->fits++;
	return 0;
}

int trainer_fit(struct trainer *t, const char *name, uint64_t cores, struct model *out, char *err,
		size_t errlen)
{
	memset(out, 0, sizeof(*out));
	size_t ntrain = 0, ntest = 0;
	double mean[FEAT_COUNT] = {0}, var[FEAT_COUNT] = {0};
	for (size_t i = 0; i < t->n; i++) {
		if (t->ring[i].test) {
			ntest++;
			continue;
		}
		ntrain++;
		for (int j = 0; j < FEAT_COUNT; j++)
			mean[j] += t->ring[i].x[j];
	}
	t->since_fit = 0;
	if (ntrain < t->conf.min_slots || ntrain < 2) {
		snprintf(err, errlen, "%zu training slots in the window, %zu needed", ntrain,
			 t->conf.min_slots);
		return -1;
	}
	for (int j = 0; j < FEAT_COUNT; j++)
		mean[j] /= (double)ntrain;
	for (size_t i = 0; i < t->n; i++)
		if (!t->ring[i].test)
			for (int j = 0; j < FEAT_COUNT; j++)
				var[j] += (t->ring[i].x[j] - mean[j]) * (t->ring[i].x[j] - mean[j]);
	out->form = MODEL_LINEAR;
	/* CPU time always (a model needs a feature); counters when they were measured. */
	bool include[FEAT_COUNT];
	for (int j = 0; j < FEAT_COUNT; j++)
		include[j] = j == FEAT_CPU_TIME_MS || var[j] > 0;

	for (int zi = 0; zi < TRAIN_ZONES; zi++) {
		if (!t->zone_seen[zi])
			continue;
		struct model_zone *z = &out->zones[out->nzones];
		fit_zone(t, zi, include, z);
		heldout_error(t, out, z, zi);
		out->nzones++;
	}
	out->form = MODEL_LINEAR;
	return fit_done(t, name, cores, ntrain, ntest, out, err, errlen);
}

/* ---- curve fits: model-db's logarithmic, logistic and exponential forms on one feature ---- */

#define CURVE_ITER_MAX 300

static double curve_sse(enum model_form form, const double *c, const double *u, const double *y,
			size_t n)
{
	double g[MODEL_CURVE_MAX], sse = 0;
	for (size_t i = 0; i < n; i++) {
		double f = model_curve_eval(form, c, u[i], g);
		if (!isfinite(f))
			return INFINITY;
		sse += (f - y[i]) * (f - y[i]);
	}
	return sse;
}

/* Levenberg-Marquardt from c; returns the final sum of squares (c updated). */
static double curve_lm(enum model_form form, double *c, const double *u, const double *y, size_t n)
{
	size_t k = model_curve_len(form);
	double lambda = 1e-3, sse = curve_sse(form, c, u, y, n);
	for (int it = 0; it < CURVE_ITER_MAX && isfinite(sse); it++) {
		double JtJ[MODEL_CURVE_MAX][MODEL_CURVE_MAX] = {{0}}, Jtr[MODEL_CURVE_MAX] = {0},
		       g[MODEL_CURVE_MAX];
		for (size_t i = 0; i < n; i++) {
			double r = y[i] - model_curve_eval(form, c, u[i], g);
			for (size_t a = 0; a < k; a++) {
				Jtr[a] += g[a] * r;
				for (size_t b = 0; b < k; b++)
					JtJ[a][b] += g[a] * g[b];
			}
		}
		bool improved = false;
		while (lambda < 1e12) {
			double A[SOLVE_MAX][SOLVE_MAX] = {{0}}, b[SOLVE_MAX] = {0}, d[SOLVE_MAX],
			       trial[MODEL_CURVE_MAX];
			const bool all[SOLVE_MAX] = {true, true, true, true};
			for (size_t a = 0; a < k; a++) {
				for (size_t bb = 0; bb < k; bb++)
					A[a][bb] = JtJ[a][bb];
				A[a][a] += lambda * (JtJ[a][a] > 0 ? JtJ[a][a] : 1e-12);
				b[a] = Jtr[a];
			}
			if (solve_spd(k, A, b, all, d) > 0) {
				lambda *= 10;
				continue;
			}
			for (size_t a = 0; a < k; a++)
				trial[a] = c[a] + d[a];
			double s2 = curve_sse(form, trial, u, y, n);
			if (s2 < sse) {
				double gain = sse - s2;
				memcpy(c, trial, k * sizeof(double));
				lambda = lambda / 10 > 1e-12 ? lambda / 10 : 1e-12;
				improved = gain > 1e-12 * (sse + 1e-30);
				sse = s2;
				break;
			}
			lambda *= 10;
		}
		if (!improved)
			break;
	}
	return sse;
}

/*
 * Starting points (the form's row): for each, the amplitude and the offset are
 * the linear least squares fit of y against the shape; Levenberg-Marquardt then
 * moves all of them. The best fit wins.
 */
static void fit_curve_zone(enum model_form form, const double *u, const double *y, size_t n,
			   double *best)
{
	const struct model_form_def *fd = &model_forms[form];
	double best_sse = INFINITY;
	for (size_t sidx = 0; sidx < fd->nstarts; sidx++) {
		double c[MODEL_CURVE_MAX], g[MODEL_CURVE_MAX];
		memcpy(c, fd->starts[sidx], sizeof(c));
		/* amplitude a and offset o by least squares of y = a * shape(u) + o */
		size_t ai = fd->amp, oi = fd->offset;
		double sx = 0, sy = 0, sxx = 0, sxy = 0;
		c[ai] = 1;
		c[oi] = 0;
		for (size_t i = 0; i < n; i++) {
			double h = model_curve_eval(form, c, u[i], g);
			sx += h;
			sy += y[i];
			sxx += h * h;
			sxy += h * y[i];
		}
		double det = (double)n * sxx - sx * sx;
		if (!(fabs(det) > 1e-12 * ((double)n * sxx + 1e-300)))
			continue;
		c[ai] = ((double)n * sxy - sx * sy) / det;
		c[oi] = (sy - c[ai] * sx) / (double)n;
		double sse = curve_lm(form, c, u, y, n);
		if (sse < best_sse) {
			best_sse = sse;
			memcpy(best, c, sizeof(c));
		}
	}
	if (!isfinite(best_sse)) {
		/* no start fit: a flat curve at the mean power */
		double my = 0;
		for (size_t i = 0; i < n; i++)
			my += y[i];
		memset(best, 0, MODEL_CURVE_MAX * sizeof(double));
		best[fd->offset] = n ? my / (double)n : 0;
	}
}

int trainer_fit_form(struct trainer *t, enum model_form form, const char *name, uint64_t cores,
		     struct model *out, char *err, size_t errlen)
{
	if (form == MODEL_LINEAR)
		return trainer_fit(t, name, cores, out, err, errlen);
	memset(out, 0, sizeof(*out));
	size_t ntrain = 0, ntest = 0;
	double umax = 0;
	for (size_t i = 0; i < t->n; i++) {
		if (t->ring[i].test) {
			ntest++;
			continue;
		}
		ntrain++;
		if (t->ring[i].x[FEAT_CPU_TIME_MS] > umax)
			umax = t->ring[i].x[FEAT_CPU_TIME_MS];
	}
	if (ntrain < t->conf.min_slots || ntrain < model_curve_len(form) + 1) {
		snprintf(err, errlen, "%zu training slots, %zu needed for the %s form", ntrain,
			 t->conf.min_slots > model_curve_len(form) + 1 ? t->conf.min_slots
								       : model_curve_len(form) + 1,
			 model_form_name(form));
		return -1;
	}
	double *u = malloc(ntrain * sizeof(double)), *y = malloc(ntrain * sizeof(double));
	if (!u || !y) {
		free(u);
		free(y);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	/* Fitted on CPU time scaled to [0, 1], as model-db's BPF curve fits (model_curve_feature).
	 */
	double scale = umax > 0 ? umax : 1;
	out->form = form;
	for (int zi = 0; zi < TRAIN_ZONES; zi++) {
		if (!t->zone_seen[zi])
			continue;
		size_t n = 0;
		for (size_t i = 0; i < t->n; i++) {
			const struct train_sample *s = &t->ring[i];
			if (s->test || s->y_w[zi] < 0)
				continue;
			u[n] = s->x[FEAT_CPU_TIME_MS] / scale;
			y[n] = s->y_w[zi];
			n++;
		}
		if (n == 0)
			continue;
		struct model_zone *z = &out->zones[out->nzones];
		memset(z, 0, sizeof(*z));
		snprintf(z->zone, sizeof(z->zone), "%s", train_zone_name(zi));
		z->nfeat = 1;
		snprintf(z->feat[0].name, sizeof(z->feat[0].name), "%s",
			 feat_name(FEAT_CPU_TIME_MS));
		z->feat[0].id = FEAT_CPU_TIME_MS;
		z->feat[0].scale = scale;
		z->ncurve = model_curve_len(form);
		fit_curve_zone(form, u, y, n, z->curve);
		heldout_error(t, out, z, zi);
		out->nzones++;
	}
	free(u);
	free(y);
	return fit_done(t, name, cores, ntrain, ntest, out, err, errlen);
}
