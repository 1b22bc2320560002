/*
 * The model forms, one row each: Kepler's linear weights and model-db's curve
 * fits. A row brings what the parser (trainer names, parameter count), the
 * evaluation (value and gradient) and the trainer (starting points) need, so
 * that a new form is one function and one row here.
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>

#include "estimd.h"

/* a * log(b * u + 1) + c */
static double logarithmic(const double *c, double u, double *grad)
{
	double arg = c[1] * u + 1;
	if (!(arg > 0))
		return NAN;
	grad[0] = log(arg);
	grad[1] = c[0] * u / arg;
	grad[2] = 1;
	return c[0] * log(arg) + c[2];
}

/* a / (1 + exp(-k * (u - x0))) + c */
static double logistic(const double *c, double u, double *grad)
{
	double sg = 1 / (1 + exp(-c[2] * (u - c[1])));
	grad[0] = sg;
	grad[1] = -c[0] * sg * (1 - sg) * c[2];
	grad[2] = c[0] * sg * (1 - sg) * (u - c[1]);
	grad[3] = 1;
	return c[0] * sg + c[3];
}

/* a * exp(b * u) + c */
static double exponential(const double *c, double u, double *grad)
{
	double e = exp(c[1] * u);
	grad[0] = e;
	grad[1] = c[0] * u * e;
	grad[2] = 1;
	return c[0] * e + c[2];
}

/* The shape parameters a fit starts from (the amplitude and the offset are solved at each). */
static const double log_starts[][MODEL_CURVE_MAX] = {
    {0, 0.3}, {0, 1}, {0, 3}, {0, 10}, {0, 30}, {0, 100},
};
static const double exp_starts[][MODEL_CURVE_MAX] = {
    {0, -3}, {0, -1}, {0, -0.3}, {0, 0.3}, {0, 1}, {0, 3},
};
/* midpoint x0 in {0.1 .. 0.9} at each steepness k in {3, 10, 30} */
static const double lgs_starts[][MODEL_CURVE_MAX] = {
    {0, 0.1, 3},  {0, 0.3, 3},	{0, 0.5, 3},  {0, 0.7, 3},  {0, 0.9, 3},
    {0, 0.1, 10}, {0, 0.3, 10}, {0, 0.5, 10}, {0, 0.7, 10}, {0, 0.9, 10},
    {0, 0.1, 30}, {0, 0.3, 30}, {0, 0.5, 30}, {0, 0.7, 30}, {0, 0.9, 30},
};
#define STARTS(a) (a), (sizeof(a) / sizeof((a)[0]))

const struct model_form_def model_forms[MODEL_FORM_COUNT] = {
    [MODEL_LINEAR] = {"linear", "SGDRegressorTrainer", "LinearRegressionTrainer"},
    [MODEL_LOGARITHMIC] = {"logarithmic", "LogarithmicRegressionTrainer", NULL, 3, logarithmic, 0,
			   2, STARTS(log_starts)},
    [MODEL_LOGISTIC] = {"logistic", "LogisticRegressionTrainer", NULL, 4, logistic, 0, 3,
			STARTS(lgs_starts)},
    [MODEL_EXPONENTIAL] = {"exponential", "ExponentialRegressionTrainer", NULL, 3, exponential, 0,
			   2, STARTS(exp_starts)},
};

void model_trainer_names(char *buf, size_t size)
{
	size_t o = (size_t)snprintf(buf, size, "auto");
	for (int f = 0; f < MODEL_FORM_COUNT && o < size; f++)
		o += (size_t)snprintf(buf + o, size - o, "|%s%s%s", model_forms[f].trainer,
				      model_forms[f].trainer_also ? "|" : "",
				      model_forms[f].trainer_also ? model_forms[f].trainer_also
								  : "");
}

const char *model_form_name(enum model_form form)
{
	return (unsigned)form < MODEL_FORM_COUNT ? model_forms[form].name : "?";
}

size_t model_curve_len(enum model_form form)
{
	return (unsigned)form < MODEL_FORM_COUNT ? model_forms[form].nparams : 0;
}

double model_curve_eval(enum model_form form, const double *c, double u, double *grad)
{
	double g[MODEL_CURVE_MAX];
	if ((unsigned)form >= MODEL_FORM_COUNT || !model_forms[form].eval)
		return NAN;
	return model_forms[form].eval(c, u, grad ? grad : g);
}
