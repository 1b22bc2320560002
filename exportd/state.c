/*
 * exportd's state file: accum's node counters (accum.c builds and reads their
 * JSON), written and read through lib/json.c (wb_json_save/wb_json_load), so
 * that accum.c stays pure.
 */
#include <stdio.h>

#include <jansson.h>

#include "exportd.h"
#include "json.h"

int accum_save(const struct accum *self, const char *path, bool sync, char *err, size_t errlen)
{
	json_t *root = accum_to_json(self);
	if (!root) {
		snprintf(err, errlen, "%s: out of memory", path);
		return -1;
	}
	int rc = wb_json_save(root, path, sync, err, errlen);
	json_decref(root);
	return rc;
}

int accum_load(struct accum *self, const char *path, size_t *nhosts, char *err, size_t errlen)
{
	*nhosts = 0;
	/* No links, no FIFO: the runtime directory is writable by the socket group. */
	json_t *root = wb_json_load(path, JSON_REJECT_DUPLICATES, err, errlen);
	if (!root)
		return -1;
	char why[256];
	int rc = accum_from_json(self, root, nhosts, why, sizeof why);
	json_decref(root);
	if (rc < 0)
		snprintf(err, errlen, "%s: %s", path, why);
	return rc;
}
