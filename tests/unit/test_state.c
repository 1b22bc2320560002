/* State files: what wb_state_open_read refuses, and how wb_state_create/commit replace a file. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "state.h"
#include "unit.h"

static char dir[64];

static void setup_dir(void)
{
	unit_tmp(dir, sizeof(dir), "wb-test-state-XXXXXX");
	if (!mkdtemp(dir))
		abort();
}

static void rm_dir(void)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char p[512];
	while (d && (e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
			snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
			if (unlink(p) < 0)
				rmdir(p);
		}
	if (d)
		closedir(d);
	rmdir(dir);
}

static size_t entries(void)
{
	size_t n = 0;
	DIR *d = opendir(dir);
	struct dirent *e;
	while (d && (e = readdir(d)))
		n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	if (d)
		closedir(d);
	return n;
}

static const struct {
	const char *what;
	const char *expect; /* after "DIR/state: " */
} refused[] = {
    {"fifo", "a FIFO, not a regular file"},
    {"link", "a symbolic link, not a regular file"},
    {"dir", "a directory, not a regular file"},
    {"none", "cannot open: No such file or directory"},
};

static void test_open_read(void)
{
	setup_dir();
	char path[128], target[128], err[256], want[256];
	snprintf(path, sizeof(path), "%s/state", dir);
	snprintf(target, sizeof(target), "%s/target", dir);
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		const char *w = refused[i].what;
		if (strcmp(w, "fifo") == 0)
			CHECK(mkfifo(path, 0600) == 0);
		else if (strcmp(w, "link") == 0)
			CHECK(close(open(target, O_WRONLY | O_CREAT, 0600)) == 0 &&
			      symlink(target, path) == 0);
		else if (strcmp(w, "dir") == 0)
			CHECK(mkdir(path, 0700) == 0);
		/* A FIFO with no writer would block a plain open(): this must return at once. */
		int fd = wb_state_open_read(path, err, sizeof(err));
		int e = errno;
		CHECK(fd < 0);
		snprintf(want, sizeof(want), "%s: %s", path, refused[i].expect);
		CHECK_STR(err, want);
		if (strcmp(w, "none") == 0)
			CHECK(e == ENOENT);
		if (unlink(path) < 0)
			rmdir(path);
	}
	/* A regular file opens, in blocking mode. */
	CHECK(close(open(path, O_WRONLY | O_CREAT, 0600)) == 0);
	int fd = wb_state_open_read(path, err, sizeof(err));
	CHECK(fd >= 0);
	CHECK(fd >= 0 && !(fcntl(fd, F_GETFL) & O_NONBLOCK));
	if (fd >= 0)
		close(fd);
	rm_dir();
}

static void test_create_commit(void)
{
	setup_dir();
	char path[128], victim[128], tmp[160], err[256], buf[16] = "";
	snprintf(path, sizeof(path), "%s/state", dir);
	snprintf(victim, sizeof(victim), "%s/victim", dir);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	/* Links planted at the final name and at the old fixed temporary name. */
	int v = open(victim, O_WRONLY | O_CREAT, 0600);
	CHECK(v >= 0 && write(v, "keep", 4) == 4);
	close(v);
	CHECK(symlink(victim, path) == 0 && symlink(victim, tmp) == 0);
	struct wb_state_tmp st;
	CHECK(wb_state_create(&st, path, err, sizeof(err)) == 0);
	CHECK(strncmp(st.tmp, dir, strlen(dir)) == 0 && strstr(st.tmp, "/.state.") != NULL);
	CHECK(write(st.fd, "new", 3) == 3);
	CHECK(wb_state_commit(&st, true, 0, true, err, sizeof(err)) == 0);
	struct stat sb;
	CHECK(lstat(path, &sb) == 0 && S_ISREG(sb.st_mode));
	CHECK_U64(sb.st_mode & 07777, 0600);
	int fd = open(path, O_RDONLY);
	CHECK(fd >= 0 && read(fd, buf, sizeof(buf) - 1) == 3);
	close(fd);
	CHECK_STR(buf, "new");
	fd = open(victim, O_RDONLY);
	memset(buf, 0, sizeof(buf));
	CHECK(fd >= 0 && read(fd, buf, sizeof(buf) - 1) == 4);
	close(fd);
	CHECK_STR(buf, "keep");
	/* A failed write removes the temporary file and leaves the old state. */
	size_t before = entries();
	CHECK(wb_state_create(&st, path, err, sizeof(err)) == 0);
	CHECK_U64(entries(), before + 1);
	CHECK(wb_state_commit(&st, false, ENOSPC, true, err, sizeof(err)) < 0);
	char want[256];
	snprintf(want, sizeof(want), "%s: cannot write: %s", path, strerror(ENOSPC));
	CHECK_STR(err, want);
	CHECK_U64(entries(), before);
	/* No directory to write in. */
	snprintf(path, sizeof(path), "%s/victim/state", dir);
	CHECK(wb_state_create(&st, path, err, sizeof(err)) < 0);
	CHECK(strstr(err, "cannot write") != NULL && strstr(err, "Not a directory") != NULL);
	/* With a group: 0640. */
	wb_state_set_group(getegid());
	snprintf(path, sizeof(path), "%s/grouped", dir);
	CHECK(wb_state_create(&st, path, err, sizeof(err)) == 0);
	CHECK(wb_state_commit(&st, true, 0, false, err, sizeof(err)) == 0);
	CHECK(stat(path, &sb) == 0);
	CHECK_U64(sb.st_mode & 07777, 0640);
	CHECK_U64(wb_state_dir_mode(), 0770);
	wb_state_set_group((gid_t)-1);
	rm_dir();
}

static const struct unit_case cases[] = {
    {"open to read: links, FIFOs, directories and missing files", test_open_read},
    {"create and commit: fresh name, links left alone, failures clean up, modes",
     test_create_commit},
};
UNIT_MAIN(cases)
