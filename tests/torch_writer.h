/* torch_writer.h — test helpers that write the formats the loaders read: a STORED zip
 * (local headers with zero sizes, as torch.save writes them), a protocol-2 state-dict
 * pickle, a torch.save-style checkpoint, and tar / tar.gz archives via libarchive. */
#ifndef GEPARD_TEST_TORCH_WRITER_H
#define GEPARD_TEST_TORCH_WRITER_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"

typedef struct tw_record {
    const char *name;
    const void *data;
    size_t size;
} tw_record;

/* A zip of STORED records. */
void tw_zip(const tw_record *records, int n, gp_buf *out);

typedef struct tw_tensor {
    const char *name;
    const char *storage_type; /* "FloatStorage", "IntStorage", ... */
    const char *key;          /* storage record key */
    int64_t storage_numel;
    int64_t offset;
    int ndim;
    int64_t shape[8], stride[8];
} tw_tensor;

/* Pickle of {name: _rebuild_tensor_v2(...)} for each tensor (one flat dict). */
void tw_pickle_state_dict(const tw_tensor *tensors, int n, gp_buf *out);
/* A whole torch.save zip: prefix "archive/", data.pkl, byteorder, data/<key> records. */
void tw_checkpoint(const gp_buf *pickle, const tw_record *storages, int n, gp_buf *out);

/* Write a tar (gzip when `gzip`) with the given members; returns 0 on success. */
int tw_tar(const char *path, const tw_record *members, int n, int gzip);

#endif
