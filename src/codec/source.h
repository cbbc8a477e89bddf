/* source.h — where a codec's config and tensors come from, whatever the container.
 *
 * A codec path may be:
 *   - a NeMo `.nemo` archive (tar, plain or gzip) holding model_config.yaml and
 *     model_weights.ckpt (a torch.save zip);
 *   - a `.safetensors` file or a torch `.ckpt`/`.pt` file holding the same state dict,
 *     with `model_config.yaml` in the same directory;
 *   - a directory holding `model_config.yaml` and `model_weights.safetensors` (preferred)
 *     or `model_weights.ckpt`.
 * The container is recognised from the file's first bytes, not its name. The result is
 * the parsed YAML plus one name-sorted table of tensor views (dtype, shape, pointer to
 * contiguous little-endian data, possibly unaligned) that the codec loader and
 * `gepard info` read without caring which format they came from.
 */
#ifndef GP_CODEC_SOURCE_H
#define GP_CODEC_SOURCE_H

#include <stddef.h>
#include <stdint.h>

#include "base/dtype.h"
#include "base/error.h"
#include "io/nemo.h"
#include "io/safetensors.h"
#include "io/torch.h"
#include "io/yaml.h"

#define GP_CODEC_TENSOR_MAX_DIMS 8

typedef struct gp_codec_tensor {
    const char *name;
    gp_dtype dtype;
    int ndim;
    int64_t shape[GP_CODEC_TENSOR_MAX_DIMS];
    size_t numel;
    const void *data;
} gp_codec_tensor;

typedef struct gp_codec_source {
    char *path;
    const char *container; /* "nemo archive", "safetensors", "torch checkpoint" */
    char *weights_origin;  /* name used in tensor messages */
    gp_yaml_doc *yaml;
    gp_codec_tensor *tensors; /* sorted by name */
    size_t count;
    /* owners of the memory the views point into */
    gp_nemo nemo;
    gp_torch_file *torch;
    gp_st_file *st;
    struct gp_codec_block *blocks; /* memory of in-memory (synthetic) sources */
} gp_codec_source;

/* A singly linked list of heap blocks owned by a source. */
typedef struct gp_codec_block {
    struct gp_codec_block *next;
} gp_codec_block;

int gp_codec_source_open(const char *path, gp_codec_source **out, gp_error *err);
void gp_codec_source_free(gp_codec_source *src);
const gp_codec_tensor *gp_codec_source_find(const gp_codec_source *src, const char *name);

#endif
