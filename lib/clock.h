/* Time helpers: wall-clock ns for the bus, monotonic ns for intervals, durations. */
#ifndef WB_CLOCK_H
#define WB_CLOCK_H

#include <stdint.h>

#define WB_NS_PER_SEC 1000000000ull
#define WB_NS_PER_MS 1000000ull

uint64_t wb_now_ns(void);  /* CLOCK_REALTIME */
uint64_t wb_mono_ns(void); /* CLOCK_MONOTONIC */
/* Smallest multiple of interval_ns strictly after t_ns (the wall-clock sampling grid). */
uint64_t wb_grid_next(uint64_t t_ns, uint64_t interval_ns);
/* Sleep until the wall clock reads t_ns (absolute); returns 0, or -1 if interrupted. */
int wb_sleep_until(uint64_t t_ns);
/* "1s", "250ms", "100us", "2m", "1h", "1.5s"; a bare number is seconds. Returns 0 or -1. */
int wb_parse_duration(const char *text, uint64_t *ns);
/* Format ns as the shortest exact duration text ("1s", "250ms"). */
void wb_format_duration(uint64_t ns, char *buf, unsigned size);

#endif
