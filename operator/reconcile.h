/* One reconcile of the WattBus (reconcile.c), and where the watches go on from. */
#ifndef WB_OPERATOR_RECONCILE_H
#define WB_OPERATOR_RECONCILE_H

#include "kube.h"

struct op_watch {
	char rv_wattbus[64], rv_daemonsets[64], rv_deployments[64], rv_configmaps[64];
};

/* 0 when the state was read and the status written (an apply refused is in the status), -1 with
 * err when the API server could not be asked: the caller retries. */
int op_reconcile(const struct kube *k, struct op_watch *w, char *err, size_t errlen);

#endif
