/*
 * Frame codec: message structs <-> msgpack maps, strict on input.
 * Pure code: bytes in, struct out, or an error naming the key and the fault.
 */
#ifndef WB_CODEC_H
#define WB_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "hash.h"
#include "wb_msgs.h"

/* Why a frame was rejected; counted per reason in stat messages. */
enum wb_reason {
	WB_R_MALFORMED, /* not msgpack, truncated, nested too deep, sizes beyond the frame */
	WB_R_TRAILING,	/* bytes after the map */
	WB_R_NOT_MAP,
	WB_R_KIND,	/* kind missing or unknown */
	WB_R_VERSION,	/* v missing or not the version this build knows */
	WB_R_MISSING,	/* a required key is absent */
	WB_R_TYPE,	/* a value of the wrong type */
	WB_R_BOUND,	/* a number, string or array outside its schema bounds */
	WB_R_DUPLICATE, /* the same key twice in one map */
	WB_R_TOPIC,	/* topic is not KIND/HOST of the map, or the frame count is wrong */
	WB_R_TOO_BIG,	/* frame larger than WB_FRAME_MAX */
	WB_R_BUDGET,	/* valid, but keeping it would exceed the stage's memory budget */
	/* Valid for the schema, refused on receipt (lib/plaus.c, lib/bus.c): */
	WB_R_IMPLAUSIBLE_TIME,	/* a time outside max_ahead/max_behind, a slot longer than max_slot
				 */
	WB_R_DUP_PRODUCER,	/* a second live producer under one kind/host (src or epoch) */
	WB_R_IMPLAUSIBLE_POWER, /* energy a zone or host could not have drawn (max_zone_w,
				 * max_host_w)
				 */
	WB_R_COUNT
};

#define WB_FRAME_MAX (64u << 20)
/* Objects (map keys, values, array items) in one frame. */
#define WB_OBJECTS_MAX (8u << 20)
#define WB_ERR_MAX 256

struct wb_err {
	enum wb_reason reason;
	char msg[WB_ERR_MAX]; /* e.g. "procs[3].cpu_ns: expected an unsigned integer, got a string"
			       */
};

const char *wb_reason_name(enum wb_reason reason);

/* Kind by name ("power"), or WB_KIND_NONE. */
enum wb_kind wb_kind_from_name(const char *name, size_t len);

/*
 * Decode one msgpack map of any kind into *out (zeroed first). Returns 0, or -1
 * with *err filled; on error nothing needs freeing. On success the caller owns
 * the arrays and releases them with wb_msg_clear().
 */
int wb_decode(const void *buf, size_t len, struct wb_msg *out, struct wb_err *err);

/*
 * Per-process maps are read and written in one tight pass when in the
 * encoder's form (anything else takes the general path, which gives every
 * verdict). Off only to hold the two paths to each other (fuzz_codec).
 */
extern bool wb_codec_fast;

/* Release the arrays of a decoded or built message and zero it. NULL-safe. */
void wb_msg_clear(struct wb_msg *msg);

/*
 * Encode msg as a msgpack map. *out is malloc'd and owned by the caller.
 * Fails (-1, err filled, naming the key) when a value breaks its schema bounds,
 * as a receiver would reject it.
 */
int wb_encode(const struct wb_msg *msg, char **out, size_t *out_len, struct wb_err *err);

/* Length (1-4) of the valid UTF-8 sequence at s within n bytes, or 0: the codec's rule for strings.
 */
size_t wb_utf8_seq_len(const unsigned char *s, size_t n);
/* Whether the valid UTF-8 sequence of len bytes at s is a control character: C0, DEL or C1
 * (U+0080..U+009F), what no name holds (the codec's identities, config values, wb_vis). */
bool wb_utf8_is_control(const unsigned char *s, size_t len);

/* A zone simulated rather than measured (powerd's fake source) says so at the start of its path
 * (schemas/power.json, "path"): shown as simulated, never trained on. */
#define WB_PATH_SIMULATED "simulated:"
static inline bool wb_path_simulated(const char *path)
{
	return !strncmp(path, WB_PATH_SIMULATED, sizeof(WB_PATH_SIMULATED) - 1);
}

/* Allocate n zeroed elements for an array field; returns NULL on overflow or ENOMEM. */
void *wb_array_new(size_t n, size_t elem_size);

/*
 * Check that buf holds exactly one msgpack object whose container sizes fit in
 * buf, with at most WB_OBJECTS_MAX objects nested at most max_depth deep. These
 * are the structural rules wb_decode applies as it reads; when it refuses a
 * frame, a structural fault found by this walk is the reason it reports.
 */
int wb_msgpack_check(const void *buf, size_t len, int max_depth, struct wb_err *err);

#endif
