/* speech.c — POST /v1/audio/speech (streamed audio, SSE, or a whole file
 * with "stream": false) and POST /v1/audio/speech/batch (one text, several
 * voices or option sets, run together and returned as JSON with base64
 * audio). Requests are validated completely before a stream starts, so every
 * problem the server can see in advance is a 4xx with nothing synthesised.
 *
 * A whole file or a batch is collected without holding a thread: the
 * handler starts the streams, keeps them in the request (gp_speech_pending)
 * and suspends the connection; the streams' callbacks resume it, and
 * libmicrohttpd calls the handler again, which continues where it left off
 * (collect_continue) until every stream has ended. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/timing.h"
#include "io/audio_memory.h"
#include "io/json.h"
#include "server/base64.h"
#include "server/server_internal.h"

/* A speaker prefix from the request's base64 ref_audio. */
static int ref_voice(gp_server *s, const gp_server_backend *b, const gp_speech_options *o,
                     const char *param, gepard_voice **out, gp_api_error *e) {
    *out = NULL;
    gp_error err;
    gp_error_clear(&err);
    unsigned char *data = NULL;
    size_t n = 0;
    if (gp_base64_decode(o->ref_audio, o->ref_audio_len, s->params.max_ref_audio_bytes, param,
                         &data, &n, &err))
        return gp_http_fail(e, 400, param, "invalid_ref_audio", "%s", err.message);
    gp_audio audio;
    int rc = gp_audio_read_memory(data, n, s->params.max_ref_audio_s, param, &audio, &err);
    free(data);
    if (rc) return gp_http_fail(e, 400, param, "invalid_ref_audio", "%s", err.message);
    pthread_mutex_lock(&s->voice_lock);
    gepard_status st = gepard_voice_from_audio(b->model, b->codec, audio.samples, audio.frames,
                                               audio.channels, audio.sample_rate, 0, out);
    pthread_mutex_unlock(&s->voice_lock);
    gp_audio_free(&audio);
    if (st == GEPARD_OK) return 0;
    if (st == GEPARD_ERR_INVALID_ARGUMENT || st == GEPARD_ERR_UNSUPPORTED)
        return gp_http_fail(e, 400, param, "invalid_ref_audio", "%s: %s", param,
                            gepard_last_error());
    gp_api_error_from_status(e, st, gepard_last_error());
    return -1;
}

static size_t count_tokens(gepard_model *model, const char *text) {
    int32_t *ids = NULL;
    size_t n = 0;
    if (gepard_tokenize(gepard_model_tokenizer(model), text, &ids, &n) != GEPARD_OK) n = 0;
    gepard_free(ids);
    return n;
}

/* Validate-and-start one stream for `text` with options `o`; `wake`: see
 * gp_job_create. */
static int start_job(gp_http_request *r, const gp_server_backend *b, const gp_speech_options *o,
                     const char *text, const char *param_prefix, gp_wake *wake, gp_speech_job **out,
                     gp_api_error *e) {
    *out = NULL;
    gp_server *s = r->server;
    gepard_voice *own = NULL;
    char param[64];
    snprintf(param, sizeof param, "%sref_audio", param_prefix);
    if (o->ref_audio && ref_voice(s, b, o, param, &own, e)) return -1;
    gp_speech_job *job;
    gp_error err;
    gp_error_clear(&err);
    if (gp_job_create(s, b, o, r->connection, wake, &job, &err)) {
        gepard_voice_free(own);
        return gp_http_fail(e, 500, NULL, "internal_error", "%s", err.message);
    }
    job->own_voice = own;
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
    char rate[16];
    snprintf(rate, sizeof rate, "%d", j->sample_rate);
    bool is_float = j->format == GP_AUDIO_F32 || j->format == GP_AUDIO_WAV_FLOAT;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                            j->sse ? "text/event-stream" : gp_audio_format_mime(j->format));
    MHD_add_response_header(resp, "X-Sample-Rate", rate);
    MHD_add_response_header(resp, "X-Channels", "1");
    MHD_add_response_header(resp, "X-Bit-Depth", is_float ? "32" : "16");
    MHD_add_response_header(resp, "X-Audio-Format", gp_audio_format_name(j->format));
    MHD_add_response_header(resp, "X-Voice", voice);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    MHD_add_response_header(resp, "X-Accel-Buffering", "no");
}

typedef struct batch_item {
    gp_speech_options opts;
    gp_speech_job *job;
} batch_item;

/* Streams started for a whole file or a batch, waiting to be collected. */
struct gp_speech_pending {
    bool batch;
    int n;
    batch_item *items;
};

static void batch_free(batch_item *items, int n) {
    for (int i = 0; items && i < n; i++) gp_job_free(items[i].job);
    free(items);
}

void gp_speech_pending_free(gp_http_request *r) {
    gp_speech_pending *p = r->pending;
    r->pending = NULL;
    if (p) batch_free(p->items, p->n); /* their streams end: no more signals */
    free(p);
    gp_wake_forget(r->server, &r->wake);
}

/* The request's wake for collected streams: signalled by their callbacks,
 * and by the ticker at the request's deadline or when the client leaves. */
static void init_request_wake(gp_http_request *r) {
    gp_wake_init(&r->wake, r->connection, gp_http_connection_fd(r->connection),
                 gp_now_s() + r->server->params.request_timeout_s);
}

/* "stream": false — the whole file with Content-Length (WAV with real sizes). */
static enum MHD_Result respond_whole(gp_http_request *r, gp_speech_job *job, const char *voice) {
    if (job->disconnected) {
        gp_job_free(job);
        return MHD_NO;
    }
    if (job->failed) {
        gp_api_error e;
        gp_http_fail(&e, 500, NULL, "synthesis_failed", "the synthesis failed: %s", job->error);
        gp_job_free(job);
        return gp_http_send_error(r, &e);
    }
    size_t len = 0;
    char *data = gp_buf_detach(&job->out, &len);
    gp_wav_patch_sizes(data, len);
    struct MHD_Response *resp = MHD_create_response_from_buffer(
        len, data ? data : (void *)"", data ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (!resp) {
        free(data);
        gp_job_free(job);
        return MHD_NO;
    }
    add_audio_headers(resp, job, voice);
    gp_job_free(job);
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
    r->pending = NULL;
    enum MHD_Result ret;
    if (p->batch) {
        bool gone = false;
        for (int i = 0; i < p->n; i++) gone |= p->items[i].job->disconnected;
        if (gone) {
            batch_free(p->items, p->n);
            ret = MHD_NO;
        } else {
            ret = batch_respond(r, p->items, p->n);
        }
    } else {
        ret = respond_whole(r, p->items[0].job, p->items[0].opts.voice);
        free(p->items);
    }
    free(p);
    return ret;
}

static int pending_create(gp_http_request *r, bool batch, batch_item *items, int n) {
    gp_speech_pending *p = calloc(1, sizeof *p);
    if (!p) return -1;
    p->batch = batch;
    p->items = items;
    p->n = n;
    r->pending = p;
    return 0;
}

enum MHD_Result gp_handle_speech(gp_http_request *r) {
    if (r->pending) return collect_continue(r); /* resumed */
    gp_api_error e;
    gp_server_backend b;
    cJSON *json = NULL;
    gp_speech_options o;
    const char *text = NULL;
    gp_speech_job *job = NULL;
    gp_speech_options_init(&o);
    init_request_wake(r);
    bool failed = !gp_server_backend_get(r->server, &b, &e) || gp_request_json(r, &json, &e) ||
                  gp_speech_input_parse(json, r->server, &text, &e) ||
                  gp_speech_options_parse(json, r->server, b.voices, "", &o, &e);
    bool whole = !o.stream && !o.sse; /* collected here, answered with Content-Length */
    if (failed || start_job(r, &b, &o, text, "", whole ? &r->wake : NULL, &job, &e)) {
        cJSON_Delete(json);
        return gp_http_send_error(r, &e);
    }
    cJSON_Delete(json); /* the engine copied the text; ref_audio was decoded */
    gp_http_allow_long_request(r);
    if (whole) {
        batch_item *item = calloc(1, sizeof *item);
        if (!item || pending_create(r, false, item, 1)) {
            free(item);
            gp_job_free(job);
            return MHD_NO;
        }
        item->opts = o;
        item->job = job;
        return collect_continue(r);
    }
    struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384,
                                                                  gp_job_read, job, gp_job_free_cb);
    if (!resp) {
        gp_job_free(job);
        return MHD_NO;
    }
    add_audio_headers(resp, job, o.voice);
    return gp_http_send_response(r, 200, resp);
}

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
    rc |= gp_buf_printf(b, ",\"response_format\":\"%s\"", gp_audio_format_name(j->format));
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
        rc |= batch_append_item(&b, i, &items[i]);
        in_tokens += j->input_tokens;
        out_tokens += j->result.frames;
    }
    rc |= gp_buf_printf(&b,
                        "],\"usage\":{\"input_tokens\":%zu,\"output_tokens\":%zu,"
                        "\"total_tokens\":%zu}}\n",
                        in_tokens, out_tokens, in_tokens + out_tokens);
    batch_free(items, n);
    if (rc) {
        gp_buf_free(&b);
        return MHD_NO;
    }
    return gp_http_send_json(r, 200, &b);
}

enum MHD_Result gp_handle_speech_batch(gp_http_request *r) {
    if (r->pending) return collect_continue(r); /* resumed */
    gp_api_error e;
    gp_server_backend b;
    cJSON *json = NULL;
    gp_speech_options base;
    const char *text = NULL;
    batch_item *items = NULL;
    int n = 0;
    gp_speech_options_init(&base);
    init_request_wake(r);
    if (!gp_server_backend_get(r->server, &b, &e) || gp_request_json(r, &json, &e) ||
        gp_speech_input_parse(json, r->server, &text, &e) ||
        gp_speech_options_parse(json, r->server, b.voices, "", &base, &e) ||
        batch_parse(json, r->server, b.voices, &base, &items, &n, &e)) {
        cJSON_Delete(json);
        return gp_http_send_error(r, &e);
    }
    for (int i = 0; i < n; i++) {
        char prefix[32];
        snprintf(prefix, sizeof prefix, "items[%d].", i);
        if (start_job(r, &b, &items[i].opts, text, prefix, &r->wake, &items[i].job, &e)) {
            cJSON_Delete(json);
            for (int k = 0; k < i; k++) items[k].job->failed = true; /* not a disconnect */
            batch_free(items, n); /* cancels the ones already started */
            return gp_http_send_error(r, &e);
        }
    }
    cJSON_Delete(json);
    gp_http_allow_long_request(r);
    if (pending_create(r, true, items, n)) {
        batch_free(items, n);
        return MHD_NO;
    }
    return collect_continue(r);
}
