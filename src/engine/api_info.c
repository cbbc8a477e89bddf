/* api_info.c — gepard_describe_file(): what a model file holds, for `gepard info`.
 *
 * A table of describers is tried in order; the first whose probe accepts the path
 * writes the description. Today: NeMo codecs (a .nemo archive, or a state dict with
 * model_config.yaml beside it, or a codec directory), any .safetensors file and any
 * torch.save checkpoint, and Gepard model directories. A lone tokenizer.json,
 * model config or model_config.yaml is named for what it is, with where it
 * belongs, rather than failing as "not a tar archive".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "codec/config.h"
#include "codec/source.h"
#include "engine/api_error.h"
#include "gepard.h"
#include "io/file.h"
#include "io/json.h"
#include "io/safetensors.h"
#include "io/torch.h"
#include "io/yaml.h"
#include "io/zip.h"
#include "model/config.h"

typedef struct dtype_tally {
    size_t count[GP_BOOL + 1];
    size_t params;
} dtype_tally;

static void tally_add(dtype_tally *t, gp_dtype dtype, size_t numel) {
    if ((unsigned)dtype <= GP_BOOL) t->count[dtype]++;
    t->params += numel;
}

static void tally_print(const dtype_tally *t, size_t tensors, gp_buf *out) {
    gp_buf_printf(out, "tensors: %zu\nparameters: %zu (%.2f M)\ndtypes:", tensors, t->params,
                  (double)t->params / 1e6);
    for (int d = 1; d <= GP_BOOL; d++)
        if (t->count[d]) gp_buf_printf(out, " %s x%zu", gp_dtype_name((gp_dtype)d), t->count[d]);
    gp_buf_append_str(out, "\n");
}

static void print_list(gp_buf *out, const char *label, const int *v, int n) {
    gp_buf_printf(out, "%s [", label);
    for (int i = 0; i < n; i++) gp_buf_printf(out, "%s%d", i ? ", " : "", v[i]);
    gp_buf_append_str(out, "]");
}

static int describe_codec(const char *path, gp_buf *out, gp_error *err) {
    gp_codec_source *src;
    int rc = gp_codec_source_open(path, &src, err);
    if (rc) return rc;
    gp_codec_config cfg;
    rc = gp_codec_config_parse(src->yaml, &cfg, err);
    if (rc) {
        gp_codec_source_free(src);
        return rc;
    }
    dtype_tally all = {0}, dec = {0}, enc = {0};
    for (size_t i = 0; i < src->count; i++) {
        const gp_codec_tensor *t = &src->tensors[i];
        tally_add(&all, t->dtype, t->numel);
        if (strncmp(t->name, "audio_decoder.", 14) == 0) tally_add(&dec, t->dtype, t->numel);
        if (strncmp(t->name, "audio_encoder.", 14) == 0) tally_add(&enc, t->dtype, t->numel);
    }
    gp_buf_printf(out, "%s: NeMo audio codec (%s)\n", path, src->container);
    gp_buf_printf(out, "sample rate: %d Hz, %d samples per frame (%.3f frames/s)\n",
                  cfg.sample_rate, cfg.samples_per_frame,
                  (double)cfg.sample_rate / cfg.samples_per_frame);
    const gp_codec_decoder_config *d = &cfg.dec;
    gp_buf_printf(out, "decoder: CausalHiFiGANDecoder, input_dim %d, base_channels %d, ",
                  d->input_dim, d->base_channels);
    print_list(out, "up_sample_rates", d->rates, d->n_stages);
    gp_buf_printf(out, ", activation %s, output %s, kernels in %d / out %d, ",
                  gp_codec_act_name(d->activation),
                  d->output_activation == GP_CODEC_OUT_CLAMP ? "clamp" : "tanh", d->in_kernel,
                  d->out_kernel);
    print_list(out, "resblock kernels", d->res.kernels, d->res.n_kernels);
    print_list(out, ", dilations", d->res.dilations, d->res.n_dilations);
    gp_buf_printf(out, "; %zu parameters\n", dec.params);
    const gp_codec_encoder_config *e = &cfg.enc;
    gp_buf_printf(out, "encoder: %s, encoded_dim %d, base_channels %d, ",
                  e->causal ? "CausalHiFiGANEncoder" : "HiFiGANEncoder", e->encoded_dim,
                  e->base_channels);
    print_list(out, "down_sample_rates", e->rates, e->n_stages);
    gp_buf_printf(out, ", activation %s, pad_mode %s; %zu parameters\n",
                  gp_codec_act_name(e->activation), gp_codec_pad_name(e->pad_mode), enc.params);
    gp_buf_printf(out, "quantizer: GroupFiniteScalarQuantizer, %d groups x ", cfg.fsq.num_groups);
    print_list(out, "levels", cfg.fsq.levels, cfg.fsq.n_levels);
    gp_buf_printf(out, ", eps %g -> %d codebooks per frame\n", cfg.fsq.eps,
                  cfg.fsq.num_groups * cfg.fsq.n_levels);
    tally_print(&all, src->count, out);
    gp_codec_source_free(src);
    return GEPARD_OK;
}

static int describe_safetensors(const char *path, gp_buf *out, gp_error *err) {
    gp_st_file *f;
    int rc = gp_st_open(path, &f, err);
    if (rc) return rc;
    dtype_tally all = {0};
    for (size_t i = 0; i < f->count; i++) tally_add(&all, f->tensors[i].dtype, f->tensors[i].numel);
    gp_buf_printf(out, "%s: safetensors\n", path);
    tally_print(&all, f->count, out);
    for (size_t i = 0; i < f->metadata_count; i++)
        gp_buf_printf(out, "metadata %s: %s\n", f->metadata_keys[i], f->metadata_values[i]);
    gp_st_close(f);
    return GEPARD_OK;
}

static int describe_torch(const char *path, gp_buf *out, gp_error *err) {
    gp_torch_file *f;
    int rc = gp_torch_open(path, &f, err);
    if (rc) return rc;
    dtype_tally all = {0};
    for (size_t i = 0; i < f->count; i++) tally_add(&all, f->tensors[i].dtype, f->tensors[i].numel);
    gp_buf_printf(out, "%s: PyTorch checkpoint (torch.save zip)\n", path);
    tally_print(&all, f->count, out);
    for (size_t i = 0; i < f->scalar_count; i++) {
        const gp_torch_scalar *s = &f->scalars[i];
        if (s->is_float)
            gp_buf_printf(out, "value %s: %g\n", s->name, s->f);
        else
            gp_buf_printf(out, "value %s: %lld\n", s->name, (long long)s->i);
    }
    gp_torch_close(f);
    return GEPARD_OK;
}

/* First bytes of a file (zeros past its end). */
/* A Gepard checkpoint directory: the resolved config and the weights file. */
static int describe_gepard(const char *path, gp_buf *out, gp_error *err) {
    gp_model_config cfg;
    int rc = gp_model_config_load(path, &cfg, err);
    if (rc) return rc;
    const gp_backbone_config *b = &cfg.backbone;
    gp_buf_printf(out, "%s: Gepard model%s\n", path,
                  cfg.legacy ? " (legacy config.json only)" : "");
    gp_buf_printf(out,
                  "backbone: Qwen3.5 full attention, %d layers, hidden %d, %d query / %d key-value "
                  "heads of %d, MLP %d, vocabulary %lld, rope theta %g, rotary %d of %d dims, "
                  "rms eps %g\n",
                  b->num_layers, b->hidden_size, b->num_heads, b->num_kv_heads, b->head_dim,
                  b->intermediate_size, (long long)b->vocab_size, b->rope_theta, b->rotary_dim,
                  b->head_dim, b->rms_norm_eps);
    gp_buf_printf(out, "audio: %d channels (%d logits), audio_embed_dim %d", cfg.num_channels,
                  cfg.total_logits, cfg.audio_embed_dim);
    if (cfg.codec.present) {
        gp_buf_printf(out, ", codec %d groups x", cfg.codec.num_layers);
        print_list(out, " levels", cfg.codec.fsq_levels, cfg.codec.num_levels);
    }
    gp_buf_printf(out, "\nspecial ids: start_of_text %d, end_of_text %d, start_of_speech %d\n",
                  cfg.special.start_of_text, cfg.special.end_of_text, cfg.special.start_of_speech);
    if (cfg.repetition.enabled)
        gp_buf_printf(out, "text repetition: target %d tokens, below %d, at most %d copies\n",
                      cfg.repetition.target_text_tokens, cfg.repetition.apply_below,
                      cfg.repetition.max_repeats);
    else
        gp_buf_append_str(out, "text repetition: off\n");
    if (cfg.voice_cloning.enabled)
        gp_buf_printf(out, "voice cloning: %d prefix rows, %d blocks, %d heads, FFN %d\n",
                      cfg.voice_cloning.num_queries, cfg.voice_cloning.num_layers,
                      cfg.voice_cloning.num_heads, cfg.voice_cloning.ffn_hidden_size);
    else
        gp_buf_append_str(out, "voice cloning: off\n");
    char *st_path = gp_path_join(path, "model.safetensors");
    if (!st_path) return gp_fail_oom(err, "path", 0);
    gp_st_file *f;
    rc = gp_st_open(st_path, &f, err);
    free(st_path);
    if (rc) return rc;
    dtype_tally all = {0};
    for (size_t i = 0; i < f->count; i++) tally_add(&all, f->tensors[i].dtype, f->tensors[i].numel);
    tally_print(&all, f->count, out);
    gp_st_close(f);
    return GEPARD_OK;
}

static bool probe_gepard(const char *path) {
    if (!gp_path_is_dir(path)) return false;
    char *a = gp_path_join(path, "gepard_config.json"), *b = gp_path_join(path, "config.json");
    bool yes = (a && gp_path_exists(a)) || (b && gp_path_exists(b));
    free(a);
    free(b);
    return yes;
}

static size_t read_head(const char *path, unsigned char *head, size_t n) {
    memset(head, 0, n);
    FILE *fp = fopen(path, "rb");
    if (!fp) return 0;
    size_t got = fread(head, 1, n, fp);
    fclose(fp);
    return got;
}

static bool config_beside(const char *path) {
    const char *base = gp_path_basename(path);
    char dir[4096];
    snprintf(dir, sizeof dir, "%.*s", (int)(base - path), path);
    char *config = gp_path_join(dir[0] ? dir : ".", "model_config.yaml");
    bool ok = config && gp_path_exists(config);
    free(config);
    return ok;
}

static bool probe_codec(const char *path) {
    if (gp_path_is_dir(path)) return true;
    unsigned char head[16];
    size_t n = read_head(path, head, sizeof head);
    bool zip = gp_zip_looks_like(head, n), st = gp_st_looks_like(head, n);
    if (!zip && !st) return true; /* a tar (.nemo) or something only the codec reader names */
    return config_beside(path);
}

static bool probe_safetensors(const char *path) { return gp_st_path_looks_like(path); }

static bool probe_torch(const char *path) {
    unsigned char head[16];
    size_t n = read_head(path, head, sizeof head);
    return gp_zip_looks_like(head, n) || gp_torch_is_legacy(head, n);
}

#define TEXT_CONFIG_MAX (64u << 20) /* a Qwen tokenizer.json is ~11 MB */

static int count_items(const cJSON *item) { return item ? cJSON_GetArraySize(item) : 0; }

/* A JSON file: a Hugging Face tokenizer, a model config, or something else. */
static int describe_json(const char *path, gp_buf *out, gp_error *err) {
    cJSON *j = NULL;
    int rc = gp_json_load_file(path, TEXT_CONFIG_MAX, &j, err);
    if (rc) return rc;
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(j, "model");
    const char *type = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(model, "type"));
    const char *base = gp_path_basename(path);
    if (cJSON_IsObject(model) && cJSON_GetObjectItemCaseSensitive(model, "vocab")) {
        gp_buf_printf(out,
                      "%s: a Hugging Face tokenizer (tokenizer.json): %s, %d vocabulary entries, "
                      "%d merges, %d added tokens\n",
                      path, type ? type : "unknown type",
                      count_items(cJSON_GetObjectItemCaseSensitive(model, "vocab")),
                      count_items(cJSON_GetObjectItemCaseSensitive(model, "merges")),
                      count_items(cJSON_GetObjectItemCaseSensitive(j, "added_tokens")));
        gp_buf_append_str(out, "it is part of a model directory: gepard info DIR describes the "
                               "model, gepard tokenize --model DIR TEXT uses the tokenizer\n");
    } else if (strcmp(base, "gepard_config.json") == 0 || strcmp(base, "config.json") == 0 ||
               cJSON_GetObjectItemCaseSensitive(j, "model_type")) {
        const char *mt = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "model_type"));
        gp_buf_printf(out, "%s: a model configuration (JSON%s%s)\n", path,
                      mt ? ", model_type " : "", mt ? mt : "");
        gp_buf_append_str(out, "describe the model it configures with gepard info on its "
                               "directory (the one holding model.safetensors)\n");
    } else {
        gp_buf_printf(out,
                      "%s: a JSON file, not a model file: gepard info describes NanoCodec .nemo "
                      "files, Gepard model directories, .safetensors files and torch "
                      "checkpoints\n",
                      path);
    }
    cJSON_Delete(j);
    return GEPARD_OK;
}

/* A YAML file: a NanoCodec model_config.yaml (without its weights). */
static int describe_yaml(const char *path, gp_buf *out, gp_error *err) {
    char *text = NULL;
    size_t len = 0;
    int rc = gp_read_file(path, TEXT_CONFIG_MAX, &text, &len, err);
    if (rc) return rc;
    gp_yaml_doc *doc = NULL;
    rc = gp_yaml_parse(text, len, path, &doc, err);
    free(text);
    if (rc) return rc;
    gp_codec_config cfg;
    gp_error why;
    gp_error_clear(&why);
    if (gp_codec_config_parse(doc, &cfg, &why) == 0) {
        gp_buf_printf(out,
                      "%s: a NanoCodec configuration (model_config.yaml): %d Hz, %d samples per "
                      "frame, %d codes per frame (%d groups x",
                      path, cfg.sample_rate, cfg.samples_per_frame,
                      cfg.fsq.num_groups * cfg.fsq.n_levels, cfg.fsq.num_groups);
        print_list(out, " FSQ levels", cfg.fsq.levels, cfg.fsq.n_levels);
        gp_buf_printf(out, "), decoder base_channels %d\n", cfg.dec.base_channels);
        gp_buf_append_str(out, "its weights are in the .nemo archive it came from, or in a state "
                               "dict (.ckpt, .safetensors) beside it: gepard info on that file "
                               "describes the codec\n");
    } else {
        gp_buf_printf(out,
                      "%s: a YAML file, but not a NanoCodec model_config.yaml gepard can read "
                      "(%s)\n",
                      path, why.message);
    }
    gp_yaml_free(doc);
    return GEPARD_OK;
}

/* JSON and YAML files by name, or by a leading '{'. */
static bool probe_json(const char *path) {
    if (gp_path_is_dir(path)) return false;
    if (gp_path_has_suffix(path, ".json")) return true;
    unsigned char head[1];
    return read_head(path, head, 1) == 1 && head[0] == '{';
}

static bool probe_yaml(const char *path) {
    return !gp_path_is_dir(path) &&
           (gp_path_has_suffix(path, ".yaml") || gp_path_has_suffix(path, ".yml"));
}

gepard_status gepard_describe_file(const char *path, char **text) {
    if (!path || !text)
        return gp_api_failf(GEPARD_ERR_INVALID_ARGUMENT, "gepard_describe_file: NULL argument");
    *text = NULL;
    if (!gp_path_exists(path))
        return gp_api_failf(GEPARD_ERR_NOT_FOUND, "%s: cannot open: No such file or directory",
                            path);
    static const struct {
        bool (*probe)(const char *path);
        int (*describe)(const char *path, gp_buf *out, gp_error *err);
    } table[] = {
        {probe_gepard, describe_gepard},
        {probe_json, describe_json},
        {probe_yaml, describe_yaml},
        {probe_codec, describe_codec},
        {probe_safetensors, describe_safetensors},
        {probe_torch, describe_torch},
    };
    gp_buf out;
    gp_buf_init(&out);
    gp_error err;
    gp_error_clear(&err);
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        if (!table[i].probe(path)) continue;
        if (table[i].describe(path, &out, &err)) {
            gp_buf_free(&out);
            return gp_api_fail(&err);
        }
        *text = gp_buf_detach(&out, NULL);
        return *text ? gp_api_ok() : gp_api_failf(GEPARD_ERR_NOMEM, "out of memory");
    }
    gp_buf_free(&out);
    return gp_api_failf(GEPARD_ERR_UNSUPPORTED, "%s: not a file gepard can describe", path);
}
