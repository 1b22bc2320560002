/*
 * The decoder: one msgpack frame into a message struct, in one pass with the
 * reader of mpack.h, by the field tables and the rules of codec_rules.h; a
 * per-process map in the encoder's form takes a fast pass (fast_map). Also
 * the release of what a decoded message holds.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "codec_rules.h"
#include "mpack.h"

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

/* Pass over the value at r->p, within depth open containers. */
static int rd_skip(struct reader *r, int depth)
{
	return mp_walk(r, WB_DEPTH_MAX - depth, NULL);
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
			return codec_fail(err, WB_R_BOUND, at, "%lld is below the minimum %llu",
					  (long long)o.i, (unsigned long long)f->umin);
		if (o.t != MV_POS)
			return codec_fail(err, WB_R_TYPE, at,
					  "expected an unsigned integer, got %s",
					  mp_type_name(o.t));
		if (!rule_u64(f, o.u))
			return rule_fail_u64(err, at, f, o.u);
		*(uint64_t *)(dst + f->off) = o.u;
		return 0;
	case WB_T_I64: {
		int64_t v;
		if (o.t == MV_NEG)
			v = o.i;
		else if (o.t == MV_POS && o.u <= INT64_MAX)
			v = (int64_t)o.u;
		else if (o.t == MV_POS)
			return codec_fail(err, WB_R_BOUND, at,
					  "%llu does not fit a signed 64-bit integer",
					  (unsigned long long)o.u);
		else
			return codec_fail(err, WB_R_TYPE, at, "expected an integer, got %s",
					  mp_type_name(o.t));
		if (!rule_i64(f, v))
			return rule_fail_i64(err, at, f, v);
		*(int64_t *)(dst + f->off) = v;
		return 0;
	}
	case WB_T_F64: {
		if (o.t != MV_FLOAT && o.t != MV_POS && o.t != MV_NEG)
			return codec_fail(err, WB_R_TYPE, at, "expected a number, got %s",
					  mp_type_name(o.t));
		double v = o.t == MV_FLOAT ? o.f : o.t == MV_POS ? (double)o.u : (double)o.i;
		if (!rule_f64(f, v))
			return rule_fail_f64(err, at, f, v);
		*(double *)(dst + f->off) = v;
		return 0;
	}
	case WB_T_BOOL:
		if (o.t != MV_BOOL)
			return codec_fail(err, WB_R_TYPE, at, "expected a boolean, got %s",
					  mp_type_name(o.t));
		*(bool *)(dst + f->off) = o.b;
		return 0;
	case WB_T_STR: {
		if (o.t != MV_STR)
			return codec_fail(err, WB_R_TYPE, at, "expected a string, got %s",
					  mp_type_name(o.t));
		uint32_t n = o.s.n;
		enum str_fault bad = rule_str(f, (const uint8_t *)o.s.ptr, n);
		if (bad != STR_OK)
			return rule_fail_str(err, at, f, bad, (const uint8_t *)o.s.ptr, n);
		memcpy(dst + f->off, o.s.ptr, n);
		dst[f->off + n] = '\0';
		return 0;
	}
	case WB_T_OBJ:
	case WB_T_ARR:
		return decode_container(r, &o, f, dst, at, depth, err);
	}
	return codec_fail(err, WB_R_TYPE, at, "field type %d unknown to the codec", f->type);
}

/*
 * A map of type t (fast: scalars, strings and arrays of integers only) at r->p
 * written as the encoder writes it: a fixmap, its keys in table order as fixstr,
 * every value in its field's smallest form and kept by its rule (codec_rules.h),
 * no nil. Then it is read
 * here in one tight pass and true returned. At anything else nothing is kept
 * (r unchanged) and false returned: the general path reads the map again and
 * gives the verdict, so the rules and the messages are the general path's.
 */
bool wb_codec_fast = true;

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
			    (f->type == WB_T_U64 ? !rule_u64(f, v)
						 : v > INT64_MAX || !rule_i64(f, (int64_t)v)))
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
			if ((size_t)(end - p) < len || rule_str(f, p, len) != STR_OK)
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
			if (!rule_items(f, m))
				return false;
			objects += m;
			uint64_t *u = NULL;
			if (m && !(u = pool_alloc(r->pool, m, sizeof(uint64_t), false)))
				return false;
			const struct wb_field *e = f->elem;
			for (uint32_t j = 0; j < m; j++) {
				next = end - p < 9 ? NULL : rd_uint(p, &v);
				if (!next || !rule_u64(e, v))
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
			return codec_fail(err, WB_R_TYPE, at, "expected a map, got %s",
					  mp_type_name(o->t));
		return decode_map(r, o->n, f->obj, dst + f->off, at, depth + (o->n > 0), err);
	}
	if (o->t != MV_ARR)
		return codec_fail(err, WB_R_TYPE, at, "expected an array, got %s",
				  mp_type_name(o->t));
	uint32_t n = o->n;
	if (!rule_items(f, n))
		return rule_fail_items(err, at, f, n);
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
			return codec_fail(err, WB_R_TOO_BIG, at, "cannot allocate %u items", n);
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
			if (!next || !rule_u64(e, v))
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
					return codec_fail(err, WB_R_MISSING, at,
							  "missing required key '%s'",
							  f->obj->fields[j].key);
		} else if (f->required && !(seen & (1ull << i))) {
			return codec_fail(err, WB_R_MISSING, at, "missing required key '%s'",
					  f->key);
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
				return codec_fail(err, WB_R_TYPE, at,
						  "map key %u is %s, not a string", i,
						  mp_type_name(k.t));
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
			return codec_fail(err, WB_R_DUPLICATE, &p, "key appears twice");
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
		return codec_fail(err, WB_R_NOT_MAP, NULL, "top level is %s, not a map",
				  mp_type_name(root.t));
	const uint8_t *body = r->p;
	uint64_t objects = r->objects;
	struct mval k, v;
	bool has_k, has_v;
	if (find_kind_v(r, root.n, &k, &has_k, &v, &has_v) < 0)
		return -1;
	if (!has_k)
		return codec_fail(err, WB_R_KIND, NULL, "kind: missing required key 'kind'");
	if (k.t != MV_STR)
		return codec_fail(err, WB_R_KIND, NULL, "kind: expected a string, got %s",
				  mp_type_name(k.t));
	enum wb_kind kind = wb_kind_from_name(k.s.ptr, k.s.n);
	if (kind == WB_KIND_NONE)
		return codec_fail(err, WB_R_KIND, NULL, "kind: unknown kind '%.*s'",
				  (int)(k.s.n > 32 ? 32 : k.s.n), k.s.ptr);
	if (!has_v)
		return codec_fail(err, WB_R_VERSION, NULL, "v: missing required key 'v'");
	if (v.t != MV_POS)
		return codec_fail(err, WB_R_VERSION, NULL,
				  "v: expected an unsigned integer, got %s", mp_type_name(v.t));
	if (v.u != wb_kinds[kind].version)
		return codec_fail(err, WB_R_VERSION, NULL,
				  "v: version %llu of %s is unknown (this build reads v%u)",
				  (unsigned long long)v.u, wb_kinds[kind].name,
				  wb_kinds[kind].version);
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
		return codec_fail(err, WB_R_TOO_BIG, NULL, "frame of %zu bytes exceeds %u", len,
				  WB_FRAME_MAX);
	if (len == 0)
		return codec_fail(err, WB_R_MALFORMED, NULL, "empty frame");
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
