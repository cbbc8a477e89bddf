/* generate_step.c — one batched step over many generation streams (see
 * generate.h): decode rows of every running stream first, then prefill chunks
 * up to the row budget, one backbone forward for all of them, then stop
 * checks and one batched head evaluation, then sampling stream by stream.
 *
 * The forward runs on the CPU (gp_backbone_forward, then the heads) or, when
 * the model lives on a device, through the device plugin: the plan is the
 * same, the device embeds the decode frames itself and returns every
 * sequence's last hidden state with its heads' logits; stop checks and
 * sampling stay here on the host for both. */
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/timing.h"
#include "model/generate.h"
#include "model/overlay.h"

typedef struct gp_gen_slot {
    gp_gen_stream *stream;
    gp_gen_branch *branch;
    int n_rows;
    bool decode;
} gp_gen_slot;

void gp_gen_workspace_init(gp_gen_workspace *w) {
    memset(w, 0, sizeof *w);
    gp_forward_scratch_init(&w->forward);
}

void gp_gen_workspace_free(gp_gen_workspace *w) {
    if (w->runner) w->plugin->runner_free(w->runner);
    gp_forward_scratch_free(&w->forward);
    gp_aligned_free(w->rows);
    gp_aligned_free(w->hidden);
    gp_aligned_free(w->embed_work);
    gp_aligned_free(w->logits);
    free(w->codes);
    free(w->seqs);
    free(w->slots);
    free(w->sampling);
    free(w->decode_row_frame);
    free(w->seq_rows);
    free(w->seq_start);
    free(w->seq_n_blocks);
    free(w->seq_blocks);
    free(w->seq_lora);
    memset(w, 0, sizeof *w);
}

bool gp_gen_on_device(const gp_model *m) { return m->device != NULL; }

static int workspace_reserve(gp_gen_workspace *w, const gp_model *m, size_t rows, size_t seqs,
                             gp_error *err) {
    const size_t H = (size_t)m->cfg.backbone.hidden_size, C = (size_t)m->cfg.num_channels;
    const size_t E = (size_t)m->cfg.audio_embed_dim, total = (size_t)m->cfg.total_logits;
    if (rows > w->cap_rows) {
        size_t cap = w->cap_rows ? w->cap_rows : 64;
        while (cap < rows) cap *= 2;
        gp_aligned_free(w->rows);
        gp_aligned_free(w->embed_work);
        free(w->decode_row_frame);
        w->rows = gp_aligned_alloc(cap * H * sizeof(float));
        w->embed_work = gp_aligned_alloc(cap * (C * E > H ? C * E : H) * sizeof(float));
        w->decode_row_frame = malloc(cap * sizeof(int));
        w->cap_rows = w->rows && w->embed_work && w->decode_row_frame ? cap : 0;
        if (!w->cap_rows) return gp_fail_oom(err, "step rows", cap * H * 4);
    }
    if (seqs > w->cap_seqs) {
        size_t cap = w->cap_seqs ? w->cap_seqs : 16;
        while (cap < seqs) cap *= 2;
        gp_aligned_free(w->hidden);
        gp_aligned_free(w->logits);
        free(w->codes);
        free(w->seqs);
        free(w->slots);
        free(w->sampling);
        free(w->seq_rows);
        free(w->seq_start);
        free(w->seq_n_blocks);
        free(w->seq_blocks);
        free(w->seq_lora);
        w->hidden = gp_aligned_alloc(cap * H * sizeof(float));
        w->logits = gp_aligned_alloc(cap * total * sizeof(float));
        w->codes = malloc(cap * C * sizeof(int32_t));
        w->seqs = malloc(cap * sizeof *w->seqs);
        w->slots = malloc(cap * sizeof *w->slots);
        w->sampling = malloc(cap * sizeof *w->sampling);
        w->seq_rows = malloc(cap * sizeof(int));
        w->seq_start = malloc(cap * sizeof(int));
        w->seq_n_blocks = malloc(cap * sizeof(int));
        w->seq_blocks = malloc(cap * sizeof *w->seq_blocks);
        w->seq_lora = malloc(cap * sizeof *w->seq_lora);
        w->cap_seqs = w->hidden && w->logits && w->codes && w->seqs && w->slots && w->sampling &&
                              w->seq_rows && w->seq_start && w->seq_n_blocks && w->seq_blocks &&
                              w->seq_lora
                          ? cap
                          : 0;
        if (!w->cap_seqs) return gp_fail_oom(err, "step state", cap * H * 4);
    }
    return GEPARD_OK;
}

static void add_slot(gp_gen_workspace *w, int *n_slots, gp_gen_stream *s, gp_gen_branch *b,
                     int rows, bool decode) {
    w->slots[*n_slots] = (gp_gen_slot){s, b, rows, decode};
    w->seqs[*n_slots] = (gp_backbone_seq){&b->kv, rows, s->lora};
    s->step_mark = w->step_id;
    b->slot = *n_slots;
    b->slot_step = w->step_id;
    (*n_slots)++;
}

static bool prefill_complete(const gp_gen_stream *s) {
    return s->cond.fed == s->cond.n_rows && (!s->uncond.used || s->uncond.fed == s->uncond.n_rows);
}

/* Plan the batch: decode rows (one embedded frame, fed to each active branch),
 * then prefill chunks. On the CPU the decode rows are embedded here into
 * w->rows; for a device only the frame index of each decode row is noted
 * (w->decode_row_frame) and w->rows holds the prefill rows alone. Returns
 * the number of rows; *n_frames and *n_decode_rows say how many frames and
 * decode rows lead the batch. */
static int plan_rows(gp_gen_stream **streams, int n, gp_gen_workspace *w, int max_rows,
                     int *n_slots, int *n_frames, int *n_decode_rows, gp_pool *pool) {
    const gp_model *m = streams[0]->model;
    const bool device = gp_gen_on_device(m);
    const int H = m->cfg.backbone.hidden_size, C = m->cfg.num_channels;
    int n_decode = 0;
    for (int i = 0; i < n; i++) {
        gp_gen_stream *s = streams[i];
        if (!gp_gen_begin_decode(s)) continue;
        memcpy(w->codes + (size_t)n_decode * C, s->frames + (size_t)(s->n_frames - 1) * C,
               (size_t)C * sizeof(int32_t));
        n_decode++;
    }
    /* Embed every decoding stream's last frame in one batch, then copy each
     * to its branch rows. */
    float *embeds = w->hidden; /* [n_decode][H], free until the forward */
    if (n_decode && !device)
        gp_overlay_embed_frames(m, w->codes, n_decode, embeds, w->embed_work, pool);
    int rows = 0, d = 0;
    for (int i = 0; i < n; i++) {
        gp_gen_stream *s = streams[i];
        if (s->phase != GP_GEN_DECODE) continue;
        const int frame = d++;
        const int copies = 1 + (s->uncond.used && gp_gen_guided(s, s->n_frames));
        for (int k = 0; k < copies; k++) {
            if (device)
                w->decode_row_frame[rows] = frame;
            else
                memcpy(w->rows + (size_t)rows * H, embeds + (size_t)frame * H,
                       (size_t)H * sizeof(float));
            rows++;
            add_slot(w, n_slots, s, k ? &s->uncond : &s->cond, 1, true);
        }
    }
    *n_frames = n_decode;
    *n_decode_rows = rows;
    const int skip = device ? rows : 0; /* device: w->rows holds prefill rows only */
    for (int i = 0; i < n && rows < max_rows; i++) {
        gp_gen_stream *s = streams[i];
        if (s->phase != GP_GEN_PREFILL) continue;
        gp_gen_branch *branches[2] = {&s->cond, &s->uncond};
        for (int k = 0; k < 2 && rows < max_rows; k++) {
            gp_gen_branch *b = branches[k];
            if (!b->used || b->fed == b->n_rows) continue;
            int take = b->n_rows - b->fed;
            if (take > max_rows - rows) take = max_rows - rows;
            memcpy(w->rows + (size_t)(rows - skip) * H, b->rows + (size_t)b->fed * H,
                   (size_t)take * H * sizeof(float));
            rows += take;
            add_slot(w, n_slots, s, b, take, false);
        }
    }
    return rows;
}

static int ensure_runner(gp_gen_workspace *w, const gp_model *m, gp_kv_pool *kv, gp_error *err) {
    int rc = gp_device_kv_attach(m, kv, err);
    if (rc) return rc;
    if (w->runner) return GEPARD_OK;
    w->plugin = m->device->plugin;
    gp_dev_status st = {0, ""};
    if (w->plugin->runner_create(m->device->dev, &w->runner, &st)) return gp_device_error(&st, err);
    return GEPARD_OK;
}

/* Give the runner a run-time adapter's modules (once per adapter). */
static int upload_lora(gp_gen_workspace *w, const gp_lora_adapter *ad, gp_error *err) {
    int n = 0;
    for (int l = 0; l < ad->num_layers; l++)
        for (int t = 0; t < GP_LORA_TARGETS; t++) n += gp_lora_module_for(ad, l, t) != NULL;
    gp_dev_lora_module *mods = calloc((size_t)(n ? n : 1), sizeof *mods);
    if (!mods) return gp_fail_oom(err, "LoRA upload", (size_t)n * sizeof *mods);
    n = 0;
    for (int l = 0; l < ad->num_layers; l++)
        for (int t = 0; t < GP_LORA_TARGETS; t++) {
            const gp_lora_module *m = gp_lora_module_for(ad, l, t);
            if (m)
                mods[n++] = (gp_dev_lora_module){l,      (gp_dev_matrix)t, m->rank, m->in,
                                                 m->out, m->scale,         m->A,    m->B};
        }
    gp_dev_status st = {0, ""};
    int rc = w->plugin->lora_upload(w->runner, ad->id, mods, n, &st);
    free(mods);
    return rc ? gp_device_error(&st, err) : GEPARD_OK;
}

/* Queue the planned rows on the device and advance the KV lengths. */
static int launch_on_device(const gp_model *m, gp_kv_pool *kv, gp_gen_workspace *w, int n_slots,
                            int rows, int n_frames, int n_decode_rows, gp_error *err) {
    int rc = ensure_runner(w, m, kv, err);
    if (rc) return rc;
    for (int i = 0; i < n_slots; i++) {
        const gp_backbone_seq *q = &w->seqs[i];
        w->seq_lora[i] = 0;
        if (q->lora && q->lora->num_layers > 0) {
            rc = upload_lora(w, q->lora, err);
            if (rc) return rc;
            w->seq_lora[i] = q->lora->id;
        }
        int end = q->kv->length + q->n_rows;
        if (gp_kv_blocks_for(kv, end) > q->kv->n_blocks)
            return gp_fail(err, GEPARD_ERR_INTERNAL,
                           "device step: KV blocks for %d positions were not reserved", end);
        w->seq_rows[i] = q->n_rows;
        w->seq_start[i] = q->kv->length;
        w->seq_blocks[i] = q->kv->blocks;
        w->seq_n_blocks[i] = q->kv->n_blocks;
    }
    gp_dev_step step = {
        .n_rows = rows,
        .n_seqs = n_slots,
        .n_frames = n_frames,
        .codes = w->codes,
        .n_decode_rows = n_decode_rows,
        .decode_row_frame = w->decode_row_frame,
        .prefill_rows = w->rows,
        .seq_rows = w->seq_rows,
        .seq_start = w->seq_start,
        .seq_blocks = w->seq_blocks,
        .seq_n_blocks = w->seq_n_blocks,
        .graph_ok = 1,
        .seq_lora = w->seq_lora,
        .reserve_rows = w->device_reserve_rows,
    };
    gp_dev_status st = {0, ""};
    if (w->plugin->step_launch(w->runner, gp_device_kv_of(kv), &step, &st))
        return gp_device_error(&st, err);
    for (int i = 0; i < n_slots; i++) w->seqs[i].kv->length += w->seqs[i].n_rows;
    return GEPARD_OK;
}

/* Run `n` independent tasks on the pool when there are enough to pay for
 * the hand-off, else inline. */
static void run_tasks(gp_pool *pool, int n, gp_pool_task_fn fn, void *ctx) {
    if (pool && n >= 32) {
        gp_pool_parallel_for(pool, n, fn, ctx);
    } else {
        for (int i = 0; i < n; i++) fn(ctx, i, 0);
    }
}

/* status[i]: -1 prefill not complete, 1 the stop head fired, 0 sample. */
typedef struct stop_job {
    gp_gen_stream **streams;
    int *status;
} stop_job;

static void stop_task(void *ctx, int i, int worker) {
    (void)worker;
    stop_job *j = ctx;
    gp_gen_stream *s = j->streams[i];
    j->status[i] = 0;
    if (s->phase == GP_GEN_PREFILL && !prefill_complete(s)) {
        j->status[i] = -1;
    } else if (s->phase == GP_GEN_DECODE) {
        const float *sw = s->lora && s->lora->has_stop_head ? s->lora->stop_weight : NULL;
        float sb = sw ? s->lora->stop_bias : 0;
        s->stop_probability = gp_overlay_stop_probability(s->model, s->cond.hidden, sw, sb);
        if (s->stop_probability > s->params.stop_threshold) j->status[i] = 1;
    }
}

/* Draw stream i's frame from logits rows row[i] (cond) and row[i] + 1
 * (uncond, when guided), or, with logits NULL, from the logits the device
 * left in its branches; status[i] gets the result. */
typedef struct sample_job {
    gp_gen_stream **streams;
    const int *row;
    const float *logits;
    int total;
    int *status;
} sample_job;

static void sample_task(void *ctx, int i, int worker) {
    (void)worker;
    sample_job *j = ctx;
    gp_gen_stream *s = j->streams[i];
    const bool guided = s->uncond.used && gp_gen_guided(s, s->n_frames);
    const float *cond, *uncond = NULL;
    if (j->logits) {
        cond = j->logits + (size_t)j->row[i] * j->total;
        if (guided) uncond = cond + j->total;
    } else {
        cond = s->cond.logits;
        if (guided) uncond = s->uncond.logits;
    }
    gp_error e;
    j->status[i] = gp_gen_sample_frame(s, cond, uncond, &e);
}

/* A slot's results into its branch: prefill rows counted, and the hidden
 * state (and the device's logits, when given) once the branch's rows are
 * all in. */
static void take_slot(const gp_gen_slot *slot, gp_gen_branch *b, const float *hidden,
                      const float *logits, int H, int total) {
    if (!slot->decode) b->fed += slot->n_rows;
    if (slot->decode || b->fed == b->n_rows) {
        memcpy(b->hidden, hidden, (size_t)H * sizeof(float));
        if (logits) memcpy(b->logits, logits, (size_t)total * sizeof(float));
    }
}

/* The streams that ran rows in this step, into w->sampling; their count. */
static int streams_of_step(gp_gen_stream **streams, int n, gp_gen_workspace *w) {
    int n_run = 0;
    for (int i = 0; i < n; i++)
        if (streams[i]->step_mark == w->step_id) w->sampling[n_run++] = streams[i];
    return n_run;
}

static void stopped_by_head(gp_gen_stream *s, gp_kv_pool *kv) {
    s->phase = GP_GEN_DONE;
    s->stop_reason = GP_STOP_HEAD;
    gp_gen_release_finished_branches(s, kv);
}

/* After a stream's frame was drawn. */
static void frame_drawn(gp_gen_stream *s, gp_kv_pool *kv) {
    if (s->phase == GP_GEN_PREFILL) s->phase = GP_GEN_DECODE;
    gp_gen_begin_decode(s); /* ends the stream now if its length limit is reached */
    gp_gen_release_finished_branches(s, kv);
}

/* With a device's logits: each stream's whole end of step in one task — its
 * branches' hidden states and logits out of the step's buffers, its stop
 * check, its draw — so that one pool dispatch covers the step and the copies
 * run on every thread (the same operations per stream, in the same order, as
 * the copy loop, stop_task and sample_task). status[i] as stop_task's;
 * rc[i] the draw's result where status[i] is 0. */
typedef struct finish_job {
    gp_gen_stream **streams;
    const gp_gen_workspace *w;
    const float *hidden, *logits;
    int H, total;
    int *status, *rc;
} finish_job;

static void finish_task(void *ctx, int i, int worker) {
    finish_job *j = ctx;
    gp_gen_stream *s = j->streams[i];
    gp_gen_branch *branches[2] = {&s->cond, &s->uncond};
    for (int k = 0; k < 2; k++) {
        gp_gen_branch *b = branches[k];
        if (b->slot_step != j->w->step_id) continue;
        take_slot(&j->w->slots[b->slot], b, j->hidden + (size_t)b->slot * j->H,
                  j->logits + (size_t)b->slot * j->total, j->H, j->total);
    }
    stop_job sj = {j->streams, j->status};
    stop_task(&sj, i, worker);
    j->rc[i] = 0;
    if (j->status[i] == 0) {
        sample_job job = {j->streams, NULL, NULL, j->total, j->rc};
        sample_task(&job, i, worker);
    }
}

int gp_gen_step_begin(gp_gen_stream **streams, int n, gp_kv_pool *kv, gp_gen_workspace *w,
                      int max_rows, gp_pool *pool, gp_error *err) {
    if (n <= 0) return 0;
    if (w->pending_slots)
        return -gp_fail(err, GEPARD_ERR_INTERNAL, "a generation step is already in flight");
    const gp_model *m = streams[0]->model;
    if (max_rows < 1) max_rows = 1;
    /* Worst case: 2 decode rows per stream + max_rows prefill rows. */
    int rc = workspace_reserve(w, m, (size_t)2 * n + (size_t)max_rows, (size_t)2 * n + 2, err);
    if (rc) return -rc;
    w->step_id++;
    int n_slots = 0, n_frames = 0, n_decode_rows = 0;
    int rows = plan_rows(streams, n, w, max_rows, &n_slots, &n_frames, &n_decode_rows, pool);
    if (n_slots == 0) return 0;
    if (gp_gen_on_device(m)) {
        rc = launch_on_device(m, kv, w, n_slots, rows, n_frames, n_decode_rows, err);
        w->pending_on_device = true;
    } else {
        rc = gp_backbone_forward(m, kv, &w->forward, w->seqs, n_slots, w->rows, w->hidden, NULL,
                                 pool, err);
        w->pending_on_device = false;
    }
    if (rc) return -rc;
    w->pending_slots = n_slots;
    return n_slots;
}

/* gp_gen_step_end after a device step: one pass per stream on the pool
 * (finish_task), then the phase changes and KV releases in stream order. */
static int finish_on_pool(gp_gen_stream **streams, int n, gp_kv_pool *kv, gp_gen_workspace *w,
                          const float *hidden, const float *logits, gp_pool *pool, gp_error *err) {
    const gp_model *m = streams[0]->model;
    const int n_run = streams_of_step(streams, n, w);
    gp_gen_stream **run = w->sampling;
    finish_job job = {
        run,          w,          hidden, logits, m->cfg.backbone.hidden_size, m->cfg.total_logits,
        w->seq_start, w->seq_rows};
    run_tasks(pool, n_run, finish_task, &job);
    for (int i = 0; i < n_run; i++) {
        gp_gen_stream *s = run[i];
        if (w->seq_start[i] < 0) continue; /* prefill still running */
        if (w->seq_start[i] > 0) {
            stopped_by_head(s, kv);
            continue;
        }
        if (w->seq_rows[i])
            return -gp_fail(err, w->seq_rows[i], "out of memory storing the frames of a stream");
        frame_drawn(s, kv);
    }
    return n_run;
}

int gp_gen_step_end(gp_gen_stream **streams, int n, gp_kv_pool *kv, gp_gen_workspace *w,
                    gp_pool *pool, gp_error *err) {
    const int n_slots = w->pending_slots;
    if (n_slots == 0) return 0;
    w->pending_slots = 0;
    const gp_model *m = streams[0]->model;
    const int H = m->cfg.backbone.hidden_size, total = m->cfg.total_logits;
    const float *hidden = w->hidden, *dev_logits = NULL;
    if (w->pending_on_device) {
        gp_dev_status st = {0, ""};
        const uint64_t t0 = gp_now_ns();
        const int rc = w->plugin->step_wait(w->runner, &hidden, &dev_logits, &st);
        w->wait_seconds += (double)(gp_now_ns() - t0) * 1e-9;
        if (rc) return -gp_device_error(&st, err);
    }
    if (dev_logits) return finish_on_pool(streams, n, kv, w, hidden, dev_logits, pool, err);
    /* On the CPU: the heads run here, for all streams at once. */
    for (int i = 0; i < n_slots; i++)
        take_slot(&w->slots[i], w->slots[i].branch, hidden + (size_t)i * H, NULL, H, total);
    /* Stop checks (cond branch only), then collect the hidden states that
     * need heads: frame 0 after a complete prefill, or a decode step that did
     * not stop. Each stream's check and draw touch only that stream, so with
     * many streams they run on the pool's threads. */
    const int n_run = streams_of_step(streams, n, w);
    gp_gen_stream **sampling = w->sampling;
    stop_job sj = {sampling, w->seq_start};
    run_tasks(pool, n_run, stop_task, &sj);
    int n_heads = 0;
    for (int i = 0; i < n_run; i++) {
        gp_gen_stream *s = sampling[i];
        if (w->seq_start[i] < 0) continue; /* prefill still running */
        if (w->seq_start[i] > 0) {
            stopped_by_head(s, kv);
            continue;
        }
        sampling[n_heads++] = s;
    }
    /* One head evaluation for all: rows [cond, uncond?] per sampling stream. */
    int head_rows = 0;
    for (int i = 0; i < n_heads; i++) {
        gp_gen_stream *s = sampling[i];
        const bool guided = s->uncond.used && gp_gen_guided(s, s->n_frames);
        gp_gen_branch *b[2] = {&s->cond, &s->uncond};
        w->seq_rows[i] = head_rows;
        for (int k = 0; k < 1 + guided; k++, head_rows++)
            memcpy(w->rows + (size_t)head_rows * H, b[k]->hidden, (size_t)H * sizeof(float));
    }
    if (head_rows) gp_overlay_heads(m, w->rows, head_rows, w->logits, pool);
    sample_job job = {sampling, w->seq_rows, w->logits, total, w->seq_start};
    run_tasks(pool, n_heads, sample_task, &job);
    for (int i = 0; i < n_heads; i++) {
        gp_gen_stream *s = sampling[i];
        if (w->seq_start[i])
            return -gp_fail(err, w->seq_start[i], "out of memory storing the frames of a stream");
        frame_drawn(s, kv);
    }
    return n_run;
}

int gp_gen_step(gp_gen_stream **streams, int n, gp_kv_pool *kv, gp_gen_workspace *w, int max_rows,
                gp_pool *pool, gp_error *err) {
    int rc = gp_gen_step_begin(streams, n, kv, w, max_rows, pool, err);
    if (rc <= 0) return rc;
    return gp_gen_step_end(streams, n, kv, w, pool, err);
}
