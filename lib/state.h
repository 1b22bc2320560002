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

#include <jansson.h>

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

/*
 * What a state document must hold, as a table: a whole file is checked against
 * it before anything in it is used, so that a damaged or planted file is
 * refused as a whole rather than half resumed.
 */
enum wb_state_kind {
	WB_SK_UINT,   /* an integer in [min, max] (max 0: any non-negative) */
	WB_SK_NUMBER, /* a number in [min, max] */
	WB_SK_STRING, /* min_len to max_len bytes (max_len 0: any) */
	WB_SK_BOOL,
	WB_SK_OBJECT, /* the members in fields (others are let be) */
	WB_SK_ARRAY,  /* each element an item */
	WB_SK_MAP, /* an object: keys of min_len to max_len bytes (max_len 0: any), values items */
};
struct wb_state_field;
struct wb_state_shape {
	enum wb_state_kind kind;
	double min, max;		     /* UINT, NUMBER */
	size_t min_len, max_len;	     /* STRING, MAP's keys */
	const struct wb_state_field *fields; /* OBJECT: ended by a NULL key */
	const struct wb_state_shape *item;   /* ARRAY, MAP */
};
struct wb_state_field {
	const char *key;
	bool required; /* else it may be absent, but when there it has the shape */
	struct wb_state_shape shape;
};
/* Shapes most files use, as initializers (at file scope: the compound literal is static). */
/* A host or zone name as the bus carries it: 1 to 63 bytes (jansson checked the UTF-8). */
#define WB_SK_NAME                                                                                 \
	{                                                                                          \
		.kind = WB_SK_STRING, .min_len = 1, .max_len = 63                                  \
	}
/* A counter, a time or an epoch: any non-negative integer. */
#define WB_SK_U64                                                                                  \
	{                                                                                          \
		.kind = WB_SK_UINT                                                                 \
	}
/* An object with the members f. */
#define WB_SK_OBJECT_OF(f)                                                                         \
	{                                                                                          \
		.kind = WB_SK_OBJECT, .fields = (f)                                                \
	}
/* An array of values of shape s; an object whose values have shape s. */
#define WB_SK_ARRAY_OF(s)                                                                          \
	{                                                                                          \
		.kind = WB_SK_ARRAY, .item = &(const struct wb_state_shape)s                       \
	}
#define WB_SK_MAP_OF(s)                                                                            \
	{                                                                                          \
		.kind = WB_SK_MAP, .item = &(const struct wb_state_shape)s                         \
	}
/* An array of objects with the members f. */
#define WB_SK_OBJECTS(f)                                                                           \
	{                                                                                          \
		.kind = WB_SK_ARRAY, .item = &(const struct wb_state_shape)                        \
		{                                                                                  \
			.kind = WB_SK_OBJECT, .fields = (f)                                        \
		}                                                                                  \
	}

/*
 * Check v against shape. 0, or -1 with why naming the first member that does not
 * fit and what it needs ("power[0].host: needs a string of 1 to 63 bytes").
 */
int wb_state_check(const json_t *v, const struct wb_state_shape *shape, char *why, size_t len);

/*
 * The state-file wrapper of the stages. Save: root (taken; NULL when building it
 * ran out of memory) written by wb_json_save. 0, or -1 with err.
 */
int wb_state_save_json(json_t *root, const char *path, bool sync, char *err, size_t errlen);
/* A stage's reader of its checked state document: 0, or -1 with why (the file is refused). */
typedef int wb_state_restore_fn(const json_t *root, void *arg, char *why, size_t len);
/*
 * Load path (wb_json_load: no links, no FIFOs, duplicate keys refused), check it
 * against shape (NULL: none) and hand it to restore. 0, or -1 with err ("PATH:
 * reason") and errno: ENOENT when there is no file, EINVAL when it was refused.
 */
int wb_state_load_json(const char *path, const struct wb_state_shape *shape,
		       wb_state_restore_fn *restore, void *arg, char *err, size_t errlen);

#endif
