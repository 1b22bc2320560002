/*
 * wattbus-operator: one WattBus resource into the objects of deploy/kubernetes,
 * and the DaemonSet's state back into the resource's status. render.c and
 * status.c are pure (JSON in, JSON out); kube.c does the I/O.
 */
#ifndef WB_OPERATOR_H
#define WB_OPERATOR_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

/* The field manager of every server-side apply, and the value of the managed-by label. */
#define OP_FIELD_MANAGER "wattbus-operator"
/* The pod template's annotation that rolls the pods when their configuration changes. */
#define OP_HASH_ANNOTATION "wattbus.io/config-hash"
/* The one instance reconciled (the CRD's validation rule says the same). */
#define OP_NAME "wattbus"

/* ---- render.c ---- */

/* The bundle embedded at build time (operator/embed.py): deploy/kubernetes and the CRD's schema. */
extern const char wb_op_bundle[];

struct op_render {
	json_t *objects;      /* array of the objects to apply, in apply order */
	char config_hash[17]; /* hex, also on the pod template */
	/* Set when the spec asks for what the operator does not do (external model storage):
	 * the rest is still rendered; Reconciled says why the model server is not. */
	char refused_reason[64];
	char refused[256];
	bool model_server; /* modeld's objects are among them */
};

/*
 * Render the objects for WATTBUS (a WattBus object; NULL: the default spec, no
 * owner). USER_ENV: the data of the ConfigMap spec.config names, as observed
 * (NULL: none), hashed with wattbus.conf so that a change of either rolls the
 * pods. Objects carry an owner reference to WATTBUS when it has a uid (the
 * Namespace and the model store's claim do not: deleting the resource keeps
 * them). 0, or -1 with err naming the field that is wrong; out is then empty.
 */
int op_render(const json_t *wattbus, const json_t *user_env, struct op_render *out, char *err,
	      size_t errlen);
void op_render_clear(struct op_render *r);
/* The spec with the CRD's defaults filled in (new reference), or NULL with err. */
json_t *op_spec(const json_t *wattbus, char *err, size_t errlen);
/*
 * wattbus.conf TEXT with KEY of [SECTION] set to VALUE: the line replaced where it
 * is, else added at the end of the section (an empty VALUE for an absent key adds
 * nothing: empty is every such key's default). malloc'd, or NULL when SECTION is absent.
 */
char *op_conf_set(const char *text, const char *section, const char *key, const char *value);

/* ---- status.c ---- */

enum op_cond_status { OP_TRUE, OP_FALSE, OP_UNKNOWN };

struct op_cond {
	enum op_cond_status status;
	char reason[48];
	char message[256];
};

/* Kepler operator's Available rule on a DaemonSet object (NULL: not found). */
void op_available(const json_t *daemonset, struct op_cond *c);
/* modeld's Deployment (NULL: not found) when the model server is wanted. */
void op_model_available(bool wanted, const char *refused, const json_t *deployment,
			struct op_cond *c);
/*
 * The status of WATTBUS: the DaemonSet's counts, observedGeneration and the
 * conditions Reconciled (RECONCILE_ERR NULL: success; REFUSED_REASON set: what
 * was not done; NOTE, when not NULL, follows the success message), Available and
 * ModelServerAvailable. A condition that keeps its
 * status keeps its lastTransitionTime from the old status; NOW (RFC 3339) is
 * the time of the others. New reference.
 */
json_t *op_status(const json_t *wattbus, const json_t *daemonset, const json_t *modeld,
		  bool model_wanted, const char *refused_reason, const char *refused,
		  const char *reconcile_err, const char *note, const char *now);
const char *op_cond_status_str(enum op_cond_status s);

#endif
