/*
 * libFuzzer target for the estimator sidecar's answers (estimd/kepler.c): any
 * bytes give powers estimd can use (finite, within one zone's reach, a core
 * ratio above 0) or an error that says why.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../estimd/estimd.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kepler_powers kp;
	char err[MODEL_ERR_MAX];
	err[0] = '\0';
	if (kepler_powers_parse((const char *)data, size, &kp, err, sizeof(err)) < 0) {
		if (!err[0] || kp.n != 0)
			abort();
		return 0;
	}
	if (kp.n == 0 || kp.n > MODEL_ZONES_MAX || !(kp.core_ratio > 0) || !isfinite(kp.core_ratio))
		abort();
	for (size_t i = 0; i < kp.n; i++)
		if (!isfinite(kp.p_w[i]) || !isfinite(kp.p0_w[i]) || fabs(kp.p_w[i]) > 1e5 ||
		    fabs(kp.p0_w[i]) > 1e5 || !kp.zone[i][0])
			abort();
	return 0;
}
