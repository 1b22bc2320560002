/*
 * /proc/stat's node CPU line (see procstat.h): parsed in one place, and "busy" counted by one
 * rule, Kepler >= 0.10's.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "procstat.h"

uint64_t wb_procstat_ns_per_tick(void)
{
	long hz = sysconf(_SC_CLK_TCK);
	return 1000000000ull / (uint64_t)(hz > 0 ? hz : 100);
}

int wb_procstat_parse_cpu(const char *text, uint64_t ns_per_tick, struct wb_cpu_times *out)
{
	unsigned long long v[8];
	const char *line = text;

	memset(out, 0, sizeof(*out));
	while (line && strncmp(line, "cpu ", 4) != 0) {
		line = strchr(line, '\n');
		if (line)
			line++;
	}
	if (!line)
		return -1;
	/* Kernels before 2.6.11 lack steal; treat missing trailing fields as 0, but need the first
	 * four. */
	memset(v, 0, sizeof(v));
	int got = sscanf(line + 4, "%llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
			 &v[3], &v[4], &v[5], &v[6], &v[7]);
	if (got < 4)
		return -1;
	out->user_ns = v[0] * ns_per_tick;
	out->nice_ns = v[1] * ns_per_tick;
	out->system_ns = v[2] * ns_per_tick;
	out->idle_ns = v[3] * ns_per_tick;
	out->iowait_ns = v[4] * ns_per_tick;
	out->irq_ns = v[5] * ns_per_tick;
	out->softirq_ns = v[6] * ns_per_tick;
	out->steal_ns = v[7] * ns_per_tick;
	return 0;
}

void wb_cpu_busy(const struct wb_cpu_times *c, uint64_t *busy_ns, uint64_t *total_ns)
{
	uint64_t busy =
	    c->user_ns + c->nice_ns + c->system_ns + c->irq_ns + c->softirq_ns + c->steal_ns;
	*busy_ns = busy;
	*total_ns = busy + c->idle_ns + c->iowait_ns;
}
