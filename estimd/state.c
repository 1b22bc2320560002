/*
 * estimd's state file: the node totals (totals.c builds and reads their JSON),
 * written and read through lib/json.c (wb_json_save/wb_json_load). With
 * sidecar.c and modelio.c, the only I/O of estimd's modules besides spec.c.
 */
#include <errno.h>
#include <stdio.h>

#include <jansson.h>

#include "estimd.h"
#include "json.h"

int totals_save(const struct totals *t, const char *path, uint64_t now_ns, bool sync, char *err,
		size_t errlen)
{
	json_t *root = totals_to_json(t, now_ns);
	if (!root) {
		snprintf(err, errlen, "%s: out of memory", path);
		return -1;
	}
	int rc = wb_json_save(root, path, sync, err, errlen);
	json_decref(root);
	return rc;
}

int totals_load(struct totals *t, const char *path, size_t *nhosts, char *err, size_t errlen)
{
	*nhosts = 0;
	json_t *root = wb_json_load(path, JSON_REJECT_DUPLICATES, err, errlen);
	if (!root)
		return -1;
	char why[256];
	int rc = totals_from_json(t, root, nhosts, why, sizeof(why));
	json_decref(root);
	if (rc < 0) {
		snprintf(err, errlen, "%s: %s", path, why);
		errno = EINVAL;
	}
	return rc;
}
