/* hub_http.c — the Hub client's two requests over libcurl: a HEAD that reads
 * a file's metadata (commit, etag, size) from the response headers, and a
 * resumable GET into an open file that follows the Hub's redirect to its
 * CDN without handing the token to another host. Both have a connect
 * timeout and a low-speed limit, so a dead server never hangs a caller; all
 * failures become messages that say what to do (see hub.h).
 */
#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "io/hub_internal.h"

#define HUB_MAX_REDIRECTS 5
#define HUB_CONNECT_TIMEOUT_S 10
#define HUB_STALL_TIMEOUT_S 30
#define HUB_STALL_BYTES_PER_S 1024

/* Response headers as they arrive; reset at every status line. */
typedef struct header_state {
    long status;
    char commit[GP_HUB_COMMIT_LEN + 1];
    char linked_etag[GP_HUB_ETAG_MAX + 1];
    char etag[GP_HUB_ETAG_MAX + 1];
    bool has_linked_etag, has_etag, linked_etag_bad, etag_bad;
    int64_t linked_size, content_length;
    int64_t range_start; /* first byte of Content-Range, -1 */
    bool location_relative;
    char error_code[64];
} header_state;

static void header_state_reset(header_state *h) {
    memset(h, 0, sizeof *h);
    h->linked_size = h->content_length = h->range_start = -1;
}

static bool header_is(const char *name, size_t len, const char *want) {
    return strlen(want) == len && strncasecmp(name, want, len) == 0;
}

static int64_t parse_size(const char *v) {
    if (!isdigit((unsigned char)*v)) return -1;
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    return errno || *end ? -1 : (int64_t)x;
}

/* The leading decimal number of "123-456/789" (-1 if none). */
static int64_t parse_size_prefix(const char *v) {
    char digits[24];
    size_t n = 0;
    while (n < sizeof digits - 1 && isdigit((unsigned char)v[n])) digits[n] = v[n], n++;
    digits[n] = '\0';
    return n && v[n] == '-' ? parse_size(digits) : -1;
}

/* Strip W/ and quotes; false when the result is unusable as a file name. */
static bool normalize_etag(const char *v, char out[GP_HUB_ETAG_MAX + 1]) {
    out[0] = '\0';
    if (strncmp(v, "W/", 2) == 0) v += 2;
    size_t n = strlen(v);
    if (n >= 2 && v[0] == '"' && v[n - 1] == '"') {
        v++;
        n -= 2;
    }
    if (n == 0 || n > GP_HUB_ETAG_MAX || v[0] == '.') return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)v[i]) && v[i] != '-' && v[i] != '_' && v[i] != '.')
            return false;
    memcpy(out, v, n);
    out[n] = '\0';
    return true;
}

static size_t on_header(char *buf, size_t size, size_t count, void *user) {
    header_state *h = user;
    size_t len = size * count;
    if (len >= 5 && strncmp(buf, "HTTP/", 5) == 0) {
        header_state_reset(h);
        return len;
    }
    const char *colon = memchr(buf, ':', len);
    if (!colon) return len;
    size_t name_len = (size_t)(colon - buf);
    const char *v = colon + 1;
    size_t vlen = len - name_len - 1;
    while (vlen && (*v == ' ' || *v == '\t')) v++, vlen--;
    while (vlen && isspace((unsigned char)v[vlen - 1])) vlen--;
    char value[512];
    if (vlen >= sizeof value) vlen = sizeof value - 1; /* longer values are never valid */
    memcpy(value, v, vlen);
    value[vlen] = '\0';
    if (header_is(buf, name_len, "x-repo-commit")) {
        if (gp_hub_is_commit(value)) memcpy(h->commit, value, GP_HUB_COMMIT_LEN + 1);
    } else if (header_is(buf, name_len, "x-linked-etag")) {
        h->has_linked_etag = true;
        h->linked_etag_bad = !normalize_etag(value, h->linked_etag);
    } else if (header_is(buf, name_len, "etag")) {
        h->has_etag = true;
        h->etag_bad = !normalize_etag(value, h->etag);
    } else if (header_is(buf, name_len, "x-linked-size")) {
        h->linked_size = parse_size(value);
    } else if (header_is(buf, name_len, "content-length")) {
        h->content_length = parse_size(value);
    } else if (header_is(buf, name_len, "content-range")) {
        if (strncasecmp(value, "bytes ", 6) == 0) h->range_start = parse_size_prefix(value + 6);
    } else if (header_is(buf, name_len, "location")) {
        h->location_relative = value[0] == '/' && value[1] != '/';
    } else if (header_is(buf, name_len, "x-error-code")) {
        snprintf(h->error_code, sizeof h->error_code, "%s", value);
    }
    return len;
}

/* The metadata a HEAD (or an error response) carries. */
static void header_state_to_meta(const header_state *h, gp_hub_meta *m) {
    memset(m, 0, sizeof *m);
    m->status = h->status;
    memcpy(m->commit, h->commit, sizeof m->commit);
    if (h->has_linked_etag) {
        memcpy(m->etag, h->linked_etag, sizeof m->etag);
        m->etag_bad = h->linked_etag_bad;
    } else if (h->has_etag) {
        memcpy(m->etag, h->etag, sizeof m->etag);
        m->etag_bad = h->etag_bad;
    }
    /* A redirect's Content-Length is the length of the redirect page. */
    m->size = h->linked_size >= 0                   ? h->linked_size
              : h->status >= 200 && h->status < 300 ? h->content_length
                                                    : -1;
    memcpy(m->error_code, h->error_code, sizeof m->error_code);
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_status;

static void curl_init_once(void) { curl_init_status = curl_global_init(CURL_GLOBAL_DEFAULT); }

/* The context's easy handle, reset to defaults (connections are kept). */
static int get_handle(gp_hub_ctx *ctx, CURL **out, gp_error *err) {
    pthread_once(&curl_once, curl_init_once);
    if (curl_init_status != CURLE_OK)
        return gp_fail(err, GEPARD_ERR_NETWORK, "cannot initialise libcurl: %s",
                       curl_easy_strerror(curl_init_status));
    if (ctx->curl)
        curl_easy_reset(ctx->curl);
    else
        ctx->curl = curl_easy_init();
    if (!ctx->curl) return gp_fail_oom(err, "an HTTP client", 0);
    *out = ctx->curl;
    return GEPARD_OK;
}

void gp_hub_http_free(gp_hub_ctx *ctx) {
    if (ctx->curl) curl_easy_cleanup(ctx->curl);
    ctx->curl = NULL;
}

/* Same scheme, host and port. */
static bool same_origin(const char *a, const char *b) {
    CURLU *ua = curl_url(), *ub = curl_url();
    bool same = false;
    if (ua && ub && curl_url_set(ua, CURLUPART_URL, a, 0) == CURLUE_OK &&
        curl_url_set(ub, CURLUPART_URL, b, 0) == CURLUE_OK) {
        static const CURLUPart parts[] = {CURLUPART_SCHEME, CURLUPART_HOST, CURLUPART_PORT};
        same = true;
        for (size_t i = 0; i < 3 && same; i++) {
            char *pa = NULL, *pb = NULL;
            unsigned flags = parts[i] == CURLUPART_PORT ? CURLU_DEFAULT_PORT : 0;
            same = curl_url_get(ua, parts[i], &pa, flags) == CURLUE_OK &&
                   curl_url_get(ub, parts[i], &pb, flags) == CURLUE_OK && strcasecmp(pa, pb) == 0;
            curl_free(pa);
            curl_free(pb);
        }
    }
    curl_url_cleanup(ua);
    curl_url_cleanup(ub);
    return same;
}

/* Options every request shares. The token goes only to the endpoint's own
 * host: never to the CDN a redirect points at. */
static int setup_request(gp_hub_ctx *ctx, CURL *c, const char *url, header_state *h,
                         struct curl_slist **headers, char *errbuf, gp_error *err) {
    const gp_hub_options *o = ctx->opts;
    long connect_s = o && o->connect_timeout_s > 0 ? o->connect_timeout_s : HUB_CONNECT_TIMEOUT_S;
    long stall_s = o && o->stall_timeout_s > 0 ? o->stall_timeout_s : HUB_STALL_TIMEOUT_S;
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_USERAGENT, "gepard/" GEPARD_VERSION);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, connect_s);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, (long)HUB_STALL_BYTES_PER_S);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, stall_s);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, h);
    errbuf[0] = '\0';
    header_state_reset(h);
    *headers = NULL;
    if (ctx->token && same_origin(url, ctx->endpoint)) {
        char *line = malloc(strlen(ctx->token) + 32);
        if (!line) return gp_fail_oom(err, "a request header", strlen(ctx->token));
        snprintf(line, strlen(ctx->token) + 32, "Authorization: Bearer %s", ctx->token);
        *headers = curl_slist_append(NULL, line);
        free(line);
        if (!*headers) return gp_fail_oom(err, "a request header", 64);
    }
    return GEPARD_OK;
}

static const char *curl_reason(CURLcode res, const char *errbuf) {
    return errbuf[0] ? errbuf : curl_easy_strerror(res);
}

static bool is_redirect(long status) {
    return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

/* Replace *url by the response's redirect target. Returns 1 when there is
 * one, 0 when not, -1 (err set) when out of memory. */
static int take_redirect(CURL *c, char **url, gp_error *err) {
    char *next = NULL;
    if (curl_easy_getinfo(c, CURLINFO_REDIRECT_URL, &next) != CURLE_OK || !next) return 0;
    char *copy = strdup(next);
    if (!copy) {
        gp_fail_oom(err, "a URL", strlen(next));
        return -1;
    }
    free(*url);
    *url = copy;
    return 1;
}

int gp_hub_unreachable_error(const char *url, const char *reason, gp_error *err) {
    char origin[256];
    gp_hub_url_origin(url, origin, sizeof origin);
    return gp_fail(err, GEPARD_ERR_NETWORK,
                   "cannot reach %s: %s — check your connection, or download the files elsewhere "
                   "and pass a local directory with --model DIR, or set HF_HUB_OFFLINE=1 to use "
                   "the cache only",
                   origin, reason);
}

int gp_hub_http_head(gp_hub_ctx *ctx, const char *url, gp_hub_meta *meta, gp_error *err) {
    memset(meta, 0, sizeof *meta);
    char *current = strdup(url);
    if (!current) return gp_fail_oom(err, "a URL", strlen(url));
    header_state h;
    char errbuf[CURL_ERROR_SIZE];
    int rc = GEPARD_OK;
    for (int hop = 0;; hop++) {
        CURL *c = NULL;
        struct curl_slist *headers = NULL;
        rc = get_handle(ctx, &c, err);
        if (!rc) rc = setup_request(ctx, c, current, &h, &headers, errbuf, err);
        struct curl_slist *all =
            rc ? NULL : curl_slist_append(headers, "Accept-Encoding: identity");
        if (!rc && !all) rc = gp_fail_oom(err, "a request header", 64);
        if (all) headers = all;
        CURLcode res = CURLE_OK;
        if (!rc) {
            curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
            curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
            res = curl_easy_perform(c);
            if (res != CURLE_OK)
                rc = gp_hub_unreachable_error(current, curl_reason(res, errbuf), err);
        }
        curl_slist_free_all(headers);
        if (rc) break;
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &h.status);
        /* Follow same-host redirects (renamed repos); stop at the CDN's. */
        if (is_redirect(h.status) && h.location_relative && hop < HUB_MAX_REDIRECTS) {
            int moved = take_redirect(c, &current, err);
            if (moved < 0) {
                rc = err->code;
                break;
            }
            if (moved) continue;
        }
        char *next = NULL;
        header_state_to_meta(&h, meta);
        if (is_redirect(h.status) &&
            curl_easy_getinfo(c, CURLINFO_REDIRECT_URL, &next) == CURLE_OK && next &&
            strlen(next) < sizeof meta->location)
            memcpy(meta->location, next, strlen(next) + 1);
        break;
    }
    free(current);
    return rc;
}

/* One GET in progress. */
typedef struct get_state {
    gp_hub_ctx *ctx;
    CURL *curl;
    gp_hub_fetch *f;
    header_state h;
    bool started;     /* the body of a 200/206 began arriving */
    bool bad_range;   /* a 206 for bytes we did not ask for */
    int write_errno;  /* writing the file failed */
    int64_t received; /* body bytes written by this response */
    double t_start, t_drawn;
    bool drawn;
} get_state;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Decide what the first body byte of a 200/206 means for the file. */
static bool begin_body(get_state *s, long status) {
    gp_hub_fetch *f = s->f;
    s->started = true;
    if (status == 206) {
        s->bad_range = s->h.range_start != f->offset;
        return !s->bad_range;
    }
    if (f->offset > 0) { /* the server ignored the Range: start over */
        GP_INFO("%s: the server cannot resume; downloading it from the start", f->label);
        if (ftruncate(f->fd, 0) != 0 || lseek(f->fd, 0, SEEK_SET) != 0) {
            s->write_errno = errno;
            return false;
        }
        f->offset = 0;
        if (f->sha) gp_sha256_init(f->sha);
    }
    return true;
}

static size_t on_body(char *data, size_t size, size_t count, void *user) {
    get_state *s = user;
    gp_hub_fetch *f = s->f;
    size_t len = size * count;
    long status = 0;
    curl_easy_getinfo(s->curl, CURLINFO_RESPONSE_CODE, &status);
    if (status != 200 && status != 206) return len; /* a redirect or error page */
    if (!s->started && !begin_body(s, status)) return 0;
    if (f->expected >= 0 && (uint64_t)(f->offset + s->received) + len > (uint64_t)f->expected) {
        f->corrupt = true;
        return 0;
    }
    for (size_t done = 0; done < len;) {
        ssize_t w = write(f->fd, data + done, len - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            s->write_errno = w < 0 ? errno : EIO;
            return 0;
        }
        done += (size_t)w;
    }
    if (f->sha) gp_sha256_update(f->sha, data, len);
    s->received += (int64_t)len;
    return len;
}

/* Redraw "file  [#####     ]  45%  512.0 MB / 1.13 GB  23.1 MB/s". */
static void draw_bar(get_state *s, uint64_t done, uint64_t total, bool final) {
    double t = now_s();
    if (!final && t - s->t_drawn < 0.1) return;
    s->t_drawn = t;
    s->drawn = true;
    char done_s[32], total_s[32], rate_s[32], bar[21];
    gp_hub_format_bytes(done, done_s, sizeof done_s);
    gp_hub_format_bytes(total, total_s, sizeof total_s);
    double elapsed = t - s->t_start;
    gp_hub_format_bytes(elapsed > 0 ? (uint64_t)((double)s->received / elapsed) : 0, rate_s,
                        sizeof rate_s);
    int pct = total ? (int)(done * 100 / total) : 0, fill = pct / 5;
    for (int i = 0; i < 20; i++) bar[i] = i < fill ? '#' : ' ';
    bar[20] = '\0';
    if (total)
        gp_progress("%-28.28s [%s] %3d%%  %s / %s  %s/s", s->f->label, bar, pct, done_s, total_s,
                    rate_s);
    else
        gp_progress("%-28.28s %s  %s/s", s->f->label, done_s, rate_s);
}

static int on_progress(void *user, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow) {
    (void)dlnow;
    (void)ultotal;
    (void)ulnow;
    get_state *s = user;
    if (!s->started) return 0;
    const gp_hub_options *o = s->ctx->opts;
    gp_hub_fetch *f = s->f;
    uint64_t done = (uint64_t)(f->offset + s->received);
    uint64_t total = f->expected >= 0 ? (uint64_t)f->expected
                     : dltotal > 0    ? (uint64_t)f->offset + (uint64_t)dltotal
                                      : 0;
    if (o && o->progress) o->progress(f->label, done, total, o->progress_user);
    if (o && o->progress_bar && gp_progress_enabled()) draw_bar(s, done, total, false);
    return 0;
}

/* GET `url` and the redirects it leads to; *res and s->h describe the
 * last response. */
static int get_follow(get_state *s, const char *url, CURLcode *res, char *errbuf, char **final_url,
                      gp_error *err) {
    gp_hub_fetch *f = s->f;
    char *current = strdup(url);
    if (!current) return gp_fail_oom(err, "a URL", strlen(url));
    int rc = GEPARD_OK;
    for (int hop = 0;; hop++) {
        struct curl_slist *headers = NULL;
        rc = get_handle(s->ctx, &s->curl, err);
        if (!rc) rc = setup_request(s->ctx, s->curl, current, &s->h, &headers, errbuf, err);
        if (rc) break;
        CURL *c = s->curl;
        char range[48];
        snprintf(range, sizeof range, "%" PRId64 "-", f->offset);
        if (f->offset > 0) curl_easy_setopt(c, CURLOPT_RANGE, range);
        curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, s);
        curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
        curl_easy_setopt(c, CURLOPT_XFERINFODATA, s);
        curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
        s->started = false;
        s->received = 0;
        *res = curl_easy_perform(c);
        curl_slist_free_all(headers);
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &s->h.status);
        if (*res == CURLE_OK && is_redirect(s->h.status) && hop < HUB_MAX_REDIRECTS) {
            int moved = take_redirect(c, &current, err);
            if (moved < 0) {
                rc = err->code;
                break;
            }
            if (moved) continue;
        }
        break;
    }
    if (rc) {
        free(current);
        current = NULL;
    }
    *final_url = current;
    return rc;
}

/* Start the file over (the server cannot continue our partial copy). */
static int restart_file(gp_hub_fetch *f) {
    if (ftruncate(f->fd, 0) != 0 || lseek(f->fd, 0, SEEK_SET) != 0) return -1;
    f->offset = 0;
    if (f->sha) gp_sha256_init(f->sha);
    return 0;
}

static bool connect_failure(CURLcode res) {
    return res == CURLE_COULDNT_RESOLVE_HOST || res == CURLE_COULDNT_RESOLVE_PROXY ||
           res == CURLE_COULDNT_CONNECT || res == CURLE_SSL_CONNECT_ERROR ||
           res == CURLE_PEER_FAILED_VERIFICATION;
}

/* Turn the outcome of a finished GET into a status and message. */
static int get_outcome(get_state *s, CURLcode res, const char *errbuf, const char *url,
                       gp_error *err) {
    gp_hub_fetch *f = s->f;
    char done_s[32], total_s[32];
    gp_hub_format_bytes((uint64_t)f->size, done_s, sizeof done_s);
    if (f->expected >= 0)
        gp_hub_format_bytes((uint64_t)f->expected, total_s, sizeof total_s);
    else
        snprintf(total_s, sizeof total_s, "an unknown size");
    if (s->write_errno == ENOSPC || s->write_errno == EDQUOT)
        return gp_fail(err, GEPARD_ERR_IO,
                       "no space left on the disk holding %s while downloading %s (%s of %s "
                       "written) — free some space or set HF_HUB_CACHE to a larger disk, then "
                       "run again: the download resumes where it stopped",
                       s->ctx->cache_dir, f->label, done_s, total_s);
    if (s->write_errno)
        return gp_fail(err, GEPARD_ERR_IO, "%s: cannot write the download into %s: %s", f->label,
                       s->ctx->cache_dir, strerror(s->write_errno));
    if (f->corrupt)
        return gp_fail(err, GEPARD_ERR_FORMAT,
                       "%s: the server sent more than the announced %s — the partial "
                       "download was deleted; run again",
                       f->label, total_s);
    if (res != CURLE_OK && connect_failure(res))
        return gp_hub_unreachable_error(url, curl_reason(res, errbuf), err);
    if (res != CURLE_OK)
        return gp_fail(err, GEPARD_ERR_NETWORK,
                       "download of %s was interrupted after %s of %s (%s) — run the same "
                       "command again to resume it",
                       f->label, done_s, total_s, curl_reason(res, errbuf));
    if (f->status == 200 || f->status == 206) return GEPARD_OK;
    if (!same_origin(url, s->ctx->endpoint)) {
        char origin[256];
        gp_hub_url_origin(url, origin, sizeof origin);
        return gp_fail(err, GEPARD_ERR_NETWORK,
                       "the download server %s answered HTTP %ld for %s — try again later", origin,
                       f->status, f->label);
    }
    gp_hub_meta meta;
    header_state_to_meta(&s->h, &meta);
    return gp_hub_status_error(s->ctx, f->revision, f->label, &meta, err);
}

int gp_hub_http_get(gp_hub_ctx *ctx, const char *url, gp_hub_fetch *f, gp_error *err) {
    get_state s;
    memset(&s, 0, sizeof s);
    s.ctx = ctx;
    s.f = f;
    s.t_start = now_s();
    f->status = 0;
    f->corrupt = false;
    char errbuf[CURL_ERROR_SIZE];
    char *final_url = NULL;
    CURLcode res = CURLE_OK;
    for (int attempt = 0;; attempt++) {
        free(final_url);
        int rc = get_follow(&s, url, &res, errbuf, &final_url, err);
        if (rc) return rc;
        /* 416, or a 206 for other bytes: our partial copy does not fit what
         * the server has; start over once. */
        bool misfit = res == CURLE_OK && s.h.status == 416;
        if ((misfit || s.bad_range) && f->offset > 0 && attempt == 0) {
            s.bad_range = false;
            if (restart_file(f) == 0) continue;
            s.write_errno = errno;
        }
        break;
    }
    f->status = s.h.status;
    if (res == CURLE_OK && !s.started && (f->status == 200 || f->status == 206))
        begin_body(&s, f->status); /* an empty body */
    if (s.bad_range) res = CURLE_RANGE_ERROR;
    f->size = f->offset + s.received;
    if (s.drawn) {
        draw_bar(&s, (uint64_t)f->size, f->expected >= 0 ? (uint64_t)f->expected : 0, true);
        gp_progress_done();
    }
    int rc = get_outcome(&s, res, errbuf, final_url, err);
    free(final_url);
    return rc;
}

int gp_hub_status_error(const gp_hub_ctx *ctx, const char *revision, const char *filename,
                        const gp_hub_meta *meta, gp_error *err) {
    const char *rev = revision ? revision : "main";
    const char *code = meta->error_code;
    long status = meta->status;
    const char *no_token = ctx->token ? "the token that was sent has no access to it"
                                      : "no token was found (HF_TOKEN, HF_TOKEN_PATH or "
                                        "~/.cache/huggingface/token)";
    if ((status == 401 || status == 403) && strcmp(code, "RepoNotFound") == 0)
        return gp_fail(err, GEPARD_ERR_AUTH,
                       "repository %s not found, or it is gated or private: check the name; if it "
                       "is gated or private, accept its licence at %s/%s and set HF_TOKEN (%s)",
                       ctx->repo_id, ctx->endpoint, ctx->repo_id, no_token);
    if (status == 401 || status == 403)
        return gp_fail(err, GEPARD_ERR_AUTH,
                       "%s is gated or private (HTTP %ld): accept its licence at %s/%s and set "
                       "HF_TOKEN to a token with read access (%s)",
                       ctx->repo_id, status, ctx->endpoint, ctx->repo_id, no_token);
    if (status == 404 && strcmp(code, "EntryNotFound") == 0)
        return gp_fail(err, GEPARD_ERR_NOT_FOUND,
                       "file %s not found in %s at revision %s — check the name and --revision",
                       filename, ctx->repo_id, rev);
    if (status == 404 && strcmp(code, "RevisionNotFound") == 0)
        return gp_fail(err, GEPARD_ERR_NOT_FOUND,
                       "revision %s not found in %s — check --revision (a branch, tag or commit)",
                       rev, ctx->repo_id);
    if (status == 404)
        return gp_fail(err, GEPARD_ERR_NOT_FOUND,
                       "repository or file not found: %s, file %s, revision %s — check the name "
                       "and --revision",
                       ctx->repo_id, filename, rev);
    if (status == 429)
        return gp_fail(err, GEPARD_ERR_NETWORK,
                       "%s is limiting the rate of requests (HTTP 429) — wait a minute and try "
                       "again; setting HF_TOKEN raises the limit",
                       ctx->endpoint);
    if (status >= 500)
        return gp_fail(err, GEPARD_ERR_NETWORK,
                       "%s answered HTTP %ld for %s of %s — the Hub may be having problems; try "
                       "again later",
                       ctx->endpoint, status, filename, ctx->repo_id);
    return gp_fail(err, GEPARD_ERR_NETWORK,
                   "%s answered HTTP %ld for %s of %s, which this client does not expect — try "
                   "again, or download the files elsewhere and pass --model DIR",
                   ctx->endpoint, status, filename, ctx->repo_id);
}
