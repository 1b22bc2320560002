/* Clocks for the bus (wall clock, ns since the Unix epoch) and for intervals. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * WB_NS_PER_SEC + (uint64_t)ts.tv_nsec;
}

uint64_t wb_now_ns(void)
{
	return clock_ns(CLOCK_REALTIME);
}

uint64_t wb_mono_ns(void)
{
	return clock_ns(CLOCK_MONOTONIC);
}

uint64_t wb_grid_next(uint64_t t_ns, uint64_t interval_ns)
{
	if (interval_ns == 0)
		return t_ns;
	return (t_ns / interval_ns + 1) * interval_ns;
}

int wb_sleep_until(uint64_t t_ns)
{
	struct timespec ts = {.tv_sec = (time_t)(t_ns / WB_NS_PER_SEC),
			      .tv_nsec = (long)(t_ns % WB_NS_PER_SEC)};
	int rc = clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &ts, NULL);
	return rc == 0 ? 0 : -1;
}

static const struct {
	const char *suffix;
	double ns;
} units[] = {{"ns", 1}, {"us", 1e3}, {"ms", 1e6}, {"s", 1e9}, {"m", 60e9}, {"h", 3600e9}};

int wb_parse_duration(const char *text, uint64_t *ns)
{
	char *end;
	/* Decimal as written: strtod would skip blanks and read 0x10 as 16 (and "inf"). */
	if (!(isdigit((unsigned char)text[0]) || text[0] == '.') || strpbrk(text, "xX"))
		return -1;
	errno = 0;
	double v = strtod(text, &end);
	if (end == text || errno || !isfinite(v) || v < 0)
		return -1;
	double mult = 1e9;
	if (*end) {
		mult = 0;
		for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
			if (strcmp(end, units[i].suffix) == 0)
				mult = units[i].ns;
		if (mult == 0)
			return -1;
	}
	double r = v * mult;
	if (r > 1.8e19)
		return -1;
	*ns = (uint64_t)llround(r);
	return 0;
}

void wb_format_duration(uint64_t ns, char *buf, unsigned size)
{
	for (int i = (int)(sizeof(units) / sizeof(units[0])) - 1; i >= 0; i--) {
		uint64_t u = (uint64_t)units[i].ns;
		if (ns >= u && ns % u == 0) {
			snprintf(buf, size, "%llu%s", (unsigned long long)(ns / u),
				 units[i].suffix);
			return;
		}
	}
	snprintf(buf, size, "%llus", 0ull);
}
