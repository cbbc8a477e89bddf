/* hub_internal.h — what the Hub client's files share (see hub.h): the
 * per-repo context, the cache layout helpers (hub_cache.c), name checks and
 * URLs (hub_env.c) and the two HTTP requests (hub_http.c). Not for use
 * outside src/io/hub*.c.
 */
#ifndef GP_IO_HUB_INTERNAL_H
#define GP_IO_HUB_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "io/hub.h"
#include "io/sha256.h"

#define GP_HUB_COMMIT_LEN 40
#define GP_HUB_ETAG_MAX 128

/* Everything one resolution needs about one repo. */
typedef struct gp_hub_ctx {
    const gp_hub_options *opts;
    char *endpoint;  /* no trailing '/' */
    char *cache_dir; /* cache root */
    char *token;     /* NULL = send none */
    bool offline;
    const char *repo_id;
    char *repo_dir; /* <cache>/models--org--name */
    char *lock_dir; /* <cache>/.locks/models--org--name */
    void *curl;     /* CURL easy handle, created by the first request */
} gp_hub_ctx;

/* ---- hub_env.c: URLs ---- */
/* {endpoint}/{repo}/resolve/{revision}/{filename}, percent-encoded (heap). */
char *gp_hub_resolve_url(const gp_hub_ctx *ctx, const char *revision, const char *filename);
/* The scheme://host[:port] part of a URL, for messages. */
void gp_hub_url_origin(const char *url, char *out, size_t out_size);
/* A byte count for people: "512 B", "3.4 MB", "1.13 GB". */
void gp_hub_format_bytes(uint64_t bytes, char *out, size_t out_size);

/* ---- hub_cache.c: the cache layout ---- */
int gp_hub_ctx_init(gp_hub_ctx *ctx, const gp_hub_options *opts, const char *repo_id,
                    gp_error *err);
void gp_hub_ctx_clear(gp_hub_ctx *ctx);
/* refs/<revision> as a commit; false when absent or not a commit hash. */
bool gp_hub_read_ref(const gp_hub_ctx *ctx, const char *revision,
                     char commit[GP_HUB_COMMIT_LEN + 1]);
int gp_hub_write_ref(const gp_hub_ctx *ctx, const char *revision, const char *commit,
                     gp_error *err);
/* Heap paths inside the repo folder (NULL when out of memory). */
char *gp_hub_snapshot_dir(const gp_hub_ctx *ctx, const char *commit);
char *gp_hub_snapshot_path(const gp_hub_ctx *ctx, const char *commit, const char *filename);
char *gp_hub_blob_path(const gp_hub_ctx *ctx, const char *etag);
/* .no_exist/<commit>/<filename>: a known-missing file. */
bool gp_hub_is_known_missing(const gp_hub_ctx *ctx, const char *commit, const char *filename);
int gp_hub_mark_missing(const gp_hub_ctx *ctx, const char *commit, const char *filename,
                        gp_error *err);
/* snapshots/<commit>/<filename> -> ../../blobs/<etag> (one more ../ per
 * directory level of filename), replacing whatever was there. */
int gp_hub_link_snapshot(const gp_hub_ctx *ctx, const char *commit, const char *filename,
                         const char *etag, gp_error *err);
/* mkdir -p of the directory part of `path`. */
int gp_hub_make_parent_dirs(const char *path, gp_error *err);
/* An exclusive flock on .locks/<repo>/<etag>.lock, waiting for another
 * process (ours or Python's) that holds it. *fd is released by unlock. */
int gp_hub_lock_blob(const gp_hub_ctx *ctx, const char *etag, int *fd, gp_error *err);
void gp_hub_unlock_blob(int fd);

/* ---- hub_http.c: requests ---- */

/* What a HEAD (or an error response) said about a file. */
typedef struct gp_hub_meta {
    long status;                        /* HTTP status of the last response */
    char commit[GP_HUB_COMMIT_LEN + 1]; /* X-Repo-Commit, "" if absent/invalid */
    char etag[GP_HUB_ETAG_MAX + 1];     /* X-Linked-Etag else ETag, normalised */
    int64_t size;                       /* X-Linked-Size else Content-Length; -1 */
    char error_code[64];                /* X-Error-Code, "" if absent */
    char location[4096];                /* absolute target of a redirect to another
                                           host (the CDN), "" if none or too long */
    bool etag_bad;                      /* an ETag was sent but is unusable */
} gp_hub_meta;

/* HEAD `url` without following redirects to other hosts (same-host
 * redirects, as for renamed repos, are followed). Succeeds for any HTTP
 * status (see meta->status); fails only when the server cannot be reached. */
int gp_hub_http_head(gp_hub_ctx *ctx, const char *url, gp_hub_meta *meta, gp_error *err);

/* A GET that appends to an open file. */
typedef struct gp_hub_fetch {
    int fd;               /* open for writing, positioned at `offset` */
    const char *label;    /* the file's repo path, for messages and progress */
    const char *revision; /* for messages */
    int64_t offset;       /* bytes already in the file: sent as a Range */
    int64_t expected;     /* the announced size, -1 unknown */
    gp_sha256 *sha;       /* hash of the file so far, or NULL */
    /* results */
    long status;  /* final HTTP status */
    int64_t size; /* bytes in the file after the transfer */
    bool corrupt; /* the body contradicted the metadata: discard the file */
} gp_hub_fetch;

/* GET `url` into f->fd, following redirects (the token is sent only to the
 * endpoint's host), resuming at f->offset when the server honours the
 * Range (a 200 restarts the file from zero). */
int gp_hub_http_get(gp_hub_ctx *ctx, const char *url, gp_hub_fetch *f, gp_error *err);

/* The message for an HTTP error status from the Hub. */
int gp_hub_status_error(const gp_hub_ctx *ctx, const char *revision, const char *filename,
                        const gp_hub_meta *meta, gp_error *err);

/* The "cannot reach" message, naming the server and what to do instead. */
int gp_hub_unreachable_error(const char *url, const char *reason, gp_error *err);

void gp_hub_http_free(gp_hub_ctx *ctx);

#endif
