/* engine_audio.c — the step thread's audio: which frames of which streams
 * go to the codec in one call, calls queued to a codec that can (the GPU's:
 * decoded while the step thread goes on, into each stream's second buffer)
 * and collected, and the callbacks that hand the samples over. engine.c's
 * cycle calls gp_engine_deliver_during_step while a step is in flight and
 * gp_engine_audio_before_retiring after it. */
#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "base/timing.h"
#include "engine/engine_internal.h"

/* Whether advance_streams delivers this stream's audio now even while
 * deferring the running ones: it finished generating or was cancelled. */
static bool ends_this_step(const gepard_stream *s) {
    return s->gen && !s->stop_pending &&
           (s->gen->phase == GP_GEN_DONE || atomic_load(&s->cancel_requested));
}

/* Decode the new frames of streams with the same number of them in one
 * pass over the codec's weights per count (bit-identical to decoding them
 * one by one; a lone stream is decoded at delivery). With `only_ending`,
 * only the streams that end this step: their last frames, which would
 * otherwise each cost a codec call of their own. */
static void decode_new_frames_together(gepard_engine *e, bool only_ending) {
    if (!e->codec) return;
    const int C = e->model->model->cfg.num_channels;
    /* One batched pass per chunk length (streams in one pass decode the same
     * number of frames). */
    for (int k = 1; k <= e->max_chunk; k++) {
        int n = 0;
        for (gepard_stream *s = e->active; s; s = s->next) {
            if (!s->gen || s->pcm_ready || s->pcm_queued || (only_ending && !ends_this_step(s)) ||
                gp_stream_frames_to_decode(s) != k)
                continue;
            e->decode_owners[n] = s;
            e->decode_streams[n] = s->codec_stream->stream;
            e->decode_codes[n] = s->gen->frames + (size_t)s->frames_delivered * C;
            e->decode_pcm[n] = s->pcm;
            n++;
        }
        if (n < 2) continue;
        gp_error err;
        const uint64_t t0 = gp_now_ns();
        const int rc = gp_codec_decode_frames_multi(
            e->codec->codec, e->decode_streams, e->decode_codes, n, (size_t)k, e->decode_pcm, &err);
        const double seconds = (double)(gp_now_ns() - t0) * 1e-9;
        pthread_mutex_lock(&e->lock);
        e->stats.codec_seconds += seconds;
        e->stats.codec_batches++;
        pthread_mutex_unlock(&e->lock);
        if (rc != GEPARD_OK) {
            GP_WARN("batched codec decode failed (%s); decoding stream by stream", err.message);
            continue;
        }
        for (int i = 0; i < n; i++) e->decode_owners[i]->pcm_ready = k;
    }
}

/* The step thread's time in a codec call (not under the lock). */
static void account_codec(gepard_engine *e, uint64_t t0) {
    const double seconds = (double)(gp_now_ns() - t0) * 1e-9;
    pthread_mutex_lock(&e->lock);
    e->stats.codec_seconds += seconds;
    e->stats.codec_batches++;
    pthread_mutex_unlock(&e->lock);
}

/* The queued decode's streams get their samples once it is done (pcm_next
 * becomes pcm, pcm_ready its frames); with `wait` it is waited for. A failed
 * decode stops its streams. */
void gp_engine_collect_queued(gepard_engine *e, bool wait) {
    if (!e->n_queued) return;
    gp_error err;
    gp_error_clear(&err);
    bool done = true;
    const uint64_t t0 = gp_now_ns();
    const int rc = gp_codec_collect(e->codec->codec, wait, &done, &err);
    if (rc == GEPARD_OK && !done) return;
    /* counted with the cycle (callers may hold the lock) */
    if (wait) e->codec_wait_seconds += (double)(gp_now_ns() - t0) * 1e-9;
    for (int i = 0; i < e->n_queued; i++) {
        gepard_stream *s = e->codec_queued[i];
        if (rc == GEPARD_OK) {
            /* pcm was delivered before this call was queued, or the stream
             * is stopping (its audio no longer goes anywhere) */
            float *ready = s->pcm_next;
            s->pcm_next = s->pcm;
            s->pcm = ready;
            s->pcm_ready = s->pcm_queued;
        } else {
            s->status = GEPARD_ERR_INTERNAL;
            snprintf(s->message, sizeof s->message, "decoding audio: %s", err.message);
            s->stop_pending = true;
        }
        s->pcm_queued = 0;
    }
    e->n_queued = 0;
}

/* Whether a stream will step again and gets its next frames' audio by a
 * queued call: generating, not ending, not stopping. */
bool gp_engine_keeps_running(const gepard_stream *s) {
    return s->gen && s->gen->phase != GP_GEN_DONE && !s->stop_pending &&
           !atomic_load(&s->cancel_requested);
}

/* Queue the audio of running streams (when nothing is queued) as one codec
 * call: every stream with frames due, each decoding as many as the one with
 * the fewest (a call decodes the same number of frames per stream; the rest
 * follow in the next call), after what it already has decoded (pcm_ready)
 * and into pcm_next. */
static void queue_decode(gepard_engine *e) {
    if (e->n_queued) return;
    int k = 0;
    for (gepard_stream *s = e->active; s; s = s->next) {
        if (!gp_engine_keeps_running(s) || s->pcm_queued) continue;
        const int due = gp_stream_frames_to_queue(s);
        if (due > 0 && (k == 0 || due < k)) k = due;
    }
    if (!k) return;
    const int C = e->model->model->cfg.num_channels;
    int n = 0;
    for (gepard_stream *s = e->active; s; s = s->next) {
        if (!gp_engine_keeps_running(s) || s->pcm_queued || gp_stream_frames_to_queue(s) < k)
            continue;
        e->codec_queued[n] = s;
        e->decode_streams[n] = s->codec_stream->stream;
        e->decode_codes[n] = s->gen->frames + (size_t)(s->frames_delivered + s->pcm_ready) * C;
        e->decode_pcm[n] = s->pcm_next;
        n++;
    }
    gp_error err;
    gp_error_clear(&err);
    const uint64_t t0 = gp_now_ns();
    const int rc = gp_codec_decode_frames_queue(e->codec->codec, e->decode_streams, e->decode_codes,
                                                n, (size_t)k, e->decode_pcm, &err);
    account_codec(e, t0);
    for (int i = 0; i < n; i++) {
        gepard_stream *s = e->codec_queued[i];
        if (rc == GEPARD_OK) {
            s->pcm_queued = k;
        } else {
            s->status = GEPARD_ERR_INTERNAL;
            snprintf(s->message, sizeof s->message, "decoding audio: %s", err.message);
            s->stop_pending = true;
        }
    }
    e->n_queued = rc == GEPARD_OK ? n : 0;
}

/* The audio already decoded of every running stream to its callbacks. */
static void deliver_ready(gepard_engine *e) {
    for (gepard_stream *s = e->active; s; s = s->next)
        if (s->gen && s->gen->phase != GP_GEN_DONE && !s->stop_pending && s->pcm_ready &&
            gp_stream_deliver(e, s, false))
            s->stop_pending = true;
}

/* While a device step is in flight: decode and deliver the audio of frames
 * sampled by earlier steps for every stream that is still generating (the
 * codec overlaps the GPU). With a queueing codec: collect the call an
 * earlier cycle queued (a light load only if it is done; under load it is
 * waited for), queue the next one, then run the callbacks while the GPU
 * decodes. Nothing is freed or finished here — the step still refers to
 * these streams; a stream whose callback asked to stop is marked and
 * finished after the step. */
void gp_engine_deliver_during_step(gepard_engine *e) {
    const bool queue = e->queue_codec && (e->light_this_cycle || e->queue_heavy);
    if (queue) {
        deliver_ready(e); /* what an earlier collect left (normally nothing) */
        gp_engine_collect_queued(e, !e->light_this_cycle);
        queue_decode(e);
        deliver_ready(e);
        return;
    }
    gp_engine_collect_queued(e, true); /* the load just grew past the light one */
    decode_new_frames_together(e, false);
    for (gepard_stream *s = e->active; s; s = s->next) {
        if (!s->gen || s->gen->phase == GP_GEN_DONE || s->stop_pending) continue;
        if (gp_stream_deliver(e, s, true)) s->stop_pending = true;
    }
}

/* After a step, before streams are retired: collect a queued call (waiting
 * only when no stream runs on to collect it later), deliver the ending
 * streams' decoded audio and decode the rest of theirs in batched calls. */
void gp_engine_audio_before_retiring(gepard_engine *e, bool defer_running) {
    if (e->n_queued) {
        /* A queued stream that ends now is retired by a later cycle, after
         * its call is collected there — unless no stream runs on to make
         * one: then it is waited for now. Else only a look whether it is
         * done (its audio goes now, not a cycle later). */
        bool others = false;
        for (const gepard_stream *s = e->active; s && !others; s = s->next)
            others = gp_engine_keeps_running(s);
        gp_engine_collect_queued(e, !defer_running || !others);
    }
    /* An ending stream's audio already decoded goes first, so the rest of
     * every ending stream's frames decodes in one batched call below (one
     * codec call each, every one waiting for the queued call, stalled a
     * loaded cycle whenever many streams ended at once) */
    for (gepard_stream *s = e->active; s; s = s->next)
        if (ends_this_step(s) && s->pcm_ready && !s->pcm_queued && gp_stream_deliver(e, s, false))
            s->stop_pending = true;
    decode_new_frames_together(e, defer_running);
}
