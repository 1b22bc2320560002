/*
 * State files: what wb_state_open_read refuses, how wb_state_create/commit replace a file, what a
 * shape table refuses (wb_state_check) and the load/save wrapper around them.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "json.h"
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

/* A small state document: every kind of the table, nested as the stages nest theirs. */
static const struct wb_state_field item_fields[] = {
    {"name", true, WB_SK_NAME},
    {"uj", false, WB_SK_U64},
    {"on", false, {.kind = WB_SK_BOOL}},
    {"cpu", false, WB_SK_ARRAY_OF(WB_SK_U64)},
    {NULL},
};
static const struct wb_state_shape doc_shape = {
    .kind = WB_SK_OBJECT,
    .fields =
	(const struct wb_state_field[]){
	    {"version", true, {.kind = WB_SK_UINT, .min = 1, .max = 1}},
	    {"src", false, {.kind = WB_SK_STRING, .max_len = 3}},
	    {"items", true, WB_SK_OBJECTS(item_fields)},
	    {"idle",
	     false,
	     {.kind = WB_SK_MAP,
	      .min_len = 1,
	      .max_len = 4,
	      .item = &(const struct wb_state_shape){.kind = WB_SK_NUMBER, .min = 0, .max = 50}}},
	    {NULL},
	},
};

static const struct {
	const char *json;
	const char *why; /* NULL: accepted */
} shapes[] = {
    {"{\"version\":1,\"items\":[]}", NULL},
    {"{\"version\":1,\"src\":\"\",\"items\":[{\"name\":\"a\",\"uj\":0,\"on\":false,\"cpu\":[0,9]}],"
     "\"idle\":{\"gpu0\":50},\"other\":\"let be\"}",
     NULL},
    {"[]", "(top): needs an object"},
    {"{\"items\":[]}", "version: needs an integer in [1, 1]"},
    {"{\"version\":2,\"items\":[]}", "version: needs an integer in [1, 1]"},
    {"{\"version\":1}", "items: needs an array"},
    {"{\"version\":1,\"items\":{}}", "items: needs an array"},
    {"{\"version\":1,\"items\":[{\"name\":\"a\"},7]}", "items[1]: needs an object"},
    {"{\"version\":1,\"items\":[{\"uj\":1}]}", "items[0].name: needs a string of 1 to 63 bytes"},
    {"{\"version\":1,\"items\":[{\"name\":\"\"}]}",
     "items[0].name: needs a string of 1 to 63 bytes"},
    {"{\"version\":1,\"items\":[{\"name\":"
     "\"0123456789012345678901234567890123456789012345678901234567890123\"}]}",
     "items[0].name: needs a string of 1 to 63 bytes"},
    {"{\"version\":1,\"items\":[{\"name\":\"a\",\"uj\":-1}]}",
     "items[0].uj: needs a non-negative integer"},
    {"{\"version\":1,\"items\":[{\"name\":\"a\",\"uj\":1.5}]}",
     "items[0].uj: needs a non-negative integer"},
    {"{\"version\":1,\"items\":[{\"name\":\"a\",\"on\":1}]}", "items[0].on: needs true or false"},
    {"{\"version\":1,\"items\":[{\"name\":\"a\",\"cpu\":[1,-2]}]}",
     "items[0].cpu[1]: needs a non-negative integer"},
    {"{\"version\":1,\"src\":\"long\",\"items\":[]}", "src: needs a string of 0 to 3 bytes"},
    {"{\"version\":1,\"items\":[],\"idle\":[]}", "idle: needs an object"},
    {"{\"version\":1,\"items\":[],\"idle\":{\"gpu0\":50.5}}",
     "idle.gpu0: needs a number in [0, 50]"},
    {"{\"version\":1,\"items\":[],\"idle\":{\"gpu0\":\"1\"}}",
     "idle.gpu0: needs a number in [0, 50]"},
    {"{\"version\":1,\"items\":[],\"idle\":{\"\":1}}", "idle.: needs a key of 1 to 4 bytes"},
    /* a key from the file is escaped in the message */
    {"{\"version\":1,\"items\":[],\"idle\":{\"a\\nb\\u001b[0\":1}}",
     "idle.a\\nb\\x1b[0: needs a key of 1 to 4 bytes"},
};

static void test_check(void)
{
	for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
		json_t *v = json_loads(shapes[i].json, 0, NULL);
		char why[256] = "";
		CHECK(v != NULL);
		int rc = wb_state_check(v, &doc_shape, why, sizeof(why));
		if (shapes[i].why) {
			CHECK(rc == -1);
			CHECK_STR(why, shapes[i].why);
		} else {
			CHECK(rc == 0);
			CHECK_STR(why, "");
		}
		json_decref(v);
	}
}

/* What a restore saw, and what it answers. */
struct seen {
	int calls;
	uint64_t version;
	const char *answer; /* NULL: accept */
};

static int restore(const json_t *root, void *arg, char *why, size_t len)
{
	struct seen *s = arg;
	s->calls++;
	s->version = wb_json_u64(root, "version");
	if (!s->answer)
		return 0;
	snprintf(why, len, "%s", s->answer);
	return -1;
}

static void test_load_save(void)
{
	setup_dir();
	char path[128], err[512], want[256];
	snprintf(path, sizeof(path), "%s/state", dir);
	struct seen s = {0};
	/* no file: ENOENT, nothing restored */
	CHECK(wb_state_load_json(path, &doc_shape, restore, &s, err, sizeof(err)) == -1);
	CHECK(errno == ENOENT);
	CHECK(s.calls == 0);
	/* saved, then loaded through the shape into restore */
	CHECK(
	    wb_state_save_json(json_loads("{\"version\":1,\"items\":[{\"name\":\"a\"}]}", 0, NULL),
			       path, true, err, sizeof(err)) == 0);
	CHECK(wb_state_load_json(path, &doc_shape, restore, &s, err, sizeof(err)) == 0);
	CHECK(s.calls == 1 && s.version == 1);
	/* restore's own refusal is the file's, with its path */
	s.answer = "hosts: too many";
	CHECK(wb_state_load_json(path, &doc_shape, restore, &s, err, sizeof(err)) == -1);
	CHECK(errno == EINVAL);
	snprintf(want, sizeof(want), "%s: hosts: too many", path);
	CHECK_STR(err, want);
	/* a file the shape refuses never reaches restore */
	s = (struct seen){0};
	CHECK(wb_state_save_json(json_loads("{\"version\":2,\"items\":[]}", 0, NULL), path, false,
				 err, sizeof(err)) == 0);
	CHECK(wb_state_load_json(path, &doc_shape, restore, &s, err, sizeof(err)) == -1);
	CHECK(errno == EINVAL && s.calls == 0);
	snprintf(want, sizeof(want), "%s: version: needs an integer in [1, 1]", path);
	CHECK_STR(err, want);
	/* without a shape, restore sees any JSON; duplicate keys are refused before */
	CHECK(wb_state_load_json(path, NULL, restore, &s, err, sizeof(err)) == 0);
	CHECK(s.calls == 1 && s.version == 2);
	int fd = open(path, O_WRONLY | O_TRUNC);
	CHECK(fd >= 0 && write(fd, "{\"version\":1,\"version\":1}", 26) == 26);
	close(fd);
	CHECK(wb_state_load_json(path, NULL, restore, &s, err, sizeof(err)) == -1);
	CHECK(s.calls == 1);
	CHECK(strstr(err, "duplicate") != NULL);
	/* a document that could not be built is out of memory, and nothing is written */
	unlink(path);
	CHECK(wb_state_save_json(NULL, path, false, err, sizeof(err)) == -1);
	snprintf(want, sizeof(want), "%s: out of memory", path);
	CHECK_STR(err, want);
	CHECK(access(path, F_OK) < 0);
	rm_dir();
}

static const struct unit_case cases[] = {
    {"open to read: links, FIFOs, directories and missing files", test_open_read},
    {"create and commit: fresh name, links left alone, failures clean up, modes",
     test_create_commit},
    {"shape tables: each kind, required members, bounds, nesting, escaped keys", test_check},
    {"load and save: shape before restore, refusals with the path, no file", test_load_save},
};
UNIT_MAIN(cases)
