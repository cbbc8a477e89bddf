/* error.h — the one error type every layer returns.
 *
 * Functions that can fail return an int status (0 = success, otherwise one of
 * the GEPARD_ERR_* codes of the public header) and take a `gp_error *` as their
 * last argument, which they fill with a sentence the user can act on: what
 * failed, which file/field, what to do. Callers that add context prefix it
 * (gp_error_prefix) instead of overwriting it, so the final message reads
 * "model.safetensors: tensor x has shape [3], expected [4] — ...".
 */
#ifndef GP_BASE_ERROR_H
#define GP_BASE_ERROR_H

#include <stdarg.h>
#include <stddef.h>

#include "gepard.h"

#define GP_ERROR_MESSAGE_MAX 1024

typedef struct gp_error {
    int code;                           /* GEPARD_OK or a GEPARD_ERR_* code */
    char message[GP_ERROR_MESSAGE_MAX]; /* human-readable, no trailing newline */
} gp_error;

/* Clear an error to "no error". Safe on NULL. */
void gp_error_clear(gp_error *err);

/* Record a failure and return `code` so callers can write
 * `return gp_fail(err, GEPARD_ERR_FORMAT, "...", ...);`. `err` may be NULL. */
int gp_fail(gp_error *err, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int gp_failv(gp_error *err, int code, const char *fmt, va_list ap);

/* Prepend context ("file.json: ") to an existing message; returns err->code. */
int gp_error_prefix(gp_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Shorthand for an allocation failure naming what was being allocated. */
int gp_fail_oom(gp_error *err, const char *what, size_t bytes);

/* A stable short name for a status code ("format error", "I/O error", ...). */
const char *gp_status_name(int code);

#endif
