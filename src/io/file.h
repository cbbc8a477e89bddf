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

typedef struct gp_atomic_file {
    FILE *fp;
    char *final_path;
    char *temp_path;
} gp_atomic_file;

/* Open a temporary beside `path` for writing. */
int gp_atomic_file_open(gp_atomic_file *af, const char *path, gp_error *err);
/* Flush, fsync and rename into place. Closes the file either way. */
int gp_atomic_file_commit(gp_atomic_file *af, gp_error *err);
/* Close and delete the temporary (safe after a failed commit or on NULL fp). */
void gp_atomic_file_abort(gp_atomic_file *af);

#endif
