/* pickle.h — a restricted Python unpickler for PyTorch checkpoints.
 *
 * torch.save writes a pickle (protocol 2, sometimes 4) that rebuilds a dict of
 * tensors by calling a handful of functions. A general unpickler would call
 * whatever the file names — arbitrary code execution — so this one is a small
 * virtual machine that understands only the opcodes a state dict uses and only
 * these globals, whose effect it implements itself instead of calling them:
 *
 *   collections.OrderedDict                       -> an empty dict
 *   torch._utils._rebuild_tensor_v2               -> a tensor view of a storage
 *   torch._utils._rebuild_parameter(_with_state)  -> its first argument
 *   torch.{Float,Half,BFloat16,Double,Long,Int,Short,Char,Byte,Bool}Storage,
 *   torch.UntypedStorage                          -> dtype tokens inside persistent ids
 *
 * Any other global or opcode is refused with a message naming it; nothing from
 * the file is ever executed. Stack, memo, string lengths and tensor ranks are
 * bounded by the input size, and the machine has no recursion. Values live in
 * one flat array and refer to each other by index, so shared references
 * (the memo) need no ownership rules and the result is freed at once.
 */
#ifndef GP_IO_PICKLE_H
#define GP_IO_PICKLE_H

#include <stddef.h>
#include <stdint.h>

#include "base/dtype.h"
#include "base/error.h"

#define GP_PICKLE_MAX_DIMS 8

typedef enum gp_pickle_kind {
    GP_PK_NONE,
    GP_PK_BOOL,
    GP_PK_INT,
    GP_PK_FLOAT,
    GP_PK_STR,
    GP_PK_TUPLE,
    GP_PK_LIST,
    GP_PK_DICT,
    GP_PK_GLOBAL,
    GP_PK_STORAGE,
    GP_PK_TENSOR,
} gp_pickle_kind;

typedef enum gp_pickle_global {
    GP_PG_ORDERED_DICT,
    GP_PG_REBUILD_TENSOR_V2,
    GP_PG_REBUILD_PARAMETER,
    GP_PG_REBUILD_PARAMETER_WITH_STATE,
    GP_PG_STORAGE_TYPE, /* dtype in `dtype` */
} gp_pickle_global;

typedef struct gp_pickle_value {
    gp_pickle_kind kind;
    int64_t i; /* BOOL, INT; STORAGE: number of elements */
    double f;  /* FLOAT */
    char *str; /* STR (NUL-terminated copy); STORAGE: record key */
    size_t len;
    int *items; /* TUPLE, LIST: n values; DICT: n (key, value) pairs = 2n entries */
    int n, cap;
    gp_pickle_global global; /* GLOBAL */
    gp_dtype dtype;          /* GLOBAL storage type, STORAGE, TENSOR */
    /* TENSOR */
    int storage; /* value index of the STORAGE */
    int64_t offset;
    int ndim;
    int64_t shape[GP_PICKLE_MAX_DIMS], stride[GP_PICKLE_MAX_DIMS];
} gp_pickle_value;

typedef struct gp_pickle {
    gp_pickle_value *values;
    int count, cap;
    int root; /* index of the unpickled object */
} gp_pickle;

/* Run the restricted machine over `data`; `origin` names the pickle in messages. */
int gp_pickle_load(const unsigned char *data, size_t len, const char *origin, gp_pickle **out,
                   gp_error *err);
void gp_pickle_free(gp_pickle *pickle);

const char *gp_pickle_kind_name(gp_pickle_kind kind);

#endif
