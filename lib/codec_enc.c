/*
 * The encoder: a message struct into a msgpack map with the writer of mpack.h,
 * by the field tables and the rules of codec_rules.h (a producer gets the
 * bounds a receiver applies); a per-process map takes a fast pass (encode_fast).
 */
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "codec_rules.h"
#include "mpack.h"

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
		if (!rule_left_out(&f->obj->fields[i], is_empty(&f->obj->fields[i], src + f->off)))
			return false;
	return true;
}

/* Keys of t that are present in src; only for a map that may hold more than 15 keys (see
 * encode_obj). */
static uint32_t count_keys(const struct wb_type *t, const char *src)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < t->nfields; i++) {
		const struct wb_field *f = &t->fields[i];
		if (f->type == WB_T_FLAT)
			n += count_keys(f->obj, src + f->off);
		else if (!rule_left_out(f, is_empty(f, src)))
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
		if (!rule_u64(e, v)) {
			struct path p = {at, NULL, i};
			return rule_fail_u64(err, &p, e, v);
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
		if (!rule_u64(f, v))
			return rule_fail_u64(err, at, f, v);
		break;
	}
	case WB_T_I64: {
		int64_t v = *(const int64_t *)(src + f->off);
		if (!rule_i64(f, v))
			return rule_fail_i64(err, at, f, v);
		break;
	}
	case WB_T_F64: {
		double v = *(const double *)(src + f->off);
		if (!rule_f64(f, v))
			return rule_fail_f64(err, at, f, v);
		break;
	}
	case WB_T_BOOL:
		break;
	case WB_T_STR:
		s = src + f->off;
		n = strnlen(s, f->size);
		if (n >= f->size)
			return codec_fail(err, WB_R_BOUND, at, "string is not NUL-terminated");
		enum str_fault bad = rule_str(f, (const uint8_t *)s, n);
		if (bad != STR_OK)
			return rule_fail_str(err, at, f, bad, (const uint8_t *)s, n);
		need = HDR_MAX + n;
		break;
	case WB_T_OBJ:
	case WB_T_ARR:
		return encode_container(sb, key, f, src, at, err);
	default:
		return codec_fail(err, WB_R_TYPE, at, "field type %d unknown to the codec",
				  f->type);
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
		if (!rule_items(f, n))
			return rule_fail_items(err, at, f, n);
		if (n && !items)
			return codec_fail(err, WB_R_MISSING, at, "%zu items but no array", n);
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
			if (rule_left_out(f, !v))
				continue;
			if (!rule_u64(f, v))
				return 1;
			w = put_uint(put_key(w, f), v);
			break;
		}
		case WB_T_I64: {
			int64_t v = *(const int64_t *)at;
			if (rule_left_out(f, !v))
				continue;
			if (!rule_i64(f, v))
				return 1;
			w = put_int(put_key(w, f), v);
			break;
		}
		case WB_T_BOOL:
			if (rule_left_out(f, !*(const bool *)at))
				continue;
			w = put_key(w, f);
			*w++ = *(const bool *)at ? 0xc3 : 0xc2;
			break;
		case WB_T_STR: {
			if (rule_left_out(f, !at[0]))
				continue;
			size_t len = strnlen(at, f->size);
			if (len >= f->size || rule_str(f, (const uint8_t *)at, len) != STR_OK)
				return 1;
			w = PUT_STR_HDR(put_key(w, f), len);
			memcpy(w, at, len);
			w += len;
			break;
		}
		case WB_T_ARR: {
			const uint64_t *items = *(const uint64_t *const *)at;
			size_t m = *(const size_t *)(src + f->off_n);
			if (rule_left_out(f, !m))
				continue;
			if (!rule_items(f, m) || (m && !items))
				return 1;
			w = PUT_ARR_HDR(put_key(w, f), m);
			for (size_t j = 0; j < m; j++) {
				if (!rule_u64(f->elem, items[j]))
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
		if (rule_left_out(f, is_empty(f, src)))
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
		return codec_fail(err, WB_R_KIND, NULL,
				  "cannot encode a message of unknown kind %d", (int)msg->kind);
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
			codec_fail(err, WB_R_TOO_BIG, NULL, "out of memory while encoding");
		msgpack_sbuffer_destroy(&sb);
		return -1;
	}
	last_size[msg->kind] = sb.size;
	*out = sb.data;
	*out_len = sb.size;
	return 0;
}
