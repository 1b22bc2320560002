/*
 * modeld's offline trainer (POST /train, Kepler's TrainRequest): Prometheus query
 * results in, estimd's trainer, a zip of the pipeline folder out. Pure of sockets
 * (it writes a scratch folder), so that tests/unit/test_modeld_train.c drives it.
 */
#ifndef WB_MODELD_TRAIN_H
#define WB_MODELD_TRAIN_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

struct md_train_counters {
	uint64_t requests; /* POST /train bodies parsed */
	uint64_t trained;  /* answered with a pipeline */
	uint64_t refused;  /* 4xx: a field wrong, or too little data to train on */
};

/* The answer of a train request. */
struct md_train_result {
	char *zip; /* malloc'd archive of the pipeline folder */
	size_t len;
	char name[64];	   /* the pipeline's name, the archive's file name */
	size_t intervals;  /* usable intervals the models were trained on (and held out) */
	double abs_mae_w;  /* the AbsPower model's held-out MAE over its zones; -1: none trained */
	double dyn_mae_w;  /* the same of the DynPower model */
	char skipped[256]; /* trainers named but not trained (wattbus trains SGDRegressorTrainer) */
};

/*
 * Train the pipeline a TrainRequest body asks for in a scratch folder under workdir
 * (removed before returning). 0 with *res filled (free res->zip), else the HTTP status
 * of the refusal (400: err names the field; 500: the folder could not be written).
 */
int md_train(const char *body, size_t len, const char *workdir, struct md_train_result *res,
	     char *err, size_t errlen);

/*
 * The online trainer's fit (promtrain.c): Prometheus results (query name -> matrix result) of
 * the store's energy source trained into AbsPower and DynPower (MinIdleIsolator) models, filed
 * in the store by md_store_put as trainer host's, by the bus's replacement rule. 0 with *res
 * (no zip), or -1 with err.
 */
struct md_store;
int md_train_into(struct md_store *st, const json_t *prom, const char *host, uint64_t now_ns,
		  struct md_train_result *res, char *err, size_t errlen);

#endif
