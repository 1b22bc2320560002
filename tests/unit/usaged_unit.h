/*
 * What tests/unit/test_usaged_*.c share: a fake tree (/proc, cgroup hierarchies)
 * under a temporary root, and messages whose processes name one id each.
 * Include after unit.h and usaged.h.
 */
#ifndef WB_USAGED_UNIT_H
#define WB_USAGED_UNIT_H

#include <ftw.h>
#include <stddef.h>
#include <sys/stat.h>

/* Make root/rel and the folders above it. */
static inline void usaged_unit_mkdirs(const char *root, const char *rel)
{
	char path[1024];
	snprintf(path, sizeof(path), "%s/%s", root, rel);
	for (char *p = path + strlen(root) + 1; *p; p++)
		if (*p == '/') {
			*p = '\0';
			mkdir(path, 0755);
			*p = '/';
		}
	mkdir(path, 0755);
}

/* Write text to root/rel, making the folders above it. */
static inline void usaged_unit_put(const char *root, const char *rel, const char *text)
{
	char dir[512], path[1024];
	snprintf(dir, sizeof(dir), "%s", rel);
	char *slash = strrchr(dir, '/');
	if (slash) {
		*slash = '\0';
		usaged_unit_mkdirs(root, dir);
	}
	snprintf(path, sizeof(path), "%s/%s", root, rel);
	unit_write(path, text);
}

static inline int usaged_unit_rm_one(const char *path, const struct stat *st, int flag,
				     struct FTW *ftw)
{
	(void)st, (void)flag, (void)ftw;
	return remove(path);
}

/* Remove the tree under root. */
static inline void usaged_unit_rm(const char *root)
{
	nftw(root, usaged_unit_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* A message of n processes, the i-th naming ids[i] in the uint64_t member at id_offset
 * (offsetof(struct wb_proc, cgroup_id), ...). Freed by usaged_unit_clear. */
static inline struct wb_usage usaged_unit_msg(const uint64_t *ids, size_t n, bool full,
					      size_t id_offset)
{
	struct wb_usage u = {.full = full};
	u.procs = wb_array_new(n ? n : 1, sizeof(*u.procs));
	for (size_t i = 0; i < n; i++) {
		struct wb_proc *p = &u.procs[u.n_procs++];
		*p = (struct wb_proc){.pid = (uint64_t)i + 1, .cpu_ns = 1};
		memcpy((char *)p + id_offset, &ids[i], sizeof(ids[i]));
	}
	return u;
}

static inline void usaged_unit_clear(struct wb_usage *u)
{
	struct wb_msg m = {.kind = WB_USAGE, .usage = *u};
	wb_msg_clear(&m);
}

#endif
