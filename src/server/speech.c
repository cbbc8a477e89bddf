/* speech.c — POST /v1/audio/speech (streamed audio, SSE, or a whole file
 * with "stream": false) and POST /v1/audio/speech/batch (one text, several
 * voices or option sets, run together and returned as JSON with base64
 * audio); Cartesia's routes (cartesia.c) run through gp_speech_run too. Requests are validated
 * completely before a stream starts, so every problem the server can see in advance is a 4xx with
 * nothing synthesised.
 *
 * Nothing here blocks one of libmicrohttpd's threads. A request goes through
 * up to three steps, kept in the request (gp_speech_pending) between calls
 * of its handler: ref_audio voices are computed by the voice worker
 * (voice_worker.c) while the connection is suspended; then the streams
 * start; a streamed answer is handed to libmicrohttpd's content reader
 * (speech_job.c), while a whole file or a batch is collected with the
 * connection suspended between deliveries (collect_continue). The worker and
 * the streams' callbacks resume the connection (wake.c) and libmicrohttpd
 * calls the handler again, which goes on where it left off. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/timing.h"
#include "io/audio_memory.h"
#include "io/json.h"
#include "server/base64.h"
#include "server/server_internal.h"

static size_t count_tokens(gepard_model *model, const char *text) {
    int32_t *ids = NULL;
    size_t n = 0;
    if (gepard_tokenize(gepard_model_tokenizer(model), text, &ids, &n) != GEPARD_OK) n = 0;
    gepard_free(ids);
    return n;
}

/* Start one stream for `text` with options `o` and the speaker prefix
 * `own` from ref_audio (taken over; NULL: the voice the options name);
 * `wake`: see gp_job_create. */
static int start_job(gp_http_request *r, const gp_server_backend *b, const gp_speech_options *o,
                     const char *text, gepard_voice *own, gp_wake *wake, gp_speech_job **out,
                     gp_api_error *e) {
    *out = NULL;
    gp_server *s = r->server;
    gp_speech_job *job;
    gp_error err;
    gp_error_clear(&err);
    if (gp_job_create(s, b, o, r->connection, wake, &job, &err)) {
        gepard_voice_free(own);
        return gp_http_fail(e, 500, NULL, "internal_error", "%s", err.message);
    }
    job->own_voice = own;
    snprintf(job->request_id, sizeof job->request_id, "%s", r->request_id);
    job->input_tokens = count_tokens(b->model, text);
    gepard_synth_params p = o->params;
    p.voice = own ? own : (o->voice_entry ? o->voice_entry->voice : NULL);
    p.lora = o->voice_entry ? o->voice_entry->lora : NULL;
    gepard_status st = gp_job_start(job, b, text, &p);
    if (st != GEPARD_OK) {
        gp_api_error_from_status(e, st, gepard_last_error());
        if (st == GEPARD_ERR_INVALID_ARGUMENT) snprintf(e->param, sizeof e->param, "input");
        gp_job_free(job);
        return -1;
    }
    *out = job;
    return 0;
}

static void add_audio_headers(struct MHD_Response *resp, const gp_speech_job *j,
                              const char *voice) {
    char rate[16], bits[8];
    snprintf(rate, sizeof rate, "%d", j->sample_rate);
    snprintf(bits, sizeof bits, "%d", gp_audio_format_bits(j->format));
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                            !j->sse ? gp_audio_format_mime(j->format)
                            : j->sse_style == GP_SSE_EL_LINES || j->sse_style == GP_SSE_EL_OBJECT
                                ? "application/json"
                                : "text/event-stream");
    MHD_add_response_header(resp, "X-Sample-Rate", rate);
    MHD_add_response_header(resp, "X-Channels", "1");
    MHD_add_response_header(resp, "X-Bit-Depth", bits);
    MHD_add_response_header(resp, "X-Audio-Format", gp_audio_format_name(j->format));
    MHD_add_response_header(resp, "X-Voice", voice);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    MHD_add_response_header(resp, "X-Accel-Buffering", "no");
}

typedef struct batch_item {
    gp_speech_options opts;
    char param[64];          /* "ref_audio" or "items[2].ref_audio" */
    gepard_voice *own_voice; /* from ref_audio, until its stream takes it */
    gp_speech_job *job;
} batch_item;

typedef enum pending_step { STEP_VOICES, STEP_COLLECT } pending_step;

/* A speech request between calls of its handler. */
struct gp_speech_pending {
    pending_step step;
    bool batch;  /* /batch: one JSON answer */
    bool whole;  /* "stream": false: one file with Content-Length */
    cJSON *json; /* the request (`text` and ref_audio point into it); the voice task holds it
                    meanwhile */
    const char *text;
    gp_server_backend backend;
    gp_voice_task *task; /* STEP_VOICES */
    int n;
    batch_item *items;
};

static void items_free(batch_item *items, int n) {
    for (int i = 0; items && i < n; i++) {
        gp_job_free(items[i].job); /* its stream ends: no more signals */
        gepard_voice_free(items[i].own_voice);
    }
    free(items);
}

void gp_speech_pending_free(gp_http_request *r) {
    gp_speech_pending *p = r->pending;
    r->pending = NULL;
    if (p) {
        gp_voice_task_abandon(r->server, p->task);
        items_free(p->items, p->n);
        cJSON_Delete(p->json);
        free(p);
    }
    gp_wake_forget(r->server, &r->wake);
}

static enum MHD_Result fail_request(gp_http_request *r, const gp_api_error *e) {
    gp_speech_pending_free(r);
    return gp_http_send_error(r, e);
}

/* The request's wake: signalled by the voice worker and the streams'
 * callbacks, and by the ticker at the request's deadline or when the
 * client leaves. */
static void init_request_wake(gp_http_request *r) {
    gp_wake_init(&r->wake, r->connection, gp_http_connection_fd(r->connection),
                 gp_now_s() + r->server->params.request_timeout_s);
}

/* A new pending request for `n` items: `items` (taken over), or new ones
 * whose options the caller fills. */
static gp_speech_pending *pending_create(gp_http_request *r, batch_item *items, int n,
                                         gp_api_error *e) {
    gp_speech_pending *p = calloc(1, sizeof *p);
    if (!items) items = calloc((size_t)n, sizeof *items);
    if (!p || !items) {
        free(p);
        free(items);
        gp_http_fail(e, 500, NULL, "internal_error", "out of memory");
        return NULL;
    }
    p->items = items;
    p->n = n;
    r->pending = p;
    init_request_wake(r);
    return p;
}

/* "stream": false — the whole file with Content-Length (WAV with real sizes). */
static enum MHD_Result respond_whole(gp_http_request *r, gp_speech_job *job, const char *voice) {
    if (job->disconnected) return MHD_NO;
    if (job->failed) {
        gp_api_error e;
        gp_http_fail(&e, 500, NULL, "synthesis_failed", "the synthesis failed: %s", job->error);
        return gp_http_send_error(r, &e);
    }
    r->log.frames = (long)job->result.frames;
    r->log.ttfa_ms = job->result.ttfa_ms;
    size_t len = 0;
    char *data = gp_buf_detach(&job->out, &len);
    gp_wav_patch_sizes(data, len);
    gp_flac_patch_length(data, len, job->pipe.samples_out);
    struct MHD_Response *resp = MHD_create_response_from_buffer(
        len, data ? data : (void *)"", data ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (!resp) {
        free(data);
        return MHD_NO;
    }
    add_audio_headers(resp, job, voice);
    return gp_http_send_response(r, 200, resp);
}

static enum MHD_Result batch_respond(gp_http_request *r, batch_item *items, int n);

/* Encode what the collected streams delivered; when every one has ended,
 * answer; otherwise suspend until a stream signals (see wake.c). */
static enum MHD_Result collect_continue(gp_http_request *r) {
    gp_speech_pending *p = r->pending;
    for (;;) {
        bool running = false;
        for (int i = 0; i < p->n; i++) {
            gp_job_pump(p->items[i].job);
            running |= !p->items[i].job->ended;
        }
        if (!running) break;
        if (gp_wake_suspend(r->server, &r->wake)) return MHD_YES;
    }
    bool gone = false;
    for (int i = 0; i < p->n; i++) gone |= p->items[i].job->disconnected;
    r->log.disconnected = gone;
    enum MHD_Result ret = gone       ? MHD_NO
                          : p->batch ? batch_respond(r, p->items, p->n)
                                     : respond_whole(r, p->items[0].job, p->items[0].opts.voice);
    gp_speech_pending_free(r);
    return ret;
}

/* Start every item's stream; then hand a single streamed answer to
 * libmicrohttpd, or collect a whole file or a batch. */
static enum MHD_Result start_streams(gp_http_request *r) {
    gp_speech_pending *p = r->pending;
    bool collect = p->batch || p->whole;
    gp_api_error e;
    for (int i = 0; i < p->n; i++) {
        batch_item *it = &p->items[i];
        gepard_voice *own = it->own_voice;
        it->own_voice = NULL;
        if (start_job(r, &p->backend, &it->opts, p->text, own, collect ? &r->wake : NULL, &it->job,
                      &e)) {
            for (int k = 0; k < i; k++) p->items[k].job->failed = true; /* not a disconnect */
            return fail_request(r, &e); /* cancels the streams already started */
        }
    }
    cJSON_Delete(p->json); /* the engine copied the text */
    p->json = NULL;
    gp_http_allow_long_request(r);
    if (collect) {
        p->step = STEP_COLLECT;
        return collect_continue(r);
    }
    gp_speech_job *job = p->items[0].job;
    p->items[0].job = NULL; /* the response owns it now */
    char voice[GP_VOICE_NAME_MAX];
    snprintf(voice, sizeof voice, "%s", p->items[0].opts.voice);
    gp_speech_pending_free(r);
    struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384,
                                                                  gp_job_read, job, gp_job_free_cb);
    if (!resp) {
        gp_job_free(job);
        return MHD_NO;
    }
    add_audio_headers(resp, job, voice);
    if (r->server->access_log && (job->log = malloc(sizeof *job->log))) {
        *job->log = r->log; /* the job writes the line with its final frames and TTFA */
        job->log->status = 200;
        r->log_by_job = true;
    }
    return gp_http_send_response(r, 200, resp);
}

/* Wait (suspended) for the voice worker, then start the streams. */
static enum MHD_Result voices_continue(gp_http_request *r) {
    gp_speech_pending *p = r->pending;
    while (!gp_voice_task_done(r->server, p->task)) {
        if (gp_http_peer_gone(r->wake.fd)) return MHD_NO; /* the task is abandoned */
        if (gp_now_s() > r->wake.deadline) {
            gp_api_error e;
            gp_http_fail(&e, 503, NULL, "timeout",
                         "the request ran past the server's time limit while its voice was "
                         "computed");
            return fail_request(r, &e);
        }
        if (gp_wake_suspend(r->server, &r->wake)) return MHD_YES;
    }
    gp_voice_task *task = p->task;
    p->task = NULL;
    gepard_voice *voices[GP_SERVER_MAX_BATCH];
    gp_api_error e;
    int rc = gp_voice_task_finish(task, &p->json, voices, &e);
    if (rc) return fail_request(r, &e);
    for (int i = 0; i < p->n; i++) p->items[i].own_voice = voices[i];
    return start_streams(r);
}

static enum MHD_Result speech_continue(gp_http_request *r) {
    return r->pending->step == STEP_VOICES ? voices_continue(r) : collect_continue(r);
}

/* The request is parsed (`p` filled): compute ref_audio voices first if
 * any (on the voice worker), else start at once. */
static enum MHD_Result speech_begin(gp_http_request *r) {
    gp_speech_pending *p = r->pending;
    gp_voice_ref refs[GP_SERVER_MAX_BATCH];
    bool any = false;
    for (int i = 0; i < p->n; i++) {
        memset(&refs[i], 0, sizeof refs[i]);
        refs[i].b64 = p->items[i].opts.ref_audio;
        refs[i].len = p->items[i].opts.ref_audio_len;
        snprintf(refs[i].param, sizeof refs[i].param, "%s", p->items[i].param);
        any |= refs[i].b64 != NULL;
    }
    if (!any) return start_streams(r);
    gp_api_error e;
    p->task = gp_voice_task_submit(r->server, &p->backend, p->json, refs, p->n, &r->wake, &e);
    if (!p->task) return fail_request(r, &e);
    p->json = NULL; /* the task holds it until it hands it back */
    p->step = STEP_VOICES;
    return voices_continue(r);
}

enum MHD_Result gp_speech_run(gp_http_request *r, const gp_server_backend *b, cJSON *json,
                              const char *text, const gp_speech_options *o) {
    gp_api_error e;
    gp_speech_pending *p = pending_create(r, NULL, 1, &e);
    if (!p) {
        cJSON_Delete(json);
        return gp_http_send_error(r, &e);
    }
    p->json = json;
    p->text = text;
    p->backend = *b;
    p->whole = !o->stream && !o->sse;
    p->items[0].opts = *o;
    snprintf(r->log.voice, sizeof r->log.voice, "%s", o->voice);
    snprintf(p->items[0].param, sizeof p->items[0].param, "ref_audio");
    return speech_begin(r);
}

enum MHD_Result gp_speech_handle(gp_http_request *r, gp_speech_parse_fn parse) {
    if (r->pending) return speech_continue(r); /* resumed */
    gp_api_error e;
    gp_server_backend b;
    cJSON *json = NULL;
    gp_speech_options o;
    const char *text = NULL;
    gp_speech_options_init(&o);
    if (!gp_server_backend_get(r->server, &b, &e) || gp_request_json(r, &json, &e) ||
        parse(r, json, b.voices, &text, &o, &e)) {
        cJSON_Delete(json);
        return gp_http_send_error(r, &e);
    }
    return gp_speech_run(r, &b, json, text, &o);
}

static int parse_openai(gp_http_request *r, const cJSON *json, const gp_voices *voices,
                        const char **text, gp_speech_options *o, gp_api_error *e) {
    return gp_speech_input_parse(json, r->server, text, e) ||
                   gp_speech_options_parse(json, r->server, voices, "", o, e)
               ? -1
               : 0;
}

enum MHD_Result gp_handle_speech(gp_http_request *r) { return gp_speech_handle(r, parse_openai); }

/* ---- batch ---- */

/* The items of a batch: "voices": [names] or "items": [option objects],
 * each over the request's top-level options. */
static int batch_parse(const cJSON *json, gp_server *s, const gp_voices *voices,
                       const gp_speech_options *base, batch_item **out, int *n_out,
                       gp_api_error *e) {
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(json, "items");
    const char *key = "items";
    if (!list) {
        list = cJSON_GetObjectItemCaseSensitive(json, "voices");
        key = "voices";
    }
    if (!cJSON_IsArray(list))
        return gp_http_fail(e, 400, "voices", "invalid_type",
                            "a batch needs \"voices\": [names] or \"items\": [option objects]");
    int n = cJSON_GetArraySize(list);
    if (n < 1 || n > s->params.max_batch_items)
        return gp_http_fail(e, 400, key, "invalid_value",
                            "%s must list between 1 and %d entries, got %d", key,
                            s->params.max_batch_items, n);
    batch_item *items = calloc((size_t)n, sizeof *items);
    if (!items) return gp_http_fail(e, 500, NULL, "internal_error", "out of memory");
    int i = 0;
    for (const cJSON *it = list->child; it; it = it->next, i++) {
        char prefix[32];
        snprintf(prefix, sizeof prefix, "%s[%d].", key, i);
        items[i].opts = *base;
        cJSON *wrapper = NULL;
        const cJSON *obj = it;
        if (!cJSON_IsObject(it) || strcmp(key, "voices") == 0) {
            wrapper = cJSON_CreateObject(); /* {"voice": entry} */
            if (!wrapper || !cJSON_AddItemReferenceToObject(wrapper, "voice", (cJSON *)it)) {
                cJSON_Delete(wrapper);
                free(items);
                return gp_http_fail(e, 500, NULL, "internal_error", "out of memory");
            }
            obj = wrapper;
        }
        int rc = gp_speech_options_parse(obj, s, voices, prefix, &items[i].opts, e);
        cJSON_Delete(wrapper);
        snprintf(items[i].param, sizeof items[i].param, "items[%d].ref_audio", i);
        items[i].opts.sse = false; /* a batch answers with JSON */
        if (rc) {
            free(items);
            return -1;
        }
    }
    *out = items;
    *n_out = n;
    return 0;
}

static int batch_append_item(gp_buf *b, int index, const batch_item *it) {
    const gp_speech_job *j = it->job;
    int rc = gp_buf_printf(b, "%s{\"index\":%d,\"voice\":", index ? "," : "", index);
    rc |= gp_json_append_string(b, it->opts.voice);
    rc |= gp_buf_printf(b, ",\"response_format\":\"%s\",\"sample_rate\":%d",
                        gp_audio_format_name(j->format), j->sample_rate);
    if (j->failed) {
        rc |= gp_buf_append_str(b, ",\"error\":{\"message\":");
        rc |= gp_json_append_string(b, j->error);
        return rc | gp_buf_append_str(b, ",\"type\":\"server_error\",\"param\":null,\"code\":"
                                         "\"synthesis_failed\"}}");
    }
    rc |= gp_buf_printf(b,
                        ",\"frames\":%zu,\"audio_seconds\":%.3f,\"ttfa_ms\":%.1f,\"rtf\":%.4f,"
                        "\"bytes\":%zu,\"audio\":\"",
                        j->result.frames, j->result.audio_seconds, j->result.ttfa_ms, j->result.rtf,
                        j->out.len);
    rc |= gp_base64_append(b, j->out.data ? j->out.data : "", j->out.len);
    return rc | gp_buf_append_str(b, "\"}");
}

static enum MHD_Result batch_respond(gp_http_request *r, batch_item *items, int n) {
    gp_buf b;
    gp_buf_init(&b);
    size_t in_tokens = 0, out_tokens = 0;
    int rc = gp_buf_append_str(&b, "{\"object\":\"list\",\"model\":");
    rc |= gp_json_append_string(&b, r->server->model_name);
    rc |= gp_buf_printf(&b, ",\"sample_rate\":%d,\"data\":[", items[0].job->sample_rate);
    for (int i = 0; i < n; i++) {
        gp_speech_job *j = items[i].job;
        gp_wav_patch_sizes(j->out.data, j->out.len);
        gp_flac_patch_length(j->out.data, j->out.len, j->pipe.samples_out);
        rc |= batch_append_item(&b, i, &items[i]);
        in_tokens += j->input_tokens;
        out_tokens += j->result.frames;
        if (!j->failed && (r->log.ttfa_ms < 0 || j->result.ttfa_ms < r->log.ttfa_ms))
            r->log.ttfa_ms = j->result.ttfa_ms; /* the first audio of any item */
    }
    rc |= gp_buf_printf(&b,
                        "],\"usage\":{\"input_tokens\":%zu,\"output_tokens\":%zu,"
                        "\"total_tokens\":%zu}}\n",
                        in_tokens, out_tokens, in_tokens + out_tokens);
    r->log.frames = (long)out_tokens; /* all items' */
    if (rc) {
        gp_buf_free(&b);
        return MHD_NO;
    }
    return gp_http_send_json(r, 200, &b);
}

enum MHD_Result gp_handle_speech_batch(gp_http_request *r) {
    if (r->pending) return speech_continue(r); /* resumed */
    gp_api_error e;
    gp_server_backend b;
    cJSON *json = NULL;
    gp_speech_options base;
    const char *text = NULL;
    batch_item *items = NULL;
    int n = 0;
    gp_speech_options_init(&base);
    if (!gp_server_backend_get(r->server, &b, &e) || gp_request_json(r, &json, &e) ||
        gp_speech_input_parse(json, r->server, &text, &e) ||
        gp_speech_options_parse(json, r->server, b.voices, "", &base, &e) ||
        batch_parse(json, r->server, b.voices, &base, &items, &n, &e)) {
        cJSON_Delete(json);
        return gp_http_send_error(r, &e);
    }
    gp_speech_pending *p = pending_create(r, items, n, &e); /* takes the items */
    if (!p) {
        cJSON_Delete(json);
        return gp_http_send_error(r, &e);
    }
    p->json = json;
    p->text = text;
    p->backend = b;
    p->batch = true;
    snprintf(r->log.voice, sizeof r->log.voice, "%s", items[0].opts.voice); /* the first */
    return speech_begin(r);
}
