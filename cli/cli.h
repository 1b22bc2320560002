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
/* Parse a positive number of milliseconds or a duration ("2s"); exits 2 on error. */
uint64_t cli_duration_ns(const char *cmd, const char *opt, const char *text);
/* True once SIGINT or SIGTERM arrived. */
bool cli_interrupted(void);

#endif
