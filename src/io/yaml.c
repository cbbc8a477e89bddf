/* yaml.c — libyaml events to a flat node tree, and typed getters (see yaml.h). */
#include "io/yaml.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

#define YAML_MAX_DEPTH 64
#define YAML_MAX_NODES (1 << 20)

static int yaml_new_node(gp_yaml_doc *doc, gp_yaml_kind kind, int line, gp_error *err) {
    if (doc->count >= YAML_MAX_NODES)
        return -gp_fail(err, GEPARD_ERR_FORMAT, "%s: more than %d YAML nodes — not a config file?",
                        doc->origin, YAML_MAX_NODES);
    if (doc->count == doc->cap) {
        int cap = doc->cap ? doc->cap * 2 : 64;
        gp_yaml_node *p = realloc(doc->nodes, (size_t)cap * sizeof *p);
        if (!p) return -gp_fail_oom(err, "YAML tree", (size_t)cap * sizeof *p);
        doc->nodes = p;
        doc->cap = cap;
    }
    gp_yaml_node *n = &doc->nodes[doc->count];
    memset(n, 0, sizeof *n);
    n->kind = kind;
    n->line = line;
    n->parent = n->first = n->last = n->next = -1;
    return doc->count++;
}

/* Attach node `child` to container `parent` (parent = -1: it is the root). */
static void yaml_attach(gp_yaml_doc *doc, int parent, int child, char *key) {
    gp_yaml_node *c = &doc->nodes[child];
    c->parent = parent;
    c->key = key;
    if (parent < 0) return;
    gp_yaml_node *p = &doc->nodes[parent];
    if (p->last >= 0)
        doc->nodes[p->last].next = child;
    else
        p->first = child;
    p->last = child;
    p->count++;
}

typedef struct yaml_builder {
    gp_yaml_doc *doc;
    int stack[YAML_MAX_DEPTH];
    int depth;
    char *pending_key; /* key read in the current mapping, waiting for its value */
    bool done;
} yaml_builder;

/* Add a node for the current event; returns its index or a negative error code. */
static int yaml_add_value(yaml_builder *b, gp_yaml_kind kind, int line, gp_error *err) {
    gp_yaml_doc *doc = b->doc;
    int parent = b->depth ? b->stack[b->depth - 1] : -1;
    int idx = yaml_new_node(doc, kind, line, err);
    if (idx < 0) return idx;
    yaml_attach(doc, parent, idx, b->pending_key);
    b->pending_key = NULL;
    return idx;
}

static int yaml_handle_event(yaml_builder *b, const yaml_event_t *ev, gp_error *err) {
    gp_yaml_doc *doc = b->doc;
    int line = (int)ev->start_mark.line + 1;
    int parent = b->depth ? b->stack[b->depth - 1] : -1;
    bool want_key = parent >= 0 && doc->nodes[parent].kind == GP_YAML_MAPPING && !b->pending_key;
    switch (ev->type) {
    case YAML_DOCUMENT_END_EVENT:
        if (b->depth == 0) b->done = true;
        return 0;
    case YAML_ALIAS_EVENT:
        return gp_fail(err, GEPARD_ERR_UNSUPPORTED,
                       "%s:%d: YAML aliases (*name) are not supported in config files", doc->origin,
                       line);
    case YAML_SCALAR_EVENT: {
        if (want_key) {
            b->pending_key = strdup((const char *)ev->data.scalar.value);
            if (!b->pending_key) return gp_fail_oom(err, "YAML key", ev->data.scalar.length);
            return 0;
        }
        int idx = yaml_add_value(b, GP_YAML_SCALAR, line, err);
        if (idx < 0) return -idx;
        gp_yaml_node *n = &doc->nodes[idx];
        n->value = strdup((const char *)ev->data.scalar.value);
        if (!n->value) return gp_fail_oom(err, "YAML value", ev->data.scalar.length);
        n->quoted = ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE;
        if (parent < 0) b->done = true;
        return 0;
    }
    case YAML_SEQUENCE_START_EVENT:
    case YAML_MAPPING_START_EVENT: {
        if (want_key)
            return gp_fail(err, GEPARD_ERR_UNSUPPORTED,
                           "%s:%d: complex mapping keys are not supported in config files",
                           doc->origin, line);
        if (b->depth >= YAML_MAX_DEPTH)
            return gp_fail(err, GEPARD_ERR_FORMAT, "%s:%d: YAML nested more than %d levels deep",
                           doc->origin, line, YAML_MAX_DEPTH);
        gp_yaml_kind kind =
            ev->type == YAML_MAPPING_START_EVENT ? GP_YAML_MAPPING : GP_YAML_SEQUENCE;
        int idx = yaml_add_value(b, kind, line, err);
        if (idx < 0) return -idx;
        b->stack[b->depth++] = idx;
        return 0;
    }
    case YAML_SEQUENCE_END_EVENT:
    case YAML_MAPPING_END_EVENT:
        if (b->depth > 0) b->depth--;
        if (b->depth == 0) b->done = true;
        return 0;
    default: return 0;
    }
}

int gp_yaml_parse(const char *text, size_t len, const char *origin, gp_yaml_doc **out,
                  gp_error *err) {
    *out = NULL;
    gp_yaml_doc *doc = calloc(1, sizeof *doc);
    if (!doc) return gp_fail_oom(err, "YAML document", sizeof *doc);
    doc->origin = strdup(origin ? origin : "(yaml)");
    if (!doc->origin) {
        free(doc);
        return gp_fail_oom(err, "YAML document", 64);
    }
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser)) {
        gp_yaml_free(doc);
        return gp_fail_oom(err, "YAML parser", sizeof parser);
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    yaml_builder b = {.doc = doc};
    int rc = GEPARD_OK;
    while (!b.done) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&parser, &ev)) {
            rc = gp_fail(err, GEPARD_ERR_FORMAT, "%s:%zu:%zu: malformed YAML: %s", doc->origin,
                         parser.problem_mark.line + 1, parser.problem_mark.column + 1,
                         parser.problem ? parser.problem : "syntax error");
            break;
        }
        bool end = ev.type == YAML_STREAM_END_EVENT;
        rc = yaml_handle_event(&b, &ev, err);
        yaml_event_delete(&ev);
        if (rc || end) break;
    }
    yaml_parser_delete(&parser);
    free(b.pending_key);
    if (rc == GEPARD_OK && doc->count == 0) { /* empty document: an empty mapping */
        int idx = yaml_new_node(doc, GP_YAML_MAPPING, 1, err);
        if (idx < 0) rc = -idx;
    }
    if (rc) {
        gp_yaml_free(doc);
        return rc;
    }
    *out = doc;
    return GEPARD_OK;
}

void gp_yaml_free(gp_yaml_doc *doc) {
    if (!doc) return;
    for (int i = 0; i < doc->count; i++) {
        free(doc->nodes[i].key);
        free(doc->nodes[i].value);
    }
    free(doc->nodes);
    free(doc->origin);
    free(doc);
}

const gp_yaml_node *gp_yaml_root(const gp_yaml_doc *doc) {
    return doc && doc->count ? &doc->nodes[0] : NULL;
}

const gp_yaml_node *gp_yaml_get(const gp_yaml_doc *doc, const gp_yaml_node *map, const char *key) {
    if (!map || map->kind != GP_YAML_MAPPING) return NULL;
    for (int i = map->first; i >= 0; i = doc->nodes[i].next)
        if (doc->nodes[i].key && strcmp(doc->nodes[i].key, key) == 0) return &doc->nodes[i];
    return NULL;
}

const gp_yaml_node *gp_yaml_child(const gp_yaml_doc *doc, const gp_yaml_node *node, int index) {
    if (!node || node->kind == GP_YAML_SCALAR || index < 0) return NULL;
    int i = node->first;
    for (int k = 0; i >= 0 && k < index; k++) i = doc->nodes[i].next;
    return i >= 0 ? &doc->nodes[i] : NULL;
}

bool gp_yaml_is_null(const gp_yaml_node *node) {
    if (!node || node->kind != GP_YAML_SCALAR || node->quoted) return false;
    const char *v = node->value;
    return v[0] == '\0' || strcmp(v, "~") == 0 || strcasecmp(v, "null") == 0;
}

const char *gp_yaml_path(const gp_yaml_doc *doc, const gp_yaml_node *node, char *buf, size_t size) {
    /* Collect the chain from the node up to the root, then print it top-down. */
    int chain[YAML_MAX_DEPTH + 1], n = 0;
    for (int i = (int)(node - doc->nodes); i > 0 && n <= YAML_MAX_DEPTH; i = doc->nodes[i].parent)
        chain[n++] = i;
    size_t used = 0;
    buf[0] = '\0';
    for (int k = n - 1; k >= 0 && used < size; k--) {
        const gp_yaml_node *c = &doc->nodes[chain[k]];
        const char *sep = used ? "." : "";
        if (c->key) {
            used += (size_t)snprintf(buf + used, size - used, "%s%s", sep, c->key);
        } else { /* sequence item: its position */
            int pos = 0;
            for (int i = doc->nodes[c->parent].first; i >= 0 && i != chain[k];
                 i = doc->nodes[i].next)
                pos++;
            used += (size_t)snprintf(buf + used, size - used, "%s%d", sep, pos);
        }
    }
    return buf;
}

bool gp_yaml_scalar_int(const gp_yaml_node *node, int64_t *out) {
    if (!node || node->kind != GP_YAML_SCALAR || node->quoted || !node->value[0]) return false;
    char *end;
    errno = 0;
    long long v = strtoll(node->value, &end, 10);
    if (errno || *end) return false;
    *out = v;
    return true;
}

bool gp_yaml_scalar_double(const gp_yaml_node *node, double *out) {
    if (!node || node->kind != GP_YAML_SCALAR || node->quoted || !node->value[0]) return false;
    char *end;
    errno = 0;
    double v = strtod(node->value, &end);
    if (errno || *end || !isfinite(v)) return false;
    *out = v;
    return true;
}

bool gp_yaml_scalar_bool(const gp_yaml_node *node, bool *out) {
    if (!node || node->kind != GP_YAML_SCALAR || node->quoted) return false;
    static const char *const truthy[] = {"true", "yes", "on"}, *const falsy[] = {"false", "no",
                                                                                 "off"};
    for (int i = 0; i < 3; i++) {
        if (strcasecmp(node->value, truthy[i]) == 0) return *out = true, true;
        if (strcasecmp(node->value, falsy[i]) == 0) return *out = false, true;
    }
    return false;
}

static int yaml_type_error(const gp_yaml_doc *doc, const gp_yaml_node *node, const char *what,
                           gp_error *err) {
    char path[512];
    gp_yaml_path(doc, node, path, sizeof path);
    if (node->kind == GP_YAML_SCALAR)
        return gp_fail(err, GEPARD_ERR_FORMAT, "%s:%d: %s: expected %s, got \"%.80s\"", doc->origin,
                       node->line, path, what, node->value);
    return gp_fail(err, GEPARD_ERR_FORMAT, "%s:%d: %s: expected %s, got a %s", doc->origin,
                   node->line, path, what, node->kind == GP_YAML_MAPPING ? "mapping" : "sequence");
}

/* The value under key, or NULL when absent or null. */
static const gp_yaml_node *yaml_value(const gp_yaml_doc *doc, const gp_yaml_node *map,
                                      const char *key) {
    const gp_yaml_node *n = gp_yaml_get(doc, map, key);
    return n && !gp_yaml_is_null(n) ? n : NULL;
}

int gp_yaml_get_int(const gp_yaml_doc *doc, const gp_yaml_node *map, const char *key,
                    int64_t fallback, int64_t *out, gp_error *err) {
    const gp_yaml_node *n = yaml_value(doc, map, key);
    *out = fallback;
    if (n && !gp_yaml_scalar_int(n, out)) return yaml_type_error(doc, n, "an integer", err);
    return GEPARD_OK;
}

int gp_yaml_get_double(const gp_yaml_doc *doc, const gp_yaml_node *map, const char *key,
                       double fallback, double *out, gp_error *err) {
    const gp_yaml_node *n = yaml_value(doc, map, key);
    *out = fallback;
    if (n && !gp_yaml_scalar_double(n, out)) return yaml_type_error(doc, n, "a number", err);
    return GEPARD_OK;
}

int gp_yaml_get_bool(const gp_yaml_doc *doc, const gp_yaml_node *map, const char *key,
                     bool fallback, bool *out, gp_error *err) {
    const gp_yaml_node *n = yaml_value(doc, map, key);
    *out = fallback;
    if (n && !gp_yaml_scalar_bool(n, out)) return yaml_type_error(doc, n, "true or false", err);
    return GEPARD_OK;
}

int gp_yaml_get_string(const gp_yaml_doc *doc, const gp_yaml_node *map, const char *key,
                       const char *fallback, const char **out, gp_error *err) {
    const gp_yaml_node *n = yaml_value(doc, map, key);
    *out = fallback;
    if (!n) return GEPARD_OK;
    if (n->kind != GP_YAML_SCALAR) return yaml_type_error(doc, n, "a string", err);
    *out = n->value;
    return GEPARD_OK;
}

int gp_yaml_get_int_list(const gp_yaml_doc *doc, const gp_yaml_node *map, const char *key,
                         const int64_t *fallback, int fallback_n, int64_t *out, int max, int *n,
                         gp_error *err) {
    const gp_yaml_node *node = yaml_value(doc, map, key);
    *n = 0;
    if (!node) {
        if (fallback_n > max) fallback_n = max;
        for (int i = 0; i < fallback_n; i++) out[i] = fallback[i];
        *n = fallback_n;
        return GEPARD_OK;
    }
    if (node->kind != GP_YAML_SEQUENCE)
        return yaml_type_error(doc, node, "a list of integers", err);
    if (node->count > max) {
        char path[512];
        return gp_fail(err, GEPARD_ERR_FORMAT, "%s:%d: %s: has %d items, at most %d are supported",
                       doc->origin, node->line, gp_yaml_path(doc, node, path, sizeof path),
                       node->count, max);
    }
    for (int i = node->first; i >= 0; i = doc->nodes[i].next) {
        if (!gp_yaml_scalar_int(&doc->nodes[i], &out[*n]))
            return yaml_type_error(doc, &doc->nodes[i], "an integer", err);
        (*n)++;
    }
    return GEPARD_OK;
}
