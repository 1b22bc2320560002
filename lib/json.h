/* msgpack <-> JSON through jansson, for the CLI (tap prints, pub reads). */
#ifndef WB_JSON_H
#define WB_JSON_H

#include <jansson.h>

#include "codec.h"

/* Any msgpack object as JSON (bin as base16 string). New reference or NULL (err). */
json_t *wb_msgpack_to_json(const void *buf, size_t len, struct wb_err *err);
/* A JSON value as msgpack: integers stay integers, reals become float64. *out malloc'd. */
int wb_json_to_msgpack(const json_t *json, char **out, size_t *len, struct wb_err *err);

#endif
