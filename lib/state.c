/*
 * Opening and replacing state files safely in a directory that others may
 * write to: O_NOFOLLOW and O_NONBLOCK to read, a fresh O_EXCL name to write,
 * rename() to replace, and a regular file or nothing.
 */
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "json.h"
#include "state.h"
#include "vis.h"

static gid_t state_gid = (gid_t)-1;

void wb_state_set_group(gid_t gid)
{
	state_gid = gid;
}

mode_t wb_state_file_mode(void)
{
	return state_gid == (gid_t)-1 ? 0600 : 0640;
}

mode_t wb_state_dir_mode(void)
{
	return state_gid == (gid_t)-1 ? 0750 : 0770;
}

int wb_state_mkdir(const char *dir, char *err, size_t errlen)
{
	struct stat sb;
	if (mkdir(dir, 0700) == 0) {
		/* Set the mode and group explicitly: mkdir's mode is cut by the umask. */
		if (state_gid != (gid_t)-1 && chown(dir, (uid_t)-1, state_gid) < 0) {
			snprintf(err, errlen, "%s: cannot give the directory to group %u: %s", dir,
				 (unsigned)state_gid, strerror(errno));
			return -1;
		}
		if (chmod(dir, wb_state_dir_mode()) < 0) {
			snprintf(err, errlen, "%s: cannot set the directory mode: %s", dir,
				 strerror(errno));
			return -1;
		}
		return 0;
	}
	if (errno != EEXIST) {
		snprintf(err, errlen, "%s: cannot create the directory: %s", dir, strerror(errno));
		return -1;
	}
	if (lstat(dir, &sb) < 0) {
		snprintf(err, errlen, "%s: %s", dir, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(sb.st_mode)) {
		snprintf(err, errlen, "%s: not a directory (%s): refused", dir,
			 S_ISLNK(sb.st_mode) ? "a symbolic link" : "another kind of file");
		errno = EPERM;
		return -1;
	}
	/* A directory planted by another user (/tmp/wattbus-UID) would hold our sockets and state
	 * for them. */
	if (sb.st_uid != geteuid() && sb.st_uid != 0) {
		snprintf(err, errlen, "%s: owned by uid %u, neither this user nor root: refused",
			 dir, (unsigned)sb.st_uid);
		errno = EPERM;
		return -1;
	}
	if ((sb.st_mode & S_IWOTH) && !(sb.st_mode & S_ISVTX)) {
		snprintf(err, errlen, "%s: writable by every user: refused", dir);
		errno = EPERM;
		return -1;
	}
	return 0;
}

static const char *kind_of(mode_t m)
{
	if (S_ISFIFO(m))
		return "a FIFO";
	if (S_ISDIR(m))
		return "a directory";
	if (S_ISCHR(m) || S_ISBLK(m))
		return "a device";
	if (S_ISSOCK(m))
		return "a socket";
	return "not a regular file";
}

int wb_state_open_read(const char *path, char *err, size_t errlen)
{
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		int e = errno;
		if (e == ELOOP)
			snprintf(err, errlen, "%s: a symbolic link, not a regular file", path);
		else
			snprintf(err, errlen, "%s: cannot open: %s", path, strerror(e));
		errno = e;
		return -1;
	}
	struct stat sb;
	if (fstat(fd, &sb) < 0) {
		int e = errno;
		snprintf(err, errlen, "%s: cannot stat: %s", path, strerror(e));
		close(fd);
		errno = e;
		return -1;
	}
	if (!S_ISREG(sb.st_mode)) {
		snprintf(err, errlen, "%s: %s, not a regular file", path, kind_of(sb.st_mode));
		close(fd);
		errno = EINVAL;
		return -1;
	}
	/* Reads of a regular file never wait; blocking mode keeps stdio-style readers simple. */
	int fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
	return fd;
}

int wb_state_create(struct wb_state_tmp *st, const char *path, char *err, size_t errlen)
{
	st->fd = -1;
	const char *slash = strrchr(path, '/');
	int dirlen = slash ? (int)(slash - path) + 1 : 0;
	const char *base = slash ? slash + 1 : path;
	if (!base[0] ||
	    (size_t)snprintf(st->path, sizeof(st->path), "%s", path) >= sizeof(st->path) ||
	    (size_t)snprintf(st->tmp, sizeof(st->tmp), "%.*s.%s.XXXXXX", dirlen, path, base) >=
		sizeof(st->tmp)) {
		snprintf(err, errlen, "%s: cannot write: not a usable file name", path);
		return -1;
	}
	/* mkostemp: O_CREAT|O_EXCL under a name nobody could plant in advance, mode 0600. */
	st->fd = mkostemp(st->tmp, O_CLOEXEC);
	if (st->fd < 0) {
		snprintf(err, errlen, "%s: cannot write: %s: %s", path, st->tmp, strerror(errno));
		return -1;
	}
	if ((state_gid != (gid_t)-1 && fchown(st->fd, (uid_t)-1, state_gid) < 0) ||
	    fchmod(st->fd, wb_state_file_mode()) < 0) {
		snprintf(err, errlen, "%s: cannot write: %s: cannot set owner group or mode: %s",
			 path, st->tmp, strerror(errno));
		close(st->fd);
		unlink(st->tmp);
		st->fd = -1;
		return -1;
	}
	return 0;
}

int wb_state_commit(struct wb_state_tmp *st, bool ok, int errno_hint, bool sync, char *err,
		    size_t errlen)
{
	if (st->fd < 0) {
		snprintf(err, errlen, "%s: cannot write: no file open", st->path);
		return -1;
	}
	int e = ok ? 0 : (errno_hint ? errno_hint : EIO);
	if (!e && sync && fsync(st->fd) < 0)
		e = errno;
	if (close(st->fd) < 0 && !e)
		e = errno;
	st->fd = -1;
	if (!e && rename(st->tmp, st->path) < 0)
		e = errno;
	if (e) {
		snprintf(err, errlen, "%s: cannot write: %s", st->path, strerror(e));
		unlink(st->tmp);
		return -1;
	}
	return 0;
}

/* What a value of shape s must be, for a message. */
static void shape_needs(const struct wb_state_shape *s, char *buf, size_t len)
{
	switch (s->kind) {
	case WB_SK_UINT:
		if (s->max > 0)
			snprintf(buf, len, "an integer in [%.0f, %.0f]", s->min, s->max);
		else
			snprintf(buf, len, "a non-negative integer");
		break;
	case WB_SK_NUMBER:
		snprintf(buf, len, "a number in [%g, %g]", s->min, s->max);
		break;
	case WB_SK_STRING:
		if (s->max_len)
			snprintf(buf, len, "a string of %zu to %zu bytes", s->min_len, s->max_len);
		else
			snprintf(buf, len, "a string");
		break;
	case WB_SK_BOOL:
		snprintf(buf, len, "true or false");
		break;
	case WB_SK_ARRAY:
		snprintf(buf, len, "an array");
		break;
	case WB_SK_OBJECT:
	case WB_SK_MAP:
		snprintf(buf, len, "an object");
		break;
	}
}

static bool len_ok(size_t n, size_t min_len, size_t max_len)
{
	return n >= min_len && (!max_len || n <= max_len);
}

/* Whether v itself (not its members) has the shape. */
static bool kind_ok(const json_t *v, const struct wb_state_shape *s)
{
	switch (s->kind) {
	case WB_SK_UINT: {
		if (!json_is_integer(v) || json_integer_value(v) < 0)
			return false;
		double d = (double)json_integer_value(v);
		return s->max <= 0 || (d >= s->min && d <= s->max);
	}
	case WB_SK_NUMBER:
		return json_is_number(v) && json_number_value(v) >= s->min &&
		       json_number_value(v) <= s->max;
	case WB_SK_STRING:
		return json_is_string(v) && len_ok(json_string_length(v), s->min_len, s->max_len);
	case WB_SK_BOOL:
		return json_is_boolean(v);
	case WB_SK_ARRAY:
		return json_is_array(v);
	case WB_SK_OBJECT:
	case WB_SK_MAP:
		return json_is_object(v);
	}
	return false;
}

static int fail(char *why, size_t len, const char *at, const char *what)
{
	snprintf(why, len, "%s: needs %s", at[0] ? at : "(top)", what);
	return -1;
}

/* at: where v is ("hosts[1].zones[0]"), for the message. */
static int check_at(const json_t *v, const struct wb_state_shape *s, const char *at, char *why,
		    size_t len)
{
	char need[96], sub[512];
	if (!kind_ok(v, s)) {
		shape_needs(s, need, sizeof need);
		return fail(why, len, at, need);
	}
	size_t i;
	const char *key;
	json_t *m;
	switch (s->kind) {
	case WB_SK_OBJECT:
		for (const struct wb_state_field *f = s->fields; f && f->key; f++) {
			snprintf(sub, sizeof sub, "%s%s%s", at, at[0] ? "." : "", f->key);
			const json_t *fv = json_object_get(v, f->key);
			if (!fv && f->required) {
				shape_needs(&f->shape, need, sizeof need);
				return fail(why, len, sub, need);
			}
			if (fv && check_at(fv, &f->shape, sub, why, len) < 0)
				return -1;
		}
		break;
	case WB_SK_ARRAY:
		json_array_foreach(v, i, m)
		{
			snprintf(sub, sizeof sub, "%s[%zu]", at, i);
			if (check_at(m, s->item, sub, why, len) < 0)
				return -1;
		}
		break;
	case WB_SK_MAP:
		json_object_foreach((json_t *)v, key, m)
		{
			/* a key from the file is data: escaped, and cut to a name's length */
			snprintf(sub, sizeof sub, "%s%s%.63s", at, at[0] ? "." : "", WB_VIS(key));
			if (!len_ok(strlen(key), s->min_len, s->max_len)) {
				snprintf(need, sizeof need, "a key of %zu to %zu bytes", s->min_len,
					 s->max_len);
				return fail(why, len, sub, need);
			}
			if (check_at(m, s->item, sub, why, len) < 0)
				return -1;
		}
		break;
	default:
		break;
	}
	return 0;
}

int wb_state_check(const json_t *v, const struct wb_state_shape *shape, char *why, size_t len)
{
	return check_at(v, shape, "", why, len);
}

int wb_state_save_json(json_t *root, const char *path, bool sync, char *err, size_t errlen)
{
	if (!root) {
		snprintf(err, errlen, "%s: out of memory", path);
		errno = ENOMEM;
		return -1;
	}
	int rc = wb_json_save(root, path, sync, err, errlen);
	json_decref(root);
	return rc;
}

int wb_state_load_json(const char *path, const struct wb_state_shape *shape,
		       wb_state_restore_fn *restore, void *arg, char *err, size_t errlen)
{
	json_t *root = wb_json_load(path, JSON_REJECT_DUPLICATES, err, errlen);
	if (!root)
		return -1;
	char why[512];
	int rc = shape ? wb_state_check(root, shape, why, sizeof why) : 0;
	if (rc == 0)
		rc = restore(root, arg, why, sizeof why);
	json_decref(root);
	if (rc < 0) {
		snprintf(err, errlen, "%s: %s", path, why);
		errno = EINVAL;
	}
	return rc;
}
