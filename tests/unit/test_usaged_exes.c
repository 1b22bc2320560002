/* usaged/exes.c over a fake /proc: pid -> executable path -> id, and which paths a message
 * carries (usaged/dict.c, shared with cgroups). */
#include <ftw.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../usaged/usaged.h"
#include "codec.h"
#include "log.h"
#include "unit.h"

#include "usaged_unit.h"

static char root[256];
static struct procfs *pf;
static struct exes *ex;

static void link_exe(unsigned pid, const char *target)
{
	char path[1024];
	snprintf(path, sizeof(path), "%s/proc/%u", root, pid);
	mkdir(path, 0755);
	if (!target)
		return; /* a kernel thread: no exe link */
	snprintf(path, sizeof(path), "%s/proc/%u/exe", root, pid);
	if (symlink(target, path) < 0) {
		perror(path);
		exit(1);
	}
}

static char longpath[700];

static void setup(void)
{
	unit_tmp(root, sizeof(root), "usaged-exes-XXXXXX");
	if (!mkdtemp(root))
		exit(1);
	char proc[512];
	snprintf(proc, sizeof(proc), "%s/proc", root);
	mkdir(proc, 0755);
	link_exe(10, "/usr/bin/sleep");
	link_exe(11, "/opt/app/server (deleted)");
	link_exe(12, NULL);
	/* 510 ASCII bytes, then a 3-byte character across the 511-byte limit, then more. */
	memset(longpath, 'a', 510);
	longpath[0] = '/';
	memcpy(longpath + 510, "\xe2\x82\xac", 3);
	memset(longpath + 513, 'b', 100);
	longpath[613] = '\0';
	link_exe(13, longpath);
	link_exe(14, "/bin/a\xff"
		     "b"); /* \xff then b (one string would read \xffb as one escape) */
	link_exe(16, "/usr/bin/sleep"); /* a second process of the same binary */
	/* 15: /proc/15/exe is no link (readlink fails with EINVAL): a counted read error */
	char path[600];
	snprintf(path, sizeof(path), "%s/15", proc);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/15/exe", proc);
	FILE *f = fopen(path, "w");
	if (f)
		fclose(f);
	pf = procfs_new(proc);
	ex = pf ? exes_new(pf) : NULL;
	if (!ex) {
		printf("# setup failed\n");
		exit(1);
	}
}

static const struct wb_exe *find(const struct wb_usage *u, uint64_t id)
{
	for (size_t i = 0; i < u->n_exes; i++)
		if (u->exes[i].id == id)
			return &u->exes[i];
	return NULL;
}

static struct wb_usage msg_of(const uint64_t *ids, size_t n, bool full)
{
	return usaged_unit_msg(ids, n, full, offsetof(struct wb_proc, exe_id));
}

static void test_ids(void)
{
	CHECK(exes_id("/usr/bin/sleep") != 0);
	CHECK(exes_id("/usr/bin/sleep") < (1ull << 63));
	CHECK(exes_id("/usr/bin/sleep") != exes_id("/usr/bin/sleeq"));
	CHECK_U64(exes_id("/usr/bin/sleep"), exes_id("/usr/bin/sleep"));
}

static void test_resolve(void)
{
	exes_begin(ex, 0);
	uint64_t sleep = exes_resolve(ex, 10);
	CHECK_U64(sleep, exes_id("/usr/bin/sleep"));
	CHECK_U64(exes_resolve(ex, 16), sleep); /* same path, same id, one entry */
	CHECK_U64(exes_resolve(ex, 11), exes_id("/opt/app/server (deleted)"));
	/* a kernel thread and a process gone: unknown, and no fault */
	CHECK_U64(exes_resolve(ex, 12), 0);
	CHECK_U64(exes_resolve(ex, 99), 0);
	CHECK_U64(exes_read_errors(ex), 0);
	/* an exe that is no link: unknown, counted */
	CHECK_U64(exes_resolve(ex, 15), 0);
	CHECK_U64(exes_read_errors(ex), 1);
	CHECK_U64(exes_count(ex), 2);

	/* cut at 511 bytes on a character boundary: the euro sign goes whole */
	char want[600];
	memcpy(want, longpath, 510);
	want[510] = '\0';
	uint64_t lid = exes_resolve(ex, 13);
	CHECK_U64(lid, exes_id(want));
	uint64_t bid = exes_resolve(ex, 14);
	CHECK_U64(bid, exes_id("/bin/a?b"));
	uint64_t ids[] = {sleep, lid, bid, sleep, 0, 4242};
	struct wb_usage u = msg_of(ids, 6, false);
	CHECK(exes_fill(ex, 3, &u) == 0);
	/* each once; 0 and an id without a path are left out */
	CHECK_U64(u.n_exes, 3);
	const struct wb_exe *x = find(&u, sleep);
	CHECK(x && strcmp(x->path, "/usr/bin/sleep") == 0);
	x = find(&u, lid);
	CHECK(x && strlen(x->path) == 510 && strncmp(x->path, longpath, 510) == 0);
	x = find(&u, bid);
	CHECK(x && strcmp(x->path, "/bin/a?b") == 0);
	usaged_unit_clear(&u);
}

static void test_window(void)
{
	uint64_t sleep = exes_id("/usr/bin/sleep"), del = exes_id("/opt/app/server (deleted)");
	uint64_t ids[] = {sleep, del};
	/* sleep went out in message 0; del first goes out in message 1: listed in 1, 2, 3 */
	for (uint64_t m = 1; m <= 5; m++) {
		exes_begin(ex, m);
		struct wb_usage u = msg_of(ids, 2, false);
		CHECK(exes_fill(ex, 3, &u) == 0);
		CHECK((find(&u, del) != NULL) == (m < 4));
		CHECK((find(&u, sleep) != NULL) == (m < 3));
		usaged_unit_clear(&u);
	}
	/* a full message carries every path it names */
	struct wb_usage u = msg_of(ids, 2, true);
	CHECK(exes_fill(ex, 3, &u) == 0);
	CHECK_U64(u.n_exes, 2);
	usaged_unit_clear(&u);
}

static void test_evict(void)
{
	uint64_t sleep = exes_id("/usr/bin/sleep");
	exes_begin(ex, 100);
	uint64_t ids[] = {sleep};
	struct wb_usage u = msg_of(ids, 1, true);
	CHECK(exes_fill(ex, 3, &u) == 0);
	usaged_unit_clear(&u);
	exes_evict(ex, 50);
	CHECK_U64(exes_count(ex), 1); /* only the one still named */
	/* an evicted path comes back new, and goes out again */
	exes_begin(ex, 101);
	uint64_t del = exes_resolve(ex, 11);
	CHECK_U64(exes_count(ex), 2);
	uint64_t ids2[] = {del};
	u = msg_of(ids2, 1, false);
	CHECK(exes_fill(ex, 3, &u) == 0);
	CHECK(find(&u, del) != NULL);
	usaged_unit_clear(&u);
}

static void test_teardown(void)
{
	exes_destroy(&ex);
	CHECK(ex == NULL);
	exes_destroy(&ex);
	procfs_destroy(&pf);
	usaged_unit_rm(root);
}

static const struct unit_case cases[] = {
    {"a path's id is a stable hash below 2^63, never 0", test_ids},
    {"pid -> path: kernel threads and gone processes unknown, long and bad paths cleaned",
     test_resolve},
    {"a path goes out in every full message and retire_after messages after it is new",
     test_window},
    {"paths no message named are forgotten", test_evict},
    {"teardown", test_teardown},
};

int main(void)
{
	log_init("test_usaged_exes", WB_LOG_ERR);
	setup();
	return unit_run(cases, sizeof(cases) / sizeof(cases[0]), __FILE__);
}
