/*
 * The wattbus bus: ZeroMQ PUB/SUB with two frames per message, topic "KIND/HOST"
 * and one msgpack map. Publishers stamp v, kind, src, epoch and seq; subscribers
 * decode strictly, count rejections by reason, and detect lost messages (seq
 * gaps) and producer restarts (new epochs).
 *
 * Endpoints are ZeroMQ strings. A leading '@' binds and '>' connects; without
 * one, publishers bind and subscribers connect.
 */
#ifndef WB_BUS_H
#define WB_BUS_H

#include <stdbool.h>
#include <stdint.h>

#include <czmq.h>

#include "codec.h"
#include "plaus.h"

#define WB_TOPIC_MAX 96
#define WB_COUNTERS_MAX 64 /* schemas/stat.json: counters maxItems */

/* What a stage counts; published in its stat messages. */
struct wb_stats {
	uint64_t frames_in, frames_out, lost, rejected, restarts, stale;
	uint64_t checkpoint_failures; /* state file saves that failed */
	uint64_t rejected_by[WB_R_COUNT];
	size_t ncounters;
	struct {
		char name[64];
		uint64_t value;
	} counters[WB_COUNTERS_MAX];
};

/* A named stage-specific counter, created at 0 on first use; NULL when the table is full. */
uint64_t *wb_stats_counter(struct wb_stats *stats, const char *name);

/*
 * How a stage binds its counters: one table of rows, each a counter's name and
 * the offset of a field in the stage's own struct (offsetof).
 */
struct wb_stat_row {
	const char *name;
	size_t off;
};
/* The field must be a uint64_t * (wb_stats_bind) or a uint64_t (wb_stats_mirror): checked at
 * compile time, as the offset alone would take any field. */
#define WB_STAT_ROW(type, field, name)                                                             \
	{                                                                                          \
		(name), offsetof(type, field) +                                                    \
			    0 * sizeof(struct {                                                    \
				    int unused;                                                    \
				    _Static_assert(_Generic(((type *)0)->field, uint64_t * : 1,    \
							    uint64_t : 1, default : 0),            \
						   "WB_STAT_ROW: " #field                          \
						   " is not a uint64_t or uint64_t *");            \
			    })                                                                     \
	}
/*
 * Point each row's `uint64_t *` field of base at its named counter (created at
 * 0), so that the stage counts with `(*x->field)++`. Never leaves a field NULL:
 * more counters than WB_COUNTERS_MAX is a programming error, fatal at start.
 */
void wb_stats_bind(struct wb_stats *stats, void *base, const struct wb_stat_row *rows, size_t n);
/*
 * Copy each row's `uint64_t` field of base into its named counter: for the
 * counters a pure module keeps in a struct of its own (alignd's engine).
 */
void wb_stats_mirror(struct wb_stats *stats, const void *base, const struct wb_stat_row *rows,
		     size_t n);
void wb_stats_reject(struct wb_stats *stats, enum wb_reason reason);

/* A subscriber's longest wait between tries to reach an absent publisher, unless set:
 * [global] reconnect_max's default. */
#define WB_RECONNECT_MAX_MS 2000

/* Options for sockets: ZeroMQ high-water mark and CURVE keys (NULL: plain). */
struct wb_sockopts {
	int hwm;		/* messages; 0 for the default (10000) */
	int reconnect_max_ms;	/* SUB: tries to connect back off up to this; 0: WB_RECONNECT_MAX_MS
				 */
	const char *curve_cert; /* our certificate file (czmq zcert format), secret part included */
	const char *curve_peer; /* SUB: the publisher's public certificate file */
	const char *curve_allow; /* PUB: directory of client public certificates allowed in */
	const char *ipc_group; /* PUB on ipc://: socket file mode 0660 with this group (NULL: 0660,
				  own group) */
	struct wb_plaus plaus; /* SUB: times refused on receipt (all 0: none) */
};

struct wb_pub;

/* Bind (or connect) a PUB socket. src names the producer in every message. NULL on failure
 * (logged). */
struct wb_pub *wb_pub_new(const char *endpoint, const char *src, const char *host,
			  const struct wb_sockopts *opts);
void wb_pub_destroy(struct wb_pub **self_p);
/*
 * Stamp msg (v, kind, src, epoch, next seq for its kind; host when empty),
 * encode and send it. Returns 0, or -1 when it could not be sent, with errno
 * EINVAL when it could not be encoded (logged).
 */
int wb_pub_send(struct wb_pub *self, struct wb_msg *msg);
/* Send a ready frame pair as is (replay, pub --raw). */
int wb_pub_send_raw(struct wb_pub *self, const char *topic, const void *buf, size_t len);
/* The next seq for topic ("KIND/HOST"), as wb_pub_send stamps it: for senders of ready frames. */
int wb_pub_next_seq(struct wb_pub *self, const char *topic, uint64_t *seq);
uint64_t wb_pub_epoch(const struct wb_pub *self);
uint64_t wb_pub_sent(const struct wb_pub *self);
zsock_t *wb_pub_sock(struct wb_pub *self);
/* Wait up to timeout_ms until a subscriber has joined (uses XPUB). Returns 1 joined, 0 timed out.
 */
int wb_pub_wait_subscriber(struct wb_pub *self, int timeout_ms);

/* What a subscriber learned about a received message. */
struct wb_rx {
	char topic[WB_TOPIC_MAX];
	uint64_t recv_ns;  /* wall clock at receipt */
	uint64_t lost;	   /* messages of this producer missed before this one */
	bool first;	   /* first message seen from this producer */
	bool new_epoch;	   /* the producer restarted */
	bool stale;	   /* seq not after the last one seen (duplicate or reordered) */
	bool duplicate;	   /* from a second live producer of the same kind/host/src: refused */
	bool second_meter; /* power from a src of extra_power_src, beside the host's producer */
};

struct wb_sub;

struct wb_sub *wb_sub_new(const struct wb_sockopts *opts);
void wb_sub_destroy(struct wb_sub **self_p);
/* Connect (or, with a leading @, bind) to one endpoint or a comma-separated list. */
int wb_sub_connect(struct wb_sub *self, const char *endpoints);
int wb_sub_subscribe(struct wb_sub *self, const char *prefix);
zsock_t *wb_sub_sock(struct wb_sub *self);
/* Wait up to timeout_ms for a message: 1 when one is queued, 0 otherwise (timeout, signal). */
int wb_sub_wait(struct wb_sub *self, int timeout_ms);
/*
 * Receive one message (blocks unless the socket is readable). Returns 1 with
 * *out decoded (caller clears it) and *rx filled, 0 when the frame was rejected
 * (*err says why; counted in stats, logged rate-limited), -1 when interrupted.
 */
int wb_sub_recv(struct wb_sub *self, struct wb_msg *out, struct wb_rx *rx, struct wb_err *err,
		struct wb_stats *stats);
/* As wb_sub_recv, but returns -1 with errno EAGAIN at once when nothing is queued. */
int wb_sub_try_recv(struct wb_sub *self, struct wb_msg *out, struct wb_rx *rx, struct wb_err *err,
		    struct wb_stats *stats);
/* Receive the raw frames: *topic and *body are malloc'd, owned by the caller. Returns 0 or -1. */
int wb_sub_recv_raw(struct wb_sub *self, char **topic, char **body, size_t *len, int *nframes);
/* Check a decoded frame pair against its topic: decode, topic == KIND/HOST. Returns 0 or -1 (err).
 */
int wb_frame_check(const char *topic, const void *body, size_t len, struct wb_msg *out,
		   struct wb_err *err);

/*
 * Sequence tracking per producer (kind, host, src); bounded, least recent dropped first.
 * Two live producers under one name (cloned machines) show as an epoch that comes
 * back after a newer one, or as two interleaved runs of seq in one epoch: the one
 * that comes back is refused (rx->duplicate) until the other has been silent for
 * WB_DUP_TAKEOVER of its messages (twice as many after each takeover), so consumers
 * switch producer at most once while both are alive.
 */
#define WB_DUP_TAKEOVER 8
struct wb_seqtrack;
struct wb_seqtrack *wb_seqtrack_new(size_t max_producers);
void wb_seqtrack_destroy(struct wb_seqtrack **self_p);
void wb_seqtrack_see(struct wb_seqtrack *self, const struct wb_envelope *env, const char *kind,
		     struct wb_rx *rx);
/*
 * One producer per host: a host's power, usage, aligned or estimate messages come
 * from the first src heard (other kinds pass). Another src is refused: the owner's
 * src is returned (NULL: accepted) until the owner has been silent for 8 of its own
 * intervals while the other sent WB_DUP_TAKEOVER messages in a row (twice as many
 * after each takeover); it then takes over. A power src in extra_power_src (a
 * deliberate second meter) passes with *is_owner false: it may add zones, not take the
 * owner's (wb_bound_check).
 */
const char *wb_seqtrack_owner(struct wb_seqtrack *self, const struct wb_envelope *env,
			      enum wb_kind kind, const struct wb_strlist *extra_power_src,
			      bool *is_owner);

#endif
