/* bench_gpu.h — the GPU part of `gepard bench` (bench_gpu.c): the device's
 * measured ceilings and the aggregate throughput of many streams. */
#ifndef GP_ENGINE_BENCH_GPU_H
#define GP_ENGINE_BENCH_GPU_H

#include <cjson/cJSON.h>

#include "base/error.h"
#include "gepard.h"

/* When the benchmark's device resolves to a GPU: add root.gpu (name, memory,
 * measured copy bandwidth and bf16 GEMM rate) and return the bandwidth in
 * *bandwidth_gbs; on the CPU leave both alone. */
int gp_bench_gpu_section(const gepard_bench_params *p, cJSON *root, double *bandwidth_gbs,
                         gp_error *err);

/* For a model on a GPU: aggregate[] — for each batch size, frames per
 * second of the batched generation step (backbone + heads + sampling) and
 * through the engine — codes only, and with `codec` (non-NULL) also with the
 * audio decoded and counted by a callback (engine_audio: the engine without
 * a server's HTTP side) — with the fractions of the GPU's bounds. Reads the
 * ceilings from root.gpu. */
int gp_bench_gpu_aggregate(gepard_model *gm, const gepard_codec *codec,
                           const gepard_bench_params *p, cJSON *root, gp_error *err);

/* When the benchmark's device resolves to a GPU: root.gpu_codec — the
 * measured TF32 and f32 GEMM rates and, per decoder precision (tf32, f32),
 * one stream decoded frame by frame and batches of 16/64/256/1024 streams
 * decoding one frame each per call (frames/s, fraction of the GEMM rate);
 * with codec_only and streams, those batch sizes alone (1: the single
 * stream), `frames` calls each. */
int gp_bench_gpu_codec(const gepard_bench_params *p, cJSON *root, gp_error *err);

#endif
