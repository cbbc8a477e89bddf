/* gepard.h — the public C API of libgepard, the Gepard text-to-speech engine.
 *
 * Shape (after whisper.h): opaque handles, parameter structs with a
 * *_default_params() function, functions returning a gepard_status and leaving
 * a human-readable message retrievable with gepard_last_error() (per thread).
 * The `gepard` command line tool and the HTTP server use only this header.
 *
 * This header grows as the engine does; every declaration in it is
 * implemented and tested.
 */
#ifndef GEPARD_H
#define GEPARD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GEPARD_VERSION "0.1.0"

typedef enum gepard_status {
    GEPARD_OK = 0,
    GEPARD_ERR_INVALID_ARGUMENT = 1, /* a parameter or the input text is unusable */
    GEPARD_ERR_IO = 2,               /* a file could not be read or written */
    GEPARD_ERR_FORMAT = 3,           /* a file is malformed or not what was expected */
    GEPARD_ERR_UNSUPPORTED = 4,      /* valid, but something this engine cannot run */
    GEPARD_ERR_NOMEM = 5,            /* an allocation failed */
    GEPARD_ERR_NETWORK = 6,          /* a download failed or the network is unreachable */
    GEPARD_ERR_NOT_FOUND = 7,        /* a file, tensor, repo or voice does not exist */
    GEPARD_ERR_CANCELLED = 8,        /* the caller cancelled the operation */
    GEPARD_ERR_AUTH = 9,             /* the server refused our credentials */
    GEPARD_ERR_BUSY = 10,            /* no capacity right now; try again later */
    GEPARD_ERR_INTERNAL = 11         /* a bug: please report it */
} gepard_status;

/* The library version string, e.g. "0.1.0". */
const char *gepard_version(void);

/* The message of the last failing call made by this thread ("" if none). */
const char *gepard_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* GEPARD_H */
