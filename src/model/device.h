/* device.h — choosing where the model runs (CPU or a CUDA GPU) and the
 * core's side of the device backend: finding and opening the plugin
 * (device_plugin.h), putting a model's weights on the device while it loads,
 * giving a KV pool device storage, and running batched steps there.
 *
 * Device names: "cpu", "cuda" (= "cuda:0"), "cuda:N", and "auto" (the
 * default: cuda when the backend is installed and a GPU is usable, else cpu).
 * GEPARD_DEVICE in the environment replaces "auto". The plugin is looked up
 * as $GEPARD_CUDA_PLUGIN, then libgepard-cuda.so beside the executable, in
 * ../lib/gepard/ and ../release/ relative to it, then through the dynamic
 * linker's search path.
 */
#ifndef GP_MODEL_DEVICE_H
#define GP_MODEL_DEVICE_H

#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"
#include "compute/kv_cache.h"
#include "model/device_plugin.h"

typedef enum gp_device_kind {
    GP_DEVICE_AUTO = -1,
    GP_DEVICE_CPU = 0,
    GP_DEVICE_CUDA = 1,
} gp_device_kind;

typedef struct gp_device_spec {
    gp_device_kind kind;
    int index;                  /* CUDA device */
    gp_dev_precision precision; /* GPU arithmetic (bf16 default) */
} gp_device_spec;

/* Parse "auto" | "cpu" | "cuda" | "cuda:N" (NULL or "" = auto). */
int gp_device_parse(const char *text, gp_device_spec *out, gp_error *err);
/* Parse "bf16" | "f32" into a precision. */
int gp_device_precision_parse(const char *text, gp_dev_precision *out, gp_error *err);
/* Turn AUTO (or $GEPARD_DEVICE) into CPU or CUDA and check that an explicit
 * CUDA request can be served (plugin, driver, GPU, index); `note` (may be
 * NULL) receives one line saying which device was chosen and why. */
int gp_device_resolve(gp_device_spec *spec, char *note, size_t note_cap, gp_error *err);

/* The CUDA plugin, loaded once; NULL with a reason in err when unavailable. */
const gp_dev_plugin *gp_device_cuda_plugin(gp_error *err);
/* "cuda:0 (NVIDIA H200, 139.8 GB)" or "cpu". */
void gp_device_describe(const gp_device_spec *spec, char *out, size_t cap);

/* A model's weights on a device; owned by the gp_model. */
typedef struct gp_device_model {
    const gp_dev_plugin *plugin;
    gp_dev_model *dev;
    gp_device_spec spec;
    char description[160];
} gp_device_model;

struct gp_model;
/* Create the device model (matrices uploaded afterwards, one by one). */
int gp_device_model_create(const gp_device_spec *spec, const struct gp_model *model,
                           gp_device_model **out, gp_error *err);
int gp_device_model_upload(gp_device_model *dm, int layer, gp_dev_matrix which, int src_dtype,
                           const void *data, int rows, int cols, gp_error *err);
/* Copy norms, RoPE table and the overlay once the host model is complete. */
int gp_device_model_finish(gp_device_model *dm, const struct gp_model *model, gp_error *err);
void gp_device_model_free(gp_device_model *dm);
/* W += scale · B·A for one backbone matrix, on the device. */
int gp_device_model_merge_lora(gp_device_model *dm, int layer, gp_dev_matrix which, int rank,
                               const float *A, const float *B, float scale, gp_error *err);

/* Give `kv` storage on the model's device (no-op when it has some). */
int gp_device_kv_attach(const struct gp_model *model, gp_kv_pool *kv, gp_error *err);

/* The plugin's KV cache behind `kv` (NULL when it has none). */
gp_dev_kv *gp_device_kv_of(const gp_kv_pool *kv);

/* Wrap a plugin status as a gp_error. */
int gp_device_error(const gp_dev_status *st, gp_error *err);

#endif
