/*
 * libFuzzer target for powerd's exec-source line parser: any bytes, cut into
 * lines as the stream reader cuts them, must never crash; an accepted reading
 * must obey the line format (zone characters and length, a known kind, the
 * unit's bounds, range only with uj), and printing it back in the format and
 * parsing that again must give the same reading.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../powerd/powerd.h"

static const char *const kinds[] = {"package", "core",	   "uncore", "dram",
				    "psys",    "platform", "gpu",    "other"};

static void check(const struct pd_exec_line *l)
{
	size_t n = strlen(l->zone);
	if (n == 0 || n > 63)
		abort();
	for (size_t i = 0; i < n; i++) {
		char c = l->zone[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '-' || c == '_' || c == '.' || c == ':'))
			abort();
	}
	bool known = false;
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		known |= strcmp(l->kind, kinds[i]) == 0;
	if (!known)
		abort();
	if (l->unit == PD_UNIT_UJ && l->value > INT64_MAX)
		abort();
	if (l->unit == PD_UNIT_W && (l->value > 1000000000ull * 1000000ull + 999999 || l->range_uj))
		abort();
}

static void roundtrip(const struct pd_exec_line *l)
{
	char line[256], err[256];
	if (l->unit == PD_UNIT_UJ)
		snprintf(line, sizeof(line), "%s %" PRIu64 " uj kind=%s", l->zone, l->value,
			 l->kind);
	else
		snprintf(line, sizeof(line), "%s %" PRIu64 ".%06" PRIu64 " W kind=%s", l->zone,
			 l->value / 1000000, l->value % 1000000, l->kind);
	if (l->range_uj)
		snprintf(line + strlen(line), sizeof(line) - strlen(line), " range=%" PRIu64,
			 l->range_uj);
	struct pd_exec_line again;
	if (exec_parse_line(line, &again, err, sizeof(err)) != 1)
		abort();
	if (strcmp(again.zone, l->zone) || strcmp(again.kind, l->kind) || again.unit != l->unit ||
	    again.value != l->value || again.range_uj != l->range_uj)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 4096)
		return 0;
	char *buf = malloc(size + 1);
	if (!buf)
		return 0;
	memcpy(buf, data, size);
	buf[size] = '\0';
	/* As the stream reader does: lines end at '\n'; a NUL inside a line ends it. */
	for (char *line = buf, *nl; line <= buf + size; line = nl + 1) {
		nl = memchr(line, '\n', (size_t)(buf + size - line));
		if (nl)
			*nl = '\0';
		struct pd_exec_line l;
		char err[256];
		err[0] = '\0';
		int rc = exec_parse_line(line, &l, err, sizeof(err));
		if (rc < -1 || rc > 1 || (rc < 0 && !err[0]))
			abort();
		if (rc == 1) {
			check(&l);
			roundtrip(&l);
		}
		if (!nl)
			break;
	}
	free(buf);
	return 0;
}
