/* cuda_model.cu — the CUDA backend's entry point (the plugin table that
 * model/device.c finds with dlsym), device discovery, the model's weights on
 * the device (uploaded matrix by matrix from the mapped safetensors and
 * converted there; q/k/v and gate/up fused into one matrix each), LoRA
 * merging on the device, the paged KV cache, and the measured ceilings
 * (copy bandwidth, bf16 GEMM rate) that `gepard bench` reports against. */
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_internal.h"

int gp_cuda_fail(gp_dev_status *st, int code, const char *fmt, ...) {
    if (st) {
        st->code = code;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(st->message, sizeof st->message, fmt, ap);
        va_end(ap);
    }
    return code;
}

int gp_cuda_check(cudaError_t e, const char *what, gp_dev_status *st) {
    if (e == cudaSuccess) return 0;
    cudaGetLastError(); /* clear a sticky-free error so later calls can go on */
    if (e == cudaErrorMemoryAllocation)
        return gp_cuda_fail(st, GEPARD_ERR_NOMEM,
                            "CUDA: out of device memory (%s) — use a smaller --max-streams or "
                            "--kv-cache-mb, or free the GPU",
                            what);
    return gp_cuda_fail(st, GEPARD_ERR_INTERNAL, "CUDA error in %s: %s (%s)", what,
                        cudaGetErrorString(e), cudaGetErrorName(e));
}

int gp_cuda_blas_check(cublasStatus_t s, const char *what, gp_dev_status *st) {
    if (s == CUBLAS_STATUS_SUCCESS) return 0;
    if (s == CUBLAS_STATUS_ALLOC_FAILED)
        return gp_cuda_fail(st, GEPARD_ERR_NOMEM, "cuBLAS: out of device memory (%s)", what);
    return gp_cuda_fail(st, GEPARD_ERR_INTERNAL, "cuBLAS error in %s: %s", what,
                        cublasGetStatusString(s));
}

cudaError_t gp_cuda_stream_create(cudaStream_t *s, gp_cuda_stream_kind kind) {
    const char *env = getenv("GEPARD_CUDA_PRIORITIES");
    int least = 0, greatest = 0;
    if ((env && !strcmp(env, "0")) ||
        cudaDeviceGetStreamPriorityRange(&least, &greatest) != cudaSuccess) {
        cudaGetLastError();
        least = greatest = 0;
    }
    return cudaStreamCreateWithPriority(s, cudaStreamNonBlocking,
                                        kind == GP_CUDA_STREAM_STEP ? greatest : least);
}

/* ---------------- devices ---------------- */

static int device_count(gp_dev_status *st) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e == cudaErrorNoDevice || (e == cudaSuccess && n == 0)) {
        cudaGetLastError();
        gp_cuda_fail(st, GEPARD_ERR_UNSUPPORTED, "no CUDA GPU is present (the driver sees none)");
        return 0;
    }
    if (e == cudaErrorInsufficientDriver) {
        cudaGetLastError();
        int drv = 0;
        cudaDriverGetVersion(&drv);
        if (drv == 0) {
            gp_cuda_fail(st, GEPARD_ERR_UNSUPPORTED,
                         "no NVIDIA driver is installed (libcuda.so.1 was not found)");
            return 0;
        }
        gp_cuda_fail(st, GEPARD_ERR_UNSUPPORTED,
                     "the NVIDIA driver is missing or too old for CUDA %d.%d (driver supports "
                     "%d.%d)",
                     CUDART_VERSION / 1000, CUDART_VERSION % 1000 / 10, drv / 1000,
                     drv % 1000 / 10);
        return 0;
    }
    if (e != cudaSuccess) {
        cudaGetLastError();
        gp_cuda_fail(st, GEPARD_ERR_UNSUPPORTED, "CUDA cannot be initialised: %s",
                     cudaGetErrorString(e));
        return 0;
    }
    return n;
}

static int device_info(int device, gp_dev_info *info, gp_dev_status *st) {
    memset(info, 0, sizeof *info);
    cudaDeviceProp p;
    GP_CUDA_TRY(cudaGetDeviceProperties(&p, device), "cudaGetDeviceProperties");
    snprintf(info->name, sizeof info->name, "%s", p.name);
    info->major = p.major;
    info->minor = p.minor;
    info->multiprocessors = p.multiProcessorCount;
    GP_CUDA_TRY(cudaSetDevice(device), "cudaSetDevice");
    GP_CUDA_TRY(cudaMemGetInfo(&info->memory_free, &info->memory_total), "cudaMemGetInfo");
    cudaDriverGetVersion(&info->driver_version);
    cudaRuntimeGetVersion(&info->runtime_version);
    return 0;
}

/* ---------------- model ---------------- */

static void model_free(gp_dev_model *m) {
    if (!m) return;
    cudaSetDevice(m->device);
    if (m->layers) {
        for (int l = 0; l < m->d.layers; l++) {
            gp_cuda_layer *L = &m->layers[l];
            cudaFree(L->qkv);
            cudaFree(L->o);
            cudaFree(L->gu);
            cudaFree(L->down);
            cudaFree(L->norms);
            cudaFree(L->qkv_bias);
            cudaFree(L->o_bias);
        }
        free(m->layers);
    }
    float *bufs[] = {m->rope_inv_freq, m->final_norm, m->audio_tables, m->proj0,  m->proj0_b,
                     m->proj2,         m->proj2_b,    m->heads,        m->heads_b};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) cudaFree(bufs[i]);
    cudaFree(m->channel_offset);
    cudaFree(m->staging);
    if (m->upload_blas) cublasDestroy(m->upload_blas);
    if (m->upload_stream) cudaStreamDestroy(m->upload_stream);
    free(m);
}

static int dev_alloc(gp_dev_model *m, void **p, size_t bytes, const char *what, gp_dev_status *st) {
    *p = NULL;
    cudaError_t e = cudaMalloc(p, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        cudaGetLastError();
        size_t free_b = 0, total_b = 0;
        cudaMemGetInfo(&free_b, &total_b);
        return gp_cuda_fail(st,
                            e == cudaErrorMemoryAllocation ? GEPARD_ERR_NOMEM : GEPARD_ERR_INTERNAL,
                            "CUDA: cannot allocate %.1f MB for %s (%.1f MB free of %.1f MB): %s",
                            bytes / 1e6, what, free_b / 1e6, total_b / 1e6, cudaGetErrorString(e));
    }
    m->bytes += bytes;
    return 0;
}

static int model_create(const gp_dev_model_desc *desc, gp_dev_model **out, gp_dev_status *st) {
    *out = NULL;
    const int G = desc->kv_heads > 0 ? desc->heads / desc->kv_heads : 0;
    if (desc->head_dim > 256 || desc->head_dim < 1 || desc->kv_heads < 1 ||
        desc->heads % desc->kv_heads || !(G == 1 || G == 2 || G == 3 || G == 4 || G == 6 || G == 8))
        return gp_cuda_fail(st, GEPARD_ERR_UNSUPPORTED,
                            "the CUDA backend supports head_dim <= 256 and 1, 2, 3, 4, 6 or 8 "
                            "query heads per KV head (this model: head_dim %d, %d/%d heads)",
                            desc->head_dim, desc->heads, desc->kv_heads);
    GP_CUDA_TRY(cudaSetDevice(desc->device), "cudaSetDevice");
    gp_dev_model *m = (gp_dev_model *)calloc(1, sizeof *m);
    if (!m) return gp_cuda_fail(st, GEPARD_ERR_NOMEM, "out of host memory");
    m->d = *desc;
    m->device = desc->device;
    m->wide = desc->precision == GP_DEV_F32;
    m->wtype = m->wide ? CUDA_R_32F : CUDA_R_16BF;
    m->welem = m->wide ? 4 : 2;
    const size_t H = desc->hidden, D = desc->head_dim, NH = desc->heads, NKV = desc->kv_heads;
    const size_t I = desc->intermediate;
    m->qkv_rows = (int)((2 * NH + 2 * NKV) * D);
    cudaDeviceGetAttribute(&m->multiprocessors, cudaDevAttrMultiProcessorCount, desc->device);
    m->layers = (gp_cuda_layer *)calloc((size_t)desc->layers, sizeof *m->layers);
    int rc = m->layers ? 0 : gp_cuda_fail(st, GEPARD_ERR_NOMEM, "out of host memory");
    if (!rc)
        rc = gp_cuda_check(cudaStreamCreateWithFlags(&m->upload_stream, cudaStreamNonBlocking),
                           "cudaStreamCreate", st);
    if (!rc) rc = gp_cuda_blas_check(cublasCreate(&m->upload_blas), "cublasCreate", st);
    if (!rc)
        rc = gp_cuda_blas_check(cublasSetStream(m->upload_blas, m->upload_stream),
                                "cublasSetStream", st);
    for (int l = 0; !rc && l < desc->layers; l++) {
        gp_cuda_layer *L = &m->layers[l];
        rc = dev_alloc(m, &L->qkv, (size_t)m->qkv_rows * H * m->welem, "q/k/v weights", st);
        if (!rc) rc = dev_alloc(m, &L->o, H * NH * D * m->welem, "o_proj weights", st);
        if (!rc) rc = dev_alloc(m, &L->gu, 2 * I * H * m->welem, "gate/up weights", st);
        if (!rc) rc = dev_alloc(m, &L->down, H * I * m->welem, "down_proj weights", st);
        if (!rc) rc = dev_alloc(m, (void **)&L->norms, (2 * H + 2 * D) * 4, "norms", st);
    }
    if (rc) {
        model_free(m);
        return rc;
    }
    *out = m;
    return 0;
}

static int staging_reserve(gp_dev_model *m, size_t bytes, gp_dev_status *st) {
    if (bytes <= m->staging_bytes) return 0;
    cudaFree(m->staging);
    m->staging = NULL;
    m->staging_bytes = 0;
    GP_CUDA_TRY(cudaMalloc(&m->staging, bytes), "upload staging buffer");
    m->staging_bytes = bytes;
    return 0;
}

/* Where matrix `which` of layer l lives: base pointer, first row, rows. */
static int matrix_slot(gp_dev_model *m, int l, gp_dev_matrix which, void **base, size_t *row0,
                       int *rows, int *cols) {
    const int H = m->d.hidden, D = m->d.head_dim, NH = m->d.heads, NKV = m->d.kv_heads;
    const int I = m->d.intermediate;
    gp_cuda_layer *L = &m->layers[l];
    *row0 = 0;
    *cols = H;
    switch (which) {
    case GP_DEV_Q:
        *base = L->qkv;
        *rows = 2 * NH * D;
        break;
    case GP_DEV_K:
        *base = L->qkv;
        *row0 = (size_t)2 * NH * D;
        *rows = NKV * D;
        break;
    case GP_DEV_V:
        *base = L->qkv;
        *row0 = (size_t)(2 * NH + NKV) * D;
        *rows = NKV * D;
        break;
    case GP_DEV_O:
        *base = L->o;
        *rows = H;
        *cols = NH * D;
        break;
    case GP_DEV_GATE:
        *base = L->gu;
        *rows = I;
        break;
    case GP_DEV_UP:
        *base = L->gu;
        *row0 = (size_t)I;
        *rows = I;
        break;
    case GP_DEV_DOWN:
        *base = L->down;
        *rows = H;
        *cols = I;
        break;
    default: return -1;
    }
    return 0;
}

static int model_upload(gp_dev_model *m, int layer, gp_dev_matrix which, gp_dev_dtype dtype,
                        const void *data, int rows, int cols, gp_dev_status *st) {
    void *base;
    size_t row0;
    int want_rows = 0, want_cols = 0;
    if (layer < 0 || layer >= m->d.layers ||
        matrix_slot(m, layer, which, &base, &row0, &want_rows, &want_cols) || rows != want_rows ||
        cols != want_cols)
        return gp_cuda_fail(
            st, GEPARD_ERR_INTERNAL,
            "CUDA upload: matrix %d of layer %d has shape [%d, %d], expected [%d, %d]", (int)which,
            layer, rows, cols, want_rows, want_cols);
    GP_CUDA_TRY(cudaSetDevice(m->device), "cudaSetDevice");
    const size_t n = (size_t)rows * cols, src_elem = dtype == GP_DEV_DT_F32 ? 4 : 2;
    int rc = staging_reserve(m, n * src_elem, st);
    if (rc) return rc;
    GP_CUDA_TRY(
        cudaMemcpyAsync(m->staging, data, n * src_elem, cudaMemcpyHostToDevice, m->upload_stream),
        "weight upload");
    gp_cuda_convert(m->staging, dtype, (char *)base + row0 * cols * m->welem, m->wide, n,
                    m->upload_stream);
    GP_CUDA_TRY(cudaGetLastError(), "weight conversion");
    GP_CUDA_TRY(cudaStreamSynchronize(m->upload_stream), "weight upload");
    return 0;
}

static int upload_f32(gp_dev_model *m, float **dst, const float *src, size_t n, const char *what,
                      gp_dev_status *st) {
    int rc = dev_alloc(m, (void **)dst, n * 4, what, st);
    if (rc) return rc;
    GP_CUDA_TRY(cudaMemcpy(*dst, src, n * 4, cudaMemcpyHostToDevice), what);
    return 0;
}

static int model_finish(gp_dev_model *m, const gp_dev_model_desc *d, gp_dev_status *st) {
    GP_CUDA_TRY(cudaSetDevice(m->device), "cudaSetDevice");
    const size_t H = d->hidden, D = d->head_dim, C = d->channels, E = d->embed_dim;
    const size_t T = d->total_logits;
    int rc = 0;
    for (int l = 0; !rc && l < d->layers; l++) {
        gp_cuda_layer *L = &m->layers[l];
        const float *const *nv = d->norms + (size_t)l * 4;
        const size_t off[4] = {0, H, 2 * H, 2 * H + D}, len[4] = {H, H, D, D};
        for (int i = 0; i < 4 && !rc; i++)
            rc = gp_cuda_check(
                cudaMemcpy(L->norms + off[i], nv[i], len[i] * 4, cudaMemcpyHostToDevice),
                "norm upload", st);
        const float *const *bv = d->biases ? d->biases + (size_t)l * 4 : NULL;
        if (!rc && bv && bv[0]) {
            rc = dev_alloc(m, (void **)&L->qkv_bias, (size_t)m->qkv_rows * 4, "biases", st);
            const size_t q = 2 * (size_t)d->heads * D, kv = (size_t)d->kv_heads * D;
            if (!rc)
                rc = gp_cuda_check(cudaMemcpy(L->qkv_bias, bv[0], q * 4, cudaMemcpyHostToDevice),
                                   "bias", st);
            if (!rc)
                rc = gp_cuda_check(
                    cudaMemcpy(L->qkv_bias + q, bv[1], kv * 4, cudaMemcpyHostToDevice), "bias", st);
            if (!rc)
                rc = gp_cuda_check(
                    cudaMemcpy(L->qkv_bias + q + kv, bv[2], kv * 4, cudaMemcpyHostToDevice), "bias",
                    st);
            if (!rc) rc = upload_f32(m, &L->o_bias, bv[3], H, "o_proj bias", st);
        }
    }
    if (!rc)
        rc = upload_f32(m, &m->rope_inv_freq, d->rope_inv_freq, (size_t)d->rotary_dim / 2 + 1,
                        "rope", st);
    if (!rc) rc = upload_f32(m, &m->final_norm, d->final_norm, H, "final norm", st);
    if (!rc) rc = upload_f32(m, &m->audio_tables, d->audio_tables, T * E, "audio tables", st);
    if (!rc) rc = upload_f32(m, &m->proj0, d->embed_proj0, H * C * E, "audio_embed_proj.0", st);
    if (!rc) rc = upload_f32(m, &m->proj0_b, d->embed_proj0_b, H, "audio_embed_proj.0.bias", st);
    if (!rc) rc = upload_f32(m, &m->proj2, d->embed_proj2, H * H, "audio_embed_proj.2", st);
    if (!rc) rc = upload_f32(m, &m->proj2_b, d->embed_proj2_b, H, "audio_embed_proj.2.bias", st);
    if (!rc) rc = upload_f32(m, &m->heads, d->head_weights, T * H, "codebook heads", st);
    if (!rc) rc = upload_f32(m, &m->heads_b, d->head_biases, T, "codebook head biases", st);
    if (!rc) rc = dev_alloc(m, (void **)&m->channel_offset, C * sizeof(int), "channel offsets", st);
    if (!rc)
        rc = gp_cuda_check(cudaMemcpy(m->channel_offset, d->channel_offset, C * sizeof(int),
                                      cudaMemcpyHostToDevice),
                           "channel offsets", st);
    m->d.audio_embed_scale = d->audio_embed_scale;
    cudaFree(m->staging);
    m->staging = NULL;
    m->staging_bytes = 0;
    return rc;
}

static int model_merge_lora(gp_dev_model *m, int layer, gp_dev_matrix which, int rank,
                            const float *A, const float *B, float scale, gp_dev_status *st) {
    void *base;
    size_t row0;
    int rows, cols;
    if (layer < 0 || layer >= m->d.layers ||
        matrix_slot(m, layer, which, &base, &row0, &rows, &cols))
        return gp_cuda_fail(st, GEPARD_ERR_INTERNAL, "CUDA LoRA merge: no matrix %d in layer %d",
                            (int)which, layer);
    GP_CUDA_TRY(cudaSetDevice(m->device), "cudaSetDevice");
    float *dA = NULL, *dB = NULL, *delta = NULL;
    const size_t na = (size_t)rank * cols, nb = (size_t)rows * rank, nd = (size_t)rows * cols;
    int rc = gp_cuda_check(cudaMalloc(&dA, na * 4), "LoRA A", st);
    if (!rc) rc = gp_cuda_check(cudaMalloc(&dB, nb * 4), "LoRA B", st);
    if (!rc) rc = gp_cuda_check(cudaMalloc(&delta, nd * 4), "LoRA delta", st);
    if (!rc) rc = gp_cuda_check(cudaMemcpy(dA, A, na * 4, cudaMemcpyHostToDevice), "LoRA A", st);
    if (!rc) rc = gp_cuda_check(cudaMemcpy(dB, B, nb * 4, cudaMemcpyHostToDevice), "LoRA B", st);
    if (!rc) {
        /* delta[rows][cols] = scale · B[rows][rank] · A[rank][cols] (row-major):
         * column-major deltaᵀ = Aᵀ · Bᵀ. */
        const float zero = 0;
        rc = gp_cuda_blas_check(cublasSgemm(m->upload_blas, CUBLAS_OP_N, CUBLAS_OP_N, cols, rows,
                                            rank, &scale, dA, cols, dB, rank, &zero, delta, cols),
                                "LoRA merge GEMM", st);
    }
    if (!rc) {
        gp_cuda_add_scaled_f32_to_weight((char *)base + row0 * cols * m->welem, m->wide, delta, nd,
                                         m->upload_stream);
        rc = gp_cuda_check(cudaStreamSynchronize(m->upload_stream), "LoRA merge", st);
    }
    cudaFree(dA);
    cudaFree(dB);
    cudaFree(delta);
    return rc;
}

static size_t model_bytes(const gp_dev_model *m) { return m->bytes; }

/* ---------------- KV cache ---------------- */

static int kv_create(gp_dev_model *m, int block_size, int blocks, gp_dev_kv **out,
                     gp_dev_status *st) {
    *out = NULL;
    /* the kernels find a position's block by a shift (kv_block_of) */
    if (block_size < 1 || block_size > (1 << 16) || (block_size & (block_size - 1)))
        return gp_cuda_fail(st, GEPARD_ERR_UNSUPPORTED,
                            "CUDA: KV cache blocks of %d positions; the GPU needs a power of two",
                            block_size);
    GP_CUDA_TRY(cudaSetDevice(m->device), "cudaSetDevice");
    gp_dev_kv *kv = (gp_dev_kv *)calloc(1, sizeof *kv);
    if (!kv) return gp_cuda_fail(st, GEPARD_ERR_NOMEM, "out of host memory");
    kv->model = m;
    kv->block_size = block_size;
    kv->blocks = blocks;
    kv->block_elems = (size_t)m->d.layers * 2 * m->d.kv_heads * block_size * m->d.head_dim;
    const size_t bytes = kv->block_elems * ((size_t)blocks + 1) * m->welem;
    cudaError_t e = cudaMalloc(&kv->data, bytes);
    if (e != cudaSuccess) {
        cudaGetLastError();
        size_t free_b = 0, total_b = 0;
        cudaMemGetInfo(&free_b, &total_b);
        free(kv);
        return gp_cuda_fail(st, GEPARD_ERR_NOMEM,
                            "CUDA: the KV cache of %d blocks needs %.1f MB but %.1f MB of device "
                            "memory are free — lower --max-streams or --kv-cache-mb",
                            blocks, bytes / 1e6, free_b / 1e6);
    }
    /* Never-written positions are never read, but keep the memory defined. */
    cudaMemset(kv->data, 0, bytes);
    *out = kv;
    return 0;
}

static void kv_free(gp_dev_kv *kv) {
    if (!kv) return;
    cudaSetDevice(kv->model->device);
    cudaFree(kv->data);
    free(kv);
}

/* ---------------- measured ceilings ---------------- */

__global__ void k_fill_random(__nv_bfloat16 *p, size_t n, unsigned seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        unsigned x = (unsigned)i * 2654435761u ^ seed;
        x ^= x >> 15;
        x *= 2246822519u;
        x ^= x >> 13;
        p[i] = __float2bfloat16_rn(((x & 0xffff) / 65536.0f) - 0.5f);
    }
}

static int measure(int device, double *bandwidth_gbs, double *bf16_tflops, gp_dev_status *st) {
    GP_CUDA_TRY(cudaSetDevice(device), "cudaSetDevice");
    const size_t copy_bytes = (size_t)1 << 30;
    const int n = 8192;
    void *a = NULL, *b = NULL;
    cudaEvent_t t0, t1;
    cudaEventCreate(&t0);
    cudaEventCreate(&t1);
    int rc = gp_cuda_check(cudaMalloc(&a, copy_bytes), "bandwidth buffer", st);
    if (!rc) rc = gp_cuda_check(cudaMalloc(&b, copy_bytes), "bandwidth buffer", st);
    float ms = 0;
    if (!rc) {
        k_fill_random<<<1024, 256>>>((__nv_bfloat16 *)a, copy_bytes / 2, 1);
        for (int i = 0; i < 3; i++) cudaMemcpyAsync(b, a, copy_bytes, cudaMemcpyDeviceToDevice);
        cudaEventRecord(t0);
        for (int i = 0; i < 10; i++) cudaMemcpyAsync(b, a, copy_bytes, cudaMemcpyDeviceToDevice);
        cudaEventRecord(t1);
        rc = gp_cuda_check(cudaEventSynchronize(t1), "bandwidth measurement", st);
        cudaEventElapsedTime(&ms, t0, t1);
        *bandwidth_gbs = 2.0 * copy_bytes * 10 / (ms * 1e-3) / 1e9;
    }
    cublasHandle_t h = NULL;
    void *c = NULL;
    const size_t mat = (size_t)n * n * 2;
    if (!rc && mat * 3 > 2 * copy_bytes) rc = gp_cuda_fail(st, GEPARD_ERR_INTERNAL, "GEMM size");
    if (!rc) rc = gp_cuda_check(cudaMalloc(&c, mat), "GEMM buffer", st);
    if (!rc) rc = gp_cuda_blas_check(cublasCreate(&h), "cublasCreate", st);
    if (!rc) {
        k_fill_random<<<1024, 256>>>((__nv_bfloat16 *)b, mat / 2, 7);
        const float one = 1, zero = 0;
        for (int i = 0; i < 13 && !rc; i++) {
            if (i == 3) cudaEventRecord(t0);
            rc = gp_cuda_blas_check(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a,
                                                 CUDA_R_16BF, n, b, CUDA_R_16BF, n, &zero, c,
                                                 CUDA_R_16BF, n, CUBLAS_COMPUTE_32F,
                                                 CUBLAS_GEMM_DEFAULT),
                                    "bf16 GEMM", st);
        }
        cudaEventRecord(t1);
        if (!rc) rc = gp_cuda_check(cudaEventSynchronize(t1), "GEMM measurement", st);
        cudaEventElapsedTime(&ms, t0, t1);
        *bf16_tflops = 2.0 * n * (double)n * n * 10 / (ms * 1e-3) / 1e12;
    }
    if (h) cublasDestroy(h);
    cudaFree(a);
    cudaFree(b);
    cudaFree(c);
    cudaEventDestroy(t0);
    cudaEventDestroy(t1);
    return rc;
}

/* ---------------- the table ---------------- */

int gp_cuda_runner_create(gp_dev_model *m, gp_dev_runner **out, gp_dev_status *st);
void gp_cuda_runner_free(gp_dev_runner *r);
int gp_cuda_step_launch(gp_dev_runner *r, gp_dev_kv *kv, const gp_dev_step *step,
                        gp_dev_status *st);
int gp_cuda_step_wait(gp_dev_runner *r, const float **hidden, const float **logits,
                      gp_dev_status *st);
int gp_cuda_step_all_hidden(gp_dev_runner *r, float *out, gp_dev_status *st);
double gp_cuda_step_gpu_ms(gp_dev_runner *r);
int gp_cuda_lora_upload(gp_dev_runner *r, uint64_t id, const gp_dev_lora_module *mods, int n,
                        gp_dev_status *st);

extern "C" {
int gp_cuda_codec_create(const gp_dev_codec_desc *d, gp_dev_codec **out, gp_dev_status *st);
void gp_cuda_codec_free(gp_dev_codec *c);
size_t gp_cuda_codec_bytes(const gp_dev_codec *c);
int gp_cuda_codec_slot_open(gp_dev_codec *c, int *slot, gp_dev_status *st);
int gp_cuda_codec_slot_reset(gp_dev_codec *c, int slot, gp_dev_status *st);
void gp_cuda_codec_slot_close(gp_dev_codec *c, int slot);
int gp_cuda_codec_decode(gp_dev_codec *c, int n, const int *slots, int frames, const float *latent,
                         float *const *pcm, gp_dev_status *st);
double gp_cuda_codec_gpu_ms(gp_dev_codec *c);
int gp_cuda_codec_decode_submit(gp_dev_codec *c, int n, const int *slots, int frames,
                                const float *latent, float *const *pcm, gp_dev_status *st);
int gp_cuda_codec_decode_collect(gp_dev_codec *c, int wait, int *done, gp_dev_status *st);
int gp_cuda_codec_encode(gp_dev_codec *c, const float *audio, size_t n, float *latent,
                         gp_dev_status *st);
int gp_cuda_codec_measure(int device, gp_dev_codec_precision precision, double *tflops,
                          gp_dev_status *st);
}

static const gp_dev_plugin plugin = {
    GP_DEVICE_PLUGIN_ABI,
    "cuda",
    device_count,
    device_info,
    model_create,
    model_upload,
    model_finish,
    model_merge_lora,
    model_bytes,
    model_free,
    kv_create,
    kv_free,
    gp_cuda_runner_create,
    gp_cuda_runner_free,
    gp_cuda_step_launch,
    gp_cuda_step_wait,
    gp_cuda_step_all_hidden,
    gp_cuda_lora_upload,
    gp_cuda_step_gpu_ms,
    measure,
    gp_cuda_codec_create,
    gp_cuda_codec_free,
    gp_cuda_codec_bytes,
    gp_cuda_codec_slot_open,
    gp_cuda_codec_slot_reset,
    gp_cuda_codec_slot_close,
    gp_cuda_codec_decode,
    gp_cuda_codec_gpu_ms,
    gp_cuda_codec_decode_submit,
    gp_cuda_codec_decode_collect,
    gp_cuda_codec_encode,
    gp_cuda_codec_measure,
};

extern "C" __attribute__((visibility("default"))) const gp_dev_plugin *gp_device_plugin_v1(void) {
    return &plugin;
}
