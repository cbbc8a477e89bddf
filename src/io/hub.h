/* hub.h — the Hugging Face Hub client: model files by repo id, through the
 * standard HF cache that Python's huggingface_hub shares.
 *
 * A file is resolved as ../shared/docs/INTERFACES.md §2 describes: the cache
 * (`$HF_HUB_CACHE`, else `$HF_HOME/hub`, else
 * `${XDG_CACHE_HOME:-~/.cache}/huggingface/hub`) holds
 * `models--org--name/{blobs,refs,snapshots,.no_exist}`; a cached snapshot is
 * used without touching the network, otherwise a HEAD request at
 * `{HF_ENDPOINT}/{repo}/resolve/{revision}/{path}` names the commit and the
 * blob, and a GET (following the Hub's redirect to its CDN) fills
 * `blobs/<etag>.incomplete`, resuming a partial file with a Range request.
 * The blob is checked (size; sha256 for LFS files), renamed into place and
 * linked from `snapshots/<commit>/<path>`, so a file that looks complete
 * always is. `HF_HUB_OFFLINE=1` (or `offline`) never uses the network.
 *
 * Files: hub_env.c (environment, names, URLs), hub_cache.c (the cache
 * layout, locks), hub_http.c (libcurl), hub.c (the resolution algorithm).
 */
#ifndef GP_IO_HUB_H
#define GP_IO_HUB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

/* Bytes `done` of `total` (0 = unknown) of the file `what`; the same shape as
 * gepard_progress_fn so the public API can pass its callback straight in. */
typedef void (*gp_hub_progress_fn)(const char *what, uint64_t done, uint64_t total, void *user);

typedef struct gp_hub_options {
    const char *endpoint;        /* NULL: $HF_ENDPOINT, else https://huggingface.co */
    const char *cache_dir;       /* NULL: $HF_HUB_CACHE / $HF_HOME/hub / ~/.cache/... */
    const char *revision;        /* branch, tag or 40-hex commit; NULL: "main" */
    const char *token;           /* NULL: $HF_TOKEN, then the token file; "": none */
    bool offline;                /* never use the network (HF_HUB_OFFLINE=1 also sets it) */
    bool refresh;                /* ask the Hub for the revision's current commit even when
                                    the cache has one; falls back to the cache (with a
                                    warning) when the Hub cannot be reached */
    bool progress_bar;           /* draw a gp_progress line while downloading (TTY only) */
    long connect_timeout_s;      /* 0: 10 s */
    long stall_timeout_s;        /* abort a transfer slower than 1 KiB/s for this long; 0: 30 s */
    gp_hub_progress_fn progress; /* optional */
    void *progress_user;
} gp_hub_options;

/* Everything NULL/false except progress_bar = true. */
gp_hub_options gp_hub_default_options(void);

/* ---- configuration (environment variables, as huggingface_hub reads them) ---- */

/* The cache root (heap string). */
int gp_hub_cache_dir(const gp_hub_options *opts, char **out, gp_error *err);
/* The endpoint without a trailing '/' (heap string); must be http(s)://. */
int gp_hub_endpoint(const gp_hub_options *opts, char **out, gp_error *err);
/* The token to send (heap string), or *out = NULL when there is none:
 * opts->token, then $HF_TOKEN, then the file $HF_TOKEN_PATH, then
 * $HF_HOME/token (HF_HOME defaulting to ${XDG_CACHE_HOME:-~/.cache}/huggingface). */
int gp_hub_token(const gp_hub_options *opts, char **out, gp_error *err);
/* opts->offline or HF_HUB_OFFLINE set to 1/true/yes/on. */
bool gp_hub_is_offline(const gp_hub_options *opts);

/* ---- names ---- */

/* `org/name` made of letters, digits, '-', '_', '.'; no "..", "--", leading
 * or trailing '.'/'-', at most 96 characters. */
int gp_hub_validate_repo_id(const char *repo_id, gp_error *err);
/* True when `s` should be treated as a repo id: a valid `org/name` that is
 * not an existing file or directory. Anything else is a local path. */
bool gp_hub_is_repo_id(const char *s);
/* A branch, tag or commit: letters, digits, '-', '_', '.', '/', '+'; no "..". */
int gp_hub_validate_revision(const char *revision, gp_error *err);
/* A relative path inside a repo, without "..", "." or empty parts. */
int gp_hub_validate_filename(const char *filename, gp_error *err);
/* True for a 40-digit lowercase hex commit hash. */
bool gp_hub_is_commit(const char *revision);

/* ---- resolving files ---- */

/* The path of `filename` (may contain '/') of `repo_id` inside the cache's
 * snapshot folder (a symlink to its blob), downloading it first if needed.
 * Fails with GEPARD_ERR_NOT_FOUND when the repo, revision or file does not
 * exist, GEPARD_ERR_AUTH for a gated/private repo, GEPARD_ERR_NETWORK when
 * the Hub cannot be reached or the transfer broke (the partial file is kept
 * and the next call resumes it), GEPARD_ERR_IO for disk problems. */
int gp_hub_resolve_file(const gp_hub_options *opts, const char *repo_id, const char *filename,
                        char **local_path, gp_error *err);

typedef struct gp_hub_file {
    const char *path; /* path inside the repo */
    bool optional;    /* a 404 is fine: recorded as .no_exist/<commit>/<path> */
} gp_hub_file;

/* Resolve every file of the list at one commit (the first file fixes the
 * commit of a branch or tag) and return that snapshot directory (heap
 * string). Missing optional files are simply absent from it. */
int gp_hub_resolve_repo(const gp_hub_options *opts, const char *repo_id, const gp_hub_file *files,
                        size_t n_files, char **snapshot_dir, gp_error *err);

/* The files of a Gepard checkpoint repo: gepard_config.json,
 * model.safetensors and tokenizer.json, plus config.json and
 * tokenizer_config.json (optional). Returns the table and sets *count. */
const gp_hub_file *gp_hub_gepard_files(size_t *count);

/* One call for model loaders: an existing path is returned as it is (a heap
 * copy); a repo id is resolved with the Gepard file list into its snapshot
 * directory; anything else fails saying it is neither. */
int gp_hub_resolve_model(const gp_hub_options *opts, const char *path_or_repo, char **model_dir,
                         gp_error *err);

#endif
