/*
 * What tests/unit/test_estimd_*.c share: the settings the estimator runs with in
 * them. Include after unit.h and estimd.h.
 */
#ifndef WB_ESTIMD_UNIT_H
#define WB_ESTIMD_UNIT_H

/* Auto mode, CPU time shares of the node's active power, idle by ratio over 50 slots. */
static inline struct est_conf estimd_unit_conf(void)
{
	struct est_conf c = {0};
	c.mode = EST_AUTO;
	c.by = EST_BY_CPU;
	c.base = EST_BASE_NODE;
	c.idle.method = IDLE_RATIO;
	c.idle.window = 50;
	c.idle.min_slots = 10;
	c.idle.min_spread = 0.05;
	c.train = false;
	return c;
}

#endif
