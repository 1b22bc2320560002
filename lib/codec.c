/*
 * The frame codec's shared core: reasons and kinds by name, error messages with
 * the path of the value, the rules for strings beyond ASCII, and the messages of
 * lib/codec_rules.h. The msgpack primitives are in mpack.c, the decoder in
 * codec_dec.c, the encoder in codec_enc.c. Generic msgpack codec driven by the
 * field tables generated from schemas/; decoding is strict (types, bounds,
 * required keys, trailing bytes, UTF-8); unknown keys are skipped, so an
 * optional key can be added without a new v.
 */
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "codec_rules.h"
#include "mpack.h"

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

int codec_fail(struct wb_err *err, enum wb_reason reason, const struct path *at, const char *fmt,
	       ...)
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

enum str_fault rule_str_slow(const struct wb_field *f, const uint8_t *s, size_t n)
{
	uint32_t cp;
	if (memchr(s, '\0', n))
		return STR_NUL;
	if (!utf8_valid(s, n))
		return STR_UTF8;
	if (f->ident && ident_bad(s, n, &cp) >= 0)
		return STR_CONTROL;
	return STR_OK;
}

int rule_fail_u64(struct wb_err *err, const struct path *at, const struct wb_field *f, uint64_t v)
{
	return codec_fail(err, WB_R_BOUND, at, "%llu is outside [%llu, %llu]",
			  (unsigned long long)v, (unsigned long long)f->umin,
			  (unsigned long long)f->umax);
}

int rule_fail_i64(struct wb_err *err, const struct path *at, const struct wb_field *f, int64_t v)
{
	return codec_fail(err, WB_R_BOUND, at, "%lld is outside [%lld, %lld]", (long long)v,
			  (long long)f->imin, (long long)f->imax);
}

int rule_fail_f64(struct wb_err *err, const struct path *at, const struct wb_field *f, double v)
{
	if (!isfinite(v))
		return codec_fail(err, WB_R_BOUND, at, "%g is not a finite number", v);
	return codec_fail(err, WB_R_BOUND, at, "%g is outside [%g, %g]", v, f->fmin, f->fmax);
}

int rule_fail_items(struct wb_err *err, const struct path *at, const struct wb_field *f, size_t n)
{
	return codec_fail(err, WB_R_BOUND, at, "array of %zu items, allowed %u to %u", n,
			  f->min_len, f->max_len);
}

int rule_fail_str(struct wb_err *err, const struct path *at, const struct wb_field *f,
		  enum str_fault fault, const uint8_t *s, size_t n)
{
	uint32_t cp = 0;
	long bad;
	switch (fault) {
	case STR_LEN:
		return codec_fail(err, WB_R_BOUND, at, "string of %zu bytes, allowed %u to %u", n,
				  f->min_len, f->max_len);
	case STR_NUL:
		return codec_fail(err, WB_R_TYPE, at, "string contains a NUL byte");
	case STR_UTF8:
		return codec_fail(err, WB_R_TYPE, at, "string is not valid UTF-8");
	case STR_CONTROL:
		bad = ident_bad(s, n, &cp);
		return codec_fail(err, WB_R_TYPE, at,
				  "control character U+%04X at byte %ld (a name holds none)", cp,
				  bad);
	default:
		return codec_fail(err, WB_R_TYPE, at, "string refused (fault %d)", (int)fault);
	}
}
