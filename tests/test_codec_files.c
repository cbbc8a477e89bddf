/* test_codec_files.c — the codec loads from every container and weight-norm spelling
 * (built here from the fixture) with identical output, and refuses broken files with
 * specific messages. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/dtype.h"
#include "codec/codec.h"
#include "io/nemo.h"
#include "io/safetensors.h"
#include "io/torch.h"
#include "test.h"
#include "torch_writer.h"

#define CODEC_FIXTURE "codec-tiny/nano-tiny.nemo"

typedef struct fixture_parts {
    gp_nemo nemo;
    gp_torch_file *torch;
} fixture_parts;

static int load_parts(fixture_parts *p, gp_error *err) {
    memset(p, 0, sizeof *p);
    int rc = gp_nemo_read(test_fixture(CODEC_FIXTURE), &p->nemo, err);
    if (rc == 0)
        rc = gp_torch_open_memory(p->nemo.weights, p->nemo.weights_size, "fixture", &p->torch, err);
    return rc;
}

static void free_parts(fixture_parts *p) {
    gp_torch_close(p->torch);
    gp_nemo_free(&p->nemo);
}

/* Decode 4 fixed frames with the codec at `path` into pcm (4096 samples). */
static int decode_probe(const char *path, float *pcm, gp_error *err) {
    gp_codec *codec;
    int rc = gp_codec_load(path, NULL, &codec, err);
    if (rc) return rc;
    int32_t codes[4 * 32];
    for (int i = 0; i < 4 * 32; i++) codes[i] = (i * 7 + 3) % gp_fsq_levels(&codec->fsq, i % 32);
    rc = gp_codec_decode(codec, codes, 4, pcm, err);
    gp_codec_free(codec);
    return rc;
}

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* Replace `from` at the end of name by `to`; false if it does not end with it. */
static bool rename_suffix(const char *name, const char *from, const char *to, char *out,
                          size_t size) {
    if (!ends_with(name, from)) return false;
    snprintf(out, size, "%.*s%s", (int)(strlen(name) - strlen(from)), name, to);
    return true;
}

/* Write the fixture's state dict as a torch checkpoint, renaming weight-norm keys to
 * weight_g / weight_v. */
static void build_old_style_ckpt(const gp_torch_file *t, gp_buf *out) {
    tw_tensor *tt = calloc(t->count, sizeof *tt);
    tw_record *st = calloc(t->count, sizeof *st);
    char(*names)[256] = calloc(t->count, sizeof *names);
    char(*keys)[16] = calloc(t->count, sizeof *keys);
    for (size_t i = 0; i < t->count; i++) {
        const gp_torch_tensor *x = &t->tensors[i];
        if (!rename_suffix(x->name, "parametrizations.weight.original0", "weight_g", names[i],
                           256) &&
            !rename_suffix(x->name, "parametrizations.weight.original1", "weight_v", names[i], 256))
            snprintf(names[i], 256, "%s", x->name);
        snprintf(keys[i], 16, "%zu", i);
        tt[i] = (tw_tensor){names[i], x->dtype == GP_I32 ? "IntStorage" : "FloatStorage",
                            keys[i],  (int64_t)x->numel,
                            0,        x->ndim,
                            {0},      {0}};
        int64_t stride = 1;
        for (int d = x->ndim - 1; d >= 0; d--) {
            tt[i].shape[d] = x->shape[d];
            tt[i].stride[d] = stride;
            stride *= x->shape[d];
        }
        st[i] = (tw_record){keys[i], x->data, x->nbytes};
    }
    gp_buf pk;
    gp_buf_init(&pk);
    tw_pickle_state_dict(tt, (int)t->count, &pk);
    /* tw_checkpoint handles at most 256 storages: write the zip directly here */
    tw_record *recs = calloc(t->count + 3, sizeof *recs);
    char(*rn)[64] = calloc(t->count, sizeof *rn);
    int k = 0;
    recs[k++] = (tw_record){"model_weights/data.pkl", pk.data, pk.len};
    recs[k++] = (tw_record){"model_weights/byteorder", "little", 6};
    for (size_t i = 0; i < t->count; i++) {
        snprintf(rn[i], 64, "model_weights/data/%s", keys[i]);
        recs[k++] = (tw_record){rn[i], st[i].data, st[i].size};
    }
    tw_zip(recs, k, out);
    free(recs);
    free(rn);
    gp_buf_free(&pk);
    free(tt);
    free(st);
    free(names);
    free(keys);
}

TEST(codec_container_and_spelling_variants) {
    gp_error err;
    fixture_parts p;
    REQUIRE_OK(load_parts(&p, &err), &err);
    float ref[4096], got[4096];
    REQUIRE_OK(decode_probe(test_fixture(CODEC_FIXTURE), ref, &err), &err);

    /* 1. gzip-compressed tar, extra members, another order, no "./" prefix. */
    const char *readme = "artifacts";
    tw_record gz[] = {{"./artifacts/readme.txt", readme, strlen(readme)},
                      {"model_weights.ckpt", p.nemo.weights, p.nemo.weights_size},
                      {"./model_config.yaml", p.nemo.config, p.nemo.config_size}};
    const char *gz_path = test_tmp("gzip.nemo");
    REQUIRE(tw_tar(gz_path, gz, 3, 1) == 0);
    REQUIRE_OK(decode_probe(gz_path, got, &err), &err);
    CHECK(memcmp(got, ref, sizeof ref) == 0);

    /* 2. weight_g / weight_v spelling in a hand-written torch zip inside a plain tar. */
    gp_buf old;
    gp_buf_init(&old);
    build_old_style_ckpt(p.torch, &old);
    tw_record plain[] = {{"./model_config.yaml", p.nemo.config, p.nemo.config_size},
                         {"./model_weights.ckpt", old.data, old.len}};
    const char *old_path = test_tmp("old-style.nemo");
    REQUIRE(tw_tar(old_path, plain, 2, 0) == 0);
    REQUIRE_OK(decode_probe(old_path, got, &err), &err);
    CHECK(memcmp(got, ref, sizeof ref) == 0);
    /* ... and the same checkpoint as a .ckpt file with the config beside it. */
    const char *dir = test_tmp("ckptdir");
    char path[1024];
    REQUIRE(gp_make_dirs(dir, &err) == 0);
    snprintf(path, sizeof path, "%s/model_config.yaml", dir);
    REQUIRE(test_write_file(path, p.nemo.config, p.nemo.config_size) == 0);
    snprintf(path, sizeof path, "%s/weights.ckpt", dir);
    REQUIRE(test_write_file(path, old.data, old.len) == 0);
    REQUIRE_OK(decode_probe(path, got, &err), &err);
    CHECK(memcmp(got, ref, sizeof ref) == 0);
    gp_buf_free(&old);

    /* 3. the original keys as safetensors + model_config.yaml beside it. */
    gp_st_writer *w = gp_st_writer_create();
    for (size_t i = 0; i < p.torch->count; i++) {
        const gp_torch_tensor *x = &p.torch->tensors[i];
        REQUIRE_OK(gp_st_writer_add(w, x->name, x->dtype, x->ndim, x->shape, x->data, &err), &err);
    }
    const char *st_dir = test_tmp("stdir");
    REQUIRE(gp_make_dirs(st_dir, &err) == 0);
    snprintf(path, sizeof path, "%s/model_config.yaml", st_dir);
    REQUIRE(test_write_file(path, p.nemo.config, p.nemo.config_size) == 0);
    snprintf(path, sizeof path, "%s/nano.safetensors", st_dir);
    REQUIRE_OK(gp_st_writer_write(w, path, &err), &err);
    gp_st_writer_free(w);
    REQUIRE_OK(decode_probe(path, got, &err), &err);
    CHECK(memcmp(got, ref, sizeof ref) == 0);

    /* 4. folded `weight` keys (folded here exactly as the loader folds), in a directory
     *    holding model_config.yaml + model_weights.safetensors. */
    w = gp_st_writer_create();
    for (size_t i = 0; i < p.torch->count; i++) {
        const gp_torch_tensor *x = &p.torch->tensors[i];
        char name[256];
        if (rename_suffix(x->name, "parametrizations.weight.original0", "", name, sizeof name))
            continue; /* g: folded into the weight */
        if (!rename_suffix(x->name, "parametrizations.weight.original1", "weight", name,
                           sizeof name)) {
            REQUIRE_OK(gp_st_writer_add(w, x->name, x->dtype, x->ndim, x->shape, x->data, &err),
                       &err);
            continue;
        }
        char gname[256];
        rename_suffix(x->name, "original1", "original0", gname, sizeof gname);
        const gp_torch_tensor *g = gp_torch_find(p.torch, gname);
        REQUIRE(g);
        size_t rows = (size_t)x->shape[0], row = x->numel / rows;
        float *folded = malloc(x->numel * sizeof(float));
        const float *v = x->data, *gv = g->data;
        for (size_t a = 0; a < rows; a++) {
            double sum = 0;
            for (size_t j = 0; j < row; j++) sum += (double)v[a * row + j] * v[a * row + j];
            float scale = gv[a] / (float)sqrt(sum);
            for (size_t j = 0; j < row; j++) folded[a * row + j] = v[a * row + j] * scale;
        }
        REQUIRE_OK(gp_st_writer_add_copy(w, name, GP_F32, x->ndim, x->shape, folded, &err), &err);
        free(folded);
    }
    const char *fold_dir = test_tmp("folded");
    REQUIRE(gp_make_dirs(fold_dir, &err) == 0);
    snprintf(path, sizeof path, "%s/model_config.yaml", fold_dir);
    REQUIRE(test_write_file(path, p.nemo.config, p.nemo.config_size) == 0);
    snprintf(path, sizeof path, "%s/model_weights.safetensors", fold_dir);
    REQUIRE_OK(gp_st_writer_write(w, path, &err), &err);
    gp_st_writer_free(w);
    REQUIRE_OK(decode_probe(fold_dir, got, &err), &err);
    CHECK(memcmp(got, ref, sizeof ref) == 0);
    free_parts(&p);
}

/* Write a .nemo from the fixture with the config text replaced by `yaml`. */
static const char *nemo_with_config(const fixture_parts *p, const char *yaml, const char *name) {
    tw_record m[] = {{"./model_config.yaml", yaml, strlen(yaml)},
                     {"./model_weights.ckpt", p->nemo.weights, p->nemo.weights_size}};
    const char *path = test_tmp(name);
    return tw_tar(path, m, 2, 0) == 0 ? path : NULL;
}

/* The fixture config with the first occurrence of `from` replaced by `to`. */
static char *config_edit(const fixture_parts *p, const char *from, const char *to) {
    const char *at = strstr(p->nemo.config, from);
    if (!at) return NULL;
    size_t n = p->nemo.config_size + strlen(to) + 1;
    char *s = malloc(n);
    snprintf(s, n, "%.*s%s%s", (int)(at - p->nemo.config), p->nemo.config, to, at + strlen(from));
    return s;
}

TEST(codec_refuses_broken_files) {
    gp_error err;
    fixture_parts p;
    REQUIRE_OK(load_parts(&p, &err), &err);
    gp_codec *c = NULL;
    /* tar without model_config.yaml */
    tw_record only[] = {{"./model_weights.ckpt", p.nemo.weights, p.nemo.weights_size}};
    const char *path = test_tmp("noconfig.nemo");
    REQUIRE(tw_tar(path, only, 1, 0) == 0);
    CHECK_ERR_CONTAINS(gp_codec_load(path, NULL, &c, &err), &err,
                       "has no model_config.yaml member");
    /* truncated .nemo (cut inside the checkpoint) */
    char *bytes;
    size_t len;
    REQUIRE_OK(gp_read_file(test_fixture(CODEC_FIXTURE), 0, &bytes, &len, &err), &err);
    path = test_tmp("truncated.nemo");
    REQUIRE(test_write_file(path, bytes, len / 2) == 0);
    CHECK_ERR_CONTAINS(gp_codec_load(path, NULL, &c, &err), &err, "truncated");
    free(bytes);
    /* truncated zip inside an intact tar */
    tw_record cut[] = {{"./model_config.yaml", p.nemo.config, p.nemo.config_size},
                       {"./model_weights.ckpt", p.nemo.weights, p.nemo.weights_size - 100}};
    path = test_tmp("cutzip.nemo");
    REQUIRE(tw_tar(path, cut, 2, 0) == 0);
    CHECK_ERR_CONTAINS(gp_codec_load(path, NULL, &c, &err), &err, "end-of-central-directory");
    /* not an archive at all */
    path = test_tmp("garbage.nemo");
    REQUIRE(test_write_file(path, "this is not a tar archive at all, sorry.", 40) == 0);
    CHECK_ERR_CONTAINS(gp_codec_load(path, NULL, &c, &err), &err, "not a tar archive");
    CHECK_ERR_CONTAINS(gp_codec_load("/nonexistent/nano.nemo", NULL, &c, &err), &err,
                       "No such file");
    /* YAML inconsistent with the tensors */
    char *yaml = config_edit(&p, "base_channels: 96", "base_channels: 64");
    REQUIRE(yaml);
    path = nemo_with_config(&p, yaml, "bad-width.nemo");
    CHECK_ERR_CONTAINS(gp_codec_load(path, NULL, &c, &err), &err,
                       "audio_decoder.pre_conv.conv.parametrizations.weight.original1 has shape "
                       "[96, 32, 7], expected [64, 32, 7]");
    CHECK(strstr(err.message, "base_channels 64") != NULL);
    free(yaml);
    yaml = config_edit(&p, "up_sample_rates: [8, 8, 4, 2, 2]", "up_sample_rates: [8, 8, 4, 2]");
    path = nemo_with_config(&p, yaml, "bad-rates.nemo");
    CHECK_ERR_CONTAINS(gp_codec_load(path, NULL, &c, &err), &err, "must agree");
    free(yaml);
    yaml = config_edit(&p, "output_activation: clamp", "output_activation: sigmoid");
    path = nemo_with_config(&p, yaml, "bad-act.nemo");
    CHECK_ERR_CONTAINS(gp_codec_load(path, NULL, &c, &err), &err,
                       "audio_decoder.output_activation is \"sigmoid\"");
    free(yaml);
    yaml = config_edit(&p, "base_channels: 96", "base_channels: [1, 2]");
    path = nemo_with_config(&p, yaml, "bad-type.nemo");
    CHECK_ERR_CONTAINS(gp_codec_load(path, NULL, &c, &err), &err,
                       "audio_decoder.base_channels: expected an integer");
    free(yaml);
    yaml =
        config_edit(&p, "num_levels_per_group: [8, 7, 6, 6]", "num_levels_per_group: [8, 7, 6, 5]");
    path = nemo_with_config(&p, yaml, "bad-levels.nemo");
    CHECK_ERR_CONTAINS(gp_codec_load(path, NULL, &c, &err), &err, "num_levels");
    free(yaml);
    path = nemo_with_config(&p, "sample_rate: [unclosed\n", "bad-yaml.nemo");
    CHECK_ERR_CONTAINS(gp_codec_load(path, NULL, &c, &err), &err, "malformed YAML");
    free_parts(&p);
}

TEST(codec_yaml_defaults_and_model_section) {
    /* A config nested under `model:` with the NeMo defaults left out parses like the full
     * one (defaults: kernels 7/3, resblocks [3,7,11]x[1,3,5], groups = out channels). */
    const char *text = "model:\n  sample_rate: 22050\n  samples_per_frame: 1024\n"
                       "  audio_decoder:\n    _target_: x.CausalHiFiGANDecoder\n"
                       "    up_sample_rates: [8, 8, 4, 2, 2]\n    input_dim: 32\n"
                       "    base_channels: 96\n    activation: half_snake\n"
                       "    output_activation: clamp\n"
                       "  audio_encoder:\n    _target_: x.HiFiGANEncoder\n"
                       "    down_sample_rates: [2, 2, 4, 8, 8]\n    encoded_dim: 32\n"
                       "    base_channels: 4\n    pad_mode: replicate\n"
                       "  vector_quantizer:\n    _target_: x.GroupFiniteScalarQuantizer\n"
                       "    num_groups: 8\n    num_levels_per_group:\n    - 8\n    - 7\n"
                       "    - 6\n    - 6\n";
    gp_yaml_doc *doc;
    gp_error err;
    REQUIRE_OK(gp_yaml_parse(text, strlen(text), "nested.yaml", &doc, &err), &err);
    gp_codec_config cfg;
    REQUIRE_OK(gp_codec_config_parse(doc, &cfg, &err), &err);
    CHECK_EQ_INT(cfg.dec.in_kernel, 7);
    CHECK_EQ_INT(cfg.dec.out_kernel, 3);
    CHECK_EQ_INT(cfg.dec.res.n_kernels, 3);
    CHECK_EQ_INT(cfg.dec.res.dilations[2], 5);
    CHECK(cfg.dec.groups_equal_out);
    CHECK_EQ_INT(cfg.fsq.levels[3], 6);
    CHECK(cfg.fsq.eps == 1e-3);
    CHECK(cfg.enc.pad_mode == GP_PAD_REPLICATE && !cfg.enc.causal);
    gp_yaml_free(doc);
    const char *alias = "a: &x 1\nb: *x\n";
    CHECK_ERR_CONTAINS(gp_yaml_parse(alias, strlen(alias), "alias.yaml", &doc, &err), &err,
                       "aliases");
}

TEST(codec_refuses_zero_weight_norm) {
    gp_error err;
    fixture_parts p;
    REQUIRE_OK(load_parts(&p, &err), &err);
    const char *victim = "audio_decoder.post_conv.conv.parametrizations.weight.original1";
    gp_st_writer *w = gp_st_writer_create(); /* the state dict, one weight zeroed */
    for (size_t i = 0; i < p.torch->count; i++) {
        const gp_torch_tensor *x = &p.torch->tensors[i];
        const void *data = x->data;
        void *zeros = NULL;
        if (strcmp(x->name, victim) == 0) data = zeros = calloc(1, x->nbytes);
        REQUIRE_OK(gp_st_writer_add_copy(w, x->name, x->dtype, x->ndim, x->shape, data, &err),
                   &err);
        free(zeros);
    }
    const char *dir = test_tmp("zero");
    char path[1024];
    REQUIRE(gp_make_dirs(dir, &err) == 0);
    snprintf(path, sizeof path, "%s/model_config.yaml", dir);
    REQUIRE(test_write_file(path, p.nemo.config, p.nemo.config_size) == 0);
    snprintf(path, sizeof path, "%s/model_weights.safetensors", dir);
    REQUIRE_OK(gp_st_writer_write(w, path, &err), &err);
    gp_st_writer_free(w);
    gp_codec *c = NULL;
    CHECK_ERR_CONTAINS(gp_codec_load(dir, NULL, &c, &err), &err, "all-zero");
    CHECK(strstr(err.message, victim) != NULL);
    free_parts(&p);
}
