/* estimd/sidecar.c's socket rule: whose socket, in whose directory, estimd may trust. */
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "../../estimd/estimd.h"
#include "unit.h"

static char dir[88], sock[108];
static int lfd = -1;

static void setup(mode_t dir_mode)
{
	unit_tmp(dir, sizeof(dir), "sidecar-XXXXXX");
	CHECK(mkdtemp(dir) != NULL);
	CHECK(chmod(dir, dir_mode) == 0);
	snprintf(sock, sizeof(sock), "%s/estimator.sock", dir);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
	lfd = socket(AF_UNIX, SOCK_STREAM, 0);
	CHECK(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
}

static void teardown(void)
{
	close(lfd);
	unlink(sock);
	rmdir(dir);
}

static void test_own_socket_in_own_dir(void)
{
	char why[512] = "";
	setup(0700);
	CHECK(sidecar_socket_check(sock, geteuid(), why, sizeof(why)) == 0);
	/* Its group may not write the directory either. */
	CHECK(chmod(dir, 0770) == 0);
	CHECK(sidecar_socket_check(sock, geteuid(), why, sizeof(why)) == -1);
	CHECK(strstr(why, "is writable by its group without the sticky bit") != NULL);
	teardown();
}

static void test_world_writable_dir(void)
{
	char why[512] = "";
	setup(0777);
	CHECK(sidecar_socket_check(sock, geteuid(), why, sizeof(why)) == -1);
	CHECK(
	    strstr(
		why,
		"is writable by all users without the sticky bit: another user may replace the socket") !=
	    NULL);
	/* Sticky, as /tmp: only the socket's owner can replace it there. */
	CHECK(chmod(dir, 01777) == 0);
	CHECK(sidecar_socket_check(sock, geteuid(), why, sizeof(why)) == 0);
	teardown();
}

static void test_socket_of_another_user(void)
{
	char why[512] = "";
	setup(01777);
	if (geteuid() == 0) {
		CHECK(chown(sock, 65534, (gid_t)-1) == 0);
		CHECK(sidecar_socket_check(sock, 0, why, sizeof(why)) == -1);
		CHECK(
		    strstr(why, "owned by uid 65534, neither root nor estimd's own user (uid 0)") !=
		    NULL);
	} else {
		/* Not root: the socket is ours, and another user's estimd refuses it. */
		CHECK(sidecar_socket_check(sock, geteuid() + 1, why, sizeof(why)) == -1);
		CHECK(strstr(why, "neither root nor estimd's own user") != NULL);
	}
	teardown();
}

static void test_not_a_socket_or_absent(void)
{
	char why[512] = "", file[108];
	setup(0700);
	snprintf(file, sizeof(file), "%s/plain", dir);
	int fd = open(file, O_CREAT | O_WRONLY, 0600);
	CHECK(fd >= 0);
	close(fd);
	CHECK(sidecar_socket_check(file, geteuid(), why, sizeof(why)) == -1);
	CHECK(strstr(why, "plain: not a socket") != NULL);
	unlink(file);
	CHECK(sidecar_socket_check(file, geteuid(), why, sizeof(why)) == -2);
	CHECK(strstr(why, "No such file") != NULL);
	teardown();
}

static const struct unit_case cases[] = {
    {"estimd's own socket in its own directory; not a group-writable one",
     test_own_socket_in_own_dir},
    {"a world-writable directory: refused unless sticky", test_world_writable_dir},
    {"a socket of another user: refused, even in a sticky directory", test_socket_of_another_user},
    {"not a socket: refused; absent: no sidecar yet", test_not_a_socket_or_absent},
};
UNIT_MAIN(cases)
