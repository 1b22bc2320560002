/*
 * /proc: node CPU totals from /proc/stat and per-process CPU time from
 * /proc/<pid>/stat (utime + stime, the method Kepler >= 0.10 uses). The
 * parsers are pure; the scanner reads a root that tests can point elsewhere.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codec.h"
#include "log.h"
#include "procstat.h"
#include "usaged.h"

/* ---- text ---- */

void usaged_utf8_clean(char *s)
{
	unsigned char *p = (unsigned char *)s, *end = p + strlen(s);
	while (p < end) {
		size_t n = wb_utf8_seq_len(p, (size_t)(end - p));
		if (n == 0 || (n == 1 && (*p < 0x20 || *p == 0x7f))) {
			*p++ = '?';
			continue;
		}
		p += n;
	}
}

/* ---- parsers ---- */

int procfs_parse_pstat(const char *text, struct procfs_pstat *out)
{
	/* "pid (comm) state ppid ..." where comm may hold spaces and ')': it ends at the last ')'.
	 */
	const char *open = strchr(text, '(');
	const char *close = strrchr(text, ')');
	char *end;

	memset(out, 0, sizeof(*out));
	if (!open || !close || close < open)
		return -1;
	errno = 0;
	unsigned long pid = strtoul(text, &end, 10);
	if (errno || end == text || pid > UINT32_MAX)
		return -1;
	out->pid = (uint32_t)pid;
	size_t n = (size_t)(close - open - 1);
	if (n >= sizeof(out->comm))
		n = sizeof(out->comm) - 1;
	memcpy(out->comm, open + 1, n);
	out->comm[n] = '\0';

	/* Fields after the comm, numbered as in proc(5): 3 state ... 14 utime, 15 stime, 22
	 * starttime. */
	const char *p = close + 1;
	for (int field = 3; field <= 22; field++) {
		while (*p == ' ')
			p++;
		if (!*p || *p == '\n')
			return -1;
		if (field == 14 || field == 15 || field == 22) {
			errno = 0;
			unsigned long long v = strtoull(p, &end, 10);
			if (errno || end == p)
				return -1;
			if (field == 14)
				out->utime_ticks = v;
			else if (field == 15)
				out->stime_ticks = v;
			else
				out->start_ticks = v;
		}
		p += strcspn(p, " \n");
	}
	return 0;
}

/* ---- scanning ---- */

struct procfs {
	char *root;
	int rootfd;
	uint64_t ns_per_tick;
	struct wb_ratelimit rl;
	/* The first /proc/stat reading: totals are published since it, as they count from
	 * boot summed over every CPU and pass INT64_MAX (the schema's bound) after 292
	 * CPU-years, 208 days of uptime on 512 threads. */
	struct wb_cpu_times base;
	bool have_base;
};

struct procfs *procfs_new(const char *root)
{
	struct procfs *self = calloc(1, sizeof(*self));
	if (!self)
		return NULL;
	self->root = strdup(root);
	self->rootfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (!self->root || self->rootfd < 0) {
		log_warn("%s", root);
		procfs_destroy(&self);
		return NULL;
	}
	self->ns_per_tick = wb_procstat_ns_per_tick();
	self->rl = (struct wb_ratelimit)WB_RATELIMIT_INIT;
	return self;
}

void procfs_destroy(struct procfs **self_p)
{
	if (!self_p || !*self_p)
		return;
	struct procfs *self = *self_p;
	if (self->rootfd >= 0)
		close(self->rootfd);
	free(self->root);
	free(self);
	*self_p = NULL;
}

uint64_t procfs_ns_per_tick(const struct procfs *self)
{
	return self->ns_per_tick;
}

const char *procfs_root(const struct procfs *self)
{
	return self->root;
}

/* Read a small file relative to the root into buf (NUL-terminated). Returns its length or -1. */
static long read_at(struct procfs *self, const char *rel, char *buf, size_t size)
{
	int fd = openat(self->rootfd, rel, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	size_t len = 0;
	while (len + 1 < size) {
		ssize_t n = read(fd, buf + len, size - 1 - len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			int e = errno;
			close(fd);
			errno = e;
			return -1;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	buf[len] = '\0';
	close(fd);
	return (long)len;
}

int procfs_read_cpu(struct procfs *self, struct wb_cpu_times *out)
{
	char buf[4096]; /* the "cpu " line comes first */
	if (read_at(self, "stat", buf, sizeof(buf)) < 0) {
		log_rl(&self->rl, WB_LOG_WARN, "%s/stat: %s", self->root, strerror(errno));
		return -1;
	}
	if (wb_procstat_parse_cpu(buf, self->ns_per_tick, out) < 0) {
		log_rl(&self->rl, WB_LOG_WARN, "%s/stat: no \"cpu\" line with 4 or more numbers",
		       self->root);
		return -1;
	}
	if (!self->have_base) {
		self->base = *out;
		self->have_base = true;
	}
	uint64_t *o = (uint64_t *)out;
	const uint64_t *b = (const uint64_t *)&self->base;
	/* The kernel's totals only grow within a boot, and usaged does not outlive one; the
	 * clamp keeps a total that stepped back from wrapping to 2^64. */
	for (size_t i = 0; i < sizeof(*out) / sizeof(uint64_t); i++)
		o[i] = o[i] > b[i] ? o[i] - b[i] : 0;
	return 0;
}

static int sample_from(struct procfs *self, const char *text, struct usaged_sample *out)
{
	struct procfs_pstat ps;
	if (procfs_parse_pstat(text, &ps) < 0)
		return -1;
	memset(out, 0, sizeof(*out));
	out->pid = ps.pid;
	out->start_ns = ps.start_ticks * self->ns_per_tick;
	out->cpu_ns = (ps.utime_ticks + ps.stime_ticks) * self->ns_per_tick;
	memcpy(out->comm, ps.comm, sizeof(out->comm));
	return 0;
}

int procfs_read_pid(struct procfs *self, uint32_t pid, struct usaged_sample *out)
{
	char rel[32], buf[1024];
	snprintf(rel, sizeof(rel), "%" PRIu32 "/stat", pid);
	if (read_at(self, rel, buf, sizeof(buf)) < 0)
		return -1;
	if (sample_from(self, buf, out) < 0) {
		log_rl(&self->rl, WB_LOG_WARN, "%s/%s: malformed", self->root, rel);
		errno = EINVAL;
		return -1;
	}
	return 0;
}

long procfs_scan(struct procfs *self, procfs_sample_fn *fn, void *arg)
{
	int fd = dup(self->rootfd);
	DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;
	long seen = 0;

	if (!dir) {
		log_rl(&self->rl, WB_LOG_WARN, "%s: %s", self->root, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	rewinddir(dir); /* the dup shares the offset with rootfd */
	struct dirent *de;
	while ((de = readdir(dir))) {
		char *end;
		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		unsigned long pid = strtoul(de->d_name, &end, 10);
		if (*end || pid > UINT32_MAX)
			continue;
		struct usaged_sample s;
		/* Gone between readdir and open: it exited, which the next scan tells. */
		if (procfs_read_pid(self, (uint32_t)pid, &s) < 0)
			continue;
		fn(arg, &s);
		seen++;
	}
	closedir(dir);
	return seen;
}

bool procfs_alive(void *arg, uint32_t pid, uint64_t start_ns)
{
	struct procfs *self = arg;
	struct usaged_sample s;
	/* The same process if it started in the same clock tick (what /proc tells). */
	return procfs_read_pid(self, pid, &s) == 0 &&
	       s.start_ns / self->ns_per_tick == start_ns / self->ns_per_tick;
}

int procfs_read_runtime(struct procfs *self, uint32_t pid, uint32_t tid, uint64_t *runtime_ns)
{
	char rel[64], buf[128];
	unsigned long long v;
	snprintf(rel, sizeof(rel), "%" PRIu32 "/task/%" PRIu32 "/schedstat", pid, tid);
	if (read_at(self, rel, buf, sizeof(buf)) < 0)
		return -1;
	if (sscanf(buf, "%llu", &v) != 1) {
		errno = EINVAL;
		return -1;
	}
	*runtime_ns = v;
	return 0;
}

long procfs_read_cgroup(struct procfs *self, uint32_t pid, char *buf, size_t size)
{
	char rel[32];
	snprintf(rel, sizeof(rel), "%" PRIu32 "/cgroup", pid);
	return read_at(self, rel, buf, size);
}
