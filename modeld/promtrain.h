/* modeld's online trainer from Prometheus (promtrain.c). */
#ifndef WB_MODELD_PROMTRAIN_H
#define WB_MODELD_PROMTRAIN_H

#include <stdint.h>

#include "daemon.h"

struct md_store;

struct promtrain_opts {
	const char *url;			  /* Prometheus' base URL (Kepler's PROM_SERVER) */
	uint64_t interval_ns, window_ns, step_ns; /* train_interval, train_window, train_step */
	uint64_t timeout_ns;			  /* one query's */
	size_t max_bytes;			  /* one answer's */
};

/* Called after models were filed (the store changed). */
typedef void(promtrain_filed_fn)(void *arg);

struct promtrain;
/* Query and train every interval, the first round at once. NULL: logged. */
struct promtrain *promtrain_new(struct wb_daemon *d, struct md_store *store,
				const struct promtrain_opts *o, promtrain_filed_fn *filed,
				void *filed_arg);
void promtrain_destroy(struct promtrain **self_p);

#endif
