/* pickle.c — the restricted unpickler's virtual machine (see pickle.h). */
#include "io/pickle.h"

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PK_MAX_GLOBAL_NAME 256

typedef struct pk_vm {
    gp_pickle *pk;
    const unsigned char *data;
    size_t len, pos, op_pos;
    const char *origin;
    int *stack;
    int sp, stack_cap;
    int *marks;
    int nmarks, marks_cap;
    int *memo;
    size_t memo_cap, memo_limit, memo_count;
    int *storages; /* open-addressing hash of STORAGE values by key */
    size_t storages_cap, storages_count;
    gp_error *err;
} pk_vm;

const char *gp_pickle_kind_name(gp_pickle_kind kind) {
    static const char *const names[] = {"None", "bool", "int",    "float",   "str",   "tuple",
                                        "list", "dict", "global", "storage", "tensor"};
    return (unsigned)kind < sizeof names / sizeof names[0] ? names[kind] : "?";
}

/* Names of every pickle opcode, for messages about refused ones. */
static const char *pk_opcode_name(unsigned char op) {
    static const struct {
        unsigned char op;
        const char *name;
    } table[] = {
        {'(', "MARK"},
        {'.', "STOP"},
        {'0', "POP"},
        {'1', "POP_MARK"},
        {'2', "DUP"},
        {'F', "FLOAT"},
        {'I', "INT"},
        {'J', "BININT"},
        {'K', "BININT1"},
        {'L', "LONG"},
        {'M', "BININT2"},
        {'N', "NONE"},
        {'P', "PERSID"},
        {'Q', "BINPERSID"},
        {'R', "REDUCE"},
        {'S', "STRING"},
        {'T', "BINSTRING"},
        {'U', "SHORT_BINSTRING"},
        {'V', "UNICODE"},
        {'X', "BINUNICODE"},
        {'a', "APPEND"},
        {'b', "BUILD"},
        {'c', "GLOBAL"},
        {'d', "DICT"},
        {'}', "EMPTY_DICT"},
        {'e', "APPENDS"},
        {'g', "GET"},
        {'h', "BINGET"},
        {'i', "INST"},
        {'j', "LONG_BINGET"},
        {'l', "LIST"},
        {']', "EMPTY_LIST"},
        {'o', "OBJ"},
        {'p', "PUT"},
        {'q', "BINPUT"},
        {'r', "LONG_BINPUT"},
        {'s', "SETITEM"},
        {'t', "TUPLE"},
        {')', "EMPTY_TUPLE"},
        {'u', "SETITEMS"},
        {'G', "BINFLOAT"},
        {0x80, "PROTO"},
        {0x81, "NEWOBJ"},
        {0x82, "EXT1"},
        {0x83, "EXT2"},
        {0x84, "EXT4"},
        {0x85, "TUPLE1"},
        {0x86, "TUPLE2"},
        {0x87, "TUPLE3"},
        {0x88, "NEWTRUE"},
        {0x89, "NEWFALSE"},
        {0x8a, "LONG1"},
        {0x8b, "LONG4"},
        {'B', "BINBYTES"},
        {'C', "SHORT_BINBYTES"},
        {0x8c, "SHORT_BINUNICODE"},
        {0x8d, "BINUNICODE8"},
        {0x8e, "BINBYTES8"},
        {0x8f, "EMPTY_SET"},
        {0x90, "ADDITEMS"},
        {0x91, "FROZENSET"},
        {0x92, "NEWOBJ_EX"},
        {0x93, "STACK_GLOBAL"},
        {0x94, "MEMOIZE"},
        {0x95, "FRAME"},
        {0x96, "BYTEARRAY8"},
        {0x97, "NEXT_BUFFER"},
        {0x98, "READONLY_BUFFER"},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (table[i].op == op) return table[i].name;
    return "unknown";
}

static int pk_fail(pk_vm *vm, const char *what) {
    return gp_fail(vm->err, GEPARD_ERR_FORMAT, "%s: %s (pickle byte %zu) — the file is corrupt",
                   vm->origin, what, vm->op_pos);
}

static int pk_new(pk_vm *vm, gp_pickle_kind kind, int *out) {
    gp_pickle *pk = vm->pk;
    if (pk->count == pk->cap) {
        int cap = pk->cap ? pk->cap * 2 : 256;
        gp_pickle_value *p = realloc(pk->values, (size_t)cap * sizeof *p);
        if (!p) return gp_fail_oom(vm->err, "pickle values", (size_t)cap * sizeof *p);
        pk->values = p;
        pk->cap = cap;
    }
    memset(&pk->values[pk->count], 0, sizeof pk->values[0]);
    pk->values[pk->count].kind = kind;
    *out = pk->count++;
    return GEPARD_OK;
}

static gp_pickle_value *pk_val(pk_vm *vm, int index) { return &vm->pk->values[index]; }

static int pk_push(pk_vm *vm, int value) {
    if (vm->sp == vm->stack_cap) {
        int cap = vm->stack_cap ? vm->stack_cap * 2 : 256;
        int *p = realloc(vm->stack, (size_t)cap * sizeof *p);
        if (!p) return gp_fail_oom(vm->err, "pickle stack", (size_t)cap * sizeof *p);
        vm->stack = p;
        vm->stack_cap = cap;
    }
    vm->stack[vm->sp++] = value;
    return GEPARD_OK;
}

static int pk_push_new(pk_vm *vm, gp_pickle_kind kind, int *out) {
    int idx, rc = pk_new(vm, kind, &idx);
    if (rc == GEPARD_OK) rc = pk_push(vm, idx);
    if (out) *out = idx;
    return rc;
}

static int pk_pop(pk_vm *vm, int *out) {
    int floor = vm->nmarks ? vm->marks[vm->nmarks - 1] : 0;
    if (vm->sp <= floor) return pk_fail(vm, "stack underflow");
    *out = vm->stack[--vm->sp];
    return GEPARD_OK;
}

static int pk_top(pk_vm *vm, int *out) {
    int floor = vm->nmarks ? vm->marks[vm->nmarks - 1] : 0;
    if (vm->sp <= floor) return pk_fail(vm, "stack underflow");
    *out = vm->stack[vm->sp - 1];
    return GEPARD_OK;
}

/* Pop back to the last MARK; the popped items are stack[*start .. sp_before). */
static int pk_pop_mark(pk_vm *vm, int *start, int *count) {
    if (!vm->nmarks) return pk_fail(vm, "no MARK on the stack");
    *start = vm->marks[--vm->nmarks];
    *count = vm->sp - *start;
    vm->sp = *start;
    return GEPARD_OK;
}

static int pk_read(pk_vm *vm, size_t n, const unsigned char **out) {
    if (n > vm->len - vm->pos) return pk_fail(vm, "the pickle ends in the middle of an opcode");
    *out = vm->data + vm->pos;
    vm->pos += n;
    return GEPARD_OK;
}

static uint64_t pk_le(const unsigned char *p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

static int pk_make_sequence(pk_vm *vm, gp_pickle_kind kind, const int *items, int n, int *out) {
    int idx, rc = pk_new(vm, kind, &idx);
    if (rc) return rc;
    gp_pickle_value *v = pk_val(vm, idx);
    v->items = malloc((size_t)(n ? n : 1) * sizeof(int));
    if (!v->items) return gp_fail_oom(vm->err, "pickle tuple", (size_t)n * sizeof(int));
    if (n) memcpy(v->items, items, (size_t)n * sizeof(int));
    v->n = v->cap = n;
    *out = idx;
    return GEPARD_OK;
}

/* Append `count` ints to a list (count) or dict (count = 2 per pair) value. */
static int pk_extend(pk_vm *vm, int target, const int *items, int count) {
    gp_pickle_value *v = pk_val(vm, target);
    int used = v->kind == GP_PK_DICT ? 2 * v->n : v->n;
    if (count <= 0) return GEPARD_OK; /* an empty APPENDS / SETITEMS: nothing to copy */
    if (count > INT_MAX / 2 - used)
        return gp_fail(vm->err, GEPARD_ERR_FORMAT,
                       "%s: a pickle container grows past %d items — the file is corrupt",
                       vm->origin, INT_MAX / 2);
    if (used + count > v->cap) {
        int cap = v->cap ? v->cap : 8;
        while (cap < used + count) cap *= 2;
        int *p = realloc(v->items, (size_t)cap * sizeof(int));
        if (!p) return gp_fail_oom(vm->err, "pickle container", (size_t)cap * sizeof(int));
        v->items = p;
        v->cap = cap;
    }
    memcpy(v->items + used, items, (size_t)count * sizeof(int));
    v->n += v->kind == GP_PK_DICT ? count / 2 : count;
    return GEPARD_OK;
}

static int pk_push_string(pk_vm *vm, size_t n) {
    const unsigned char *p = NULL;
    int rc = pk_read(vm, n, &p);
    int idx;
    if (rc == GEPARD_OK) rc = pk_push_new(vm, GP_PK_STR, &idx);
    if (rc) return rc;
    gp_pickle_value *v = pk_val(vm, idx);
    v->str = malloc(n + 1);
    if (!v->str) return gp_fail_oom(vm->err, "pickle string", n + 1);
    memcpy(v->str, p, n);
    v->str[n] = '\0';
    v->len = n;
    return GEPARD_OK;
}

static const struct {
    const char *module, *name;
    gp_pickle_global global;
    gp_dtype dtype;
} pk_whitelist[] = {
    {"collections", "OrderedDict", GP_PG_ORDERED_DICT, GP_DTYPE_INVALID},
    {"torch._utils", "_rebuild_tensor_v2", GP_PG_REBUILD_TENSOR_V2, GP_DTYPE_INVALID},
    {"torch._utils", "_rebuild_parameter", GP_PG_REBUILD_PARAMETER, GP_DTYPE_INVALID},
    {"torch._utils", "_rebuild_parameter_with_state", GP_PG_REBUILD_PARAMETER_WITH_STATE,
     GP_DTYPE_INVALID},
    {"torch", "FloatStorage", GP_PG_STORAGE_TYPE, GP_F32},
    {"torch", "HalfStorage", GP_PG_STORAGE_TYPE, GP_F16},
    {"torch", "BFloat16Storage", GP_PG_STORAGE_TYPE, GP_BF16},
    {"torch", "DoubleStorage", GP_PG_STORAGE_TYPE, GP_F64},
    {"torch", "LongStorage", GP_PG_STORAGE_TYPE, GP_I64},
    {"torch", "IntStorage", GP_PG_STORAGE_TYPE, GP_I32},
    {"torch", "ShortStorage", GP_PG_STORAGE_TYPE, GP_I16},
    {"torch", "CharStorage", GP_PG_STORAGE_TYPE, GP_I8},
    {"torch", "ByteStorage", GP_PG_STORAGE_TYPE, GP_U8},
    {"torch", "BoolStorage", GP_PG_STORAGE_TYPE, GP_BOOL},
    {"torch", "UntypedStorage", GP_PG_STORAGE_TYPE, GP_U8},
};

static int pk_push_global(pk_vm *vm, const char *module, size_t mlen, const char *name,
                          size_t nlen) {
    for (size_t i = 0; i < sizeof pk_whitelist / sizeof pk_whitelist[0]; i++) {
        if (strlen(pk_whitelist[i].module) != mlen || strlen(pk_whitelist[i].name) != nlen ||
            memcmp(pk_whitelist[i].module, module, mlen) ||
            memcmp(pk_whitelist[i].name, name, nlen))
            continue;
        int idx, rc = pk_push_new(vm, GP_PK_GLOBAL, &idx);
        if (rc) return rc;
        pk_val(vm, idx)->global = pk_whitelist[i].global;
        pk_val(vm, idx)->dtype = pk_whitelist[i].dtype;
        return GEPARD_OK;
    }
    /* Print the name safely: it comes from the file. */
    char shown[2 * PK_MAX_GLOBAL_NAME + 2];
    size_t k = 0;
    for (size_t i = 0; i < mlen + 1 + nlen && k + 1 < sizeof shown; i++) {
        char c = i < mlen ? module[i] : i == mlen ? '.' : name[i - mlen - 1];
        shown[k++] = (c >= 0x20 && c < 0x7f) ? c : '?';
    }
    shown[k] = '\0';
    return gp_fail(vm->err, GEPARD_ERR_FORMAT,
                   "%s: the pickle refers to the Python global %s, which a weights file never "
                   "needs — refusing to load it (only OrderedDict and torch tensor/storage "
                   "rebuilders are allowed)",
                   vm->origin, shown);
}

static int pk_op_global(pk_vm *vm) {
    const unsigned char *start = vm->data + vm->pos;
    size_t avail = vm->len - vm->pos;
    const unsigned char *nl1 =
        memchr(start, '\n', avail < PK_MAX_GLOBAL_NAME ? avail : PK_MAX_GLOBAL_NAME);
    if (!nl1) return pk_fail(vm, "GLOBAL without a module line");
    size_t rest = avail - (size_t)(nl1 + 1 - start);
    const unsigned char *nl2 =
        memchr(nl1 + 1, '\n', rest < PK_MAX_GLOBAL_NAME ? rest : PK_MAX_GLOBAL_NAME);
    if (!nl2) return pk_fail(vm, "GLOBAL without a name line");
    vm->pos += (size_t)(nl2 + 1 - start);
    return pk_push_global(vm, (const char *)start, (size_t)(nl1 - start), (const char *)nl1 + 1,
                          (size_t)(nl2 - nl1 - 1));
}

static int pk_op_stack_global(pk_vm *vm) {
    int name = 0, module = 0, rc = pk_pop(vm, &name);
    if (rc == GEPARD_OK) rc = pk_pop(vm, &module);
    if (rc) return rc;
    gp_pickle_value *m = pk_val(vm, module), *n = pk_val(vm, name);
    if (m->kind != GP_PK_STR || n->kind != GP_PK_STR)
        return pk_fail(vm, "STACK_GLOBAL needs two strings");
    return pk_push_global(vm, m->str, m->len, n->str, n->len);
}

/* Parse an int tuple (size or stride) into out[]. */
static int pk_int_tuple(pk_vm *vm, int tuple, int64_t *out, int *ndim, const char *what) {
    gp_pickle_value *t = pk_val(vm, tuple);
    if (t->kind != GP_PK_TUPLE) return pk_fail(vm, what);
    if (t->n > GP_PICKLE_MAX_DIMS)
        return gp_fail(vm->err, GEPARD_ERR_UNSUPPORTED,
                       "%s: a tensor has %d dimensions (at most %d)", vm->origin, t->n,
                       GP_PICKLE_MAX_DIMS);
    for (int i = 0; i < t->n; i++) {
        gp_pickle_value *e = pk_val(vm, t->items[i]);
        if (e->kind != GP_PK_INT || e->i < 0) return pk_fail(vm, what);
        out[i] = e->i;
    }
    *ndim = t->n;
    return GEPARD_OK;
}

static int pk_rebuild_tensor(pk_vm *vm, const gp_pickle_value *args, int *out) {
    if (args->n < 4) return pk_fail(vm, "_rebuild_tensor_v2 called with too few arguments");
    /* Copy what is needed out of the values first: pk_new below may move
     * them (realloc), so no pointer into vm->pk->values survives it. */
    int storage = args->items[0], size_tuple = args->items[2], stride_tuple = args->items[3];
    const gp_pickle_value *offset = pk_val(vm, args->items[1]);
    if (pk_val(vm, storage)->kind != GP_PK_STORAGE)
        return pk_fail(vm, "_rebuild_tensor_v2 without a storage");
    if (offset->kind != GP_PK_INT || offset->i < 0)
        return pk_fail(vm, "_rebuild_tensor_v2 with a bad storage offset");
    int64_t storage_offset = offset->i;
    int64_t shape[GP_PICKLE_MAX_DIMS], stride[GP_PICKLE_MAX_DIMS];
    int ndim, sdim;
    int rc = pk_int_tuple(vm, size_tuple, shape, &ndim, "bad tensor size tuple");
    if (rc == GEPARD_OK) rc = pk_int_tuple(vm, stride_tuple, stride, &sdim, "bad stride tuple");
    if (rc) return rc;
    if (sdim != ndim) return pk_fail(vm, "tensor size and stride of different lengths");
    int idx;
    rc = pk_new(vm, GP_PK_TENSOR, &idx);
    if (rc) return rc;
    gp_pickle_value *t = pk_val(vm, idx);
    t->storage = storage;
    t->dtype = pk_val(vm, storage)->dtype;
    t->offset = storage_offset;
    t->ndim = ndim;
    memcpy(t->shape, shape, sizeof shape);
    memcpy(t->stride, stride, sizeof stride);
    *out = idx;
    return GEPARD_OK;
}

static int pk_op_reduce(pk_vm *vm) {
    int args_idx = 0, fn_idx = 0, rc = pk_pop(vm, &args_idx);
    if (rc == GEPARD_OK) rc = pk_pop(vm, &fn_idx);
    if (rc) return rc;
    gp_pickle_value *fn = pk_val(vm, fn_idx), *args = pk_val(vm, args_idx);
    if (fn->kind != GP_PK_GLOBAL || args->kind != GP_PK_TUPLE)
        return pk_fail(vm, "REDUCE needs a callable and an argument tuple");
    int result = -1;
    switch (fn->global) {
    case GP_PG_ORDERED_DICT:
        if (args->n != 0) return pk_fail(vm, "OrderedDict called with arguments");
        rc = pk_new(vm, GP_PK_DICT, &result);
        break;
    case GP_PG_REBUILD_TENSOR_V2: rc = pk_rebuild_tensor(vm, args, &result); break;
    case GP_PG_REBUILD_PARAMETER:
    case GP_PG_REBUILD_PARAMETER_WITH_STATE:
        if (args->n < 1 || pk_val(vm, args->items[0])->kind != GP_PK_TENSOR)
            return pk_fail(vm, "_rebuild_parameter without a tensor");
        result = args->items[0];
        break;
    default: return pk_fail(vm, "a storage type was called like a function");
    }
    return rc ? rc : pk_push(vm, result);
}

static size_t pk_hash(const char *s) {
    size_t h = 1469598103934665603u;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211u;
    return h;
}

/* The slot of `key` in the storage hash (holding -1 when absent). */
static size_t pk_storage_slot(pk_vm *vm, const char *key) {
    size_t mask = vm->storages_cap - 1, i = pk_hash(key) & mask;
    while (vm->storages[i] >= 0 && strcmp(vm->pk->values[vm->storages[i]].str, key) != 0)
        i = (i + 1) & mask;
    return i;
}

static int pk_storage_table_grow(pk_vm *vm) {
    size_t old_cap = vm->storages_cap, cap = old_cap ? old_cap * 2 : 64;
    int *old = vm->storages;
    vm->storages = malloc(cap * sizeof *old);
    if (!vm->storages) {
        vm->storages = old;
        return gp_fail_oom(vm->err, "storage table", cap * sizeof *old);
    }
    for (size_t i = 0; i < cap; i++) vm->storages[i] = -1;
    vm->storages_cap = cap;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i] >= 0) vm->storages[pk_storage_slot(vm, vm->pk->values[old[i]].str)] = old[i];
    free(old);
    return GEPARD_OK;
}

static int pk_op_binpersid(pk_vm *vm) {
    int pid = 0, rc = pk_pop(vm, &pid);
    if (rc) return rc;
    gp_pickle_value *t = pk_val(vm, pid);
    if (t->kind != GP_PK_TUPLE || t->n != 5)
        return pk_fail(vm, "persistent id is not a ('storage', type, key, location, numel) tuple");
    gp_pickle_value *tag = pk_val(vm, t->items[0]), *type = pk_val(vm, t->items[1]),
                    *key = pk_val(vm, t->items[2]), *numel = pk_val(vm, t->items[4]);
    if (tag->kind != GP_PK_STR || strcmp(tag->str, "storage") != 0 || type->kind != GP_PK_GLOBAL ||
        type->global != GP_PG_STORAGE_TYPE || key->kind != GP_PK_STR || numel->kind != GP_PK_INT ||
        numel->i < 0)
        return pk_fail(vm, "persistent id is not a ('storage', type, key, location, numel) tuple");
    if (2 * (vm->storages_count + 1) > vm->storages_cap && (rc = pk_storage_table_grow(vm)))
        return rc;
    key = pk_val(vm, t->items[2]);
    size_t slot = pk_storage_slot(vm, key->str);
    int existing = vm->storages[slot];
    if (existing >= 0) {
        const gp_pickle_value *s = pk_val(vm, existing);
        if (s->dtype != type->dtype || s->i != numel->i)
            return pk_fail(vm, "one storage key is used with two different types or sizes");
        return pk_push(vm, existing);
    }
    gp_dtype dtype = type->dtype;
    int64_t count = numel->i;
    char *name = strdup(key->str);
    if (!name) return gp_fail_oom(vm->err, "storage key", key->len);
    int idx;
    rc = pk_push_new(vm, GP_PK_STORAGE, &idx);
    if (rc) {
        free(name);
        return rc;
    }
    gp_pickle_value *s = pk_val(vm, idx);
    s->str = name;
    s->dtype = dtype;
    s->i = count;
    vm->storages[slot] = idx;
    vm->storages_count++;
    return GEPARD_OK;
}

static int pk_memo_put(pk_vm *vm, size_t index) {
    if (index >= vm->memo_limit) return pk_fail(vm, "memo index out of range");
    if (index >= vm->memo_cap) {
        size_t cap = vm->memo_cap ? vm->memo_cap : 256;
        while (cap <= index) cap *= 2;
        int *p = realloc(vm->memo, cap * sizeof *p);
        if (!p) return gp_fail_oom(vm->err, "pickle memo", cap * sizeof *p);
        for (size_t i = vm->memo_cap; i < cap; i++) p[i] = -1;
        vm->memo = p;
        vm->memo_cap = cap;
    }
    if (vm->memo[index] < 0) vm->memo_count++;
    return pk_top(vm, &vm->memo[index]);
}

static int pk_memo_get(pk_vm *vm, size_t index) {
    if (index >= vm->memo_cap || vm->memo[index] < 0) return pk_fail(vm, "memo entry not set");
    return pk_push(vm, vm->memo[index]);
}

/* The stack from `pos` on (NULL while nothing was ever pushed: no pointer
 * arithmetic on NULL, even for zero items). */
static const int *pk_stack_at(const pk_vm *vm, int pos) {
    return vm->stack ? vm->stack + pos : NULL;
}

static int pk_op_setitems(pk_vm *vm, bool single) {
    int start = 0, count = 0, rc;
    if (single) {
        if (vm->sp - (vm->nmarks ? vm->marks[vm->nmarks - 1] : 0) < 3)
            return pk_fail(vm, "stack underflow");
        start = vm->sp - 2;
        count = 2;
        vm->sp -= 2;
    } else if ((rc = pk_pop_mark(vm, &start, &count))) {
        return rc;
    }
    int target = 0;
    if ((rc = pk_top(vm, &target))) return rc;
    if (pk_val(vm, target)->kind != GP_PK_DICT) return pk_fail(vm, "SETITEM(S) on a non-dict");
    if (count % 2) return pk_fail(vm, "SETITEMS with an odd number of items");
    return pk_extend(vm, target, pk_stack_at(vm, start), count);
}

static int pk_op_appends(pk_vm *vm, bool single) {
    int start = 0, count = 0, rc;
    if (single) {
        if (vm->sp - (vm->nmarks ? vm->marks[vm->nmarks - 1] : 0) < 2)
            return pk_fail(vm, "stack underflow");
        start = --vm->sp;
        count = 1;
    } else if ((rc = pk_pop_mark(vm, &start, &count))) {
        return rc;
    }
    int target = 0;
    if ((rc = pk_top(vm, &target))) return rc;
    if (pk_val(vm, target)->kind != GP_PK_LIST) return pk_fail(vm, "APPEND(S) on a non-list");
    return pk_extend(vm, target, pk_stack_at(vm, start), count);
}

static int pk_op_mark_collection(pk_vm *vm, gp_pickle_kind kind) {
    int start = 0, count = 0, idx = 0, rc = pk_pop_mark(vm, &start, &count);
    if (rc) return rc;
    if (kind == GP_PK_TUPLE) {
        rc = pk_make_sequence(vm, GP_PK_TUPLE, pk_stack_at(vm, start), count, &idx);
    } else {
        if (kind == GP_PK_DICT && count % 2) return pk_fail(vm, "DICT with an odd number of items");
        rc = pk_new(vm, kind, &idx);
        if (rc == GEPARD_OK) rc = pk_extend(vm, idx, pk_stack_at(vm, start), count);
    }
    return rc ? rc : pk_push(vm, idx);
}

static int pk_op_small_tuple(pk_vm *vm, int n) {
    int floor = vm->nmarks ? vm->marks[vm->nmarks - 1] : 0;
    if (vm->sp - floor < n) return pk_fail(vm, "stack underflow");
    vm->sp -= n;
    int idx, rc = pk_make_sequence(vm, GP_PK_TUPLE, pk_stack_at(vm, vm->sp), n, &idx);
    return rc ? rc : pk_push(vm, idx);
}

static int pk_push_int(pk_vm *vm, int64_t value, gp_pickle_kind kind) {
    int idx, rc = pk_push_new(vm, kind, &idx);
    if (rc == GEPARD_OK) pk_val(vm, idx)->i = value;
    return rc;
}

static int pk_op_long1(pk_vm *vm) {
    const unsigned char *p = NULL;
    int rc = pk_read(vm, 1, &p);
    size_t n = rc ? 0 : p[0];
    if (rc == GEPARD_OK) rc = pk_read(vm, n, &p);
    if (rc) return rc;
    if (n > 8) return pk_fail(vm, "integer too large");
    uint64_t u = n ? pk_le(p, (int)n) : 0;
    if (n && n < 8 && (p[n - 1] & 0x80)) u |= ~(uint64_t)0 << (8 * n); /* sign-extend */
    return pk_push_int(vm, (int64_t)u, GP_PK_INT);
}

static int pk_op_binfloat(pk_vm *vm) {
    const unsigned char *p = NULL;
    int rc = pk_read(vm, 8, &p), idx = 0;
    if (rc == GEPARD_OK) rc = pk_push_new(vm, GP_PK_FLOAT, &idx);
    if (rc) return rc;
    uint64_t bits = 0;
    for (int i = 0; i < 8; i++) bits = bits << 8 | p[i]; /* big-endian */
    double d;
    memcpy(&d, &bits, sizeof d);
    pk_val(vm, idx)->f = d;
    return GEPARD_OK;
}

/* Execute one opcode; *stop set at STOP. */
static int pk_step(pk_vm *vm, bool *stop) {
    const unsigned char *p = NULL;
    vm->op_pos = vm->pos;
    int rc = pk_read(vm, 1, &p), idx = 0;
    if (rc) return rc;
    unsigned char op = p[0];
    switch (op) {
    case 0x80: return pk_read(vm, 1, &p); /* PROTO */
    case 0x95: return pk_read(vm, 8, &p); /* FRAME: the length is only a hint */
    case '.': *stop = true; return GEPARD_OK;
    case '(':
        if (vm->nmarks == vm->marks_cap) {
            int cap = vm->marks_cap ? vm->marks_cap * 2 : 64;
            int *m = realloc(vm->marks, (size_t)cap * sizeof *m);
            if (!m) return gp_fail_oom(vm->err, "pickle marks", (size_t)cap * sizeof *m);
            vm->marks = m;
            vm->marks_cap = cap;
        }
        vm->marks[vm->nmarks++] = vm->sp;
        return GEPARD_OK;
    case 'c': return pk_op_global(vm);
    case 0x93: return pk_op_stack_global(vm);
    case ')':
        if ((rc = pk_make_sequence(vm, GP_PK_TUPLE, NULL, 0, &idx))) return rc;
        return pk_push(vm, idx);
    case '}': return pk_push_new(vm, GP_PK_DICT, NULL);
    case ']': return pk_push_new(vm, GP_PK_LIST, NULL);
    case 't': return pk_op_mark_collection(vm, GP_PK_TUPLE);
    case 'd': return pk_op_mark_collection(vm, GP_PK_DICT);
    case 'l': return pk_op_mark_collection(vm, GP_PK_LIST);
    case 0x85: return pk_op_small_tuple(vm, 1);
    case 0x86: return pk_op_small_tuple(vm, 2);
    case 0x87: return pk_op_small_tuple(vm, 3);
    case 'X':
        if ((rc = pk_read(vm, 4, &p))) return rc;
        return pk_push_string(vm, (size_t)pk_le(p, 4));
    case 0x8c:
        if ((rc = pk_read(vm, 1, &p))) return rc;
        return pk_push_string(vm, p[0]);
    case 'K':
        if ((rc = pk_read(vm, 1, &p))) return rc;
        return pk_push_int(vm, p[0], GP_PK_INT);
    case 'M':
        if ((rc = pk_read(vm, 2, &p))) return rc;
        return pk_push_int(vm, (int64_t)pk_le(p, 2), GP_PK_INT);
    case 'J':
        if ((rc = pk_read(vm, 4, &p))) return rc;
        return pk_push_int(vm, (int32_t)(uint32_t)pk_le(p, 4), GP_PK_INT);
    case 0x8a: return pk_op_long1(vm);
    case 'G': return pk_op_binfloat(vm);
    case 'N': return pk_push_new(vm, GP_PK_NONE, NULL);
    case 0x88: return pk_push_int(vm, 1, GP_PK_BOOL);
    case 0x89: return pk_push_int(vm, 0, GP_PK_BOOL);
    case 'Q': return pk_op_binpersid(vm);
    case 'R': return pk_op_reduce(vm);
    case 'q':
        if ((rc = pk_read(vm, 1, &p))) return rc;
        return pk_memo_put(vm, p[0]);
    case 'r':
        if ((rc = pk_read(vm, 4, &p))) return rc;
        return pk_memo_put(vm, (size_t)pk_le(p, 4));
    case 0x94: return pk_memo_put(vm, vm->memo_count); /* MEMOIZE: at len(memo) */
    case 'h':
        if ((rc = pk_read(vm, 1, &p))) return rc;
        return pk_memo_get(vm, p[0]);
    case 'j':
        if ((rc = pk_read(vm, 4, &p))) return rc;
        return pk_memo_get(vm, (size_t)pk_le(p, 4));
    case 's': return pk_op_setitems(vm, true);
    case 'u': return pk_op_setitems(vm, false);
    case 'a': return pk_op_appends(vm, true);
    case 'e': return pk_op_appends(vm, false);
    case 'b': { /* BUILD: the only use is OrderedDict._metadata — drop the state */
        int state = 0, target = 0;
        if ((rc = pk_pop(vm, &state)) || (rc = pk_top(vm, &target))) return rc;
        gp_pickle_kind k = pk_val(vm, target)->kind;
        if (k != GP_PK_DICT && k != GP_PK_TENSOR)
            return pk_fail(vm, "BUILD on an unexpected object");
        return GEPARD_OK;
    }
    default:
        return gp_fail(vm->err, GEPARD_ERR_FORMAT,
                       "%s: pickle opcode %s (0x%02x) at byte %zu is not allowed in a weights "
                       "file — refusing to load it",
                       vm->origin, pk_opcode_name(op), op, vm->op_pos);
    }
}

int gp_pickle_load(const unsigned char *data, size_t len, const char *origin, gp_pickle **out,
                   gp_error *err) {
    *out = NULL;
    gp_pickle *pk = calloc(1, sizeof *pk);
    if (!pk) return gp_fail_oom(err, "pickle", sizeof *pk);
    pk_vm vm = {.pk = pk,
                .data = data,
                .len = len,
                .origin = origin ? origin : "pickle",
                .err = err,
                .memo_limit = len + 1024};
    if (len > (size_t)1 << 30) {
        free(pk);
        return gp_fail(err, GEPARD_ERR_FORMAT, "%s: pickle of %zu bytes is too large", vm.origin,
                       len);
    }
    bool stop = false;
    int rc = GEPARD_OK;
    while (rc == GEPARD_OK && !stop) {
        if (vm.pos >= len) {
            rc = gp_fail(err, GEPARD_ERR_FORMAT,
                         "%s: the pickle ends without a STOP opcode — the file is truncated",
                         vm.origin);
            break;
        }
        rc = pk_step(&vm, &stop);
    }
    if (rc == GEPARD_OK && vm.sp < 1)
        rc = gp_fail(err, GEPARD_ERR_FORMAT, "%s: the pickle leaves no object", vm.origin);
    if (rc == GEPARD_OK) pk->root = vm.stack[vm.sp - 1];
    free(vm.stack);
    free(vm.marks);
    free(vm.memo);
    free(vm.storages);
    if (rc) {
        gp_pickle_free(pk);
        return rc;
    }
    *out = pk;
    return GEPARD_OK;
}

void gp_pickle_free(gp_pickle *pk) {
    if (!pk) return;
    for (int i = 0; i < pk->count; i++) {
        free(pk->values[i].str);
        free(pk->values[i].items);
    }
    free(pk->values);
    free(pk);
}
