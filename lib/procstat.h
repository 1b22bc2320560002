/*
 * /proc/stat's node CPU line: the one parser and the one rule for "busy" that the
 * stages share (usaged publishes the totals, estimd splits energy by them, powerd's
 * fake source models power from them).
 */
#ifndef WB_PROCSTAT_H
#define WB_PROCSTAT_H

#include <stdint.h>

#include "codec.h"

/* Nanoseconds per USER_HZ tick, the unit of /proc/stat (sysconf(_SC_CLK_TCK)). */
uint64_t wb_procstat_ns_per_tick(void);
/* Parse the "cpu " line of /proc/stat (text, NUL-terminated) into ns. Returns 0 or -1. */
int wb_procstat_parse_cpu(const char *text, uint64_t ns_per_tick, struct wb_cpu_times *out);
/* Busy and total CPU time as Kepler >= 0.10 counts them: everything but idle and iowait is busy
 * (steal included). */
void wb_cpu_busy(const struct wb_cpu_times *c, uint64_t *busy_ns, uint64_t *total_ns);

#endif
