/*
 * wattbus: the user's tool for the bus. Subcommands tap, record, replay and pub
 * let a shell pipeline watch, save, replay or stand in for any stage.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <czmq.h>

#include "cli.h"
#include "clock.h"
#include "config.h"
#include "log.h"

static const struct {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *summary;
} commands[] = {
	{"tap", cmd_tap, "ENDPOINT [PREFIX...]   print every message as one JSON line (--check validates)"},
	{"record", cmd_record, "ENDPOINT FILE [PREFIX...]   store messages with their receive times"},
	{"replay", cmd_replay, "FILE ENDPOINT   publish recorded messages again with their spacing"},
	{"pub", cmd_pub, "ENDPOINT   publish JSON lines from stdin as msgpack messages"},
	{"keygen", cmd_keygen, "NAME   make a CURVE certificate pair (NAME, NAME_secret) for tcp:// endpoints"},
	{"doctor", cmd_doctor, "   what this machine offers (RAPL, MSR, hwmon, BPF, perf, cgroups) and each stage's mode"},
	{"top", cmd_top, "[ENDPOINT]   live watts per zone, process, container and pod from estimd (--plain for scripts)"},
};

static void usage(FILE *out)
{
	fprintf(out, "usage: wattbus COMMAND [OPTIONS] ARGS\n\ncommands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(out, "  %-7s %s\n", commands[i].name, commands[i].summary);
	fprintf(out, "\n`wattbus COMMAND --help` for a command's options; see wattbus(1).\n");
}

uint64_t cli_duration_ns(const char *cmd, const char *opt, const char *text)
{
	uint64_t ns;
	if (wb_parse_duration(text, &ns) < 0) {
		fprintf(stderr, "wattbus %s: %s: '%s' is not a duration (e.g. 500ms, 2s)\n", cmd, opt, text);
		exit(2);
	}
	return ns;
}

long long cli_int(const char *cmd, const char *opt, const char *text, long long min, long long max)
{
	int64_t v;
	if (wb_parse_int(text, &v) < 0) {
		fprintf(stderr, "wattbus %s: %s: '%s' is not an integer\n", cmd, opt, text);
		exit(2);
	}
	if (v < min || v > max) {
		if (max == LLONG_MAX)
			fprintf(stderr, "wattbus %s: %s: '%s' is below %lld\n", cmd, opt, text, min);
		else
			fprintf(stderr, "wattbus %s: %s: '%s' is outside [%lld, %lld]\n", cmd, opt, text, min, max);
		exit(2);
	}
	return v;
}

double cli_positive(const char *cmd, const char *opt, const char *text)
{
	double v;
	if (wb_parse_double(text, &v) < 0 || !(v > 0)) {
		fprintf(stderr, "wattbus %s: %s: '%s' is not a number above 0\n", cmd, opt, text);
		exit(2);
	}
	return v;
}

bool cli_interrupted(void)
{
	return zsys_interrupted != 0;
}

int main(int argc, char **argv)
{
	log_init("wattbus", WB_LOG_INFO);
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "-V") || !strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
		printf("wattbus %s\n", WB_VERSION);
		return 0;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(argv[1], commands[i].name)) {
			char prog[32];
			snprintf(prog, sizeof(prog), "wattbus %s", commands[i].name);
			log_init(strdup(prog), WB_LOG_INFO);
			zsys_set_logstream(stderr);
			return commands[i].fn(argc - 1, argv + 1);
		}
	fprintf(stderr, "wattbus: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
