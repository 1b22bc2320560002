/*
 * Logging to stderr, one line per event: "prog: level: message". When stderr is
 * the journal (JOURNAL_STREAM), a <N> prefix gives journald the priority.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"
#include "vis.h"

static const char *log_prog = "wattbus";
static int log_level = WB_LOG_INFO;
static int log_journal = -1;

static int stderr_is_journal(void)
{
	const char *js = getenv("JOURNAL_STREAM");
	struct stat st;
	unsigned long dev, ino;
	if (!js || sscanf(js, "%lu:%lu", &dev, &ino) != 2 || fstat(STDERR_FILENO, &st) < 0)
		return 0;
	return st.st_dev == dev && st.st_ino == ino;
}

void log_init(const char *prog, int level)
{
	log_prog = prog;
	log_level = level;
	log_journal = stderr_is_journal();
}

void log_set_level(int level)
{
	log_level = level;
}

int log_get_level(void)
{
	return log_level;
}

int log_level_parse(const char *name)
{
	static const struct {
		const char *name;
		int level;
	} names[] = {{"error", WB_LOG_ERR},
		     {"warning", WB_LOG_WARN},
		     {"warn", WB_LOG_WARN},
		     {"info", WB_LOG_INFO},
		     {"debug", WB_LOG_DEBUG}};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(name, names[i].name) == 0)
			return names[i].level;
	return -1;
}

static const char *level_word(int level)
{
	switch (level) {
	case WB_LOG_ERR:
		return "error";
	case WB_LOG_WARN:
		return "warning";
	case WB_LOG_INFO:
		return "info";
	default:
		return "debug";
	}
}

static void vlog(int level, int errnum, const char *fmt, va_list ap)
{
	if (level > log_level)
		return;
	if (log_journal < 0)
		log_journal = stderr_is_journal();
	char line[1024];
	int n = vsnprintf(line, sizeof(line), fmt, ap);
	if (n < 0)
		return;
	if (errnum && (size_t)n < sizeof(line))
		snprintf(line + n, sizeof(line) - (size_t)n, ": %s", strerror(errnum));
	/* Names in a message come from outside (the bus, a kubelet, a BMC, a file): the whole
	 * line is escaped, so none can end it early, forge the next one or drive a terminal. No
	 * format string holds a control character, so only what came from outside changes. */
	char vis[4 * sizeof(line)];
	wb_vis(vis, sizeof(vis), line, strnlen(line, sizeof(line)), 0);
	if (log_journal)
		fprintf(stderr, "<%d>%s: %s\n", level, level_word(level), vis);
	else
		fprintf(stderr, "%s: %s: %s\n", log_prog, level_word(level), vis);
}

#define LOG_FN(name, level, with_errno)                                                            \
	void name(const char *fmt, ...)                                                            \
	{                                                                                          \
		int saved = errno;                                                                 \
		va_list ap;                                                                        \
		va_start(ap, fmt);                                                                 \
		vlog(level, with_errno ? saved : 0, fmt, ap);                                      \
		va_end(ap);                                                                        \
		errno = saved;                                                                     \
	}

LOG_FN(log_err, WB_LOG_ERR, 1)
LOG_FN(log_errx, WB_LOG_ERR, 0)
LOG_FN(log_warn, WB_LOG_WARN, 1)
LOG_FN(log_warnx, WB_LOG_WARN, 0)
LOG_FN(log_info, WB_LOG_INFO, 0)
LOG_FN(log_debug, WB_LOG_DEBUG, 0)

void log_msg(int level, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vlog(level, 0, fmt, ap);
	va_end(ap);
}

void fatalx(int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vlog(WB_LOG_ERR, 0, fmt, ap);
	va_end(ap);
	exit(code);
}

void log_rl(struct wb_ratelimit *rl, int level, const char *fmt, ...)
{
	if (level > log_level)
		return;
	uint64_t now = wb_mono_ns();
	if (now - rl->window_ns >= rl->interval_ns || rl->window_ns == 0) {
		if (rl->suppressed)
			log_msg(level, "%llu similar messages suppressed in the last %llus",
				(unsigned long long)rl->suppressed,
				(unsigned long long)(rl->interval_ns / 1000000000ull));
		rl->window_ns = now;
		rl->printed = 0;
		rl->suppressed = 0;
	}
	if (rl->printed >= rl->burst) {
		rl->suppressed++;
		return;
	}
	rl->printed++;
	va_list ap;
	va_start(ap, fmt);
	vlog(level, 0, fmt, ap);
	va_end(ap);
}
