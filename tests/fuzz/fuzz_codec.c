/*
 * libFuzzer target for the frame codec: any bytes must decode or be rejected
 * with a reason, never crash or leak; what decodes must re-encode and decode
 * to the same bytes. The fast paths for per-process maps must agree with the
 * general path on every input: the same verdict, reason and message, and the
 * same bytes out.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"

/* Decode and, if that works, encode, with the fast paths on or off. */
static int round_trip(const uint8_t *data, size_t size, bool fast, struct wb_err *err, char **out,
		      size_t *out_len)
{
	struct wb_msg msg;
	wb_codec_fast = fast;
	*out = NULL;
	*out_len = 0;
	if (wb_decode(data, size, &msg, err) < 0)
		return -1;
	if (wb_encode(&msg, out, out_len, err) < 0)
		abort();
	wb_msg_clear(&msg);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct wb_err err, slow_err;
	char *a, *slow;
	size_t alen, slow_len;
	int rc = round_trip(data, size, true, &err, &a, &alen);
	int slow_rc = round_trip(data, size, false, &slow_err, &slow, &slow_len);
	if (rc != slow_rc)
		abort();
	if (rc < 0) {
		if ((unsigned)err.reason >= WB_R_COUNT || !err.msg[0])
			abort();
		if (err.reason != slow_err.reason || strcmp(err.msg, slow_err.msg) != 0)
			abort();
		return 0;
	}
	if (alen != slow_len || memcmp(a, slow, alen) != 0)
		abort();
	char *b, *c;
	size_t blen, clen;
	if (round_trip((const uint8_t *)a, alen, true, &err, &b, &blen) < 0 || alen != blen ||
	    memcmp(a, b, alen) != 0)
		abort();
	if (round_trip((const uint8_t *)a, alen, false, &err, &c, &clen) < 0 || alen != clen ||
	    memcmp(a, c, alen) != 0)
		abort();
	free(a);
	free(slow);
	free(b);
	free(c);
	return 0;
}
