/*
 * Reading sysfs-style files for the sources: one unsigned integer, a short
 * text, a path that must fit; a zone's counter file, kept open between samples;
 * and a BMC's credentials file, refused unless it is powerd's alone. Errors name
 * the file and quote what was in it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "powerd.h"

int pd_fmt(char *buf, size_t size, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, size, fmt, ap);
	va_end(ap);
	return n < 0 || (size_t)n >= size ? -1 : 0;
}

int pd_read_text(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, size - 1);
	int saved = errno;
	close(fd);
	if (n < 0) {
		errno = saved;
		return -1;
	}
	buf[n] = '\0';
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' ' || buf[n - 1] == '\t'))
		buf[--n] = '\0';
	return 0;
}

/* Printable excerpt of bad content for a log line. */
static void excerpt(const char *s, size_t len, char *out, size_t size)
{
	size_t j = 0;
	for (size_t i = 0; i < len && j + 5 < size; i++) {
		unsigned char ch = (unsigned char)s[i];
		if (ch >= 0x20 && ch < 0x7f && ch != '"' && ch != '\\')
			out[j++] = (char)ch;
		else
			j += (size_t)snprintf(out + j, size - j, "\\x%02x", ch);
	}
	if (j >= size)
		j = size - 1;
	out[j] = '\0';
}

/* One unsigned decimal integer from the n bytes read from path (n < size of buf). */
static enum pd_read_err parse_u64(const char *path, const char *buf, size_t n, size_t bufsize,
				  uint64_t *value, char *err, size_t errlen)
{
	size_t len = n;
	while (len > 0 && buf[len - 1] == '\n')
		len--;
	char ex[48];
	if (len == 0) {
		snprintf(err, errlen, "%s: empty, expected an unsigned integer", path);
		return PD_READ_PARSE;
	}
	uint64_t v = 0;
	for (size_t i = 0; i < len; i++) {
		unsigned d = (unsigned)(unsigned char)buf[i] - '0';
		if (d > 9 || n == bufsize - 1) {
			excerpt(buf, len, ex, sizeof(ex));
			snprintf(err, errlen, "%s: \"%s\" is not an unsigned integer", path, ex);
			return PD_READ_PARSE;
		}
		if (v > (UINT64_MAX - d) / 10) {
			excerpt(buf, len, ex, sizeof(ex));
			snprintf(err, errlen, "%s: \"%s\" is out of range", path, ex);
			return PD_READ_PARSE;
		}
		v = v * 10 + d;
	}
	*value = v;
	return PD_READ_OK;
}

static enum pd_read_err io_error(const char *path, int saved, char *err, size_t errlen)
{
	snprintf(err, errlen, "%s: %s", path, strerror(saved));
	errno = saved;
	return PD_READ_IO;
}

enum pd_read_err pd_read_u64(const char *path, uint64_t *value, char *err, size_t errlen)
{
	char buf[64];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return io_error(path, errno, err, errlen);
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	int saved = errno;
	close(fd);
	if (n < 0)
		return io_error(path, saved, err, errlen);
	return parse_u64(path, buf, (size_t)n, sizeof(buf), value, err, errlen);
}

/*
 * sysfs makes a fresh value for every read at offset 0, so a counter file read
 * each sample is opened once and pread: two system calls per zone (with the
 * fstat below) instead of open, read and close with a path walk each time.
 * fstat tells whether the open file is still the one at the path, with the
 * same permissions: a chmod, or a rename over it or its removal (a fake tree),
 * change its ctime or leave it without a link; then the path is opened again,
 * so that the zone is skipped and explained as it would be at start. A read
 * that fails closes it too (a zone whose driver was reloaded has new files;
 * the old descriptor answers ENODEV).
 */
enum pd_read_err pd_zone_read_file(struct pd_zone *z, uint64_t *value, char *err, size_t errlen)
{
	char buf[64];
	struct stat st;
	if (z->fd >= 0 &&
	    (fstat(z->fd, &st) < 0 || st.st_nlink == 0 || st.st_ctim.tv_sec != z->fd_ctime.tv_sec ||
	     st.st_ctim.tv_nsec != z->fd_ctime.tv_nsec))
		pd_zone_close_file(z);
	if (z->fd < 0) {
		z->fd = open(z->file, O_RDONLY | O_CLOEXEC);
		if (z->fd < 0)
			return io_error(z->file, errno, err, errlen);
		if (fstat(z->fd, &st) < 0) {
			int saved = errno;
			pd_zone_close_file(z);
			return io_error(z->file, saved, err, errlen);
		}
		z->fd_ctime = st.st_ctim;
	}
	ssize_t n = pread(z->fd, buf, sizeof(buf) - 1, 0);
	if (n < 0) {
		int saved = errno;
		pd_zone_close_file(z);
		return io_error(z->file, saved, err, errlen);
	}
	return parse_u64(z->file, buf, (size_t)n, sizeof(buf), value, err, errlen);
}

void pd_zone_close_file(struct pd_zone *z)
{
	if (z->fd >= 0)
		close(z->fd);
	z->fd = -1;
}

int pd_read_credentials(const char *key, const char *path, char *user, size_t ulen, char *password,
			size_t plen, char *err, size_t errlen)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		snprintf(err, errlen, "%s %s: cannot open: %s", key, path, strerror(errno));
		return -1;
	}
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "%s %s: not a regular file", key, path);
		close(fd);
		return -1;
	}
	if (st.st_mode & 077) {
		snprintf(
		    err, errlen,
		    "%s %s: mode %04o lets group or others at the BMC's password; refused (chmod 600 it, owned by the user powerd runs as)",
		    key, path, (unsigned)(st.st_mode & 07777));
		close(fd);
		return -1;
	}
	if (st.st_uid != geteuid()) {
		snprintf(err, errlen, "%s %s: owned by uid %u, not by powerd's uid %u; refused",
			 key, path, (unsigned)st.st_uid, (unsigned)geteuid());
		close(fd);
		return -1;
	}
	char buf[600];
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 0) {
		snprintf(err, errlen, "%s %s: cannot read: %s", key, path, strerror(errno));
		return -1;
	}
	buf[n] = '\0';
	buf[strcspn(buf, "\r\n")] = '\0';
	char *colon = strchr(buf, ':');
	if (!colon || colon == buf || strlen(buf) >= sizeof(buf) - 2) {
		snprintf(err, errlen, "%s %s: expected one line USER:PASSWORD", key, path);
		explicit_bzero(buf, sizeof(buf));
		return -1;
	}
	*colon = '\0';
	if (strlen(buf) >= ulen || strlen(colon + 1) >= plen) {
		snprintf(err, errlen, "%s %s: user or password too long", key, path);
		explicit_bzero(buf, sizeof(buf));
		return -1;
	}
	snprintf(user, ulen, "%s", buf);
	snprintf(password, plen, "%s", colon + 1);
	explicit_bzero(buf, sizeof(buf));
	return 0;
}
