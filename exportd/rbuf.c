/*
 * A growable byte buffer with the formatting /metrics needs: exact fixed-point
 * numbers from integer micro-units (no float rounding in counters), escaped
 * label values, and gzip through zlib.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "codec.h"
#include "exportd.h"
#include "grow.h"
#include "log.h"

struct rbuf_gz {
	z_stream zs;
	struct rbuf out; /* the gzip bytes so far */
};

static bool rbuf_grow(struct rbuf *b, size_t more);

/* Deflate n bytes at in into b's gzip member (flush: Z_NO_FLUSH or Z_FINISH). */
static int gz_deflate(struct rbuf *b, const char *in, size_t n, int flush)
{
	struct rbuf_gz *gz = b->gz;
	z_stream *zs = &gz->zs;
	/* zlib counts in uInt: feed more than that in steps */
	const size_t step = 1u << 30;
	int zrc;
	zs->next_in = (Bytef *)in;
	for (;;) {
		size_t left = n - (size_t)((const char *)zs->next_in - in);
		zs->avail_in = (uInt)(left > step ? step : left);
		int f = left > step ? Z_NO_FLUSH : flush;
		if (!rbuf_grow(&gz->out, left / 8 + 4096))
			return -1;
		size_t room = gz->out.cap - gz->out.len;
		zs->next_out = (Bytef *)gz->out.p + gz->out.len;
		zs->avail_out = (uInt)(room > step ? step : room);
		uInt before = zs->avail_out;
		zrc = deflate(zs, f);
		gz->out.len += before - zs->avail_out;
		if (zrc == Z_STREAM_END)
			return 0;
		if (zrc != Z_OK && zrc != Z_BUF_ERROR) {
			log_warnx("gzip: deflate failed (%d)", zrc);
			return -1;
		}
		/* done with this input once it is all taken and zlib had room to spare */
		if (f == Z_NO_FLUSH && zs->avail_in == 0 && left <= step && zs->avail_out > 0)
			return 0;
	}
}

/* Pass the text written so far to the gzip member and empty the buffer. */
static bool gz_drain(struct rbuf *b)
{
	if (gz_deflate(b, b->p, b->len, Z_NO_FLUSH) < 0) {
		b->oom = true;
		return false;
	}
	b->len = 0;
	return true;
}

static bool rbuf_reserve(struct rbuf *b, size_t more)
{
	if (b->oom)
		return false;
	if (b->gz && b->len && b->len + more > RBUF_GZ_CHUNK && !gz_drain(b))
		return false;
	return rbuf_grow(b, more);
}

static bool rbuf_grow(struct rbuf *b, size_t more)
{
	if (b->oom)
		return false;
	if (more > SIZE_MAX - b->len || wb_grow(&b->p, &b->cap, b->len + more, 1, 4096) < 0) {
		b->oom = true;
		return false;
	}
	return true;
}

void rbuf_reset(struct rbuf *b)
{
	b->len = 0;
	b->oom = false;
}

void rbuf_free(struct rbuf *b)
{
	if (b->gz) {
		deflateEnd(&b->gz->zs);
		free(b->gz->out.p);
		free(b->gz);
	}
	free(b->p);
	*b = (struct rbuf){0};
}

char *rbuf_steal(struct rbuf *b, size_t *len)
{
	char *p = b->p;
	*len = b->len;
	*b = (struct rbuf){0};
	return p;
}

void rbuf_put(struct rbuf *b, const char *s, size_t n)
{
	if (b->gz && n > RBUF_GZ_CHUNK && !b->oom) {
		/* a large piece goes to zlib from where it lies */
		if (gz_drain(b) && gz_deflate(b, s, n, Z_NO_FLUSH) < 0)
			b->oom = true;
		return;
	}
	if (!rbuf_reserve(b, n))
		return;
	memcpy(b->p + b->len, s, n);
	b->len += n;
}

void rbuf_puts(struct rbuf *b, const char *s)
{
	rbuf_put(b, s, strlen(s));
}

void rbuf_putc(struct rbuf *b, char c)
{
	if (!rbuf_reserve(b, 1))
		return;
	b->p[b->len++] = c;
}

void rbuf_printf(struct rbuf *b, const char *fmt, ...)
{
	va_list ap;
	char small[256];
	va_start(ap, fmt);
	int n = vsnprintf(small, sizeof small, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n < sizeof small) {
		rbuf_put(b, small, (size_t)n);
		return;
	}
	if (!rbuf_reserve(b, (size_t)n + 1))
		return;
	va_start(ap, fmt);
	vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

void rbuf_u64(struct rbuf *b, uint64_t v)
{
	char tmp[24];
	size_t i = sizeof tmp;
	do {
		tmp[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	rbuf_put(b, tmp + i, sizeof tmp - i);
}

void rbuf_fixed(struct rbuf *b, uint64_t v, unsigned decimals)
{
	static const uint64_t pow10[] = {1,
					 10,
					 100,
					 1000,
					 10000,
					 100000,
					 1000000,
					 10000000,
					 100000000,
					 1000000000,
					 10000000000ull,
					 100000000000ull,
					 1000000000000ull};
	if (decimals == 0 || decimals >= sizeof pow10 / sizeof pow10[0]) {
		rbuf_u64(b, v);
		return;
	}
	uint64_t div = pow10[decimals];
	char tmp[40];
	size_t i = sizeof tmp;
	uint64_t frac = v % div;
	for (unsigned d = 0; d < decimals; d++) {
		tmp[--i] = (char)('0' + frac % 10);
		frac /= 10;
	}
	tmp[--i] = '.';
	uint64_t whole = v / div;
	do {
		tmp[--i] = (char)('0' + whole % 10);
		whole /= 10;
	} while (whole);
	rbuf_put(b, tmp + i, sizeof tmp - i);
}

void rbuf_double(struct rbuf *b, double v)
{
	if (isnan(v))
		rbuf_puts(b, "NaN");
	else if (isinf(v))
		rbuf_puts(b, v > 0 ? "+Inf" : "-Inf");
	else
		rbuf_printf(b, "%.17g", v);
}

void rbuf_label_value(struct rbuf *b, const char *s, size_t maxlen)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t n = strnlen(s, maxlen);
	size_t i = 0;
	while (i < n) {
		unsigned char c = u[i];
		if (c == '\\') {
			rbuf_put(b, "\\\\", 2);
			i++;
		} else if (c == '"') {
			rbuf_put(b, "\\\"", 2);
			i++;
		} else if (c == '\n') {
			rbuf_put(b, "\\n", 2);
			i++;
		} else {
			size_t l = wb_utf8_seq_len(u + i, n - i);
			if (l == 0) {
				/* Prometheus refuses a scrape with invalid UTF-8; a comm is any
				 * bytes. */
				rbuf_put(b, "\xef\xbf\xbd", 3);
				i++;
			} else {
				rbuf_put(b, s + i, l);
				i += l;
			}
		}
	}
}

void rbuf_label(struct rbuf *b, bool first, const char *name, const char *value, size_t maxlen)
{
	if (!first)
		rbuf_putc(b, ',');
	rbuf_puts(b, name);
	rbuf_put(b, "=\"", 2);
	rbuf_label_value(b, value, maxlen);
	rbuf_putc(b, '"');
}

int rbuf_gzip_begin(struct rbuf *b, int level)
{
	struct rbuf_gz *gz = calloc(1, sizeof(*gz));
	if (!gz)
		return -1;
	/* 15 + 16: a gzip header and trailer around the deflate stream */
	int zrc = deflateInit2(&gz->zs, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
	if (zrc != Z_OK) {
		log_warnx("gzip: deflateInit2 level %d: %s", level,
			  gz->zs.msg ? gz->zs.msg : "failed");
		free(gz);
		return -1;
	}
	b->gz = gz;
	return 0;
}

int rbuf_gzip_end(struct rbuf *b)
{
	struct rbuf_gz *gz = b->gz;
	if (!gz)
		return -1;
	int rc = b->oom || gz_deflate(b, b->p, b->len, Z_FINISH) < 0 ? -1 : 0;
	deflateEnd(&gz->zs);
	free(b->p);
	*b = gz->out;
	free(gz);
	if (rc < 0) {
		b->oom = true;
		b->len = 0;
	}
	return rc;
}
