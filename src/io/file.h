/* file.h — reading, mapping and atomically writing files.
 *
 * Every reader reports failures as a sentence naming the path and the OS
 * reason. Outputs are written through gp_atomic_file: data goes to a hidden
 * temporary next to the destination and is renamed over it only on commit, so
 * an interrupted or failed write never leaves a half-written file that looks
 * complete.
 */
#ifndef GP_IO_FILE_H
#define GP_IO_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "base/error.h"

/* Read a whole file into a NUL-terminated heap buffer (caller frees).
 * `max_bytes` (0 = no limit) guards against absurd inputs. */
int gp_read_file(const char *path, size_t max_bytes, char **data, size_t *len, gp_error *err);

/* A read-only memory mapping of a whole file. */
typedef struct gp_mapped_file {
    const unsigned char *data;
    size_t size;
} gp_mapped_file;

int gp_map_file(const char *path, gp_mapped_file *out, gp_error *err);
void gp_unmap_file(gp_mapped_file *mapped);

bool gp_path_exists(const char *path);
bool gp_path_is_dir(const char *path);
/* The final component of a path ("a/b/c.txt" -> "c.txt"); points into path. */
const char *gp_path_basename(const char *path);
/* True when `path` ends with `suffix`, compared case-insensitively. */
bool gp_path_has_suffix(const char *path, const char *suffix);
/* Join dir and name with one '/', into a heap string (NULL on OOM). */
char *gp_path_join(const char *dir, const char *name);
/* mkdir -p; 0 = ok. */
int gp_make_dirs(const char *path, gp_error *err);

/* An output file. A regular file (or a new name) is written to a hidden
 * temporary in the same directory and renamed over the target on commit; a
 * symbolic link is followed, so the file it points to is replaced, not the
 * link. A target that exists and is not a regular file — a device such as
 * /dev/null or /dev/full, a FIFO, /dev/stdout — is written in place and is
 * not seekable. Every write error is kept (the first errno) and reported by
 * commit with the path and the OS reason. */
typedef struct gp_atomic_file {
    FILE *fp;
    char *final_path; /* the path as given, for messages */
    char *target;     /* what is replaced on commit (links resolved) */
    char *temp_path;  /* NULL when writing in place */
    bool seekable;    /* false for devices, FIFOs and sockets */
    int error;        /* errno of the first failed write; 0 = none */
} gp_atomic_file;

/* Open a temporary beside `path` (or `path` itself, see above) for writing. */
int gp_atomic_file_open(gp_atomic_file *af, const char *path, gp_error *err);
/* Write `len` bytes; returns 0, or -1 after recording the error (later
 * writes are skipped; commit reports it). */
int gp_atomic_file_write(gp_atomic_file *af, const void *data, size_t len);
/* Seek to `offset` (seekable files only); -1 after recording the error. */
int gp_atomic_file_seek(gp_atomic_file *af, long long offset);
/* Flush, fsync and rename into place; on any error so far or now, delete
 * the temporary and fail with "PATH: cannot write: REASON". Closes the file
 * either way. */
int gp_atomic_file_commit(gp_atomic_file *af, gp_error *err);
/* Close and delete the temporary (safe after a failed commit or on NULL fp). */
void gp_atomic_file_abort(gp_atomic_file *af);

#endif
