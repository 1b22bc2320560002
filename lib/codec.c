/*
 * Generic msgpack codec driven by the field tables generated from schemas/.
 * Decoding is strict (types, bounds, required keys, trailing bytes, UTF-8);
 * unknown keys are skipped, so an optional key can be added without a new v.
 */
#include <endian.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <msgpack.h>

#include "codec.h"

#define WB_DEPTH_MAX 16

static const char *const reason_names[WB_R_COUNT] = {
    [WB_R_MALFORMED] = "malformed",
    [WB_R_TRAILING] = "trailing",
    [WB_R_NOT_MAP] = "not_map",
    [WB_R_KIND] = "kind",
    [WB_R_VERSION] = "version",
    [WB_R_MISSING] = "missing",
    [WB_R_TYPE] = "type",
    [WB_R_BOUND] = "bound",
    [WB_R_DUPLICATE] = "duplicate",
    [WB_R_TOPIC] = "topic",
    [WB_R_TOO_BIG] = "too_big",
    [WB_R_BUDGET] = "budget",
    [WB_R_IMPLAUSIBLE_TIME] = "implausible_time",
    [WB_R_DUP_PRODUCER] = "duplicate_producer",
    [WB_R_IMPLAUSIBLE_POWER] = "implausible_power",
};

const char *wb_reason_name(enum wb_reason reason)
{
	if ((unsigned)reason >= WB_R_COUNT)
		return "unknown";
	return reason_names[reason];
}

enum wb_kind wb_kind_from_name(const char *name, size_t len)
{
	for (int k = 0; k < WB_NKINDS; k++)
		if (strlen(wb_kinds[k].name) == len && memcmp(wb_kinds[k].name, name, len) == 0)
			return (enum wb_kind)k;
	return WB_KIND_NONE;
}

/* Where in the message a value sits, for error messages: procs[3].cpu_ns */
struct path {
	const struct path *up;
	const char *key; /* NULL for an array element */
	size_t index;
};

static void path_format(const struct path *p, char *buf, size_t size)
{
	const struct path *segs[WB_DEPTH_MAX * 2];
	int n = 0;
	for (; p && n < (int)(sizeof(segs) / sizeof(segs[0])); p = p->up)
		segs[n++] = p;
	size_t used = 0;
	buf[0] = '\0';
	while (n-- > 0 && used < size) {
		int w;
		if (segs[n]->key)
			w = snprintf(buf + used, size - used, "%s%s", used ? "." : "",
				     segs[n]->key);
		else
			w = snprintf(buf + used, size - used, "[%zu]", segs[n]->index);
		if (w < 0)
			break;
		used += (size_t)w;
	}
	if (!buf[0])
		snprintf(buf, size, "(message)");
}

__attribute__((format(printf, 4, 5))) static int fail(struct wb_err *err, enum wb_reason reason,
						      const struct path *at, const char *fmt, ...)
{
	if (!err)
		return -1;
	char where[128];
	char what[160];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	err->reason = reason;
	if (at) {
		path_format(at, where, sizeof(where));
		snprintf(err->msg, sizeof(err->msg), "%s: %s", where, what);
	} else {
		snprintf(err->msg, sizeof(err->msg), "%s", what);
	}
	return -1;
}

size_t wb_utf8_seq_len(const unsigned char *s, size_t n)
{
	if (n == 0)
		return 0;
	unsigned char c = s[0];
	size_t more;
	uint32_t cp;
	if (c < 0x80)
		return 1;
	if ((c & 0xe0) == 0xc0) {
		more = 1;
		cp = c & 0x1f;
	} else if ((c & 0xf0) == 0xe0) {
		more = 2;
		cp = c & 0x0f;
	} else if ((c & 0xf8) == 0xf0) {
		more = 3;
		cp = c & 0x07;
	} else {
		return 0;
	}
	if (more >= n)
		return 0;
	for (size_t k = 1; k <= more; k++) {
		if ((s[k] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[k] & 0x3f);
	}
	/* No overlong forms, surrogates or code points beyond U+10FFFF. */
	if ((more == 1 && cp < 0x80) || (more == 2 && cp < 0x800) || (more == 3 && cp < 0x10000) ||
	    cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return more + 1;
}

/*
 * The codec's UTF-8 rule over a whole string. Nearly every string on the bus is
 * ASCII (names, ids, paths): those bytes are checked eight at a time, and only a
 * byte with the high bit set goes through wb_utf8_seq_len.
 */
static bool utf8_valid(const unsigned char *s, size_t n)
{
	size_t i = 0;
	while (i < n) {
		for (; i + 8 <= n; i += 8) {
			uint64_t w;
			memcpy(&w, s + i, sizeof(w));
			if (w & 0x8080808080808080ull)
				break;
		}
		for (; i < n && s[i] < 0x80; i++)
			;
		if (i == n)
			break;
		size_t len = wb_utf8_seq_len(s + i, n - i);
		if (len == 0)
			return false;
		i += len;
	}
	return true;
}
/*
 * Where an identity string (x-identity in the schema: host, src, zone, model names)
 * holds a control character, or -1: C0, DEL, or C1 (U+0080..U+009F, in UTF-8 0xc2
 * then 0x80..0x9f). A name keys state, reaches file names, labels and terminals:
 * it is refused here rather than escaped at each of them. The string is valid UTF-8.
 */
bool wb_utf8_is_control(const unsigned char *s, size_t len)
{
	return (len == 1 && (s[0] < 0x20 || s[0] == 0x7f)) ||
	       (len == 2 && s[0] == 0xc2 && s[1] < 0xa0);
}

static long ident_bad(const unsigned char *s, size_t n, uint32_t *cp)
{
	for (size_t i = 0; i < n;) {
		size_t len = wb_utf8_seq_len(s + i, n - i);
		if (!len)
			return -1; /* not reached: utf8_valid said it is */
		if (wb_utf8_is_control(s + i, len)) {
			*cp = len == 1 ? s[i] : s[i + 1];
			return (long)i;
		}
		i += len;
	}
	return -1;
}

/* ---- structure ---- */

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

static const char *type_name(enum mv_type t)
{
	static const char *const names[] = {
	    [MV_NIL] = "nil",
	    [MV_BOOL] = "a boolean",
	    [MV_POS] = "an unsigned integer",
	    [MV_NEG] = "a negative integer",
	    [MV_FLOAT] = "a float",
	    [MV_STR] = "a string",
	    [MV_BIN] = "binary",
	    [MV_EXT] = "an ext value",
	    [MV_ARR] = "an array",
	    [MV_MAP] = "a map",
	};
	return names[t];
}

/*
 * The reader: one pass over the frame. The decoder reads values with it
 * straight into the message structs, with no object tree between; walk_one
 * passes over values with it. A structural fault (truncation, a bad type byte,
 * a container larger than the bytes left, too many objects, too deep) stops
 * the decoder: wb_decode then names the fault with wb_msgpack_check, so a
 * refused frame gets the reason and message it gets when that check runs first.
 */
struct reader {
	const uint8_t *p, *start, *end;
	uint64_t objects;      /* items declared by the containers met, as walk_one counts them */
	struct wb_pool **pool; /* the message's pool, for arrays inside array items */
	unsigned in_items;     /* array items open around the value read */
};

/*
 * Arrays inside the items of an array (each process's energy per zone, each
 * GPU zone's processes) come from one pool per decoded message, not one
 * calloc and one free each: chunks that double, freed whole by wb_msg_clear.
 */
struct wb_pool {
	struct wb_pool *next;
	size_t used, cap;
	max_align_t data[];
};

static void *pool_alloc(struct wb_pool **pool, size_t n, size_t elem_size, bool zero)
{
	if (n == 0)
		n = 1;
	if (elem_size && n > SIZE_MAX / 2 / elem_size)
		return NULL;
	size_t need = (n * elem_size + sizeof(max_align_t) - 1) & ~(sizeof(max_align_t) - 1);
	struct wb_pool *c = *pool;
	if (!c || c->cap - c->used < need) {
		size_t cap = c ? 2 * c->cap : 64 << 10;
		if (cap > (8u << 20))
			cap = 8u << 20;
		if (cap < need)
			cap = need;
		struct wb_pool *nc = malloc(sizeof(*nc) + cap);
		if (!nc)
			return NULL;
		nc->next = c;
		nc->used = 0;
		nc->cap = cap;
		*pool = c = nc;
	}
	char *p = (char *)c->data + c->used;
	c->used += need;
	if (zero)
		memset(p, 0, n * elem_size);
	return p;
}

static void pool_free(struct wb_pool **pool)
{
	for (struct wb_pool *c = *pool, *next; c; c = next) {
		next = c->next;
		free(c);
	}
	*pool = NULL;
}

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

/* The message for rd_val's fault rc at the value that starts at at. */
static int rd_fail(const struct reader *r, int rc, const struct mval *v, const uint8_t *at,
		   struct wb_err *err)
{
	size_t left = (size_t)(r->end - r->p);
	switch (rc) {
	case RD_END:
		return fail(err, WB_R_MALFORMED, NULL,
			    "truncated: frame ends inside an object (%zu bytes)",
			    (size_t)(r->end - r->start));
	case RD_BAD:
		return fail(err, WB_R_MALFORMED, NULL,
			    "invalid msgpack type byte 0x%02x at offset %zu", *at,
			    (size_t)(at - r->start));
	case RD_HEAD:
		if (*at >= 0xdc)
			return fail(err, WB_R_MALFORMED, NULL, "truncated container header");
		return fail(err, WB_R_MALFORMED, NULL, "truncated header of type byte 0x%02x", *at);
	case RD_BODY:
		return fail(err, WB_R_MALFORMED, NULL,
			    "truncated: a %llu-byte value with %zu bytes left",
			    (unsigned long long)v->u, left);
	case RD_ITEMS:
		return fail(err, WB_R_MALFORMED, NULL,
			    "truncated: a container of %llu items with %zu bytes left",
			    (unsigned long long)v->u, left);
	default:
		return fail(err, WB_R_TOO_BIG, NULL, "more than %u objects in one frame",
			    WB_OBJECTS_MAX);
	}
}

/*
 * Pass over exactly one value at r->p, its items included, with containers
 * nested at most max_depth deep. The structural rules of a frame, written
 * once: the check of a frame and the skipping of an unknown key's value.
 */
static int walk_one(struct reader *r, int max_depth, struct wb_err *err)
{
	uint64_t stack[WB_DEPTH_MAX + 1];
	int depth = 0;
	uint64_t todo = 1;

	if (max_depth > WB_DEPTH_MAX)
		max_depth = WB_DEPTH_MAX;
	for (;;) {
		while (todo == 0) {
			if (depth == 0)
				return 0;
			todo = stack[--depth];
		}
		todo--;
		struct mval v;
		const uint8_t *at = r->p;
		int rc = rd_val(r, &v);
		if (rc < 0)
			return rd_fail(r, rc, &v, at, err);
		uint64_t items = v.t == MV_MAP ? 2ull * v.n : v.t == MV_ARR ? v.n : 0;
		if (items) {
			if (depth >= max_depth)
				return fail(err, WB_R_MALFORMED, NULL,
					    "nested deeper than %d levels", max_depth);
			stack[depth++] = todo;
			todo = items;
		}
	}
}

int wb_msgpack_check(const void *buf, size_t len, int max_depth, struct wb_err *err)
{
	struct reader r = {buf, buf, (const uint8_t *)buf + len, 0, NULL, 0};
	if (walk_one(&r, max_depth, err) < 0)
		return -1;
	if (r.p != r.end)
		return fail(err, WB_R_TRAILING, NULL, "%zu trailing bytes after the map",
			    (size_t)(r.end - r.p));
	return 0;
}

/* ---- decoding ---- */

/* Pass over the value at r->p, within depth open containers. */
static int rd_skip(struct reader *r, int depth)
{
	return walk_one(r, WB_DEPTH_MAX - depth, NULL);
}

static int decode_map(struct reader *r, uint32_t n, const struct wb_type *t, char *dst,
		      const struct path *at, int depth, struct wb_err *err);

static int decode_container(struct reader *r, const struct mval *o, const struct wb_field *f,
			    char *dst, const struct path *at, int depth, struct wb_err *err);

/*
 * Decode the value at r->p into field f of dst; depth: containers open around
 * it. Scalars are stored here, inlined into the loops over keys and items.
 */
static inline __attribute__((always_inline)) int decode_value(struct reader *r,
							      const struct wb_field *f, char *dst,
							      const struct path *at, int depth,
							      struct wb_err *err)
{
	struct mval o;
	if (rd_val(r, &o) < 0)
		return -1;
	switch (f->type) {
	case WB_T_U64:
		if (o.t == MV_NEG)
			return fail(err, WB_R_BOUND, at, "%lld is below the minimum %llu",
				    (long long)o.i, (unsigned long long)f->umin);
		if (o.t != MV_POS)
			return fail(err, WB_R_TYPE, at, "expected an unsigned integer, got %s",
				    type_name(o.t));
		if (o.u < f->umin || o.u > f->umax)
			return fail(err, WB_R_BOUND, at, "%llu is outside [%llu, %llu]",
				    (unsigned long long)o.u, (unsigned long long)f->umin,
				    (unsigned long long)f->umax);
		*(uint64_t *)(dst + f->off) = o.u;
		return 0;
	case WB_T_I64: {
		int64_t v;
		if (o.t == MV_NEG)
			v = o.i;
		else if (o.t == MV_POS && o.u <= INT64_MAX)
			v = (int64_t)o.u;
		else if (o.t == MV_POS)
			return fail(err, WB_R_BOUND, at,
				    "%llu does not fit a signed 64-bit integer",
				    (unsigned long long)o.u);
		else
			return fail(err, WB_R_TYPE, at, "expected an integer, got %s",
				    type_name(o.t));
		if (v < f->imin || v > f->imax)
			return fail(err, WB_R_BOUND, at, "%lld is outside [%lld, %lld]",
				    (long long)v, (long long)f->imin, (long long)f->imax);
		*(int64_t *)(dst + f->off) = v;
		return 0;
	}
	case WB_T_F64: {
		double v;
		if (o.t == MV_FLOAT)
			v = o.f;
		else if (o.t == MV_POS)
			v = (double)o.u;
		else if (o.t == MV_NEG)
			v = (double)o.i;
		else
			return fail(err, WB_R_TYPE, at, "expected a number, got %s",
				    type_name(o.t));
		if (!isfinite(v))
			return fail(err, WB_R_BOUND, at, "%g is not a finite number", v);
		if (v < f->fmin || v > f->fmax)
			return fail(err, WB_R_BOUND, at, "%g is outside [%g, %g]", v, f->fmin,
				    f->fmax);
		*(double *)(dst + f->off) = v;
		return 0;
	}
	case WB_T_BOOL:
		if (o.t != MV_BOOL)
			return fail(err, WB_R_TYPE, at, "expected a boolean, got %s",
				    type_name(o.t));
		*(bool *)(dst + f->off) = o.b;
		return 0;
	case WB_T_STR: {
		if (o.t != MV_STR)
			return fail(err, WB_R_TYPE, at, "expected a string, got %s",
				    type_name(o.t));
		uint32_t n = o.s.n;
		if (n > f->max_len || n < f->min_len)
			return fail(err, WB_R_BOUND, at, "string of %u bytes, allowed %u to %u", n,
				    f->min_len, f->max_len);
		if (memchr(o.s.ptr, '\0', n))
			return fail(err, WB_R_TYPE, at, "string contains a NUL byte");
		if (!utf8_valid((const unsigned char *)o.s.ptr, n))
			return fail(err, WB_R_TYPE, at, "string is not valid UTF-8");
		uint32_t cp;
		long bad;
		if (f->ident && (bad = ident_bad((const unsigned char *)o.s.ptr, n, &cp)) >= 0)
			return fail(err, WB_R_TYPE, at,
				    "control character U+%04X at byte %ld (a name holds none)", cp,
				    bad);
		memcpy(dst + f->off, o.s.ptr, n);
		dst[f->off + n] = '\0';
		return 0;
	}
	case WB_T_OBJ:
	case WB_T_ARR:
		return decode_container(r, &o, f, dst, at, depth, err);
	}
	return fail(err, WB_R_TYPE, at, "field type %d unknown to the codec", f->type);
}

/*
 * A map of type t (fast: scalars, strings and arrays of integers only) at r->p
 * written as the encoder writes it: a fixmap, its keys in table order as fixstr,
 * every value of its field's type and within bounds, no nil. Then it is read
 * here in one tight pass and true returned. At anything else nothing is kept
 * (r unchanged) and false returned: the general path reads the map again and
 * gives the verdict, so the rules and the messages are the general path's.
 */
bool wb_codec_fast = true;

/*
 * Whether the n bytes at s are ASCII without a NUL, 8 at a time (a word has a
 * zero byte when (w - 0x01..) & ~w & 0x80.. is not 0): what comm, container
 * ids and paths are. Other strings go to the general path, which tells a NUL
 * from bad UTF-8 and takes valid UTF-8.
 */
static inline bool ascii_no_nul(const uint8_t *s, size_t n)
{
	const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		uint64_t w;
		memcpy(&w, s + i, sizeof(w));
		if (((w - ones) & ~w & highs) | (w & highs))
			return false;
	}
	for (; i < n; i++)
		if (!s[i] || s[i] >= 0x80)
			return false;
	return true;
}

/* An identity's ASCII bytes hold no control character (the general path says which). */
static inline bool ascii_printable(const uint8_t *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (s[i] < 0x20 || s[i] == 0x7f)
			return false;
	return true;
}

static bool fast_map(struct reader *r, const struct wb_type *t, char *dst)
{
	const uint8_t *p = r->p, *end = r->end;
	uint64_t objects = r->objects;
	if (p >= end || (*p & 0xf0) != 0x80)
		return false;
	uint32_t n = *p++ & 0x0f, fi = 0;
	objects += 2 * n;
	for (uint32_t k = 0; k < n; k++) {
		if (end - p < 16 + 9)
			return false;
		uint64_t lo, hi;
		memcpy(&lo, p, 8);
		memcpy(&hi, p + 8, 8);
		lo = le64toh(lo);
		hi = le64toh(hi);
		const struct wb_field *f = NULL;
		for (; fi < t->nfields; fi++) {
			const struct wb_field *c = &t->fields[fi];
			if ((lo & c->wmask[0]) == c->wire[0] && (hi & c->wmask[1]) == c->wire[1]) {
				f = c;
				break;
			}
			if (c->required)
				return false;
		}
		if (!f)
			return false;
		fi++;
		p += f->wire_len;
		uint8_t b = *p;
		uint64_t v;
		const uint8_t *next;
		switch (f->type) {
		case WB_T_U64:
		case WB_T_I64:
			if (!(next = rd_uint(p, &v)) ||
			    (f->type == WB_T_U64
				 ? v < f->umin || v > f->umax
				 : v > INT64_MAX || (int64_t)v < f->imin || (int64_t)v > f->imax))
				return false;
			memcpy(dst + f->off, &v, 8);
			p = next;
			break;
		case WB_T_BOOL:
			if ((b & 0xfe) != 0xc2)
				return false;
			*(bool *)(dst + f->off) = b == 0xc3;
			p++;
			break;
		case WB_T_STR: {
			uint32_t len;
			if ((b & 0xe0) == 0xa0)
				len = b & 0x1f, p++;
			else if (b == 0xd9)
				len = p[1], p += 2;
			else
				return false;
			if (len > f->max_len || len < f->min_len || (size_t)(end - p) < len ||
			    !ascii_no_nul(p, len) || (f->ident && !ascii_printable(p, len)))
				return false;
			memcpy(dst + f->off, p, len);
			dst[f->off + len] = '\0';
			p += len;
			break;
		}
		case WB_T_ARR: {
			/* of integers (schemagen marks only such types fast) */
			if ((b & 0xf0) != 0x90)
				return false;
			uint32_t m = b & 0x0f;
			p++;
			if (m > f->max_len || m < f->min_len)
				return false;
			objects += m;
			uint64_t *u = NULL;
			if (m && !(u = pool_alloc(r->pool, m, sizeof(uint64_t), false)))
				return false;
			const struct wb_field *e = f->elem;
			for (uint32_t j = 0; j < m; j++) {
				next = end - p < 9 ? NULL : rd_uint(p, &v);
				if (!next || v < e->umin || v > e->umax)
					return false;
				u[j] = v;
				p = next;
			}
			*(uint64_t **)(dst + f->off) = u;
			*(size_t *)(dst + f->off_n) = m;
			break;
		}
		default:
			return false;
		}
	}
	if (fi < 64 && (t->req >> fi) != 0)
		return false; /* a required key after the last one read is missing */
	if (objects > WB_OBJECTS_MAX)
		return false;
	r->p = p;
	r->objects = objects;
	return true;
}

/* A map or array value o (its items at r->p) into field f of dst. */
static int decode_container(struct reader *r, const struct mval *o, const struct wb_field *f,
			    char *dst, const struct path *at, int depth, struct wb_err *err)
{
	if (f->type == WB_T_OBJ) {
		if (o->t != MV_MAP)
			return fail(err, WB_R_TYPE, at, "expected a map, got %s", type_name(o->t));
		return decode_map(r, o->n, f->obj, dst + f->off, at, depth + (o->n > 0), err);
	}
	if (o->t != MV_ARR)
		return fail(err, WB_R_TYPE, at, "expected an array, got %s", type_name(o->t));
	uint32_t n = o->n;
	if (n > f->max_len || n < f->min_len)
		return fail(err, WB_R_BOUND, at, "array of %u items, allowed %u to %u", n,
			    f->min_len, f->max_len);
	if (n && depth >= WB_DEPTH_MAX)
		return -1;
	char *items = NULL;
	/* Maps are zeroed one by one as they are read, each right before it is filled (one pass
	 * over the array, not two); every integer item is stored, or the frame is refused. */
	bool per_item = f->elem->type == WB_T_OBJ;
	if (n) {
		bool zero = !per_item && f->elem->type != WB_T_U64;
		if (r->in_items)
			items = pool_alloc(r->pool, n, f->size, zero);
		else
			items = zero ? wb_array_new(n, f->size) : reallocarray(NULL, n, f->size);
		if (!items)
			return fail(err, WB_R_TOO_BIG, at, "cannot allocate %u items", n);
	}
	*(char **)(dst + f->off) = items;
	*(size_t *)(dst + f->off_n) = 0;
	uint32_t i = 0;
	if (f->elem->type == WB_T_U64) {
		/* Energies per zone: positive integers, read here; anything else, or a value
		 * out of bounds, goes to decode_value below for its verdict. */
		const struct wb_field *e = f->elem;
		uint64_t *u = (uint64_t *)items;
		for (; i < n && r->end - r->p >= 9; i++) {
			uint64_t v;
			const uint8_t *next = rd_uint(r->p, &v);
			if (!next || v < e->umin || v > e->umax)
				break;
			u[i] = v;
			r->p = next;
		}
	}
	r->in_items++;
	/* Items of a fast type, unless too deep for the general path to read them. */
	bool fast = wb_codec_fast && f->elem->type == WB_T_OBJ && f->elem->obj->fast &&
		    depth + 2 <= WB_DEPTH_MAX;
	for (; i < n; i++) {
		char *item = items + (size_t)i * f->size;
		if (per_item)
			memset(item, 0, f->size);
		if (fast) {
			if (fast_map(r, f->elem->obj, item))
				continue;
			memset(item, 0,
			       f->size); /* what it read goes: the general path reads again */
		}
		struct path p = {at, NULL, i};
		if (decode_value(r, f->elem, item, &p, depth + 1, err) < 0) {
			/* Count the items decoded so far, so clear frees what they hold. */
			*(size_t *)(dst + f->off_n) = i + 1;
			r->in_items--;
			return -1;
		}
	}
	r->in_items--;
	*(size_t *)(dst + f->off_n) = n;
	return 0;
}

/*
 * Keys on the wire may hold NUL bytes: compare lengths first, then bytes. A key
 * with 8 bytes of frame after its start (every key but the last bytes of a
 * frame) compares its first 8 bytes as one number, most keys whole.
 */
static inline bool key_is(const struct wb_field *f, const char *key, uint32_t len,
			  const uint8_t *end)
{
	if (f->key_len != len)
		return false;
	if (end - (const uint8_t *)key < 8)
		return memcmp(f->key, key, len) == 0;
	uint64_t w;
	memcpy(&w, key, sizeof(w));
	w = le64toh(w);
	if (len < 8)
		w &= (1ull << (8 * len)) - 1;
	return w == f->key8 && (len <= 8 || memcmp(f->key + 8, key + 8, len - 8) == 0);
}

/* Find key in t (or its flat envelope); returns the field and where its struct sits. */
static const struct wb_field *find_field(const struct wb_type *t, char *dst, const char *key,
					 uint32_t len, const uint8_t *end, uint32_t hint,
					 char **base, int *slot)
{
	/* Encoders write keys in table order and leave out optional ones that hold zero: the key
	 * is most likely the hint or one of the fields after it, so look there first, then wrap
	 * around. */
	for (uint32_t k = 0; k < t->nfields; k++) {
		uint32_t i = hint + k < t->nfields ? hint + k : hint + k - t->nfields;
		const struct wb_field *f = &t->fields[i];
		if (f->type == WB_T_FLAT) {
			const struct wb_type *ft = f->obj;
			for (uint32_t j = 0; j < ft->nfields; j++)
				if (key_is(&ft->fields[j], key, len, end)) {
					*base = dst + f->off;
					*slot = 64 + (int)j;
					return &ft->fields[j];
				}
		} else if (key_is(f, key, len, end)) {
			*base = dst;
			*slot = (int)i;
			return f;
		}
	}
	return NULL;
}

/*
 * The field whose key, as an encoder writes it, starts at p (16 bytes readable),
 * looked for from hint on; NULL when none does (a key written in another form, an
 * unknown key or an envelope key: find_field then reads it).
 */
static inline const struct wb_field *find_wire(const struct wb_type *t, const uint8_t *p,
					       uint32_t hint, int *slot)
{
	uint64_t lo, hi;
	memcpy(&lo, p, 8);
	memcpy(&hi, p + 8, 8);
	lo = le64toh(lo);
	hi = le64toh(hi);
	for (uint32_t k = 0; k < t->nfields; k++) {
		uint32_t i = hint + k < t->nfields ? hint + k : hint + k - t->nfields;
		const struct wb_field *f = &t->fields[i];
		if (!f->wire_len || (lo & f->wmask[0]) != f->wire[0] ||
		    (hi & f->wmask[1]) != f->wire[1])
			continue;
		*slot = (int)i;
		return f;
	}
	return NULL;
}

static int check_required(const struct wb_type *t, uint64_t seen, uint64_t seen_flat,
			  const struct path *at, struct wb_err *err)
{
	if ((seen & t->req) == t->req &&
	    (!t->nfields || t->fields[0].type != WB_T_FLAT ||
	     (seen_flat & t->fields[0].obj->req) == t->fields[0].obj->req))
		return 0;
	for (uint32_t i = 0; i < t->nfields; i++) {
		const struct wb_field *f = &t->fields[i];
		if (f->type == WB_T_FLAT) {
			for (uint32_t j = 0; j < f->obj->nfields; j++)
				if (f->obj->fields[j].required && !(seen_flat & (1ull << j)))
					return fail(err, WB_R_MISSING, at,
						    "missing required key '%s'",
						    f->obj->fields[j].key);
		} else if (f->required && !(seen & (1ull << i))) {
			return fail(err, WB_R_MISSING, at, "missing required key '%s'", f->key);
		}
	}
	return 0;
}

/* The n pairs of a map at r->p into dst, of type t; depth: containers open, this one included. */
static int decode_map(struct reader *r, uint32_t n, const struct wb_type *t, char *dst,
		      const struct path *at, int depth, struct wb_err *err)
{
	if (n && depth > WB_DEPTH_MAX)
		return -1;
	uint64_t seen = 0, seen_flat = 0;
	uint32_t hint = 0; /* encoders write keys in table order: try the next field first */
	for (uint32_t i = 0; i < n; i++) {
		char *base = dst;
		int slot;
		const struct wb_field *f = NULL;
		if (r->end - r->p >= 16 && (f = find_wire(t, r->p, hint, &slot)))
			r->p += f->wire_len;
		else {
			struct mval k;
			if (rd_val(r, &k) < 0)
				return -1;
			if (k.t != MV_STR)
				return fail(err, WB_R_TYPE, at, "map key %u is %s, not a string", i,
					    type_name(k.t));
			f = find_field(t, dst, k.s.ptr, k.s.n, r->end, hint, &base, &slot);
			if (!f) {
				if (rd_skip(r, depth) < 0) /* unknown keys are ignored */
					return -1;
				continue;
			}
		}
		if (slot < 64)
			hint = (uint32_t)slot + 1;
		struct path p = {at, f->key, 0};
		uint64_t *mask = slot >= 64 ? &seen_flat : &seen;
		uint64_t bit = 1ull << (slot % 64);
		if (*mask & bit)
			return fail(err, WB_R_DUPLICATE, &p, "key appears twice");
		*mask |= bit;
		if (r->p < r->end && *r->p == 0xc0 && !f->required) {
			r->p++; /* nil stands for an absent optional key */
			continue;
		}
		if (decode_value(r, f, base, &p, depth, err) < 0)
			return -1;
	}
	return check_required(t, seen, seen_flat, at, err);
}

/*
 * The top-level values of "kind" and "v", which say how to read the rest. The
 * encoder writes them first, so this usually reads two pairs; it passes over
 * other values (and keys that are not strings) until it has both.
 */
static int find_kind_v(struct reader *r, uint32_t n, struct mval *kind, bool *has_kind,
		       struct mval *v, bool *has_v)
{
	*has_kind = *has_v = false;
	for (uint32_t i = 0; i < n && !(*has_kind && *has_v); i++) {
		struct mval k;
		const uint8_t *at = r->p;
		if (rd_val(r, &k) < 0)
			return -1;
		if (k.t != MV_STR) {
			r->p = at;
			if (rd_skip(r, 1) < 0 || rd_skip(r, 1) < 0)
				return -1;
			continue;
		}
		bool is_kind = k.s.n == 4 && memcmp(k.s.ptr, "kind", 4) == 0 && !*has_kind;
		bool is_v = k.s.n == 1 && k.s.ptr[0] == 'v' && !*has_v;
		if (!is_kind && !is_v) {
			if (rd_skip(r, 1) < 0)
				return -1;
			continue;
		}
		at = r->p;
		struct mval *val = is_kind ? kind : v;
		if (rd_val(r, val) < 0)
			return -1;
		r->p = at; /* a container's items: pass over them whole */
		if (rd_skip(r, 1) < 0)
			return -1;
		*(is_kind ? has_kind : has_v) = true;
	}
	return 0;
}

static int decode_frame(struct reader *r, struct wb_msg *out, struct wb_err *err)
{
	struct mval root;
	if (rd_val(r, &root) < 0)
		return -1;
	if (root.t != MV_MAP)
		return fail(err, WB_R_NOT_MAP, NULL, "top level is %s, not a map",
			    type_name(root.t));
	const uint8_t *body = r->p;
	uint64_t objects = r->objects;
	struct mval k, v;
	bool has_k, has_v;
	if (find_kind_v(r, root.n, &k, &has_k, &v, &has_v) < 0)
		return -1;
	if (!has_k)
		return fail(err, WB_R_KIND, NULL, "kind: missing required key 'kind'");
	if (k.t != MV_STR)
		return fail(err, WB_R_KIND, NULL, "kind: expected a string, got %s",
			    type_name(k.t));
	enum wb_kind kind = wb_kind_from_name(k.s.ptr, k.s.n);
	if (kind == WB_KIND_NONE)
		return fail(err, WB_R_KIND, NULL, "kind: unknown kind '%.*s'",
			    (int)(k.s.n > 32 ? 32 : k.s.n), k.s.ptr);
	if (!has_v)
		return fail(err, WB_R_VERSION, NULL, "v: missing required key 'v'");
	if (v.t != MV_POS)
		return fail(err, WB_R_VERSION, NULL, "v: expected an unsigned integer, got %s",
			    type_name(v.t));
	if (v.u != wb_kinds[kind].version)
		return fail(err, WB_R_VERSION, NULL,
			    "v: version %llu of %s is unknown (this build reads v%u)",
			    (unsigned long long)v.u, wb_kinds[kind].name, wb_kinds[kind].version);
	out->kind = kind;
	r->p = body;
	r->objects = objects;
	if (decode_map(r, root.n, wb_kinds[kind].type, (char *)&out->env, NULL, root.n > 0, err) <
	    0)
		return -1;
	if (r->p != r->end)
		return -1; /* trailing bytes: the check names them */
	return 0;
}

int wb_decode(const void *buf, size_t len, struct wb_msg *out, struct wb_err *err)
{
	memset(out, 0, sizeof(*out));
	out->kind = WB_KIND_NONE;
	if (len > WB_FRAME_MAX)
		return fail(err, WB_R_TOO_BIG, NULL, "frame of %zu bytes exceeds %u", len,
			    WB_FRAME_MAX);
	if (len == 0)
		return fail(err, WB_R_MALFORMED, NULL, "empty frame");
	struct reader r = {buf, buf, (const uint8_t *)buf + len, 0, &out->pool, 0};
	struct wb_err mine;
	mine.reason = WB_R_MALFORMED;
	snprintf(mine.msg, sizeof(mine.msg), "malformed msgpack");
	if (decode_frame(&r, out, &mine) == 0)
		return 0;
	/* A frame's structure is judged before its schema, as when the check ran first. */
	if (wb_msgpack_check(buf, len, WB_DEPTH_MAX, err) == 0 && err)
		*err = mine;
	wb_msg_clear(out);
	return -1;
}

void *wb_array_new(size_t n, size_t elem_size)
{
	if (n == 0)
		n = 1;
	return calloc(n, elem_size);
}

/* pool: the message has one, which holds every array inside array items. */
static void clear_obj(const struct wb_type *t, char *obj, bool pool)
{
	for (uint32_t k = 0; k < t->nown; k++) {
		const struct wb_field *f = &t->fields[t->own[k]];
		if (f->type != WB_T_ARR) {
			clear_obj(f->obj, obj + f->off, pool);
			continue;
		}
		char **items = (char **)(obj + f->off);
		size_t n = *(size_t *)(obj + f->off_n);
		/* Items of scalars and fixed strings only (processes) need no walk, nor items
		 * whose arrays are in the pool. */
		if (*items && f->elem->type == WB_T_OBJ && f->elem->obj->nown && !pool)
			for (size_t j = 0; j < n; j++)
				clear_obj(f->elem->obj, *items + j * f->size, false);
		free(*items);
		*items = NULL;
		*(size_t *)(obj + f->off_n) = 0;
	}
}

void wb_msg_clear(struct wb_msg *msg)
{
	if (!msg)
		return;
	if (msg->kind >= 0 && msg->kind < WB_NKINDS)
		clear_obj(wb_kinds[msg->kind].type, (char *)&msg->env, msg->pool != NULL);
	pool_free(&msg->pool);
	memset(msg, 0, sizeof(*msg));
	msg->kind = WB_KIND_NONE;
}

/* ---- encoding ---- */

static bool obj_is_empty(const struct wb_field *f, const char *src);

static inline __attribute__((always_inline)) bool is_empty(const struct wb_field *f,
							   const char *src)
{
	switch (f->type) {
	case WB_T_OBJ:
		return obj_is_empty(f, src);
	case WB_T_U64:
		return *(const uint64_t *)(src + f->off) == 0;
	case WB_T_I64:
		return *(const int64_t *)(src + f->off) == 0;
	case WB_T_F64:
		return *(const double *)(src + f->off) == 0.0;
	case WB_T_BOOL:
		return !*(const bool *)(src + f->off);
	case WB_T_STR:
		return src[f->off] == '\0';
	case WB_T_ARR:
		return *(const size_t *)(src + f->off_n) == 0;
	default:
		return false;
	}
}

/* An optional map whose keys are all optional and empty is left out. */
static bool obj_is_empty(const struct wb_field *f, const char *src)
{
	for (uint32_t i = 0; i < f->obj->nfields; i++)
		if (f->obj->fields[i].required || !is_empty(&f->obj->fields[i], src + f->off))
			return false;
	return true;
}

/*
 * The encoder writes msgpack straight into a msgpack_sbuffer: each key and its
 * value go in with one capacity check and plain stores, the same bytes
 * msgpack-c's packer writes (the smallest form of each integer, float64,
 * str8 for 32 to 255 bytes; tests/unit/test_codec.c compares the two), without
 * a callback and a memcpy per item.
 */
static int grow(msgpack_sbuffer *sb, size_t need)
{
	size_t cap = sb->alloc ? sb->alloc : 8192;
	while (cap - sb->size < need)
		cap *= 2;
	char *p = realloc(sb->data, cap);
	if (!p)
		return -1;
	sb->data = p;
	sb->alloc = cap;
	return 0;
}

static inline int reserve(msgpack_sbuffer *sb, size_t need)
{
	return sb->alloc - sb->size >= need ? 0 : grow(sb, need);
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

/* Keys of t that are present in src; only for a map that may hold more than 15 keys (see
 * encode_obj). */
static uint32_t count_keys(const struct wb_type *t, const char *src)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < t->nfields; i++) {
		const struct wb_field *f = &t->fields[i];
		if (f->type == WB_T_FLAT)
			n += count_keys(f->obj, src + f->off);
		else if (f->required || !is_empty(f, src))
			n++;
	}
	return n;
}

static int encode_obj(msgpack_sbuffer *sb, const struct wb_type *t, const char *src, bool open_map,
		      uint32_t *nkeys, const struct path *at, struct wb_err *err);

/* Per-zone energies of every process: an array of integers with one capacity check. */
static int encode_u64s(msgpack_sbuffer *sb, const struct wb_field *f, const char *items, size_t n,
		       const struct path *at, struct wb_err *err)
{
	const struct wb_field *e = f->elem;
	if (reserve(sb, n * 9) < 0)
		return -1;
	unsigned char *w = (unsigned char *)sb->data + sb->size;
	for (size_t i = 0; i < n; i++) {
		uint64_t v = *(const uint64_t *)(items + i * f->size + e->off);
		if (v < e->umin || v > e->umax) {
			struct path p = {at, NULL, i};
			return fail(err, WB_R_BOUND, &p, "%llu is outside [%llu, %llu]",
				    (unsigned long long)v, (unsigned long long)e->umin,
				    (unsigned long long)e->umax);
		}
		w = put_uint(w, v);
	}
	sb->size = (size_t)((char *)w - sb->data);
	return 0;
}

/* A field's key (none when key is NULL), room reserved (16 bytes at least). */
static inline unsigned char *put_key(unsigned char *w, const struct wb_field *key)
{
	if (key && key->wire_len) {
		uint64_t lo = htole64(key->wire[0]), hi = htole64(key->wire[1]);
		memcpy(w, &lo, 8);
		memcpy(w + 8, &hi, 8);
		return w + key->wire_len;
	}
	if (key) {
		w = PUT_STR_HDR(w, key->key_len);
		memcpy(w, key->key, key->key_len);
		w += key->key_len;
	}
	return w;
}

static int encode_container(msgpack_sbuffer *sb, const struct wb_field *key,
			    const struct wb_field *f, const char *src, const struct path *at,
			    struct wb_err *err);

/*
 * Field f of src, after its key when key is not NULL; scalars inline, maps and
 * arrays a call. reserved: the map's room was made at once (its type's wire_max).
 */
static inline __attribute__((always_inline)) int
encode_value(msgpack_sbuffer *sb, const struct wb_field *key, const struct wb_field *f,
	     const char *src, bool reserved, const struct path *at, struct wb_err *err)
{
	/* A producer gets the same bounds a receiver applies: fail loudly here rather
	 * than have every frame rejected downstream. */
	size_t need = 9; /* the largest scalar */
	const char *s = NULL;
	size_t n = 0;
	switch (f->type) {
	case WB_T_U64: {
		uint64_t v = *(const uint64_t *)(src + f->off);
		if (v < f->umin || v > f->umax)
			return fail(err, WB_R_BOUND, at, "%llu is outside [%llu, %llu]",
				    (unsigned long long)v, (unsigned long long)f->umin,
				    (unsigned long long)f->umax);
		break;
	}
	case WB_T_I64: {
		int64_t v = *(const int64_t *)(src + f->off);
		if (v < f->imin || v > f->imax)
			return fail(err, WB_R_BOUND, at, "%lld is outside [%lld, %lld]",
				    (long long)v, (long long)f->imin, (long long)f->imax);
		break;
	}
	case WB_T_F64: {
		double v = *(const double *)(src + f->off);
		if (!isfinite(v) || v < f->fmin || v > f->fmax)
			return fail(err, WB_R_BOUND, at, "%g is outside [%g, %g]", v, f->fmin,
				    f->fmax);
		break;
	}
	case WB_T_BOOL:
		break;
	case WB_T_STR:
		s = src + f->off;
		n = strnlen(s, f->size);
		if (n >= f->size)
			return fail(err, WB_R_BOUND, at, "string is not NUL-terminated");
		if (n < f->min_len)
			return fail(err, WB_R_BOUND, at, "string of %zu bytes, allowed %u to %u", n,
				    f->min_len, f->max_len);
		if (!utf8_valid((const unsigned char *)s, n))
			return fail(err, WB_R_TYPE, at, "string is not valid UTF-8");
		uint32_t cp;
		long bad;
		if (f->ident && (bad = ident_bad((const unsigned char *)s, n, &cp)) >= 0)
			return fail(err, WB_R_TYPE, at,
				    "control character U+%04X at byte %ld (a name holds none)", cp,
				    bad);
		need = HDR_MAX + n;
		break;
	case WB_T_OBJ:
	case WB_T_ARR:
		return encode_container(sb, key, f, src, at, err);
	default:
		return fail(err, WB_R_TYPE, at, "field type %d unknown to the codec", f->type);
	}
	if (key)
		need += 16 + HDR_MAX + key->key_len;
	if (!reserved && reserve(sb, need) < 0)
		return -1;
	unsigned char *w = put_key((unsigned char *)sb->data + sb->size, key);
	switch (f->type) {
	case WB_T_U64:
		w = put_uint(w, *(const uint64_t *)(src + f->off));
		break;
	case WB_T_I64:
		w = put_int(w, *(const int64_t *)(src + f->off));
		break;
	case WB_T_F64: {
		uint64_t bits;
		memcpy(&bits, src + f->off, sizeof(bits));
		*w++ = 0xcb;
		w = be(w, bits, 8);
		break;
	}
	case WB_T_BOOL:
		*w++ = *(const bool *)(src + f->off) ? 0xc3 : 0xc2;
		break;
	case WB_T_STR:
		w = PUT_STR_HDR(w, n);
		memcpy(w, s, n);
		w += n;
		break;
	default:
		break;
	}
	sb->size = (size_t)((char *)w - sb->data);
	return 0;
}

/* A map or array field f of src, after its key when key is not NULL. */
static int encode_container(msgpack_sbuffer *sb, const struct wb_field *key,
			    const struct wb_field *f, const char *src, const struct path *at,
			    struct wb_err *err)
{
	size_t need = HDR_MAX;
	size_t n = 0;
	const char *items = NULL;
	if (f->type == WB_T_ARR) {
		items = *(char *const *)(src + f->off);
		n = *(const size_t *)(src + f->off_n);
		if (n > f->max_len || n < f->min_len)
			return fail(err, WB_R_BOUND, at, "array of %zu items, allowed %u to %u", n,
				    f->min_len, f->max_len);
		if (n && !items)
			return fail(err, WB_R_MISSING, at, "%zu items but no array", n);
	}
	if (key)
		need += 16 + HDR_MAX + key->key_len;
	if (reserve(sb, need) < 0)
		return -1;
	unsigned char *w = put_key((unsigned char *)sb->data + sb->size, key);
	if (f->type == WB_T_OBJ) {
		sb->size = (size_t)((char *)w - sb->data);
		return encode_obj(sb, f->obj, src + f->off, true, NULL, at, err);
	}
	w = PUT_ARR_HDR(w, n);
	sb->size = (size_t)((char *)w - sb->data);
	if (f->elem->type == WB_T_U64)
		return encode_u64s(sb, f, items, n, at, err);
	for (size_t i = 0; i < n; i++) {
		struct path p = {at, NULL, i};
		if (encode_value(sb, NULL, f->elem, items + i * f->size, false, &p, err) < 0)
			return -1;
	}
	return 0;
}

/*
 * A map of a fast type (every per-process map) in one tight pass, room made
 * once: 0, or -1 when memory runs out, or 1 at a value the schema refuses,
 * with nothing kept: the general path then writes the map and names the fault.
 */
static int encode_fast(msgpack_sbuffer *sb, const struct wb_type *t, const char *src)
{
	size_t need = t->wire_max;
	for (uint32_t k = 0; k < t->nown; k++) /* its arrays */
		need += 9 * *(const size_t *)(src + t->fields[t->own[k]].off_n);
	if (reserve(sb, need) < 0)
		return -1;
	unsigned char *hdr = (unsigned char *)sb->data + sb->size, *w = hdr + 1;
	unsigned n = 0;
	for (uint32_t i = 0; i < t->nfields; i++) {
		const struct wb_field *f = &t->fields[i];
		const char *at = src + f->off;
		switch (f->type) {
		case WB_T_U64: {
			uint64_t v = *(const uint64_t *)at;
			if (!v && !f->required)
				continue;
			if (v < f->umin || v > f->umax)
				return 1;
			w = put_uint(put_key(w, f), v);
			break;
		}
		case WB_T_I64: {
			int64_t v = *(const int64_t *)at;
			if (!v && !f->required)
				continue;
			if (v < f->imin || v > f->imax)
				return 1;
			w = put_int(put_key(w, f), v);
			break;
		}
		case WB_T_BOOL:
			if (!*(const bool *)at && !f->required)
				continue;
			w = put_key(w, f);
			*w++ = *(const bool *)at ? 0xc3 : 0xc2;
			break;
		case WB_T_STR: {
			if (!at[0] && !f->required)
				continue;
			size_t len = strnlen(at, f->size);
			uint32_t cp;
			if (len >= f->size || len < f->min_len ||
			    !utf8_valid((const unsigned char *)at, len) ||
			    (f->ident && ident_bad((const unsigned char *)at, len, &cp) >= 0))
				return 1;
			w = PUT_STR_HDR(put_key(w, f), len);
			memcpy(w, at, len);
			w += len;
			break;
		}
		case WB_T_ARR: {
			const uint64_t *items = *(const uint64_t *const *)at;
			size_t m = *(const size_t *)(src + f->off_n);
			if (!m && !f->required)
				continue;
			if (m > f->max_len || m < f->min_len || (m && !items))
				return 1;
			w = PUT_ARR_HDR(put_key(w, f), m);
			for (size_t j = 0; j < m; j++) {
				if (items[j] < f->elem->umin || items[j] > f->elem->umax)
					return 1;
				w = put_uint(w, items[j]);
			}
			break;
		}
		default:
			return 1;
		}
		n++;
	}
	*hdr = (unsigned char)(0x80 | n);
	sb->size = (size_t)((char *)w - sb->data);
	return 0;
}

/*
 * One pass: a map that can hold at most 15 keys (every per-process and per-zone
 * map) gets its one-byte fixmap header patched with the count once its keys
 * are written; only a larger map counts its keys first, so the bytes are the
 * canonical encoding either way.
 */
static int encode_obj(msgpack_sbuffer *sb, const struct wb_type *t, const char *src, bool open_map,
		      uint32_t *nkeys, const struct path *at, struct wb_err *err)
{
	if (open_map && t->fast && wb_codec_fast) {
		int rc = encode_fast(sb, t, src);
		if (rc <= 0)
			return rc;
	}
	size_t hdr = SIZE_MAX;
	bool reserved = open_map && t->wire_max && !t->nown; /* no arrays: all its room at once */
	if (open_map) {
		if (reserve(sb, reserved ? t->wire_max : HDR_MAX) < 0)
			return -1;
		if (t->nkeys <= 15) {
			hdr = sb->size;
			sb->data[sb->size++] = (char)0x80;
		} else {
			unsigned char *w = (unsigned char *)sb->data + sb->size;
			w = PUT_MAP_HDR(w, count_keys(t, src));
			sb->size = (size_t)((char *)w - sb->data);
		}
	}
	uint32_t n = 0;
	for (uint32_t i = 0; i < t->nfields; i++) {
		const struct wb_field *f = &t->fields[i];
		if (f->type == WB_T_FLAT) {
			uint32_t nf = 0;
			if (encode_obj(sb, f->obj, src + f->off, false, &nf, at, err) < 0)
				return -1;
			n += nf;
			continue;
		}
		if (!f->required && is_empty(f, src))
			continue;
		struct path p = {at, f->key, 0};
		if ((reserved ? encode_value(sb, f, f, src, true, &p, err)
			      : encode_value(sb, f, f, src, false, &p, err)) < 0)
			return -1;
		n++;
	}
	if (hdr != SIZE_MAX)
		sb->data[hdr] = (char)(0x80 | n);
	if (nkeys)
		*nkeys = n;
	return 0;
}

/*
 * The buffer is sized once: from the last frame of the same kind this thread
 * encoded (frames of a kind change little from one slot to the next), else
 * from a lower bound of the top-level arrays' items, so that it does not
 * double and copy its way up to a frame of many megabytes.
 */
static __thread size_t last_size[WB_NKINDS];

static size_t size_guess(const struct wb_type *t, const char *src)
{
	size_t guess = 256;
	for (uint32_t i = 0; i < t->nfields; i++) {
		const struct wb_field *f = &t->fields[i];
		if (f->type != WB_T_ARR)
			continue;
		size_t item = 1; /* a key and at least one byte of value per required key */
		if (f->elem->type == WB_T_OBJ)
			for (uint32_t j = 0; j < f->elem->obj->nfields; j++)
				if (f->elem->obj->fields[j].required)
					item += f->elem->obj->fields[j].key_len + 2;
		guess += *(const size_t *)(src + f->off_n) * item;
	}
	return guess;
}

int wb_encode(const struct wb_msg *msg, char **out, size_t *out_len, struct wb_err *err)
{
	*out = NULL;
	*out_len = 0;
	if (msg->kind < 0 || msg->kind >= WB_NKINDS)
		return fail(err, WB_R_KIND, NULL, "cannot encode a message of unknown kind %d",
			    (int)msg->kind);
	const struct wb_type *t = wb_kinds[msg->kind].type;
	const char *src = (const char *)&msg->env;
	msgpack_sbuffer sb;
	msgpack_sbuffer_init(&sb);
	size_t cap = last_size[msg->kind];
	cap += cap / 8;
	size_t guess = size_guess(t, src);
	if (cap < guess)
		cap = guess;
	if (cap > WB_FRAME_MAX)
		cap = WB_FRAME_MAX;
	sb.data = malloc(cap);
	if (sb.data)
		sb.alloc = cap;
	struct wb_err local;
	if (!err)
		err = &local;
	err->msg[0] = '\0';
	if (encode_obj(&sb, t, src, true, NULL, NULL, err) < 0) {
		if (!err->msg[0])
			fail(err, WB_R_TOO_BIG, NULL, "out of memory while encoding");
		msgpack_sbuffer_destroy(&sb);
		return -1;
	}
	last_size[msg->kind] = sb.size;
	*out = sb.data;
	*out_len = sb.size;
	return 0;
}
