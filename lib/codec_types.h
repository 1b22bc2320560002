/*
 * Field tables that describe each message struct, generated from schemas/ by
 * tools/schemagen.py and walked by the generic codec (lib/codec_dec.c, lib/codec_enc.c).
 */
#ifndef WB_CODEC_TYPES_H
#define WB_CODEC_TYPES_H

#include <stdbool.h>
#include <stdint.h>

enum wb_ftype {
	WB_T_U64,
	WB_T_I64,
	WB_T_F64,
	WB_T_BOOL,
	WB_T_STR,
	WB_T_OBJ,
	WB_T_FLAT, /* a struct whose keys sit in the enclosing map (the envelope) */
	WB_T_ARR,
};

struct wb_type;

struct wb_field {
	const char *key;
	uint32_t key_len;
	uint64_t key8; /* the key's first 8 bytes (fewer: zeros after), as a little-endian number */
	/* The key as a fixstr (header byte and key): bytes 0-7 and 8-15 as key8, and which bits
	 * of 16 bytes of frame hold it. */
	uint64_t wire[2], wmask[2];
	uint8_t wire_len; /* its bytes: 1 + key_len, 0 for a key longer than 15 bytes */
	uint8_t type;
	uint8_t required;
	uint8_t
	    ident; /* STR: an identity (a name: host, src, zone, model...): no control characters */
	uint32_t off;	  /* value; for WB_T_ARR the element pointer */
	uint32_t off_n;	  /* WB_T_ARR: the size_t element count */
	uint32_t size;	  /* STR: capacity with NUL; OBJ: struct size; ARR: element size */
	uint32_t min_len; /* STR: characters; ARR: items */
	uint32_t max_len;
	uint64_t umin, umax;
	int64_t imin, imax;
	double fmin, fmax;
	const struct wb_type *obj;   /* OBJ, FLAT */
	const struct wb_field *elem; /* ARR: how one element reads */
};

struct wb_type {
	const char *name;
	uint32_t size;
	uint32_t nfields;
	const struct wb_field *fields;
	uint32_t nkeys; /* keys its map can hold: its fields, a flat struct's counted key by key */
	uint32_t nown;	/* fields that hold memory to free (arrays, objects that do): 0, or */
	const uint8_t *own; /* their indexes in fields, for clearing */
	uint64_t req;	    /* bit i: fields[i] is required (fields hold at most 64 rows) */
	/* The most bytes its map takes, for a map of scalars and strings (a fast type's integer
	 * arrays: their header, then 9 bytes an item); else 0. */
	uint32_t wire_max;
	/* At most 15 keys of at most 15 bytes: integers, booleans, strings, integer arrays. */
	bool fast;
};

struct wb_kind_info {
	const char *name;
	int kind;
	uint32_t version;
	const struct wb_type *type;
};

#endif
