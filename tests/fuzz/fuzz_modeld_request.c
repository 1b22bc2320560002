/*
 * libFuzzer target for modeld's POST /model: any body gives a parsed request or a
 * one-line reason (the 400 answer), and a parsed one is answered from the
 * ec2-0.7.11 pipeline (a model, or a reason) without a crash.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "../../modeld/modeld.h"

static struct md_store *store;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[MD_ERR_MAX];
	if (!store) {
		log_set_level(WB_LOG_ERR);
		const char *root = getenv("WB_ROOT");
		char dir[512];
		snprintf(dir, sizeof dir, "%s/tests/data/kepler-model-db/ec2-0.7.11",
			 root ? root : ".");
		store = md_store_new("/nonexistent", "wattbus", "rapl-sysfs");
		if (!store || md_store_import(store, dir, err, sizeof err) < 0 ||
		    store->nmodels != 78)
			abort();
	}
	struct md_request r;
	err[0] = '\0';
	if (md_request_parse((const char *)data, size, &r, err, sizeof err) < 0) {
		if (!err[0] || strchr(err, '\n'))
			abort(); /* every refusal has a reason, on one line */
		return 0;
	}
	const struct md_model *m = md_select(store, &r, err, sizeof err);
	if (m) {
		if (m->nfeat == 0 || strcmp(m->output, r.output))
			abort();
		json_t *w = md_weight_answer(store, m);
		if (!w || !json_object_get(w, "model_name"))
			abort();
		json_decref(w);
	} else if (!err[0]) {
		abort();
	}
	md_request_free(&r);
	return 0;
}
