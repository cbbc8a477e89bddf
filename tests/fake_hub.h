/* fake_hub.h — a local imitation of the Hugging Face Hub for the Hub
 * client's tests, run inside the test process on 127.0.0.1 (libmicrohttpd,
 * its own polling thread).
 *
 * It answers HEAD/GET /{org}/{name}/resolve/{revision}/{path} the way the
 * Hub does: X-Repo-Commit, ETag (git files) or X-Linked-Etag/X-Linked-Size
 * plus a 302 to a "CDN" URL on another host name (localhost) for LFS files,
 * Range requests (206/416), 401/403 for a gated repo without the right
 * token, 404 with X-Error-Code for a missing repo, revision or file. Knobs
 * make it misbehave: cut the connection after N body bytes, ignore Range,
 * announce a wrong size, corrupt LFS bodies, keep the CDN redirect from HEAD.
 *
 * Content:
 *   acme/tiny   main = FAKE_HUB_MAIN, v1 and refs/pr/1 = FAKE_HUB_OLD
 *     gepard_config.json, tokenizer.json (git files; differ between the commits)
 *     model.safetensors (LFS, FAKE_HUB_MODEL_SIZE bytes), nested/dir/extra.bin (LFS)
 *     (no config.json, no tokenizer_config.json)
 *   acme/gated  main = FAKE_HUB_GATED, needs "Authorization: Bearer hf_good"
 *     gepard_config.json, model.safetensors (LFS)
 *   FAKE_HUB_MODEL_REPO, FAKE_HUB_CODEC_REPO: the shared fixtures model-tiny/model
 *     and codec-tiny/nano-tiny.nemo, so `gepard say` can run from the fake Hub
 */
#ifndef GEPARD_TEST_FAKE_HUB_H
#define GEPARD_TEST_FAKE_HUB_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FAKE_HUB_MAIN "1111111111111111111111111111111111111111"
#define FAKE_HUB_OLD "2222222222222222222222222222222222222222"
#define FAKE_HUB_GATED "3333333333333333333333333333333333333333"
#define FAKE_HUB_TOKEN "hf_good"
#define FAKE_HUB_MODEL_REPO "nineninesix/gepard-tiny"
#define FAKE_HUB_MODEL_COMMIT "4444444444444444444444444444444444444444"
#define FAKE_HUB_CODEC_REPO "nvidia/nano-tiny"
#define FAKE_HUB_CODEC_COMMIT "5555555555555555555555555555555555555555"
#define FAKE_HUB_MODEL_SIZE 300000

typedef struct fake_hub {
    struct MHD_Daemon *daemon;
    int port;
    char endpoint[64]; /* http://127.0.0.1:PORT */
    /* knobs (set before the request that should see them) */
    atomic_long cut_after;        /* >0: drop the connection after this many body bytes */
    atomic_bool ignore_range;     /* answer 200 with the whole body to Range requests */
    atomic_long size_delta;       /* added to the announced X-Linked-Size */
    atomic_bool corrupt;          /* flip one byte of every LFS body */
    atomic_bool head_no_redirect; /* HEAD of an LFS file: 200 with the metadata, so
                                     only the GET meets the redirect to the CDN */
    /* what the server saw */
    atomic_int requests, heads, gets, cdn_gets;
    atomic_int cdn_auth;     /* CDN requests that carried an Authorization header */
    atomic_int resolve_auth; /* resolve requests that carried one */
    pthread_mutex_t lock;
    char last_range[64]; /* Range header of the last GET ("" if none) */
} fake_hub;

/* Start on an ephemeral port; 0 on success. */
int fake_hub_start(fake_hub *hub);
/* Stop the server (safe to call twice); its port then refuses connections. */
void fake_hub_stop(fake_hub *hub);
/* The last GET's Range header, copied into out. */
void fake_hub_last_range(fake_hub *hub, char *out, size_t size);

/* The content the fake serves (for comparisons): NULL if it has no such
 * file at that commit. */
const unsigned char *fake_hub_content(const char *commit, const char *path, size_t *len);
/* The name the fake gives a file's blob (sha256 for LFS, else a 40-hex id). */
const char *fake_hub_etag(const char *commit, const char *path);

#endif
