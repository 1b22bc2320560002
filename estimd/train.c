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
 * Solve A b = c (p x p, symmetric, standardised so the diagonal is about 1) by
 * Cholesky, dropping a feature whose pivot vanishes (it is a combination of the
 * others, e.g. cycles proportional to CPU time): its weight stays 0.
 */
static void solve_spd(size_t p, double A[FEAT_COUNT][FEAT_COUNT], const double c[FEAT_COUNT],
		      const bool use[FEAT_COUNT], double b[FEAT_COUNT])
{
	double L[FEAT_COUNT][FEAT_COUNT] = {{0}};
	bool on[FEAT_COUNT];
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
	double y[FEAT_COUNT] = {0};
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
	bool use[FEAT_COUNT];
	for (int j = 0; j < FEAT_COUNT; j++) {
		sd[j] = sqrt(sd[j] / (double)n);
		use[j] = include[j] && sd[j] > 1e-12 * (fabs(mean[j]) + 1);
	}
	double A[FEAT_COUNT][FEAT_COUNT] = {{0}}, c[FEAT_COUNT] = {0}, beta[FEAT_COUNT];
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
		double abs_sum = 0, pct_sum = 0;
		size_t nabs = 0, npct = 0;
		for (size_t i = 0; i < t->n; i++) {
			const struct train_sample *s = &t->ring[i];
			if (!s->test || s->y_w[zi] < 0)
				continue;
			double e = fabs(model_zone_power_w(out, z, s->x) - s->y_w[zi]);
			abs_sum += e;
			nabs++;
			if (s->y_w[zi] > 0) {
				pct_sum += e / s->y_w[zi];
				npct++;
			}
		}
		z->mae_w = nabs ? abs_sum / (double)nabs : 0;
		z->mape = npct ? 100 * pct_sum / (double)npct : 0;
		out->nzones++;
	}
	if (out->nzones == 0) {
		snprintf(err, errlen, "no zone with power in the window");
		return -1;
	}
	snprintf(out->name, sizeof(out->name), "%s", name);
	snprintf(out->origin, sizeof(out->origin), "training");
	out->form = MODEL_LINEAR;
	out->output = MODEL_ABS;
	out->cores = cores;
	out->train_slots = ntrain;
	out->test_slots = ntest;
	t->fits++;
	return 0;
}
