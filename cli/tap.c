/*
 * wattbus tap: subscribe and print each message as one JSON line,
 * {"topic": T, "msg": {...}}. With --check every frame goes through the
 * stages' own validation; a rejected one prints {"topic", "rejected", "error"}
 * and tap carries on.
 */
#include <limits.h>
#include <stddef.h>
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

struct tap_opts {
	bool check, with_time;
	int64_t count; /* 0: no limit */
	uint64_t timeout_ns;
	struct wb_sockopts so;
};
#define OFF(m) offsetof(struct tap_opts, m)
static const struct cli_flag tap_flags[] = {
    CLI_OPERAND("ENDPOINT", "publisher to connect to (a leading @ binds instead)"),
    CLI_OPERAND("PREFIX", "topic prefixes to subscribe to (default: everything)"),
    CLI_SWITCH("check", 'c', OFF(check),
	       "validate every frame as the stages do; print rejections with their reason"),
    CLI_INT("count", 'n', OFF(count), NULL, 1, INT64_MAX, "N", "exit after N lines"),
    CLI_DURATION("timeout", 't', OFF(timeout_ns), NULL, 0, 0, "D",
		 "exit after this long (e.g. 10s)"),
    CLI_SWITCH("time", 'T', OFF(with_time), "add the receive time (recv_ns) to every line"),
    CLI_CURVE_SUB(OFF(so)),
};
static const struct cli_verb tap_verb = {CLI_VERB("tap", tap_flags, struct tap_opts, 1, -1),
					 .synopsis = "[OPTIONS] ENDPOINT [PREFIX...]"};

int cmd_tap(int argc, char **argv)
{
	struct tap_opts o;
	int first, rc = cli_parse(&tap_verb, argc, argv, &o, &first);
	if (rc >= 0)
		return rc;
	const char *ep = argv[first];
	struct wb_sub *sub = cli_sub_open(ep, (const char *const *)argv + first + 1,
					  (size_t)(argc - first - 1), &o.so);
	if (!sub)
		return 1;

	char missing[PATH_MAX];
	bool absent = cli_ipc_missing(ep, missing, sizeof(missing));
	if (absent)
		cli_say_missing("tap", missing, 0);
	uint64_t end = o.timeout_ns ? wb_mono_ns() + o.timeout_ns : 0;
	int64_t printed = 0;
	rc = 0;
	while (!cli_interrupted() && (!o.count || printed < o.count)) {
		long wait_ms = 200;
		if (absent)
			absent = cli_ipc_missing(ep, missing, sizeof(missing));
		if (end) {
			uint64_t now = wb_mono_ns();
			if (now >= end) {
				if (absent) {
					cli_say_missing("tap", missing, o.timeout_ns);
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
		if (o.with_time)
			json_object_set_new(line, "recv_ns", json_integer((json_int_t)recv_ns));
		struct wb_err err = {0};
		struct wb_msg msg;
		int bad = 0;
		if (nframes != 2) {
			err.reason = WB_R_TOPIC;
			snprintf(err.msg, sizeof(err.msg), "expected 2 frames (topic, map), got %d",
				 nframes);
			bad = 1;
		} else if (o.check && wb_frame_check(topic, body, len, &msg, &err) < 0) {
			bad = 1;
		} else if (o.check) {
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
