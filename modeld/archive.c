/*
 * The weight=false answer: a model as a zip archive, as Kepler's server serves it
 * (`shutil.make_archive` of the model's folder: every file, so that Kepler's
 * estimator finds the model file and pickles metadata.json names), and the
 * metadata.json of a published archive (kepler-model-db's <group>/<name>.zip).
 * Files are read with O_NOFOLLOW and only regular ones are taken: an imported
 * folder's link cannot make modeld serve a file from elsewhere.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zip.h>

#include "modeld.h"

/* An answer's files together; Kepler's largest published archive (XGBoost) unpacks to 0.6 MB. */
#define ZIP_MAX_BYTES (64u << 20)
#define ZIP_MAX_DEPTH 8
#define METADATA_MAX_BYTES (1u << 20)

/* The regular file at path, read whole (*out malloc'd). 0, or -1 with err. */
static int read_regular(const char *path, size_t max, char **out, size_t *len, char *err,
			size_t errlen)
{
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size > max) {
		snprintf(err, errlen, "%s: %s", path,
			 S_ISREG(st.st_mode) ? "too large" : "not a regular file");
		close(fd);
		return -1;
	}
	size_t cap = (size_t)st.st_size, n = 0;
	char *buf = malloc(cap ? cap : 1);
	while (buf && n < cap) {
		ssize_t r = read(fd, buf + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	if (!buf || n != cap) {
		snprintf(err, errlen, "%s: %s", path, buf ? "changed while read" : "out of memory");
		free(buf);
		return -1;
	}
	*out = buf;
	*len = n;
	return 0;
}

/* Add bytes (taken over) as name. 0, or -1. */
static int add_bytes(zip_t *z, const char *name, char *bytes, size_t len)
{
	zip_source_t *src = zip_source_buffer(z, bytes, len, 1);
	if (!src) {
		free(bytes);
		return -1;
	}
	if (zip_file_add(z, name, src, ZIP_FL_ENC_UTF_8) < 0) {
		zip_source_free(src);
		return -1;
	}
	return 0;
}

/* Every regular file under dir (rel: its path in the archive, "" at the top), sorted. */
static int add_folder(zip_t *z, const char *dir, const char *rel, int depth, size_t *total,
		      char *err, size_t errlen)
{
	if (depth > ZIP_MAX_DEPTH) {
		snprintf(err, errlen, "%s: folders nested deeper than %d", dir, ZIP_MAX_DEPTH);
		return -1;
	}
	struct dirent **ents;
	int n = scandir(dir, &ents, NULL, alphasort);
	if (n < 0) {
		snprintf(err, errlen, "%s: %s", dir, strerror(errno));
		return -1;
	}
	int rc = 0;
	for (int i = 0; i < n; i++) {
		const char *name = ents[i]->d_name;
		char path[PATH_MAX], entry[PATH_MAX];
		struct stat st;
		if (rc < 0 || !strcmp(name, ".") || !strcmp(name, ".."))
			goto next;
		if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path ||
		    snprintf(entry, sizeof entry, "%s%s%s", rel, rel[0] ? "/" : "", name) >=
			(int)sizeof entry) {
			snprintf(err, errlen, "%s/%s: path too long", dir, name);
			rc = -1;
			goto next;
		}
		if (lstat(path, &st) < 0)
			goto next; /* gone since the listing */
		if (S_ISDIR(st.st_mode)) {
			if (zip_dir_add(z, entry, ZIP_FL_ENC_UTF_8) < 0) {
				snprintf(err, errlen, "%s: %s", path, zip_strerror(z));
				rc = -1;
			} else {
				rc = add_folder(z, path, entry, depth + 1, total, err, errlen);
			}
		} else if (S_ISREG(st.st_mode)) {
			char *bytes;
			size_t len;
			if (read_regular(path, ZIP_MAX_BYTES - *total, &bytes, &len, err, errlen) <
			    0) {
				rc = -1;
				goto next;
			}
			*total += len;
			if (add_bytes(z, entry, bytes, len) < 0) {
				snprintf(err, errlen, "%s: %s", path, zip_strerror(z));
				rc = -1;
			}
		}
	next:
		free(ents[i]);
	}
	free(ents);
	return rc;
}

/* The entries of the published archive at path, as they are, plus weight.json from
 * <name>.json beside it when the archive has none. */
static int add_archive(zip_t *z, zip_t **src_p, const struct md_model *m, char *err, size_t errlen)
{
	int zerr;
	zip_t *src = zip_open(m->archive, ZIP_RDONLY, &zerr);
	if (!src) {
		zip_error_t ze;
		zip_error_init_with_code(&ze, zerr);
		snprintf(err, errlen, "%s: %s", m->archive, zip_error_strerror(&ze));
		zip_error_fini(&ze);
		return -1;
	}
	*src_p = src; /* read at zip_close of z: kept open until then */
	zip_int64_t n = zip_get_num_entries(src, 0);
	bool has_weight = false;
	for (zip_int64_t i = 0; i < n; i++) {
		const char *name = zip_get_name(src, (zip_uint64_t)i, ZIP_FL_ENC_RAW);
		zip_source_t *s = name ? zip_source_zip(z, src, (zip_uint64_t)i, 0, 0, 0) : NULL;
		if (!s || zip_file_add(z, name, s, ZIP_FL_ENC_GUESS) < 0) {
			zip_source_free(s);
			snprintf(err, errlen, "%s: entry %lld: %s", m->archive, (long long)i,
				 zip_strerror(z));
			return -1;
		}
		has_weight |= !strcmp(name, "weight.json");
	}
	if (has_weight || !m->weight)
		return 0;
	char path[PATH_MAX], *bytes;
	size_t len;
	snprintf(path, sizeof path, "%s/%s.json", m->dir, m->name);
	if (read_regular(path, METADATA_MAX_BYTES, &bytes, &len, err, errlen) < 0)
		return -1;
	if (add_bytes(z, "weight.json", bytes, len) < 0) {
		snprintf(err, errlen, "%s: %s", path, zip_strerror(z));
		return -1;
	}
	return 0;
}

int md_model_zip(const struct md_model *m, char **out, size_t *len, char *err, size_t errlen)
{
	zip_error_t ze;
	zip_error_init(&ze);
	zip_source_t *buf = zip_source_buffer_create(NULL, 0, 0, &ze);
	if (!buf) {
		snprintf(err, errlen, "%s", zip_error_strerror(&ze));
		zip_error_fini(&ze);
		return -1;
	}
	zip_source_keep(buf);
	zip_t *z = zip_open_from_source(buf, ZIP_TRUNCATE, &ze);
	if (!z) {
		snprintf(err, errlen, "%s", zip_error_strerror(&ze));
		zip_error_fini(&ze);
		zip_source_free(buf);
		return -1;
	}
	zip_t *src = NULL;
	size_t total = 0;
	int rc = m->archive ? add_archive(z, &src, m, err, errlen)
			    : add_folder(z, m->dir, "", 0, &total, err, errlen);
	if (rc == 0 && zip_close(z) < 0) {
		snprintf(err, errlen, "%s: %s", m->archive ? m->archive : m->dir, zip_strerror(z));
		rc = -1;
	}
	if (rc < 0)
		zip_discard(z);
	if (src)
		zip_discard(src);
	zip_stat_t st;
	if (rc == 0) {
		rc = -1;
		if (zip_source_stat(buf, &st) == 0 && zip_source_open(buf) == 0) {
			*out = malloc(st.size ? st.size : 1);
			if (*out && zip_source_read(buf, *out, st.size) == (zip_int64_t)st.size) {
				*len = st.size;
				rc = 0;
			} else {
				free(*out);
				*out = NULL;
				snprintf(err, errlen, "cannot read the archive back");
			}
			zip_source_close(buf);
		} else {
			snprintf(err, errlen, "cannot read the archive back");
		}
	}
	zip_source_free(buf);
	zip_error_fini(&ze);
	return rc;
}

json_t *md_archive_metadata(const char *path, char *err, size_t errlen)
{
	int zerr;
	zip_t *z = zip_open(path, ZIP_RDONLY, &zerr);
	if (!z) {
		zip_error_t ze;
		zip_error_init_with_code(&ze, zerr);
		snprintf(err, errlen, "%s", zip_error_strerror(&ze));
		zip_error_fini(&ze);
		return NULL;
	}
	json_t *j = NULL;
	zip_stat_t st;
	zip_int64_t i = zip_name_locate(z, "metadata.json", 0);
	zip_file_t *f = NULL;
	char *text = NULL;
	if (i < 0 || zip_stat_index(z, (zip_uint64_t)i, 0, &st) < 0) {
		snprintf(err, errlen, "no metadata.json in the archive");
	} else if (st.size > METADATA_MAX_BYTES) {
		snprintf(err, errlen, "metadata.json: over %u bytes", METADATA_MAX_BYTES);
	} else if (!(text = malloc(st.size + 1)) || !(f = zip_fopen_index(z, (zip_uint64_t)i, 0)) ||
		   zip_fread(f, text, st.size) != (zip_int64_t)st.size) {
		snprintf(err, errlen, "metadata.json: %s",
			 f ? zip_file_strerror(f) : zip_strerror(z));
	} else {
		json_error_t je;
		if (!(j = json_loadb(text, st.size, JSON_REJECT_DUPLICATES, &je)))
			snprintf(err, errlen, "metadata.json: line %d: %s", je.line, je.text);
	}
	if (f)
		zip_fclose(f);
	free(text);
	zip_discard(z);
	return j;
}
