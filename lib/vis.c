/*
 * Escaping at output (vis.h): one rule for terminals, logs and scripts. Valid UTF-8
 * is the codec's rule (wb_utf8_seq_len), so a name the codec takes prints unchanged
 * unless it holds a character that moves a terminal's cursor or text direction.
 */
#include <stdbool.h>
#include <string.h>

#include "codec.h"
#include "vis.h"

/* The escape of the sequence of len bytes at s into e (at most 16 bytes), or 0: as it is. */
static size_t vis_one(const unsigned char *s, size_t len, unsigned flags, char *e)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char c = s[0];
	bool raw = false;
	if (len == 1) {
		switch (c) {
		case '\n':
			return memcpy(e, "\\n", 2), 2;
		case '\r':
			return memcpy(e, "\\r", 2), 2;
		case '\t':
			return memcpy(e, "\\t", 2), 2;
		case '\\':
			return memcpy(e, "\\\\", 2), 2;
		case '"':
			if (flags & WB_VIS_DQ)
				return memcpy(e, "\\\"", 2), 2;
			return 0;
		}
		raw = wb_utf8_is_control(s, len);
	} else if (len == 0) {
		len = 1; /* not UTF-8: this byte alone */
		raw = true;
	} else if (len == 2) {
		raw = wb_utf8_is_control(s, len); /* C1: U+0080..U+009F */
	} else if (len == 3 && c == 0xe2) {
		/* U+2028..U+202E (line and paragraph separators, embeddings, overrides) and
		 * U+2066..U+2069 (isolates): they reorder or break what a reader sees. */
		raw = (s[1] == 0x80 && s[2] >= 0xa8 && s[2] <= 0xae) ||
		      (s[1] == 0x81 && s[2] >= 0xa6 && s[2] <= 0xa9);
	}
	if (!raw)
		return 0;
	for (size_t k = 0; k < len; k++) {
		e[4 * k] = '\\';
		e[4 * k + 1] = 'x';
		e[4 * k + 2] = hex[s[k] >> 4];
		e[4 * k + 3] = hex[s[k] & 15];
	}
	return 4 * len;
}

static size_t seq_len(const unsigned char *s, size_t n)
{
	return s[0] < 0x80 ? 1 : wb_utf8_seq_len(s, n);
}

size_t wb_vis(char *dst, size_t size, const char *src, size_t n, unsigned flags)
{
	const unsigned char *s = (const unsigned char *)src;
	size_t out = 0;
	bool full = false;
	for (size_t i = 0; i < n;) {
		size_t len = seq_len(s + i, n - i);
		char e[16];
		size_t elen = vis_one(s + i, len, flags, e);
		const char *piece = elen ? e : (const char *)s + i;
		size_t plen = elen ? elen : len;
		i += len ? len : 1;
		if (!full && size && out + plen < size)
			memcpy(dst + out, piece, plen);
		else if (!full) {
			full = true;
			if (size)
				dst[out] = '\0';
		}
		out += plen;
	}
	if (!full && size)
		dst[out] = '\0';
	return out;
}

int wb_vis_clean(const char *src, size_t n)
{
	const unsigned char *s = (const unsigned char *)src;
	char e[16];
	for (size_t i = 0; i < n;) {
		size_t len = seq_len(s + i, n - i);
		if (vis_one(s + i, len, 0, e))
			return 0;
		i += len;
	}
	return 1;
}

const char *wb_vis_str(char *buf, size_t size, const char *s)
{
	wb_vis(buf, size, s ? s : "", s ? strlen(s) : 0, 0);
	return buf;
}
