/*
 * State files (alignd.state, estimd.state, estimd's trained model, recordings)
 * in a runtime directory that a whole group may write to: opened without
 * following links or blocking on a FIFO, created under a fresh name, and
 * refused with their path when they are not regular files.
 */
#ifndef WB_STATE_H
#define WB_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/*
 * Group that may read state files and enter the runtime directory (the socket
 * group), or (gid_t)-1 for none. Files are then 0640 and directories 0770,
 * else 0600 and 0750. Set once at startup by the daemon scaffolding.
 */
void wb_state_set_group(gid_t gid);
mode_t wb_state_file_mode(void);
mode_t wb_state_dir_mode(void);

/*
 * Make dir (not its parents) with wb_state_dir_mode() when it is missing. An
 * existing one is refused (errno EPERM) when it is not a directory, is a
 * symbolic link, belongs to another user than this one or root, or is writable
 * by all without the sticky bit. 0, or -1 with err and errno.
 */
int wb_state_mkdir(const char *dir, char *err, size_t errlen);

/*
 * Open path to read: no link is followed, a FIFO or device is refused rather
 * than waited on. Returns the descriptor (O_CLOEXEC, blocking), or -1 with err
 * ("PATH: reason") and errno (ENOENT when there is no file).
 */
int wb_state_open_read(const char *path, char *err, size_t errlen);

/* A file being written beside its final path. */
struct wb_state_tmp {
	int fd;
	char tmp[4096];
	char path[4096];
};

/*
 * Create a temporary file of a fresh name beside path (O_EXCL, so a planted
 * link or file is never written through), mode wb_state_file_mode(). 0, or -1
 * with err.
 */
int wb_state_create(struct wb_state_tmp *st, const char *path, char *err, size_t errlen);
/*
 * Close the file (after fsync when sync) and rename it over the final path;
 * ok false, or any failure, removes it instead. 0, or -1 with err
 * ("PATH: cannot write: reason"); errno_hint, when not 0, is the write error.
 */
int wb_state_commit(struct wb_state_tmp *st, bool ok, int errno_hint, bool sync, char *err,
		    size_t errlen);

#endif
