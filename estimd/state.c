/*
 * estimd's state file: the node totals (totals.c builds and reads their JSON) and each GPU zone's
 * learned idle power (estimate.c's), written and read through lib/state.c (wb_state_save_json,
 * wb_state_load_json). With sidecar.c and modelio.c, the only I/O of estimd's modules besides
 * spec.c.
 */
#include <stdio.h>

#include <jansson.h>

#include "estimd.h"
#include "state.h"

int estimd_state_save(struct estimator *e, const char *path, uint64_t now_ns, bool sync, char *err,
		      size_t errlen)
{
	json_t *root = totals_to_json(estimator_totals(e), now_ns);
	json_t *gpu = root ? estimator_gpu_idle_to_json(e) : NULL;
	if (root && (!gpu || json_object_set_new(root, "gpu_idle", gpu) < 0)) {
		json_decref(root);
		root = NULL;
	}
	return wb_state_save_json(root, path, sync, err, errlen);
}

/* gpu_idle, when there: {"HOST": {"ZONE": W}}, names of 1 to 63 bytes, W in [0, the bound]. The
 * totals' members are totals.c's to check. */
static const struct wb_state_shape state_shape = {
    .kind = WB_SK_OBJECT,
    .fields =
	(const struct wb_state_field[]){
	    {"gpu_idle",
	     false,
	     {.kind = WB_SK_MAP,
	      .min_len = 1,
	      .max_len = 63,
	      .item =
		  &(const struct wb_state_shape){
		      .kind = WB_SK_MAP,
		      .min_len = 1,
		      .max_len = 63,
		      .item = &(const struct wb_state_shape){.kind = WB_SK_NUMBER,
							     .min = 0,
							     .max = WB_ZONE_MAX_W}}}},
	    {NULL},
	},
};

struct resume {
	struct estimator *e;
	size_t *nhosts, *ngpus;
};

static int resume_state(const json_t *root, void *arg, char *why, size_t len)
{
	struct resume *r = arg;
	if (totals_from_json(estimator_totals(r->e), root, r->nhosts, why, len) < 0)
		return -1;
	const json_t *gpu = json_object_get(root, "gpu_idle");
	if (gpu)
		*r->ngpus = estimator_gpu_idle_from_json(r->e, gpu);
	return 0;
}

int estimd_state_load(struct estimator *e, const char *path, size_t *nhosts, size_t *ngpus,
		      char *err, size_t errlen)
{
	*nhosts = *ngpus = 0;
	struct resume r = {e, nhosts, ngpus};
	return wb_state_load_json(path, &state_shape, resume_state, &r, err, errlen);
}
