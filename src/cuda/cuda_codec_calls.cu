/* cuda_codec_calls.cu — the codec's decode calls (device_plugin.h's
 * codec_decode, codec_decode_submit / codec_decode_collect, codec_gpu_ms):
 * a call with more frame columns (streams × frames) than the work buffers
 * hold is cut into pieces — by streams, then by frames, in order — which
 * gives the same samples because the state carries across pieces; one frame
 * per stream runs as a CUDA graph captured per batch size; a queued call's
 * pieces each have pinned staging of their own and are collected later.
 * The layers themselves are cuda_codec.cu's gp_cuda_codec_run_layers. */
#include <pthread.h>
#include <string.h>

#include "cuda/cuda_codec.h"

/* The batch a call of n one-frame streams runs as a captured graph: powers
 * of two to 8, then the next multiple of an eighth of the power of two below
 * n (at least 8). A padded batch costs ~its size, so a call of 165 streams
 * decodes 176 frames, not 256. */
static int codec_graph_cols(const gp_dev_codec *c, int n) {
    if (n <= 8 || c->graph_pow2) {
        int nb = 1;
        while (nb < n) nb <<= 1;
        return nb;
    }
    int p = 8;
    while (2 * p < n) p <<= 1; /* p < n <= 2p */
    const int step = p >= 64 ? p / 8 : 8;
    return (n + step - 1) / step * step;
}

/* Capture the layers for nb streams of one frame into slot i. */
static int capture_codec_graph(gp_dev_codec *c, int i, int nb, gp_dev_status *st) {
    const double t0 = gp_cuda_host_ms();
    cudaGraph_t g = NULL;
    GP_CUDA_TRY(cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeThreadLocal),
                "capturing the codec");
    gp_cuda_codec_run_layers(c, nb, 1);
    cudaError_t e = cudaStreamEndCapture(c->stream, &g);
    if (e == cudaSuccess) e = cudaGraphInstantiate(&c->graphs[i], g, 0);
    if (g) cudaGraphDestroy(g);
    if (e != cudaSuccess) {
        c->graphs[i] = NULL;
        return gp_cuda_check(e, "capturing the codec", st);
    }
    c->graph_cols[i] = nb;
    gp_cuda_graph_note("codec", nb, 1, i + 1, gp_cuda_host_ms() - t0);
    return 0;
}

/* The slot holding nb's graph, else the first free one (CODEC_GRAPHS: full). */
static int codec_graph_slot(const gp_dev_codec *c, int nb) {
    int i = 0;
    while (i < CODEC_GRAPHS && c->graphs[i] && c->graph_cols[i] != nb) i++;
    return i;
}

/* The captured layers for nb streams of one frame (nb from codec_graph_cols).
 * With graphs_ahead the first capture of a batch (nb > 1) takes every other
 * size with it (35 at most, ~60 ms on the H200), so a server's warm-up pays
 * for them all; one stream alone (`gepard say`) captures its own only. */
static int codec_graph(gp_dev_codec *c, int nb, cudaGraphExec_t *out, gp_dev_status *st) {
    const int i = codec_graph_slot(c, nb);
    if (i == CODEC_GRAPHS)
        return gp_cuda_fail(st, GEPARD_ERR_INTERNAL, "codec: no room for a graph of %d streams",
                            nb);
    if (!c->graphs[i]) {
        const bool first = nb > 1 && !c->graphs_ahead_done;
        if (first) c->graphs_ahead_done = true;
        int rc = capture_codec_graph(c, i, nb, st);
        for (int n = 1; !rc && first && c->graphs_ahead && n <= CODEC_MAX_COLS;
             n = codec_graph_cols(c, n) + 1) {
            const int size = codec_graph_cols(c, n), j = codec_graph_slot(c, size);
            if (j < CODEC_GRAPHS && !c->graphs[j]) rc = capture_codec_graph(c, j, size, st);
        }
        if (rc) return rc;
    }
    *out = c->graphs[i];
    return 0;
}

/* Queue one piece: n ≤ CODEC_MAX_COLS streams, frames f0 .. f0 + T − 1 of
 * each, staged in h_in[p]; its samples land in h_pcm[p] [n][T·spf] once t1
 * has passed (t0 is recorded before it when `first`). One frame per stream
 * runs as a captured graph for the batch codec_graph_cols gives (the padding
 * streams decode zeros into a scratch state). The slots' parities flip now:
 * a later piece of the same slots reads what this one writes (the stream
 * keeps them in order). */
static int codec_piece_queue(gp_dev_codec *c, int p, int n, const int *slots, int frames, int f0,
                             int T, const float *latent, bool first, gp_dev_status *st) {
    const size_t D = (size_t)c->input_dim, M = CODEC_MAX_COLS;
    const bool graph = c->use_graphs && T == 1;
    const int nb = graph ? codec_graph_cols(c, n) : n;
    float **h_ptrs = (float **)c->h_in[p];
    float *h_lat = (float *)(c->h_in[p] + 2 * M * sizeof(float *));
    for (int i = 0; i < n; i++) {
        float *base = c->slot_state[slots[i]];
        const int par = c->parity[slots[i]];
        h_ptrs[i] = base + (size_t)par * c->state_floats;
        h_ptrs[M + i] = base + (size_t)(1 - par) * c->state_floats;
        memcpy(h_lat + (size_t)i * T * D, latent + ((size_t)i * frames + f0) * D,
               (size_t)T * D * sizeof(float));
    }
    for (int i = n; i < nb; i++) {
        h_ptrs[i] = c->dummy;
        h_ptrs[M + i] = c->dummy + c->state_floats;
        memset(h_lat + (size_t)i * T * D, 0, (size_t)T * D * sizeof(float));
    }
    cudaStream_t s = c->stream;
    cudaGraphExec_t exec = NULL;
    if (graph) {
        int rc = codec_graph(c, nb, &exec, st);
        if (rc) return rc;
    }
    if (first) GP_CUDA_TRY(cudaEventRecord(c->t0, s), "codec timing");
    GP_CUDA_TRY(
        cudaMemcpyAsync(c->ptrs, h_ptrs, 2 * M * sizeof(float *), cudaMemcpyHostToDevice, s),
        "codec upload");
    GP_CUDA_TRY(cudaMemcpyAsync(c->lat, h_lat, (size_t)nb * T * D * sizeof(float),
                                cudaMemcpyHostToDevice, s),
                "codec upload");
    if (exec)
        GP_CUDA_TRY(cudaGraphLaunch(exec, s), "codec graph");
    else
        gp_cuda_codec_run_layers(c, n, T);
    GP_CUDA_TRY(cudaGetLastError(), "codec kernels");
    const size_t samples = (size_t)T * c->spf;
    GP_CUDA_TRY(cudaMemcpyAsync(c->h_pcm[p], c->pcm, (size_t)n * samples * sizeof(float),
                                cudaMemcpyDeviceToHost, s),
                "codec download");
    GP_CUDA_TRY(cudaEventRecord(c->t1, s), "codec timing");
    for (int i = 0; i < n; i++) c->parity[slots[i]] ^= 1;
    return 0;
}

/* Whether what was queued up to t1 is done (waited for when `wait`); its
 * GPU time since t0 is added to last_ms when it is. */
static int codec_wait(gp_dev_codec *c, bool wait, bool *done, gp_dev_status *st) {
    *done = false;
    if (wait) {
        GP_CUDA_TRY(cudaEventSynchronize(c->t1), "codec decode");
    } else {
        const cudaError_t e = cudaEventQuery(c->t1);
        if (e == cudaErrorNotReady) return 0;
        if (e != cudaSuccess) return gp_cuda_check(e, "codec decode", st);
    }
    float ms = 0.0f;
    if (cudaEventElapsedTime(&ms, c->t0, c->t1) == cudaSuccess) c->last_ms += ms;
    *done = true;
    return 0;
}

/* A finished piece's samples (staging p: n streams, T frames) to pcm[i] +
 * f0 frames (a NULL pcm[i] is skipped). */
static void codec_piece_copy_out(const gp_dev_codec *c, int p, int n, int T, int f0,
                                 float *const *pcm) {
    const size_t samples = (size_t)T * c->spf;
    for (int i = 0; i < n; i++)
        if (pcm[i])
            memcpy(pcm[i] + (size_t)f0 * c->spf, c->h_pcm[p] + (size_t)i * samples,
                   samples * sizeof(float));
}

/* The queued decode, if any, collected (lock held): *done as in
 * codec_wait; a failed one is dropped (its samples never come). */
static int codec_collect_locked(gp_dev_codec *c, bool wait, bool *done, gp_dev_status *st) {
    *done = true;
    if (!c->queued) return 0;
    const int rc = codec_wait(c, wait, done, st);
    if (rc == 0 && *done)
        for (int i = 0; i < c->queued_pieces; i++) {
            const codec_queued_piece *q = &c->queued_piece[i];
            codec_piece_copy_out(c, i, q->n, q->T, q->f0, c->queued_pcm + q->g);
        }
    if (rc || *done) c->queued = false;
    return rc;
}

static int codec_check_slots(const gp_dev_codec *c, int n, const int *slots, gp_dev_status *st) {
    for (int i = 0; i < n; i++)
        if (slots[i] < 0 || slots[i] >= c->cap_slots || !c->used[slots[i]])
            return gp_cuda_fail(st, GEPARD_ERR_INVALID_ARGUMENT, "no codec state slot %d",
                                slots[i]);
    return 0;
}

/* The piece after *q of a call of n streams × `frames` frames (q->n 0: the
 * first): groups of at most CODEC_MAX_COLS streams, each in runs of
 * CODEC_MAX_COLS / group frames, in order. False after the last. */
static bool codec_next_piece(int n, int frames, codec_queued_piece *q) {
    const int group = n < CODEC_MAX_COLS ? n : CODEC_MAX_COLS;
    int g = q->g, f = q->n ? q->f0 + q->T : 0;
    if (q->n && f >= frames) g += group, f = 0;
    if (g >= n) return false;
    const int gn = n - g < group ? n - g : group, step = CODEC_MAX_COLS / gn;
    *q = {g, gn, f, frames - f < step ? frames - f : step};
    return true;
}

/* Decode now, piece after piece (lock held, nothing queued). */
static int codec_decode_locked(gp_dev_codec *c, int n, const int *slots, int frames,
                               const float *latent, float *const *pcm, gp_dev_status *st) {
    int rc = codec_check_slots(c, n, slots, st);
    c->last_ms = 0.0;
    codec_queued_piece q = {0, 0, 0, 0};
    while (rc == 0 && codec_next_piece(n, frames, &q)) {
        rc = codec_piece_queue(c, 0, q.n, slots + q.g, frames, q.f0, q.T,
                               latent + (size_t)q.g * frames * c->input_dim, true, st);
        bool done = false;
        if (rc == 0) rc = codec_wait(c, true, &done, st);
        if (rc == 0) codec_piece_copy_out(c, 0, q.n, q.T, q.f0, pcm + q.g);
    }
    return rc;
}

extern "C" int gp_cuda_codec_decode(gp_dev_codec *c, int n, const int *slots, int frames,
                                    const float *latent, float *const *pcm, gp_dev_status *st) {
    if (n <= 0 || frames <= 0) return 0;
    GP_CUDA_TRY(cudaSetDevice(c->device), "selecting the GPU");
    pthread_mutex_lock(&c->lock);
    bool done = true;
    int rc = codec_collect_locked(c, true, &done, st);
    if (rc == 0) rc = codec_decode_locked(c, n, slots, frames, latent, pcm, st);
    pthread_mutex_unlock(&c->lock);
    return rc;
}

extern "C" int gp_cuda_codec_decode_submit(gp_dev_codec *c, int n, const int *slots, int frames,
                                           const float *latent, float *const *pcm,
                                           gp_dev_status *st) {
    if (n <= 0 || frames <= 0) return 0;
    GP_CUDA_TRY(cudaSetDevice(c->device), "selecting the GPU");
    pthread_mutex_lock(&c->lock);
    bool done = true;
    int rc = codec_collect_locked(c, true, &done, st);
    codec_queued_piece pieces[CODEC_QUEUE_PIECES + 1], q = {0, 0, 0, 0};
    int n_pieces = 0; /* up to one more than the queue holds: too many */
    while (n_pieces <= CODEC_QUEUE_PIECES && codec_next_piece(n, frames, &q))
        pieces[n_pieces++] = q;
    if (rc == 0 && n_pieces > CODEC_QUEUE_PIECES) {
        rc = codec_decode_locked(c, n, slots, frames, latent, pcm, st);
    } else if (rc == 0) {
        rc = codec_check_slots(c, n, slots, st);
        c->last_ms = 0.0;
        for (int i = 0; i < n_pieces && rc == 0; i++) {
            const codec_queued_piece *q = &pieces[i];
            rc = codec_piece_queue(c, i, q->n, slots + q->g, frames, q->f0, q->T,
                                   latent + (size_t)q->g * frames * c->input_dim, i == 0, st);
        }
        if (rc == 0) {
            c->queued = true;
            c->queued_n = n;
            c->queued_pieces = n_pieces;
            for (int i = 0; i < n_pieces; i++) c->queued_piece[i] = pieces[i];
            for (int i = 0; i < n; i++) {
                c->queued_slots[i] = slots[i];
                c->queued_pcm[i] = pcm[i];
            }
        }
    }
    pthread_mutex_unlock(&c->lock);
    return rc;
}

extern "C" int gp_cuda_codec_decode_collect(gp_dev_codec *c, int wait, int *done,
                                            gp_dev_status *st) {
    *done = 1;
    GP_CUDA_TRY(cudaSetDevice(c->device), "selecting the GPU");
    pthread_mutex_lock(&c->lock);
    bool ready = true;
    const int rc = codec_collect_locked(c, wait != 0, &ready, st);
    pthread_mutex_unlock(&c->lock);
    *done = ready;
    return rc;
}

extern "C" double gp_cuda_codec_gpu_ms(gp_dev_codec *c) { return c ? c->last_ms : 0.0; }
