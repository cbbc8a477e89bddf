/* engine.c — the engine's step thread: admission from a FIFO queue into a
 * fixed number of stream slots (each admitted segment reserves its worst-case
 * KV blocks), one batched generation step over every active stream, audio
 * delivery (the codec calls: engine_audio.c), segment hand-over and
 * completion. See gepard.h for the contract. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "base/log.h"
#include "base/timing.h"
#include "engine/api_error.h"
#include "engine/engine_internal.h"

#define ENGINE_KV_BLOCK 16
/* Prefill rows per step when no stream is decoding. */
#define ENGINE_IDLE_PREFILL_ROWS 1024

gepard_engine_params gepard_engine_default_params(void) {
    gepard_engine_params p = {
        .threads = 0, .max_streams = 16, .max_queue = 64, .prefill_chunk = 0, .kv_cache_mb = 0};
    return p;
}

/* Mark a stream finished and wake its waiter; called with the lock held.
 * The owner frees the struct (or we do, if the owner already let go). */
static void finish_locked(gepard_engine *e, gepard_stream *s, gepard_status status,
                          const char *message) {
    gp_stream_release_resources(e, s);
    s->status = status;
    if (message != s->message)
        snprintf(s->message, sizeof s->message, "%s", message ? message : "");
    s->result.status = status;
    s->state = STREAM_DONE;
    e->stats.streams_finished++;
    if (s->callbacks.on_done && !s->owner_released) s->callbacks.on_done(status, s->callbacks.user);
    if (s->owner_released) {
        pthread_cond_destroy(&s->finished);
        free(s);
        return;
    }
    pthread_cond_broadcast(&s->finished);
}

static void active_remove(gepard_engine *e, gepard_stream *s) {
    gepard_stream **link = &e->active;
    while (*link && *link != s) link = &(*link)->next;
    if (*link) {
        *link = s->next;
        e->active_count--;
    }
    s->next = NULL;
}

/* Move queued streams into slots while slots and KV blocks allow. Lock held. */
static void admit_locked(gepard_engine *e) {
    if (e->admission_begin_service) { /* (gp_engine_restart_counters, after a warm-up) */
        if (e->pace_bursts) gp_admission_begin_service(&e->admission);
        e->admission_begin_service = false;
    }
    e->stats.realtime_capacity = gp_admission_capacity(&e->admission, e->active_count);
    const int limit = e->pace_bursts ? gp_admission_admit_limit(&e->admission, e->active_count)
                                     : e->stats.realtime_capacity;
    while (e->queue_head && e->active_count < limit) {
        gepard_stream *s = e->queue_head;
        if (atomic_load(&s->cancel_requested)) {
            e->queue_head = s->next;
            if (!e->queue_head) e->queue_tail = NULL;
            e->queued--;
            finish_locked(e, s, GEPARD_ERR_CANCELLED, "cancelled before it started");
            continue;
        }
        gp_error err;
        gp_error_clear(&err);
        bool no_more = false;
        int rc = gp_stream_begin_segment(e, s, &no_more, &err);
        if (rc == GEPARD_ERR_BUSY && e->active_count > 0) break; /* wait for blocks */
        if (rc == GEPARD_ERR_BUSY) /* even an idle engine cannot hold it */
            rc = gp_fail(&err, GEPARD_ERR_INVALID_ARGUMENT,
                         "this request needs more KV cache than the engine has (%d positions "
                         "of %d): lower max_frames or shorten the text",
                         gp_stream_positions_needed(s), e->kv->num_blocks * e->kv->block_size);
        e->queue_head = s->next;
        if (!e->queue_head) e->queue_tail = NULL;
        e->queued--;
        s->next = NULL;
        if (rc || no_more) {
            finish_locked(e, s, rc ? (gepard_status)rc : GEPARD_OK, rc ? err.message : NULL);
            continue;
        }
        s->state = STREAM_RUNNING;
        s->admitted_time = gp_now_s();
        s->result.queue_ms = (s->admitted_time - s->start_time) * 1e3;
        /* Append: earlier requests get their prefill first (FIFO). */
        s->next = NULL;
        gepard_stream **tail = &e->active;
        while (*tail) tail = &(*tail)->next;
        *tail = s;
        e->active_count++;
    }
}

bool gp_engine_prefill_now(gepard_engine *e, int decode_rows, int waiting, bool started) {
    if (waiting == 0 || e->prefill_every <= 1 || decode_rows < e->gather_min_rows || started ||
        waiting >= GP_ENGINE_GATHER_MAX_STREAMS || ++e->prefill_waited >= e->prefill_every) {
        e->prefill_waited = 0;
        return true;
    }
    e->prefill_holds++;
    return false;
}

int gp_engine_chunk_frames(const gepard_engine *e, int active) {
    if (!e->gpu_codec) return GP_ENGINE_CHUNK_FRAMES;
    /* chunks only while few streams share the codec */
    return active <= GP_ENGINE_GPU_CHUNK_STREAMS ? e->light_chunk_frames : 1;
}

/* deliver_during_step, and the seconds it took. */
static double deliver_timed(gepard_engine *e) {
    const uint64_t t0 = gp_now_ns();
    gp_engine_deliver_during_step(e);
    return (double)(gp_now_ns() - t0) * 1e-9;
}

/* After a step: deliver audio, hand finished segments over to the next one,
 * finish streams. Runs without the lock except for finishing. With
 * `defer_running`, streams still generating keep their new frames for
 * deliver_during_step of the next step; only finished, cancelled or stopped
 * streams are delivered and retired now. */
static void advance_streams(gepard_engine *e, bool defer_running) {
    gp_engine_audio_before_retiring(e, defer_running);
    gepard_stream *s = e->active;
    while (s) {
        gepard_stream *next = s->next;
        if (s->pcm_queued) { /* its audio comes from a queued call (above) */
            s = next;
            continue;
        }
        if (defer_running && gp_engine_keeps_running(s)) {
            /* audio a queued call finished goes now, not a cycle later */
            if (s->pcm_ready && gp_stream_deliver(e, s, false)) s->stop_pending = true;
            if (!s->stop_pending) {
                s = next;
                continue;
            }
        }
        if (!s->gen) { /* between segments, waiting for KV blocks */
            if (atomic_load(&s->cancel_requested)) {
                pthread_mutex_lock(&e->lock);
                active_remove(e, s);
                finish_locked(e, s, GEPARD_ERR_CANCELLED, "cancelled");
                pthread_mutex_unlock(&e->lock);
            }
            s = next;
            continue;
        }
        int stop = s->stop_pending ? 1 : gp_stream_deliver(e, s, true);
        bool cancel = atomic_load(&s->cancel_requested) != 0;
        if (!stop && !cancel && s->gen->phase == GP_GEN_DONE) {
            gp_error err;
            gp_error_clear(&err);
            bool no_more = false;
            s->result.segments++;
            gp_gen_free(s->gen, e->kv);
            s->gen = NULL;
            int rc = gp_stream_begin_segment(e, s, &no_more, &err);
            if (rc == GEPARD_ERR_BUSY && e->active_count > 1) {
                /* Blocks are held by other streams: retry before each step. */
            } else if (rc || no_more) {
                pthread_mutex_lock(&e->lock);
                active_remove(e, s);
                finish_locked(e, s, rc ? (gepard_status)rc : GEPARD_OK, rc ? err.message : NULL);
                pthread_mutex_unlock(&e->lock);
            }
        } else if (stop || cancel) {
            pthread_mutex_lock(&e->lock);
            active_remove(e, s);
            if (stop)
                finish_locked(e, s, s->status, s->message);
            else
                finish_locked(e, s, GEPARD_ERR_CANCELLED, "cancelled");
            pthread_mutex_unlock(&e->lock);
        }
        s = next;
    }
}

/* Account a step of n streams (under the lock: gepard_engine_get_stats
 * reads the stats) before its frames are delivered, so a stream that ends
 * with this step is already counted when its waiter wakes. */
static void count_step(gepard_engine *e, int n) {
    uint64_t frames = 0;
    for (const gepard_stream *s = e->active; s; s = s->next)
        if (s->gen && s->gen->n_frames > s->frames_signaled)
            frames += (uint64_t)(s->gen->n_frames - s->frames_signaled);
    pthread_mutex_lock(&e->lock);
    e->stats.steps++;
    e->stats.frames += frames;
    e->batch_sum += n;
    if (n > e->stats.max_batch) e->stats.max_batch = n;
    pthread_mutex_unlock(&e->lock);
}

static void fail_all_active_locked(gepard_engine *e, const char *message) {
    gp_engine_collect_queued(e, true); /* its samples must not land in freed buffers */
    while (e->active) {
        gepard_stream *s = e->active;
        active_remove(e, s);
        finish_locked(e, s, GEPARD_ERR_INTERNAL, message);
    }
}

static void fail_all_active(gepard_engine *e, const char *message) {
    pthread_mutex_lock(&e->lock);
    fail_all_active_locked(e, message);
    pthread_mutex_unlock(&e->lock);
}

/* Active streams between two segments (their next segment did not fit in
 * the KV cache yet) go before new admissions. Lock held. */
static void resume_waiting_segments_locked(gepard_engine *e) {
    gepard_stream *s = e->active;
    while (s) {
        gepard_stream *next = s->next;
        if (!s->gen) {
            gp_error err;
            gp_error_clear(&err);
            bool no_more = false;
            int rc = gp_stream_begin_segment(e, s, &no_more, &err);
            if (rc == GEPARD_ERR_BUSY && e->active_count > 1) return; /* keep order: wait */
            if (rc || no_more) {
                active_remove(e, s);
                finish_locked(e, s, rc ? (gepard_status)rc : GEPARD_OK, rc ? err.message : NULL);
            }
        }
        s = next;
    }
}

static bool any_waiting_segment(const gepard_engine *e) {
    for (const gepard_stream *s = e->active; s; s = s->next)
        if (!s->gen) return true;
    return false;
}

static void *engine_thread_main(void *arg) {
    gepard_engine *e = arg;
    pthread_mutex_lock(&e->lock);
    for (;;) {
        resume_waiting_segments_locked(e);
        if (!any_waiting_segment(e)) admit_locked(e);
        if (e->stopping && !e->active && !e->queue_head) break;
        if (!e->active) {
            pthread_cond_wait(&e->wake, &e->lock);
            continue;
        }
        int n = 0;
        for (gepard_stream *s = e->active; s; s = s->next)
            if (s->gen) e->step_streams[n++] = s->gen;
        if (n == 0) { /* every active stream waits for KV blocks nobody holds */
            fail_all_active_locked(e, "the KV cache is too small for the next sentence");
            continue;
        }
        e->chunk_frames = gp_engine_chunk_frames(e, e->active_count);
        e->light_this_cycle = e->active_count <= GP_ENGINE_GPU_CHUNK_STREAMS;
        e->in_cycle = true;
        pthread_mutex_unlock(&e->lock);
        gp_error err;
        gp_error_clear(&err);
        /* While streams are decoding, bound the prefill rows per step so
         * their next frame is not held back long; when nobody is decoding,
         * prefill as much as possible at once (time to first audio). The
         * budget counts the decode rows too, so with prefill_chunk streams
         * decoding nothing is prefilled until one of them ends: 1024
         * concurrent requests on a GPU run in two waves of ~512.
         * A GPU gets prefill_chunk rows on top of its decode rows instead
         * (GEPARD_GPU_PREFILL_ON_TOP=0: in the budget): alone, measured on
         * the H200 (serve12, 1024 requests at once), first audio p50 2.5 s
         * -> 0.5 s with 150-400 underruns, since the admission's warm-up
         * figures let the whole burst in to decode at ~34 ms a cycle; with
         * the admission pacing a burst (on by default on a GPU, admission.h)
         * 1,807-1,843 s of audio per second at 512-1024 requests against
         * 1,587-1,641, first audio p50 0.1-0.17 s against 0.26-3.3 s, no
         * underrun (2026-12-05, serve12-ontop-paced). */
        const bool on_device = gp_gen_on_device(e->model->model);
        const int decode_rows = gp_gen_decode_rows(e->step_streams, n);
        int n_decoding = 0; /* what a cycle's cost grows with (admission) */
        for (int i = 0; i < n; i++) n_decoding += e->step_streams[i]->phase == GP_GEN_DECODE;
        int budget = decode_rows ? e->params.prefill_chunk : ENGINE_IDLE_PREFILL_ROWS;
        if (on_device && decode_rows && e->prefill_on_top) budget += decode_rows;
        if (on_device && decode_rows && e->prefill_every > 1) { /* gathered prefills */
            bool started = false;
            const int waiting = gp_gen_prefill_waiting(e->step_streams, n, &started);
            if (!gp_engine_prefill_now(e, decode_rows, waiting, started))
                budget = decode_rows; /* decode rows alone: the step's graph */
        }
        uint64_t t0 = gp_now_ns();
        int worked;
        double overlapped = 0;
        if (on_device) {
            /* Queue the step on the GPU, decode earlier frames' audio on the
             * CPU meanwhile, then collect the step. */
            worked = gp_gen_step_begin(e->step_streams, n, e->kv, &e->work, budget, e->pool, &err);
            e->prof_begin += (double)(gp_now_ns() - t0) * 1e-9;
            if (worked > 0) {
                /* the audio during the step, or after it (GEPARD_GPU_OVERLAP_CODEC=0) */
                if (e->overlap_codec) overlapped = deliver_timed(e);
                const uint64_t te = gp_now_ns();
                worked = gp_gen_step_end(e->step_streams, n, e->kv, &e->work, e->pool, &err);
                e->prof_end += (double)(gp_now_ns() - te) * 1e-9;
                if (!e->overlap_codec && worked >= 0) overlapped = deliver_timed(e);
                e->prof_deliver += overlapped;
            }
        } else {
            /* a codec that queues (a GPU's) decodes earlier frames while the
             * CPU steps, as it does beside a GPU step */
            if (e->queue_codec) overlapped = deliver_timed(e);
            const uint64_t ts = gp_now_ns();
            worked = gp_gen_step(e->step_streams, n, e->kv, &e->work, budget, e->pool, &err);
            e->prof_end += (double)(gp_now_ns() - ts) * 1e-9; /* the whole step, on the CPU */
            e->prof_deliver += overlapped;
        }
        uint64_t t1 = gp_now_ns();
        if (worked < 0) {
            GP_ERROR("engine step failed: %s", err.message);
            fail_all_active(e, err.message);
        } else {
            count_step(e, n);
            advance_streams(e, on_device || e->queue_codec);
            uint64_t t2 = gp_now_ns();
            e->prof_advance += (double)(t2 - t1) * 1e-9;
            /* The admission state is the step thread's own: no lock for it.
             * A cycle is recorded against the streams that decoded in it: an
             * admitted stream still waiting for its prefill costs a cycle
             * little now and a decode row for the rest of its life, so
             * measuring by active streams let a burst of 1024 requests in
             * at once on cycles that were cheap only while most of them
             * prefilled (and they then ran near the frame period, with
             * underruns). */
            if (n_decoding)
                gp_admission_record(&e->admission, n_decoding, (double)(t2 - t0) * 1e-9);
            const double cycle_ms =
                gp_admission_projected(&e->admission, n_decoding ? n_decoding : n) * 1e3;
            pthread_mutex_lock(&e->lock);
            e->stats.step_seconds += (double)(t1 - t0) * 1e-9 - overlapped;
            e->stats.step_wait_seconds = e->work.wait_seconds;
            e->stats.deliver_seconds += (double)(t2 - t1) * 1e-9 + overlapped;
            e->stats.codec_seconds += e->codec_wait_seconds;
            e->codec_wait_seconds = 0;
            e->stats.cycle_ms = cycle_ms;
            pthread_mutex_unlock(&e->lock);
        }
        pthread_mutex_lock(&e->lock);
        e->in_cycle = false;
        pthread_cond_broadcast(&e->cycle_done);
    }
    pthread_mutex_unlock(&e->lock);
    return NULL;
}

static int kv_blocks_for_engine(const gepard_engine *e) {
    const gp_model *m = e->model->model;
    const gp_backbone_config *bb = &m->cfg.backbone;
    /* A GPU keeps bf16 keys and values unless it runs in f32. */
    const size_t elem = m->device && m->device->spec.precision == GP_DEV_BF16 ? 2 : sizeof(float);
    size_t block_bytes =
        (size_t)bb->num_layers * 2 * bb->num_kv_heads * ENGINE_KV_BLOCK * bb->head_dim * elem;
    size_t blocks;
    if (e->params.kv_cache_mb > 0) {
        blocks = (size_t)e->params.kv_cache_mb * 1024 * 1024 / block_bytes;
    } else {
        /* Each stream may need 2 branches (CFG) of up to 4096 positions. */
        blocks = (size_t)e->params.max_streams * 2 * (4096 / ENGINE_KV_BLOCK + 2);
        gp_dev_info info;
        gp_dev_status st = {0, ""};
        /* ... but on a GPU no more than 60% of the memory free now. */
        if (m->device && m->device->plugin->device_info(m->device->spec.index, &info, &st) == 0 &&
            blocks * block_bytes > info.memory_free / 10 * 6)
            blocks = info.memory_free / 10 * 6 / block_bytes;
    }
    if (blocks < 64) blocks = 64;
    if (blocks > (1u << 24)) blocks = 1u << 24;
    return (int)blocks;
}

gepard_status gepard_engine_create(gepard_model *model, const gepard_codec *codec,
                                   const gepard_engine_params *params, gepard_engine **out) {
    *out = NULL;
    gp_error err;
    gp_error_clear(&err);
    gepard_engine *e = calloc(1, sizeof *e);
    if (!e) return gp_api_failf(GEPARD_ERR_NOMEM, "out of memory");
    e->model = model;
    e->codec = codec;
    e->params = params ? *params : gepard_engine_default_params();
    if (e->params.max_streams < 1) e->params.max_streams = 1;
    if (e->params.max_streams > 4096) e->params.max_streams = 4096;
    if (e->params.max_queue < 0) e->params.max_queue = 0;
    /* 0 = automatic: a CPU step costs ~a row's weights, so few prefill rows
     * keep decoding streams fluent; a GPU step reads its weights once for
     * hundreds of rows almost for free. */
    if (e->params.prefill_chunk <= 0)
        e->params.prefill_chunk = gp_gen_on_device(model->model) ? 512 : 32;
    if (!(e->params.realtime_margin >= 0)) e->params.realtime_margin = 0; /* NaN, < 0 */
    e->gpu_codec = codec && codec->codec->accel;
    e->light_chunk_frames = GP_ENGINE_GPU_CHUNK_FRAMES;
    e->max_chunk = e->gpu_codec ? GP_ENGINE_GPU_MAX_CHUNK : GP_ENGINE_MAX_CHUNK;
    e->wait_headroom = e->gpu_codec ? GP_ENGINE_GPU_HEADROOM : GP_ENGINE_PAIR_HEADROOM;
    /* GEPARD_GPU_PREFILL_EVERY=K (1-16): under load, new streams' prefills
     * gathered into every K-th cycle (engine_internal.h, prefill_every);
     * GEPARD_GPU_PREFILL_GATHER_ROWS=N: from N decode rows on (tests) */
    const char *every = getenv("GEPARD_GPU_PREFILL_EVERY");
    e->prefill_every = every && atoi(every) >= 1 && atoi(every) <= 16 ? atoi(every) : 1;
    const char *gather_rows = getenv("GEPARD_GPU_PREFILL_GATHER_ROWS");
    e->gather_min_rows = gather_rows && atoi(gather_rows) >= 1 ? atoi(gather_rows)
                                                               : GP_ENGINE_GATHER_MIN_DECODE_ROWS;
    /* the admission paces a burst (admission.h: the warm-up's figures
     * provisional, a quarter more streams per cycle) on a GPU, where it lets
     * prefill go on top of the decode rows (below); GEPARD_ENGINE_PACE_BURSTS
     * =0 or =1 decides instead */
    const bool on_device = gp_gen_on_device(model->model);
    const char *pace = getenv("GEPARD_ENGINE_PACE_BURSTS");
    e->pace_bursts = pace ? !strcmp(pace, "1") : on_device;
    const char *first_audio = getenv("GEPARD_ENGINE_FIRST_AUDIO_FRAMES");
    e->first_audio_frames = GP_ENGINE_FIRST_AUDIO_FRAMES;
    if (first_audio && atoi(first_audio) >= 1 && atoi(first_audio) <= GP_ENGINE_GPU_MAX_CHUNK)
        e->first_audio_frames = atoi(first_audio);
    /* GEPARD_GPU_CHUNK_FRAMES=1..16 sets the light-load GPU chunk (for
     * measurements; 1 decodes every frame at once, as before the second
     * session of 2026-12-02, 4 the chunks of the next two sessions) */
    /* GEPARD_GPU_OVERLAP_CODEC=0: the audio after the backbone's step instead
     * of during it (for measurements) */
    const char *overlap = getenv("GEPARD_GPU_OVERLAP_CODEC");
    e->overlap_codec = !(overlap && !strcmp(overlap, "0"));
    /* a GPU's prefill rows on top of its decode rows (the step thread's
     * budget, engine_thread_main); GEPARD_GPU_PREFILL_ON_TOP=0 counts them
     * in the budget instead */
    const char *on_top = getenv("GEPARD_GPU_PREFILL_ON_TOP");
    e->prefill_on_top = on_device && !(on_top && !strcmp(on_top, "0"));
    const char *queue = getenv("GEPARD_ENGINE_QUEUE_CODEC");
    e->queue_codec = codec && gp_codec_can_queue(codec->codec) && !(queue && !strcmp(queue, "0"));
    e->queue_heavy = !(queue && !strcmp(queue, "light"));
    /* GEPARD_ENGINE_PROFILE=1: where the step thread's time went, on stderr
     * when the engine is freed */
    const char *profile = getenv("GEPARD_ENGINE_PROFILE");
    e->profile = profile && !strcmp(profile, "1");
    const char *gpu_chunk = getenv("GEPARD_GPU_CHUNK_FRAMES");
    if (gpu_chunk && atoi(gpu_chunk) >= 1 && atoi(gpu_chunk) <= GP_ENGINE_GPU_MAX_CHUNK)
        e->light_chunk_frames = atoi(gpu_chunk);
    e->chunk_frames = gp_engine_chunk_frames(e, 0); /* then before every step */
    pthread_mutex_init(&e->lock, NULL);
    pthread_cond_init(&e->wake, NULL);
    pthread_cond_init(&e->cycle_done, NULL);
    gp_gen_workspace_init(&e->work);
    /* A device reserves its step buffers once for the engine's biggest step
     * (an idle prefill, a prefill chunk, or every stream decoding — two rows
     * each under guidance, a per-request option — with prefill on top), so
     * its warm-up's graphs survive into service: growing the buffers frees
     * every graph. */
    int reserve = 2 * e->params.max_streams + (e->prefill_on_top ? e->params.prefill_chunk : 0);
    if (reserve < e->params.prefill_chunk) reserve = e->params.prefill_chunk;
    if (reserve < ENGINE_IDLE_PREFILL_ROWS) reserve = ENGINE_IDLE_PREFILL_ROWS;
    e->work.device_reserve_rows = reserve;
    const gp_backbone_config *bb = &model->model->cfg.backbone;
    int rc = GEPARD_OK;
    if (codec && codec->codec->pool) {
        e->pool = codec->codec->pool; /* one set of threads for backbone and codec */
    } else {
        rc = gp_pool_create(e->params.threads, &e->pool, &err);
        e->own_pool = true;
    }
    if (!rc)
        rc = gp_kv_pool_create(bb->num_layers, bb->num_kv_heads, bb->head_dim, ENGINE_KV_BLOCK,
                               kv_blocks_for_engine(e), &e->kv, &err);
    if (!rc) rc = gp_device_kv_attach(model->model, e->kv, &err);
    if (!rc) {
        const double fps = model->model->cfg.codec.frame_rate_hz;
        if (gp_admission_init(&e->admission, e->params.max_streams, e->params.realtime_margin,
                              fps > 0 ? 1.0 / fps : 0))
            rc = gp_fail_oom(&err, "engine admission", 0);
        e->stats.realtime_capacity = gp_admission_capacity(&e->admission, 0);
    }
    if (!rc) {
        size_t n = (size_t)e->params.max_streams;
        e->step_streams = calloc(n, sizeof *e->step_streams);
        e->decode_owners = calloc(n, sizeof *e->decode_owners);
        e->decode_streams = calloc(n, sizeof *e->decode_streams);
        e->decode_codes = calloc(n, sizeof *e->decode_codes);
        e->decode_pcm = calloc(n, sizeof *e->decode_pcm);
        e->codec_queued = calloc(n, sizeof *e->codec_queued);
        if (!e->step_streams || !e->decode_owners || !e->decode_streams || !e->decode_codes ||
            !e->decode_pcm || !e->codec_queued)
            rc = gp_fail_oom(&err, "engine", 0);
    }
    if (!rc) {
        if (pthread_create(&e->thread, NULL, engine_thread_main, e) != 0)
            rc = gp_fail(&err, GEPARD_ERR_INTERNAL, "cannot start the engine thread");
        else
            e->thread_started = true;
    }
    if (rc) {
        gepard_engine_free(e);
        return gp_api_fail(&err);
    }
    e->stats.kv_blocks_total = (size_t)e->kv->num_blocks;
    *out = e;
    return gp_api_ok();
}

void gepard_engine_free(gepard_engine *e) {
    if (!e) return;
    if (e->stats.steps)
        GP_DEBUG("engine: %llu steps, %.1f ms per step in the backbone, %.1f ms delivering audio",
                 (unsigned long long)e->stats.steps,
                 e->stats.step_seconds * 1e3 / (double)e->stats.steps,
                 e->stats.deliver_seconds * 1e3 / (double)e->stats.steps);
    if (e->thread_started) {
        pthread_mutex_lock(&e->lock);
        e->stopping = true;
        for (gepard_stream *s = e->queue_head; s; s = s->next)
            atomic_store(&s->cancel_requested, 1);
        for (gepard_stream *s = e->active; s; s = s->next) atomic_store(&s->cancel_requested, 1);
        pthread_cond_broadcast(&e->wake);
        pthread_mutex_unlock(&e->lock);
        pthread_join(e->thread, NULL);
    }
    if (e->profile && e->stats.steps) { /* the step thread has stopped */
        const double k = 1e3 / (double)e->stats.steps;
        fprintf(stderr,
                "engine profile: %llu steps, mean batch %.1f; per step, ms of the step thread: "
                "queueing the step %.3f, audio during it %.3f (batched codec calls %.3f in all), "
                "collecting it %.3f (waiting for the device %.3f), after it %.3f\n",
                (unsigned long long)e->stats.steps, e->batch_sum / (double)e->stats.steps,
                e->prof_begin * k, e->prof_deliver * k, e->stats.codec_seconds * k, e->prof_end * k,
                e->work.wait_seconds * k, e->prof_advance * k);
    }
    gp_gen_workspace_free(&e->work);
    gp_kv_pool_free(e->kv);
    if (e->own_pool) gp_pool_free(e->pool);
    free(e->step_streams);
    free(e->decode_owners);
    free(e->codec_queued);
    free(e->decode_streams);
    free(e->decode_codes);
    free(e->decode_pcm);
    gp_admission_free(&e->admission);
    pthread_cond_destroy(&e->wake);
    pthread_cond_destroy(&e->cycle_done);
    pthread_mutex_destroy(&e->lock);
    free(e);
}

void gepard_engine_get_stats(gepard_engine *e, gepard_engine_stats *stats) {
    pthread_mutex_lock(&e->lock);
    *stats = e->stats;
    const gepard_engine_stats *b = &e->stats_base;
    stats->steps -= b->steps;
    stats->frames -= b->frames;
    stats->streams_started -= b->streams_started;
    stats->streams_finished -= b->streams_finished;
    stats->step_seconds -= b->step_seconds;
    stats->deliver_seconds -= b->deliver_seconds;
    stats->codec_seconds -= b->codec_seconds;
    stats->codec_batches -= b->codec_batches;
    stats->step_wait_seconds -= b->step_wait_seconds;
    stats->active_streams = e->active_count;
    stats->queued_streams = e->queued;
    stats->mean_batch =
        stats->steps ? (e->batch_sum - e->batch_sum_base) / (double)stats->steps : 0;
    stats->kv_blocks_total = (size_t)e->kv->num_blocks;
    stats->kv_blocks_used = (size_t)(e->kv->num_blocks - e->kv->free_count);
    pthread_mutex_unlock(&e->lock);
}

void gp_engine_restart_counters(gepard_engine *e) {
    pthread_mutex_lock(&e->lock);
    /* the cycle that finished the last stream adds its times after the
     * stream's waiter woke: wait for that accounting */
    while (e->in_cycle) pthread_cond_wait(&e->cycle_done, &e->lock);
    e->stats_base = e->stats;
    e->batch_sum_base = e->batch_sum;
    e->stats.max_batch = 0;
    e->admission_begin_service = true; /* the step thread's, at its next admission */
    pthread_mutex_unlock(&e->lock);
}

/* ---- stream lifecycle (public) ---- */

void gp_engine_cancel_queued_locked(gepard_engine *e, gepard_stream *s) {
    gepard_stream **link = &e->queue_head, *prev = NULL;
    while (*link && *link != s) {
        prev = *link;
        link = &(*link)->next;
    }
    if (!*link) return;
    *link = s->next;
    if (e->queue_tail == s) e->queue_tail = prev;
    e->queued--;
    s->next = NULL;
    finish_locked(e, s, GEPARD_ERR_CANCELLED, "cancelled before it started");
}

bool gp_engine_on_step_thread(const gepard_engine *e) {
    return e->thread_started && pthread_equal(pthread_self(), e->thread);
}

gepard_status gp_engine_enqueue(gepard_engine *e, gepard_stream *s) {
    pthread_mutex_lock(&e->lock);
    if (e->stopping) {
        pthread_mutex_unlock(&e->lock);
        return gp_api_failf(GEPARD_ERR_BUSY, "the engine is shutting down");
    }
    /* Every stream the engine holds counts, admitted or not: the step
     * thread may not have moved any queued stream into a slot yet when a
     * burst arrives, so "queue full and slots full" would let the whole
     * burst in. Checked and counted under one lock hold. */
    if (e->queued + e->active_count >= e->params.max_streams + e->params.max_queue) {
        int queued = e->queued;
        pthread_mutex_unlock(&e->lock);
        return gp_api_failf(GEPARD_ERR_BUSY,
                            "all %d stream slots are busy and %d requests are waiting — try again "
                            "shortly",
                            e->params.max_streams, queued);
    }
    s->state = STREAM_QUEUED;
    s->next = NULL;
    if (e->queue_tail)
        e->queue_tail->next = s;
    else
        e->queue_head = s;
    e->queue_tail = s;
    e->queued++;
    e->stats.streams_started++;
    pthread_cond_broadcast(&e->wake);
    pthread_mutex_unlock(&e->lock);
    return GEPARD_OK;
}
