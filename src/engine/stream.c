/* stream.c — one synthesis request: validation and text cleaning at start,
 * segment by segment generation (the codec decoder carries on across
 * segments, so joins are seamless), audio delivery through the streaming
 * codec as frames arrive, and the public wait / cancel / free functions. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"
#include "base/timing.h"
#include "engine/api_error.h"
#include "engine/engine_internal.h"
#include "engine/synth_prep.h"
#include "text/clean.h"

gepard_status gp_engine_enqueue(gepard_engine *e, gepard_stream *s);

static gepard_status stream_setup(gepard_engine *e, gepard_stream *s, const char *text,
                                  const gepard_synth_params *p, gp_error *err) {
    const gp_model *m = e->model->model;
    s->params = *p;
    s->split = p->split_text != 0;
    if (gp_synth_params_convert(p, &s->gen_params, err)) return (gepard_status)err->code;
    if (!text) return (gepard_status)gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT, "no text given");
    int rc = gp_text_clean(text, strlen(text), p->max_text_bytes, &s->text, &s->text_len, err);
    if (rc) return (gepard_status)rc;
    if (p->voice) {
        if (p->voice->width != m->cfg.backbone.hidden_size)
            return (gepard_status)gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT,
                                          "the voice was made for a model of width %d, this one "
                                          "is %d",
                                          p->voice->width, m->cfg.backbone.hidden_size);
        s->prefix_rows = p->voice->rows;
        size_t n = (size_t)p->voice->rows * p->voice->width;
        s->prefix = malloc(n * sizeof(float));
        if (!s->prefix) return (gepard_status)gp_fail_oom(err, "voice", n * 4);
        memcpy(s->prefix, p->voice->prefix, n * sizeof(float));
    }
    s->lora = p->lora ? p->lora->adapter : NULL;
    if (e->codec) {
        if (gepard_codec_num_codebooks(e->codec) != m->cfg.num_channels)
            return (gepard_status)gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT,
                                          "the codec has %d codebooks but the model produces %d "
                                          "channels — wrong codec for this model?",
                                          gepard_codec_num_codebooks(e->codec),
                                          m->cfg.num_channels);
        for (int c = 0; c < m->cfg.num_channels; c++)
            if (gepard_codec_codebook_size(e->codec, c) != m->cfg.channel_vocab[c])
                return (gepard_status)gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT,
                                              "codec codebook %d has %d levels but the model "
                                              "predicts %d — wrong codec for this model?",
                                              c, gepard_codec_codebook_size(e->codec, c),
                                              m->cfg.channel_vocab[c]);
    }
    return GEPARD_OK;
}

/* The codec decoder's state and the audio buffer, made when the stream
 * gets a slot rather than at start: a queued stream should cost little
 * (thousands may wait). */
static int stream_open_decoder(gepard_engine *e, gepard_stream *s, gp_error *err) {
    if (!e->codec || s->codec_stream) return GEPARD_OK;
    if (gepard_codec_stream_create(e->codec, &s->codec_stream) != GEPARD_OK)
        return gp_fail(err, GEPARD_ERR_NOMEM, "%s", gepard_last_error());
    const size_t bytes =
        (size_t)gepard_codec_samples_per_frame(e->codec) * (size_t)e->max_chunk * sizeof(float);
    s->pcm = malloc(bytes);
    /* a queueing codec fills the second while the first is delivered */
    if (s->pcm && e->queue_codec) s->pcm_next = malloc(bytes);
    if (!s->pcm || (e->queue_codec && !s->pcm_next)) return gp_fail_oom(err, "audio buffer", bytes);
    return GEPARD_OK;
}

void gp_stream_release_resources(gepard_engine *e, gepard_stream *s) {
    if (s->gen) gp_gen_free(s->gen, e->kv);
    s->gen = NULL;
    gepard_codec_stream_free(s->codec_stream);
    s->codec_stream = NULL;
    free(s->pcm);
    s->pcm = NULL;
    free(s->pcm_next);
    s->pcm_next = NULL;
    free(s->held);
    s->held = NULL;
    s->held_frames = 0;
    free(s->text);
    s->text = NULL;
    free(s->prefix);
    s->prefix = NULL;
}

int gp_stream_begin_segment(gepard_engine *e, gepard_stream *s, bool *no_more, gp_error *err) {
    *no_more = false;
    size_t begin = s->text_pos, end = s->text_len;
    if (begin >= s->text_len) {
        *no_more = true;
        return GEPARD_OK;
    }
    size_t pos = s->text_pos;
    if (s->split) {
        if (!gp_segment_next(s->text, s->text_len, &pos, NULL, &begin, &end)) {
            *no_more = true;
            return GEPARD_OK;
        }
    } else {
        pos = s->text_len;
    }
    int rc = stream_open_decoder(e, s, err);
    if (rc) return rc;
    int32_t *ids;
    int n_ids;
    rc = gp_synth_layout(e->model, s->text + begin, end - begin, s->prefix_rows,
                         s->gen_params.max_frames, &ids, &n_ids, err);
    if (rc) return rc;
    gp_gen_params gp = s->gen_params;
    gp.seed = s->gen_params.seed + (uint64_t)s->result.segments; /* a fresh draw per segment */
    gp_gen_stream *gen;
    rc = gp_gen_create(e->model->model, &gp, ids, n_ids, s->prefix, s->prefix_rows, s->lora, &gen,
                       err);
    free(ids);
    if (rc) return rc;
    rc = gp_gen_reserve(gen, e->kv, err);
    if (rc) {
        gp_gen_free(gen, e->kv);
        return rc;
    }
    /* a later sentence: its listener is playing the earlier ones */
    gen->prefill_urgent = s->result.segments > 0 || s->result.samples > 0;
    s->gen = gen;
    s->frames_delivered = 0;
    s->frames_signaled = 0;
    s->text_pos = pos;
    return GEPARD_OK;
}

int gp_stream_positions_needed(const gepard_stream *s) {
    if (s->gen) return gp_gen_kv_positions(s->gen, false) + gp_gen_kv_positions(s->gen, true);
    return (s->prefix_rows + s->gen_params.max_frames) *
           (gp_gen_params_use_cfg(&s->gen_params) ? 2 : 1);
}

static void stream_fail(gepard_stream *s, gepard_status status, const char *message) {
    s->status = status;
    snprintf(s->message, sizeof s->message, "%s", message);
}

/* gp_stream_frames_to_decode with `decoded` frames of the segment decoded
 * and `samples` samples of the stream's audio in hand (delivered or about
 * to be). */
static int frames_to_decode_after(const gepard_stream *s, int decoded, size_t samples) {
    if (!s->gen) return 0;
    int pending = s->gen->n_frames - decoded;
    if (pending <= 0) return 0;
    if (decoded == 0 && samples == 0) return 1; /* first audio: at once */
    bool ending = s->gen->phase == GP_GEN_DONE || atomic_load(&s->cancel_requested);
    const int most = s->engine->max_chunk;
    const int now = pending < most ? pending : most;
    if (pending >= s->engine->chunk_frames || ending) return now;
    /* Frames short of a chunk go now when their listener is keeping up but
     * holds less than the engine's wait_headroom frames of audio (the first
     * frames of every stream): waiting for the chunk would make it run dry.
     * A listener that already ran dry (the stream is slower than real time)
     * gains nothing from it, and whole chunks cost the codec less. */
    const gepard_codec *c = s->engine->codec;
    const int rate = c ? gepard_codec_sample_rate(c) : 0;
    if (!rate || !s->first_audio_time) return 0;
    /* seconds of audio in hand: delivered minus played since the first sample */
    const double headroom = (double)samples / rate - (gp_now_s() - s->first_audio_time);
    const double wait = s->engine->wait_headroom * gepard_codec_samples_per_frame(c) / rate;
    return headroom >= 0 && headroom < wait ? now : 0;
}

int gp_stream_frames_to_decode(const gepard_stream *s) {
    return frames_to_decode_after(s, s->frames_delivered, s->result.samples);
}

int gp_stream_frames_to_queue(const gepard_stream *s) {
    const size_t spf =
        s->engine->codec ? (size_t)gepard_codec_samples_per_frame(s->engine->codec) : 0;
    return frames_to_decode_after(s, s->frames_delivered + s->pcm_ready,
                                  s->result.samples + (size_t)s->pcm_ready * spf);
}

/* Whether the k frames of audio just decoded into s->pcm are held back
 * (appended to s->held) rather than delivered: the stream's first audio
 * under a GPU's load, until it holds first_audio_frames frames or its
 * segment has no more frames coming. */
static bool hold_first_audio(gepard_engine *e, gepard_stream *s) {
    if (e->first_audio_frames <= 1 || s->result.samples > 0) return false;
    return s->held_frames > 0 || (e->gpu_codec && e->chunk_frames == 1);
}

/* n samples to the listener; nonzero when its callback stops the stream. */
static int hand_over(gepard_stream *s, const float *samples, size_t n) {
    if (!s->first_audio_time) s->first_audio_time = gp_now_s();
    s->result.samples += n;
    if (s->callbacks.on_audio && s->callbacks.on_audio(samples, n, s->callbacks.user)) {
        stream_fail(s, GEPARD_ERR_CANCELLED, "cancelled by the audio callback");
        return 1;
    }
    return 0;
}

/* The held frames to the listener (once); nonzero when its callback stops
 * the stream. */
static int deliver_held(gepard_engine *e, gepard_stream *s) {
    const size_t n = (size_t)gepard_codec_samples_per_frame(e->codec) * (size_t)s->held_frames;
    s->held_frames = 0;
    return n ? hand_over(s, s->held, n) : 0;
}

int gp_stream_deliver(gepard_engine *e, gepard_stream *s, bool decode) {
    const int C = e->model->model->cfg.num_channels;
    gp_gen_stream *g = s->gen;
    /* Codes go out as soon as they are sampled. */
    while (s->frames_signaled < g->n_frames) {
        const int32_t *codes = g->frames + (size_t)s->frames_signaled * C;
        s->frames_signaled++;
        s->result.frames++;
        if (!s->first_audio_time && !e->codec) s->first_audio_time = gp_now_s();
        if (s->callbacks.on_frame && s->callbacks.on_frame(codes, C, s->callbacks.user)) {
            stream_fail(s, GEPARD_ERR_CANCELLED, "cancelled by the frame callback");
            return 1;
        }
    }
    if (!e->codec) {
        s->frames_delivered = g->n_frames;
        return 0;
    }
    /* Audio in chunks (see GP_ENGINE_CHUNK_FRAMES and chunk_frames): what is
     * decoded first; nothing is decoded here while a queued call holds the
     * stream's next frames. */
    for (;;) {
        int k = s->pcm_ready;
        if (!k && decode && !s->pcm_queued) k = gp_stream_frames_to_decode(s);
        if (k <= 0) {
            /* held audio goes once the segment has nothing more to give */
            const bool segment_over = g->phase == GP_GEN_DONE && s->frames_delivered == g->n_frames;
            return s->held_frames && segment_over ? deliver_held(e, s) : 0;
        }
        const int32_t *codes = g->frames + (size_t)s->frames_delivered * C;
        if (s->pcm_ready) {
            s->pcm_ready = 0; /* decoded together with other streams */
        } else if (gepard_codec_stream_push(s->codec_stream, codes, (size_t)k, s->pcm) !=
                   GEPARD_OK) {
            stream_fail(s, GEPARD_ERR_INTERNAL, gepard_last_error());
            return 1;
        }
        s->frames_delivered += k;
        size_t n = (size_t)gepard_codec_samples_per_frame(e->codec) * (size_t)k;
        if (hold_first_audio(e, s)) {
            const size_t spf = (size_t)gepard_codec_samples_per_frame(e->codec);
            if (!s->held) {
                /* at most first_audio_frames - 1 held, then a chunk of max_chunk */
                const size_t cap = (size_t)(e->first_audio_frames + e->max_chunk) * spf;
                s->held = malloc(cap * sizeof(float));
                if (!s->held) {
                    stream_fail(s, GEPARD_ERR_NOMEM, "out of memory holding the first audio");
                    return 1;
                }
            }
            memcpy(s->held + (size_t)s->held_frames * spf, s->pcm, n * sizeof(float));
            s->held_frames += k;
            if (s->held_frames >= e->first_audio_frames && deliver_held(e, s)) return 1;
            continue;
        }
        if (hand_over(s, s->pcm, n)) return 1;
    }
}

gepard_status gepard_stream_start(gepard_engine *e, const char *text,
                                  const gepard_synth_params *params,
                                  const gepard_stream_callbacks *callbacks, gepard_stream **out) {
    *out = NULL;
    gp_error err;
    gp_error_clear(&err);
    gepard_synth_params defaults = gepard_synth_default_params();
    if (!params) params = &defaults;
    gepard_stream *s = calloc(1, sizeof *s);
    if (!s) return gp_api_failf(GEPARD_ERR_NOMEM, "out of memory");
    s->engine = e;
    if (callbacks) s->callbacks = *callbacks;
    pthread_cond_init(&s->finished, NULL);
    atomic_init(&s->cancel_requested, 0);
    s->start_time = gp_now_s();
    gepard_status st = stream_setup(e, s, text, params, &err);
    int capacity = e->kv->num_blocks * e->kv->block_size;
    if (st == GEPARD_OK && gp_stream_positions_needed(s) > capacity)
        st = (gepard_status)gp_fail(&err, GEPARD_ERR_INVALID_ARGUMENT,
                                    "max_frames %d needs more KV cache than the engine has (%d "
                                    "positions): lower max_frames or give the engine a larger "
                                    "KV cache",
                                    s->gen_params.max_frames, capacity);
    if (st == GEPARD_OK)
        st = gp_engine_enqueue(e, s);
    else
        gp_api_fail(&err);
    if (st != GEPARD_OK) {
        gp_stream_release_resources(e, s);
        pthread_cond_destroy(&s->finished);
        free(s);
        return st;
    }
    *out = s;
    return gp_api_ok();
}

static void fill_result(gepard_stream *s, gepard_synth_result *r) {
    *r = s->result;
    double rate = s->engine->codec ? gepard_codec_sample_rate(s->engine->codec) : 0;
    r->audio_seconds = rate > 0 ? (double)s->result.samples / rate : 0;
    double now = gp_now_s();
    r->elapsed_seconds = now - s->start_time;
    r->rtf = r->audio_seconds > 0 ? r->elapsed_seconds / r->audio_seconds : 0;
    r->ttfa_ms = s->first_audio_time ? (s->first_audio_time - s->start_time) * 1e3 : 0;
    r->status = s->status;
}

gepard_status gepard_stream_wait(gepard_stream *s, gepard_synth_result *result) {
    gepard_engine *e = s->engine;
    pthread_mutex_lock(&e->lock);
    while (s->state != STREAM_DONE) pthread_cond_wait(&s->finished, &e->lock);
    gepard_synth_result r;
    fill_result(s, &r);
    gepard_status status = s->status;
    char message[GP_ERROR_MESSAGE_MAX];
    snprintf(message, sizeof message, "%s", s->message);
    pthread_mutex_unlock(&e->lock);
    if (result) *result = r;
    if (status != GEPARD_OK) return gp_api_failf(status, "%s", message);
    return gp_api_ok();
}

void gepard_stream_cancel(gepard_stream *s) {
    if (!s) return;
    atomic_store(&s->cancel_requested, 1);
    gepard_engine *e = s->engine;
    pthread_mutex_lock(&e->lock);
    if (s->state == STREAM_QUEUED) gp_engine_cancel_queued_locked(e, s);
    pthread_cond_broadcast(&e->wake);
    pthread_mutex_unlock(&e->lock);
}

int gepard_stream_done(const gepard_stream *s) {
    gepard_engine *e = s->engine;
    pthread_mutex_lock(&e->lock);
    int done = s->state == STREAM_DONE;
    pthread_mutex_unlock(&e->lock);
    return done;
}

void gepard_stream_free(gepard_stream *s) {
    if (!s) return;
    gepard_engine *e = s->engine;
    atomic_store(&s->cancel_requested, 1);
    pthread_mutex_lock(&e->lock);
    if (s->state == STREAM_QUEUED) gp_engine_cancel_queued_locked(e, s);
    if (s->state != STREAM_DONE && gp_engine_on_step_thread(e)) {
        /* Freed from inside a callback: the engine frees it when it finishes. */
        s->owner_released = true;
        pthread_cond_broadcast(&e->wake);
        pthread_mutex_unlock(&e->lock);
        return;
    }
    /* Wait for the step that is running, so no callback runs after we return. */
    pthread_cond_broadcast(&e->wake);
    while (s->state != STREAM_DONE) pthread_cond_wait(&s->finished, &e->lock);
    pthread_mutex_unlock(&e->lock);
    pthread_cond_destroy(&s->finished);
    free(s);
}

gepard_status gepard_synthesize(gepard_engine *e, const char *text,
                                const gepard_synth_params *params,
                                const gepard_stream_callbacks *callbacks,
                                gepard_synth_result *result) {
    gepard_stream *s;
    gepard_status st = gepard_stream_start(e, text, params, callbacks, &s);
    if (st != GEPARD_OK) {
        if (result) {
            memset(result, 0, sizeof *result);
            result->status = st;
        }
        return st;
    }
    st = gepard_stream_wait(s, result);
    gepard_stream_free(s);
    return st;
}
