/* fuzz_common.h — helpers shared by the libFuzzer harnesses in fuzz/:
 * quiet logging, a memfd path for parsers that only take a file name, and a
 * NUL-terminated copy of the input. Each harness includes this once. */
#ifndef GEPARD_FUZZ_COMMON_H
#define GEPARD_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A NUL-terminated malloc'd copy of the input (NULL when out of memory). */
static inline char *fuzz_strdup(const uint8_t *data, size_t size) {
    char *s = malloc(size + 1);
    if (!s) return NULL;
    if (size) memcpy(s, data, size);
    s[size] = '\0';
    return s;
}

/* The input as an anonymous in-memory file; *path gets "/proc/self/fd/N".
 * Returns the descriptor (close it after use) or -1. */
static inline int fuzz_memfd(const uint8_t *data, size_t size, char *path, size_t path_size) {
    int fd = memfd_create("fuzz", 0);
    if (fd < 0) return -1;
    size_t done = 0;
    while (done < size) {
        ssize_t w = write(fd, data + done, size - done);
        if (w <= 0) {
            close(fd);
            return -1;
        }
        done += (size_t)w;
    }
    snprintf(path, path_size, "/proc/self/fd/%d", fd);
    return fd;
}

/* Every failure must carry a message: a parser that fails silently is a bug. */
static inline void fuzz_check_error(int rc, const gp_error *err) {
    if (rc && err->message[0] == '\0') {
        fprintf(stderr, "parser failed (code %d) without a message\n", rc);
        abort();
    }
}

#endif
