/*
 * msgpack <-> JSON for the CLI. Integers keep their sign and width (within
 * int64, the bound every schema key has), floats stay floats, so a message
 * printed by tap and fed back to pub encodes to the same values.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <msgpack.h>

#include "json.h"
#include "state.h"

static json_t *obj_to_json(const msgpack_object *o, int depth, struct wb_err *err)
{
	if (depth > 32) {
		err->reason = WB_R_MALFORMED;
		snprintf(err->msg, sizeof(err->msg), "nested too deep for JSON");
		return NULL;
	}
	switch (o->type) {
	case MSGPACK_OBJECT_NIL:
		return json_null();
	case MSGPACK_OBJECT_BOOLEAN:
		return json_boolean(o->via.boolean);
	case MSGPACK_OBJECT_POSITIVE_INTEGER:
		if (o->via.u64 > (uint64_t)INT64_MAX)
			return json_real((double)o->via.u64); /* beyond every schema bound anyway */
		return json_integer((json_int_t)o->via.u64);
	case MSGPACK_OBJECT_NEGATIVE_INTEGER:
		return json_integer((json_int_t)o->via.i64);
	case MSGPACK_OBJECT_FLOAT32:
	case MSGPACK_OBJECT_FLOAT64:
		if (!isfinite(o->via.f64))
			return json_null(); /* JSON has no NaN or infinity */
		return json_real(o->via.f64);
	case MSGPACK_OBJECT_STR: {
		json_t *s = json_stringn(o->via.str.ptr, o->via.str.size);
		if (s)
			return s;
		/* Not UTF-8 (or holds NUL): show it with the odd bytes as '?', never fail the line.
		 */
		char *copy = malloc((size_t)o->via.str.size + 1);
		if (!copy)
			return NULL;
		for (uint32_t i = 0; i < o->via.str.size; i++) {
			unsigned char c = (unsigned char)o->via.str.ptr[i];
			copy[i] = c == 0 || c >= 0x80 ? '?' : (char)c;
		}
		s = json_stringn(copy, o->via.str.size);
		free(copy);
		return s;
	}
	case MSGPACK_OBJECT_BIN:
	case MSGPACK_OBJECT_EXT: {
		const char *p = o->type == MSGPACK_OBJECT_BIN ? o->via.bin.ptr : o->via.ext.ptr;
		uint32_t n = o->type == MSGPACK_OBJECT_BIN ? o->via.bin.size : o->via.ext.size;
		char *hex = malloc((size_t)n * 2 + 1);
		if (!hex)
			return NULL;
		for (uint32_t i = 0; i < n; i++)
			sprintf(hex + 2 * i, "%02x", (unsigned char)p[i]);
		json_t *s = json_stringn(hex, (size_t)n * 2);
		free(hex);
		return s;
	}
	case MSGPACK_OBJECT_ARRAY: {
		json_t *a = json_array();
		for (uint32_t i = 0; a && i < o->via.array.size; i++) {
			json_t *v = obj_to_json(&o->via.array.ptr[i], depth + 1, err);
			if (!v || json_array_append_new(a, v) < 0) {
				json_decref(a);
				return NULL;
			}
		}
		return a;
	}
	case MSGPACK_OBJECT_MAP: {
		json_t *m = json_object();
		for (uint32_t i = 0; m && i < o->via.map.size; i++) {
			const msgpack_object *k = &o->via.map.ptr[i].key;
			char key[256];
			if (k->type == MSGPACK_OBJECT_STR)
				snprintf(key, sizeof(key), "%.*s",
					 (int)(k->via.str.size < 255 ? k->via.str.size : 255),
					 k->via.str.ptr);
			else if (k->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
				snprintf(key, sizeof(key), "%llu", (unsigned long long)k->via.u64);
			else
				snprintf(key, sizeof(key), "(key %u)", i);
			json_t *v = obj_to_json(&o->via.map.ptr[i].val, depth + 1, err);
			if (!v || json_object_set_new_nocheck(m, key, v) < 0) {
				json_decref(m);
				return NULL;
			}
		}
		return m;
	}
	}
	return NULL;
}

json_t *wb_msgpack_to_json(const void *buf, size_t len, struct wb_err *err)
{
	if (wb_msgpack_check(buf, len, 32, err) < 0)
		return NULL;
	msgpack_unpacked up;
	msgpack_unpacked_init(&up);
	size_t off = 0;
	json_t *j = NULL;
	if (msgpack_unpack_next(&up, buf, len, &off) == MSGPACK_UNPACK_SUCCESS) {
		j = obj_to_json(&up.data, 0, err);
	} else {
		err->reason = WB_R_MALFORMED;
		snprintf(err->msg, sizeof(err->msg), "not msgpack");
	}
	msgpack_unpacked_destroy(&up);
	if (!j && !err->msg[0]) {
		err->reason = WB_R_MALFORMED;
		snprintf(err->msg, sizeof(err->msg), "cannot convert to JSON");
	}
	return j;
}

static int pack_json(msgpack_packer *pk, const json_t *j, int depth)
{
	if (depth > 32)
		return -1;
	switch (json_typeof(j)) {
	case JSON_NULL:
		return msgpack_pack_nil(pk);
	case JSON_TRUE:
		return msgpack_pack_true(pk);
	case JSON_FALSE:
		return msgpack_pack_false(pk);
	case JSON_INTEGER:
		return msgpack_pack_int64(pk, json_integer_value(j));
	case JSON_REAL:
		return msgpack_pack_double(pk, json_real_value(j));
	case JSON_STRING: {
		size_t n = json_string_length(j);
		if (msgpack_pack_str(pk, n) < 0)
			return -1;
		return msgpack_pack_str_body(pk, json_string_value(j), n);
	}
	case JSON_ARRAY: {
		size_t i;
		json_t *v;
		if (msgpack_pack_array(pk, json_array_size(j)) < 0)
			return -1;
		json_array_foreach(j, i, v) if (pack_json(pk, v, depth + 1) < 0) return -1;
		return 0;
	}
	case JSON_OBJECT: {
		const char *k;
		json_t *v;
		if (msgpack_pack_map(pk, json_object_size(j)) < 0)
			return -1;
		json_object_foreach((json_t *)j, k, v)
		{
			size_t n = strlen(k);
			if (msgpack_pack_str(pk, n) < 0 || msgpack_pack_str_body(pk, k, n) < 0 ||
			    pack_json(pk, v, depth + 1) < 0)
				return -1;
		}
		return 0;
	}
	}
	return -1;
}

int wb_json_to_msgpack(const json_t *json, char **out, size_t *len, struct wb_err *err)
{
	msgpack_sbuffer sb;
	msgpack_sbuffer_init(&sb);
	msgpack_packer pk;
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	if (pack_json(&pk, json, 0) < 0) {
		msgpack_sbuffer_destroy(&sb);
		err->reason = WB_R_MALFORMED;
		snprintf(err->msg, sizeof(err->msg),
			 "cannot encode this JSON value as msgpack (nested too deep?)");
		return -1;
	}
	*out = sb.data;
	*len = sb.size;
	return 0;
}

int wb_json_save(json_t *root, const char *path, bool sync, char *err, size_t errlen)
{
	/* The whole document in memory first: json_dumpfd writes one token per write(). */
	char *text = json_dumps(root, JSON_COMPACT);
	if (!text) {
		snprintf(err, errlen, "%s: cannot write: out of memory", path);
		return -1;
	}
	struct wb_state_tmp st;
	if (wb_state_create(&st, path, err, errlen) < 0) {
		free(text);
		return -1;
	}
	int e = 0;
	size_t len = strlen(text), off = 0;
	while (off < len) {
		ssize_t n = write(st.fd, text + off, len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			e = n < 0 ? errno : EIO;
			break;
		}
		off += (size_t)n;
	}
	free(text);
	return wb_state_commit(&st, e == 0, e, sync, err, errlen);
}

json_t *wb_json_load(const char *path, size_t flags, char *err, size_t errlen)
{
	int fd = wb_state_open_read(path, err, errlen);
	if (fd < 0)
		return NULL;
	json_error_t jerr;
	json_t *root = json_loadfd(fd, flags, &jerr);
	close(fd);
	if (!root) {
		snprintf(err, errlen, "%s:%d: %s", path, jerr.line, jerr.text);
		errno = EINVAL;
	}
	return root;
}

uint64_t wb_json_u64(const json_t *obj, const char *key)
{
	json_t *v = json_object_get(obj, key);
	return json_is_integer(v) && json_integer_value(v) >= 0 ? (uint64_t)json_integer_value(v)
								: 0;
}

const char *wb_json_str(const json_t *obj, const char *key)
{
	const char *s = json_string_value(json_object_get(obj, key));
	return s ? s : "";
}
