/* usaged/ident.c: cgroup paths -> container, pod, VM, service; /proc/<pid>/cgroup and mountinfo
 * parsing. */
#include "unit.h"
#include "../../usaged/usaged.h"

#define CID "3f1e2d4c5b6a79880716253443526170819203a4b5c6d7e8f90a1b2c3d4e5f60"
#define CID2 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define UID "5d3c2b1a-9f8e-4d7c-b6a5-0a1b2c3d4e5f"
#define UID_ "5d3c2b1a_9f8e_4d7c_b6a5_0a1b2c3d4e5f"

static const struct {
	const char *path;
	const char *runtime, *container_id, *pod_uid, *vm, *service;
} paths[] = {
    /* plain hosts */
    {"/", "", "", "", "", ""},
    {"/init.scope", "", "", "", "", ""},
    {"/system.slice/nginx.service", "", "", "", "", "nginx.service"},
    {"/system.slice/system-getty.slice/getty@tty1.service", "", "", "", "", "getty@tty1.service"},
    {"/system.slice/foo\\x2dbar.service", "", "", "", "", "foo\\x2dbar.service"},
    {"/user.slice/user-1000.slice/user@1000.service/app.slice/app-gnome-firefox-1234.scope", "", "",
     "", "", "user@1000.service"},
    {"/user.slice/user-1000.slice/user@1000.service/app.slice/pipewire.service", "", "", "", "",
     "pipewire.service"},
    {"/system.slice/docker.service", "", "", "", "", "docker.service"},
    {"/system.slice/containerd.service", "", "", "", "", "containerd.service"},
    /* docker: systemd driver, cgroupfs driver (v1 and v2), docker in docker */
    {"/system.slice/docker-" CID ".scope", "docker", CID, "", "", ""},
    {"/docker/" CID, "docker", CID, "", "", ""},
    {"/docker/" CID "/docker/" CID2, "docker", CID2, "", "", ""},
    {"/system.slice/docker-" CID ".scope/system.slice/nginx.service", "docker", CID, "", "",
     "nginx.service"},
    /* kubernetes, systemd driver: containerd, cri-o, docker (cri-dockerd); three QoS classes */
    {"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UID_
     ".slice/cri-containerd-" CID ".scope",
     "containerd", CID, UID, "", ""},
    {"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" UID_ ".slice/crio-" CID
     ".scope",
     "cri-o", CID, UID, "", ""},
    {"/kubepods.slice/kubepods-pod" UID_ ".slice/docker-" CID ".scope", "docker", CID, UID, "", ""},
    {"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" UID_
     ".slice/crio-conmon-" CID ".scope",
     "cri-o", "", UID, "", ""},
    {"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UID_ ".slice/crio-" CID
     ".scope/container",
     "cri-o", CID, UID, "", ""},
    /* a pod's own slice, and a static pod (uid is a 32-hex hash) */
    {"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UID_ ".slice", "", "", UID,
     "", ""},
    {"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0f1e2d3c4b5a69788796a5b4c3d2e1f0.slice/cri-containerd-" CID
     ".scope",
     "containerd", CID, "0f1e2d3c4b5a69788796a5b4c3d2e1f0", "", ""},
    /* kubernetes, cgroupfs driver (v1 and v2): runtime not in the path */
    {"/kubepods/burstable/pod" UID "/" CID, "", CID, UID, "", ""},
    {"/kubepods/besteffort/pod" UID "/" CID, "", CID, UID, "", ""},
    {"/kubepods/pod" UID "/" CID, "", CID, UID, "", ""},
    {"/kubepods/burstable/pod" UID "/crio-" CID, "cri-o", CID, UID, "", ""},
    /* kubelet running under containerd.service with systemd driver on cgroup v1 */
    {"/kubepods.slice/kubepods-burstable.slice", "", "", "", "", ""},
    /* podman: rootful, rootless, cgroupfs manager, conmon */
    {"/machine.slice/libpod-" CID ".scope", "podman", CID, "", "", ""},
    {"/machine.slice/libpod-" CID ".scope/container", "podman", CID, "", "", ""},
    {"/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-" CID ".scope", "podman", CID,
     "", "", ""},
    {"/libpod_parent/libpod-" CID, "podman", CID, "", "", ""},
    {"/machine.slice/libpod-conmon-" CID ".scope", "podman", "", "", "", ""},
    /* nerdctl / containerd without kubernetes */
    {"/system.slice/nerdctl-" CID ".scope", "containerd", CID, "", "", ""},
    /* libvirt VMs: systemd scopes (escaped), cgroupfs, nested vcpu groups, old names without an id
     */
    {"/machine.slice/machine-qemu\\x2d1\\x2dubuntu22.04.scope", "libvirt", "", "", "ubuntu22.04",
     ""},
    {"/machine.slice/machine-qemu\\x2d12\\x2dweb\\x2dserver\\x2d01.scope/libvirt/vcpu0", "libvirt",
     "", "", "web-server-01", ""},
    {"/machine.slice/machine-qemu\\x2d3\\x2dwin10.scope/libvirt/emulator", "libvirt", "", "",
     "win10", ""},
    {"/machine.slice/machine-qemu\\x2dcentos7.scope", "libvirt", "", "", "centos7", ""},
    {"/machine/qemu-2-db1.libvirt-qemu", "libvirt", "", "", "db1", ""},
    {"/machine/qemu-2-db1.libvirt-qemu/vcpu1", "libvirt", "", "", "db1", ""},
    /* near misses that are not containers */
    {"/system.slice/docker-abc.scope", "", "", "", "", ""},
    {"/system.slice/docker-" CID "0.scope", "", "", "", "", ""},
    {"/pod" UID "/x", "", "", "", "", ""},
    {"/kubepods/burstable/podnotauid/" CID, "", CID, "", "", ""},
    {"/machine.slice/machine-qemu.scope", "", "", "", "", ""},
    {"/system.slice/docker-3F1E2D4C5B6A79880716253443526170819203A4B5C6D7E8F90A1B2C3D4E5F60.scope",
     "", "", "", "", ""},
    /* trailing and doubled slashes */
    {"//system.slice//docker-" CID ".scope/", "docker", CID, "", "", ""},
    {"", "", "", "", "", ""},
};

static void test_paths(void)
{
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		struct wb_cgroup c;
		memset(&c, 0x55, sizeof(c)); /* every field must be set */
		ident_parse(paths[i].path, &c);
		int before = unit_failed_checks;
		CHECK_STR(c.runtime, paths[i].runtime);
		CHECK_STR(c.container_id, paths[i].container_id);
		CHECK_STR(c.pod_uid, paths[i].pod_uid);
		CHECK_STR(c.vm, paths[i].vm);
		CHECK_STR(c.service, paths[i].service);
		if (unit_failed_checks != before)
			printf("#   path %s\n", paths[i].path);
	}
}

static void test_vm_name_utf8(void)
{
	struct wb_cgroup c;
	/* A name escaped to bytes that are not UTF-8 must not reach the wire as such. */
	ident_parse("/machine.slice/machine-qemu\\x2d1\\x2dbad\\xffname.scope", &c);
	CHECK_STR(c.vm, "bad?name");
	ident_parse("/machine.slice/machine-qemu\\x2d1\\x2dcaf\\xc3\\xa9.scope", &c);
	CHECK_STR(c.vm, "caf\xc3\xa9");
}

static void test_cgfile_hybrid(void)
{
	struct ident_cgfile f;
	const char *text = "12:pids:/system.slice/docker-" CID ".scope\n"
			   "11:cpu,cpuacct:/system.slice/docker-" CID ".scope\n"
			   "10:memory:/system.slice/docker-" CID ".scope\n"
			   "1:name=systemd:/system.slice/docker-" CID ".scope\n"
			   "0::/system.slice/docker-" CID ".scope\n";
	CHECK(ident_parse_cgfile(text, &f) == 0);
	CHECK(f.has_v2);
	CHECK_STR(f.v2_path, "/system.slice/docker-" CID ".scope");
	CHECK(f.has_v1);
	CHECK_STR(f.v1_controllers, "name=systemd");
}

static void test_cgfile_v1_only(void)
{
	struct ident_cgfile f;
	/* cgroupfs-driver docker on v1, no name=systemd: the cpu hierarchy wins over pids. */
	const char *text = "5:pids:/docker/" CID "\n"
			   "4:cpu,cpuacct:/docker/" CID "\n"
			   "3:devices:/\n";
	CHECK(ident_parse_cgfile(text, &f) == 0);
	CHECK(!f.has_v2);
	CHECK(f.has_v1);
	CHECK_STR(f.v1_controllers, "cpu,cpuacct");
	CHECK_STR(f.v1_path, "/docker/" CID);
}

static void test_cgfile_v2_only(void)
{
	struct ident_cgfile f;
	CHECK(ident_parse_cgfile("0::/system.slice/nginx.service\n", &f) == 0);
	CHECK(f.has_v2 && !f.has_v1);
	CHECK_STR(f.v2_path, "/system.slice/nginx.service");
	/* no trailing newline, root only */
	CHECK(ident_parse_cgfile("0::/", &f) == 0);
	CHECK_STR(f.v2_path, "/");
	/* v1 lines all at the root say nothing */
	CHECK(ident_parse_cgfile("3:memory:/\n2:cpu:/\n0::/\n", &f) == 0);
	CHECK(!f.has_v1);
}

static void test_cgfile_garbage(void)
{
	struct ident_cgfile f;
	CHECK(ident_parse_cgfile("", &f) < 0);
	CHECK(ident_parse_cgfile("garbage without colons\n", &f) < 0);
	/* a path holding a colon is kept whole */
	CHECK(ident_parse_cgfile("0::/a:b\n", &f) == 0);
	CHECK_STR(f.v2_path, "/a:b");
}

static const struct {
	const char *line;
	int rc;
	bool v2;
	const char *root, *point, *options;
} mounts[] = {
    {"36 25 0:31 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 rw,nsdelegate\n",
     1, true, "/", "/sys/fs/cgroup/unified", ""},
    {"37 25 0:32 / /sys/fs/cgroup/systemd rw,nosuid shared:11 - cgroup cgroup rw,xattr,name=systemd\n",
     1, false, "/", "/sys/fs/cgroup/systemd", "rw,xattr,name=systemd"},
    {"41 25 0:36 / /sys/fs/cgroup/cpu,cpuacct rw shared:15 - cgroup cgroup rw,cpu,cpuacct\n", 1,
     false, "/", "/sys/fs/cgroup/cpu,cpuacct", "rw,cpu,cpuacct"},
    {"29 1 0:26 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot\n",
     1, true, "/", "/sys/fs/cgroup", ""},
    /* inside a cgroup namespace the mount's root is a subtree; spaces are escaped */
    {"50 40 0:26 /kubepods.slice /host\\040cg rw - cgroup2 cgroup2 rw\n", 1, true,
     "/kubepods.slice", "/host cg", ""},
    /* several optional fields before the separator */
    {"60 25 0:40 / /mnt/cg rw shared:1 master:2 - cgroup cgroup rw,memory\n", 1, false, "/",
     "/mnt/cg", "rw,memory"},
    {"22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw,errors=remount-ro\n", 0, false, "", "",
     ""},
    {"23 22 0:5 / /dev rw - devtmpfs udev rw,size=1k\n", 0, false, "", "", ""},
    {"garbage\n", -1, false, "", "", ""},
    {"36 25 0:31 / /sys/fs/cgroup/unified rw no separator cgroup2\n", -1, false, "", "", ""},
    {"", -1, false, "", "", ""},
};

static void test_mountinfo(void)
{
	for (size_t i = 0; i < sizeof(mounts) / sizeof(mounts[0]); i++) {
		struct ident_mount m;
		int rc = ident_parse_mountinfo(mounts[i].line, &m);
		int before = unit_failed_checks;
		CHECK(rc == mounts[i].rc);
		if (rc == 1) {
			CHECK(m.v2 == mounts[i].v2);
			CHECK_STR(m.root, mounts[i].root);
			CHECK_STR(m.point, mounts[i].point);
			CHECK_STR(m.options, mounts[i].options);
		}
		if (unit_failed_checks != before)
			printf("#   line %s", mounts[i].line);
	}
}

static void test_mount_matches(void)
{
	struct ident_mount m = {.v2 = false};
	snprintf(m.options, sizeof(m.options), "rw,cpu,cpuacct");
	CHECK(ident_mount_matches(&m, "cpu,cpuacct"));
	CHECK(ident_mount_matches(&m, "cpuacct,cpu"));
	CHECK(!ident_mount_matches(&m, "cpu,cpuacct,memory"));
	CHECK(!ident_mount_matches(&m, "cpuset"));
	CHECK(!ident_mount_matches(&m, ""));
	snprintf(m.options, sizeof(m.options), "rw,xattr,name=systemd");
	CHECK(ident_mount_matches(&m, "name=systemd"));
	CHECK(!ident_mount_matches(&m, "name=sys"));
	m.v2 = true;
	CHECK(!ident_mount_matches(&m, "name=systemd"));
}

static const struct unit_case cases[] = {
    {"cgroup paths: docker, kubernetes (both drivers), cri-o, containerd, podman, libvirt, services",
     test_paths},
    {"VM names unescaped and kept valid UTF-8", test_vm_name_utf8},
    {"/proc/<pid>/cgroup on a hybrid host", test_cgfile_hybrid},
    {"/proc/<pid>/cgroup on v1: cpu before pids", test_cgfile_v1_only},
    {"/proc/<pid>/cgroup on v2", test_cgfile_v2_only},
    {"/proc/<pid>/cgroup garbage", test_cgfile_garbage},
    {"mountinfo lines", test_mountinfo},
    {"v1 hierarchy by controllers", test_mount_matches},
};

UNIT_MAIN(cases)
