/*
 * libFuzzer target for the frame codec: any bytes must decode or be rejected
 * with a reason, never crash or leak; what decodes must re-encode and decode
 * to the same bytes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct wb_msg msg;
	struct wb_err err;
	if (wb_decode(data, size, &msg, &err) < 0) {
		if ((unsigned)err.reason >= WB_R_COUNT || !err.msg[0])
			abort();
		return 0;
	}
	char *a, *b;
	size_t alen, blen;
	if (wb_encode(&msg, &a, &alen, &err) < 0)
		abort();
	struct wb_msg again;
	if (wb_decode(a, alen, &again, &err) < 0)
		abort();
	if (wb_encode(&again, &b, &blen, &err) < 0 || alen != blen || memcmp(a, b, alen) != 0)
		abort();
	free(a);
	free(b);
	wb_msg_clear(&again);
	wb_msg_clear(&msg);
	return 0;
}
