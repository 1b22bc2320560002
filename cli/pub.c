/*
 * wattbus pub: read JSON lines from stdin and publish them as msgpack, so a
 * script can stand in for any stage. A line is {"topic": T, "msg": {...}} (what
 * tap prints) or a bare message map, whose topic is then KIND/HOST. Envelope
 * keys the line leaves out (v, src, epoch, seq) are stamped; keys it gives are
 * kept, so `wattbus pub | wattbus tap` round-trips exactly.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bus.h"
#include "cli.h"
#include "clock.h"
#include "json.h"
#include "log.h"

/* Envelope keys a line leaves out, stamped as wb_pub_send would: the publisher's src, epoch and
 * seq. */
static void stamp_missing(struct wb_pub *pub, const char *src, json_t *msg, const char *topic)
{
	const char *kind = json_string_value(json_object_get(msg, "kind"));
	enum wb_kind k = kind ? wb_kind_from_name(kind, strlen(kind)) : WB_KIND_NONE;
	if (k != WB_KIND_NONE && !json_object_get(msg, "v"))
		json_object_set_new(msg, "v", json_integer(wb_kinds[k].version));
	if (!json_object_get(msg, "src"))
		json_object_set_new(msg, "src", json_string(src));
	if (!json_object_get(msg, "epoch"))
		json_object_set_new(msg, "epoch", json_integer((json_int_t)wb_pub_epoch(pub)));
	uint64_t seq;
	if (!json_object_get(msg, "seq") && wb_pub_next_seq(pub, topic, &seq) == 0)
		json_object_set_new(msg, "seq", json_integer((json_int_t)seq));
}

struct pub_opts {
	bool raw;
	const char *src;
	uint64_t wait_ns, interval_ns;
	struct wb_sockopts so;
};
#define OFF(m) offsetof(struct pub_opts, m)
static const struct cli_flag pub_flags[] = {
    CLI_OPERAND("ENDPOINT", "where to publish (binds; a leading > connects instead)"),
    CLI_SWITCH("raw", 'r', OFF(raw),
	       "send lines as they are, without validation (for testing consumers)"),
    CLI_STR("src", 's', OFF(src), "wattbus-pub", "NAME", "src stamped on messages that have none"),
    CLI_DURATION("wait", 'w', OFF(wait_ns), "5s", 0, 0, "D",
		 "wait up to D for a subscriber before the first message"),
    CLI_DURATION("interval", 'i', OFF(interval_ns), NULL, 0, 0, "D", "pause D between messages"),
    CLI_CURVE_PUB(OFF(so)),
};
static const struct cli_verb pub_verb = {CLI_VERB("pub", pub_flags, struct pub_opts, 1, 1),
					 .synopsis = "[OPTIONS] ENDPOINT < lines.json"};

int cmd_pub(int argc, char **argv)
{
	struct pub_opts o;
	int first, rc = cli_parse(&pub_verb, argc, argv, &o, &first);
	if (rc >= 0)
		return rc;
	struct wb_pub *pub = wb_pub_new(argv[first], o.src, "", &o.so);
	if (!pub)
		return 1;
	bool waited = false;

	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	long lineno = 0, sent = 0, bad = 0;
	while ((n = getline(&line, &cap, stdin)) > 0 && !cli_interrupted()) {
		lineno++;
		if (n <= 1 || line[0] == '#')
			continue;
		json_error_t jerr;
		json_t *j = json_loads(line, 0, &jerr);
		if (!j || !json_is_object(j)) {
			log_warnx("stdin:%ld: %s", lineno, j ? "not a JSON object" : jerr.text);
			json_decref(j);
			bad++;
			continue;
		}
		json_t *msg = json_object_get(j, "msg");
		const char *topic_in = json_string_value(json_object_get(j, "topic"));
		if (!msg)
			msg = j;
		char topic[WB_TOPIC_MAX];
		if (topic_in) {
			snprintf(topic, sizeof(topic), "%s", topic_in);
		} else {
			const char *kind = json_string_value(json_object_get(msg, "kind"));
			const char *host = json_string_value(json_object_get(msg, "host"));
			snprintf(topic, sizeof(topic), "%s/%s", kind ? kind : "?",
				 host ? host : "?");
		}
		if (!o.raw && json_is_object(msg))
			stamp_missing(pub, o.src, msg, topic);
		char *buf = NULL;
		size_t len;
		struct wb_err err = {0};
		struct wb_msg decoded;
		if (wb_json_to_msgpack(msg, &buf, &len, &err) < 0 ||
		    (!o.raw && wb_frame_check(topic, buf, len, &decoded, &err) < 0)) {
			log_warnx("stdin:%ld: not sent (%s): %s", lineno,
				  wb_reason_name(err.reason), err.msg);
			bad++;
		} else {
			if (!o.raw)
				wb_msg_clear(&decoded);
			if (!waited) {
				waited = true;
				if (!wb_pub_wait_subscriber(pub, (int)(o.wait_ns / WB_NS_PER_MS)))
					log_warnx("no subscriber after %llu ms; publishing anyway",
						  (unsigned long long)(o.wait_ns / WB_NS_PER_MS));
			}
			if (wb_pub_send_raw(pub, topic, buf, len) == 0)
				sent++;
			if (o.interval_ns) {
				struct timespec ts = {(time_t)(o.interval_ns / WB_NS_PER_SEC),
						      (long)(o.interval_ns % WB_NS_PER_SEC)};
				nanosleep(&ts, NULL);
			}
		}
		free(buf);
		json_decref(j);
	}
	free(line);
	wb_pub_destroy(&pub);
	if (bad)
		fprintf(stderr, "wattbus pub: %ld sent, %ld lines rejected\n", sent, bad);
	return bad ? 1 : 0;
}
