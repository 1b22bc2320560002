/*
 * Model files: a Kepler weights file read into model.c's parser, and a model
 * written back through model_to_kepler_json, atomically (lib/state.c). The
 * parsing and the JSON stay in model.c (pure).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "estimd.h"
#include "state.h"

#define MODEL_FILE_MAX (4u << 20)

int model_load_file(const char *path, const struct model_hint *hint, struct model *out, char *err,
		    size_t errlen)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	char *buf = malloc(MODEL_FILE_MAX + 1);
	if (!buf) {
		fclose(f);
		snprintf(err, errlen, "%s: out of memory", path);
		return -1;
	}
	size_t n = fread(buf, 1, MODEL_FILE_MAX + 1, f);
	int rd_err = ferror(f);
	fclose(f);
	int rc;
	if (rd_err) {
		snprintf(err, errlen, "%s: read error", path);
		rc = -1;
	} else if (n > MODEL_FILE_MAX) {
		snprintf(err, errlen, "%s: larger than %u bytes", path, MODEL_FILE_MAX);
		rc = -1;
	} else {
		rc = model_parse(buf, n, path, hint, out, err, errlen);
	}
	free(buf);
	return rc;
}

int model_save_file(const struct model *m, const char *path, char *err, size_t errlen)
{
	char *text = model_to_kepler_json(m, err, errlen);
	if (!text)
		return -1;
	int rc = -1;
	struct wb_state_tmp st;
	if (wb_state_create(&st, path, err, errlen) < 0)
		goto out;
	size_t len = strlen(text);
	text[len] = '\n'; /* the NUL goes: one write of the text and its newline */
	bool ok = true;
	for (size_t off = 0; ok && off < len + 1;) {
		ssize_t n = write(st.fd, text + off, len + 1 - off);
		if (n < 0 && errno == EINTR)
			continue;
		ok = n > 0;
		off += ok ? (size_t)n : 0;
	}
	if (wb_state_commit(&st, ok, errno, true, err, errlen) < 0)
		goto out;
	rc = 0;
out:
	free(text);
	return rc;
}
