/*
 * cgroup id -> path -> identity. v2 ids (what the kernel reports) map to
 * paths by walking the v2 hierarchy when an unknown id shows up; processes in
 * the v2 root on a v1 or hybrid host are named by their v1 cgroup instead,
 * read from /proc/<pid>/cgroup. Also decides which identities a message carries.
 */
#include <czmq.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "codec.h"
#include "log.h"
#include "usaged.h"

#define CGROUPS_MAX 65536 /* the schema's bound on one message's cgroups */
#define WALK_DEPTH 32

struct cgroups {
	struct procfs *pf;
	struct ident_mount *mounts;
	size_t nmounts;
	const struct ident_mount *v2; /* NULL when no cgroup2 is mounted */
	bool has_v1;
	struct dict *infos; /* id -> struct wb_cgroup (id, path and what the path says) */
	zhashx_t *v2paths;  /* "%016llx" id -> path, from the last walk */
	uint64_t msgno, walked_msgno;
	bool walked;
	uint64_t full_drops;
	char desc[USAGED_PATH_MAX + 64];
	struct wb_ratelimit rl;
};

static void free_item(void **item)
{
	free(*item);
	*item = NULL;
}

static void key_of(uint64_t id, char key[17])
{
	snprintf(key, 17, "%016" PRIx64, id);
}

struct cgroups *cgroups_new(struct procfs *pf)
{
	struct cgroups *self = calloc(1, sizeof(*self));
	char path[USAGED_PATH_MAX];
	FILE *f;

	if (!self)
		return NULL;
	self->pf = pf;
	self->rl = (struct wb_ratelimit)WB_RATELIMIT_INIT;
	self->infos = dict_new(sizeof(struct wb_cgroup), CGROUPS_MAX);
	self->v2paths = zhashx_new();
	if (!self->infos || !self->v2paths)
		goto fail;
	zhashx_set_destructor(self->v2paths, free_item);

	snprintf(path, sizeof(path), "%s/self/mountinfo", procfs_root(pf));
	f = fopen(path, "re");
	if (!f) {
		log_warn("%s", path);
		goto fail;
	}
	char *line = NULL;
	size_t cap = 0;
	while (getline(&line, &cap, f) > 0) {
		struct ident_mount m;
		int rc = ident_parse_mountinfo(line, &m);
		if (rc < 0)
			log_warnx("%s: malformed line: %.80s", path, line);
		if (rc <= 0)
			continue;
		struct ident_mount *mounts =
		    realloc(self->mounts, (self->nmounts + 1) * sizeof(*mounts));
		if (!mounts)
			break;
		self->mounts = mounts;
		self->mounts[self->nmounts++] = m;
	}
	free(line);
	fclose(f);

	int nv1 = 0;
	for (size_t i = 0; i < self->nmounts; i++) {
		if (self->mounts[i].v2 && !self->v2)
			self->v2 = &self->mounts[i];
		else if (!self->mounts[i].v2)
			nv1++;
	}
	self->has_v1 = nv1 > 0;
	snprintf(self->desc, sizeof(self->desc), "cgroup v2 %s%s, %d v1 hierarchies",
		 self->v2 ? "at " : "not mounted", self->v2 ? self->v2->point : "", nv1);
	return self;
fail:
	cgroups_destroy(&self);
	return NULL;
}

void cgroups_destroy(struct cgroups **self_p)
{
	if (!self_p || !*self_p)
		return;
	struct cgroups *self = *self_p;
	dict_destroy(&self->infos);
	zhashx_destroy(&self->v2paths);
	free(self->mounts);
	free(self);
	*self_p = NULL;
}

const char *cgroups_describe(const struct cgroups *self)
{
	return self->desc;
}

size_t cgroups_count(const struct cgroups *self)
{
	return dict_count(self->infos);
}

void cgroups_begin(struct cgroups *self, uint64_t msgno)
{
	self->msgno = msgno;
	dict_begin(self->infos, msgno);
}

/* Where the hierarchy path of m lives in the filesystem. Returns 0 or -1 (outside the mount). */
static int fs_path(const struct ident_mount *m, const char *path, char *out, size_t size)
{
	size_t nroot = strlen(m->root);
	if (strcmp(m->root, "/") == 0)
		nroot = 0;
	else if (strncmp(path, m->root, nroot) != 0 || (path[nroot] && path[nroot] != '/'))
		return -1;
	int n = snprintf(out, size, "%s%s", m->point, path + nroot);
	return n < 0 || (size_t)n >= size ? -1 : 0;
}

static uint64_t inode_of(const struct ident_mount *m, const char *path)
{
	char full[USAGED_PATH_MAX * 2];
	struct stat st;
	if (fs_path(m, path, full, sizeof(full)) < 0 || stat(full, &st) < 0)
		return 0;
	return (uint64_t)st.st_ino;
}

/* Record every cgroup of the v2 hierarchy below dir (rel is its hierarchy path). */
static void walk(struct cgroups *self, int fd, char *rel, size_t len, int depth)
{
	DIR *dir = fdopendir(fd);
	struct dirent *de;
	if (!dir) {
		close(fd);
		return;
	}
	while ((de = readdir(dir))) {
		if (de->d_type != DT_DIR || de->d_name[0] == '.')
			continue;
		size_t n = strlen(de->d_name);
		if (len + 1 + n >= USAGED_PATH_MAX)
			continue;
		rel[len] = '/';
		memcpy(rel + len + 1, de->d_name, n + 1);
		char key[17];
		key_of((uint64_t)de->d_ino, key);
		char *copy = strdup(rel);
		if (copy && zhashx_insert(self->v2paths, key, copy) != 0)
			free(copy);
		if (depth < WALK_DEPTH) {
			int sub =
			    openat(dirfd(dir), de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			if (sub >= 0)
				walk(self, sub, rel, len + 1 + n, depth + 1);
		}
		rel[len] = '\0';
	}
	closedir(dir);
}

static void walk_v2(struct cgroups *self)
{
	char rel[USAGED_PATH_MAX];
	struct stat st;
	int fd = open(self->v2->point, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0) {
		log_rl(&self->rl, WB_LOG_WARN, "%s: %s", self->v2->point, strerror(errno));
		if (fd >= 0)
			close(fd);
		return;
	}
	zhashx_purge(self->v2paths);
	snprintf(rel, sizeof(rel), "%s", strcmp(self->v2->root, "/") == 0 ? "" : self->v2->root);
	char key[17];
	key_of((uint64_t)st.st_ino, key);
	zhashx_insert(self->v2paths, key, strdup(rel[0] ? rel : "/"));
	walk(self, fd, rel, strlen(rel), 0);
}

/* The v2 path of id; walks the hierarchy on a miss, at most once per message. */
static const char *v2_path(struct cgroups *self, uint64_t id)
{
	char key[17];
	key_of(id, key);
	const char *p = zhashx_lookup(self->v2paths, key);
	if (!p && (!self->walked || self->walked_msgno != self->msgno)) {
		walk_v2(self);
		self->walked = true;
		self->walked_msgno = self->msgno;
		p = zhashx_lookup(self->v2paths, key);
	}
	return p;
}

/* Make sure id's identity is known; returns id. */
static uint64_t remember(struct cgroups *self, uint64_t id, const char *path)
{
	if (!id)
		return 0;
	/* The stored path is cleaned and cut to size: compare it with path made the same way, or
	 * a non-UTF-8 name would look new (and be sent again) at every lookup. */
	char clean[sizeof(((struct wb_cgroup *)0)->path)];
	snprintf(clean, sizeof(clean), "%s", path);
	usaged_utf8_clean(clean);
	struct wb_cgroup *cg = dict_get(self->infos, id);
	if (cg && strcmp(cg->path, clean) == 0)
		return id;
	if (!cg && dict_full(self->infos)) {
		self->full_drops++;
		log_rl(&self->rl, WB_LOG_WARN,
		       "more than %d cgroups in use: %s left without identity", CGROUPS_MAX, path);
		return id;
	}
	cg = dict_set(self->infos, id); /* new, or its path changed: sent again */
	if (!cg)
		return id;
	cg->id = id;
	memcpy(cg->path, clean, sizeof(clean));
	ident_parse(path, cg);
	return id;
}

uint64_t cgroups_resolve(void *arg, uint32_t pid, uint64_t kcgroup_id)
{
	struct cgroups *self = arg;
	char buf[4096];
	struct ident_cgfile f;

	if (kcgroup_id && self->v2) {
		const char *p = v2_path(self, kcgroup_id);
		/* In the v2 root of a host whose workloads live in v1, /proc/<pid>/cgroup says
		 * more. */
		if (p && (strcmp(p, "/") != 0 || !self->has_v1))
			return remember(self, kcgroup_id, p);
	}
	if (procfs_read_cgroup(self->pf, pid, buf, sizeof(buf)) < 0 ||
	    ident_parse_cgfile(buf, &f) < 0)
		return kcgroup_id; /* gone: keep what the kernel said */
	if (self->v2 && f.has_v2 && (strcmp(f.v2_path, "/") != 0 || !f.has_v1)) {
		uint64_t id = kcgroup_id ? kcgroup_id : inode_of(self->v2, f.v2_path);
		return remember(self, id, f.v2_path);
	}
	if (f.has_v1) {
		for (size_t i = 0; i < self->nmounts; i++) {
			if (!ident_mount_matches(&self->mounts[i], f.v1_controllers))
				continue;
			uint64_t ino = inode_of(&self->mounts[i], f.v1_path);
			if (ino)
				return remember(self, ino | CGROUPS_V1_BIT, f.v1_path);
			break;
		}
	}
	if (self->v2 && f.has_v2)
		return remember(self, kcgroup_id ? kcgroup_id : inode_of(self->v2, f.v2_path),
				f.v2_path);
	return kcgroup_id;
}

int cgroups_fill(struct cgroups *self, uint64_t retire_after, struct wb_usage *msg)
{
	void *out;
	int rc = dict_fill(self->infos, msg->procs, msg->n_procs, sizeof(*msg->procs),
			   offsetof(struct wb_proc, cgroup_id), msg->full, retire_after, &out,
			   &msg->n_cgroups);
	msg->cgroups = out;
	return rc;
}

void cgroups_evict(struct cgroups *self, uint64_t unused_msgs)
{
	dict_evict(self->infos, unused_msgs);
}
