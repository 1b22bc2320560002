/*
 * modeld's private header: the modules' prototypes, grouped by file. select and
 * store are pure of sockets (store reads and writes files) so that
 * tests/unit/test_modeld_*.c drive them directly; api.c and main.c do the I/O.
 */
#ifndef WB_MODELD_H
#define WB_MODELD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "kmodel.h"
#include "wb_msgs.h"

#define MD_NAME_MAX 128
#define MD_ERR_MAX 512

/* ---- select.c: Kepler's selection rules ---- */
/* Control characters (a newline in a key a client sent) as '?', so that a reason that quotes
 * input stays one line in the log and in a 400 answer. */
void md_one_line(char *s);

/* Specs are lib/kmodel.h's struct km_spec, read and written by km_spec_parse and km_spec_json
 * (processor spelled by lib/spec.h's wb_processor_name, as estimd spells it). */
bool md_spec_complete(const struct km_spec *spec);
/* Every attribute spec knows equals that of node (Kepler's NodeTypeSpec.cover). */
bool md_spec_covers(const struct km_spec *node, const struct km_spec *spec);
/* Kepler's weighted similarity in [0, 1]: processor 5, cores 1, chips 1, memory 0.5, frequency 0.5.
 */
double md_spec_similarity(const struct km_spec *node, const struct km_spec *spec);

/* One node type of a pipeline's node_type_index.json. */
struct md_node_type {
	int index;
	struct km_spec spec;
	size_t members;
};
/*
 * The node type of spec among types[0..n): the first covering one when spec is
 * complete, the covering one with the most members when it is not, else the most
 * similar one (ties: more members, then the first). -1 when n is 0 or spec is
 * empty. *similarity: 1 when covered, else the similarity.
 */
int md_node_type_of(const struct md_node_type *types, size_t n, const struct km_spec *spec,
		    double *similarity);

/* Kepler's feature groups, in the order its model server tries them. */
struct md_group {
	const char *name;
	const char *const *features; /* NULL-terminated */
};
extern const struct md_group md_groups[];
extern const size_t md_ngroups;
/* The group whose features are exactly these, or NULL (wattbus then files it as ThirdParty). */
const struct md_group *md_group_of(const char *const *features, size_t n);
const struct md_group *md_group_find(const char *name);
/* Every feature of the group is in metrics. */
bool md_group_valid(const struct md_group *g, char *const *metrics, size_t n);

/* A filter "mae:10;mape:20": each key at most its value (abs_max_corr: at least). */
#define MD_FILTER_MAX 8
struct md_filter {
	size_t n;
	struct {
		char key[64];
		double value;
	} c[MD_FILTER_MAX];
};
/* 0, or -1 with err naming the bad item. */
int md_filter_parse(const char *text, struct md_filter *f, char *err, size_t errlen);
/* The model's metadata passes every condition (a key it lacks fails). */
bool md_filter_pass(const struct md_filter *f, const json_t *metadata);

/* Weight-capable trainers (Kepler's weight_support_trainers). */
bool md_trainer_weight_capable(const char *trainer);

/* ---- store.c: the models held, on disk in Kepler's model-db layout ---- */
struct md_model {
	char pipeline[64], source[32], output[16], group[32], trainer[64];
	char name[MD_NAME_MAX]; /* <trainer>_<node_type> */
	int node_type;
	char *dir;	  /* its folder, or the folder of its archive */
	char *archive;	  /* a published <name>.zip without a folder: what weight=false serves */
	char origin[128]; /* "import:DIR" or "bus:HOST" */
	json_t *meta;	  /* metadata.json */
	json_t *weight;	  /* weight.json, NULL when the model has none (archive-only: never
			     weight=true) */
	char **features;
	size_t nfeat;
	double mae;	/* NAN: unknown (never served) */
	char host[64];	/* the trainer's, for a model from the bus ("" for an imported one) */
	uint64_t bytes; /* its files on disk */
};

struct md_pipeline {
	char name[64];
	char *dir;
	bool imported; /* read-only: models from the bus go to the store's own pipeline */
	bool apart;    /* untrusted trainers' models: served only when a request names it */
	json_t *index; /* node_type_index.json */
	struct md_node_type *types;
	size_t ntypes;
};

/* A model or file that could not be read, kept for GET /models. */
struct md_error {
	char *path, *reason;
};

/*
 * What the bus may make the store hold (docs/modeld.md, "Budget and trust"). Limits
 * count models from the bus (the own and the untrusted pipeline), never imported ones.
 */
struct md_policy {
	size_t max_models, max_models_per_host;
	size_t max_node_types, max_node_types_per_host;
	uint64_t max_bytes, max_bytes_per_host;
	size_t max_hosts;		/* trainer hosts tracked */
	double models_per_host_per_min; /* accepted from one host; 0: no limit */
	char apart[64];			/* the pipeline of untrusted trainers' models */
	char **trusted;			/* host names whose mae counts; "*": every trainer */
	size_t ntrusted;
};

/* What one trainer host holds, and its rate (a token bucket). */
struct md_host {
	char name[64];
	size_t models, types;
	uint64_t bytes;
	double tokens;
	uint64_t last_ns;
};

struct md_store {
	char *dir;	   /* the store directory */
	char pipeline[64]; /* the pipeline models from the bus go to */
	char source[32];   /* their energy source */
	struct md_pipeline *pipes;
	size_t npipes;
	struct md_model **models;
	size_t nmodels;
	struct md_error *errors;
	size_t nerrors;
	uint64_t skipped; /* corrupt entries skipped while loading */
	struct md_policy pol;
	bool own_trusted;      /* pol.trusted is this store's to free */
	struct md_host *hosts; /* sorted by name */
	size_t nhosts;
	size_t bus_models, bus_types; /* in the own and the untrusted pipeline */
	uint64_t bus_bytes;
};

/* A store with no limits that trusts every trainer (md_store_policy sets them). */
struct md_store *md_store_new(const char *dir, const char *pipeline, const char *source);
/* Set the budget and trust before md_store_load (trusted is copied). 0, or -1 with err. */
int md_store_policy(struct md_store *self, const struct md_policy *pol, char *err, size_t errlen);
void md_store_destroy(struct md_store **self_p);
/* Load every pipeline under the store dir (created when missing). 0, or -1 with err (the dir). */
int md_store_load(struct md_store *self, char *err, size_t errlen);
/* Serve the pipeline in dir as it is (read-only). 0, or -1 with err: not a folder, or its name
 * is one already held (the store's own and untrusted pipelines' included). */
int md_store_import(struct md_store *self, const char *dir, char *err, size_t errlen);
enum md_put_result {
	MD_PUT_NEW,
	MD_PUT_REPLACED,
	MD_PUT_KEPT,
	MD_PUT_ERROR,
	MD_PUT_OVER_BUDGET, /* err names the limit; the store is unchanged */
	MD_PUT_RATE_LIMITED,
};
/*
 * File a model message received at now_ns: node type from its spec (a new node
 * type when none covers it), feature group from its features, written atomically
 * as <pipeline>/<source>/<type>/<group>/SGDRegressorTrainer_<N>/, in the own
 * pipeline when its host is trusted, else in the untrusted one. A model of the
 * same name is replaced by the same host's; in the own pipeline also by another
 * trusted host's with a lower mae; otherwise kept (MD_PUT_KEPT). Past the budget
 * or the host's rate: refused, the store unchanged. *out: the model filed or kept.
 */
enum md_put_result md_store_put(struct md_store *self, const struct wb_model *msg, uint64_t now_ns,
				const struct md_model **out, char *err, size_t errlen);
struct md_pipeline *md_store_pipeline(struct md_store *self, const char *name);
/* Keep a path and reason for GET /models' errors (logged by the caller). */
void md_store_note_error(struct md_store *self, const char *path, const char *reason);

/* A model request (Kepler's ModelRequest). */
struct md_request {
	char **metrics;
	size_t nmetrics;
	char output[16];
	char source[32];
	int node_type; /* -1: any */
	bool weight;
	char trainer[64];
	struct md_filter filter;
	char pipeline[64];
	struct km_spec spec;
	bool loose_node_type;
};
void md_request_free(struct md_request *r);
/* Parse a POST /model body. 0, or -1 with err (the answer of a 400). */
int md_request_parse(const char *body, size_t len, struct md_request *r, char *err, size_t errlen);

/*
 * The best model for the request: over every pipeline (or the one named), the
 * models of a valid feature group and the request's node type (or the one its
 * machine spec resolves to; with loose_node_type, when there is none of that type,
 * those of the node types with the most cores), weight-capable when weight, that
 * pass the filter; the lowest mae wins, ties keep the first in group order then
 * name order. NULL with why (the answer of a 400).
 */
const struct md_model *md_select(const struct md_store *self, const struct md_request *r, char *why,
				 size_t whylen);
/* The weight=true answer: weight.json plus model_name, machine_spec and mae. New reference. */
json_t *md_weight_answer(const struct md_store *self, const struct md_model *m);

/* ---- archive.c: the weight=false answer, as Kepler's server zips a model ---- */
/*
 * The model as a zip archive in memory (*out malloc'd): every regular file of its
 * folder, byte for byte, at the folder's relative paths (links and special files
 * are left out); for a published archive, its entries as they are plus weight.json
 * from <name>.json beside it when it has none (as Kepler's server unpacks it).
 * 0, or -1 with err.
 */
int md_model_zip(const struct md_model *m, char **out, size_t *len, char *err, size_t errlen);
/* metadata.json of a published archive. New reference, or NULL with err. */
json_t *md_archive_metadata(const char *path, char *err, size_t errlen);

/* ---- api.c: the HTTP API on the shared server ---- */
#include "httpd.h"
#include "train.h"
struct api_counters {
	struct wb_httpd_counters http;
	uint64_t model_requests; /* POST /model parsed */
	uint64_t bad_requests;	 /* 4xx other than below: not JSON, wrong types, paths, methods */
	uint64_t too_large;	 /* bodies over max_body_bytes */
	uint64_t no_model;	 /* POST /model with nothing matching (400) */
	struct md_train_counters train; /* POST /train */
};
struct api;
/* Serve the store's models with the server options o (handler set here); POST /train takes
 * bodies up to max_train_body (0: no /train). NULL: logged. */
struct api *api_new(const struct wb_httpd_opts *o, zloop_t *loop, struct md_store *store,
		    size_t max_body, size_t max_train_body, struct api_counters *ctr);
uint16_t api_port(const struct api *a);
void api_destroy(struct api **self_p);

#endif
