/* api_error.h — how the public API functions record the message behind
 * gepard_last_error(): a thread-local copy of the failing gp_error. */
#ifndef GP_ENGINE_API_ERROR_H
#define GP_ENGINE_API_ERROR_H

#include "base/error.h"

/* Store err's message as this thread's last error and return its code. */
gepard_status gp_api_fail(const gp_error *err);
/* Store a formatted message and return `code`. */
gepard_status gp_api_failf(gepard_status code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Clear this thread's last error and return GEPARD_OK. */
gepard_status gp_api_ok(void);

#endif
