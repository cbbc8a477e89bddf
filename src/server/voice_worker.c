/* voice_worker.c — speaker prefixes from a request's ref_audio, computed on
 * one worker thread.
 *
 * Turning a clip into a speaker prefix runs the codec's encoder and the
 * voice compressor: up to seconds of CPU on the real model. On one of
 * libmicrohttpd's few threads that would stall every connection of that
 * thread, so a request with ref_audio hands the work to this thread (the
 * clips are encoded one at a time, as before) and suspends its connection;
 * the worker signals the request's wake when done. The task owns the
 * request's parsed JSON (the base64 strings point into it) while it waits
 * or runs, so a client that leaves meanwhile (gp_voice_task_abandon) costs
 * no blocking: a queued task is dropped at once, a running one is freed by
 * the worker when it finishes. At most GP_VOICE_QUEUE_MAX tasks wait; more
 * are refused with 429. At shutdown the queued tasks fail with 503.
 */
#include <stdlib.h>
#include <string.h>

#include "io/audio_memory.h"
#include "server/base64.h"
#include "server/server_internal.h"

struct gp_voice_task {
    gp_server *server;
    gp_server_backend backend;
    cJSON *json; /* owned while queued or running */
    int n;
    gp_voice_ref *refs; /* [n]: what to compute, and the results */
    gp_api_error error; /* the first failure */
    bool failed;
    /* server->lock */
    bool done, abandoned;
    gp_wake *wake;
    gp_voice_task *next;
};

/* One speaker prefix from base64 audio; fills `e` on failure. */
static int compute_voice(const gp_voice_task *t, gp_voice_ref *ref, gp_api_error *e) {
    gp_server *s = t->server;
    const gp_server_backend *b = &t->backend;
    gp_error err;
    gp_error_clear(&err);
    unsigned char *data = NULL;
    size_t n = 0;
    if (gp_base64_decode(ref->b64, ref->len, s->params.max_ref_audio_bytes, ref->param, &data, &n,
                         &err))
        return gp_http_fail(e, 400, ref->param, "invalid_ref_audio", "%s", err.message);
    gp_audio audio;
    int rc = gp_audio_read_memory(data, n, s->params.max_ref_audio_s, ref->param, &audio, &err);
    free(data);
    if (rc) return gp_http_fail(e, 400, ref->param, "invalid_ref_audio", "%s", err.message);
    gepard_status st = gepard_voice_from_audio(b->model, b->codec, audio.samples, audio.frames,
                                               audio.channels, audio.sample_rate, 0, &ref->voice);
    gp_audio_free(&audio);
    if (st == GEPARD_OK) return 0;
    if (st == GEPARD_ERR_INVALID_ARGUMENT || st == GEPARD_ERR_UNSUPPORTED)
        return gp_http_fail(e, 400, ref->param, "invalid_ref_audio", "%s: %s", ref->param,
                            gepard_last_error());
    gp_api_error_from_status(e, st, gepard_last_error());
    return -1;
}

static void task_free(gp_voice_task *t) {
    if (!t) return;
    for (int i = 0; i < t->n; i++) gepard_voice_free(t->refs[i].voice);
    free(t->refs);
    cJSON_Delete(t->json);
    free(t);
}

static void task_run(gp_voice_task *t) {
    for (int i = 0; i < t->n && !t->failed; i++)
        if (t->refs[i].b64 && compute_voice(t, &t->refs[i], &t->error)) t->failed = true;
}

/* Mark done and hand back (or free, if the request left). Lock held. */
static void task_complete_locked(gp_server *s, gp_voice_task *t) {
    t->done = true;
    if (t->abandoned)
        task_free(t);
    else
        gp_wake_signal(s, t->wake);
}

static void *worker_main(void *arg) {
    gp_server *s = arg;
    pthread_mutex_lock(&s->lock);
    for (;;) {
        while (!s->voice_queue && !s->voice_worker_stop)
            pthread_cond_wait(&s->voice_cond, &s->lock);
        if (s->voice_worker_stop) break;
        gp_voice_task *t = s->voice_queue;
        s->voice_queue = t->next;
        s->n_voice_queued--;
        pthread_mutex_unlock(&s->lock);
        task_run(t);
        pthread_mutex_lock(&s->lock);
        task_complete_locked(s, t);
    }
    while (s->voice_queue) { /* shutting down: fail what waits */
        gp_voice_task *t = s->voice_queue;
        s->voice_queue = t->next;
        s->n_voice_queued--;
        t->failed = true;
        gp_http_fail(&t->error, 503, NULL, "shutting_down", "the server is shutting down");
        task_complete_locked(s, t);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

int gp_voice_worker_start(gp_server *s) {
    if (pthread_create(&s->voice_worker, NULL, worker_main, s) != 0) return -1;
    s->voice_worker_started = true;
    return 0;
}

void gp_voice_worker_stop(gp_server *s) {
    if (!s->voice_worker_started) return;
    pthread_mutex_lock(&s->lock);
    s->voice_worker_stop = true;
    pthread_cond_broadcast(&s->voice_cond);
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->voice_worker, NULL);
    s->voice_worker_started = false;
}

gp_voice_task *gp_voice_task_submit(gp_server *s, const gp_server_backend *b, cJSON *json,
                                    const gp_voice_ref *refs, int n, gp_wake *wake,
                                    gp_api_error *e) {
    gp_voice_task *t = calloc(1, sizeof *t);
    gp_voice_ref *copy = calloc((size_t)n, sizeof *copy);
    if (!t || !copy) {
        free(t);
        free(copy);
        gp_http_fail(e, 500, NULL, "internal_error", "out of memory");
        return NULL;
    }
    memcpy(copy, refs, (size_t)n * sizeof *copy);
    for (int i = 0; i < n; i++) copy[i].voice = NULL;
    t->server = s;
    t->backend = *b;
    t->n = n;
    t->refs = copy;
    t->wake = wake;
    pthread_mutex_lock(&s->lock);
    bool full = s->n_voice_queued >= GP_VOICE_QUEUE_MAX, stopping = s->voice_worker_stop;
    if (!full && !stopping) {
        gp_voice_task **tail = &s->voice_queue;
        while (*tail) tail = &(*tail)->next;
        *tail = t;
        s->n_voice_queued++;
        t->json = json; /* from now on the task owns it */
        pthread_cond_signal(&s->voice_cond);
    }
    pthread_mutex_unlock(&s->lock);
    if (full || stopping) {
        free(copy);
        free(t);
        if (stopping) {
            gp_http_fail(e, 503, NULL, "shutting_down", "the server is shutting down");
        } else {
            gp_http_fail(e, 429, NULL, "server_busy",
                         "%d requests with ref_audio are already waiting for their voice to be "
                         "computed — try again shortly",
                         GP_VOICE_QUEUE_MAX);
            e->retry_after_s = 1;
        }
        return NULL;
    }
    return t;
}

bool gp_voice_task_done(gp_server *s, gp_voice_task *t) {
    pthread_mutex_lock(&s->lock);
    bool done = t->done;
    pthread_mutex_unlock(&s->lock);
    return done;
}

int gp_voice_task_finish(gp_voice_task *t, cJSON **json, gepard_voice **voices, gp_api_error *e) {
    *json = t->json;
    t->json = NULL;
    int rc = 0;
    if (t->failed) {
        *e = t->error;
        rc = -1;
    } else {
        for (int i = 0; i < t->n; i++) {
            voices[i] = t->refs[i].voice;
            t->refs[i].voice = NULL;
        }
    }
    task_free(t);
    return rc;
}

void gp_voice_task_abandon(gp_server *s, gp_voice_task *t) {
    if (!t) return;
    pthread_mutex_lock(&s->lock);
    bool free_now = t->done;
    if (!t->done) {
        gp_voice_task **link = &s->voice_queue;
        while (*link && *link != t) link = &(*link)->next;
        if (*link) { /* still queued: drop it */
            *link = t->next;
            s->n_voice_queued--;
            free_now = true;
        } else {
            t->abandoned = true; /* running: the worker frees it */
        }
    }
    pthread_mutex_unlock(&s->lock);
    if (free_now) task_free(t);
}
