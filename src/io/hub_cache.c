/* hub_cache.c — the Hugging Face cache layout on disk, shared with Python's
 * huggingface_hub: models--org--name/{blobs,refs,snapshots,.no_exist} and
 * .locks/models--org--name/<etag>.lock (flock, as Python's filelock uses).
 * Every write here is atomic (temporary + rename), so a reader in another
 * process never sees a half-written ref or link.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/log.h"
#include "io/file.h"
#include "io/hub_internal.h"

int gp_hub_ctx_init(gp_hub_ctx *ctx, const gp_hub_options *opts, const char *repo_id,
                    gp_error *err) {
    memset(ctx, 0, sizeof *ctx);
    ctx->opts = opts;
    ctx->repo_id = repo_id;
    int rc = gp_hub_validate_repo_id(repo_id, err);
    if (!rc) rc = gp_hub_cache_dir(opts, &ctx->cache_dir, err);
    if (!rc) rc = gp_hub_endpoint(opts, &ctx->endpoint, err);
    ctx->offline = gp_hub_is_offline(opts);
    /* A broken token file must not stop offline use of the cache. */
    if (!rc && !ctx->offline) rc = gp_hub_token(opts, &ctx->token, err);
    if (rc) {
        gp_hub_ctx_clear(ctx);
        return rc;
    }
    const char *slash = strchr(repo_id, '/');
    gp_buf folder;
    gp_buf_init(&folder);
    if (gp_buf_printf(&folder, "models--%.*s--%s", (int)(slash - repo_id), repo_id, slash + 1) ==
        0) {
        ctx->repo_dir = gp_path_join(ctx->cache_dir, folder.data);
        char *locks = gp_path_join(ctx->cache_dir, ".locks");
        ctx->lock_dir = locks ? gp_path_join(locks, folder.data) : NULL;
        free(locks);
    }
    gp_buf_free(&folder);
    if (!ctx->repo_dir || !ctx->lock_dir) {
        gp_hub_ctx_clear(ctx);
        return gp_fail_oom(err, "cache path", 256);
    }
    return GEPARD_OK;
}

void gp_hub_ctx_clear(gp_hub_ctx *ctx) {
    gp_hub_http_free(ctx);
    free(ctx->endpoint);
    free(ctx->cache_dir);
    free(ctx->token);
    free(ctx->repo_dir);
    free(ctx->lock_dir);
    memset(ctx, 0, sizeof *ctx);
}

/* <repo_dir>/<a>/<b>[/<c>] as a heap string. */
static char *repo_path(const gp_hub_ctx *ctx, const char *a, const char *b, const char *c) {
    gp_buf p;
    gp_buf_init(&p);
    int rc = c ? gp_buf_printf(&p, "%s/%s/%s/%s", ctx->repo_dir, a, b, c)
               : gp_buf_printf(&p, "%s/%s/%s", ctx->repo_dir, a, b);
    if (rc) {
        gp_buf_free(&p);
        return NULL;
    }
    return gp_buf_detach(&p, NULL);
}

bool gp_hub_read_ref(const gp_hub_ctx *ctx, const char *revision,
                     char commit[GP_HUB_COMMIT_LEN + 1]) {
    commit[0] = '\0';
    char *path = repo_path(ctx, "refs", revision, NULL);
    char *data = NULL;
    size_t len = 0;
    bool ok = path && gp_path_exists(path) && gp_read_file(path, 256, &data, &len, NULL) == 0;
    if (ok) {
        while (len && (data[len - 1] == '\n' || data[len - 1] == '\r' || data[len - 1] == ' '))
            data[--len] = '\0';
        ok = gp_hub_is_commit(data);
        if (ok)
            memcpy(commit, data, GP_HUB_COMMIT_LEN + 1);
        else
            GP_WARN("%s: does not hold a commit hash; ignoring it", path);
    }
    free(data);
    free(path);
    return ok;
}

int gp_hub_write_ref(const gp_hub_ctx *ctx, const char *revision, const char *commit,
                     gp_error *err) {
    char current[GP_HUB_COMMIT_LEN + 1];
    if (gp_hub_read_ref(ctx, revision, current) && strcmp(current, commit) == 0) return GEPARD_OK;
    char *path = repo_path(ctx, "refs", revision, NULL);
    if (!path) return gp_fail_oom(err, "cache path", 256);
    gp_atomic_file af;
    int rc = gp_hub_make_parent_dirs(path, err);
    if (!rc) rc = gp_atomic_file_open(&af, path, err);
    if (!rc) {
        /* Python writes the bare hash without a newline; so do we. */
        gp_atomic_file_write(&af, commit, strlen(commit));
        rc = gp_atomic_file_commit(&af, err); /* reports a failed write */
    }
    free(path);
    return rc;
}

char *gp_hub_snapshot_dir(const gp_hub_ctx *ctx, const char *commit) {
    return repo_path(ctx, "snapshots", commit, NULL);
}

char *gp_hub_snapshot_path(const gp_hub_ctx *ctx, const char *commit, const char *filename) {
    return repo_path(ctx, "snapshots", commit, filename);
}

char *gp_hub_blob_path(const gp_hub_ctx *ctx, const char *etag) {
    return repo_path(ctx, "blobs", etag, NULL);
}

bool gp_hub_is_known_missing(const gp_hub_ctx *ctx, const char *commit, const char *filename) {
    char *path = repo_path(ctx, ".no_exist", commit, filename);
    bool missing = path && gp_path_exists(path);
    free(path);
    return missing;
}

int gp_hub_mark_missing(const gp_hub_ctx *ctx, const char *commit, const char *filename,
                        gp_error *err) {
    char *path = repo_path(ctx, ".no_exist", commit, filename);
    if (!path) return gp_fail_oom(err, "cache path", 256);
    int rc = gp_hub_make_parent_dirs(path, err);
    if (!rc) {
        int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0)
            rc = gp_fail(err, GEPARD_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
        else
            close(fd);
    }
    free(path);
    return rc;
}

int gp_hub_make_parent_dirs(const char *path, gp_error *err) {
    const char *base = gp_path_basename(path);
    if (base == path) return GEPARD_OK;
    char *dir = strndup(path, (size_t)(base - path - 1));
    if (!dir) return gp_fail_oom(err, "path", strlen(path));
    int rc = *dir ? gp_make_dirs(dir, err) : GEPARD_OK;
    free(dir);
    return rc;
}

/* "../" once per directory between the link and the repo folder, then
 * blobs/<etag>. */
static char *link_target(const char *filename, const char *etag) {
    gp_buf t;
    gp_buf_init(&t);
    int rc = gp_buf_append_str(&t, "../../");
    for (const char *p = filename; !rc && *p; p++)
        if (*p == '/') rc = gp_buf_append_str(&t, "../");
    if (!rc) rc = gp_buf_printf(&t, "blobs/%s", etag);
    if (rc) {
        gp_buf_free(&t);
        return NULL;
    }
    return gp_buf_detach(&t, NULL);
}

int gp_hub_link_snapshot(const gp_hub_ctx *ctx, const char *commit, const char *filename,
                         const char *etag, gp_error *err) {
    char *path = gp_hub_snapshot_path(ctx, commit, filename);
    char *target = link_target(filename, etag);
    gp_buf temp;
    gp_buf_init(&temp);
    int rc = path && target && gp_buf_printf(&temp, "%s.%ld.link", path, (long)getpid()) == 0
                 ? GEPARD_OK
                 : gp_fail_oom(err, "cache path", 256);
    if (!rc) rc = gp_hub_make_parent_dirs(path, err);
    char current[PATH_MAX];
    ssize_t n = rc ? -1 : readlink(path, current, sizeof current - 1);
    bool same = n >= 0 && (size_t)n == strlen(target) && memcmp(current, target, (size_t)n) == 0;
    if (!rc && !same) {
        unlink(temp.data);
        if (symlink(target, temp.data) != 0)
            rc = gp_fail(err, GEPARD_ERR_IO,
                         "%s: cannot create the snapshot link: %s — the Hugging Face cache needs "
                         "a file system with symbolic links (set HF_HUB_CACHE elsewhere)",
                         path, strerror(errno));
        else if (rename(temp.data, path) != 0) {
            rc = gp_fail(err, GEPARD_ERR_IO, "%s: cannot move the snapshot link into place: %s",
                         path, strerror(errno));
            unlink(temp.data);
        }
    }
    gp_buf_free(&temp);
    free(target);
    free(path);
    return rc;
}

int gp_hub_lock_blob(const gp_hub_ctx *ctx, const char *etag, int *fd, gp_error *err) {
    *fd = -1;
    gp_buf path;
    gp_buf_init(&path);
    if (gp_buf_printf(&path, "%s/%s.lock", ctx->lock_dir, etag)) {
        gp_buf_free(&path);
        return gp_fail_oom(err, "lock path", 256);
    }
    int rc = gp_make_dirs(ctx->lock_dir, err);
    int lock_fd = rc ? -1 : open(path.data, O_RDWR | O_CREAT | O_CLOEXEC, 0664);
    if (!rc && lock_fd < 0)
        rc = gp_fail(err, GEPARD_ERR_IO, "%s: cannot open the lock file: %s", path.data,
                     strerror(errno));
    if (!rc && flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
        GP_INFO("waiting for another process that is downloading the same file (%s)", path.data);
        int r;
        while ((r = flock(lock_fd, LOCK_EX)) != 0 && errno == EINTR) {
        }
        if (r != 0)
            rc = gp_fail(err, GEPARD_ERR_IO, "%s: cannot lock: %s", path.data, strerror(errno));
    }
    if (rc && lock_fd >= 0) close(lock_fd);
    if (!rc) *fd = lock_fd;
    gp_buf_free(&path);
    return rc;
}

void gp_hub_unlock_blob(int fd) {
    if (fd < 0) return;
    flock(fd, LOCK_UN);
    close(fd);
}
