/* engine_internal.h — the engine and stream structures behind gepard.h's
 * gepard_engine / gepard_stream, shared by engine.c (the step thread and
 * scheduler) and stream.c (request setup, segments, audio delivery). */
#ifndef GP_ENGINE_ENGINE_INTERNAL_H
#define GP_ENGINE_ENGINE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "base/pool.h"
#include "compute/kv_cache.h"
#include "engine/admission.h"
#include "engine/api_internal.h"
#include "model/generate.h"
#include "text/segment.h"

typedef enum stream_state {
    STREAM_QUEUED = 0,
    STREAM_RUNNING = 1,
    STREAM_DONE = 2,
} stream_state;

struct gepard_stream {
    gepard_engine *engine;
    gepard_stream_callbacks callbacks;
    gepard_synth_params params;
    gp_gen_params gen_params;
    /* the request */
    char *text; /* cleaned */
    size_t text_len;
    size_t text_pos; /* next segment starts here */
    bool split;
    float *prefix; /* copied speaker prefix [prefix_rows][H] */
    int prefix_rows;
    const gp_lora_adapter *lora;
    /* progress (engine thread only) */
    gp_gen_stream *gen;   /* current segment */
    int frames_signaled;  /* frames of `gen` already passed to on_frame */
    int frames_delivered; /* frames of `gen` already decoded and passed to on_audio */
    gepard_codec_stream *codec_stream;
    float *pcm;        /* samples of up to engine->max_chunk frames */
    int pcm_ready;     /* frames already decoded into pcm by the batched decode (0 = none) */
    int pcm_queued;    /* frames queued to the codec (engine->codec_queued; 0 = none): their
                          samples go to pcm_next, which becomes pcm when collected */
    float *pcm_next;   /* with a queueing codec: the buffer a queued call fills */
    bool stop_pending; /* delivery asked to stop while a device step was in flight */
    /* the stream's first audio held back under load until it carries
     * engine->first_audio_frames frames (or the segment ends): [frames][spf] */
    float *held;
    int held_frames;
    /* shared state (engine->lock) */
    stream_state state;
    gepard_status status;
    char message[GP_ERROR_MESSAGE_MAX];
    pthread_cond_t finished;
    bool owner_released; /* gepard_stream_free was called while running */
    atomic_int cancel_requested;
    /* results */
    gepard_synth_result result;
    double start_time, first_audio_time, admitted_time;
    gepard_stream *next; /* queue / active list link */
};

struct gepard_engine {
    gepard_model *model;
    const gepard_codec *codec;
    gepard_engine_params params;
    gp_pool *pool;
    gp_kv_pool *kv;
    gp_gen_workspace work;
    gp_gen_stream **step_streams; /* [max_streams] scratch for gp_gen_step */
    /* [max_streams] scratch for the batched codec decode */
    gepard_stream **decode_owners;
    gp_codec_code_stream **decode_streams;
    const int32_t **decode_codes;
    float **decode_pcm;
    bool own_pool; /* false when the engine shares the codec's threads */
    pthread_t thread;
    bool thread_started;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    pthread_cond_t cycle_done; /* broadcast when a cycle's accounting is complete */
    bool in_cycle;             /* the step thread is between taking and accounting a batch */
    bool stopping;
    gepard_stream *queue_head, *queue_tail;
    int queued;
    gepard_stream *active;
    int active_count;
    gp_admission admission;       /* engine thread only */
    bool admission_begin_service; /* under the lock: the figures so far become provisional */
    bool pace_bursts; /* GEPARD_ENGINE_PACE_BURSTS=1: begin_service and the admit limit */
    /* Frames per audio chunk after the first: GP_ENGINE_CHUNK_FRAMES on the
     * CPU; with the codec on a GPU, light_chunk_frames while at most
     * GP_ENGINE_GPU_CHUNK_STREAMS streams are active, else 1 (set by the
     * step thread before each delivery). A stream decodes fewer at once
     * while its listener holds less than wait_headroom frames of audio. */
    int chunk_frames;
    int light_chunk_frames; /* GPU codec: the chunk of a lightly loaded engine */
    int max_chunk;          /* most frames one stream decodes in a call (its pcm buffer) */
    bool overlap_codec;     /* GPU backbone: deliver audio while its step runs */
    /* A codec that queues (gp_codec_can_queue: the GPU's) decodes while the
     * step thread goes on: one call in flight (codec_queued: its streams),
     * filling the streams' pcm_next. A light load (light_this_cycle: at most
     * GP_ENGINE_GPU_CHUNK_STREAMS streams) polls for it and delivers its
     * audio when a later cycle finds it done; under load each cycle waits
     * for the previous cycle's call, queues the next and then runs the
     * callbacks, so the GPU decodes while the host delivers, samples and
     * queues the step. GEPARD_ENGINE_QUEUE_CODEC=0 waits for every call
     * where it is made; =light queues only a light load's. */
    bool queue_codec, queue_heavy, light_this_cycle;
    /* GPU: prefill_chunk prefill rows on top of the decode rows (engine.c;
     * GEPARD_GPU_PREFILL_ON_TOP=1) */
    bool prefill_on_top;
    /* GPU under load: new streams' prefills gathered into one step every
     * prefill_every cycles (gp_engine_prefill_now; GEPARD_GPU_PREFILL_EVERY,
     * 1 = every cycle), so the cycles between run decode steps alone — their
     * captured graphs and tiled attention — instead of each a mixed step
     * launched kernel by kernel. prefill_waited: cycles a waiting prefill has
     * been held so far; gather_min_rows: the decode rows from which it
     * gathers; prefill_holds: cycles that held one (tests). */
    int prefill_every, prefill_waited, gather_min_rows;
    unsigned long long prefill_holds;
    gepard_stream **codec_queued; /* [max_streams] */
    int n_queued;
    double codec_wait_seconds; /* step thread: waits for queued calls, not yet in stats */
    /* the step thread's own time per part of its cycle (seconds, summed; printed
     * when the engine is freed with GEPARD_ENGINE_PROFILE=1): queueing the step,
     * the audio during it, collecting it (waiting and sampling; on a CPU the
     * whole step), after it */
    double prof_begin, prof_deliver, prof_end, prof_advance;
    bool profile;
    bool gpu_codec;
    double wait_headroom;
    /* Under a GPU's load (chunks of one frame) a stream's first audio goes
     * out once it holds this many frames (GP_ENGINE_FIRST_AUDIO_FRAMES;
     * GEPARD_ENGINE_FIRST_AUDIO_FRAMES=N, 1: at once), so a listener starts
     * with them in hand rather than one */
    int first_audio_frames;
    gepard_engine_stats stats;
    double batch_sum;
    /* the counters when they last restarted (gp_engine_restart_counters):
     * gepard_engine_get_stats reports what came after */
    gepard_engine_stats stats_base;
    double batch_sum_base;
};

/* stream.c: start a stream's next text segment (tokenize, layout, create
 * its gen stream, reserve KV). Returns 0, GEPARD_ERR_BUSY when the KV cache
 * is full for now, or another error. Sets *no_more_segments at the end. */
int gp_stream_begin_segment(gepard_engine *e, gepard_stream *s, bool *no_more_segments,
                            gp_error *err);
/* Deliver frames the current segment produced since the last call (codec
 * decode + callbacks; with `decode` false only audio already decoded, and
 * none while the stream's audio is queued). Returns non-zero when the
 * stream must stop (the callback asked to cancel, or decoding failed;
 * s->status says which). */
int gp_stream_deliver(gepard_engine *e, gepard_stream *s, bool decode);
/* KV positions the stream's current (or next) segment reserves. */
int gp_stream_positions_needed(const gepard_stream *s);
/* Audio goes out in chunks of this many frames after the first frame (which
 * goes alone, for the time to first audio): the codec's first stage reads
 * its weights once per call, so pairs of frames cost less per frame. A frame
 * does not wait for its pair while the stream's listener has less than
 * GP_ENGINE_PAIR_HEADROOM frames of audio in hand (its first frames, or a
 * stream that is just keeping up): pairing there would make it run dry. */
#define GP_ENGINE_CHUNK_FRAMES 2
#define GP_ENGINE_MAX_CHUNK 4 /* with the codec on the CPU */
#define GP_ENGINE_PAIR_HEADROOM 2.0
/* With the codec on a GPU: a call costs about the same for 1 frame as for
 * 16 of one stream (1.8 against ~2 ms on an H200: latency-bound until the
 * batch fills the device), against 0.6 ms for the backbone's step, so while
 * few streams are active a stream that is ahead of its listener decodes 16
 * frames a call (a lone stream's real-time factor: every frame at once
 * 0.053, chunks of 4 0.026 — docs/NOTES.md). It waits for them only while
 * the listener holds 5 frames of audio (232 ms) or more; with less, whatever
 * is pending goes at once (at most 16 frames take ~10 ms to sample). Under
 * load every frame goes at once: streams at different chunk lengths need a
 * codec call each, and with chunks of 4 for every stream the server's
 * throughput fell (H200, 1024 streams: 965 -> 447 s of audio per second). */
#define GP_ENGINE_GPU_CHUNK_FRAMES 16
#define GP_ENGINE_GPU_MAX_CHUNK 16
#define GP_ENGINE_GPU_CHUNK_STREAMS 4
#define GP_ENGINE_GPU_HEADROOM 5.0
/* Measured on the H200 (serve12, 256/512/1024 concurrent requests of ~10 s):
 * with the first audio at one frame 12/2/8 listeners ran dry, each ~37-74 ms
 * into its audio (a one-frame start is 46 ms of slack against a cycle that
 * a burst's admissions stretch); held to 3 frames none did, for first audio
 * p50 95 -> 139 ms at 256 and the same at 1024. A lone request is not held. */
#define GP_ENGINE_FIRST_AUDIO_FRAMES 3
/* Gathered prefills (prefill_every > 1) wait for no more than this many
 * streams, and only while this many decode rows or more run (a light load's
 * new stream is prefilled at once). */
#define GP_ENGINE_GATHER_MAX_STREAMS 16
#define GP_ENGINE_GATHER_MIN_DECODE_ROWS 64

/* engine_audio.c: the audio of a cycle. While a step is in flight: decode
 * and deliver earlier frames' audio (with a queueing codec: collect the
 * queued call, queue the next, deliver). */
void gp_engine_deliver_during_step(gepard_engine *e);
/* After the step: the queued call collected where needed, the ending
 * streams' audio delivered and the rest of theirs decoded (batched); with
 * `defer_running` the running streams keep theirs for the next cycle. */
void gp_engine_audio_before_retiring(gepard_engine *e, bool defer_running);
/* Collect the queued codec call (waiting when `wait`): its streams' audio
 * becomes ready, or on failure they stop. Step thread only; it takes no
 * lock (fail_all_active_locked calls it holding the engine's). */
void gp_engine_collect_queued(gepard_engine *e, bool wait);
/* The stream steps again and its next frames' audio may be queued. */
bool gp_engine_keeps_running(const gepard_stream *s);

/* engine.c: whether this cycle's step takes prefill rows, with `waiting`
 * streams waiting for a prefill (`started`: one of them ran part of it) and
 * decode_rows decoding: at once unless prefills are gathered (prefill_every
 * > 1) under load; a held prefill goes with the prefill_every-th cycle, or
 * once GP_ENGINE_GATHER_MAX_STREAMS wait. Step thread only. */
bool gp_engine_prefill_now(gepard_engine *e, int decode_rows, int waiting, bool started);
/* engine.c: the chunk (GP_ENGINE_CHUNK_FRAMES, or with a GPU codec
 * light_chunk_frames or 1) for a step with `active` streams. */
int gp_engine_chunk_frames(const gepard_engine *e, int active);
/* The warm-up's next wave size after n streams (warm_up.c). */
int gp_engine_warm_up_next_wave(int n);
/* How many of the stream's sampled frames to decode now (0 = wait). */
int gp_stream_frames_to_decode(const gepard_stream *s);
/* The same after the frames already decoded and not yet delivered (pcm_ready):
 * what a queued call decodes into pcm_next. */
int gp_stream_frames_to_queue(const gepard_stream *s);
/* Free a stream's per-request memory (not the struct). */
void gp_stream_release_resources(gepard_engine *e, gepard_stream *s);
/* engine.c: take a stream that is still waiting for a slot out of the queue
 * and finish it as cancelled (so a cancelled request never holds a queue
 * place until a slot frees). Lock held. */
void gp_engine_cancel_queued_locked(gepard_engine *e, gepard_stream *s);
/* engine.c: gepard_engine_get_stats counts from now on (steps, frames,
 * streams, times, batches; the admission keeps what it measured, as
 * provisional figures: gp_admission_begin_service). */
void gp_engine_restart_counters(gepard_engine *e);
/* True on the engine's step thread (inside a callback). */
bool gp_engine_on_step_thread(const gepard_engine *e);

#endif
