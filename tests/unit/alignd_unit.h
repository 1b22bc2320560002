/*
 * What tests/unit/test_alignd_*.c share: an engine's settings scaled by one size,
 * and the check that an emitted slot encodes as the bus would publish it.
 * Include after unit.h and alignd.h.
 */
#ifndef WB_ALIGND_UNIT_H
#define WB_ALIGND_UNIT_H

#define S 1000000000ull
#define MS 1000000ull

/* Hosts, processes (a tenth of them for cgroups and executables), pending slots, samples. */
static inline struct align_conf alignd_unit_conf(size_t hosts, size_t procs, size_t pending,
						 size_t samples)
{
	return (struct align_conf){.host_timeout_ns = 60 * S,
				   .max_hosts = hosts,
				   .max_procs = procs,
				   .max_cgroups = procs / 10,
				   .max_exes = procs / 10,
				   .max_pending = pending,
				   .max_samples = samples};
}

/* The message must encode (the schema bounds hold), with the envelope the bus fills in. */
static inline void alignd_unit_check_encodes(struct wb_msg *m)
{
	char *buf;
	size_t len;
	struct wb_err err;
	m->env.v = wb_kinds[m->kind].version;
	snprintf(m->env.kind, sizeof(m->env.kind), "%s", wb_kinds[m->kind].name);
	snprintf(m->env.src, sizeof(m->env.src), "alignd");
	m->env.epoch = 1;
	CHECK(wb_encode(m, &buf, &len, &err) == 0);
	free(buf);
}

#endif
