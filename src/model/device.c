/* device.c — device selection and the core's side of the backend plugin
 * (see device.h). The plugin is opened once with dlopen; everything GPU
 * related is reached through its function table, so this file (and the whole
 * core) builds and runs with no CUDA installed. */
#include "model/device.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/dtype.h"
#include "base/log.h"
#include "model/model.h"

int gp_device_error(const gp_dev_status *st, gp_error *err) {
    return gp_fail(err, st->code ? st->code : GEPARD_ERR_INTERNAL, "%s", st->message);
}

int gp_device_parse(const char *text, gp_device_spec *out, gp_error *err) {
    memset(out, 0, sizeof *out);
    out->precision = GP_DEV_BF16;
    if (!text || !*text || !strcmp(text, "auto")) {
        out->kind = GP_DEVICE_AUTO;
        return GEPARD_OK;
    }
    if (!strcmp(text, "cpu")) {
        out->kind = GP_DEVICE_CPU;
        return GEPARD_OK;
    }
    if (!strncmp(text, "cuda", 4)) {
        out->kind = GP_DEVICE_CUDA;
        if (text[4] == 0) return GEPARD_OK;
        if (text[4] == ':' && text[5]) {
            char *end;
            long v = strtol(text + 5, &end, 10);
            if (*end == 0 && v >= 0 && v < 1024) {
                out->index = (int)v;
                return GEPARD_OK;
            }
        }
    }
    return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT,
                   "unknown device '%s' — use cpu, cuda, cuda:N or auto", text);
}

int gp_device_precision_parse(const char *text, gp_dev_precision *out, gp_error *err) {
    if (!text || !strcmp(text, "bf16")) {
        *out = GP_DEV_BF16;
        return GEPARD_OK;
    }
    if (!strcmp(text, "f32")) {
        *out = GP_DEV_F32;
        return GEPARD_OK;
    }
    return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT,
                   "unknown GPU precision '%s' — use bf16 (default) or f32", text);
}

/* ---------------- the plugin ---------------- */

static pthread_once_t plugin_once = PTHREAD_ONCE_INIT;
static const gp_dev_plugin *plugin_table;
static char plugin_error[GP_ERROR_MESSAGE_MAX];

static void *try_open(const char *path, char *why, size_t cap) {
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h && why[0] == 0) snprintf(why, cap, "%s", dlerror());
    return h;
}

static void load_plugin(void) {
    char why[768] = "";
    void *h = NULL;
    const char *env = getenv("GEPARD_CUDA_PLUGIN");
    if (env && *env) h = try_open(env, why, sizeof why);
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (!h && n > 0) {
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) *slash = 0;
        const char *rel[] = {"libgepard-cuda.so", "../lib/gepard/libgepard-cuda.so",
                             "../release/libgepard-cuda.so"};
        for (size_t i = 0; i < sizeof rel / sizeof rel[0] && !h; i++) {
            char path[PATH_MAX + 64];
            snprintf(path, sizeof path, "%s/%s", exe, rel[i]);
            if (access(path, F_OK) == 0) h = try_open(path, why, sizeof why);
        }
    }
    if (!h) h = try_open("libgepard-cuda.so", why, sizeof why);
    if (!h) {
        snprintf(plugin_error, sizeof plugin_error,
                 "the CUDA backend is not available (libgepard-cuda.so: %s) — build it with "
                 "`make CUDA=1` on a machine with the CUDA toolkit, and make sure the CUDA "
                 "libraries (libcublas) are installed",
                 why[0] ? why : "not found");
        return;
    }
    gp_dev_plugin_entry entry = (gp_dev_plugin_entry)dlsym(h, GP_DEVICE_PLUGIN_SYMBOL);
    const gp_dev_plugin *p = entry ? entry() : NULL;
    if (!p || p->abi != GP_DEVICE_PLUGIN_ABI) {
        snprintf(plugin_error, sizeof plugin_error,
                 "libgepard-cuda.so does not match this gepard (plugin interface %d, expected "
                 "%d) — rebuild both with the same sources",
                 p ? p->abi : -1, GP_DEVICE_PLUGIN_ABI);
        dlclose(h);
        return;
    }
    plugin_table = p; /* stays loaded for the life of the process */
}

const gp_dev_plugin *gp_device_cuda_plugin(gp_error *err) {
    pthread_once(&plugin_once, load_plugin);
    if (!plugin_table) gp_fail(err, GEPARD_ERR_UNSUPPORTED, "%s", plugin_error);
    return plugin_table;
}

int gp_device_resolve(gp_device_spec *spec, char *note, size_t note_cap, gp_error *err) {
    if (note && note_cap) note[0] = 0;
    if (spec->kind == GP_DEVICE_AUTO) {
        const char *env = getenv("GEPARD_DEVICE");
        if (env && *env && strcmp(env, "auto")) {
            gp_dev_precision keep = spec->precision;
            int rc = gp_device_parse(env, spec, err);
            if (rc) return gp_error_prefix(err, "GEPARD_DEVICE: ");
            spec->precision = keep;
            return gp_device_resolve(spec, note, note_cap, err);
        }
        /* Without the NVIDIA driver there is no GPU to find: say so without
         * loading the CUDA plugin, whose static runtime alone takes ~0.3 s to
         * initialise (every CPU-only `say` would pay it). */
        void *driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
        if (!driver) {
            spec->kind = GP_DEVICE_CPU;
            if (note)
                snprintf(note, note_cap,
                         "device: cpu (no NVIDIA driver is installed: libcuda.so.1 was not found)");
            return GEPARD_OK;
        }
        dlclose(driver);
        gp_error probe;
        gp_error_clear(&probe);
        const gp_dev_plugin *p = gp_device_cuda_plugin(&probe);
        gp_dev_status st = {0, ""};
        int count = p ? p->device_count(&st) : 0;
        if (count > 0) {
            spec->kind = GP_DEVICE_CUDA;
            spec->index = 0;
            if (note) {
                char d[192];
                gp_device_describe(spec, d, sizeof d);
                snprintf(note, note_cap,
                         "device: %s (a GPU was found; --device cpu to use the CPU)", d);
            }
        } else {
            spec->kind = GP_DEVICE_CPU;
            if (note)
                snprintf(note, note_cap, "device: cpu (%s)",
                         p ? st.message : "no CUDA backend installed");
        }
        return GEPARD_OK;
    }
    if (spec->kind == GP_DEVICE_CPU) {
        if (note) snprintf(note, note_cap, "device: cpu");
        return GEPARD_OK;
    }
    const gp_dev_plugin *p = gp_device_cuda_plugin(err);
    if (!p) return gp_error_prefix(err, "--device cuda: ");
    gp_dev_status st = {0, ""};
    int count = p->device_count(&st);
    if (count <= 0)
        return gp_fail(err, GEPARD_ERR_UNSUPPORTED,
                       "--device cuda: %s — run on a machine with an NVIDIA GPU and driver, or "
                       "use --device cpu",
                       st.message);
    if (spec->index >= count)
        return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT,
                       "--device cuda:%d: only %d CUDA device%s (cuda:0%s)", spec->index, count,
                       count == 1 ? " is present" : "s are present", count > 1 ? " ..." : "");
    if (note) {
        char d[192];
        gp_device_describe(spec, d, sizeof d);
        snprintf(note, note_cap, "device: %s", d);
    }
    return GEPARD_OK;
}

void gp_device_describe(const gp_device_spec *spec, char *out, size_t cap) {
    if (spec->kind != GP_DEVICE_CUDA) {
        snprintf(out, cap, "cpu");
        return;
    }
    const gp_dev_plugin *p = gp_device_cuda_plugin(NULL);
    gp_dev_info info;
    gp_dev_status st = {0, ""};
    if (p && p->device_info(spec->index, &info, &st) == 0)
        snprintf(out, cap, "cuda:%d (%s, %.1f GB, %s)", spec->index, info.name,
                 info.memory_total / 1e9, spec->precision == GP_DEV_F32 ? "f32" : "bf16");
    else
        snprintf(out, cap, "cuda:%d", spec->index);
}

/* ---------------- models ---------------- */

static gp_dev_model_desc describe_model(const gp_device_spec *spec, const gp_model *m) {
    const gp_backbone_config *bb = &m->cfg.backbone;
    gp_dev_model_desc d;
    memset(&d, 0, sizeof d);
    d.hidden = bb->hidden_size;
    d.layers = bb->num_layers;
    d.heads = bb->num_heads;
    d.kv_heads = bb->num_kv_heads;
    d.head_dim = bb->head_dim;
    d.intermediate = bb->intermediate_size;
    d.rotary_dim = bb->rotary_dim;
    d.channels = m->cfg.num_channels;
    d.embed_dim = m->cfg.audio_embed_dim;
    d.total_logits = m->cfg.total_logits;
    d.rms_eps = (float)bb->rms_norm_eps;
    d.precision = spec->precision;
    d.device = spec->index;
    return d;
}

int gp_device_model_create(const gp_device_spec *spec, const gp_model *model, gp_device_model **out,
                           gp_error *err) {
    *out = NULL;
    const gp_dev_plugin *p = gp_device_cuda_plugin(err);
    if (!p) return err ? err->code : GEPARD_ERR_UNSUPPORTED;
    gp_device_model *dm = calloc(1, sizeof *dm);
    if (!dm) return gp_fail_oom(err, "device model", sizeof *dm);
    dm->plugin = p;
    dm->spec = *spec;
    gp_device_describe(spec, dm->description, sizeof dm->description);
    gp_dev_model_desc d = describe_model(spec, model);
    gp_dev_status st = {0, ""};
    if (p->model_create(&d, &dm->dev, &st)) {
        free(dm);
        return gp_device_error(&st, err);
    }
    *out = dm;
    return GEPARD_OK;
}

int gp_device_model_upload(gp_device_model *dm, int layer, gp_dev_matrix which, int src_dtype,
                           const void *data, int rows, int cols, gp_error *err) {
    gp_dev_status st = {0, ""};
    gp_dev_dtype dt;
    float *tmp = NULL;
    if (src_dtype == GP_BF16)
        dt = GP_DEV_DT_BF16;
    else if (src_dtype == GP_F16)
        dt = GP_DEV_DT_F16;
    else if (src_dtype == GP_F32)
        dt = GP_DEV_DT_F32;
    else {
        size_t n = (size_t)rows * cols;
        tmp = gp_aligned_alloc(n * sizeof(float));
        if (!tmp) return gp_fail_oom(err, "weight conversion", n * 4);
        gp_convert_to_f32((gp_dtype)src_dtype, data, tmp, n);
        data = tmp;
        dt = GP_DEV_DT_F32;
    }
    int rc = dm->plugin->model_upload(dm->dev, layer, which, dt, data, rows, cols, &st);
    gp_aligned_free(tmp);
    return rc ? gp_device_error(&st, err) : GEPARD_OK;
}

/* Row-major f32 copy of a (tiled) matrix. */
static float *matrix_rows(const gp_matrix *w) {
    float *out = gp_aligned_alloc((size_t)w->rows * w->cols * sizeof(float));
    if (out)
        for (int r = 0; r < w->rows; r++) gp_matrix_row_f32(w, r, out + (size_t)r * w->cols);
    return out;
}

int gp_device_model_finish(gp_device_model *dm, const gp_model *m, gp_error *err) {
    const int NL = m->cfg.backbone.num_layers;
    gp_dev_model_desc d = describe_model(&dm->spec, m);
    const float **norms = calloc((size_t)NL * 4, sizeof *norms);
    const float **biases = calloc((size_t)NL * 4, sizeof *biases);
    float *proj0 = matrix_rows(&m->embed_proj0), *proj2 = matrix_rows(&m->embed_proj2);
    float *heads = matrix_rows(&m->heads);
    int rc = GEPARD_OK;
    if (!norms || !biases || !proj0 || !proj2 || !heads) rc = gp_fail_oom(err, "device upload", 0);
    if (rc == GEPARD_OK) {
        for (int l = 0; l < NL; l++) {
            const gp_layer *L = &m->layers[l];
            norms[l * 4 + 0] = L->input_norm;
            norms[l * 4 + 1] = L->post_norm;
            norms[l * 4 + 2] = L->q_norm;
            norms[l * 4 + 3] = L->k_norm;
            biases[l * 4 + 0] = L->q_bias;
            biases[l * 4 + 1] = L->k_bias;
            biases[l * 4 + 2] = L->v_bias;
            biases[l * 4 + 3] = L->o_bias;
        }
        d.rope_inv_freq = m->rope_inv_freq;
        d.final_norm = m->final_norm;
        d.audio_tables = m->audio_tables;
        d.channel_offset = m->cfg.channel_offset;
        d.embed_proj0 = proj0;
        d.embed_proj0_b = m->embed_proj0_bias;
        d.embed_proj2 = proj2;
        d.embed_proj2_b = m->embed_proj2_bias;
        d.audio_embed_scale = m->audio_embed_scale;
        d.head_weights = heads;
        d.head_biases = m->heads_bias;
        d.norms = norms;
        d.biases = m->cfg.backbone.attention_bias ? biases : NULL;
        gp_dev_status st = {0, ""};
        if (dm->plugin->model_finish(dm->dev, &d, &st)) rc = gp_device_error(&st, err);
    }
    free(norms);
    free(biases);
    gp_aligned_free(proj0);
    gp_aligned_free(proj2);
    gp_aligned_free(heads);
    return rc;
}

void gp_device_model_free(gp_device_model *dm) {
    if (!dm) return;
    if (dm->dev) dm->plugin->model_free(dm->dev);
    free(dm);
}

int gp_device_model_merge_lora(gp_device_model *dm, int layer, gp_dev_matrix which, int rank,
                               const float *A, const float *B, float scale, gp_error *err) {
    gp_dev_status st = {0, ""};
    if (dm->plugin->model_merge_lora(dm->dev, layer, which, rank, A, B, scale, &st))
        return gp_device_error(&st, err);
    return GEPARD_OK;
}

/* ---------------- KV storage ---------------- */

typedef struct device_kv {
    const gp_dev_plugin *plugin;
    gp_dev_kv *kv;
} device_kv;

static void device_kv_free(void *p) {
    device_kv *d = p;
    if (!d) return;
    d->plugin->kv_free(d->kv);
    free(d);
}

int gp_device_kv_attach(const gp_model *m, gp_kv_pool *kv, gp_error *err) {
    if (!m->device || kv->device) return GEPARD_OK;
    device_kv *d = calloc(1, sizeof *d);
    if (!d) return gp_fail_oom(err, "device KV cache", sizeof *d);
    d->plugin = m->device->plugin;
    gp_dev_status st = {0, ""};
    if (d->plugin->kv_create(m->device->dev, kv->block_size, kv->num_blocks, &d->kv, &st)) {
        free(d);
        return gp_device_error(&st, err);
    }
    kv->device = d;
    kv->device_free = device_kv_free;
    return GEPARD_OK;
}

gp_dev_kv *gp_device_kv_of(const gp_kv_pool *kv) {
    return kv->device ? ((const device_kv *)kv->device)->kv : NULL;
}
