/*
 * The schema's rules for one value, each written once (private to lib/codec*.c).
 * The decoder and the encoder, on their general and their fast paths, all ask
 * these: a fast path takes a value only where its rule says yes (else the
 * general path reads or writes the map again), and a general path names the
 * fault with the messages below, so no path can hold a rule of its own.
 */
#ifndef WB_CODEC_RULES_H
#define WB_CODEC_RULES_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "codec.h"

/* Where in the message a value sits, for error messages: procs[3].cpu_ns */
struct path {
	const struct path *up;
	const char *key; /* NULL for an array element */
	size_t index;
};

/* err (NULL-safe) filled with reason and "PATH: message"; returns -1. */
__attribute__((format(printf, 4, 5))) int codec_fail(struct wb_err *err, enum wb_reason reason,
						     const struct path *at, const char *fmt, ...);

/* Numbers within the field's bounds (a float also finite). */
static inline bool rule_u64(const struct wb_field *f, uint64_t v)
{
	return v >= f->umin && v <= f->umax;
}

static inline bool rule_i64(const struct wb_field *f, int64_t v)
{
	return v >= f->imin && v <= f->imax;
}

static inline bool rule_f64(const struct wb_field *f, double v)
{
	return isfinite(v) && v >= f->fmin && v <= f->fmax;
}

/* The items of an array field within its bounds. */
static inline bool rule_items(const struct wb_field *f, size_t n)
{
	return n >= f->min_len && n <= f->max_len;
}

/* An optional key that holds zero (0, false, "", no items) is left out of the map. */
static inline bool rule_left_out(const struct wb_field *f, bool zero)
{
	return !f->required && zero;
}

/* Why a string breaks its field's rule, in the order the verdicts are given. */
enum str_fault {
	STR_OK,
	STR_LEN,     /* bytes outside [min_len, max_len] */
	STR_NUL,     /* a NUL byte */
	STR_UTF8,    /* not valid UTF-8 (wb_utf8_seq_len) */
	STR_CONTROL, /* an identity (x-identity: a name) with a control character */
};

/*
 * Whether the n bytes at s are ASCII without a byte below `below` (1: no NUL;
 * 0x20: no C0 control either) and, when del, without DEL, 8 at a time: a word
 * has a byte below k when (w - k * 0x01..) & ~w & 0x80.. is not 0 (exact for
 * bytes below 0x80). What nearly every string on the bus is (names, comm,
 * container ids, paths).
 */
static inline __attribute__((always_inline)) bool ascii_clean(const uint8_t *s, size_t n,
							      uint8_t below, bool del)
{
	const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
	const uint64_t lo = below * ones, d = 0x7f * ones;
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		uint64_t w;
		memcpy(&w, s + i, sizeof(w));
		uint64_t bad = ((w - lo) & ~w) | w;
		if (del)
			bad |= ((w ^ d) - ones) & ~(w ^ d);
		if (bad & highs)
			return false;
	}
	for (; i < n; i++)
		if (s[i] < below || s[i] >= (del ? 0x7f : 0x80))
			return false;
	return true;
}

/* rule_str past ASCII: a NUL, UTF-8, control characters (codec.c). */
enum str_fault rule_str_slow(const struct wb_field *f, const uint8_t *s, size_t n);

/* The n bytes at s (no NUL after them needed) as the value of string field f. */
static inline enum str_fault rule_str(const struct wb_field *f, const uint8_t *s, size_t n)
{
	if (n < f->min_len || n > f->max_len)
		return STR_LEN;
	if (f->ident ? ascii_clean(s, n, 0x20, true) : ascii_clean(s, n, 1, false))
		return STR_OK;
	return rule_str_slow(f, s, n);
}

/* The general paths' messages for a value its rule refused (codec.c); each returns -1. */
int rule_fail_u64(struct wb_err *err, const struct path *at, const struct wb_field *f, uint64_t v);
int rule_fail_i64(struct wb_err *err, const struct path *at, const struct wb_field *f, int64_t v);
int rule_fail_f64(struct wb_err *err, const struct path *at, const struct wb_field *f, double v);
int rule_fail_items(struct wb_err *err, const struct path *at, const struct wb_field *f, size_t n);
int rule_fail_str(struct wb_err *err, const struct path *at, const struct wb_field *f,
		  enum str_fault fault, const uint8_t *s, size_t n);

#endif
