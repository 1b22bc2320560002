/* Sequence tracking: gaps, restarts, duplicates, and the bound on producers. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bus.h"
#include "clock.h"
#include "config.h"
#include "heap.h"
#include "unit.h"

static struct wb_rx see(struct wb_seqtrack *t, const char *host, const char *src, uint64_t epoch,
			uint64_t seq)
{
	struct wb_envelope env = {.epoch = epoch, .seq = seq};
	snprintf(env.host, sizeof(env.host), "%s", host);
	snprintf(env.src, sizeof(env.src), "%s", src);
	struct wb_rx rx;
	wb_seqtrack_see(t, &env, "power", &rx);
	return rx;
}

static void test_gaps_and_epochs(void)
{
	struct wb_seqtrack *t = wb_seqtrack_new(16);
	struct wb_rx rx = see(t, "h", "powerd", 100, 5);
	CHECK(rx.first && rx.lost == 0);
	rx = see(t, "h", "powerd", 100, 6);
	CHECK(!rx.first && rx.lost == 0 && !rx.new_epoch);
	rx = see(t, "h", "powerd", 100, 10);
	CHECK_U64(rx.lost, 3);
	rx = see(t, "h", "powerd", 100, 10);
	CHECK(rx.stale && rx.lost == 0);
	rx = see(t, "h", "powerd", 100, 8);
	CHECK(rx.stale);
	rx = see(t, "h", "powerd", 200, 0);
	CHECK(rx.new_epoch && rx.lost == 0 && !rx.stale);
	rx = see(t, "h", "powerd", 200, 1);
	CHECK(!rx.new_epoch && rx.lost == 0);
	/* Another producer of the same host is tracked apart. */
	rx = see(t, "h", "script", 100, 7);
	CHECK(rx.first);
	wb_seqtrack_destroy(&t);
	CHECK(t == NULL);
	wb_seqtrack_destroy(&t);
}

static void test_bounded(void)
{
	struct wb_seqtrack *t = wb_seqtrack_new(4);
	char host[16];
	for (int i = 0; i < 10; i++) {
		snprintf(host, sizeof(host), "h%d", i);
		see(t, host, "powerd", 1, 0);
	}
	/* h9 is still known; h0 was dropped as the least recent and counts as new again. */
	CHECK(!see(t, "h9", "powerd", 1, 1).first);
	CHECK(see(t, "h0", "powerd", 1, 1).first);
	wb_seqtrack_destroy(&t);
}

static void test_stats_counters(void)
{
	struct wb_stats s = {0};
	uint64_t *a = wb_stats_counter(&s, "zone_errors");
	*a += 2;
	CHECK(wb_stats_counter(&s, "zone_errors") == a);
	CHECK_U64(*wb_stats_counter(&s, "zone_errors"), 2);
	for (int i = 0; i < WB_COUNTERS_MAX + 5; i++) {
		char n[16];
		snprintf(n, sizeof(n), "c%d", i);
		wb_stats_counter(&s, n);
	}
	CHECK_U64(s.ncounters, WB_COUNTERS_MAX);
	CHECK(wb_stats_counter(&s, "one-too-many") == NULL);
	wb_stats_reject(&s, WB_R_TYPE);
	wb_stats_reject(&s, WB_R_TYPE);
	CHECK_U64(s.rejected, 2);
	CHECK_U64(s.rejected_by[WB_R_TYPE], 2);
}

/* A stage's binding table: fields point at their counters; a mirror copies values in. */
static void test_stats_bind_and_mirror(void)
{
	struct wb_stats s = {0};
	struct stage {
		uint64_t *slots, *dropped;
	} st = {0};
	static const struct wb_stat_row rows[] = {
	    WB_STAT_ROW(struct stage, slots, "slots"),
	    WB_STAT_ROW(struct stage, dropped, "dropped"),
	};
	wb_stats_bind(&s, &st, rows, 2);
	CHECK(st.slots && st.dropped && st.slots != st.dropped);
	(*st.slots) += 3;
	(*st.dropped)++;
	CHECK_U64(*wb_stats_counter(&s, "slots"), 3);
	CHECK_U64(*wb_stats_counter(&s, "dropped"), 1);

	struct engine {
		uint64_t a, b;
	} e = {.a = 7, .b = 9};
	static const struct wb_stat_row mrows[] = {
	    WB_STAT_ROW(struct engine, b, "engine_b"),
	    WB_STAT_ROW(struct engine, a, "slots"), /* the same name: the same counter */
	};
	wb_stats_mirror(&s, &e, mrows, 2);
	CHECK_U64(*wb_stats_counter(&s, "engine_b"), 9);
	CHECK_U64(*st.slots, 7);
	CHECK_U64(s.ncounters, 3);
}

/* Two powerds under one host name (cloned VMs): epochs alternate. The first switch looks
 * like a restart; the old epoch coming back is a second producer, refused from then on. */
static void test_alternating_epochs(void)
{
	struct wb_seqtrack *t = wb_seqtrack_new(16);
	CHECK(see(t, "h", "powerd", 100, 0).first);
	struct wb_rx rx = see(t, "h", "powerd", 200, 0);
	CHECK(rx.new_epoch && !rx.duplicate);
	rx = see(t, "h", "powerd", 100, 1);
	CHECK(rx.duplicate && !rx.new_epoch);
	for (uint64_t i = 1; i < 20; i++) {
		rx = see(t, "h", "powerd", 200, i);
		CHECK(!rx.duplicate && !rx.new_epoch && rx.lost == 0);
		rx = see(t, "h", "powerd", 100, i + 1);
		CHECK(rx.duplicate);
	}
	/* The accepted one stops: the refused one takes over after WB_DUP_TAKEOVER messages. */
	int refused = 0;
	uint64_t seq = 21;
	for (; refused < 100; refused++) {
		rx = see(t, "h", "powerd", 100, seq++);
		if (!rx.duplicate)
			break;
	}
	/* one of 100's was refused already after 200's last message */
	CHECK_U64(refused + 1, WB_DUP_TAKEOVER - 1);
	CHECK(rx.new_epoch);
	/* and the other is now the second one */
	CHECK(see(t, "h", "powerd", 200, 20).duplicate);
	CHECK(!see(t, "h", "powerd", 100, seq++).duplicate);
	/* A faster producer cannot keep displacing a slower live one: the next takeover needs
	 * twice as many messages. */
	uint64_t seq2 = 21;
	for (refused = 0; refused < 100; refused++)
		if (!see(t, "h", "powerd", 200, seq2++).duplicate)
			break;
	CHECK_U64(refused, 2 * WB_DUP_TAKEOVER - 1);
	CHECK(see(t, "h", "powerd", 100, seq++).duplicate);
	/* A plain restart (an epoch that never comes back) is no duplicate. */
	CHECK(see(t, "h", "powerd", 300, 0).new_epoch);
	CHECK(!see(t, "h", "powerd", 300, 1).duplicate);
	wb_seqtrack_destroy(&t);
}

static const char *owner(struct wb_seqtrack *t, enum wb_kind kind, const char *src,
			 const struct wb_strlist *extra, bool *is_owner)
{
	struct wb_envelope env = {.epoch = 1};
	snprintf(env.kind, sizeof(env.kind), "%s",
		 kind == WB_POWER   ? "power"
		 : kind == WB_USAGE ? "usage"
				    : "stat");
	snprintf(env.host, sizeof(env.host), "victim");
	snprintf(env.src, sizeof(env.src), "%s", src);
	return wb_seqtrack_owner(t, &env, kind, extra, is_owner);
}

/* A host's power and usage come from one src; another is refused while the first lives, takes
 * over once it has been silent for 8 of its intervals; a listed second meter passes. */
static void test_one_producer(void)
{
	struct wb_seqtrack *t = wb_seqtrack_new(16);
	char *names[] = {"bmc"};
	struct wb_strlist extra = {1, names};
	bool own;
	/* The owner's interval is what the tracker measures between its messages; the test keeps
	 * a bound on the longest gap it gave (from before one call to after the next: a loaded
	 * machine stretches each sleep) to wait out 8 of them. */
	uint64_t prev_before = 0, max_gap = 0;
	for (int i = 0; i < 4; i++) {
		if (i)
			usleep(100000); /* the owner's interval: 100 ms */
		uint64_t before = wb_mono_ns();
		CHECK(owner(t, WB_POWER, "powerd", &extra, &own) == NULL && own);
		if (prev_before && wb_mono_ns() - prev_before > max_gap)
			max_gap = wb_mono_ns() - prev_before;
		prev_before = before;
	}
	/* 8 messages of another src right after the owner's: refused, naming the owner */
	for (int i = 0; i < 3 * WB_DUP_TAKEOVER; i++) {
		const char *first = owner(t, WB_POWER, "evil", &extra, &own);
		CHECK(first && !strcmp(first, "powerd") && !own);
	}
	/* the deliberate second meter passes, not as the owner; other kinds are not judged */
	CHECK(owner(t, WB_POWER, "bmc", &extra, &own) == NULL && !own);
	CHECK(owner(t, WB_STAT, "anything", &extra, &own) == NULL && own);
	/* usage is its own kind: its first src owns it */
	CHECK(owner(t, WB_USAGE, "usaged/bpf", &extra, &own) == NULL && own);
	CHECK(owner(t, WB_USAGE, "usaged/procfs", &extra, &own) != NULL);
	/* the owner's last message, then it stops: once it has been silent for 8 of its intervals
	 * (the tracker's average gap, at most the longest), the other takes over with a run of 8 */
	CHECK(owner(t, WB_POWER, "powerd", &extra, &own) == NULL && own);
	uint64_t last = wb_mono_ns();
	if (last - prev_before > max_gap)
		max_gap = last - prev_before;
	while (wb_mono_ns() - last <= 8 * max_gap)
		usleep(10000);
	int refused = 0;
	while (owner(t, WB_POWER, "evil", &extra, &own) && refused < 100)
		refused++;
	CHECK(own);
	CHECK_U64(refused, WB_DUP_TAKEOVER - 1);
	/* and the old one is the second producer now */
	CHECK(owner(t, WB_POWER, "powerd", &extra, &own) != NULL);
	wb_seqtrack_destroy(&t);
}

/* One epoch, two interleaved runs of seq: the lower run is refused; one reordered frame is only
 * stale. */
static void test_interleaved_seq(void)
{
	struct wb_seqtrack *t = wb_seqtrack_new(16);
	see(t, "h", "powerd", 100, 10);
	struct wb_rx rx = see(t, "h", "powerd", 100, 3);
	CHECK(rx.stale && !rx.duplicate);
	CHECK(!see(t, "h", "powerd", 100, 11).duplicate);
	rx = see(t, "h", "powerd", 100, 4);
	CHECK(rx.duplicate && !rx.stale);
	CHECK(!see(t, "h", "powerd", 100, 12).duplicate);
	CHECK(see(t, "h", "powerd", 100, 5).duplicate);
	wb_seqtrack_destroy(&t);
	t = wb_seqtrack_new(16);
	see(t, "h", "powerd", 100, 10);
	CHECK(see(t, "h", "powerd", 100, 9).stale);
	CHECK(!see(t, "h", "powerd", 100, 11).stale);
	CHECK(!see(t, "h", "powerd", 100, 12).duplicate);
	wb_seqtrack_destroy(&t);
}

/* A message past its schema bounds is not sent, and says so with EINVAL (wb_daemon_send counts
 * encode_failed). */
static void test_encode_failure(void)
{
	struct wb_pub *pub = wb_pub_new("inproc://plaus-encode", "test", "h", NULL);
	CHECK(pub != NULL);
	if (!pub)
		return;
	struct wb_msg m = {.kind = WB_POWER};
	m.power.t = (uint64_t)INT64_MAX + 1;
	m.power.interval_ns = 1000000000;
	errno = 0;
	CHECK(wb_pub_send(pub, &m) < 0 && errno == EINVAL);
	CHECK_U64(wb_pub_sent(pub), 0);
	m.power.t = 1;
	CHECK(wb_pub_send(pub, &m) == 0);
	wb_pub_destroy(&pub);
}

/*
 * A subscriber's sockets take reconnect_max (the cap of ZeroMQ's backoff of tries
 * to reach an absent publisher: each try wakes the I/O thread), and a subscriber
 * connected before its publisher binds still finds it.
 */
static void test_reconnect_backoff(void)
{
	struct wb_sub *dflt = wb_sub_new(NULL);
	CHECK(dflt != NULL);
	if (dflt)
		CHECK_U64(zsock_reconnect_ivl_max(wb_sub_sock(dflt)), WB_RECONNECT_MAX_MS);
	wb_sub_destroy(&dflt);
	struct wb_sockopts o = {.reconnect_max_ms = 300};
	struct wb_sub *sub = wb_sub_new(&o);
	CHECK(sub != NULL);
	if (!sub)
		return;
	CHECK_U64(zsock_reconnect_ivl_max(wb_sub_sock(sub)), 300);
	char dir[200], sock[256], ep[sizeof sock + 6];
	CHECK(mkdtemp(unit_tmp(dir, sizeof dir, "wb-reconnect-XXXXXX")) != NULL);
	snprintf(sock, sizeof sock, "%s/late.sock", dir);
	snprintf(ep, sizeof ep, "ipc://%s", sock);
	CHECK(wb_sub_connect(sub, ep) == 0);
	CHECK(wb_sub_subscribe(sub, "") == 0);
	struct wb_pub *pub = wb_pub_new(ep, "test", "h", NULL); /* binds after the connect */
	CHECK(pub != NULL);
	bool got = false;
	for (int i = 0; pub && !got && i < 300; i++) { /* 30 s at most */
		struct wb_msg m = {.kind = WB_POWER};
		m.power.t = 1000000000ull * (uint64_t)(i + 1);
		m.power.interval_ns = 1000000000;
		CHECK(wb_pub_send(pub, &m) == 0);
		got = wb_sub_wait(sub, 100) > 0;
	}
	CHECK(got);
	wb_pub_destroy(&pub);
	wb_sub_destroy(&sub);
	unlink(sock);
	rmdir(dir);
}

/* The next frame on sub, taken (1) or refused (0), within 30 s; -1 when none came. */
static int recv_one(struct wb_sub *sub)
{
	if (wb_sub_wait(sub, 30000) <= 0)
		return -1;
	struct wb_msg m;
	struct wb_rx rx;
	struct wb_err err;
	int rc = wb_sub_recv(sub, &m, &rx, &err, NULL);
	if (rc == 1)
		wb_msg_clear(&m);
	return rc;
}

/*
 * A daemon's heap follows the frames it takes (lib/heap.c): a large frame that is
 * refused (a forged one) leaves the thresholds alone, a large valid one moves them.
 * Both are sent raw, so that the sender's own sizing does not count.
 */
static void test_heap_follows_taken_frames(void)
{
	char dir[200], sock[256], ep[sizeof sock + 6];
	CHECK(mkdtemp(unit_tmp(dir, sizeof dir, "wb-heap-XXXXXX")) != NULL);
	snprintf(sock, sizeof sock, "%s/big.sock", dir);
	snprintf(ep, sizeof ep, "ipc://%s", sock);
	struct wb_pub *pub = wb_pub_new(ep, "test", "h", NULL);
	struct wb_sub *sub = wb_sub_new(NULL);
	CHECK(pub && sub && wb_sub_connect(sub, ep) == 0 && wb_sub_subscribe(sub, "") == 0);
	wb_heap_init();
	size_t before = wb_heap_mmap_threshold();
	/* 2 MiB that do not decode: refused */
	size_t junk_len = 2u << 20;
	char *junk = malloc(junk_len);
	CHECK(junk != NULL);
	memset(junk, 0xc1, junk_len); /* 0xc1: never used in msgpack */
	int got = -1;
	for (int i = 0; i < 300 && got < 0; i++) { /* until the subscription is up */
		CHECK(wb_pub_send_raw(pub, "usage/h", junk, junk_len) == 0);
		got = wb_sub_wait(sub, 100) > 0 ? recv_one(sub) : -1;
	}
	CHECK(got == 0);
	CHECK_U64(wb_heap_mmap_threshold(), before);
	/* a valid usage message of 40,000 processes (about 2 MiB): taken */
	struct wb_msg m = {.kind = WB_USAGE};
	m.env.v = 1;
	snprintf(m.env.kind, sizeof m.env.kind, "usage");
	snprintf(m.env.host, sizeof m.env.host, "h");
	snprintf(m.env.src, sizeof m.env.src, "test");
	m.env.epoch = 1;
	m.usage.t = 1000000000;
	m.usage.interval_ns = 1000000000;
	m.usage.ncpu = 4;
	m.usage.n_procs = 40000;
	m.usage.procs = calloc(m.usage.n_procs, sizeof *m.usage.procs);
	CHECK(m.usage.procs != NULL);
	for (size_t i = 0; m.usage.procs && i < m.usage.n_procs; i++) {
		m.usage.procs[i].pid = 100 + i;
		m.usage.procs[i].start_ns = 1000 * i;
		m.usage.procs[i].cpu_ns = 123456789;
		snprintf(m.usage.procs[i].comm, sizeof m.usage.procs[i].comm, "proc%05u",
			 (unsigned)i);
	}
	char *frame = NULL;
	size_t len = 0;
	struct wb_err err;
	CHECK(wb_encode(&m, &frame, &len, &err) == 0);
	CHECK(len >= WB_HEAP_LARGE_FRAME);
	CHECK(wb_pub_send_raw(pub, "usage/h", frame, len) == 0);
	/* junk frames sent while the subscription came up may still be queued ahead of it */
	int taken = 0;
	for (int i = 0; i < 400 && taken == 0; i++)
		taken = wb_sub_wait(sub, 1000) > 0 ? recv_one(sub) : -1;
	CHECK(taken == 1);
	CHECK_U64(wb_heap_mmap_threshold(), 4 * len);
	free(frame);
	free(m.usage.procs);
	free(junk);
	wb_sub_destroy(&sub);
	wb_pub_destroy(&pub);
	unlink(sock);
	rmdir(dir);
}

static const struct unit_case cases[] = {
    {"a refused large frame leaves the heap alone, a taken one sizes it",
     test_heap_follows_taken_frames},
    {"reconnect_max reaches the socket; a publisher bound late is still found",
     test_reconnect_backoff},
    {"a message that cannot be encoded is refused with EINVAL", test_encode_failure},
    {"two producers alternating epochs", test_alternating_epochs},
    {"one producer per host and kind, whatever its src", test_one_producer},
    {"two producers interleaving seq", test_interleaved_seq},
    {"gaps, restarts and stale messages", test_gaps_and_epochs},
    {"producer table is bounded", test_bounded},
    {"stage counters", test_stats_counters},
    {"stage counters bound and mirrored from a table", test_stats_bind_and_mirror},
};
UNIT_MAIN(cases)
