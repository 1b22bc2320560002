/*
 * exportd's state file: accum's node counters (accum.c builds and reads their
 * JSON), written and read through lib/state.c (wb_state_save_json,
 * wb_state_load_json), so that accum.c stays pure.
 */
#include <jansson.h>

#include "exportd.h"
#include "state.h"

int accum_save(const struct accum *self, const char *path, bool sync, char *err, size_t errlen)
{
	return wb_state_save_json(accum_to_json(self), path, sync, err, errlen);
}

struct resume {
	struct accum *self;
	size_t *nhosts;
};

/* accum_from_json checks what it uses and skips a host it cannot use, rather than the file. */
static int resume_state(const json_t *root, void *arg, char *why, size_t len)
{
	struct resume *r = arg;
	return accum_from_json(r->self, root, r->nhosts, why, len);
}

int accum_load(struct accum *self, const char *path, size_t *nhosts, char *err, size_t errlen)
{
	*nhosts = 0;
	struct resume r = {self, nhosts};
	return wb_state_load_json(path, NULL, resume_state, &r, err, errlen);
}
