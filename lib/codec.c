/*
 * Generic msgpack codec driven by the field tables generated from schemas/.
 * Decoding is strict (types, bounds, required keys, trailing bytes, UTF-8);
 * unknown keys are skipped, so an optional key can be added without a new v.
 */
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

/* ---- structural pre-check ---- */

static int read_be(const uint8_t **p, const uint8_t *end, int n, uint64_t *out)
{
	if (end - *p < n)
		return -1;
	uint64_t v = 0;
	for (int i = 0; i < n; i++)
		v = (v << 8) | (*p)[i];
	*p += n;
	*out = v;
	return 0;
}

int wb_msgpack_check(const void *buf, size_t len, int max_depth, struct wb_err *err)
{
	const uint8_t *p = buf;
	const uint8_t *end = p + len;
	uint64_t stack[WB_DEPTH_MAX + 1];
	int depth = 0;
	uint64_t todo = 1;
	uint64_t objects = 0;

	if (max_depth > WB_DEPTH_MAX)
		max_depth = WB_DEPTH_MAX;
	for (;;) {
		while (todo == 0) {
			if (depth == 0)
				goto done;
			todo = stack[--depth];
		}
		todo--;
		if (p >= end)
			return fail(err, WB_R_MALFORMED, NULL,
				    "truncated: frame ends inside an object (%zu bytes)", len);
		uint8_t b = *p++;
		uint64_t skip = 0;
		uint64_t children = 0;
		int lenbytes = 0;
		if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3)
			continue;
		if (b >= 0x80 && b <= 0x8f)
			children = 2u * (b & 0x0f);
		else if (b >= 0x90 && b <= 0x9f)
			children = b & 0x0f;
		else if (b >= 0xa0 && b <= 0xbf)
			skip = b & 0x1f;
		else
			switch (b) {
			case 0xc4:
			case 0xd9:
				lenbytes = 1;
				break;
			case 0xc5:
			case 0xda:
				lenbytes = 2;
				break;
			case 0xc6:
			case 0xdb:
				lenbytes = 4;
				break;
			case 0xc7:
				lenbytes = 1;
				skip = 1;
				break;
			case 0xc8:
				lenbytes = 2;
				skip = 1;
				break;
			case 0xc9:
				lenbytes = 4;
				skip = 1;
				break;
			case 0xca:
				skip = 4;
				break;
			case 0xcb:
				skip = 8;
				break;
			case 0xcc:
			case 0xd0:
				skip = 1;
				break;
			case 0xcd:
			case 0xd1:
				skip = 2;
				break;
			case 0xce:
			case 0xd2:
				skip = 4;
				break;
			case 0xcf:
			case 0xd3:
				skip = 8;
				break;
			case 0xd4:
				skip = 2;
				break;
			case 0xd5:
				skip = 3;
				break;
			case 0xd6:
				skip = 5;
				break;
			case 0xd7:
				skip = 9;
				break;
			case 0xd8:
				skip = 17;
				break;
			case 0xdc:
			case 0xdd:
			case 0xde:
			case 0xdf: {
				uint64_t n;
				if (read_be(&p, end, (b & 1) ? 4 : 2, &n) < 0)
					return fail(err, WB_R_MALFORMED, NULL,
						    "truncated container header");
				children = b >= 0xde ? 2 * n : n;
				if (children == 0)
					continue;
				break;
			}
			default:
				return fail(err, WB_R_MALFORMED, NULL,
					    "invalid msgpack type byte 0x%02x at offset %zu", b,
					    (size_t)(p - 1 - (const uint8_t *)buf));
			}
		if (lenbytes) {
			uint64_t n;
			if (read_be(&p, end, lenbytes, &n) < 0)
				return fail(err, WB_R_MALFORMED, NULL, "truncated length header");
			skip += n;
		}
		if (skip > (uint64_t)(end - p))
			return fail(err, WB_R_MALFORMED, NULL,
				    "truncated: a %llu-byte value with %zu bytes left",
				    (unsigned long long)skip, (size_t)(end - p));
		p += skip;
		if (children) {
			if (children > (uint64_t)(end - p))
				return fail(
				    err, WB_R_MALFORMED, NULL,
				    "truncated: a container of %llu items with %zu bytes left",
				    (unsigned long long)children, (size_t)(end - p));
			/* msgpack-c builds ~24 bytes of tree per object before any schema check. */
			objects += children;
			if (objects > WB_OBJECTS_MAX)
				return fail(err, WB_R_TOO_BIG, NULL,
					    "more than %u objects in one frame", WB_OBJECTS_MAX);
			if (depth >= max_depth)
				return fail(err, WB_R_MALFORMED, NULL,
					    "nested deeper than %d levels", max_depth);
			stack[depth++] = todo;
			todo = children;
		}
	}
done:
	if (p != end)
		return fail(err, WB_R_TRAILING, NULL, "%zu trailing bytes after the map",
			    (size_t)(end - p));
	return 0;
}

/* ---- decoding ---- */

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

static const char *type_name(msgpack_object_type t)
{
	switch (t) {
	case MSGPACK_OBJECT_NIL:
		return "nil";
	case MSGPACK_OBJECT_BOOLEAN:
		return "a boolean";
	case MSGPACK_OBJECT_POSITIVE_INTEGER:
		return "an unsigned integer";
	case MSGPACK_OBJECT_NEGATIVE_INTEGER:
		return "a negative integer";
	case MSGPACK_OBJECT_FLOAT32:
	case MSGPACK_OBJECT_FLOAT64:
		return "a float";
	case MSGPACK_OBJECT_STR:
		return "a string";
	case MSGPACK_OBJECT_ARRAY:
		return "an array";
	case MSGPACK_OBJECT_MAP:
		return "a map";
	case MSGPACK_OBJECT_BIN:
		return "binary";
	case MSGPACK_OBJECT_EXT:
		return "an ext value";
	}
	return "an unknown type";
}

static int decode_obj(const msgpack_object *o, const struct wb_type *t, char *dst,
		      const struct path *at, struct wb_err *err);
static void clear_obj(const struct wb_type *t, char *obj);

static int decode_value(const msgpack_object *o, const struct wb_field *f, char *dst,
			const struct path *at, struct wb_err *err)
{
	switch (f->type) {
	case WB_T_U64:
		if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
			return fail(err, WB_R_BOUND, at, "%lld is below the minimum %llu",
				    (long long)o->via.i64, (unsigned long long)f->umin);
		if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
			return fail(err, WB_R_TYPE, at, "expected an unsigned integer, got %s",
				    type_name(o->type));
		if (o->via.u64 < f->umin || o->via.u64 > f->umax)
			return fail(err, WB_R_BOUND, at, "%llu is outside [%llu, %llu]",
				    (unsigned long long)o->via.u64, (unsigned long long)f->umin,
				    (unsigned long long)f->umax);
		*(uint64_t *)(dst + f->off) = o->via.u64;
		return 0;
	case WB_T_I64: {
		int64_t v;
		if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
			v = o->via.i64;
		else if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER && o->via.u64 <= INT64_MAX)
			v = (int64_t)o->via.u64;
		else if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
			return fail(err, WB_R_BOUND, at,
				    "%llu does not fit a signed 64-bit integer",
				    (unsigned long long)o->via.u64);
		else
			return fail(err, WB_R_TYPE, at, "expected an integer, got %s",
				    type_name(o->type));
		if (v < f->imin || v > f->imax)
			return fail(err, WB_R_BOUND, at, "%lld is outside [%lld, %lld]",
				    (long long)v, (long long)f->imin, (long long)f->imax);
		*(int64_t *)(dst + f->off) = v;
		return 0;
	}
	case WB_T_F64: {
		double v;
		if (o->type == MSGPACK_OBJECT_FLOAT32 || o->type == MSGPACK_OBJECT_FLOAT64)
			v = o->via.f64;
		else if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
			v = (double)o->via.u64;
		else if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
			v = (double)o->via.i64;
		else
			return fail(err, WB_R_TYPE, at, "expected a number, got %s",
				    type_name(o->type));
		if (!isfinite(v))
			return fail(err, WB_R_BOUND, at, "%g is not a finite number", v);
		if (v < f->fmin || v > f->fmax)
			return fail(err, WB_R_BOUND, at, "%g is outside [%g, %g]", v, f->fmin,
				    f->fmax);
		*(double *)(dst + f->off) = v;
		return 0;
	}
	case WB_T_BOOL:
		if (o->type != MSGPACK_OBJECT_BOOLEAN)
			return fail(err, WB_R_TYPE, at, "expected a boolean, got %s",
				    type_name(o->type));
		*(bool *)(dst + f->off) = o->via.boolean;
		return 0;
	case WB_T_STR: {
		if (o->type != MSGPACK_OBJECT_STR)
			return fail(err, WB_R_TYPE, at, "expected a string, got %s",
				    type_name(o->type));
		uint32_t n = o->via.str.size;
		if (n > f->max_len || n < f->min_len)
			return fail(err, WB_R_BOUND, at, "string of %u bytes, allowed %u to %u", n,
				    f->min_len, f->max_len);
		if (memchr(o->via.str.ptr, '\0', n))
			return fail(err, WB_R_TYPE, at, "string contains a NUL byte");
		if (!utf8_valid((const unsigned char *)o->via.str.ptr, n))
			return fail(err, WB_R_TYPE, at, "string is not valid UTF-8");
		memcpy(dst + f->off, o->via.str.ptr, n);
		dst[f->off + n] = '\0';
		return 0;
	}
	case WB_T_OBJ:
		if (o->type != MSGPACK_OBJECT_MAP)
			return fail(err, WB_R_TYPE, at, "expected a map, got %s",
				    type_name(o->type));
		return decode_obj(o, f->obj, dst + f->off, at, err);
	case WB_T_ARR: {
		if (o->type != MSGPACK_OBJECT_ARRAY)
			return fail(err, WB_R_TYPE, at, "expected an array, got %s",
				    type_name(o->type));
		uint32_t n = o->via.array.size;
		if (n > f->max_len || n < f->min_len)
			return fail(err, WB_R_BOUND, at, "array of %u items, allowed %u to %u", n,
				    f->min_len, f->max_len);
		char *items = NULL;
		if (n) {
			items = wb_array_new(n, f->size);
			if (!items)
				return fail(err, WB_R_TOO_BIG, at, "cannot allocate %u items", n);
		}
		*(char **)(dst + f->off) = items;
		*(size_t *)(dst + f->off_n) = 0;
		for (uint32_t i = 0; i < n; i++) {
			struct path p = {at, NULL, i};
			if (decode_value(&o->via.array.ptr[i], f->elem, items + (size_t)i * f->size,
					 &p, err) < 0) {
				/* Count the items decoded so far, so clear frees what they hold. */
				*(size_t *)(dst + f->off_n) = i + 1;
				return -1;
			}
		}
		*(size_t *)(dst + f->off_n) = n;
		return 0;
	}
	}
	return fail(err, WB_R_TYPE, at, "field type %d unknown to the codec", f->type);
}

/* Keys on the wire may hold NUL bytes: compare lengths first, then bytes. */
static bool key_is(const struct wb_field *f, const char *key, uint32_t len)
{
	return f->key_len == len && memcmp(f->key, key, len) == 0;
}

/* Find key in t (or its flat envelope); returns the field and where its struct sits. */
static const struct wb_field *find_field(const struct wb_type *t, char *dst, const char *key,
					 uint32_t len, uint32_t hint, char **base, int *slot)
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
				if (key_is(&ft->fields[j], key, len)) {
					*base = dst + f->off;
					*slot = 64 + (int)j;
					return &ft->fields[j];
				}
		} else if (key_is(f, key, len)) {
			*base = dst;
			*slot = (int)i;
			return f;
		}
	}
	return NULL;
}

static int check_required(const struct wb_type *t, uint64_t seen, uint64_t seen_flat,
			  const struct path *at, struct wb_err *err)
{
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

static int decode_obj(const msgpack_object *o, const struct wb_type *t, char *dst,
		      const struct path *at, struct wb_err *err)
{
	uint64_t seen = 0, seen_flat = 0;
	uint32_t hint = 0; /* encoders write keys in table order: try the next field first */
	const msgpack_object_kv *kv = o->via.map.ptr;
	for (uint32_t i = 0; i < o->via.map.size; i++) {
		if (kv[i].key.type != MSGPACK_OBJECT_STR)
			return fail(err, WB_R_TYPE, at, "map key %u is %s, not a string", i,
				    type_name(kv[i].key.type));
		const char *key = kv[i].key.via.str.ptr;
		uint32_t len = kv[i].key.via.str.size;
		char *base;
		int slot;
		const struct wb_field *f = find_field(t, dst, key, len, hint, &base, &slot);
		if (!f)
			continue; /* unknown keys are ignored */
		if (slot < 64)
			hint = (uint32_t)slot + 1;
		struct path p = {at, f->key, 0};
		uint64_t *mask = slot >= 64 ? &seen_flat : &seen;
		uint64_t bit = 1ull << (slot % 64);
		if (*mask & bit)
			return fail(err, WB_R_DUPLICATE, &p, "key appears twice");
		*mask |= bit;
		if (kv[i].val.type == MSGPACK_OBJECT_NIL && !f->required)
			continue; /* nil stands for an absent optional key */
		if (decode_value(&kv[i].val, f, base, &p, err) < 0)
			return -1;
	}
	return check_required(t, seen, seen_flat, at, err);
}

/* Look up a top-level string or integer key without decoding the rest. */
static const msgpack_object *map_get(const msgpack_object *map, const char *key)
{
	size_t len = strlen(key);
	for (uint32_t i = 0; i < map->via.map.size; i++) {
		const msgpack_object *k = &map->via.map.ptr[i].key;
		if (k->type == MSGPACK_OBJECT_STR && k->via.str.size == len &&
		    memcmp(k->via.str.ptr, key, len) == 0)
			return &map->via.map.ptr[i].val;
	}
	return NULL;
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
	if (wb_msgpack_check(buf, len, WB_DEPTH_MAX, err) < 0)
		return -1;

	msgpack_unpacked up;
	msgpack_unpacked_init(&up);
	size_t off = 0;
	int rc = msgpack_unpack_next(&up, buf, len, &off);
	if (rc != MSGPACK_UNPACK_SUCCESS) {
		msgpack_unpacked_destroy(&up);
		return fail(err, WB_R_MALFORMED, NULL, "msgpack unpack failed (%d)", rc);
	}
	const msgpack_object *root = &up.data;
	int ret = -1;
	if (root->type != MSGPACK_OBJECT_MAP) {
		fail(err, WB_R_NOT_MAP, NULL, "top level is %s, not a map", type_name(root->type));
		goto out;
	}
	const msgpack_object *k = map_get(root, "kind");
	if (!k) {
		fail(err, WB_R_KIND, NULL, "kind: missing required key 'kind'");
		goto out;
	}
	if (k->type != MSGPACK_OBJECT_STR) {
		fail(err, WB_R_KIND, NULL, "kind: expected a string, got %s", type_name(k->type));
		goto out;
	}
	enum wb_kind kind = wb_kind_from_name(k->via.str.ptr, k->via.str.size);
	if (kind == WB_KIND_NONE) {
		fail(err, WB_R_KIND, NULL, "kind: unknown kind '%.*s'",
		     (int)(k->via.str.size > 32 ? 32 : k->via.str.size), k->via.str.ptr);
		goto out;
	}
	const msgpack_object *v = map_get(root, "v");
	if (!v || v->type != MSGPACK_OBJECT_POSITIVE_INTEGER ||
	    v->via.u64 != wb_kinds[kind].version) {
		if (!v)
			fail(err, WB_R_VERSION, NULL, "v: missing required key 'v'");
		else if (v->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
			fail(err, WB_R_VERSION, NULL, "v: expected an unsigned integer, got %s",
			     type_name(v->type));
		else
			fail(err, WB_R_VERSION, NULL,
			     "v: version %llu of %s is unknown (this build reads v%u)",
			     (unsigned long long)v->via.u64, wb_kinds[kind].name,
			     wb_kinds[kind].version);
		goto out;
	}
	out->kind = kind;
	if (decode_obj(root, wb_kinds[kind].type, (char *)&out->env, NULL, err) < 0) {
		wb_msg_clear(out);
		goto out;
	}
	ret = 0;
out:
	msgpack_unpacked_destroy(&up);
	if (ret < 0)
		out->kind = WB_KIND_NONE;
	return ret;
}

void *wb_array_new(size_t n, size_t elem_size)
{
	if (n == 0)
		n = 1;
	return calloc(n, elem_size);
}

static void clear_obj(const struct wb_type *t, char *obj)
{
	for (uint32_t i = 0; i < t->nfields; i++) {
		const struct wb_field *f = &t->fields[i];
		if (f->type == WB_T_OBJ || f->type == WB_T_FLAT) {
			clear_obj(f->obj, obj + f->off);
		} else if (f->type == WB_T_ARR) {
			char **items = (char **)(obj + f->off);
			size_t n = *(size_t *)(obj + f->off_n);
			/* Items of scalars and fixed strings only (processes) need no walk. */
			if (*items && f->elem->type == WB_T_OBJ && f->elem->obj->owns)
				for (size_t j = 0; j < n; j++)
					clear_obj(f->elem->obj, *items + j * f->size);
			free(*items);
			*items = NULL;
			*(size_t *)(obj + f->off_n) = 0;
		}
	}
}

void wb_msg_clear(struct wb_msg *msg)
{
	if (!msg)
		return;
	if (msg->kind >= 0 && msg->kind < WB_NKINDS)
		clear_obj(wb_kinds[msg->kind].type, (char *)&msg->env);
	memset(msg, 0, sizeof(*msg));
	msg->kind = WB_KIND_NONE;
}

/* ---- encoding ---- */

static bool is_empty(const struct wb_field *f, const char *src)
{
	switch (f->type) {
	case WB_T_OBJ:
		/* an optional map whose keys are all optional and empty is left out */
		for (uint32_t i = 0; i < f->obj->nfields; i++)
			if (f->obj->fields[i].required ||
			    !is_empty(&f->obj->fields[i], src + f->off))
				return false;
		return true;
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

/* Write key (NULL for an array item) and the value of f at src. */
static int encode_value(msgpack_sbuffer *sb, const struct wb_field *key, const struct wb_field *f,
			const char *src, const struct path *at, struct wb_err *err)
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
		need = HDR_MAX + n;
		break;
	case WB_T_OBJ:
	case WB_T_ARR:
		need = HDR_MAX;
		break;
	default:
		return fail(err, WB_R_TYPE, at, "field type %d unknown to the codec", f->type);
	}
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
		need += HDR_MAX + key->key_len;
	if (reserve(sb, need) < 0)
		return -1;
	unsigned char *w = (unsigned char *)sb->data + sb->size;
	if (key) {
		w = PUT_STR_HDR(w, key->key_len);
		memcpy(w, key->key, key->key_len);
		w += key->key_len;
	}
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
	case WB_T_OBJ:
		sb->size = (size_t)((char *)w - sb->data);
		return encode_obj(sb, f->obj, src + f->off, true, NULL, at, err);
	case WB_T_ARR:
		w = PUT_ARR_HDR(w, n);
		sb->size = (size_t)((char *)w - sb->data);
		if (f->elem->type == WB_T_U64)
			return encode_u64s(sb, f, items, n, at, err);
		for (size_t i = 0; i < n; i++) {
			struct path p = {at, NULL, i};
			if (encode_value(sb, NULL, f->elem, items + i * f->size, &p, err) < 0)
				return -1;
		}
		return 0;
	default:
		break;
	}
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
	size_t hdr = SIZE_MAX;
	if (open_map) {
		if (reserve(sb, HDR_MAX) < 0)
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
		if (encode_value(sb, f, f, src, &p, err) < 0)
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
