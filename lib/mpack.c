/*
 * msgpack structure: the walk over one value that checks a frame's structure
 * (and passes over an unknown key's value), the reader's fault messages, and
 * the writer's buffer growth. See mpack.h.
 */
#include <stdio.h>
#include <stdlib.h>

#include "codec_rules.h"
#include "mpack.h"

const char *mp_type_name(enum mv_type t)
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

/* The message for rd_val's fault rc at the value that starts at at. */
int rd_fail(const struct reader *r, int rc, const struct mval *v, const uint8_t *at,
	    struct wb_err *err)
{
	size_t left = (size_t)(r->end - r->p);
	switch (rc) {
	case RD_END:
		return codec_fail(err, WB_R_MALFORMED, NULL,
				  "truncated: frame ends inside an object (%zu bytes)",
				  (size_t)(r->end - r->start));
	case RD_BAD:
		return codec_fail(err, WB_R_MALFORMED, NULL,
				  "invalid msgpack type byte 0x%02x at offset %zu", *at,
				  (size_t)(at - r->start));
	case RD_HEAD:
		if (*at >= 0xdc)
			return codec_fail(err, WB_R_MALFORMED, NULL, "truncated container header");
		return codec_fail(err, WB_R_MALFORMED, NULL, "truncated header of type byte 0x%02x",
				  *at);
	case RD_BODY:
		return codec_fail(err, WB_R_MALFORMED, NULL,
				  "truncated: a %llu-byte value with %zu bytes left",
				  (unsigned long long)v->u, left);
	case RD_ITEMS:
		return codec_fail(err, WB_R_MALFORMED, NULL,
				  "truncated: a container of %llu items with %zu bytes left",
				  (unsigned long long)v->u, left);
	default:
		return codec_fail(err, WB_R_TOO_BIG, NULL, "more than %u objects in one frame",
				  WB_OBJECTS_MAX);
	}
}

/*
 * Pass over exactly one value at r->p, its items included, with containers
 * nested at most max_depth deep. The structural rules of a frame, written
 * once: the check of a frame and the skipping of an unknown key's value.
 */
int mp_walk(struct reader *r, int max_depth, struct wb_err *err)
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
				return codec_fail(err, WB_R_MALFORMED, NULL,
						  "nested deeper than %d levels", max_depth);
			stack[depth++] = todo;
			todo = items;
		}
	}
}

int wb_msgpack_check(const void *buf, size_t len, int max_depth, struct wb_err *err)
{
	struct reader r = {buf, buf, (const uint8_t *)buf + len, 0, NULL, 0};
	if (mp_walk(&r, max_depth, err) < 0)
		return -1;
	if (r.p != r.end)
		return codec_fail(err, WB_R_TRAILING, NULL, "%zu trailing bytes after the map",
				  (size_t)(r.end - r.p));
	return 0;
}

int mp_grow(msgpack_sbuffer *sb, size_t need)
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
