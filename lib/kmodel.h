/*
 * Kepler's model format (kepler-model-db, kepler-model-server), written once
 * for estimd, modeld and `wattbus train`: the machine spec (one struct, every
 * spelling Kepler's servers write), a model's weight.json and its metadata.json.
 *
 * Where wattbus adds to Kepler's files (Kepler's readers ignore keys they do not know):
 *   weight.json   one object "wattbus": {"output": "AbsPower", "train_slots": N,
 *                 "test_slots": N, "zones": {"<zone>": {"mae_w": W, "mape": P}}}
 *                 (estimd reads its held-out error back from here)
 *   metadata.json flat keys "wattbus_host" (the trainer host), "wattbus_src" (its stage),
 *                 "wattbus_name" (its name for the model), "wattbus_t" (when it sent it,
 *                 ns), "wattbus_train_slots", "wattbus_test_slots", "wattbus_recordings"
 *                 (the files `wattbus train` read), each only when known; modeld reads
 *                 the host back. Flat, because Kepler's estimator loads metadata.json
 *                 through json.loads(object_hook=Model(**d)), which makes every nested
 *                 object a Model (it deletes machine_spec first for that reason): a
 *                 nested "wattbus" object fails the load.
 */
#ifndef WB_KMODEL_H
#define WB_KMODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "spec.h"

/* A machine as Kepler's NodeTypeSpec sees it; 0 or "": not known. */
struct km_spec {
	char processor[128];	/* "intel_xeon_platinum_8259cl": wb_processor_name */
	uint64_t cores;		/* logical CPUs */
	uint64_t chips;		/* sockets */
	uint64_t memory_gib;	/* whole GiB */
	uint64_t frequency_mhz; /* MHz */
};

/* What a 0 says: not known, as for Kepler's attr_has_value (a client's request, a node type),
 * except a model's own cores (KM_ZERO_CORES_REFUSED): they give the core ratio, and a model
 * that states 0 CPUs is broken. */
enum km_spec_zero { KM_ZERO_UNKNOWN, KM_ZERO_CORES_REFUSED };

/*
 * machine_spec (or node_type_index.json's attrs) in every spelling Kepler's servers
 * write: an attribute's value ("cores", Python <= 3.10) or its NodeAttribute member
 * ("NodeAttribute.CORES", "NodeAttribute.FREQ": Python >= 3.11), in any case, and
 * wattbus's model-message keys memory_gib, frequency_mhz. A value is null (not
 * known), or a whole number (96.0 is 96; "96", as Kepler converts strings) within
 * the attribute's bounds; two spellings of one attribute that both state a value
 * must agree. NULL or null: nothing known. Returns 0, or -1 with err
 * "machine_spec.KEY: reason" (KEY as spelt). *out is overwritten.
 */
int km_spec_parse(const json_t *obj, enum km_spec_zero zero, struct km_spec *out, char *err,
		  size_t errlen);
/* Kepler's machine_spec: processor, cores, chips, memory, frequency, null when not known. */
json_t *km_spec_json(const struct km_spec *s);
bool km_spec_empty(const struct km_spec *s);

/* A feature of a zone: Kepler's scale and weight, and (linear) the mean wattbus subtracts. */
struct km_feat {
	const char *name;
	double scale, weight, mean;
};

/* A zone of a model; ncurve 0: linear, else a curve fit's CurveFit_Weights. */
struct km_zone {
	const char *zone;
	double bias_w;
	const struct km_feat *feat;
	size_t nfeat;
	const double *curve;
	size_t ncurve;
	double mae_w, mape; /* held-out error; NaN: not known */
};

/* A linear zone's bias with its features' means folded in, as Kepler's form has no means:
 * bias_w - sum(weight * mean / scale). */
double km_folded_bias(const struct km_zone *z);
/*
 * weight.json of zones: linear zones with the means folded into Bias_Weight
 * (km_folded_bias), curve fits with
 * each feature's scale and the curve's weights; model_name and machine_spec when
 * not NULL; "wattbus" (output, slot counts, each zone's error) when output is not
 * NULL. New reference.
 */
json_t *km_weight_json(const struct km_zone *zones, size_t nzones, const char *model_name,
		       const struct km_spec *spec, const char *output, uint64_t train_slots,
		       uint64_t test_slots);

/* What metadata.json says of a model beyond its zones; NULL strings are left out. */
struct km_meta {
	const char *model_name, *trainer, *model_class, *model_file, *output_type;
	const char *const *features;
	size_t nfeatures;
	double mae, mape;	       /* the model's; NaN or < 0: -1 (not known) */
	int node_type;		       /* < 0: left out */
	const struct km_spec *spec;    /* NULL: no machine_spec */
	const char *host, *src, *name; /* wattbus_*: the trainer's */
	uint64_t t_ns;		       /* 0: left out */
	uint64_t train_slots, test_slots;
	const char *const *recordings;
	size_t nrecordings;
};

/*
 * metadata.json as Kepler's trainers write it (save_metadata): model_name,
 * trainer, model_class, model_file, features, fe_files ([]), output_type, mae,
 * mape, node_type, machine_spec, and <zone>_mae, <zone>_mape for each zone of its
 * weight.json (-1 when not known), then wattbus's wattbus_* keys. New reference.
 */
json_t *km_meta_json(const struct km_meta *m, const struct km_zone *zones, size_t nzones);
/* The trainer host of a model wattbus filed (wattbus_host), or "". */
const char *km_meta_host(const json_t *meta);

#endif
