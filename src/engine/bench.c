/* bench.c — gepard_benchmark(): the numbers behind `gepard bench`, as one
 * JSON object. Measures, in one run: the machine's roofline (read bandwidth,
 * f32 FMA and bf16 dot peaks), prefill speed and per-frame backbone time for
 * one stream (the batched generation step with one stream, no codec), the
 * streaming codec's per-frame time, and end-to-end synthesis through the
 * engine (real-time factor, time to first audio), with peak RSS. Each phase is
 * compared with its physical bound: weight bytes per frame / bandwidth for
 * the backbone, decoder MACs / FMA peak for the codec. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"
#include "base/rng.h"
#include "base/timing.h"
#include "compute/kernels.h"
#include "compute/onednn_matmul.h"
#include "compute/roofline.h"
#include "engine/api_error.h"
#include "engine/api_internal.h"
#include "engine/bench_gpu.h"
#include "engine/synth_prep.h"
#include "model/backbone.h"

gepard_bench_params gepard_bench_default_params(void) {
    gepard_bench_params p;
    memset(&p, 0, sizeof p);
    p.weights = GEPARD_WEIGHTS_DEFAULT;
    p.compare = GEPARD_WEIGHTS_NONE;
    p.frames = 64;
    p.text = "The quick brown fox jumps over the lazy dog near the quiet river bank.";
    return p;
}

static void reset_peak_rss(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (f) {
        fputs("5", f);
        fclose(f);
    }
}

static void cpu_model_name(char *out, size_t size) {
    snprintf(out, size, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) == 0) {
            char *colon = strchr(line, ':');
            if (colon) {
                snprintf(out, size, "%s", colon + 2);
                out[strcspn(out, "\n")] = '\0';
            }
            break;
        }
    }
    fclose(f);
}

static size_t backbone_bytes_per_frame(const gp_model *m) {
    if (m->device) return m->device->plugin->model_bytes(m->device->dev);
    size_t bytes = 0;
    for (int l = 0; l < m->cfg.backbone.num_layers; l++) {
        const gp_layer *L = &m->layers[l];
        const gp_matrix *ms[] = {&L->q_proj,    &L->k_proj,  &L->v_proj,   &L->o_proj,
                                 &L->gate_proj, &L->up_proj, &L->down_proj};
        for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++)
            bytes += gp_matrix_decode_bytes(ms[i]);
    }
    return bytes + gp_matrix_bytes(&m->embed_proj0) + gp_matrix_bytes(&m->embed_proj2) +
           gp_matrix_bytes(&m->heads);
}

/* Multiply-adds of the backbone's matrices per row (from the config, so the
 * same on a device). */
static double backbone_macs_per_row(const gp_model *m) {
    const gp_backbone_config *b = &m->cfg.backbone;
    const double H = b->hidden_size, QD = (double)b->num_heads * b->head_dim,
                 KD = (double)b->num_kv_heads * b->head_dim, I = b->intermediate_size;
    return b->num_layers * (H * 2 * QD + 2 * H * KD + QD * H + 3 * H * I);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct backbone_numbers {
    double prefill_ms, prefill_tokens_per_s, ms_per_frame, median_ms;
    int prefill_rows, frames;
} backbone_numbers;

/* One stream through gp_gen_step: prefill, then `frames` decode steps. */
static int bench_backbone(gepard_model *gm, const char *text, int frames, int threads,
                          gp_gen_workspace *w, backbone_numbers *out, gp_error *err) {
    const gp_model *m = gm->model;
    gepard_synth_params sp = gepard_synth_default_params();
    sp.random_seed = 0;
    sp.seed = 1;
    sp.stop_threshold = 2.0f; /* never stop early */
    sp.max_frames = frames + 1;
    gp_gen_params gen;
    int rc = gp_synth_params_convert(&sp, &gen, err);
    int32_t *ids = NULL;
    int n_ids = 0;
    if (!rc) rc = gp_synth_layout(gm, text, strlen(text), 0, gen.max_frames, &ids, &n_ids, err);
    if (rc) return rc;
    gp_gen_stream *s = NULL;
    gp_kv_pool *kv = NULL;
    gp_pool *pool = NULL;
    double *times = calloc((size_t)frames + 1, sizeof(double));
    const gp_backbone_config *bb = &m->cfg.backbone;
    if (!times) rc = gp_fail_oom(err, "timings", 0);
    if (!rc) rc = gp_gen_create(m, &gen, ids, n_ids, NULL, 0, NULL, &s, err);
    if (!rc)
        rc = gp_kv_pool_create(bb->num_layers, bb->num_kv_heads, bb->head_dim, 16,
                               (n_ids + gen.max_frames) / 16 + 4, &kv, err);
    if (!rc) rc = gp_pool_create(threads, &pool, err);
    if (!rc) rc = gp_gen_reserve(s, kv, err);
    if (!rc) {
        uint64_t t0 = gp_now_ns();
        while (!rc && s->n_frames == 0) {
            int r = gp_gen_step(&s, 1, kv, w, 4096, pool, err);
            if (r < 0) rc = -r;
        }
        out->prefill_ms = (double)(gp_now_ns() - t0) * 1e-6;
        out->prefill_rows = n_ids;
        out->prefill_tokens_per_s = n_ids / (out->prefill_ms * 1e-3);
        int done = 0;
        while (!rc && done < frames && s->phase != GP_GEN_DONE) {
            uint64_t t = gp_now_ns();
            int r = gp_gen_step(&s, 1, kv, w, 4096, pool, err);
            if (r < 0) rc = -r;
            times[done++] = (double)(gp_now_ns() - t) * 1e-6;
        }
        out->frames = done;
        double sum = 0;
        for (int i = 0; i < done; i++) sum += times[i];
        out->ms_per_frame = done ? sum / done : 0;
        qsort(times, (size_t)done, sizeof(double), cmp_double);
        out->median_ms = done ? times[done / 2] : 0;
    }
    free(times);
    free(ids);
    gp_gen_free(s, kv);
    gp_kv_pool_free(kv);
    gp_pool_free(pool);
    return rc;
}

/* Prefill speed of every matrix-kernel level this CPU runs: `rows` random
 * rows through gp_backbone_forward (one fresh sequence, best of 3), with the
 * level switched for the measurement and restored after. Levels give
 * different (each batch-invariant) results, so the engine never switches
 * by itself; this shows what each would give. */
static int bench_prefill_levels(const gp_model *m, int rows, int threads, cJSON *into,
                                gp_error *err) {
    const gp_backbone_config *bb = &m->cfg.backbone;
    const int H = bb->hidden_size;
    float *x = gp_aligned_alloc((size_t)rows * H * sizeof(float));
    float *h = gp_aligned_alloc((size_t)H * sizeof(float));
    gp_kv_pool *kv = NULL;
    gp_pool *pool = NULL;
    gp_forward_scratch s;
    gp_forward_scratch_init(&s);
    int rc = x && h ? GEPARD_OK : gp_fail_oom(err, "prefill bench rows", (size_t)rows * H * 4);
    if (!rc)
        rc = gp_kv_pool_create(bb->num_layers, bb->num_kv_heads, bb->head_dim, 16, rows / 16 + 2,
                               &kv, err);
    if (!rc) rc = gp_pool_create(threads, &pool, err);
    gp_rng rng;
    gp_rng_seed(&rng, 7);
    for (size_t i = 0; !rc && i < (size_t)rows * H; i++) x[i] = (float)(gp_rng_uniform(&rng) - 0.5);
    const gp_kernel_level active = gp_kernels_active();
    cJSON *obj = cJSON_AddObjectToObject(into, "prefill_by_level");
    /* the native kernels at each level, then oneDNN's path when the model has it */
    struct prefill_path {
        const char *name;
        gp_kernel_level level;
        bool onednn;
    } paths[GP_KERNELS_AVX512 + 1];
    int n_paths = 0;
    for (int l = GP_KERNELS_AVX512; l >= GP_KERNELS_AVX2; l--)
        if (gp_kernel_table_for((gp_kernel_level)l))
            paths[n_paths++] = (struct prefill_path){gp_kernel_level_name((gp_kernel_level)l),
                                                     (gp_kernel_level)l, false};
    if (m->prefill_onednn) paths[n_paths++] = (struct prefill_path){"onednn", active, true};
    if (m->prefill_tiles) paths[n_paths++] = (struct prefill_path){"tiles", active, true};
    for (int p = 0; !rc && p < n_paths; p++) {
        gp_onednn_enable(paths[p].onednn);
        gp_kernels_set(paths[p].level);
        double best = 1e30;
        for (int rep = 0; !rc && rep < 3; rep++) {
            gp_kv_seq seq;
            gp_kv_seq_init(&seq);
            rc = gp_kv_seq_reserve(kv, &seq, rows, err);
            gp_backbone_seq bs = {&seq, rows, NULL};
            uint64_t t0 = gp_now_ns();
            if (!rc) rc = gp_backbone_forward(m, kv, &s, &bs, 1, x, h, NULL, pool, err);
            const double ms = (double)(gp_now_ns() - t0) * 1e-6;
            if (ms < best) best = ms;
            gp_kv_seq_release(kv, &seq);
        }
        cJSON *o = cJSON_AddObjectToObject(obj, paths[p].name);
        cJSON_AddNumberToObject(o, "tokens_per_s", rows / (best * 1e-3));
        cJSON_AddNumberToObject(o, "gflops", 2 * backbone_macs_per_row(m) * rows / (best * 1e6));
    }
    gp_kernels_set(active);
    gp_onednn_enable(true);
    gp_forward_scratch_free(&s);
    gp_kv_pool_free(kv);
    gp_pool_free(pool);
    gp_aligned_free(x);
    gp_aligned_free(h);
    return rc;
}

/* Streaming decode of `frames` random frames, one frame per push. */
static int bench_codec(gepard_codec *gc, int frames, double *ms_per_frame, gp_error *err) {
    const gp_codec *c = gc->codec;
    const int C = c->fsq.channels, spf = c->cfg.samples_per_frame;
    gp_codec_code_stream *s;
    int rc = gp_codec_code_stream_create(c, &s, err);
    if (rc) return rc;
    int32_t *codes = malloc((size_t)C * sizeof(int32_t));
    float *pcm = malloc((size_t)spf * sizeof(float));
    if (!codes || !pcm) rc = gp_fail_oom(err, "codec bench", 0);
    uint64_t state = 12345;
    /* warm-up frame, not timed */
    for (int f = -1; !rc && f < frames; f++) {
        for (int k = 0; k < C; k++) {
            state = state * 6364136223846793005ull + 1442695040888963407ull;
            codes[k] = (int32_t)((state >> 33) % (uint64_t)gp_fsq_levels(&c->fsq, k));
        }
        if (f == 0) *ms_per_frame = (double)gp_now_ns();
        rc = gp_codec_code_stream_push(s, codes, 1, pcm, err);
    }
    if (!rc) *ms_per_frame = ((double)gp_now_ns() - *ms_per_frame) * 1e-6 / frames;
    free(codes);
    free(pcm);
    gp_codec_code_stream_free(s);
    return rc;
}

/* The codec's fast paths, each loaded on its own: streaming ms per frame and the fraction
 * of the arithmetic peak it reaches (f32 FMA, or bf16 dot products for bf16). A path the
 * CPU cannot run is left out. */
static int bench_codec_paths(const gepard_bench_params *p, int threads, double fma, double bf16,
                             cJSON *into, gp_error *err) {
    static const struct {
        gepard_codec_precision precision;
        const char *name;
    } paths[] = {{GEPARD_CODEC_F32, "f32"},
                 {GEPARD_CODEC_MIXED, "mixed"},
                 {GEPARD_CODEC_BF16, "bf16"},
                 {GEPARD_CODEC_TILES, "tiles"}};
    cJSON *obj = cJSON_AddObjectToObject(into, "codec_paths");
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        gepard_codec_params cp = gepard_codec_default_params();
        cp.n_threads = threads;
        cp.precision = paths[i].precision;
        cp.device = "cpu";
        gepard_codec *c;
        if (gepard_codec_load_with_params(p->codec, &cp, &c) != GEPARD_OK)
            return gp_fail(err, GEPARD_ERR_IO, "%s", gepard_last_error());
        int rc = GEPARD_OK;
        if (strcmp(gepard_codec_kernels(c), paths[i].name) == 0) {
            double ms = 0;
            rc = bench_codec(c, p->frames, &ms, err);
            const double gflops = 2.0 * gp_codec_decoder_macs_per_frame(&c->codec->dec) / ms / 1e6;
            /* the tiles' rate is reported against the f32 FMA peak they replace */
            const double peak = paths[i].precision == GEPARD_CODEC_BF16 ? bf16 : fma;
            cJSON *o = cJSON_AddObjectToObject(obj, paths[i].name);
            cJSON_AddNumberToObject(o, "ms_per_frame", ms);
            cJSON_AddNumberToObject(o, "gflops", gflops);
            cJSON_AddNumberToObject(o, "fraction_of_peak", peak > 0 ? gflops / peak : 0);
        }
        gepard_codec_free(c);
        if (rc) return rc;
    }
    return GEPARD_OK;
}

typedef struct e2e_numbers {
    gepard_synth_result result;
} e2e_numbers;

static int bench_end_to_end(gepard_model *gm, gepard_codec *gc, const char *text, int frames,
                            int threads, e2e_numbers *out, gp_error *err) {
    gepard_engine_params ep = gepard_engine_default_params();
    ep.threads = threads;
    ep.max_streams = 1;
    gepard_engine *engine;
    if (gepard_engine_create(gm, gc, &ep, &engine) != GEPARD_OK)
        return gp_fail(err, GEPARD_ERR_INTERNAL, "%s", gepard_last_error());
    gepard_synth_params sp = gepard_synth_default_params();
    sp.random_seed = 0;
    sp.seed = 1;
    sp.stop_threshold = 2.0f;
    sp.max_frames = frames;
    sp.split_text = 0;
    gepard_status st = gepard_synthesize(engine, text, &sp, NULL, &out->result);
    gepard_engine_free(engine);
    if (st != GEPARD_OK) return gp_fail(err, st, "%s", gepard_last_error());
    return GEPARD_OK;
}

static const char *format_name(gepard_weight_format f) {
    return f == GEPARD_WEIGHTS_DEFAULT ? "bf16" : gp_weight_format_name((gp_weight_format)f);
}

static int run_format(const gepard_bench_params *p, gepard_weight_format fmt, bool with_codec,
                      gepard_codec *codec, double bandwidth, double fma, cJSON *into,
                      gp_error *err) {
    reset_peak_rss();
    gepard_load_params lp = gepard_load_default_params();
    lp.weights = fmt;
    lp.device = p->device;
    lp.gpu_precision = p->gpu_precision;
    gepard_model *gm;
    uint64_t t0 = gp_now_ns();
    if (gepard_model_load(p->model, &lp, &gm) != GEPARD_OK)
        return gp_fail(err, GEPARD_ERR_IO, "%s", gepard_last_error());
    double load_s = (double)(gp_now_ns() - t0) * 1e-9;
    backbone_numbers bn;
    memset(&bn, 0, sizeof bn);
    gp_gen_workspace w;
    gp_gen_workspace_init(&w);
    const bool gpu = gm->model->device != NULL;
    /* The first run pays once for what a server pays at start-up: the mapped
     * weights' first reads from the page cache, on a GPU handles, buffers and
     * graph captures. Its prefill is reported (first_prefill_ms); the second
     * run is measured (a CPU's warm-up decodes one frame only). */
    int rc = bench_backbone(gm, p->text, gpu ? p->frames : 1, p->threads, &w, &bn, err);
    const double first_prefill_ms = bn.prefill_ms;
    if (!rc) rc = bench_backbone(gm, p->text, p->frames, p->threads, &w, &bn, err);
    gp_gen_workspace_free(&w);
    size_t bytes = backbone_bytes_per_frame(gm->model);
    cJSON_AddStringToObject(into, "device", gepard_model_device(gm));
    cJSON_AddStringToObject(
        into, "dtype", gpu ? (p->gpu_precision ? p->gpu_precision : "bf16") : format_name(fmt));
    cJSON_AddNumberToObject(into, "load_seconds", load_s);
    if (!gpu) {
        cJSON_AddStringToObject(into, "prefill_path",
                                gm->model->prefill_tiles    ? "tiles-bf16x2"
                                : gm->model->prefill_onednn ? "onednn-bf16x3"
                                                            : "native");
        cJSON_AddStringToObject(into, "prefill_path_why", gm->model->prefill_why);
        cJSON_AddStringToObject(into, "decode_weights_why", gm->model->decode_weights_why);
    }
    cJSON_AddNumberToObject(into, "backbone_ms_per_frame", bn.ms_per_frame);
    cJSON_AddNumberToObject(into, "backbone_median_ms_per_frame", bn.median_ms);
    cJSON_AddNumberToObject(into, "prefill_tokens", bn.prefill_rows);
    cJSON_AddNumberToObject(into, "prefill_ms", bn.prefill_ms);
    cJSON_AddNumberToObject(into, "first_prefill_ms", first_prefill_ms);
    cJSON_AddNumberToObject(into, "prefill_tokens_per_s", bn.prefill_tokens_per_s);
    /* the whole first step: prefill rows, heads and the draw of frame 0 */
    const double prefill_gflops = bn.prefill_ms > 0 ? 2 * backbone_macs_per_row(gm->model) *
                                                          bn.prefill_rows / (bn.prefill_ms * 1e6)
                                                    : 0;
    cJSON_AddNumberToObject(into, "prefill_gflop_per_token",
                            2 * backbone_macs_per_row(gm->model) / 1e9);
    cJSON_AddNumberToObject(into, "prefill_gflops", prefill_gflops);
    if (!gpu) /* the CPU kernels run f32 FMAs whatever the weight format */
        cJSON_AddNumberToObject(into, "prefill_fraction_of_fma_peak",
                                fma > 0 ? prefill_gflops / fma : 0);
    cJSON_AddNumberToObject(into, "weight_mb_per_frame", (double)bytes / 1e6);
    double bound_ms = bandwidth > 0 ? (double)bytes / (bandwidth * 1e9) * 1e3 : 0;
    cJSON_AddNumberToObject(into, "backbone_bound_ms_per_frame", bound_ms);
    cJSON_AddNumberToObject(into, "backbone_fraction_of_bound",
                            bn.ms_per_frame > 0 ? bound_ms / bn.ms_per_frame : 0);
    if (!rc && with_codec) {
        double codec_ms = 0;
        rc = bench_codec(codec, p->frames, &codec_ms, err);
        double gflop = 2.0 * gp_codec_decoder_macs_per_frame(&codec->codec->dec) / 1e9;
        double codec_bound = fma > 0 ? gflop / fma * 1e3 : 0;
        cJSON_AddNumberToObject(into, "codec_ms_per_frame", codec_ms);
        cJSON_AddNumberToObject(into, "codec_gflop_per_frame", gflop);
        cJSON_AddNumberToObject(into, "codec_bound_ms_per_frame", codec_bound);
        cJSON_AddNumberToObject(into, "codec_fraction_of_bound",
                                codec_ms > 0 ? codec_bound / codec_ms : 0);
        e2e_numbers e2e;
        memset(&e2e, 0, sizeof e2e);
        if (!rc) rc = bench_end_to_end(gm, codec, p->text, p->frames, p->threads, &e2e, err);
        cJSON_AddNumberToObject(into, "frames", (double)e2e.result.frames);
        cJSON_AddNumberToObject(into, "audio_seconds", e2e.result.audio_seconds);
        cJSON_AddNumberToObject(into, "rtf", e2e.result.rtf);
        cJSON_AddNumberToObject(into, "ttfa_ms", e2e.result.ttfa_ms);
        cJSON_AddNumberToObject(
            into, "e2e_ms_per_frame",
            e2e.result.frames ? e2e.result.elapsed_seconds * 1e3 / e2e.result.frames : 0);
    }
    if (!rc && !gpu && with_codec)
        rc = bench_prefill_levels(gm->model, bn.prefill_rows, p->threads, into, err);
    if (!rc && gpu) rc = gp_bench_gpu_aggregate(gm, with_codec ? codec : NULL, p, into, err);
    cJSON_AddNumberToObject(into, "peak_rss_mb", (double)gp_peak_rss_bytes() / 1e6);
    gepard_model_free(gm);
    return rc;
}

gepard_status gepard_benchmark(const gepard_bench_params *p, char **json) {
    *json = NULL;
    gp_error err;
    gp_error_clear(&err);
    if (!p || (!p->model && !p->codec_only) || !p->codec || !p->text || p->frames < 1)
        return gp_api_failf(GEPARD_ERR_INVALID_ARGUMENT, "benchmark needs a model, a codec, text "
                                                         "and frames >= 1");
    cJSON *root = cJSON_CreateObject();
    cJSON *machine = cJSON_AddObjectToObject(root, "machine");
    char cpu[256];
    cpu_model_name(cpu, sizeof cpu);
    gp_pool *pool = NULL;
    if (gp_pool_create(p->threads, &pool, &err)) {
        cJSON_Delete(root);
        return gp_api_fail(&err);
    }
    int threads = gp_pool_size(pool);
    cJSON_AddStringToObject(machine, "cpu", cpu);
    cJSON_AddNumberToObject(machine, "logical_cpus", gp_cpu_count());
    cJSON_AddStringToObject(machine, "simd", gp_kernel_level_name(gp_kernels_active()));
    cJSON *kernels = cJSON_AddObjectToObject(root, "kernels");
    cJSON_AddStringToObject(kernels, "matrix", gp_kernel_level_name(gp_kernels_active()));
    cJSON_AddStringToObject(kernels, "matrix_why", gp_kernels_reason());
    char decode[240];
    snprintf(decode, sizeof decode,
             "row by row: %s, every weight streamed once per step, every row of the batch in "
             "registers, each stream prefetched %zu bytes ahead",
             gp_decode_streams() ? "several 4-row weight tiles at once from separate parts of "
                                   "each thread's rows (1-3 rows of input)"
                                 : "one 4-row weight tile at a time (GEPARD_DECODE_STREAMS=0)",
             gp_decode_prefetch_bytes());
    cJSON_AddStringToObject(kernels, "decode", decode);
    cJSON_AddStringToObject(kernels, "prefill", gp_kernel_table_active()->prefill);
    cJSON_AddNumberToObject(root, "threads", threads);
    if (p->codec_only) {
        gp_pool_free(pool);
        int rc = gp_bench_gpu_codec(p, root, &err);
        if (rc == GEPARD_OK && !cJSON_GetObjectItem(root, "gpu_codec"))
            rc = gp_fail(&err, GEPARD_ERR_INVALID_ARGUMENT,
                         "--codec-only measures the codec on a GPU: add --device cuda");
        gp_progress_done();
        if (rc) {
            cJSON_Delete(root);
            return gp_api_fail(&err);
        }
        *json = cJSON_PrintUnformatted(root);
        cJSON_Delete(root);
        return *json ? gp_api_ok() : gp_api_failf(GEPARD_ERR_NOMEM, "out of memory");
    }
    gp_progress("bench: measuring the roofline");
    double bandwidth = gp_roofline_read_bandwidth(pool, (size_t)512 << 20);
    double fma = gp_roofline_fma_f32(pool), bf16 = gp_roofline_dot_bf16(pool);
    gp_pool_free(pool);
    cJSON_AddNumberToObject(root, "mem_bandwidth_gbs", bandwidth);
    cJSON_AddNumberToObject(root, "fma_peak_gflops", fma);
    cJSON_AddNumberToObject(root, "bf16_dot_peak_gflops", bf16);
    gepard_codec_params cp = gepard_codec_default_params();
    cp.n_threads = threads;
    cp.device = p->device;
    cp.gpu_precision = p->gpu_precision;
    gepard_codec *codec = NULL;
    if (gepard_codec_load_with_params(p->codec, &cp, &codec) != GEPARD_OK) {
        cJSON_Delete(root);
        return GEPARD_ERR_IO;
    }
    /* On a GPU the backbone's bound is the GPU's bandwidth, measured here. */
    double gpu_bandwidth = 0;
    if (gp_bench_gpu_section(p, root, &gpu_bandwidth, &err)) {
        gepard_codec_free(codec);
        cJSON_Delete(root);
        return gp_api_fail(&err);
    }
    if (gpu_bandwidth > 0) bandwidth = gpu_bandwidth;
    gp_progress("bench: %s weights", format_name(p->weights));
    int rc = run_format(p, p->weights, true, codec, bandwidth, fma, root, &err);
    if (bf16 > 0)
        cJSON_AddNumberToObject(root, "codec_bound_bf16_ms_per_frame",
                                2.0 * gp_codec_decoder_macs_per_frame(&codec->codec->dec) / 1e9 /
                                    bf16 * 1e3);
    cJSON_AddStringToObject(root, "codec_kernels", gepard_codec_kernels(codec));
    cJSON_AddStringToObject(root, "codec_kernels_why", gepard_codec_kernels_why(codec));
    cJSON_AddStringToObject(kernels, "codec", gepard_codec_kernels(codec));
    cJSON_AddStringToObject(kernels, "codec_why",
                            "f32 is the default (bf16 weights lose accuracy depending on the "
                            "weights); a precision the CPU lacks falls back to the next one");
    if (!rc) {
        gp_progress("bench: codec paths");
        rc = bench_codec_paths(p, threads, fma, bf16, root, &err);
    }
    if (!rc) rc = gp_bench_gpu_codec(p, root, &err);
    if (!rc && p->compare != GEPARD_WEIGHTS_NONE) {
        gp_progress("bench: %s weights", format_name(p->compare));
        cJSON *other = cJSON_AddObjectToObject(root, "compare");
        rc = run_format(p, p->compare, false, codec, bandwidth, fma, other, &err);
    }
    gp_progress_done();
    gepard_codec_free(codec);
    if (rc) {
        cJSON_Delete(root);
        return gp_api_fail(&err);
    }
    *json = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return *json ? gp_api_ok() : gp_api_failf(GEPARD_ERR_NOMEM, "out of memory");
}
