/* json.c — cJSON wrappers with precise error messages (see json.h). */
#include "io/json.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/file.h"

static int hex4(const char *p, const char *end) {
    if (end - p < 4) return -1;
    int v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

typedef enum json_problem {
    JSON_PROBLEM_NONE,
    JSON_PROBLEM_DEPTH,
    JSON_PROBLEM_SURROGATE
} json_problem;

/* Why cJSON stopped, when it is one of the causes its position alone does
 * not explain: nesting past CJSON_NESTING_LIMIT or a UTF-16 surrogate escape
 * without its other half. Scans up to just past `offset`; *at is where. */
static json_problem diagnose(const char *text, size_t len, size_t offset, size_t *at, int *code) {
    const char *end = text + (offset + 12 < len ? offset + 12 : len);
    int depth = 0;
    bool in_string = false;
    for (const char *p = text; p < end; p++) {
        if (!in_string) {
            if (*p == '"') in_string = true;
            if (*p == '[' || *p == '{') {
                if (++depth > CJSON_NESTING_LIMIT) {
                    *at = (size_t)(p - text);
                    return JSON_PROBLEM_DEPTH;
                }
            } else if (*p == ']' || *p == '}') {
                depth--;
            }
            continue;
        }
        if (*p == '"') {
            in_string = false;
        } else if (*p == '\\' && p + 1 < end) {
            p++;
            if (*p != 'u') continue;
            int v = hex4(p + 1, text + len);
            if (v >= 0xD800 && v <= 0xDBFF) {
                int low = p + 6 < text + len && p[5] == '\\' && p[6] == 'u'
                              ? hex4(p + 7, text + len)
                              : -1;
                if (low < 0xDC00 || low > 0xDFFF) {
                    *at = (size_t)(p - 1 - text);
                    *code = v;
                    return JSON_PROBLEM_SURROGATE;
                }
                p += 10; /* the pair */
            } else if (v >= 0xDC00 && v <= 0xDFFF) {
                *at = (size_t)(p - 1 - text);
                *code = v;
                return JSON_PROBLEM_SURROGATE;
            } else if (v >= 0) {
                p += 4;
            }
        }
    }
    return JSON_PROBLEM_NONE;
}

static void line_column(const char *text, size_t offset, int *line, int *column) {
    *line = 1;
    *column = 1;
    for (size_t i = 0; i < offset; i++) {
        if (text[i] == '\n') {
            ++*line;
            *column = 1;
        } else {
            ++*column;
        }
    }
}

int gp_json_parse(const char *text, size_t len, const char *origin, cJSON **out, gp_error *err) {
    *out = NULL;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, false);
    if (!root) {
        size_t offset = end && end >= text ? (size_t)(end - text) : 0;
        if (offset > len) offset = len;
        int line, column, code = 0;
        size_t at = 0;
        json_problem why = diagnose(text, len, offset, &at, &code);
        if (why == JSON_PROBLEM_DEPTH) {
            line_column(text, at, &line, &column);
            return gp_fail(err, GEPARD_ERR_FORMAT,
                           "%s: JSON nested deeper than %d arrays and objects at line %d, column "
                           "%d — flatten the document",
                           origin, CJSON_NESTING_LIMIT, line, column);
        }
        if (why == JSON_PROBLEM_SURROGATE) {
            line_column(text, at, &line, &column);
            return gp_fail(err, GEPARD_ERR_FORMAT,
                           "%s: lone UTF-16 surrogate escape \\u%04X at line %d, column %d — a "
                           "surrogate must come as a pair (\\uD800-\\uDBFF then "
                           "\\uDC00-\\uDFFF); send the character as UTF-8 or as a valid pair",
                           origin, (unsigned)code, line, column);
        }
        line_column(text, offset, &line, &column);
        return gp_fail(err, GEPARD_ERR_FORMAT,
                       "%s: malformed JSON near line %d, column %d — is the file complete and "
                       "valid JSON?",
                       origin, line, column);
    }
    /* Only whitespace may follow the document. */
    if (end) {
        while ((size_t)(end - text) < len &&
               (*end == ' ' || *end == '\n' || *end == '\r' || *end == '\t' || *end == '\0'))
            end++;
        if ((size_t)(end - text) < len) {
            cJSON_Delete(root);
            return gp_fail(err, GEPARD_ERR_FORMAT,
                           "%s: unexpected data after the JSON document at byte %zu", origin,
                           (size_t)(end - text));
        }
    }
    *out = root;
    return GEPARD_OK;
}

int gp_json_load_file(const char *path, size_t max_bytes, cJSON **out, gp_error *err) {
    char *text;
    size_t len;
    int rc = gp_read_file(path, max_bytes, &text, &len, err);
    if (rc) return rc;
    rc = gp_json_parse(text, len, path, out, err);
    free(text);
    return rc;
}

static const cJSON *json_member(const cJSON *obj, const char *key) {
    if (!obj || !cJSON_IsObject(obj)) return NULL;
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!item || cJSON_IsNull(item)) return NULL;
    return item;
}

bool gp_json_is_integer(const cJSON *item) {
    if (!cJSON_IsNumber(item)) return false;
    double v = item->valuedouble;
    return isfinite(v) && floor(v) == v && fabs(v) <= 9007199254740992.0;
}

int gp_json_get_int(const cJSON *obj, const char *key, int64_t fallback, int64_t *out,
                    const char *origin, gp_error *err) {
    const cJSON *item = json_member(obj, key);
    if (!item) {
        *out = fallback;
        return GEPARD_OK;
    }
    if (!gp_json_is_integer(item))
        return gp_fail(err, GEPARD_ERR_FORMAT, "%s: \"%s\" must be an integer", origin, key);
    *out = (int64_t)item->valuedouble;
    return GEPARD_OK;
}

int gp_json_get_double(const cJSON *obj, const char *key, double fallback, double *out,
                       const char *origin, gp_error *err) {
    const cJSON *item = json_member(obj, key);
    if (!item) {
        *out = fallback;
        return GEPARD_OK;
    }
    if (!cJSON_IsNumber(item))
        return gp_fail(err, GEPARD_ERR_FORMAT, "%s: \"%s\" must be a number", origin, key);
    *out = item->valuedouble;
    return GEPARD_OK;
}

int gp_json_get_bool(const cJSON *obj, const char *key, bool fallback, bool *out,
                     const char *origin, gp_error *err) {
    const cJSON *item = json_member(obj, key);
    if (!item) {
        *out = fallback;
        return GEPARD_OK;
    }
    if (!cJSON_IsBool(item))
        return gp_fail(err, GEPARD_ERR_FORMAT, "%s: \"%s\" must be true or false", origin, key);
    *out = cJSON_IsTrue(item);
    return GEPARD_OK;
}

int gp_json_get_string(const cJSON *obj, const char *key, const char *fallback, const char **out,
                       const char *origin, gp_error *err) {
    const cJSON *item = json_member(obj, key);
    if (!item) {
        *out = fallback;
        return GEPARD_OK;
    }
    if (!cJSON_IsString(item))
        return gp_fail(err, GEPARD_ERR_FORMAT, "%s: \"%s\" must be a string", origin, key);
    *out = item->valuestring;
    return GEPARD_OK;
}

int gp_json_append_string(gp_buf *b, const char *s) {
    if (gp_buf_append(b, "\"", 1)) return -1;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char esc[8];
        const char *piece = NULL;
        switch (*p) {
        case '"': piece = "\\\""; break;
        case '\\': piece = "\\\\"; break;
        case '\n': piece = "\\n"; break;
        case '\r': piece = "\\r"; break;
        case '\t': piece = "\\t"; break;
        case '\b': piece = "\\b"; break;
        case '\f': piece = "\\f"; break;
        default:
            if (*p < 0x20) {
                snprintf(esc, sizeof esc, "\\u%04x", *p);
                piece = esc;
            }
        }
        if (piece) {
            if (gp_buf_append_str(b, piece)) return -1;
        } else if (gp_buf_append(b, p, 1)) {
            return -1;
        }
    }
    return gp_buf_append(b, "\"", 1);
}
