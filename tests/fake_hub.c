/* fake_hub.c — the local Hugging Face Hub imitation the Hub tests talk to
 * (see fake_hub.h for what it serves and how it can misbehave). */
#include "fake_hub.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "io/sha256.h"
#include "test.h"

typedef struct fake_file {
    const char *commit;
    const char *path;
    unsigned char *data;
    size_t len;
    bool lfs;
    char etag[65];
} fake_file;

typedef struct fake_repo {
    const char *id;
    const char *branches[3][2]; /* {name, commit} */
    bool gated;
} fake_repo;

static const fake_repo fake_repos[] = {
    {"acme/tiny", {{"main", FAKE_HUB_MAIN}, {"v1", FAKE_HUB_OLD}, {"refs/pr/1", FAKE_HUB_OLD}}, 0},
    {"acme/gated", {{"main", FAKE_HUB_GATED}, {NULL, NULL}, {NULL, NULL}}, 1},
    {FAKE_HUB_MODEL_REPO, {{"main", FAKE_HUB_MODEL_COMMIT}, {NULL, NULL}, {NULL, NULL}}, 0},
    {FAKE_HUB_CODEC_REPO, {{"main", FAKE_HUB_CODEC_COMMIT}, {NULL, NULL}, {NULL, NULL}}, 0},
};

#define MAX_FILES 32
static fake_file files[MAX_FILES];
static int n_files;

static void add_file(const char *commit, const char *path, const void *data, size_t len, bool lfs) {
    fake_file *f = &files[n_files++];
    f->commit = commit;
    f->path = path;
    f->data = malloc(len ? len : 1);
    memcpy(f->data, data, len);
    f->len = len;
    f->lfs = lfs;
    gp_sha256_hex(data, len, f->etag);
    if (!lfs) f->etag[40] = '\0'; /* stands in for a git blob id */
}

static void make_content(void) {
    if (n_files) return;
    static const char new_cfg[] = "{\"name\":\"tiny\",\"version\":2}\n";
    static const char old_cfg[] = "{\"name\":\"tiny\",\"version\":1}\n";
    static const char tok[] = "{\"model\":{\"type\":\"BPE\"}}\n";
    unsigned char *model = malloc(FAKE_HUB_MODEL_SIZE);
    uint32_t x = 12345;
    for (size_t i = 0; i < FAKE_HUB_MODEL_SIZE; i++) {
        x = x * 1664525u + 1013904223u;
        model[i] = (unsigned char)(x >> 24);
    }
    const char *commits[] = {FAKE_HUB_MAIN, FAKE_HUB_OLD};
    for (int c = 0; c < 2; c++) {
        const char *cfg = c == 0 ? new_cfg : old_cfg;
        add_file(commits[c], "gepard_config.json", cfg, strlen(cfg), false);
        add_file(commits[c], "tokenizer.json", tok, strlen(tok), false);
        add_file(commits[c], "model.safetensors", model, FAKE_HUB_MODEL_SIZE, true);
    }
    add_file(FAKE_HUB_MAIN, "nested/dir/extra.bin", model + 1000, 5000, true);
    add_file(FAKE_HUB_GATED, "gepard_config.json", new_cfg, strlen(new_cfg), false);
    add_file(FAKE_HUB_GATED, "model.safetensors", model + 7, 4096, true);
    free(model);
    /* The real fixture files, so a whole synthesis can run from the fake Hub. */
    static const struct {
        const char *commit, *path, *fixture;
        bool lfs;
    } real[] = {
        {FAKE_HUB_MODEL_COMMIT, "gepard_config.json", "model-tiny/model/gepard_config.json", false},
        {FAKE_HUB_MODEL_COMMIT, "config.json", "model-tiny/model/config.json", false},
        {FAKE_HUB_MODEL_COMMIT, "tokenizer.json", "model-tiny/model/tokenizer.json", false},
        {FAKE_HUB_MODEL_COMMIT, "tokenizer_config.json", "model-tiny/model/tokenizer_config.json",
         false},
        {FAKE_HUB_MODEL_COMMIT, "model.safetensors", "model-tiny/model/model.safetensors", true},
        {FAKE_HUB_CODEC_COMMIT, "nano-tiny.nemo", "codec-tiny/nano-tiny.nemo", true},
    };
    for (size_t i = 0; i < sizeof real / sizeof real[0]; i++) {
        FILE *fp = fopen(test_fixture(real[i].fixture), "rb");
        if (!fp) continue;
        fseek(fp, 0, SEEK_END);
        long size = ftell(fp);
        fseek(fp, 0, SEEK_SET);
        unsigned char *data = malloc((size_t)size + 1);
        if (data && fread(data, 1, (size_t)size, fp) == (size_t)size)
            add_file(real[i].commit, real[i].path, data, (size_t)size, real[i].lfs);
        free(data);
        fclose(fp);
    }
}

static const fake_file *find_file(const char *commit, const char *path) {
    for (int i = 0; i < n_files; i++)
        if (strcmp(files[i].commit, commit) == 0 && strcmp(files[i].path, path) == 0)
            return &files[i];
    return NULL;
}

const unsigned char *fake_hub_content(const char *commit, const char *path, size_t *len) {
    make_content();
    const fake_file *f = find_file(commit, path);
    if (len) *len = f ? f->len : 0;
    return f ? f->data : NULL;
}

const char *fake_hub_etag(const char *commit, const char *path) {
    make_content();
    const fake_file *f = find_file(commit, path);
    return f ? f->etag : NULL;
}

/* Decode %XX in place. */
static void percent_decode(char *s) {
    char *out = s;
    for (; *s; s++) {
        unsigned v;
        if (s[0] == '%' && s[1] && s[2] && sscanf(s + 1, "%2x", &v) == 1) {
            *out++ = (char)v;
            s += 2;
        } else {
            *out++ = *s;
        }
    }
    *out = '\0';
}

/* ---- responses ---- */

typedef struct body_reader {
    const fake_file *file;
    size_t start, len; /* the slice sent */
    long cut;          /* >0: fail after this many bytes */
    bool corrupt;
} body_reader;

static ssize_t read_body(void *cls, uint64_t pos, char *buf, size_t max) {
    body_reader *r = cls;
    if (r->cut > 0 && pos >= (uint64_t)r->cut) return MHD_CONTENT_READER_END_WITH_ERROR;
    if (pos >= r->len) return MHD_CONTENT_READER_END_OF_STREAM;
    size_t n = r->len - (size_t)pos < max ? r->len - (size_t)pos : max;
    if (r->cut > 0 && pos + n > (uint64_t)r->cut) n = (size_t)r->cut - (size_t)pos;
    memcpy(buf, r->file->data + r->start + pos, n);
    /* Corrupt one byte in the middle of the file. */
    size_t mid = r->file->len / 2;
    if (r->corrupt && r->start + pos <= mid && mid < r->start + pos + n)
        buf[mid - r->start - pos] ^= 0x5a;
    return (ssize_t)n;
}

static enum MHD_Result queue(struct MHD_Connection *c, unsigned status, struct MHD_Response *r) {
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

static struct MHD_Response *text_response(const char *text) {
    return MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_MUST_COPY);
}

static enum MHD_Result error_response(struct MHD_Connection *c, unsigned status, const char *code,
                                      const char *commit) {
    struct MHD_Response *r = text_response(code);
    MHD_add_response_header(r, "X-Error-Code", code);
    if (commit) MHD_add_response_header(r, "X-Repo-Commit", commit);
    return queue(c, status, r);
}

/* The file's bytes, honouring Range (and the misbehaviour knobs). */
static enum MHD_Result send_body(fake_hub *hub, struct MHD_Connection *c, const fake_file *f,
                                 const char *commit) {
    const char *range = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Range");
    pthread_mutex_lock(&hub->lock);
    snprintf(hub->last_range, sizeof hub->last_range, "%s", range ? range : "");
    pthread_mutex_unlock(&hub->lock);
    unsigned long long from = 0;
    bool ranged = range && !hub->ignore_range && sscanf(range, "bytes=%llu-", &from) == 1;
    if (ranged && from >= f->len) {
        struct MHD_Response *r = text_response("");
        char cr[64];
        snprintf(cr, sizeof cr, "bytes */%zu", f->len);
        MHD_add_response_header(r, "Content-Range", cr);
        return queue(c, MHD_HTTP_RANGE_NOT_SATISFIABLE, r);
    }
    body_reader *br = calloc(1, sizeof *br);
    br->file = f;
    br->start = ranged ? (size_t)from : 0;
    br->len = f->len - br->start;
    br->cut = hub->cut_after;
    br->corrupt = f->lfs && hub->corrupt;
    struct MHD_Response *r = MHD_create_response_from_callback(br->len, 4096, read_body, br, free);
    if (commit) MHD_add_response_header(r, "X-Repo-Commit", commit);
    if (!f->lfs) {
        char etag[70];
        snprintf(etag, sizeof etag, "\"%s\"", f->etag);
        MHD_add_response_header(r, "ETag", etag);
    }
    if (ranged) {
        char cr[96];
        snprintf(cr, sizeof cr, "bytes %zu-%zu/%zu", br->start, f->len - 1, f->len);
        MHD_add_response_header(r, "Content-Range", cr);
    }
    return queue(c, ranged ? MHD_HTTP_PARTIAL_CONTENT : MHD_HTTP_OK, r);
}

/* GET /cdn/<sha256>?sig=... — the "CDN" host for LFS files. */
static enum MHD_Result serve_cdn(fake_hub *hub, struct MHD_Connection *c, const char *url) {
    hub->cdn_gets++;
    if (MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization")) hub->cdn_auth++;
    char sha[65] = "";
    sscanf(url, "/cdn/%64[0-9a-f]", sha);
    for (int i = 0; i < n_files; i++)
        if (files[i].lfs && strcmp(files[i].etag, sha) == 0) return send_body(hub, c, &files[i], 0);
    return error_response(c, MHD_HTTP_NOT_FOUND, "NoSuchKey", NULL);
}

/* A repo file: the Hub's metadata headers, a redirect for LFS files. */
static enum MHD_Result serve_file(fake_hub *hub, struct MHD_Connection *c, bool head,
                                  const char *commit, const fake_file *f) {
    if (!f->lfs) return send_body(hub, c, f, commit);
    struct MHD_Response *r = text_response(head ? "" : "Found. Redirecting");
    char location[200], etag[70], size[32];
    snprintf(location, sizeof location, "http://localhost:%d/cdn/%s?sig=abc", hub->port, f->etag);
    snprintf(etag, sizeof etag, "\"%s\"", f->etag);
    snprintf(size, sizeof size, "%lld", (long long)f->len + (long long)hub->size_delta);
    if (!(head && hub->head_no_redirect)) MHD_add_response_header(r, "Location", location);
    MHD_add_response_header(r, "X-Repo-Commit", commit);
    MHD_add_response_header(r, "X-Linked-Etag", etag);
    MHD_add_response_header(r, "X-Linked-Size", size);
    MHD_add_response_header(r, "ETag", "W/\"1f-redirect\"");
    return queue(c, head && hub->head_no_redirect ? MHD_HTTP_OK : MHD_HTTP_FOUND, r);
}

static enum MHD_Result serve_resolve(fake_hub *hub, struct MHD_Connection *c, bool head,
                                     const char *url) {
    /* /{org}/{name}/resolve/{rev}/{path} */
    char org[64], name[64], rev[128], path[256];
    if (sscanf(url, "/%63[^/]/%63[^/]/resolve/%127[^/]/%255s", org, name, rev, path) != 4)
        return error_response(c, MHD_HTTP_NOT_FOUND, "RepoNotFound", NULL);
    char repo_id[130];
    snprintf(repo_id, sizeof repo_id, "%s/%s", org, name);
    percent_decode(rev);
    percent_decode(path);
    const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (auth) hub->resolve_auth++;
    const fake_repo *repo = NULL;
    for (size_t i = 0; i < sizeof fake_repos / sizeof fake_repos[0]; i++)
        if (strcmp(fake_repos[i].id, repo_id) == 0) repo = &fake_repos[i];
    if (!repo) return error_response(c, MHD_HTTP_NOT_FOUND, "RepoNotFound", NULL);
    if (repo->gated && !auth) return error_response(c, MHD_HTTP_UNAUTHORIZED, "GatedRepo", NULL);
    if (repo->gated && strcmp(auth, "Bearer " FAKE_HUB_TOKEN) != 0)
        return error_response(c, MHD_HTTP_FORBIDDEN, "GatedRepo", NULL);
    const char *commit = NULL;
    for (int i = 0; i < 3 && repo->branches[i][0]; i++)
        if (strcmp(repo->branches[i][0], rev) == 0 || strcmp(repo->branches[i][1], rev) == 0)
            commit = repo->branches[i][1];
    if (!commit) return error_response(c, MHD_HTTP_NOT_FOUND, "RevisionNotFound", NULL);
    const fake_file *f = find_file(commit, path);
    if (!f) return error_response(c, MHD_HTTP_NOT_FOUND, "EntryNotFound", commit);
    return serve_file(hub, c, head, commit, f);
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *upload_data,
                              size_t *upload_size, void **state) {
    (void)version;
    (void)upload_data;
    (void)upload_size;
    static int first_call;
    if (!*state) { /* headers only so far; answer on the next call */
        *state = &first_call;
        return MHD_YES;
    }
    fake_hub *hub = cls;
    hub->requests++;
    bool head = strcmp(method, "HEAD") == 0;
    if (head)
        hub->heads++;
    else
        hub->gets++;
    if (!head && strcmp(method, "GET") != 0)
        return error_response(c, MHD_HTTP_METHOD_NOT_ALLOWED, "MethodNotAllowed", NULL);
    if (strncmp(url, "/cdn/", 5) == 0) return serve_cdn(hub, c, url);
    return serve_resolve(hub, c, head, url);
}

/* Keep %2F in revisions: the client must encode them, so we see them raw. */
static size_t keep_escapes(void *cls, struct MHD_Connection *c, char *s) {
    (void)cls;
    (void)c;
    return strlen(s);
}

int fake_hub_start(fake_hub *hub) {
    make_content();
    memset(hub, 0, sizeof *hub);
    pthread_mutex_init(&hub->lock, NULL);
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    hub->daemon =
        MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD, 0, NULL, NULL, handle, hub,
                         MHD_OPTION_SOCK_ADDR, &addr, MHD_OPTION_UNESCAPE_CALLBACK, keep_escapes,
                         NULL, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)10, MHD_OPTION_END);
    if (!hub->daemon) return -1;
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(hub->daemon, MHD_DAEMON_INFO_BIND_PORT);
    hub->port = info ? info->port : 0;
    snprintf(hub->endpoint, sizeof hub->endpoint, "http://127.0.0.1:%d", hub->port);
    return hub->port ? 0 : -1;
}

void fake_hub_stop(fake_hub *hub) {
    if (hub->daemon) MHD_stop_daemon(hub->daemon);
    hub->daemon = NULL;
}

void fake_hub_last_range(fake_hub *hub, char *out, size_t size) {
    pthread_mutex_lock(&hub->lock);
    snprintf(out, size, "%s", hub->last_range);
    pthread_mutex_unlock(&hub->lock);
}
