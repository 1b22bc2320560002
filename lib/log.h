/*
 * Leveled logging to stderr, one line per event. Under journald (JOURNAL_STREAM
 * set) lines carry a <N> priority prefix. Anything an outside input can trigger
 * goes through a wb_ratelimit.
 */
#ifndef WB_LOG_H
#define WB_LOG_H

#include <stdbool.h>
#include <stdint.h>

enum { WB_LOG_ERR = 3, WB_LOG_WARN = 4, WB_LOG_INFO = 6, WB_LOG_DEBUG = 7 };

void log_init(const char *prog, int level);
void log_set_level(int level);
int log_get_level(void);
/* "error", "warning", "info", "debug" -> level, or -1. */
int log_level_parse(const char *name);

#define WB_PRINTF(a, b) __attribute__((format(printf, a, b)))
void log_msg(int level, const char *fmt, ...) WB_PRINTF(2, 3);
/* log_warn and log_err append strerror(errno); the x forms do not. */
void log_err(const char *fmt, ...) WB_PRINTF(1, 2);
void log_errx(const char *fmt, ...) WB_PRINTF(1, 2);
void log_warn(const char *fmt, ...) WB_PRINTF(1, 2);
void log_warnx(const char *fmt, ...) WB_PRINTF(1, 2);
void log_info(const char *fmt, ...) WB_PRINTF(1, 2);
void log_debug(const char *fmt, ...) WB_PRINTF(1, 2);
void fatalx(int code, const char *fmt, ...) WB_PRINTF(2, 3) __attribute__((noreturn));

/* At most burst lines per interval; the rest are counted and reported once the window passes. */
struct wb_ratelimit {
	uint64_t interval_ns;
	uint32_t burst;
	uint64_t window_ns;
	uint32_t printed;
	uint64_t suppressed;
};
#define WB_RATELIMIT_INIT                                                                          \
	{                                                                                          \
		.interval_ns = 10000000000ull, .burst = 10                                         \
	}

void log_rl(struct wb_ratelimit *rl, int level, const char *fmt, ...) WB_PRINTF(3, 4);

#endif
