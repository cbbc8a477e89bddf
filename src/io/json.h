/* json.h — cJSON with error messages a user can act on.
 *
 * Parsing reports the line and column of a syntax error; the typed getters
 * report the file and key of a value with the wrong type or range. `origin`
 * is the name used in messages (normally the file name).
 */
#ifndef GP_IO_JSON_H
#define GP_IO_JSON_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/error.h"

int gp_json_parse(const char *text, size_t len, const char *origin, cJSON **out, gp_error *err);
int gp_json_load_file(const char *path, size_t max_bytes, cJSON **out, gp_error *err);

/* Getters: when the key is absent (or null) they store `fallback` and succeed;
 * when present with the wrong type they fail naming origin and key. */
int gp_json_get_int(const cJSON *obj, const char *key, int64_t fallback, int64_t *out,
                    const char *origin, gp_error *err);
int gp_json_get_double(const cJSON *obj, const char *key, double fallback, double *out,
                       const char *origin, gp_error *err);
int gp_json_get_bool(const cJSON *obj, const char *key, bool fallback, bool *out,
                     const char *origin, gp_error *err);
/* *out points into the cJSON tree (or is `fallback`). */
int gp_json_get_string(const cJSON *obj, const char *key, const char *fallback, const char **out,
                       const char *origin, gp_error *err);

/* True when the number is an integer that fits int64 exactly. */
bool gp_json_is_integer(const cJSON *item);

/* Append `s` as a JSON string literal (quoted, escaped) to `b`. */
int gp_json_append_string(gp_buf *b, const char *s);

#endif
