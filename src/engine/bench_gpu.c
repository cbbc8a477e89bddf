/* bench_gpu.c — the GPU figures of `gepard bench --device cuda` (see
 * bench_gpu.h). The aggregate measurement drives N generation streams through
 * the batched step exactly as the engine does (decode rows of every stream in
 * one forward, heads, host sampling), after their prefill and a few warm-up
 * steps that capture the step's CUDA graph, then runs N streams through the
 * engine itself (codes only) for the end-to-end rate. */
#include "engine/bench_gpu.h"

#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/timing.h"
#include "engine/api_internal.h"
#include "engine/synth_prep.h"
#include "model/device.h"
#include "model/generate.h"

#define FRAME_RATE (22050.0 / 1024.0)

int gp_bench_gpu_section(const gepard_bench_params *p, cJSON *root, double *bandwidth_gbs,
                         gp_error *err) {
    gp_device_spec spec;
    int rc = gp_device_parse(p->device, &spec, err);
    if (!rc) rc = gp_device_resolve(&spec, NULL, 0, err);
    if (rc || spec.kind != GP_DEVICE_CUDA) return rc;
    const gp_dev_plugin *plugin = gp_device_cuda_plugin(err);
    if (!plugin) return err->code;
    gp_dev_info info;
    gp_dev_status st = {0, ""};
    if (plugin->device_info(spec.index, &info, &st)) return gp_device_error(&st, err);
    double bw = 0, tflops = 0;
    if (plugin->measure(spec.index, &bw, &tflops, &st)) return gp_device_error(&st, err);
    cJSON *gpu = cJSON_AddObjectToObject(root, "gpu");
    cJSON_AddStringToObject(gpu, "name", info.name);
    cJSON_AddNumberToObject(gpu, "index", spec.index);
    cJSON_AddNumberToObject(gpu, "memory_gb", info.memory_total / 1e9);
    cJSON_AddNumberToObject(gpu, "multiprocessors", info.multiprocessors);
    cJSON_AddNumberToObject(gpu, "driver_version", info.driver_version);
    cJSON_AddNumberToObject(gpu, "runtime_version", info.runtime_version);
    cJSON_AddNumberToObject(gpu, "mem_bandwidth_gbs", bw);
    cJSON_AddNumberToObject(gpu, "bf16_gemm_tflops", tflops);
    *bandwidth_gbs = bw;
    return GEPARD_OK;
}

typedef struct aggregate_numbers {
    double prefill_ms, step_ms, gpu_step_ms, frames_per_s;
    /* a timed step's host side: planning and queueing it, waiting for the
     * GPU, then the copies, stop checks and sampling after it */
    double queue_ms, wait_ms, after_ms;
    int positions; /* mean context length during the timed steps */
} aggregate_numbers;

/* N streams of the same sentence (different seeds): prefill all, warm up,
 * then time `frames` batched decode steps. */
static int run_aggregate(gepard_model *gm, const char *text, int n, int frames,
                         aggregate_numbers *out, gp_error *err) {
    const gp_model *m = gm->model;
    const int warm = 4;
    gepard_synth_params sp = gepard_synth_default_params();
    sp.random_seed = 0;
    sp.stop_threshold = 2.0f;
    sp.max_frames = frames + warm + 2;
    gp_gen_params gen;
    int rc = gp_synth_params_convert(&sp, &gen, err);
    int32_t *ids = NULL;
    int n_ids = 0;
    if (!rc) rc = gp_synth_layout(gm, text, strlen(text), 0, gen.max_frames, &ids, &n_ids, err);
    if (rc) return rc;
    gp_gen_stream **s = calloc((size_t)n, sizeof *s);
    gp_kv_pool *kv = NULL;
    gp_gen_workspace w;
    gp_gen_workspace_init(&w);
    const gp_backbone_config *bb = &m->cfg.backbone;
    const int per_stream = (n_ids + gen.max_frames + 15) / 16 + 1;
    gp_pool *pool = NULL; /* the host's threads draw the frames, as in the engine */
    if (!s) rc = gp_fail_oom(err, "streams", (size_t)n * sizeof *s);
    if (!rc) rc = gp_pool_create(0, &pool, err);
    if (!rc)
        rc = gp_kv_pool_create(bb->num_layers, bb->num_kv_heads, bb->head_dim, 16,
                               n * per_stream + 8, &kv, err);
    for (int i = 0; !rc && i < n; i++) {
        gen.seed = (uint64_t)i + 1;
        rc = gp_gen_create(m, &gen, ids, n_ids, NULL, 0, NULL, &s[i], err);
        if (!rc) rc = gp_gen_reserve(s[i], kv, err);
    }
    uint64_t t0 = gp_now_ns();
    for (bool ready = false; !rc && !ready;) {
        int r = gp_gen_step(s, n, kv, &w, 8192, pool, err);
        if (r < 0) rc = -r;
        ready = true;
        for (int i = 0; i < n; i++) ready = ready && s[i]->n_frames > 0;
    }
    out->prefill_ms = (double)(gp_now_ns() - t0) * 1e-6;
    for (int k = 0; !rc && k < warm; k++) {
        int r = gp_gen_step(s, n, kv, &w, 8192, pool, err);
        if (r < 0) rc = -r;
    }
    out->positions = n_ids + warm + frames / 2;
    t0 = gp_now_ns();
    double gpu_ms = 0, queue_s = 0, end_s = 0;
    const double wait0 = w.wait_seconds;
    for (int k = 0; !rc && k < frames; k++) {
        const uint64_t ta = gp_now_ns();
        int r = gp_gen_step_begin(s, n, kv, &w, 8192, pool, err);
        const uint64_t tb = gp_now_ns();
        if (r > 0) r = gp_gen_step_end(s, n, kv, &w, pool, err);
        queue_s += (double)(tb - ta) * 1e-9;
        end_s += (double)(gp_now_ns() - tb) * 1e-9;
        if (r < 0) rc = -r;
        if (w.runner) gpu_ms += w.plugin->step_gpu_ms(w.runner);
    }
    const double wait_s = w.wait_seconds - wait0;
    out->gpu_step_ms = gpu_ms / frames;
    out->queue_ms = queue_s * 1e3 / frames;
    out->wait_ms = wait_s * 1e3 / frames;
    out->after_ms = (end_s - wait_s) * 1e3 / frames;
    double t = (double)(gp_now_ns() - t0) * 1e-9;
    out->step_ms = t * 1e3 / frames;
    out->frames_per_s = (double)n * frames / t;
    for (int i = 0; s && i < n; i++) gp_gen_free(s[i], kv);
    free(s);
    free(ids);
    gp_gen_workspace_free(&w);
    gp_kv_pool_free(kv);
    gp_pool_free(pool);
    return rc;
}

/* What the engine did in one run. */
typedef struct engine_numbers {
    double frames_per_s, ttfa_ms;
    gepard_engine_stats stats;
} engine_numbers;

static int count_audio(const float *pcm, size_t n, void *user) {
    (void)pcm;
    *(size_t *)user += n;
    return 0;
}

/* N streams through the engine, started together: codes only (codec NULL),
 * or with the audio decoded and handed to a callback that counts it, as a
 * server's would (without the HTTP side). */
static int run_engine(gepard_model *gm, const gepard_codec *codec, const char *text, int n,
                      int frames, engine_numbers *out, gp_error *err) {
    memset(out, 0, sizeof *out);
    gepard_engine_params ep = gepard_engine_default_params();
    ep.max_streams = n;
    ep.max_queue = n;
    gepard_engine *e;
    if (gepard_engine_create(gm, codec, &ep, &e) != GEPARD_OK)
        return gp_fail(err, GEPARD_ERR_INTERNAL, "%s", gepard_last_error());
    size_t samples = 0;
    const gepard_stream_callbacks cb = {.on_audio = count_audio, .user = &samples};
    gepard_stream **st = calloc((size_t)n, sizeof *st);
    gepard_synth_params sp = gepard_synth_default_params();
    sp.random_seed = 0;
    sp.stop_threshold = 2.0f;
    sp.max_frames = frames;
    sp.split_text = 0;
    int rc = st ? GEPARD_OK : gp_fail_oom(err, "streams", 0);
    uint64_t t0 = gp_now_ns();
    for (int i = 0; !rc && i < n; i++) {
        sp.seed = (uint64_t)i + 1;
        if (gepard_stream_start(e, text, &sp, codec ? &cb : NULL, &st[i]) != GEPARD_OK)
            rc = gp_fail(err, GEPARD_ERR_INTERNAL, "%s", gepard_last_error());
    }
    size_t total = 0;
    double ttfa = 0;
    for (int i = 0; i < n && st && st[i]; i++) {
        gepard_synth_result r;
        if (gepard_stream_wait(st[i], &r) != GEPARD_OK && !rc)
            rc = gp_fail(err, GEPARD_ERR_INTERNAL, "%s", gepard_last_error());
        total += r.frames;
        ttfa += r.ttfa_ms;
        gepard_stream_free(st[i]);
    }
    double t = (double)(gp_now_ns() - t0) * 1e-9;
    out->frames_per_s = (double)total / t;
    out->ttfa_ms = n ? ttfa / n : 0;
    gepard_engine_get_stats(e, &out->stats);
    free(st);
    gepard_engine_free(e);
    if (!rc && codec && samples != total * (size_t)gepard_codec_samples_per_frame(codec))
        rc = gp_fail(err, GEPARD_ERR_INTERNAL, "the engine delivered %zu samples for %zu frames",
                     samples, total);
    return rc;
}

int gp_bench_gpu_aggregate(gepard_model *gm, const gepard_codec *codec,
                           const gepard_bench_params *p, cJSON *root, gp_error *err) {
    const gp_model *m = gm->model;
    const cJSON *gpu = cJSON_GetObjectItem(root, "gpu");
    const double bw = gpu ? cJSON_GetObjectItem(gpu, "mem_bandwidth_gbs")->valuedouble : 0;
    const double tflops = gpu ? cJSON_GetObjectItem(gpu, "bf16_gemm_tflops")->valuedouble : 0;
    static const int default_sizes[] = {1, 64, 256};
    const int *sizes = p->streams ? p->streams : default_sizes;
    const int n_sizes = p->streams ? p->n_streams : 3;
    const gp_backbone_config *bb = &m->cfg.backbone;
    const double weight_bytes = (double)m->device->plugin->model_bytes(m->device->dev);
    const double macs_per_row =
        (double)bb->num_layers *
        ((double)bb->hidden_size * (2.0 * bb->num_heads + 2.0 * bb->num_kv_heads) * bb->head_dim +
         (double)bb->num_heads * bb->head_dim * bb->hidden_size +
         3.0 * bb->hidden_size * bb->intermediate_size);
    const double kv_elem = m->device->spec.precision == GP_DEV_F32 ? 4 : 2;
    cJSON *arr = cJSON_AddArrayToObject(root, "aggregate");
    for (int i = 0; i < n_sizes; i++) {
        const int n = sizes[i];
        gp_progress("bench: %d streams on the GPU", n);
        aggregate_numbers a;
        memset(&a, 0, sizeof a);
        int rc = run_aggregate(gm, p->text, n, p->frames, &a, err);
        engine_numbers codes, audio;
        memset(&audio, 0, sizeof audio);
        if (!rc) rc = run_engine(gm, NULL, p->text, n, p->frames, &codes, err);
        if (!rc && codec) rc = run_engine(gm, codec, p->text, n, p->frames, &audio, err);
        if (rc) return rc;
        const double kv_bytes = (double)n * a.positions * bb->num_layers * 2.0 * bb->num_kv_heads *
                                bb->head_dim * kv_elem;
        const double attn_macs =
            (double)n * a.positions * bb->num_layers * 2.0 * bb->num_heads * bb->head_dim;
        const double bytes = weight_bytes + kv_bytes;
        const double flop = 2.0 * ((double)n * macs_per_row + attn_macs);
        const double step_s = a.step_ms * 1e-3;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "streams", n);
        cJSON_AddNumberToObject(o, "prefill_ms", a.prefill_ms);
        cJSON_AddNumberToObject(o, "step_ms", a.step_ms);
        cJSON_AddNumberToObject(o, "gpu_step_ms", a.gpu_step_ms);
        cJSON *host = cJSON_AddObjectToObject(o, "step_host_ms");
        cJSON_AddNumberToObject(host, "queue", a.queue_ms);
        cJSON_AddNumberToObject(host, "wait", a.wait_ms);
        cJSON_AddNumberToObject(host, "after", a.after_ms);
        cJSON_AddNumberToObject(o, "frames_per_s", a.frames_per_s);
        cJSON_AddNumberToObject(o, "realtime_x", a.frames_per_s / FRAME_RATE);
        cJSON_AddNumberToObject(o, "context_positions", a.positions);
        cJSON_AddNumberToObject(o, "gb_per_step", bytes / 1e9);
        cJSON_AddNumberToObject(o, "gflop_per_step", flop / 1e9);
        cJSON_AddNumberToObject(o, "fraction_of_bandwidth_bound",
                                bw > 0 ? bytes / (bw * 1e9) / step_s : 0);
        cJSON_AddNumberToObject(o, "fraction_of_gemm_rate",
                                tflops > 0 ? flop / (tflops * 1e12) / step_s : 0);
        const double gpu_s = a.gpu_step_ms * 1e-3;
        cJSON_AddNumberToObject(o, "gpu_fraction_of_bandwidth_bound",
                                bw > 0 && gpu_s > 0 ? bytes / (bw * 1e9) / gpu_s : 0);
        cJSON_AddNumberToObject(o, "gpu_fraction_of_gemm_rate",
                                tflops > 0 && gpu_s > 0 ? flop / (tflops * 1e12) / gpu_s : 0);
        cJSON_AddNumberToObject(o, "engine_frames_per_s", codes.frames_per_s);
        cJSON_AddNumberToObject(o, "engine_realtime_x", codes.frames_per_s / FRAME_RATE);
        cJSON_AddNumberToObject(o, "engine_mean_ttfa_ms", codes.ttfa_ms);
        if (codec) { /* with the audio: where an engine's time goes (no HTTP) */
            cJSON *ea = cJSON_AddObjectToObject(o, "engine_audio");
            cJSON_AddStringToObject(ea, "codec", gepard_codec_kernels(codec));
            cJSON_AddNumberToObject(ea, "frames_per_s", audio.frames_per_s);
            cJSON_AddNumberToObject(ea, "realtime_x", audio.frames_per_s / FRAME_RATE);
            cJSON_AddNumberToObject(ea, "mean_ttfa_ms", audio.ttfa_ms);
            cJSON_AddNumberToObject(ea, "step_seconds", audio.stats.step_seconds);
            cJSON_AddNumberToObject(ea, "deliver_seconds", audio.stats.deliver_seconds);
            cJSON_AddNumberToObject(ea, "codec_seconds", audio.stats.codec_seconds);
            cJSON_AddNumberToObject(ea, "step_wait_seconds", audio.stats.step_wait_seconds);
            cJSON_AddNumberToObject(ea, "codec_batches", (double)audio.stats.codec_batches);
            cJSON_AddNumberToObject(ea, "steps", (double)audio.stats.steps);
        }
        cJSON_AddItemToArray(arr, o);
    }
    return GEPARD_OK;
}
