/* The wattbus command-line tool: one function per subcommand, grouped by file. */
#ifndef WB_CLI_H
#define WB_CLI_H

#include <stdbool.h>
#include <stdint.h>

/* tap.c */
int cmd_tap(int argc, char **argv);
/* record.c */
int cmd_record(int argc, char **argv);
int cmd_replay(int argc, char **argv);
/* pub.c */
int cmd_pub(int argc, char **argv);

/* keygen.c */
int cmd_keygen(int argc, char **argv);
/* doctor.c */
int cmd_doctor(int argc, char **argv);
/* top.c */
int cmd_top(int argc, char **argv);

/* main.c: shared helpers */
/*
 * Flag values, parsed whole by lib/config's parsers: on a bad one they print
 * "wattbus CMD: --OPT: 'TEXT' is not ..." and exit 2.
 */
/* A duration ("2s", "500ms"; a bare number is seconds). */
uint64_t cli_duration_ns(const char *cmd, const char *opt, const char *text);
/* An integer in [min, max]. */
long long cli_int(const char *cmd, const char *opt, const char *text, long long min, long long max);
/* A finite number above zero. */
double cli_positive(const char *cmd, const char *opt, const char *text);
/*
 * ZeroMQ waits without a word on an ipc:// endpoint where nothing listens (no
 * socket file, or one a stopped process left). True when one of a subscriber's
 * endpoints (comma-separated) is such a one, its path copied into path.
 */
bool cli_ipc_missing(const char *endpoints, char *path, size_t size);
/* Say that path is no socket: "yet" at start (waited_ns 0; only to a terminal), else after waiting that long. */
void cli_say_missing(const char *cmd, const char *path, uint64_t waited_ns);
/*
 * The ipc endpoint of a stage's socket (file "estimd.sock") in the runtime dir
 * of the running stages: $WATTBUS_RUNTIME_DIR when set, else run/ beside this
 * program (make run's build/run/), then the default runtime dir. Returns 0, or
 * -1 with the paths it tried in looked.
 */
int cli_find_socket(const char *file, char *ep, size_t size, char *looked, size_t looked_size);
/* True once SIGINT or SIGTERM arrived. */
bool cli_interrupted(void);

#endif
