/* voices.c — scanning and loading the voices directory, lookup and the JSON
 * listings (see voices.h). */
#include "server/voices.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "base/log.h"
#include "io/file.h"
#include "io/json.h"

static const char *const builtin_names[] = {"alloy", "ash",   "ballad", "coral",  "echo",
                                            "fable", "onyx",  "nova",   "sage",   "shimmer",
                                            "verse", "marin", "cedar",  "default"};
#define N_BUILTIN ((int)(sizeof builtin_names / sizeof builtin_names[0]))

static const char *const clip_exts[] = {".wav",  ".flac", ".ogg",  ".oga", ".opus", ".mp3",
                                        ".aiff", ".aif",  ".aifc", ".au",  ".caf",  ".w64"};
static const char *const prefix_exts[] = {".voice.safetensors", ".safetensors", ".voice"};
static const char *const lora_exts[] = {".lora.safetensors", ".lora.pt"};

typedef enum file_kind { FILE_SKIP = 0, FILE_CLIP, FILE_PREFIX, FILE_LORA } file_kind;

bool gp_voices_is_builtin_name(const char *name) {
    for (int i = 0; i < N_BUILTIN; i++)
        if (strcmp(name, builtin_names[i]) == 0) return true;
    return false;
}

/* What a file is, and its voice name (the file name without the suffix). */
static file_kind classify(const char *file, char name[GP_VOICE_NAME_MAX]) {
    struct {
        const char *const *exts;
        int n;
        file_kind kind;
    } groups[] = {{lora_exts, 2, FILE_LORA},
                  {prefix_exts, 3, FILE_PREFIX},
                  {clip_exts, (int)(sizeof clip_exts / sizeof clip_exts[0]), FILE_CLIP}};
    size_t len = strlen(file);
    for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++)
        for (int i = 0; i < groups[g].n; i++) {
            size_t el = strlen(groups[g].exts[i]);
            if (len > el && strcasecmp(file + len - el, groups[g].exts[i]) == 0) {
                if (len - el >= GP_VOICE_NAME_MAX) return FILE_SKIP;
                memcpy(name, file, len - el);
                name[len - el] = '\0';
                return groups[g].kind;
            }
        }
    return FILE_SKIP;
}

static bool name_is_usable(const char *name) {
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        if (*p < 0x20 || *p == '"' || *p == '\\' || *p == 0x7f) return false;
    return *name != '\0';
}

static gp_voice_entry *entry_for(gp_voices *v, const char *name, gp_error *err) {
    for (int i = 0; i < v->count; i++)
        if (strcmp(v->items[i].name, name) == 0) return &v->items[i];
    gp_voice_entry *items = realloc(v->items, (size_t)(v->count + 1) * sizeof *items);
    if (!items) {
        gp_fail_oom(err, "voices", 0);
        return NULL;
    }
    v->items = items;
    gp_voice_entry *e = &items[v->count++];
    memset(e, 0, sizeof *e);
    snprintf(e->name, sizeof e->name, "%s", name);
    return e;
}

/* NAME.lora.json beside an adapter: {"alpha": A}. */
static int read_lora_alpha(const char *dir, const char *name, float *alpha, gp_error *err) {
    *alpha = 0;
    char file[GP_VOICE_NAME_MAX + 16];
    snprintf(file, sizeof file, "%s.lora.json", name);
    char *path = gp_path_join(dir, file);
    if (!path) return gp_fail_oom(err, "path", 0);
    int rc = GEPARD_OK;
    if (gp_path_exists(path)) {
        cJSON *json = NULL;
        double a = 0;
        rc = gp_json_load_file(path, 65536, &json, err);
        if (!rc) rc = gp_json_get_double(json, "alpha", 0, &a, path, err);
        if (!rc && !(a > 0 && a < 1e6))
            rc = gp_fail(err, GEPARD_ERR_FORMAT, "%s: alpha must be a positive number", path);
        if (!rc) *alpha = (float)a;
        cJSON_Delete(json);
    }
    free(path);
    return rc;
}

static int load_file(gp_voices *v, gepard_model *model, const gepard_codec *codec, const char *dir,
                     const char *file, file_kind kind, const char *name, gp_error *err) {
    gp_voice_entry *e = entry_for(v, name, err);
    if (!e) return err->code;
    char **slot = kind == FILE_LORA ? &e->lora_file : &e->prefix_file;
    if (*slot)
        return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT,
                       "%s: %s and %s both define the %s of voice \"%s\" — rename or remove one",
                       dir, *slot, file, kind == FILE_LORA ? "adapter" : "speaker", name);
    if (!(*slot = strdup(file))) return gp_fail_oom(err, "voices", 0);
    char *path = gp_path_join(dir, file);
    if (!path) return gp_fail_oom(err, "path", 0);
    gepard_status st;
    if (kind == FILE_LORA) {
        int rc = read_lora_alpha(dir, name, &e->lora_alpha, err);
        if (rc) {
            free(path);
            return rc;
        }
        st = gepard_lora_load(model, path, e->lora_alpha, &e->lora);
    } else {
        st = gepard_voice_from_file(model, codec, path, &e->voice);
    }
    free(path);
    if (st != GEPARD_OK)
        return gp_fail(err, (int)st, "voice \"%s\": %s", name, gepard_last_error());
    GP_INFO("voice \"%s\": %s", name, file);
    return GEPARD_OK;
}

static int compare_entries(const void *a, const void *b) {
    return strcmp(((const gp_voice_entry *)a)->name, ((const gp_voice_entry *)b)->name);
}

int gp_voices_load(gepard_model *model, const gepard_codec *codec, const char *dir, gp_voices **out,
                   gp_error *err) {
    *out = NULL;
    gp_voices *v = calloc(1, sizeof *v);
    if (!v) return gp_fail_oom(err, "voices", sizeof *v);
    if (!dir) {
        *out = v;
        return GEPARD_OK;
    }
    if (!gp_path_is_dir(dir)) {
        free(v);
        return gp_fail(err, GEPARD_ERR_NOT_FOUND, "%s: the voices directory does not exist", dir);
    }
    struct dirent **names = NULL;
    int n = scandir(dir, &names, NULL, alphasort);
    if (n < 0) {
        free(v);
        return gp_fail(err, GEPARD_ERR_IO, "%s: cannot list the voices directory", dir);
    }
    int rc = GEPARD_OK;
    for (int i = 0; i < n; i++) {
        const char *file = names[i]->d_name;
        char name[GP_VOICE_NAME_MAX];
        file_kind kind = file[0] == '.' ? FILE_SKIP : classify(file, name);
        if (!rc && kind != FILE_SKIP && !name_is_usable(name)) {
            GP_WARN("%s/%s: skipped (the name has quotes or control characters)", dir, file);
            kind = FILE_SKIP;
        }
        if (!rc && kind == FILE_SKIP && file[0] != '.' && !gp_path_has_suffix(file, ".lora.json"))
            GP_INFO("%s/%s: not a voice file, skipped", dir, file);
        if (!rc && kind != FILE_SKIP) rc = load_file(v, model, codec, dir, file, kind, name, err);
        free(names[i]);
    }
    free(names);
    if (rc) {
        gp_voices_free(v);
        return rc;
    }
    if (v->count > 1) qsort(v->items, (size_t)v->count, sizeof *v->items, compare_entries);
    *out = v;
    return GEPARD_OK;
}

void gp_voices_free(gp_voices *v) {
    if (!v) return;
    for (int i = 0; i < v->count; i++) {
        gepard_voice_free(v->items[i].voice);
        gepard_lora_free(v->items[i].lora);
        free(v->items[i].prefix_file);
        free(v->items[i].lora_file);
    }
    free(v->items);
    free(v);
}

const gp_voice_entry *gp_voices_find(const gp_voices *v, const char *name) {
    if (!v || !name) return NULL;
    for (int i = 0; i < v->count; i++)
        if (strcmp(v->items[i].name, name) == 0) return &v->items[i];
    return NULL;
}

int gp_voices_append_names(const gp_voices *v, gp_buf *out) {
    int rc = gp_buf_append_str(out, "[");
    bool first = true;
    for (int i = 0; v && i < v->count; i++, first = false) {
        if (!first) rc |= gp_buf_append_str(out, ",");
        rc |= gp_json_append_string(out, v->items[i].name);
    }
    for (int i = 0; i < N_BUILTIN; i++) {
        if (gp_voices_find(v, builtin_names[i])) continue;
        if (!first) rc |= gp_buf_append_str(out, ",");
        rc |= gp_json_append_string(out, builtin_names[i]);
        first = false;
    }
    return rc | gp_buf_append_str(out, "]");
}

int gp_voices_listed_count(const gp_voices *v) {
    int n = v ? v->count : 0;
    for (int i = 0; i < N_BUILTIN; i++) n += gp_voices_find(v, builtin_names[i]) == NULL;
    return n;
}

const char *gp_voices_listed(const gp_voices *v, int i, const gp_voice_entry **entry) {
    *entry = NULL;
    if (v && i >= 0 && i < v->count) {
        *entry = &v->items[i];
        return v->items[i].name;
    }
    int k = i - (v ? v->count : 0);
    for (int b = 0; b < N_BUILTIN && k >= 0; b++) {
        if (gp_voices_find(v, builtin_names[b])) continue;
        if (k-- == 0) return builtin_names[b];
    }
    return NULL;
}

static int append_file_or_null(gp_buf *out, const char *key, const char *file) {
    int rc = gp_buf_printf(out, ",\"%s\":", key);
    return rc | (file ? gp_json_append_string(out, file) : gp_buf_append_str(out, "null"));
}

int gp_voices_append_listing(const gp_voices *v, gp_buf *out) {
    int rc = gp_buf_append_str(out, "{\"object\":\"list\",\"data\":[");
    bool first = true;
    for (int i = 0; v && i < v->count; i++, first = false) {
        const gp_voice_entry *e = &v->items[i];
        rc |= gp_buf_append_str(out, first ? "{\"id\":" : ",{\"id\":");
        rc |= gp_json_append_string(out, e->name);
        rc |= gp_buf_append_str(out, ",\"object\":\"voice\",\"name\":");
        rc |= gp_json_append_string(out, e->name);
        rc |= gp_buf_printf(out, ",\"speaker\":\"%s\"", e->voice ? "prefix" : "default");
        rc |= append_file_or_null(out, "file", e->prefix_file);
        rc |= append_file_or_null(out, "lora", e->lora_file);
        rc |= gp_buf_append_str(out, "}");
    }
    for (int i = 0; i < N_BUILTIN; i++) {
        if (gp_voices_find(v, builtin_names[i])) continue;
        rc |= gp_buf_append_str(out, first ? "{\"id\":" : ",{\"id\":");
        rc |= gp_json_append_string(out, builtin_names[i]);
        rc |= gp_buf_append_str(out, ",\"object\":\"voice\",\"name\":");
        rc |= gp_json_append_string(out, builtin_names[i]);
        rc |= gp_buf_append_str(out, ",\"speaker\":\"default\",\"file\":null,\"lora\":null}");
        first = false;
    }
    rc |= gp_buf_append_str(out, "],\"voices\":");
    rc |= gp_voices_append_names(v, out);
    return rc | gp_buf_append_str(out, "}");
}

int gp_voices_listed_index(const gp_voices *voices, const char *name) {
    const gp_voice_entry *entry;
    for (int i = 0, n = gp_voices_listed_count(voices); i < n; i++)
        if (strcmp(gp_voices_listed(voices, i, &entry), name) == 0) return i;
    return -1;
}

void gp_voice_describe(const gp_voice_entry *entry, char *out, size_t cap) {
    if (entry && (entry->prefix_file || entry->lora_file))
        snprintf(out, cap, "a voice of this server's voices directory: %s%s%s",
                 entry->prefix_file ? entry->prefix_file : "",
                 entry->prefix_file && entry->lora_file ? " and " : "",
                 entry->lora_file ? entry->lora_file : "");
    else
        snprintf(out, cap, "the model's default voice");
}
