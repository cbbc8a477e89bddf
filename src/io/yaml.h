/* yaml.h — a small YAML document tree on libyaml, for config files such as
 * NeMo's model_config.yaml.
 *
 * gp_yaml_parse turns one YAML document into a tree of mappings, sequences
 * and scalars held in one flat node array (indices, no pointers between
 * nodes, so the whole document is freed at once). Aliases and complex keys
 * are refused; nesting depth and node count are bounded, so a hostile file
 * is an error, never a crash or a blow-up. The typed getters treat an absent
 * key or a null value as "use the default" and report a value of the wrong
 * type with its dotted path and line ("model_config.yaml:12:
 * audio_decoder.base_channels: expected an integer, got \"abc\"").
 */
#ifndef GP_IO_YAML_H
#define GP_IO_YAML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

typedef enum gp_yaml_kind { GP_YAML_SCALAR, GP_YAML_SEQUENCE, GP_YAML_MAPPING } gp_yaml_kind;

typedef struct gp_yaml_node {
    gp_yaml_kind kind;
    char *key;   /* key under which the node sits in its parent mapping, else NULL */
    char *value; /* scalar text (NUL-terminated), else NULL */
    bool quoted; /* scalar was written quoted or as a block, so it is a string */
    int line;    /* 1-based line of the node's start */
    int parent, first, last, next; /* node indices, -1 = none */
    int count;                     /* number of children */
} gp_yaml_node;

typedef struct gp_yaml_doc {
    char *origin; /* name used in messages (normally the file name) */
    gp_yaml_node *nodes;
    int count, cap;
} gp_yaml_doc;

/* Parse the first document of `text`; an empty document gives an empty mapping. */
int gp_yaml_parse(const char *text, size_t len, const char *origin, gp_yaml_doc **out,
                  gp_error *err);
void gp_yaml_free(gp_yaml_doc *doc);

const gp_yaml_node *gp_yaml_root(const gp_yaml_doc *doc);
/* The value under `key` of a mapping (NULL when absent or `map` is not a mapping). */
const gp_yaml_node *gp_yaml_get(const gp_yaml_doc *doc, const gp_yaml_node *map, const char *key);
/* Child `index` of a sequence or mapping (NULL when out of range). */
const gp_yaml_node *gp_yaml_child(const gp_yaml_doc *doc, const gp_yaml_node *node, int index);
/* True for a plain scalar null ("", "~", "null"). */
bool gp_yaml_is_null(const gp_yaml_node *node);
/* The dotted path of a node ("audio_decoder.up_sample_rates.2") into buf. */
const char *gp_yaml_path(const gp_yaml_doc *doc, const gp_yaml_node *node, char *buf, size_t size);

/* Typed getters on mapping `map`: absent key or null stores `fallback`; a value of the
 * wrong type fails with the file, line and dotted path. */
int gp_yaml_get_int(const gp_yaml_doc *doc, const gp_yaml_node *map, const char *key,
                    int64_t fallback, int64_t *out, gp_error *err);
int gp_yaml_get_double(const gp_yaml_doc *doc, const gp_yaml_node *map, const char *key,
                       double fallback, double *out, gp_error *err);
int gp_yaml_get_bool(const gp_yaml_doc *doc, const gp_yaml_node *map, const char *key,
                     bool fallback, bool *out, gp_error *err);
/* *out points into the document (or is `fallback`). */
int gp_yaml_get_string(const gp_yaml_doc *doc, const gp_yaml_node *map, const char *key,
                       const char *fallback, const char **out, gp_error *err);
/* A sequence of integers of at most `max` items into out[]; *n = count. An absent key
 * copies `fallback` (fallback_n items). */
int gp_yaml_get_int_list(const gp_yaml_doc *doc, const gp_yaml_node *map, const char *key,
                         const int64_t *fallback, int fallback_n, int64_t *out, int max, int *n,
                         gp_error *err);

/* Parse a scalar as an integer / float / boolean; false when it is not one. */
bool gp_yaml_scalar_int(const gp_yaml_node *node, int64_t *out);
bool gp_yaml_scalar_double(const gp_yaml_node *node, double *out);
bool gp_yaml_scalar_bool(const gp_yaml_node *node, bool *out);

#endif
