/*
 * wattbus record and replay. A recording is a msgpack stream (docs/RECORDING.md):
 * a header map {"format": "wattbus-record", "version": 1, "endpoint", "start_ns"}
 * then one array [recv_ns, topic, body] per message, body being the map's bytes
 * as received (bin), so a replay sends exactly what was on the bus.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <msgpack.h>

#include "bus.h"
#include "cli.h"
#include "clock.h"
#include "log.h"

#define RECORD_FORMAT "wattbus-record"
#define RECORD_VERSION 1

static void pack_cstr(msgpack_packer *pk, const char *s)
{
	size_t n = strlen(s);
	msgpack_pack_str(pk, n);
	msgpack_pack_str_body(pk, s, n);
}

static int file_write(void *data, const char *buf, size_t len)
{
	return fwrite(buf, 1, len, data) == len ? 0 : -1;
}

struct record_opts {
	int64_t count; /* 0: no limit */
	uint64_t duration_ns;
};
static const struct cli_flag record_flags[] = {
    CLI_OPERAND("ENDPOINT", "publisher to connect to"),
    CLI_OPERAND("FILE", "the recording (made mode 0600)"),
    CLI_OPERAND("PREFIX", "topic prefixes to record (default: everything)"),
    CLI_INT("count", 'n', offsetof(struct record_opts, count), NULL, 1, INT64_MAX, "N",
	    "stop after N messages"),
    CLI_DURATION("duration", 'd', offsetof(struct record_opts, duration_ns), NULL, 0, 0, "D",
		 "stop after D (e.g. 60s); otherwise at SIGINT/SIGTERM"),
};
static const struct cli_verb record_verb = {
    CLI_VERB("record", record_flags, struct record_opts, 2, -1),
    .synopsis = "[OPTIONS] ENDPOINT FILE [PREFIX...]"};

int cmd_record(int argc, char **argv)
{
	struct record_opts o;
	int first, rc = cli_parse(&record_verb, argc, argv, &o, &first);
	if (rc >= 0)
		return rc;
	const char *endpoint = argv[first], *path = argv[first + 1];
	/* 0600: a recording holds the meter readings, a side channel (docs/SECURITY.md). */
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	struct stat sb;
	if (fd >= 0 && fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_uid == geteuid() &&
	    (sb.st_mode & 077) && fchmod(fd, 0600) < 0)
		log_warn("%s: cannot make it mode 0600", path);
	FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
	if (!f) {
		log_errx("%s: cannot create: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return 1;
	}
	struct wb_sub *sub = cli_sub_open(endpoint, (const char *const *)argv + first + 2,
					  (size_t)(argc - first - 2), NULL);
	if (!sub) {
		fclose(f);
		return 1;
	}

	msgpack_packer pk;
	msgpack_packer_init(&pk, f, file_write);
	msgpack_pack_map(&pk, 4);
	pack_cstr(&pk, "format");
	pack_cstr(&pk, RECORD_FORMAT);
	pack_cstr(&pk, "version");
	msgpack_pack_uint32(&pk, RECORD_VERSION);
	pack_cstr(&pk, "endpoint");
	pack_cstr(&pk, endpoint);
	pack_cstr(&pk, "start_ns");
	msgpack_pack_uint64(&pk, wb_now_ns());
	fflush(f);

	char missing[PATH_MAX];
	bool absent = cli_ipc_missing(endpoint, missing, sizeof(missing));
	if (absent)
		cli_say_missing("record", missing, 0);
	uint64_t end = o.duration_ns ? wb_mono_ns() + o.duration_ns : 0;
	long long n = 0;
	rc = 0;
	while (!cli_interrupted() && (!o.count || n < o.count)) {
		if (absent)
			absent = cli_ipc_missing(endpoint, missing, sizeof(missing));
		if (end && wb_mono_ns() >= end) {
			if (absent) {
				cli_say_missing("record", missing, o.duration_ns);
				rc = 1;
			}
			break;
		}
		if (!wb_sub_wait(sub, 100))
			continue;
		char *topic, *body;
		size_t len;
		int nframes;
		if (wb_sub_recv_raw(sub, &topic, &body, &len, &nframes) < 0)
			continue;
		msgpack_pack_array(&pk, 3);
		msgpack_pack_uint64(&pk, wb_now_ns());
		pack_cstr(&pk, topic);
		msgpack_pack_bin(&pk, len);
		msgpack_pack_bin_body(&pk, body, len);
		free(topic);
		free(body);
		/* Flush per message: a recording cut by a crash keeps all but the last. */
		if (fflush(f) != 0) {
			log_errx("%s: write failed: %s", path, strerror(errno));
			rc = 1;
			break;
		}
		n++;
	}
	if (fclose(f) != 0 && rc == 0) {
		log_errx("%s: write failed: %s", path, strerror(errno));
		rc = 1;
	}
	wb_sub_destroy(&sub);
	fprintf(stderr, "wattbus record: %lld messages written to %s\n", n, path);
	return rc;
}

/* ---- replay ---- */

struct reader {
	FILE *f;
	const char *path;
	msgpack_unpacker up;
	msgpack_unpacked res;
	long index;
};

/* Next object of the stream: 1 got one, 0 end of file, -1 error (logged). */
static int reader_next(struct reader *r)
{
	for (;;) {
		msgpack_unpack_return ret = msgpack_unpacker_next(&r->up, &r->res);
		if (ret == MSGPACK_UNPACK_SUCCESS) {
			r->index++;
			return 1;
		}
		if (ret != MSGPACK_UNPACK_CONTINUE) {
			log_errx("%s: record %ld: not msgpack", r->path, r->index);
			return -1;
		}
		if (!msgpack_unpacker_reserve_buffer(&r->up, 65536)) {
			log_errx("%s: out of memory", r->path);
			return -1;
		}
		size_t n = fread(msgpack_unpacker_buffer(&r->up), 1,
				 msgpack_unpacker_buffer_capacity(&r->up), r->f);
		if (n == 0) {
			if (msgpack_unpacker_message_size(&r->up) >
			    msgpack_unpacker_parsed_size(&r->up))
				log_warnx(
				    "%s: record %ld is cut short (the recording was interrupted); stopping there",
				    r->path, r->index);
			return 0;
		}
		msgpack_unpacker_buffer_consumed(&r->up, n);
	}
}

static bool str_is(const msgpack_object *o, const char *s)
{
	return o->type == MSGPACK_OBJECT_STR && o->via.str.size == strlen(s) &&
	       memcmp(o->via.str.ptr, s, o->via.str.size) == 0;
}

static int check_header(struct reader *r)
{
	const msgpack_object *h = &r->res.data;
	bool format = false, version = false;
	if (h->type == MSGPACK_OBJECT_MAP)
		for (uint32_t i = 0; i < h->via.map.size; i++) {
			const msgpack_object_kv *kv = &h->via.map.ptr[i];
			if (str_is(&kv->key, "format"))
				format = str_is(&kv->val, RECORD_FORMAT);
			if (str_is(&kv->key, "version"))
				version = kv->val.type == MSGPACK_OBJECT_POSITIVE_INTEGER &&
					  kv->val.via.u64 == RECORD_VERSION;
		}
	if (!format || !version) {
		log_errx("%s: not a wattbus recording (version %d)", r->path, RECORD_VERSION);
		return -1;
	}
	return 0;
}

int record_each(const char *path, record_fn *fn, void *arg)
{
	struct reader r = {.path = path};
	r.f = fopen(path, "rb");
	if (!r.f) {
		log_errx("%s: cannot open: %s", path, strerror(errno));
		return -1;
	}
	msgpack_unpacker_init(&r.up, 65536);
	msgpack_unpacked_init(&r.res);
	int rc = -1, got;
	if (reader_next(&r) != 1 || check_header(&r) < 0)
		goto out;
	while ((got = reader_next(&r)) == 1) {
		const msgpack_object *o = &r.res.data;
		if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size != 3 ||
		    o->via.array.ptr[0].type != MSGPACK_OBJECT_POSITIVE_INTEGER ||
		    o->via.array.ptr[1].type != MSGPACK_OBJECT_STR ||
		    o->via.array.ptr[2].type != MSGPACK_OBJECT_BIN) {
			log_errx("%s: record %ld is not [recv_ns, topic, body]; skipped", r.path,
				 r.index);
			continue;
		}
		char topic[WB_TOPIC_MAX];
		const msgpack_object_str *ts = &o->via.array.ptr[1].via.str;
		snprintf(topic, sizeof(topic), "%.*s",
			 (int)(ts->size < WB_TOPIC_MAX ? ts->size : WB_TOPIC_MAX - 1), ts->ptr);
		if (fn(o->via.array.ptr[0].via.u64, topic, o->via.array.ptr[2].via.bin.ptr,
		       o->via.array.ptr[2].via.bin.size, arg))
			break;
	}
	rc = got < 0 ? -1 : 0;
out:
	msgpack_unpacked_destroy(&r.res);
	msgpack_unpacker_destroy(&r.up);
	fclose(r.f);
	return rc;
}

struct replay_opts {
	double speed;
	bool fast;
	uint64_t wait_ns, max_gap_ns;
};
#define OFF(m) offsetof(struct replay_opts, m)
static const struct cli_flag replay_flags[] = {
    CLI_OPERAND("FILE", "a recording of wattbus record"),
    CLI_OPERAND("ENDPOINT", "where to publish (binds; a leading > connects instead)"),
    CLI_DOUBLE("speed", 's', OFF(speed), "1", 0.001, 1e6, "N", "N times faster than recorded"),
    CLI_SWITCH("fast", 'f', OFF(fast), "as fast as possible"),
    CLI_DURATION("wait", 'w', OFF(wait_ns), "5s", 0, 0, "D",
		 "wait up to D for a subscriber before the first message"),
    /* A recording can hold hours of silence (or, edited or forged, a receive time years
     * on): replay would sleep through it. */
    CLI_DURATION("max-gap", 'g', OFF(max_gap_ns), "10s", 0, 0, "D",
		 "wait at most D between two messages (0: as recorded)"),
};
static const struct cli_verb replay_verb = {
    CLI_VERB("replay", replay_flags, struct replay_opts, 2, 2),
    .synopsis = "[OPTIONS] FILE ENDPOINT"};

int cmd_replay(int argc, char **argv)
{
	struct replay_opts ro;
	int first, c = cli_parse(&replay_verb, argc, argv, &ro, &first);
	if (c >= 0)
		return c;
	struct reader r = {.path = argv[first]};
	r.f = fopen(r.path, "rb");
	if (!r.f) {
		log_errx("%s: cannot open: %s", r.path, strerror(errno));
		return 1;
	}
	msgpack_unpacker_init(&r.up, 65536);
	msgpack_unpacked_init(&r.res);
	struct wb_pub *pub = NULL;
	int rc = 1;
	if (reader_next(&r) != 1 || check_header(&r) < 0)
		goto out;
	pub = wb_pub_new(argv[first + 1], "replay", "", NULL);
	if (!pub)
		goto out;
	if (!wb_pub_wait_subscriber(pub, (int)(ro.wait_ns / WB_NS_PER_MS)))
		log_warnx("no subscriber after %llu ms; replaying anyway",
			  (unsigned long long)(ro.wait_ns / WB_NS_PER_MS));

	/* Each message is due the recorded gap after the one before (divided by speed, at most
	 * max_gap; a time going back: at once). */
	uint64_t prev_ns = 0, due = 0;
	long sent = 0, shortened = 0;
	int got;
	while ((got = reader_next(&r)) == 1 && !cli_interrupted()) {
		const msgpack_object *o = &r.res.data;
		if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size != 3 ||
		    o->via.array.ptr[0].type != MSGPACK_OBJECT_POSITIVE_INTEGER ||
		    o->via.array.ptr[1].type != MSGPACK_OBJECT_STR ||
		    o->via.array.ptr[2].type != MSGPACK_OBJECT_BIN) {
			log_errx("%s: record %ld is not [recv_ns, topic, body]; skipped", r.path,
				 r.index);
			continue;
		}
		uint64_t t = o->via.array.ptr[0].via.u64;
		if (sent == 0 && due == 0) {
			prev_ns = t;
			due = wb_mono_ns();
		}
		if (!ro.fast && t > prev_ns) {
			double gap_ns = (double)(t - prev_ns) / ro.speed;
			if (ro.max_gap_ns && gap_ns > (double)ro.max_gap_ns) {
				gap_ns = (double)ro.max_gap_ns;
				shortened++;
			}
			due += (uint64_t)gap_ns;
			uint64_t now = wb_mono_ns();
			if (due > now) {
				struct timespec ts = {(time_t)((due - now) / WB_NS_PER_SEC),
						      (long)((due - now) % WB_NS_PER_SEC)};
				nanosleep(&ts, NULL);
			}
		}
		if (t > prev_ns)
			prev_ns = t;
		char topic[WB_TOPIC_MAX];
		const msgpack_object_str *ts = &o->via.array.ptr[1].via.str;
		snprintf(topic, sizeof(topic), "%.*s",
			 (int)(ts->size < WB_TOPIC_MAX ? ts->size : WB_TOPIC_MAX - 1), ts->ptr);
		if (wb_pub_send_raw(pub, topic, o->via.array.ptr[2].via.bin.ptr,
				    o->via.array.ptr[2].via.bin.size) == 0)
			sent++;
	}
	if (got < 0)
		goto out;
	fprintf(stderr, "wattbus replay: %ld messages sent\n", sent);
	if (shortened)
		fprintf(stderr,
			"wattbus replay: %ld gaps longer than --max-gap %.3g s shortened to it\n",
			shortened, (double)ro.max_gap_ns / 1e9);
	rc = 0;
out:
	wb_pub_destroy(&pub);
	msgpack_unpacked_destroy(&r.res);
	msgpack_unpacker_destroy(&r.up);
	fclose(r.f);
	return rc;
}
