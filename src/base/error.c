/* error.c — filling and decorating gp_error messages (see error.h). */
#include "base/error.h"

#include <stdio.h>
#include <string.h>

void gp_error_clear(gp_error *err) {
    if (!err) return;
    err->code = GEPARD_OK;
    err->message[0] = '\0';
}

int gp_failv(gp_error *err, int code, const char *fmt, va_list ap) {
    if (!err) return code;
    err->code = code;
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    return code;
}

int gp_fail(gp_error *err, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    gp_failv(err, code, fmt, ap);
    va_end(ap);
    return code;
}

int gp_error_prefix(gp_error *err, const char *fmt, ...) {
    if (!err) return GEPARD_ERR_INTERNAL;
    char prefix[GP_ERROR_MESSAGE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    char joined[GP_ERROR_MESSAGE_MAX];
    snprintf(joined, sizeof joined, "%s%s", prefix, err->message);
    memcpy(err->message, joined, sizeof joined);
    if (err->code == GEPARD_OK) err->code = GEPARD_ERR_INTERNAL;
    return err->code;
}

int gp_fail_oom(gp_error *err, const char *what, size_t bytes) {
    return gp_fail(err, GEPARD_ERR_NOMEM,
                   "out of memory allocating %zu bytes for %s — free memory or use a smaller "
                   "weight format (--dtype int8/q4)",
                   bytes, what);
}

const char *gp_status_name(int code) {
    switch (code) {
    case GEPARD_OK: return "ok";
    case GEPARD_ERR_INVALID_ARGUMENT: return "invalid argument";
    case GEPARD_ERR_IO: return "I/O error";
    case GEPARD_ERR_FORMAT: return "format error";
    case GEPARD_ERR_UNSUPPORTED: return "unsupported";
    case GEPARD_ERR_NOMEM: return "out of memory";
    case GEPARD_ERR_NETWORK: return "network error";
    case GEPARD_ERR_NOT_FOUND: return "not found";
    case GEPARD_ERR_CANCELLED: return "cancelled";
    case GEPARD_ERR_AUTH: return "authentication error";
    case GEPARD_ERR_BUSY: return "busy";
    default: return "internal error";
    }
}
