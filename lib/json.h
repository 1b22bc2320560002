/* msgpack <-> JSON through jansson, for the CLI (tap prints, pub reads). */
#ifndef WB_JSON_H
#define WB_JSON_H

#include <stdbool.h>

#include <jansson.h>

#include "codec.h"

/* Any msgpack object as JSON (bin as base16 string). New reference or NULL (err). */
json_t *wb_msgpack_to_json(const void *buf, size_t len, struct wb_err *err);
/* A JSON value as msgpack: integers stay integers, reals become float64. *out malloc'd. */
int wb_json_to_msgpack(const json_t *json, char **out, size_t *len, struct wb_err *err);

/*
 * Write root to path atomically: a temporary file of a fresh name beside it
 * (wb_state_create) written with one write() of the whole document, fsync when
 * sync, rename, so that a crash of the process leaves the old file or the new
 * one; sync also makes that hold across a crash of the machine. Takes no
 * reference. 0, or -1 with err ("PATH: cannot write: reason").
 */
int wb_json_save(json_t *root, const char *path, bool sync, char *err, size_t errlen);
/* How often state checkpoints also fsync (a clean stop always does). */
#define WB_JSON_SYNC_EVERY_NS (60ull * 1000000000ull)
/*
 * Read a state file written by wb_json_save (wb_state_open_read: no links, no
 * FIFOs). New reference, or NULL with err ("PATH: reason", "PATH:LINE: reason")
 * and errno ENOENT when there is no file.
 */
json_t *wb_json_load(const char *path, size_t flags, char *err, size_t errlen);
/* A non-negative integer member, or 0 when absent or of another type. */
uint64_t wb_json_u64(const json_t *obj, const char *key);
/* A string member, or "" when absent or of another type. */
const char *wb_json_str(const json_t *obj, const char *key);

#endif
