/*
 * msgpack primitives of the frame codec (private to lib/mpack.c and lib/codec*.c):
 * the reader, which takes one value at a time straight from the frame, and the
 * writer's stores. Nothing here knows the schema.
 */
#ifndef WB_MPACK_H
#define WB_MPACK_H

#include <endian.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <msgpack.h>

#include "codec.h"

/* Containers nested in one frame, at most. */
#define WB_DEPTH_MAX 16

/* ---- reading ---- */

/*
 * One msgpack value as the reader meets it: scalars read, a string's bytes
 * pointed at in the frame, a container's item count (its items follow).
 */
enum mv_type {
	MV_NIL,
	MV_BOOL,
	MV_POS, /* an integer >= 0, of any encoding (msgpack-c's POSITIVE_INTEGER) */
	MV_NEG, /* an integer < 0 */
	MV_FLOAT,
	MV_STR,
	MV_BIN,
	MV_EXT,
	MV_ARR,
	MV_MAP,
};

struct mval {
	enum mv_type t;
	union {
		bool b;
		uint64_t u;
		int64_t i;
		double f;
		struct {
			const char *ptr;
			uint32_t n;
		} s;
		uint32_t n; /* ARR, MAP: items (pairs) */
	};
};

/* "a string", "an unsigned integer": what a value is, for messages. */
const char *mp_type_name(enum mv_type t);

/*
 * The reader: one pass over the frame. The decoder reads values with it
 * straight into the message structs, with no object tree between; mp_walk
 * passes over values with it. A structural fault (truncation, a bad type byte,
 * a container larger than the bytes left, too many objects, too deep) stops
 * the decoder: wb_decode then names the fault with wb_msgpack_check, so a
 * refused frame gets the reason and message it gets when that check runs first.
 */
struct reader {
	const uint8_t *p, *start, *end;
	uint64_t objects;      /* items declared by the containers met, as mp_walk counts them */
	struct wb_pool **pool; /* the message's pool, for arrays inside array items */
	unsigned in_items;     /* array items open around the value read */
};

/* A big-endian number of n (0, 1, 2, 4 or 8) bytes. */
static inline uint64_t rd_be(const uint8_t *p, int n)
{
	uint16_t h;
	uint32_t w;
	uint64_t d;
	switch (n) {
	case 1:
		return p[0];
	case 2:
		memcpy(&h, p, 2);
		return be16toh(h);
	case 4:
		memcpy(&w, p, 4);
		return be32toh(w);
	case 8:
		memcpy(&d, p, 8);
		return be64toh(d);
	}
	return 0;
}

/*
 * A positive integer at p in its smallest forms (fixint, uint 8 to 64), 9
 * bytes readable: the byte after it, or NULL for any other form, which the
 * general path then reads for its verdict.
 */
static inline const uint8_t *rd_uint(const uint8_t *p, uint64_t *v)
{
	uint8_t b = *p;
	if (b <= 0x7f) {
		*v = b;
		return p + 1;
	}
	if (b < 0xcc || b > 0xcf)
		return NULL;
	int hn = 1 << (b - 0xcc);
	*v = rd_be(p + 1, hn);
	return p + 1 + hn;
}

/* rd_val's faults (0: a value was read). */
enum rd_fault {
	RD_END = -1,	 /* no byte left where a value should start */
	RD_BAD = -2,	 /* a type byte msgpack does not use */
	RD_HEAD = -3,	 /* the frame ends inside the bytes after the type byte */
	RD_BODY = -4,	 /* a string, binary or ext longer than the bytes left (v->u: its size) */
	RD_ITEMS = -5,	 /* a container of more items than bytes left (v->u: the items) */
	RD_OBJECTS = -6, /* more than WB_OBJECTS_MAX items declared in the frame */
};

/* A string, binary or ext body of n bytes at r->p (skip: bytes before it, e.g. the ext type). */
static inline int rd_body(struct reader *r, struct mval *v, enum mv_type t, uint64_t skip,
			  uint64_t n)
{
	if (skip + n > (uint64_t)(r->end - r->p)) {
		v->u = skip + n;
		return RD_BODY;
	}
	v->t = t;
	v->s.ptr = (const char *)r->p + skip;
	v->s.n = (uint32_t)n;
	r->p += skip + n;
	return 0;
}

/* A container of n items (maps: n pairs); its items are what r->p points at next. */
static inline int rd_container(struct reader *r, struct mval *v, enum mv_type t, uint64_t n)
{
	uint64_t children = t == MV_MAP ? 2 * n : n;
	if (children > (uint64_t)(r->end - r->p)) {
		v->u = children;
		return RD_ITEMS;
	}
	r->objects += children;
	if (r->objects > WB_OBJECTS_MAX)
		return RD_OBJECTS;
	v->t = t;
	v->n = (uint32_t)n;
	return 0;
}

/* The value at r->p: 0, or an enum rd_fault. */
static inline __attribute__((always_inline)) int rd_val(struct reader *r, struct mval *v)
{
	if (r->p >= r->end)
		return RD_END;
	uint8_t b = *r->p++;
	size_t left = (size_t)(r->end - r->p);
	if (b <= 0x7f) {
		v->t = MV_POS;
		v->u = b;
		return 0;
	}
	if (b >= 0xe0) {
		v->t = MV_NEG;
		v->i = (int8_t)b;
		return 0;
	}
	if (b <= 0x8f)
		return rd_container(r, v, MV_MAP, b & 0x0f);
	if (b <= 0x9f)
		return rd_container(r, v, MV_ARR, b & 0x0f);
	if (b <= 0xbf)
		return rd_body(r, v, MV_STR, 0, b & 0x1f);
	/* The sizes of what follows the type byte 0xc0..0xdf: header bytes to read. */
	static const uint8_t hdr[32] = {
	    [0x04] = 1, [0x05] = 2, [0x06] = 4,		    /* bin 8/16/32 */
	    [0x07] = 1, [0x08] = 2, [0x09] = 4,		    /* ext 8/16/32 */
	    [0x0a] = 4, [0x0b] = 8,			    /* float 32/64 */
	    [0x0c] = 1, [0x0d] = 2, [0x0e] = 4, [0x0f] = 8, /* uint */
	    [0x10] = 1, [0x11] = 2, [0x12] = 4, [0x13] = 8, /* int */
	    [0x19] = 1, [0x1a] = 2, [0x1b] = 4,		    /* str 8/16/32 */
	    [0x1c] = 2, [0x1d] = 4, [0x1e] = 2, [0x1f] = 4, /* array, map 16/32 */
	};
	int hn = hdr[b - 0xc0];
	if ((size_t)hn > left)
		return RD_HEAD;
	uint64_t x = rd_be(r->p, hn);
	r->p += hn;
	switch (b) {
	case 0xc0:
		v->t = MV_NIL;
		return 0;
	case 0xc2:
	case 0xc3:
		v->t = MV_BOOL;
		v->b = b == 0xc3;
		return 0;
	case 0xc4:
	case 0xc5:
	case 0xc6:
		return rd_body(r, v, MV_BIN, 0, x);
	case 0xc7:
	case 0xc8:
	case 0xc9:
		return rd_body(r, v, MV_EXT, 1, x);
	case 0xca: {
		uint32_t w = (uint32_t)x;
		float f;
		memcpy(&f, &w, sizeof(f));
		v->t = MV_FLOAT;
		v->f = f;
		return 0;
	}
	case 0xcb:
		v->t = MV_FLOAT;
		memcpy(&v->f, &x, sizeof(v->f));
		return 0;
	case 0xcc:
	case 0xcd:
	case 0xce:
	case 0xcf:
		v->t = MV_POS;
		v->u = x;
		return 0;
	case 0xd0:
	case 0xd1:
	case 0xd2:
	case 0xd3: {
		/* sign-extend from the encoded width; msgpack-c calls an integer >= 0 positive */
		int sh = 64 - 8 * hn;
		int64_t i = (int64_t)(x << sh) >> sh;
		v->t = i < 0 ? MV_NEG : MV_POS;
		v->i = i;
		return 0;
	}
	case 0xd4:
	case 0xd5:
	case 0xd6:
	case 0xd7:
	case 0xd8:
		return rd_body(r, v, MV_EXT, 1, 1u << (b - 0xd4));
	case 0xd9:
	case 0xda:
	case 0xdb:
		return rd_body(r, v, MV_STR, 0, x);
	case 0xdc:
	case 0xdd:
		return rd_container(r, v, MV_ARR, x);
	case 0xde:
	case 0xdf:
		return rd_container(r, v, MV_MAP, x);
	}
	return RD_BAD; /* 0xc1, never used */
}

/* The message for rd_val's fault rc at the value that starts at at; returns -1. */
int rd_fail(const struct reader *r, int rc, const struct mval *v, const uint8_t *at,
	    struct wb_err *err);

/*
 * Pass over exactly one value at r->p, its items included, with containers
 * nested at most max_depth deep: 0, or -1 with err (may be NULL) filled. The
 * structural rules of a frame, written once: the check of a frame and the
 * skipping of an unknown key's value.
 */
int mp_walk(struct reader *r, int max_depth, struct wb_err *err);

/* ---- writing ---- */

/*
 * The encoder writes msgpack straight into a msgpack_sbuffer: each key and its
 * value go in with one capacity check and plain stores, the same bytes
 * msgpack-c's packer writes (the smallest form of each integer, float64,
 * str8 for 32 to 255 bytes; tests/unit/test_codec.c compares the two), without
 * a callback and a memcpy per item.
 */
int mp_grow(msgpack_sbuffer *sb, size_t need);

static inline int reserve(msgpack_sbuffer *sb, size_t need)
{
	return sb->alloc - sb->size >= need ? 0 : mp_grow(sb, need);
}

static inline unsigned char *be(unsigned char *w, uint64_t v, int n)
{
	for (int i = n - 1; i >= 0; i--, v >>= 8)
		w[i] = (unsigned char)v;
	return w + n;
}

static inline unsigned char *put_uint(unsigned char *w, uint64_t v)
{
	if (v < 0x80) {
		*w++ = (unsigned char)v;
		return w;
	}
	if (v < 0x100) {
		*w++ = 0xcc;
		return be(w, v, 1);
	}
	if (v < 0x10000) {
		*w++ = 0xcd;
		return be(w, v, 2);
	}
	if (v < 0x100000000ull) {
		*w++ = 0xce;
		return be(w, v, 4);
	}
	*w++ = 0xcf;
	return be(w, v, 8);
}

static inline unsigned char *put_int(unsigned char *w, int64_t v)
{
	if (v >= -32)
		return v < 0 ? (*w++ = (unsigned char)v, w) : put_uint(w, (uint64_t)v);
	if (v >= -128) {
		*w++ = 0xd0;
		return be(w, (uint64_t)v, 1);
	}
	if (v >= -32768) {
		*w++ = 0xd1;
		return be(w, (uint64_t)v, 2);
	}
	if (v >= INT32_MIN) {
		*w++ = 0xd2;
		return be(w, (uint64_t)v, 4);
	}
	*w++ = 0xd3;
	return be(w, (uint64_t)v, 8);
}

/* A str, array or map header: fixed form below `fix`, else 8 (str only), 16 or 32 bits of length.
 */
static inline unsigned char *put_hdr(unsigned char *w, uint64_t n, unsigned char fixbase,
				     uint64_t fix, unsigned char b8, unsigned char b16)
{
	if (n < fix) {
		*w++ = (unsigned char)(fixbase | n);
		return w;
	}
	if (b8 && n < 0x100) {
		*w++ = b8;
		return be(w, n, 1);
	}
	if (n < 0x10000) {
		*w++ = b16;
		return be(w, n, 2);
	}
	*w++ = (unsigned char)(b16 + 1);
	return be(w, n, 4);
}

#define PUT_STR_HDR(w, n) put_hdr(w, n, 0xa0, 32, 0xd9, 0xda)
#define PUT_ARR_HDR(w, n) put_hdr(w, n, 0x90, 16, 0, 0xdc)
#define PUT_MAP_HDR(w, n) put_hdr(w, n, 0x80, 16, 0, 0xde)
#define HDR_MAX 5 /* bytes of the largest header */

#endif
