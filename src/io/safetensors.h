/* safetensors.h — reading (mmap) and writing the safetensors format.
 *
 * Format: 8-byte little-endian header length N, N bytes of JSON mapping each
 * tensor name to {dtype, shape, data_offsets} (offsets relative to byte 8+N)
 * plus an optional "__metadata__" string map, then the raw data. The reader
 * validates everything against the file size before handing out a pointer:
 * header length, JSON syntax, dtypes, shapes, offsets within the data region,
 * byte counts matching the shape, and no two tensors overlapping. Tensor data
 * pointers point into the mapping and may be unaligned: read them through
 * gp_st_read_f32 or memcpy.
 */
#ifndef GP_IO_SAFETENSORS_H
#define GP_IO_SAFETENSORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/dtype.h"
#include "base/error.h"
#include "io/file.h"

#define GP_ST_MAX_DIMS 8

typedef struct gp_st_tensor {
    char *name;
    gp_dtype dtype;
    int ndim;
    int64_t shape[GP_ST_MAX_DIMS];
    size_t numel;
    size_t nbytes;
    const void *data; /* inside the file mapping */
} gp_st_tensor;

typedef struct gp_st_file {
    char *path;
    gp_mapped_file map;
    const unsigned char *owned_memory; /* when opened from memory and copied */
    gp_st_tensor *tensors;             /* sorted by name */
    size_t count;
    char **metadata_keys;
    char **metadata_values;
    size_t metadata_count;
} gp_st_file;

int gp_st_open(const char *path, gp_st_file **out, gp_error *err);
/* True when the first bytes of a file look like a safetensors header (an
 * 8-byte little-endian length below 2^48, then '{'); n = bytes available. */
bool gp_st_looks_like(const unsigned char *head, size_t n);
/* Same, reading the start of the file at `path` (false if unreadable). */
bool gp_st_path_looks_like(const char *path);
/* Parse an in-memory image; `origin` names it in messages. The memory must
 * outlive the returned file. */
int gp_st_open_memory(const void *data, size_t size, const char *origin, gp_st_file **out,
                      gp_error *err);
void gp_st_close(gp_st_file *file);

const gp_st_tensor *gp_st_find(const gp_st_file *file, const char *name);
const char *gp_st_metadata(const gp_st_file *file, const char *key);

/* Look up a float tensor and check its shape. `ndim` = -1 skips the shape
 * check; a shape entry of -1 matches any size. `hint` (may be NULL) is
 * appended to the message, e.g. "is this a Gepard-1.0 checkpoint?". */
int gp_st_expect(const gp_st_file *file, const char *name, int ndim, const int64_t *shape,
                 const char *hint, const gp_st_tensor **out, gp_error *err);

/* Convert a float tensor's elements to f32 (dst holds numel floats). */
int gp_st_read_f32(const gp_st_tensor *tensor, float *dst, gp_error *err);
/* Same into a new 64-byte aligned buffer (free with gp_aligned_free). */
int gp_st_load_f32(const gp_st_tensor *tensor, float **out, gp_error *err);

/* Tell the kernel the mapped pages of a tensor are no longer needed (after
 * its data was converted into the engine's own buffers), so they stop
 * counting towards resident memory; a later read faults them in again. */
void gp_st_drop_pages(const gp_st_file *file, const gp_st_tensor *tensor);

/* Format a shape as "[a, b, c]" into buf. */
const char *gp_st_shape_string(int ndim, const int64_t *shape, char *buf, size_t size);

/* ---- writer ---- */
typedef struct gp_st_writer gp_st_writer;

gp_st_writer *gp_st_writer_create(void);
void gp_st_writer_free(gp_st_writer *w);
/* Add a tensor; `data` (nbytes = numel * dtype size) is referenced, not
 * copied, and must stay valid until gp_st_writer_write returns. */
int gp_st_writer_add(gp_st_writer *w, const char *name, gp_dtype dtype, int ndim,
                     const int64_t *shape, const void *data, gp_error *err);
/* Same, but the writer keeps its own copy of the data. */
int gp_st_writer_add_copy(gp_st_writer *w, const char *name, gp_dtype dtype, int ndim,
                          const int64_t *shape, const void *data, gp_error *err);
int gp_st_writer_set_metadata(gp_st_writer *w, const char *key, const char *value, gp_error *err);
/* Write atomically (temporary + rename). Tensors are stored in name order. */
int gp_st_writer_write(gp_st_writer *w, const char *path, gp_error *err);

#endif
