/* hub.c — the resolution algorithm of the Hub client (see hub.h and
 * INTERFACES.md §2): the cache first (refs → snapshots → .no_exist), then a
 * HEAD for the commit and blob name, then a locked, resumable, verified
 * download of the blob, which is renamed into place only once its size (and
 * for LFS files its sha256) is right. Also the repo-level entry points that
 * model loaders call.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/log.h"
#include "io/file.h"
#include "io/hub_internal.h"

/* What resolving one file found. */
typedef struct hub_found {
    char *path;                         /* snapshots/<commit>/<file>, or NULL */
    char commit[GP_HUB_COMMIT_LEN + 1]; /* the commit it was resolved at, "" unknown */
    bool missing;                       /* the file does not exist at that commit */
    bool offline_miss;                  /* offline, and the cache does not know */
} hub_found;

typedef enum cache_state { CACHE_MISS, CACHE_HIT, CACHE_KNOWN_MISSING } cache_state;

/* Look `filename` up in snapshot `commit`; sets out->path on a hit. */
static int cache_lookup(const gp_hub_ctx *ctx, const char *commit, const char *filename,
                        hub_found *out, cache_state *state, gp_error *err) {
    *state = CACHE_MISS;
    char *path = gp_hub_snapshot_path(ctx, commit, filename);
    if (!path) return gp_fail_oom(err, "cache path", 256);
    if (gp_path_exists(path)) { /* stat follows the link: the blob is there */
        *state = CACHE_HIT;
        out->path = path;
        memcpy(out->commit, commit, GP_HUB_COMMIT_LEN + 1);
        return GEPARD_OK;
    }
    free(path);
    if (gp_hub_is_known_missing(ctx, commit, filename)) {
        *state = CACHE_KNOWN_MISSING;
        memcpy(out->commit, commit, GP_HUB_COMMIT_LEN + 1);
    }
    return GEPARD_OK;
}

static int known_missing_error(const gp_hub_ctx *ctx, const char *filename, hub_found *out,
                               gp_error *err) {
    out->missing = true;
    return gp_fail(err, GEPARD_ERR_NOT_FOUND,
                   "file %s not found in %s at commit %s (remembered in the cache's .no_exist) "
                   "— check the name and --revision",
                   filename, ctx->repo_id, out->commit);
}

static int offline_miss_error(const gp_hub_ctx *ctx, const char *revision, const char *filename,
                              const char *commit, hub_found *out, gp_error *err) {
    out->offline_miss = true;
    char what[512];
    if (commit)
        snprintf(what, sizeof what, "%s of %s (commit %.12s)", filename, ctx->repo_id, commit);
    else
        snprintf(what, sizeof what, "revision %s of %s", revision, ctx->repo_id);
    return gp_fail(err, GEPARD_ERR_NOT_FOUND,
                   "%s is not in the cache and HF_HUB_OFFLINE is set (or --offline was given): "
                   "run once with network access (gepard download %s), or pass a local directory "
                   "with --model DIR (cache: %s)",
                   what, ctx->repo_id, ctx->cache_dir);
}

/* Hash the first `len` bytes of fd (a partial download being resumed). */
static int hash_prefix(int fd, int64_t len, gp_sha256 *sha) {
    enum { CHUNK = 1 << 20 };
    unsigned char *buf = malloc(CHUNK);
    if (!buf) return -1;
    int64_t pos = 0;
    while (pos < len) {
        size_t want = len - pos < CHUNK ? (size_t)(len - pos) : CHUNK;
        ssize_t n = pread(fd, buf, want, (off_t)pos);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        gp_sha256_update(sha, buf, (size_t)n);
        pos += n;
    }
    free(buf);
    return pos == len ? 0 : -1;
}

static bool is_sha256(const char *etag) {
    if (strlen(etag) != 64) return false;
    for (const char *p = etag; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'))) return false;
    return true;
}

/* Check the finished .incomplete file. GEPARD_ERR_FORMAT means it is wrong
 * and must be thrown away. */
static int verify_download(int fd, const char *filename, const char *etag, int64_t size,
                           gp_sha256 *sha, gp_error *err) {
    struct stat st;
    if (fstat(fd, &st) != 0)
        return gp_fail(err, GEPARD_ERR_IO, "%s: cannot inspect the download: %s", filename,
                       strerror(errno));
    if (size >= 0 && (int64_t)st.st_size != size)
        return gp_fail(err, GEPARD_ERR_FORMAT,
                       "%s: size mismatch: received %lld bytes but the Hub announced %lld — the "
                       "partial download was deleted; run again (if this repeats, a proxy or "
                       "mirror is serving a different file)",
                       filename, (long long)st.st_size, (long long)size);
    if (sha) {
        char hex[65];
        gp_sha256_final_hex(sha, hex);
        if (strcmp(hex, etag) != 0)
            return gp_fail(err, GEPARD_ERR_FORMAT,
                           "%s: sha256 mismatch: expected %s, got %s — the corrupt download was "
                           "deleted; run again",
                           filename, etag, hex);
    }
    if (fsync(fd) != 0)
        return gp_fail(err, GEPARD_ERR_IO, "%s: cannot flush the download to disk: %s", filename,
                       strerror(errno));
    return GEPARD_OK;
}

/* Fill blobs/<etag>.incomplete (resuming what is there), verify it and
 * rename it to blobs/<etag>. Called with the blob's lock held. */
static int fetch_blob(gp_hub_ctx *ctx, const char *url, const char *revision, const char *filename,
                      const char *etag, int64_t size, const char *blob, gp_error *err) {
    size_t n = strlen(blob);
    char *partial = malloc(n + 12);
    if (!partial) return gp_fail_oom(err, "cache path", n);
    memcpy(partial, blob, n);
    memcpy(partial + n, ".incomplete", 12);
    int fd = open(partial, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        int rc = gp_fail(err, GEPARD_ERR_IO, "%s: cannot create: %s", partial, strerror(errno));
        free(partial);
        return rc;
    }
    struct stat st;
    int64_t offset = fstat(fd, &st) == 0 ? (int64_t)st.st_size : 0;
    gp_sha256 sha;
    gp_sha256_init(&sha);
    bool lfs = is_sha256(etag);
    if ((size >= 0 && offset > size) || (lfs && offset > 0 && hash_prefix(fd, offset, &sha))) {
        offset = 0; /* not a prefix of this blob: start over */
        gp_sha256_init(&sha);
        if (ftruncate(fd, 0) != 0) offset = -1;
    }
    int rc = offset < 0 || lseek(fd, offset, SEEK_SET) != offset
                 ? gp_fail(err, GEPARD_ERR_IO, "%s: cannot rewind: %s", partial, strerror(errno))
                 : GEPARD_OK;
    gp_hub_fetch f = {.fd = fd,
                      .label = filename,
                      .revision = revision,
                      .offset = offset,
                      .expected = size,
                      .sha = lfs ? &sha : NULL};
    if (!rc && offset > 0) {
        char done_s[32];
        gp_hub_format_bytes((uint64_t)offset, done_s, sizeof done_s);
        GP_INFO("resuming %s of %s after %s", filename, ctx->repo_id, done_s);
    }
    if (!rc && (size < 0 || offset < size)) rc = gp_hub_http_get(ctx, url, &f, err);
    bool discard = rc && f.corrupt;
    if (!rc) {
        rc = verify_download(fd, filename, etag, size, f.sha, err);
        discard = rc == GEPARD_ERR_FORMAT;
    }
    close(fd);
    if (discard) {
        unlink(partial);
    } else if (!rc && rename(partial, blob) != 0) {
        rc = gp_fail(err, GEPARD_ERR_IO, "%s: cannot move the download into place: %s", blob,
                     strerror(errno));
    }
    free(partial);
    return rc;
}

/* Make sure blobs/<etag> exists (downloading it under its lock) and link
 * snapshots/<commit>/<filename> to it. */
static int ensure_blob(gp_hub_ctx *ctx, const char *revision, const char *filename,
                       const char *commit, const gp_hub_meta *meta, gp_error *err) {
    char *blob = gp_hub_blob_path(ctx, meta->etag);
    /* Like huggingface_hub: GET the redirect target the HEAD saw (the CDN)
     * directly, else the resolve URL pinned to the commit. */
    char *url =
        meta->location[0] ? strdup(meta->location) : gp_hub_resolve_url(ctx, commit, filename);
    int rc = blob && url ? GEPARD_OK : gp_fail_oom(err, "cache path", 256);
    if (!rc && !gp_path_exists(blob)) {
        int lock_fd = -1;
        rc = gp_hub_make_parent_dirs(blob, err);
        if (!rc) rc = gp_hub_lock_blob(ctx, meta->etag, &lock_fd, err);
        /* Another process may have finished it while we waited. */
        if (!rc && !gp_path_exists(blob)) {
            char size_s[32];
            gp_hub_format_bytes(meta->size >= 0 ? (uint64_t)meta->size : 0, size_s, sizeof size_s);
            GP_INFO("downloading %s of %s (%s)", filename, ctx->repo_id,
                    meta->size >= 0 ? size_s : "size unknown");
            rc = fetch_blob(ctx, url, revision, filename, meta->etag, meta->size, blob, err);
        }
        gp_hub_unlock_blob(lock_fd);
    }
    if (!rc) rc = gp_hub_link_snapshot(ctx, commit, filename, meta->etag, err);
    free(url);
    free(blob);
    return rc;
}

/* Act on what the Hub said about the file (HEAD at `revision`). */
static int apply_meta(gp_hub_ctx *ctx, const char *revision, const char *filename,
                      const gp_hub_meta *meta, hub_found *out, gp_error *err) {
    const char *commit = meta->commit[0] ? meta->commit : NULL;
    if (!commit && gp_hub_is_commit(revision)) commit = revision;
    bool ok_status =
        (meta->status >= 200 && meta->status < 300) || (meta->status >= 300 && meta->status < 400);
    if (commit) memcpy(out->commit, commit, GP_HUB_COMMIT_LEN + 1);
    if (commit && (ok_status || strcmp(meta->error_code, "EntryNotFound") == 0) &&
        !gp_hub_is_commit(revision)) {
        int rc = gp_hub_write_ref(ctx, revision, commit, err);
        if (rc) return rc;
    }
    if (meta->status == 404 && strcmp(meta->error_code, "EntryNotFound") == 0) {
        out->missing = true;
        gp_error ignored;
        if (commit && gp_hub_mark_missing(ctx, commit, filename, &ignored))
            GP_WARN("%s", ignored.message);
        return gp_hub_status_error(ctx, revision, filename, meta, err);
    }
    if (!ok_status) return gp_hub_status_error(ctx, revision, filename, meta, err);
    if (!commit)
        return gp_fail(err, GEPARD_ERR_FORMAT,
                       "%s answered for %s of %s without an X-Repo-Commit header — is HF_ENDPOINT "
                       "a Hugging Face Hub?",
                       ctx->endpoint, filename, ctx->repo_id);
    if (!meta->etag[0])
        return gp_fail(err, GEPARD_ERR_FORMAT,
                       "%s answered for %s of %s without a usable ETag%s — is HF_ENDPOINT a "
                       "Hugging Face Hub?",
                       ctx->endpoint, filename, ctx->repo_id,
                       meta->etag_bad ? " (it contains unexpected characters)" : "");
    cache_state state;
    int rc = cache_lookup(ctx, commit, filename, out, &state, err);
    if (rc || state == CACHE_HIT) return rc;
    rc = ensure_blob(ctx, revision, filename, commit, meta, err);
    if (!rc) out->path = gp_hub_snapshot_path(ctx, commit, filename);
    if (!rc && !out->path) rc = gp_fail_oom(err, "cache path", 256);
    return rc;
}

/* Resolve one file at `revision` (see the algorithm in hub.h). */
static int resolve_one(gp_hub_ctx *ctx, const char *revision, const char *filename, hub_found *out,
                       gp_error *err) {
    memset(out, 0, sizeof *out);
    int rc = gp_hub_validate_filename(filename, err);
    if (!rc) rc = gp_hub_validate_revision(revision, err);
    if (rc) return rc;
    bool immutable = gp_hub_is_commit(revision);
    char commit[GP_HUB_COMMIT_LEN + 1] = "";
    bool have_commit = immutable ? (memcpy(commit, revision, sizeof commit), true)
                                 : gp_hub_read_ref(ctx, revision, commit);
    cache_state state = CACHE_MISS;
    if (have_commit && (rc = cache_lookup(ctx, commit, filename, out, &state, err))) return rc;
    bool refresh = ctx->opts && ctx->opts->refresh && !immutable;
    if (state != CACHE_MISS && (ctx->offline || !refresh))
        return state == CACHE_HIT ? GEPARD_OK : known_missing_error(ctx, filename, out, err);
    if (ctx->offline)
        return offline_miss_error(ctx, revision, filename, have_commit ? commit : NULL, out, err);
    char *url = gp_hub_resolve_url(ctx, revision, filename);
    if (!url) return gp_fail_oom(err, "a URL", 256);
    gp_hub_meta meta;
    rc = gp_hub_http_head(ctx, url, &meta, err);
    free(url);
    if (rc && state != CACHE_MISS) { /* refresh failed: the cached copy will do */
        GP_WARN("using the cached commit %.12s of %s: %s", commit, ctx->repo_id,
                err ? err->message : "the Hub cannot be reached");
        gp_error_clear(err);
        return state == CACHE_HIT ? GEPARD_OK : known_missing_error(ctx, filename, out, err);
    }
    free(out->path);
    memset(out, 0, sizeof *out);
    return rc ? rc : apply_meta(ctx, revision, filename, &meta, out, err);
}

static const char *revision_of(const gp_hub_options *opts) {
    return opts && opts->revision && *opts->revision ? opts->revision : "main";
}

int gp_hub_resolve_file(const gp_hub_options *opts, const char *repo_id, const char *filename,
                        char **local_path, gp_error *err) {
    *local_path = NULL;
    gp_hub_ctx ctx;
    int rc = gp_hub_ctx_init(&ctx, opts, repo_id, err);
    if (rc) return rc;
    hub_found found;
    rc = resolve_one(&ctx, revision_of(opts), filename ? filename : "", &found, err);
    if (!rc)
        *local_path = found.path;
    else
        free(found.path);
    gp_hub_ctx_clear(&ctx);
    return rc;
}

int gp_hub_resolve_repo(const gp_hub_options *opts, const char *repo_id, const gp_hub_file *files,
                        size_t n_files, char **snapshot_dir, gp_error *err) {
    *snapshot_dir = NULL;
    if (n_files == 0)
        return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT, "no files to download from %s",
                       repo_id ? repo_id : "(null)");
    gp_hub_ctx ctx;
    int rc = gp_hub_ctx_init(&ctx, opts, repo_id, err);
    if (rc) return rc;
    const char *revision = revision_of(opts);
    char commit[GP_HUB_COMMIT_LEN + 1] = "";
    for (size_t i = 0; i < n_files && !rc; i++) {
        hub_found found;
        /* The first answer pins the commit, so every file comes from one
         * snapshot even if the branch moves meanwhile. */
        rc = resolve_one(&ctx, commit[0] ? commit : revision, files[i].path, &found, err);
        if (!commit[0] && found.commit[0]) memcpy(commit, found.commit, sizeof commit);
        if (rc && files[i].optional && (found.missing || found.offline_miss)) {
            GP_DEBUG("optional file %s is not in %s", files[i].path, repo_id);
            gp_error_clear(err);
            rc = GEPARD_OK;
        }
        free(found.path);
    }
    if (!rc && !commit[0])
        rc = offline_miss_error(&ctx, revision, files[0].path, NULL, &(hub_found){0}, err);
    if (!rc) {
        *snapshot_dir = gp_hub_snapshot_dir(&ctx, commit);
        rc = *snapshot_dir ? gp_make_dirs(*snapshot_dir, err) : gp_fail_oom(err, "path", 256);
        if (rc) {
            free(*snapshot_dir);
            *snapshot_dir = NULL;
        }
    }
    gp_hub_ctx_clear(&ctx);
    return rc;
}

static const gp_hub_file gepard_files[] = {
    {"gepard_config.json", false}, {"config.json", true},           {"model.safetensors", false},
    {"tokenizer.json", false},     {"tokenizer_config.json", true},
};

const gp_hub_file *gp_hub_gepard_files(size_t *count) {
    *count = sizeof gepard_files / sizeof gepard_files[0];
    return gepard_files;
}

int gp_hub_resolve_model(const gp_hub_options *opts, const char *path_or_repo, char **model_dir,
                         gp_error *err) {
    *model_dir = NULL;
    if (!path_or_repo || !*path_or_repo)
        return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT, "no model directory or repo id given");
    if (gp_path_exists(path_or_repo)) {
        *model_dir = strdup(path_or_repo);
        return *model_dir ? GEPARD_OK : gp_fail_oom(err, "path", strlen(path_or_repo));
    }
    if (gp_hub_validate_repo_id(path_or_repo, NULL) != GEPARD_OK)
        return gp_fail(err, GEPARD_ERR_NOT_FOUND,
                       "%s: no such directory, and not a Hugging Face repo id (org/name) either "
                       "— pass a model directory or a repo id such as nineninesix/gepard-1.0",
                       path_or_repo);
    size_t n;
    const gp_hub_file *files = gp_hub_gepard_files(&n);
    return gp_hub_resolve_repo(opts, path_or_repo, files, n, model_dir, err);
}
