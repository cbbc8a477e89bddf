/* speech_job.c — one synthesis from the engine to one HTTP client.
 *
 * The engine's step thread calls job_on_audio, which only appends the
 * samples to the job's pending buffer under a mutex and signals the job's
 * wake (wake.c); it never waits for the client. job_on_done signals it
 * when the stream ends. The connection's thread (libmicrohttpd's content
 * reader, or a handler collecting a whole file) swaps the pending buffer
 * out, changes its speed (libsonic) and rate (libsoxr) when asked, encodes
 * it (WAV/PCM/FLAC/Opus/MP3/AAC through gp_audio_sink) and frames it (raw
 * chunks, or SSE events with base64 audio); with nothing to do it
 * suspends the connection instead of waiting, so no thread is held. Each
 * pass checks whether the client closed the connection and whether the
 * request ran past its deadline (the ticker resumes a suspended connection
 * for that), and cancels the stream then; the engine drops a cancelled
 * stream at its next step. When the response is destroyed (finished, failed
 * or the client gone), gp_job_free cancels the stream if needed and waits for
 * it, so no callback can touch the job afterwards.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "base/timing.h"
#include "io/json.h"
#include "server/base64.h"
#include "server/server_internal.h"

#define JOB_MAX_PENDING_SECONDS 120 /* audio the client may fall behind by */

/* Engine thread: keep it short; never block on the client. */
static int job_on_audio(const float *samples, size_t n, void *user) {
    gp_speech_job *j = user;
    int stop = 0;
    pthread_mutex_lock(&j->lock);
    if (j->n_pending + n > j->max_pending) {
        j->overflow = true;
        stop = 1;
    } else {
        if (j->n_pending + n > j->cap_pending) {
            size_t cap = j->cap_pending ? j->cap_pending * 2 : 8192;
            while (cap < j->n_pending + n) cap *= 2;
            float *p = realloc(j->pending, cap * sizeof(float));
            if (!p) {
                j->overflow = true;
                stop = 1;
            } else {
                j->pending = p;
                j->cap_pending = cap;
            }
        }
        if (!stop) {
            memcpy(j->pending + j->n_pending, samples, n * sizeof(float));
            j->n_pending += n;
        }
    }
    pthread_mutex_unlock(&j->lock);
    gp_wake_signal_via(j->server, &j->wake);
    return stop;
}

/* Engine lock held: only signal. */
static void job_on_done(gepard_status status, void *user) {
    (void)status;
    gp_speech_job *j = user;
    gp_wake_signal_via(j->server, &j->wake);
}

static int job_write_encoded(const void *data, size_t len, void *user) {
    gp_speech_job *j = user;
    return gp_buf_append(j->sse ? &j->raw : &j->out, data, len);
}

int gp_job_create(gp_server *s, const gp_server_backend *b, const gp_speech_options *o,
                  struct MHD_Connection *connection, gp_wake *wake, gp_speech_job **out,
                  gp_error *err) {
    *out = NULL;
    gp_speech_job *j = calloc(1, sizeof *j);
    if (!j) return gp_fail_oom(err, "request", sizeof *j);
    j->server = s;
    j->format = o->format;
    j->sse = o->sse;
    j->sse_style = o->sse_style;
    snprintf(j->context_id, sizeof j->context_id, "%s", o->context_id);
    j->speed = o->speed;
    gp_voiced_span_init(&j->voiced);
    j->last_chunk_s = gp_now_s();
    j->fd = gp_http_connection_fd(connection);
    j->deadline = gp_now_s() + s->params.request_timeout_s;
    gp_wake_init(&j->own_wake, connection, j->fd, j->deadline);
    j->wake = wake ? wake : &j->own_wake;
    int native = gepard_codec_sample_rate(b->codec);
    j->native_rate = native;
    j->want_word_times = o->word_timestamps && o->sse && o->sse_style != GP_SSE_OPENAI;
    j->sample_rate = o->sample_rate                ? o->sample_rate
                     : o->format == GP_AUDIO_PCM16 ? GP_OPENAI_PCM_RATE
                                                   : native;
    j->samples_per_frame = gepard_codec_samples_per_frame(b->codec);
    j->max_pending = (size_t)native * JOB_MAX_PENDING_SECONDS;
    pthread_mutex_init(&j->lock, NULL);
    gp_buf_init(&j->raw);
    gp_buf_init(&j->out);
    gp_audio_pipe_params pp = {.in_rate = native,
                               .out_rate = j->sample_rate,
                               .speed = o->speed,
                               .volume = o->volume,
                               .format = o->format,
                               .bit_rate = o->bit_rate,
                               .step = (size_t)j->samples_per_frame};
    int rc = gp_audio_pipe_open(&j->pipe, &pp, job_write_encoded, j, err);
    if (rc) {
        gp_job_free(j);
        return rc;
    }
    j->pipe_open = true;
    *out = j;
    return GEPARD_OK;
}

gepard_status gp_job_start(gp_speech_job *j, const gp_server_backend *b, const char *text,
                           const gepard_synth_params *params) {
    if (j->want_word_times && !(j->said = strdup(text))) return GEPARD_ERR_NOMEM;
    gepard_stream_callbacks cb = {.on_audio = job_on_audio, .user = j, .on_done = job_on_done};
    gepard_status st = gepard_stream_start(b->engine, text, params, &cb, &j->stream);
    if (st != GEPARD_OK) return st;
    j->started = true;
    gp_server_job_register(j->server, j);
    return GEPARD_OK;
}

static int job_fail(gp_speech_job *j, const char *message) {
    if (!j->failed) snprintf(j->error, sizeof j->error, "%s", message);
    j->failed = true;
    if (j->stream) gepard_stream_cancel(j->stream);
    return -1;
}

/* `"context_id":…` for Cartesia's events (nothing when the request had none). */
static int append_context_id(gp_speech_job *j) {
    if (!j->context_id[0]) return 0;
    return gp_buf_append_str(&j->out, ",\"context_id\":") |
           gp_json_append_string(&j->out, j->context_id);
}

/* Wrap the encoded bytes in `raw` into one SSE event: OpenAI's
 * speech.audio.delta, or Cartesia's chunk with its step_time (ms since the
 * previous chunk, or since the request). */
/* GP_SSE_EL_OBJECT: the object's opening, then `raw` as the continuing
 * base64 of the whole audio (the bytes of a 3-byte group split between two
 * calls wait in el_carry); `last`: the final group, padded, and the string
 * closed. */
static int job_frame_el_object(gp_speech_job *j, bool last) {
    int rc = 0;
    if (!j->el_object_open) {
        rc |= gp_buf_append_str(&j->out, "{\"audio_base64\":\"");
        j->el_object_open = true;
    }
    const unsigned char *raw = (const unsigned char *)j->raw.data;
    unsigned char head[3];
    size_t nh = (size_t)j->el_n_carry, at = 0;
    memcpy(head, j->el_carry, nh);
    while (nh < 3 && at < j->raw.len) head[nh++] = raw[at++];
    if (nh == 3) { /* the carried group, whole */
        rc |= gp_base64_append(&j->out, head, 3);
        const size_t whole = (j->raw.len - at) / 3 * 3;
        rc |= gp_base64_append(&j->out, raw + at, whole);
        at += whole;
        nh = j->raw.len - at;
        memcpy(head, raw + at, nh);
    }
    if (last && nh) { /* the last group, padded */
        rc |= gp_base64_append(&j->out, head, nh);
        nh = 0;
    }
    memcpy(j->el_carry, head, nh);
    j->el_n_carry = (int)nh;
    if (last) rc |= gp_buf_append_str(&j->out, "\"");
    gp_buf_clear(&j->raw);
    return rc;
}

/* ElevenLabs' estimated alignment, as both of its keys. */
static int job_append_el_alignment(gp_speech_job *j) {
    gp_buf a;
    gp_buf_init(&a);
    int rc = gp_char_times_append(&a, j->said ? j->said : "", &j->voiced, j->native_rate, j->speed,
                                  GP_CHAR_TIMES_SECONDS) < 0;
    rc |= gp_buf_append_str(&j->out, ",\"alignment\":") | gp_buf_append_str(&j->out, a.data);
    rc |= gp_buf_append_str(&j->out, ",\"normalized_alignment\":") |
          gp_buf_append_str(&j->out, a.data);
    gp_buf_free(&a);
    return rc;
}

static int job_frame_sse(gp_speech_job *j) {
    if (!j->sse || j->raw.len == 0) return 0;
    int rc;
    if (j->sse_style == GP_SSE_EL_LINES) {
        rc = gp_buf_append_str(&j->out, "{\"audio_base64\":\"");
        rc |= gp_base64_append(&j->out, j->raw.data, j->raw.len);
        rc |= gp_buf_append_str(&j->out, "\"}\n");
        gp_buf_clear(&j->raw);
        return rc;
    }
    if (j->sse_style == GP_SSE_EL_OBJECT) return job_frame_el_object(j, false);
    if (j->sse_style == GP_SSE_CARTESIA) {
        double now = gp_now_s();
        rc = gp_buf_append_str(&j->out, "event: chunk\ndata: {\"type\":\"chunk\",\"data\":\"");
        rc |= gp_base64_append(&j->out, j->raw.data, j->raw.len);
        rc |= gp_buf_printf(&j->out, "\",\"done\":false,\"status_code\":206,\"step_time\":%.3f",
                            (now - j->last_chunk_s) * 1000.0);
        rc |= append_context_id(j);
        rc |= gp_buf_append_str(&j->out, "}\n\n");
        j->last_chunk_s = now;
    } else {
        rc = gp_buf_append_str(&j->out, "data: {\"type\":\"speech.audio.delta\",\"audio\":\"");
        rc |= gp_base64_append(&j->out, j->raw.data, j->raw.len);
        rc |= gp_buf_append_str(&j->out, "\"}\n\n");
    }
    gp_buf_clear(&j->raw);
    return rc;
}

/* Change the volume, speed and rate when asked, then encode (audio_pipe.h).
 * `flush`: the end of the audio, so the changers give out what they hold. */
static int job_encode(gp_speech_job *j, const float *x, size_t n, bool flush) {
    gp_error err;
    gp_error_clear(&err);
    if (gp_audio_pipe_push(&j->pipe, x, n, flush, &err)) return job_fail(j, err.message);
    if (job_frame_sse(j)) return job_fail(j, "out of memory framing the audio");
    return 0;
}

/* Take what the engine delivered and encode it. Returns the number of
 * samples taken. */
static size_t job_take(gp_speech_job *j) {
    pthread_mutex_lock(&j->lock);
    float *p = j->pending;
    size_t n = j->n_pending, cap = j->cap_pending;
    j->pending = j->taken;
    j->cap_pending = j->cap_taken;
    j->n_pending = 0;
    bool overflow = j->overflow;
    pthread_mutex_unlock(&j->lock);
    j->taken = p;
    j->cap_taken = cap;
    if (j->said) gp_voiced_span_feed(&j->voiced, p, n);
    if (n && !j->failed) job_encode(j, p, n, false);
    if (overflow)
        job_fail(j, "the client is not reading the audio fast enough; the stream was stopped");
    return n;
}

static void job_record(gp_speech_job *j) {
    if (j->recorded || !j->started) return;
    j->recorded = true;
    gp_metrics_stream_finished(j->server->metrics, &j->result, j->disconnected);
}

/* The last event of a successful SSE answer (Cartesia's: after the
 * estimated word times when they were asked for). */
static void job_append_done(gp_speech_job *j) {
    if (j->sse_style == GP_SSE_EL_LINES || j->sse_style == GP_SSE_EL_OBJECT) {
        if (j->sse_style == GP_SSE_EL_LINES)
            gp_buf_append_str(&j->out, "{\"audio_base64\":\"\"");
        else
            job_frame_el_object(j, true);
        job_append_el_alignment(j);
        gp_buf_append_str(&j->out, "}\n");
        return;
    }
    if (j->sse_style == GP_SSE_CARTESIA) {
        if (j->said) {
            gp_buf_append_str(&j->out, "event: timestamps\ndata: {\"type\":\"timestamps\","
                                       "\"done\":false,\"status_code\":206,\"estimated\":true,"
                                       "\"word_timestamps\":");
            gp_word_times_append(&j->out, j->said, &j->voiced, j->native_rate, j->speed, 0);
            append_context_id(j);
            gp_buf_append_str(&j->out, "}\n\n");
        }
        gp_buf_append_str(&j->out, "event: done\ndata: {\"type\":\"done\",\"done\":true,"
                                   "\"status_code\":200");
        append_context_id(j);
        gp_buf_append_str(&j->out, "}\n\n");
        return;
    }
    size_t out_tokens = j->result.frames;
    gp_buf_printf(&j->out,
                  "data: {\"type\":\"speech.audio.done\",\"usage\":{\"input_tokens\":%zu,"
                  "\"output_tokens\":%zu,\"total_tokens\":%zu}}\n\n",
                  j->input_tokens, out_tokens, j->input_tokens + out_tokens);
}

static void job_append_sse_error(gp_speech_job *j) {
    if (j->sse_style == GP_SSE_EL_LINES || j->sse_style == GP_SSE_EL_OBJECT) {
        /* ElevenLabs' error shape: a line of its own, or the object closed with it */
        if (j->el_object_open) {
            job_frame_el_object(j, true);
            gp_buf_append_str(&j->out, ",");
        } else {
            gp_buf_append_str(&j->out, "{");
        }
        gp_buf_append_str(&j->out, "\"detail\":{\"status\":\"synthesis_failed\",\"message\":");
        gp_json_append_string(&j->out, j->error);
        gp_buf_append_str(&j->out, "}}\n");
        return;
    }
    if (j->sse_style == GP_SSE_CARTESIA) {
        gp_buf_append_str(&j->out, "event: error\ndata: {\"type\":\"error\",\"done\":true,"
                                   "\"status_code\":500,\"title\":\"Synthesis failed\","
                                   "\"error_code\":\"synthesis_failed\",\"message\":");
        gp_json_append_string(&j->out, j->error);
        gp_buf_append_str(&j->out, ",\"request_id\":");
        gp_json_append_string(&j->out, j->request_id);
        append_context_id(j);
        gp_buf_append_str(&j->out, "}\n\n");
        return;
    }
    gp_buf_append_str(&j->out, "data: {\"type\":\"error\",\"error\":{\"message\":");
    gp_json_append_string(&j->out, j->error);
    gp_buf_append_str(&j->out, ",\"type\":\"server_error\",\"param\":null,\"code\":null}}\n\n");
}

/* The stream has ended: collect its result, flush the encoder. */
static void job_finish(gp_speech_job *j) {
    while (job_take(j) > 0) {
    }
    gepard_status st = gepard_stream_wait(j->stream, &j->result);
    if (st != GEPARD_OK && !j->failed) job_fail(j, gepard_last_error());
    if (!j->failed) {
        gp_error err;
        gp_error_clear(&err);
        if (job_encode(j, NULL, 0, true) == 0) { /* what the speed and rate changers hold */
            if (gp_audio_pipe_finish(&j->pipe, &err) || job_frame_sse(j)) job_fail(j, err.message);
        }
    }
    if (j->sse) {
        if (j->failed)
            job_append_sse_error(j);
        else
            job_append_done(j);
    }
    j->ended = true;
    job_record(j);
}

void gp_job_pump(gp_speech_job *j) {
    if (j->ended) return;
    size_t n = job_take(j);
    double now = gp_now_s();
    if (!j->failed && (n == 0 || now >= j->next_check)) {
        j->next_check = now + 0.1;
        if (gp_http_peer_gone(j->fd)) {
            j->disconnected = true;
            job_fail(j, "the client closed the connection");
        } else if (now > j->deadline) {
            job_fail(j, "the request ran past the server's time limit and was stopped");
        }
    }
    if (n > 0 && !j->failed) return;
    if (j->failed || gepard_stream_done(j->stream)) job_finish(j);
}

ssize_t gp_job_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    gp_speech_job *j = cls;
    for (;;) {
        size_t avail = j->out.len - j->out_pos;
        if (avail > 0) {
            size_t n = avail < max ? avail : max;
            memcpy(buf, j->out.data + j->out_pos, n);
            j->out_pos += n;
            if (j->out_pos == j->out.len) {
                gp_buf_clear(&j->out);
                j->out_pos = 0;
            }
            return (ssize_t)n;
        }
        if (j->ended) {
            /* A broken audio stream must look broken: end without the final
             * chunk. SSE carries its error as an event and ends normally. */
            if (j->failed && !j->sse) return MHD_CONTENT_READER_END_WITH_ERROR;
            return MHD_CONTENT_READER_END_OF_STREAM;
        }
        size_t before = j->out.len;
        gp_job_pump(j);
        /* Nothing new: wait suspended for the engine's next audio (or the
         * end, a hang-up or the deadline; see wake.c). */
        if (j->out.len == before && !j->ended && gp_wake_suspend(j->server, j->wake)) return 0;
    }
}

void gp_job_free_cb(void *cls) { gp_job_free(cls); }

/* Free a job whose stream has finished (or never started). */
static void job_release(gp_speech_job *j) {
    if (j->stream) {
        gp_server_job_unregister(j->server, j);
        if (!j->ended) {
            gepard_stream_wait(j->stream, &j->result); /* finished: returns at once */
            job_record(j);
        }
        gepard_stream_free(j->stream);
    }
    if (j->log) {
        if (j->stream || j->result.frames) {
            j->log->frames = (long)j->result.frames;
            j->log->ttfa_ms = j->result.frames ? j->result.ttfa_ms : -1;
        }
        j->log->disconnected = j->disconnected;
        gp_access_log_write(j->server, j->log);
        free(j->log);
    }
    gp_wake_forget(j->server, &j->own_wake);
    if (j->pipe_open) gp_audio_pipe_free(&j->pipe);
    free(j->said);
    gepard_voice_free(j->own_voice);
    free(j->pending);
    free(j->taken);
    gp_buf_free(&j->raw);
    gp_buf_free(&j->out);
    pthread_mutex_destroy(&j->lock);
    free(j);
}

void gp_job_free(gp_speech_job *j) {
    if (!j) return;
    if (j->stream && !j->ended) {
        /* Unless the server gave up on it, the client went away (a failed
         * write) before the end. */
        if (!j->failed) j->disconnected = true;
        gepard_stream_cancel(j->stream);
        if (!gepard_stream_done(j->stream)) {
            /* The engine lets go at its next step; do not wait for it on a
             * connection thread. Its callbacks may run until then: point
             * them at the job's own wake (the request's may be freed). */
            gp_wake_retarget(j->server, &j->wake, &j->own_wake);
            gp_server_job_orphan(j->server, j);
            return;
        }
    }
    job_release(j);
}

void gp_job_reap(gp_server *s, bool wait) {
    gp_speech_job *done = NULL;
    pthread_mutex_lock(&s->lock);
    gp_speech_job **link = &s->orphans;
    while (*link) {
        gp_speech_job *j = *link;
        if (wait || gepard_stream_done(j->stream)) {
            *link = j->next_orphan;
            j->next_orphan = done;
            done = j;
        } else {
            link = &j->next_orphan;
        }
    }
    pthread_mutex_unlock(&s->lock);
    while (done) {
        gp_speech_job *next = done->next_orphan;
        job_release(done); /* waits for the engine if it has not finished yet */
        done = next;
    }
}

static void put_u32le(char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (char)(v >> (8 * i));
}

void gp_wav_patch_sizes(char *data, size_t len) {
    if (len < 44 || memcmp(data, "RIFF", 4) != 0 || memcmp(data + 36, "data", 4) != 0) return;
    if (len - 8 > 0xFFFFFFFFu) return;
    put_u32le(data + 4, (uint32_t)(len - 8));
    put_u32le(data + 40, (uint32_t)(len - 44));
}

void gp_flac_patch_length(char *data, size_t len, uint64_t samples) {
    /* "fLaC", then the STREAMINFO block's 4-byte header and 34 bytes; the
     * 36-bit sample count starts in the low nibble of its byte 13. */
    if (len < 42 || memcmp(data, "fLaC", 4) != 0 || (data[4] & 0x7f) != 0) return;
    if (samples >= ((uint64_t)1 << 36)) return;
    unsigned char *p = (unsigned char *)data + 8 + 13;
    p[0] = (unsigned char)((p[0] & 0xF0) | (unsigned)(samples >> 32));
    for (int i = 0; i < 4; i++) p[1 + i] = (unsigned char)(samples >> (24 - 8 * i));
}
