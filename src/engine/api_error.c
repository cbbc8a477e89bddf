/* api_error.c — thread-local last-error storage behind gepard_last_error(),
 * and gepard_version(). */
#include "engine/api_error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char last_error[GP_ERROR_MESSAGE_MAX];

const char *gepard_version(void) { return GEPARD_VERSION; }

const char *gepard_last_error(void) { return last_error; }

gepard_status gp_api_fail(const gp_error *err) {
    snprintf(last_error, sizeof last_error, "%s", err->message);
    return err->code ? (gepard_status)err->code : GEPARD_ERR_INTERNAL;
}

gepard_status gp_api_failf(gepard_status code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return code;
}

gepard_status gp_api_ok(void) {
    last_error[0] = '\0';
    return GEPARD_OK;
}
