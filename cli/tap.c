/*
 * wattbus tap: subscribe and print each message as one JSON line,
 * {"topic": T, "msg": {...}}. With --check every frame goes through the
 * stages' own validation; a rejected one prints {"topic", "rejected", "error"}
 * and tap carries on.
 */
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bus.h"
#include "cli.h"
#include "clock.h"
#include "json.h"
#include "log.h"

static void print_line(json_t *line)
{
	char *s = json_dumps(line, JSON_COMPACT | JSON_ENSURE_ASCII);
	if (s) {
		puts(s);
		fflush(stdout);
		free(s);
	}
	json_decref(line);
}

static void tap_usage(FILE *out)
{
	fprintf(
	    out,
	    "usage: wattbus tap [--check] [--count N] [--timeout DURATION] [--time] [--curve-cert FILE --curve-peer FILE]\n"
	    "                   ENDPOINT [PREFIX...]\n"
	    "  ENDPOINT       publisher to connect to (a leading @ binds instead)\n"
	    "  PREFIX         topic prefixes to subscribe to (default: everything)\n"
	    "  -c, --check    validate every frame as the stages do; print rejections with their reason\n"
	    "  -n, --count N  exit after N lines\n"
	    "  -t, --timeout  exit after this long (e.g. 10s)\n"
	    "  -T, --time     add the receive time (recv_ns) to every line\n"
	    "  --curve-cert FILE  our CURVE certificate (FILE_secret beside it), for tcp:// endpoints\n"
	    "  --curve-peer FILE  the publisher's public certificate\n");
}

int cmd_tap(int argc, char **argv)
{
	static const struct option opts[] = {{"check", no_argument, NULL, 'c'},
					     {"count", required_argument, NULL, 'n'},
					     {"timeout", required_argument, NULL, 't'},
					     {"time", no_argument, NULL, 'T'},
					     {"curve-cert", required_argument, NULL, 'C'},
					     {"curve-peer", required_argument, NULL, 'P'},
					     {"help", no_argument, NULL, 'h'},
					     {NULL, 0, NULL, 0}};
	struct wb_sockopts so = {0};
	bool check = false, with_time = false;
	long long count = -1;
	uint64_t timeout_ns = 0;
	int c;
	while ((c = getopt_long(argc, argv, "cn:t:Th", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			check = true;
			break;
		case 'n':
			count = cli_int("tap", "--count", optarg, 1, LLONG_MAX);
			break;
		case 't':
			timeout_ns = cli_duration_ns("tap", "--timeout", optarg);
			break;
		case 'T':
			with_time = true;
			break;
		case 'C':
			so.curve_cert = optarg;
			break;
		case 'P':
			so.curve_peer = optarg;
			break;
		case 'h':
			tap_usage(stdout);
			return 0;
		default:
			tap_usage(stderr);
			return 2;
		}
	}
	if (optind >= argc) {
		tap_usage(stderr);
		return 2;
	}
	struct wb_sub *sub = wb_sub_new(&so);
	if (!sub || wb_sub_connect(sub, argv[optind]) < 0)
		return 1;
	if (optind + 1 >= argc)
		wb_sub_subscribe(sub, "");
	for (int i = optind + 1; i < argc; i++)
		wb_sub_subscribe(sub, argv[i]);

	char missing[PATH_MAX];
	bool absent = cli_ipc_missing(argv[optind], missing, sizeof(missing));
	if (absent)
		cli_say_missing("tap", missing, 0);
	uint64_t end = timeout_ns ? wb_mono_ns() + timeout_ns : 0;
	long long printed = 0;
	int rc = 0;
	while (!cli_interrupted() && (count < 0 || printed < count)) {
		long wait_ms = 200;
		if (absent)
			absent = cli_ipc_missing(argv[optind], missing, sizeof(missing));
		if (end) {
			uint64_t now = wb_mono_ns();
			if (now >= end) {
				if (absent) {
					cli_say_missing("tap", missing, timeout_ns);
					rc = 1;
				}
				break;
			}
			if ((end - now) / WB_NS_PER_MS < (uint64_t)wait_ms)
				wait_ms = (long)((end - now) / WB_NS_PER_MS) + 1;
		}
		if (!wb_sub_wait(sub, wait_ms))
			continue;
		char *topic, *body;
		size_t len;
		int nframes;
		if (wb_sub_recv_raw(sub, &topic, &body, &len, &nframes) < 0)
			continue;
		uint64_t recv_ns = wb_now_ns();
		json_t *line = json_object();
		json_t *jt = json_string(topic);
		json_object_set_new(line, "topic", jt ? jt : json_string("(topic is not UTF-8)"));
		if (with_time)
			json_object_set_new(line, "recv_ns", json_integer((json_int_t)recv_ns));
		struct wb_err err = {0};
		struct wb_msg msg;
		int bad = 0;
		if (nframes != 2) {
			err.reason = WB_R_TOPIC;
			snprintf(err.msg, sizeof(err.msg), "expected 2 frames (topic, map), got %d",
				 nframes);
			bad = 1;
		} else if (check && wb_frame_check(topic, body, len, &msg, &err) < 0) {
			bad = 1;
		} else if (check) {
			wb_msg_clear(&msg);
		}
		json_t *m = bad ? NULL : wb_msgpack_to_json(body, len, &err);
		if (m) {
			json_object_set_new(line, "msg", m);
		} else {
			json_object_set_new(line, "rejected",
					    json_string(wb_reason_name(err.reason)));
			json_object_set_new(line, "error", json_string(err.msg));
		}
		print_line(line);
		printed++;
		free(topic);
		free(body);
	}
	wb_sub_destroy(&sub);
	return rc;
}
