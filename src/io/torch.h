/* torch.h — reading PyTorch `torch.save` checkpoints (zip format, torch >= 1.6).
 *
 * A checkpoint is a zip (io/zip.h) holding `<prefix>/data.pkl`, a pickle that
 * rebuilds the saved object (io/pickle.h, restricted), and one record
 * `<prefix>/data/<key>` of raw little-endian bytes per storage. This reader
 * flattens the saved object into a list of named tensors: nested dicts give
 * "."-joined names ({"lora": {"a": t}} -> "lora.a"), tensor views honour their
 * storage offset and strides (non-contiguous views are copied into contiguous
 * memory), and each storage record's size is checked against the element
 * count the pickle declares. Integer, boolean and float leaves are exposed as
 * scalars (e.g. the "step" of a DPO adapter); strings, None and lists are
 * skipped. Used for NanoCodec's model_weights.ckpt, LoRA adapters
 * (lora_adapter.pt) and DPO adapters.
 *
 * The legacy (pre-1.6) non-zip format is recognised and refused with a hint
 * on how to re-save the file.
 */
#ifndef GP_IO_TORCH_H
#define GP_IO_TORCH_H

#include <stddef.h>
#include <stdint.h>

#include "base/dtype.h"
#include "base/error.h"
#include "io/file.h"

#define GP_TORCH_MAX_DIMS 8

typedef struct gp_torch_tensor {
    char *name;
    gp_dtype dtype;
    int ndim;
    int64_t shape[GP_TORCH_MAX_DIMS];
    size_t numel, nbytes;
    /* Contiguous elements: inside the checkpoint image (possibly unaligned — read through
     * memcpy or gp_convert_to_f32), or `owned` when the view had to be copied. */
    const void *data;
    void *owned;
} gp_torch_tensor;

typedef struct gp_torch_scalar {
    char *name;
    int is_float; /* 0: integer or bool in `i`; 1: float in `f` */
    int64_t i;
    double f;
} gp_torch_scalar;

typedef struct gp_torch_file {
    char *origin;
    gp_mapped_file map;       /* when opened from a path */
    gp_torch_tensor *tensors; /* in the order the checkpoint lists them */
    size_t count;
    gp_torch_scalar *scalars;
    size_t scalar_count;
    size_t *sorted; /* tensor indices sorted by name, for gp_torch_find */
} gp_torch_file;

/* Map and read a checkpoint file. */
int gp_torch_open(const char *path, gp_torch_file **out, gp_error *err);
/* Read a checkpoint image in memory; `data` must outlive the result (tensor data pointers
 * point into it). `origin` names it in messages. */
int gp_torch_open_memory(const void *data, size_t size, const char *origin, gp_torch_file **out,
                         gp_error *err);
void gp_torch_close(gp_torch_file *file);

const gp_torch_tensor *gp_torch_find(const gp_torch_file *file, const char *name);
const gp_torch_scalar *gp_torch_find_scalar(const gp_torch_file *file, const char *name);

/* True when the bytes start like the legacy (pre-1.6) torch.save format. */
int gp_torch_is_legacy(const void *data, size_t size);

#endif
