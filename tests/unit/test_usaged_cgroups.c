/* usaged/cgroups.c over a fake /proc and fake cgroup hierarchies: id -> path -> identity, and what
 * a message carries. */
#include <ftw.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../usaged/usaged.h"
#include "codec.h"
#include "log.h"
#include "unit.h"

#include "usaged_unit.h"

#define CID "3f1e2d4c5b6a79880716253443526170819203a4b5c6d7e8f90a1b2c3d4e5f60"
#define CID2 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define UID_ "5d3c2b1a_9f8e_4d7c_b6a5_0a1b2c3d4e5f"
#define POD "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UID_ ".slice"

static char root[256];

static void mkdirs(const char *rel)
{
	usaged_unit_mkdirs(root, rel);
}

static void put(const char *rel, const char *text)
{
	usaged_unit_put(root, rel, text);
}

static uint64_t ino(const char *rel)
{
	char path[1024];
	struct stat st;
	snprintf(path, sizeof(path), "%s/%s", root, rel);
	if (stat(path, &st) < 0) {
		perror(path);
		return 0;
	}
	return (uint64_t)st.st_ino;
}

static struct procfs *pf;
static struct cgroups *cg;

static void setup(void)
{
	char text[2048];
	unit_tmp(root, sizeof(root), "usaged-cgroups-XXXXXX");
	if (!mkdtemp(root))
		exit(1);
	snprintf(text, sizeof(text),
		 "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n"
		 "30 22 0:26 / %s/cg2 rw shared:1 - cgroup2 cgroup2 rw,nsdelegate\n"
		 "31 22 0:27 / %s/cg1sys rw - cgroup cgroup rw,xattr,name=systemd\n"
		 "32 22 0:28 / %s/cg1cpu rw - cgroup cgroup rw,cpu,cpuacct\n",
		 root, root, root);
	put("proc/self/mountinfo", text);
	put("proc/stat", "cpu  1 2 3 4 5 6 7 8 0 0\n");
	mkdirs("cg2/system.slice/docker-" CID ".scope");
	mkdirs("cg2" POD "/cri-containerd-" CID2 ".scope");
	mkdirs("cg1sys/docker/" CID2);
	mkdirs("cg1cpu/docker/" CID2);
	/* 100: a docker container on v2; 200: in the v2 root, a v1 docker container (hybrid host)
	 */
	put("proc/100/cgroup", "1:name=systemd:/system.slice/docker-" CID
			       ".scope\n0::/system.slice/docker-" CID ".scope\n");
	put("proc/200/cgroup",
	    "2:cpu,cpuacct:/docker/" CID2 "\n1:name=systemd:/docker/" CID2 "\n0::/\n");
	put("proc/300/cgroup", "0::" POD "/cri-containerd-" CID2 ".scope\n");
	char proc[512];
	snprintf(proc, sizeof(proc), "%s/proc", root);
	pf = procfs_new(proc);
	cg = pf ? cgroups_new(pf) : NULL;
	if (!cg) {
		printf("# setup failed\n");
		exit(1);
	}
}

static const struct wb_cgroup *find(const struct wb_usage *u, uint64_t id)
{
	for (size_t i = 0; i < u->n_cgroups; i++)
		if (u->cgroups[i].id == id)
			return &u->cgroups[i];
	return NULL;
}

/* A message naming these cgroup ids (one process each). */
static struct wb_usage msg_of(const uint64_t *ids, size_t n, bool full)
{
	return usaged_unit_msg(ids, n, full, offsetof(struct wb_proc, cgroup_id));
}

static void test_describe(void)
{
	CHECK(strstr(cgroups_describe(cg), "/cg2") != NULL);
	CHECK(strstr(cgroups_describe(cg), "2 v1 hierarchies") != NULL);
}

static void test_by_pid(void)
{
	/* /proc source: no kernel id, so /proc/<pid>/cgroup and a stat of the directory */
	cgroups_begin(cg, 0);
	uint64_t docker = ino("cg2/system.slice/docker-" CID ".scope");
	CHECK(docker != 0);
	CHECK_U64(cgroups_resolve(cg, 100, 0), docker);
	/* hybrid: v2 says root, v1 knows better; the id is the v1 directory's, marked */
	uint64_t v1 = ino("cg1sys/docker/" CID2);
	CHECK_U64(cgroups_resolve(cg, 200, 0), v1 | CGROUPS_V1_BIT);
	/* gone */
	CHECK_U64(cgroups_resolve(cg, 999, 0), 0);
}

static void test_by_kernel_id(void)
{
	cgroups_begin(cg, 1);
	uint64_t pod = ino("cg2" POD "/cri-containerd-" CID2 ".scope");
	/* the kernel's id is enough: the walk finds the path, no /proc needed (pid 999 is gone) */
	CHECK_U64(cgroups_resolve(cg, 999, pod), pod);
	/* the v2 root on a host with v1 hierarchies: /proc/<pid>/cgroup decides */
	uint64_t rootid = ino("cg2");
	CHECK_U64(cgroups_resolve(cg, 200, rootid), ino("cg1sys/docker/" CID2) | CGROUPS_V1_BIT);
	CHECK_U64(cgroups_resolve(cg, 999, rootid), rootid); /* gone: the kernel's word stands */
	/* an id no walk finds */
	CHECK_U64(cgroups_resolve(cg, 999, 12345678), 12345678);

	/* a cgroup made after the walk: found by the walk of the next message, not twice in one */
	mkdirs("cg2/system.slice/docker-" CID2 ".scope");
	uint64_t late = ino("cg2/system.slice/docker-" CID2 ".scope");
	CHECK_U64(cgroups_resolve(cg, 999, late), late);
	uint64_t ids[] = {late};
	struct wb_usage u = msg_of(ids, 1, true);
	CHECK(cgroups_fill(cg, 5, &u) == 0);
	CHECK(find(&u, late) == NULL);
	usaged_unit_clear(&u);
	cgroups_begin(cg, 2);
	CHECK_U64(cgroups_resolve(cg, 999, late), late);
	u = msg_of(ids, 1, true);
	CHECK(cgroups_fill(cg, 5, &u) == 0);
	CHECK(find(&u, late) && strcmp(find(&u, late)->container_id, CID2) == 0);
	usaged_unit_clear(&u);
}

static void test_fill(void)
{
	uint64_t docker = ino("cg2/system.slice/docker-" CID ".scope");
	uint64_t pod = ino("cg2" POD "/cri-containerd-" CID2 ".scope");
	uint64_t v1 = ino("cg1sys/docker/" CID2) | CGROUPS_V1_BIT;
	uint64_t ids[] = {docker, pod, v1, docker, 0, 424242};
	/* docker first goes out in message 5 */
	cgroups_begin(cg, 5);
	struct wb_usage u = msg_of(ids, 1, false);
	CHECK(cgroups_fill(cg, 3, &u) == 0);
	CHECK_U64(u.n_cgroups, 1);
	usaged_unit_clear(&u);

	cgroups_begin(cg, 10);
	CHECK_U64(cgroups_resolve(cg, 300, 0), pod);
	u = msg_of(ids, 6, true);
	CHECK(cgroups_fill(cg, 3, &u) == 0);
	/* each once; 0 and an id without identity are left out */
	CHECK_U64(u.n_cgroups, 3);
	const struct wb_cgroup *c = find(&u, docker);
	CHECK(c && strcmp(c->path, "/system.slice/docker-" CID ".scope") == 0 &&
	      strcmp(c->runtime, "docker") == 0 && strcmp(c->container_id, CID) == 0);
	c = find(&u, pod);
	CHECK(c && strcmp(c->runtime, "containerd") == 0 && strcmp(c->container_id, CID2) == 0 &&
	      strcmp(c->pod_uid, "5d3c2b1a-9f8e-4d7c-b6a5-0a1b2c3d4e5f") == 0);
	c = find(&u, v1);
	CHECK(c && strcmp(c->path, "/docker/" CID2) == 0 && strcmp(c->runtime, "docker") == 0);
	usaged_unit_clear(&u);

	/* pod and v1 went out first in message 10: listed in 10, 11, 12; docker's window (5..7) is
	 * past */
	for (uint64_t m = 11; m <= 14; m++) {
		cgroups_begin(cg, m);
		u = msg_of(ids, 3, false);
		CHECK(cgroups_fill(cg, 3, &u) == 0);
		CHECK((find(&u, pod) != NULL) == (m < 13));
		CHECK((find(&u, v1) != NULL) == (m < 13));
		CHECK(find(&u, docker) == NULL);
		usaged_unit_clear(&u);
	}
	/* a full message carries all it names */
	u = msg_of(ids, 3, true);
	CHECK(cgroups_fill(cg, 3, &u) == 0);
	CHECK_U64(u.n_cgroups, 3);
	usaged_unit_clear(&u);
}

/* A cgroup name that is not UTF-8 is stored cleaned; looked up again, it is the same cgroup, not
 * a new one to send in every message. */
static void test_non_utf8(void)
{
	mkdirs("cg2/bad\xffname.scope");
	put("proc/400/cgroup", "0::/bad\xffname.scope\n");
	uint64_t bad = ino("cg2/bad\xffname.scope");
	CHECK(bad != 0);
	uint64_t ids[] = {bad};
	for (uint64_t m = 20; m <= 24; m++) {
		cgroups_begin(cg, m);
		CHECK_U64(cgroups_resolve(cg, 400, 0), bad);
		struct wb_usage u = msg_of(ids, 1, false);
		CHECK(cgroups_fill(cg, 3, &u) == 0);
		/* first sent in message 20: listed in 20, 21, 22 only */
		const struct wb_cgroup *c = find(&u, bad);
		CHECK((c != NULL) == (m < 23));
		if (c)
			CHECK_STR(c->path, "/bad?name.scope");
		usaged_unit_clear(&u);
	}
}

static void test_evict(void)
{
	size_t before = cgroups_count(cg);
	CHECK(before >= 4);
	uint64_t docker = ino("cg2/system.slice/docker-" CID ".scope");
	cgroups_begin(cg, 100);
	uint64_t ids[] = {docker};
	struct wb_usage u = msg_of(ids, 1, true);
	CHECK(cgroups_fill(cg, 3, &u) == 0);
	usaged_unit_clear(&u);
	cgroups_evict(cg, 50);
	CHECK_U64(cgroups_count(cg), 1); /* only the one still named */
	/* an evicted id comes back, and is new again */
	cgroups_begin(cg, 101);
	CHECK_U64(cgroups_resolve(cg, 300, 0), ino("cg2" POD "/cri-containerd-" CID2 ".scope"));
	CHECK_U64(cgroups_count(cg), 2);
}

static void test_teardown(void)
{
	cgroups_destroy(&cg);
	CHECK(cg == NULL);
	cgroups_destroy(&cg);
	procfs_destroy(&pf);
	usaged_unit_rm(root);
}

static const struct unit_case cases[] = {
    {"hierarchies from mountinfo", test_describe},
    {"by /proc/<pid>/cgroup: v2, and v1 on a hybrid host", test_by_pid},
    {"by the kernel's cgroup id: walking v2, once per message", test_by_kernel_id},
    {"identities in messages: all in full ones, new ones for retire_after", test_fill},
    {"a non-UTF-8 cgroup name is one cgroup, sent for retire_after", test_non_utf8},
    {"unused identities are forgotten", test_evict},
    {"teardown", test_teardown},
};

int main(void)
{
	log_init("test_usaged_cgroups", WB_LOG_ERR);
	setup();
	return unit_run(cases, sizeof(cases) / sizeof(cases[0]), __FILE__);
}
