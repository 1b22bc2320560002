/*
 * libFuzzer target for estimd's Kepler model loader: any bytes give a model
 * that evaluates and round-trips, or an error that names the file.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "../../estimd/estimd.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct model_hint hints[] = {
	    {NULL, NULL, 0},
	    {"LogarithmicRegressionTrainer", "DynPower", 0},
	    {"ExponentialRegressionTrainer", "auto", 8},
	};
	struct model m;
	char err[MODEL_ERR_MAX];
	const struct model_hint *hint = &hints[size % 3];
	if (model_parse((const char *)data, size, "fuzz.json", hint, &m, err, sizeof(err)) < 0) {
		if (strncmp(err, "fuzz.json", 9) != 0)
			abort(); /* every rejection names the input */
		return 0;
	}
	if (m.nzones == 0 || m.nzones > MODEL_ZONES_MAX)
		abort();
	double x[FEAT_COUNT] = {1000, 1e9, 2e9, 1e6}, zero[FEAT_COUNT] = {0};
	for (size_t i = 0; i < m.nzones; i++) {
		const struct model_zone *z = &m.zones[i];
		if (z->nfeat == 0 || z->nfeat > MODEL_FEATS_MAX)
			abort();
		for (size_t f = 0; f < z->nfeat; f++)
			if (!(z->feat[f].scale > 0) || !isfinite(z->feat[f].scale) ||
			    !isfinite(z->feat[f].weight))
				abort();
		(void)model_zone_power_w(&m, z, x);
		(void)model_zone_power_w(&m, z, zero);
		(void)model_zone_active(&m, z);
	}
	char desc[1024];
	model_describe(&m, desc, sizeof(desc));
	if (m.form != MODEL_LINEAR)
		return 0;
	/* A linear model written as Kepler JSON reads back with as many zones. */
	char *json = model_to_kepler_json(&m, err, sizeof(err));
	if (json) {
		struct model back;
		if (model_parse(json, strlen(json), "rewritten.json", NULL, &back, err,
				sizeof(err)) == 0 &&
		    back.nzones != m.nzones)
			abort();
		free(json);
	}
	/* And as a model message, where the schema's bounds allow. */
	struct wb_msg msg = {.kind = WB_MODEL};
	if (model_to_msg(&m, &msg.model, err, sizeof(err)) == 0) {
		snprintf(msg.model.env.host, sizeof(msg.model.env.host), "h");
		snprintf(msg.model.env.src, sizeof(msg.model.env.src), "fuzz");
		snprintf(msg.model.env.kind, sizeof(msg.model.env.kind), "model");
		msg.model.env.v = 1;
		char *buf;
		size_t len;
		struct wb_err werr;
		if (wb_encode(&msg, &buf, &len, &werr) == 0) {
			struct wb_msg dec;
			struct model back;
			if (wb_decode(buf, len, &dec, &werr) == 0) {
				if (model_from_msg(&dec.model, &back, err, sizeof(err)) == 0 &&
				    back.nzones != m.nzones)
					abort();
				wb_msg_clear(&dec);
			}
			free(buf);
		}
		wb_msg_clear(&msg);
	}
	return 0;
}
