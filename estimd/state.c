/*
 * estimd's state file: the node totals (totals.c builds and reads their JSON) and each GPU zone's
 * learned idle power (estimate.c's), written and read through lib/json.c (wb_json_save,
 * wb_json_load). With sidecar.c and modelio.c, the only I/O of estimd's modules besides spec.c.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "estimd.h"
#include "json.h"

int estimd_state_save(struct estimator *e, const char *path, uint64_t now_ns, bool sync, char *err,
		      size_t errlen)
{
	json_t *root = totals_to_json(estimator_totals(e), now_ns);
	json_t *gpu = root ? estimator_gpu_idle_to_json(e) : NULL;
	if (!gpu || json_object_set_new(root, "gpu_idle", gpu) < 0) {
		json_decref(root);
		snprintf(err, errlen, "%s: out of memory", path);
		return -1;
	}
	int rc = wb_json_save(root, path, sync, err, errlen);
	json_decref(root);
	return rc;
}

/* gpu_idle, when there: {"HOST": {"ZONE": W}}, names of 1 to 63 bytes, W in [0, the bound]. */
static int gpu_idle_check(const json_t *o, char *why, size_t len)
{
	const char *host, *zone;
	const json_t *zones, *w;
	if (!o)
		return 0;
	if (!json_is_object(o)) {
		snprintf(why, len, "gpu_idle: not an object");
		return -1;
	}
	json_object_foreach((json_t *)o, host, zones)
	{
		bool ok = host[0] && strlen(host) <= 63 && json_is_object(zones);
		json_object_foreach((json_t *)zones, zone, w)
		{
			double v = json_number_value(w);
			ok = ok && zone[0] && strlen(zone) <= 63 && json_is_number(w) && v >= 0 &&
			     v <= WB_ZONE_MAX_W;
		}
		if (!ok) {
			snprintf(
			    why, len,
			    "gpu_idle: host '%.63s' needs names of 1 to 63 bytes and watts in [0, %g]",
			    host, WB_ZONE_MAX_W);
			return -1;
		}
	}
	return 0;
}

int estimd_state_load(struct estimator *e, const char *path, size_t *nhosts, size_t *ngpus,
		      char *err, size_t errlen)
{
	*nhosts = *ngpus = 0;
	json_t *root = wb_json_load(path, JSON_REJECT_DUPLICATES, err, errlen);
	if (!root)
		return -1;
	char why[256];
	const json_t *gpu = json_is_object(root) ? json_object_get(root, "gpu_idle") : NULL;
	int rc = gpu_idle_check(gpu, why, sizeof(why));
	if (rc == 0)
		rc = totals_from_json(estimator_totals(e), root, nhosts, why, sizeof(why));
	if (rc == 0 && gpu)
		*ngpus = estimator_gpu_idle_from_json(e, gpu);
	json_decref(root);
	if (rc < 0) {
		snprintf(err, errlen, "%s: %s", path, why);
		errno = EINVAL;
	}
	return rc;
}
