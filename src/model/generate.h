/* generate.h — one synthesis as a state machine the engine can batch
 * (MODEL.md §E.3, §E.6).
 *
 * A gp_gen_stream owns everything one generation needs: its sampling
 * parameters and RNG, the prefill rows (speaker prefix + text layout) of its
 * conditional branch and, with classifier-free guidance, of its
 * unconditional branch, each branch's KV sequence, and the frames produced so
 * far. It never runs the backbone itself: gp_gen_step() gathers the rows of
 * many streams (prefill chunks and one-row decode steps), runs one batched
 * forward, then lets every stream check its stop head and sample its next
 * frame — the reference loop order, stream by stream, in one batch.
 */
#ifndef GP_MODEL_GENERATE_H
#define GP_MODEL_GENERATE_H

#include <stdbool.h>
#include <stdint.h>

#include "base/rng.h"
#include "compute/kv_cache.h"
#include "model/backbone.h"
#include "model/device.h"
#include "model/lora.h"
#include "model/model.h"
#include "model/sampler.h"

typedef enum gp_cfg_uncond {
    GP_CFG_EMPTY_TEXT = 0, /* uncond ids [SOT, EOT, SOS] */
    GP_CFG_AUDIO_ONLY = 1, /* uncond ids [SOS] */
} gp_cfg_uncond;

typedef struct gp_gen_params {
    float temperature;        /* 1.0; <= 0 = greedy */
    int top_k;                /* 0 = off */
    float stop_threshold;     /* 0.5, strict > */
    int max_frames;           /* 2000, counts frame 0 */
    float repetition_penalty; /* 1.0 = off */
    int repetition_window;    /* 32; 0 = all history */
    float cfg_scale;          /* 1.0 = off */
    int cfg_frames;           /* -1 = every frame */
    gp_cfg_uncond cfg_uncond;
    int force_stop_frames; /* -1 = off */
    uint64_t seed;
} gp_gen_params;

/* The upstream runner's defaults (seed 0). */
gp_gen_params gp_gen_default_params(void);
int gp_gen_params_validate(const gp_gen_params *p, gp_error *err);

typedef enum gp_gen_phase {
    GP_GEN_PREFILL = 0, /* prefill rows still to run */
    GP_GEN_DECODE = 1,  /* one frame per step */
    GP_GEN_DONE = 2,
} gp_gen_phase;

typedef enum gp_stop_reason {
    GP_STOP_NONE = 0,
    GP_STOP_HEAD,       /* the stop head fired */
    GP_STOP_MAX_FRAMES, /* max_frames reached */
    GP_STOP_FORCED,     /* force_stop_frames reached */
    GP_STOP_CANCELLED,
} gp_stop_reason;

typedef struct gp_gen_branch {
    gp_kv_seq kv;
    float *rows; /* [n_rows][H] prefill input */
    int n_rows;
    int fed;            /* prefill rows already run */
    float *hidden;      /* [H] latest final-normed hidden state */
    float *logits;      /* [total_logits] heads of `hidden` when a device computed them */
    bool used;          /* this branch takes part in the generation */
    int slot;           /* its slot in the workspace step slot_step */
    uint64_t slot_step; /* the step that last ran rows of this branch */
} gp_gen_branch;

typedef struct gp_gen_stream gp_gen_stream;

/* Called for every new frame (codes[C]) as soon as it is sampled. With many
 * streams in a step, frames are drawn on the pool's threads: the callback
 * may run concurrently for different streams (never for one stream). */
typedef void (*gp_gen_frame_fn)(gp_gen_stream *s, int frame, const int32_t *codes, void *user);
/* Test hook: choose the code from the final probability vector. */
typedef int (*gp_gen_pick_fn)(const float *probs, int L, void *user);
/* Test hook: observe each channel's probability vector before the draw. */
typedef void (*gp_gen_probs_fn)(int frame, int channel, const float *probs, int L, void *user);

struct gp_gen_stream {
    const gp_model *model;
    gp_gen_params params;
    gp_rng rng;
    const gp_lora_adapter *lora;
    gp_gen_branch cond, uncond;
    gp_gen_phase phase;
    gp_stop_reason stop_reason;
    int32_t *frames; /* [cap][C] */
    int n_frames;
    int cap_frames;
    float *logits;  /* [2][total_logits] scratch */
    bool *penalize; /* [max L] scratch */
    float *last_stop_probability;
    float stop_probability; /* of the latest decode step */
    gp_gen_frame_fn on_frame;
    gp_gen_pick_fn pick;
    gp_gen_probs_fn on_probs;
    void *user;
    uint64_t step_mark; /* the workspace step that last ran rows of this stream */
    /* A listener is already playing this stream (a later sentence of its
     * text): its prefill is never held back to be gathered with others. */
    bool prefill_urgent;
};

/* Create a stream for layout ids (text after the repetition layout, ending in
 * SOS) and an optional speaker prefix [prefix_rows][H] (copied). */
int gp_gen_create(const gp_model *model, const gp_gen_params *params, const int32_t *ids, int n_ids,
                  const float *prefix, int prefix_rows, const gp_lora_adapter *lora,
                  gp_gen_stream **out, gp_error *err);
/* Release KV blocks to `kv` (may be NULL if none were reserved) and free. */
void gp_gen_free(gp_gen_stream *s, gp_kv_pool *kv);

/* KV positions each branch needs in the worst case. */
int gp_gen_kv_positions(const gp_gen_stream *s, bool uncond);
/* Reserve the worst case for both branches (GEPARD_ERR_BUSY if full). */
int gp_gen_reserve(gp_gen_stream *s, gp_kv_pool *kv, gp_error *err);
/* Give back the unconditional branch's blocks once guidance is over. */
void gp_gen_release_finished_branches(gp_gen_stream *s, gp_kv_pool *kv);

/* True when the parameters run an unconditional branch at all (cfg_scale
 * != 1 and cfg_frames != 0). */
bool gp_gen_params_use_cfg(const gp_gen_params *p);
/* True when frame index t is sampled with guidance. */
bool gp_gen_guided(const gp_gen_stream *s, int t);
void gp_gen_cancel(gp_gen_stream *s);
/* Decode rows the next step gives the streams already decoding (one per
 * stream, two while guided): what a row budget meant for prefill adds to. */
int gp_gen_decode_rows(gp_gen_stream *const *streams, int n);
/* Streams still waiting for (part of) their prefill; *started: whether one
 * of them already ran part of it, or is urgent (prefill_urgent), so that
 * the prefill should not wait. */
int gp_gen_prefill_waiting(gp_gen_stream *const *streams, int n, bool *started);

/* The two halves of one reference loop iteration, used by gp_gen_step:
 * gp_gen_begin_decode ends the stream on max_frames / force_stop_frames and
 * says whether it needs a decode row; gp_gen_sample_frame samples frame
 * n_frames from the heads' logits (uncond_logits NULL when not guided). */
bool gp_gen_begin_decode(gp_gen_stream *s);
int gp_gen_sample_frame(gp_gen_stream *s, const float *cond_logits, const float *uncond_logits,
                        gp_error *err);

/* Working memory of gp_gen_step (grown on demand). */
typedef struct gp_gen_workspace {
    gp_forward_scratch forward;
    float *rows, *hidden, *embed_work, *logits;
    int32_t *codes;
    gp_backbone_seq *seqs;
    struct gp_gen_slot *slots;
    gp_gen_stream **sampling; /* streams that sample a frame this step */
    size_t cap_rows, cap_seqs;
    /* device steps (model->device): the plugin's runner and the step plan */
    const gp_dev_plugin *plugin;
    gp_dev_runner *runner;
    int *decode_row_frame, *seq_rows, *seq_start, *seq_n_blocks;
    const int **seq_blocks;
    uint64_t *seq_lora;
    /* the step between gp_gen_step_begin and gp_gen_step_end */
    uint64_t step_id;
    int pending_slots; /* 0 = none */
    bool pending_on_device;
    double wait_seconds; /* total time gp_gen_step_end waited for a device's step */
    /* The most rows a step of this workspace may have (a device reserves its
     * buffers for them at the first step); 0 = grow as steps need. */
    int device_reserve_rows;
} gp_gen_workspace;

void gp_gen_workspace_init(gp_gen_workspace *w);
void gp_gen_workspace_free(gp_gen_workspace *w);

/* One batched step over `n` streams: every decoding stream advances by one
 * frame and prefilling streams run up to `max_rows` rows in total (decode
 * rows first). Streams in GP_GEN_DONE are skipped. Returns the number of
 * streams that did work, or a negative status on failure. */
int gp_gen_step(gp_gen_stream **streams, int n, gp_kv_pool *kv, gp_gen_workspace *w, int max_rows,
                gp_pool *pool, gp_error *err);

/* gp_gen_step in two halves, so that a device step can run while the caller
 * does other work (the codec): begin plans the rows and runs the forward
 * (on the CPU) or queues it (on a device) and returns the number of
 * sequences in flight (0 = nothing to do, negative = error); end waits for
 * it, checks stop heads and samples, and returns like gp_gen_step. The
 * streams array must be the same for both halves and nothing else may touch
 * those streams in between. */
int gp_gen_step_begin(gp_gen_stream **streams, int n, gp_kv_pool *kv, gp_gen_workspace *w,
                      int max_rows, gp_pool *pool, gp_error *err);
int gp_gen_step_end(gp_gen_stream **streams, int n, gp_kv_pool *kv, gp_gen_workspace *w,
                    gp_pool *pool, gp_error *err);
/* True when the model's forward runs on a device (begin returns early). */
bool gp_gen_on_device(const gp_model *model);

#endif
