/* hub_env.c — the Hub client's configuration and names: where the cache is,
 * which endpoint and token to use, whether we are offline (all read from the
 * environment the way huggingface_hub reads it), checks on repo ids,
 * revisions and file names taken from users or servers, and URL building.
 */
#include <ctype.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "base/buf.h"
#include "io/file.h"
#include "io/hub_internal.h"

#define HUB_DEFAULT_ENDPOINT "https://huggingface.co"
#define HUB_TOKEN_MAX 4096

gp_hub_options gp_hub_default_options(void) {
    gp_hub_options o;
    memset(&o, 0, sizeof o);
    o.progress_bar = true;
    return o;
}

/* A non-empty environment variable, or NULL. */
static const char *env_value(const char *name) {
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

static const char *home_dir(void) {
    const char *home = env_value("HOME");
    if (home) return home;
    struct passwd *pw = getpwuid(getuid());
    return pw && pw->pw_dir && *pw->pw_dir ? pw->pw_dir : NULL;
}

/* `path` with a leading "~/" replaced by $HOME (heap). */
static char *expand_user(const char *path) {
    if (path[0] == '~' && (path[1] == '/' || path[1] == '\0')) {
        const char *home = home_dir();
        if (home) return gp_path_join(home, path[1] ? path + 2 : "");
    }
    return strdup(path);
}

/* ${HF_HOME:-${XDG_CACHE_HOME:-~/.cache}/huggingface} (heap; NULL when no
 * home directory can be found). */
static char *hf_home(void) {
    const char *v = env_value("HF_HOME");
    if (v) return expand_user(v);
    v = env_value("XDG_CACHE_HOME");
    if (v) {
        char *xdg = expand_user(v);
        char *p = xdg ? gp_path_join(xdg, "huggingface") : NULL;
        free(xdg);
        return p;
    }
    const char *home = home_dir();
    return home ? gp_path_join(home, ".cache/huggingface") : NULL;
}

int gp_hub_cache_dir(const gp_hub_options *opts, char **out, gp_error *err) {
    *out = NULL;
    const char *v = opts && opts->cache_dir && *opts->cache_dir ? opts->cache_dir : NULL;
    if (!v) v = env_value("HF_HUB_CACHE");
    if (v) {
        *out = expand_user(v);
    } else {
        char *home = hf_home();
        if (!home)
            return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT,
                           "cannot find a Hugging Face cache directory: $HOME is not set — set "
                           "HF_HUB_CACHE or HF_HOME");
        *out = gp_path_join(home, "hub");
        free(home);
    }
    return *out ? GEPARD_OK : gp_fail_oom(err, "cache path", 256);
}

int gp_hub_endpoint(const gp_hub_options *opts, char **out, gp_error *err) {
    *out = NULL;
    const char *v = opts && opts->endpoint && *opts->endpoint ? opts->endpoint : NULL;
    if (!v) v = env_value("HF_ENDPOINT");
    if (!v) v = HUB_DEFAULT_ENDPOINT;
    if (strncasecmp(v, "http://", 7) != 0 && strncasecmp(v, "https://", 8) != 0)
        return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT,
                       "HF_ENDPOINT \"%s\" is not an http:// or https:// URL", v);
    for (const char *p = v; *p; p++)
        if ((unsigned char)*p <= ' ' || *p == 0x7f)
            return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT,
                           "HF_ENDPOINT \"%s\" contains spaces or control characters", v);
    size_t n = strlen(v);
    while (n > 8 && v[n - 1] == '/') n--;
    *out = strndup(v, n);
    return *out ? GEPARD_OK : gp_fail_oom(err, "endpoint", n);
}

/* Trim surrounding whitespace in place; returns s. */
static char *trim(char *s) {
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1])) s[--n] = '\0';
    size_t start = 0;
    while (s[start] && isspace((unsigned char)s[start])) start++;
    memmove(s, s + start, n - start + 1);
    return s;
}

/* The trimmed content of a token file, NULL when it is absent or empty. */
static int read_token_file(const char *path, char **out, gp_error *err) {
    *out = NULL;
    if (!gp_path_exists(path)) return GEPARD_OK;
    char *data = NULL;
    int rc = gp_read_file(path, HUB_TOKEN_MAX, &data, NULL, err);
    if (rc) return gp_error_prefix(err, "Hugging Face token file: ");
    if (*trim(data)) {
        *out = data;
    } else {
        free(data);
    }
    return GEPARD_OK;
}

int gp_hub_token(const gp_hub_options *opts, char **out, gp_error *err) {
    *out = NULL;
    char *token = NULL;
    const char *origin = "HF_TOKEN";
    if (opts && opts->token) {
        if (!*opts->token) return GEPARD_OK;
        token = strdup(opts->token);
        origin = "the token option";
    } else if (env_value("HF_TOKEN")) {
        token = strdup(env_value("HF_TOKEN"));
    } else {
        const char *path = env_value("HF_TOKEN_PATH");
        char *owned = NULL;
        if (path) {
            owned = expand_user(path);
        } else {
            char *home = hf_home();
            owned = home ? gp_path_join(home, "token") : NULL;
            free(home);
        }
        if (!owned) return GEPARD_OK; /* no home: no token file */
        int rc = read_token_file(owned, &token, err);
        free(owned);
        if (rc || !token) return rc;
        origin = "the token file";
    }
    if (!token) return gp_fail_oom(err, "token", 64);
    trim(token);
    for (const char *p = token; *p; p++) {
        if ((unsigned char)*p <= ' ' || (unsigned char)*p >= 0x7f) {
            free(token);
            return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT,
                           "the Hugging Face token from %s contains spaces or control characters "
                           "— copy it again from https://huggingface.co/settings/tokens",
                           origin);
        }
    }
    if (!*token) {
        free(token);
        return GEPARD_OK;
    }
    *out = token;
    return GEPARD_OK;
}

bool gp_hub_is_offline(const gp_hub_options *opts) {
    if (opts && opts->offline) return true;
    const char *v = env_value("HF_HUB_OFFLINE");
    if (!v) return false;
    static const char *yes[] = {"1", "on", "yes", "true"};
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++)
        if (strcasecmp(v, yes[i]) == 0) return true;
    return false;
}

static bool repo_char_ok(char c) {
    return isalnum((unsigned char)c) || c == '-' || c == '_' || c == '.';
}

/* One half of org/name: [\w.-]+ beginning and ending with [\w]. */
static bool repo_part_ok(const char *s, size_t n) {
    if (n == 0) return false;
    for (size_t i = 0; i < n; i++)
        if (!repo_char_ok(s[i])) return false;
    return s[0] != '.' && s[0] != '-' && s[n - 1] != '.' && s[n - 1] != '-';
}

int gp_hub_validate_repo_id(const char *repo_id, gp_error *err) {
    const char *slash = repo_id ? strchr(repo_id, '/') : NULL;
    size_t n = repo_id ? strlen(repo_id) : 0;
    bool ok = slash && n <= 96 && repo_part_ok(repo_id, (size_t)(slash - repo_id)) &&
              repo_part_ok(slash + 1, n - (size_t)(slash - repo_id) - 1) &&
              !strstr(repo_id, "..") && !strstr(repo_id, "--");
    if (ok) return GEPARD_OK;
    return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT,
                   "\"%.200s\" is not a Hugging Face repo id: expected org/name (letters, digits, "
                   "'-', '_', '.'; no \"..\" or \"--\"), e.g. nineninesix/gepard-1.0",
                   repo_id ? repo_id : "");
}

bool gp_hub_is_repo_id(const char *s) {
    return s && !gp_path_exists(s) && gp_hub_validate_repo_id(s, NULL) == GEPARD_OK;
}

bool gp_hub_is_commit(const char *revision) {
    if (!revision || strlen(revision) != GP_HUB_COMMIT_LEN) return false;
    for (const char *p = revision; *p; p++)
        if (!isdigit((unsigned char)*p) && !(*p >= 'a' && *p <= 'f')) return false;
    return true;
}

int gp_hub_validate_revision(const char *revision, gp_error *err) {
    size_t n = strlen(revision);
    bool ok = n > 0 && n <= 255 && revision[0] != '/' && revision[0] != '.' &&
              revision[n - 1] != '/' && !strstr(revision, "..") && !strstr(revision, "//");
    for (const char *p = revision; ok && *p; p++)
        ok = isalnum((unsigned char)*p) || strchr("-_./+", *p);
    if (ok) return GEPARD_OK;
    return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT,
                   "\"%.200s\" is not a usable revision: give a branch, a tag or a 40-digit "
                   "commit hash (letters, digits, '-', '_', '.', '/')",
                   revision);
}

int gp_hub_validate_filename(const char *filename, gp_error *err) {
    size_t n = strlen(filename);
    bool ok = n > 0 && n <= 1024 && filename[0] != '/';
    for (const char *p = filename; ok && *p; p++)
        ok = (unsigned char)*p >= ' ' && *p != 0x7f && *p != '\\';
    /* Every component non-empty and neither "." nor "..". */
    for (const char *c = filename; ok && *c;) {
        const char *end = strchr(c, '/');
        size_t len = end ? (size_t)(end - c) : strlen(c);
        ok = len > 0 && !(len == 1 && c[0] == '.') && !(len == 2 && c[0] == '.' && c[1] == '.');
        if (ok && end && !end[1]) ok = false;
        c = end ? end + 1 : c + len;
    }
    if (ok) return GEPARD_OK;
    return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT,
                   "\"%.200s\" is not a usable file name inside a repo: expected a relative path "
                   "without \"..\", \".\" or empty parts",
                   filename);
}

/* Percent-encode everything but RFC 3986 unreserved characters (and '/'
 * when keep_slash). */
static int append_escaped(gp_buf *b, const char *s, bool keep_slash) {
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        int rc = isalnum(*p) || strchr("-._~", *p) || (keep_slash && *p == '/')
                     ? gp_buf_append(b, p, 1)
                     : gp_buf_printf(b, "%%%02X", *p);
        if (rc) return rc;
    }
    return 0;
}

char *gp_hub_resolve_url(const gp_hub_ctx *ctx, const char *revision, const char *filename) {
    gp_buf b;
    gp_buf_init(&b);
    int rc = gp_buf_printf(&b, "%s/%s/resolve/", ctx->endpoint, ctx->repo_id);
    if (!rc) rc = append_escaped(&b, revision, false);
    if (!rc) rc = gp_buf_append_str(&b, "/");
    if (!rc) rc = append_escaped(&b, filename, true);
    if (rc) {
        gp_buf_free(&b);
        return NULL;
    }
    return gp_buf_detach(&b, NULL);
}

void gp_hub_url_origin(const char *url, char *out, size_t out_size) {
    const char *host = strstr(url, "://");
    host = host ? host + 3 : url;
    size_t n = strcspn(host, "/?#");
    snprintf(out, out_size, "%.*s", (int)((size_t)(host - url) + n), url);
}

void gp_hub_format_bytes(uint64_t bytes, char *out, size_t out_size) {
    if (bytes < 1000)
        snprintf(out, out_size, "%llu B", (unsigned long long)bytes);
    else if (bytes < 1000000)
        snprintf(out, out_size, "%.1f kB", (double)bytes / 1e3);
    else if (bytes < 1000000000)
        snprintf(out, out_size, "%.1f MB", (double)bytes / 1e6);
    else
        snprintf(out, out_size, "%.2f GB", (double)bytes / 1e9);
}
