/*
 * Process -> executable: the path /proc/<pid>/exe links to, read when a
 * process first has something to report and again after it execs (ptab.c
 * asks), named by a hash of the path; which paths a message carries is
 * dict.c's choice, as for cgroups.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hash.h"
#include "log.h"
#include "usaged.h"

#define EXES_MAX 65536 /* the schema's bound on one message's exes */

struct exes {
	struct procfs *pf;
	struct dict *paths; /* id -> struct wb_exe */
	uint64_t read_errors, full_drops;
	struct wb_ratelimit rl;
};

struct exes *exes_new(struct procfs *pf)
{
	struct exes *self = calloc(1, sizeof(*self));
	if (!self)
		return NULL;
	self->pf = pf;
	self->rl = (struct wb_ratelimit)WB_RATELIMIT_INIT;
	self->paths = dict_new(sizeof(struct wb_exe), EXES_MAX);
	if (!self->paths)
		exes_destroy(&self);
	return self;
}

void exes_destroy(struct exes **self_p)
{
	if (!self_p || !*self_p)
		return;
	dict_destroy(&(*self_p)->paths);
	free(*self_p);
	*self_p = NULL;
}

void exes_begin(struct exes *self, uint64_t msgno)
{
	dict_begin(self->paths, msgno);
}

uint64_t exes_id(const char *path)
{
	uint64_t id = wb_hash_str(path) & INT64_MAX; /* the schema's bound */
	return id ? id : 1;			     /* 0 means unknown */
}

void exes_clean(char *path, size_t size)
{
	size_t n = strlen(path);
	if (n >= size) {
		/* Cut on a character boundary: step back over continuation bytes (10xxxxxx). */
		n = size - 1;
		while (n > 0 && ((unsigned char)path[n] & 0xc0) == 0x80)
			n--;
		path[n] = '\0';
	}
	usaged_utf8_clean(path);
}

uint64_t exes_resolve(void *arg, uint32_t pid)
{
	struct exes *self = arg;
	char link[USAGED_PATH_MAX], buf[4096];
	snprintf(link, sizeof(link), "%s/%u/exe", procfs_root(self->pf), pid);
	ssize_t n = readlink(link, buf, sizeof(buf) - 1);
	if (n <= 0) {
		/* A kernel thread has no executable, an exited process no /proc entry: both
		 * unknown, neither a fault. */
		if (n < 0 && errno != ENOENT && errno != ESRCH) {
			self->read_errors++;
			log_rl(&self->rl, WB_LOG_WARN, "%s: %s (needs CAP_SYS_PTRACE)", link,
			       strerror(errno));
		}
		return 0;
	}
	buf[n] = '\0';
	exes_clean(buf, sizeof(((struct wb_exe *)0)->path));
	uint64_t id = exes_id(buf);
	if (dict_get(self->paths, id))
		return id;
	if (dict_full(self->paths)) {
		self->full_drops++;
		log_rl(&self->rl, WB_LOG_WARN, "more than %d executables in use: %s left unnamed",
		       EXES_MAX, buf);
		return 0;
	}
	struct wb_exe *x = dict_set(self->paths, id);
	if (!x)
		return 0;
	x->id = id;
	snprintf(x->path, sizeof(x->path), "%s", buf);
	return id;
}

int exes_fill(struct exes *self, uint64_t retire_after, struct wb_usage *msg)
{
	void *out;
	int rc = dict_fill(self->paths, msg->procs, msg->n_procs, sizeof(*msg->procs),
			   offsetof(struct wb_proc, exe_id), msg->full, retire_after, &out,
			   &msg->n_exes);
	msg->exes = out;
	return rc;
}

void exes_evict(struct exes *self, uint64_t unused_msgs)
{
	dict_evict(self->paths, unused_msgs);
}

size_t exes_count(const struct exes *self)
{
	return dict_count(self->paths);
}

uint64_t exes_read_errors(const struct exes *self)
{
	return self->read_errors;
}

uint64_t exes_full_drops(const struct exes *self)
{
	return self->full_drops;
}
