/* test_codec_cli.c — the public codec API (gepard.h) and the `gepard decode / encode /
 * info` commands on the codec-tiny fixture, including their error messages and exit
 * codes. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "gepard.h"
#include "io/audio_file.h"
#include "io/file.h"
#include "io/safetensors.h"
#include "test.h"

#define CODEC_FIXTURE "codec-tiny/nano-tiny.nemo"
#define GOLDEN_FIXTURE "codec-tiny/golden.safetensors"

/* Golden codes [C][T] -> frame-major, and the pcm. */
static int32_t *golden_codes(const gp_st_file *g, const char *name, size_t *T) {
    const gp_st_tensor *t = gp_st_find(g, name);
    if (!t) return NULL;
    size_t C = (size_t)t->shape[0];
    *T = (size_t)t->shape[1];
    const int32_t *cm = t->data;
    int32_t *fm = malloc(C * *T * sizeof(int32_t));
    for (size_t c = 0; c < C; c++)
        for (size_t f = 0; f < *T; f++) fm[f * C + c] = cm[c * *T + f];
    return fm;
}

static void write_codes_json(const char *path, const int32_t *codes, size_t T, int C) {
    gp_buf b;
    gp_buf_init(&b);
    gp_buf_printf(&b, "{\"frames\":%zu,\"codes\":[", T);
    for (size_t t = 0; t < T; t++) {
        gp_buf_append_str(&b, t ? ",[" : "[");
        for (int c = 0; c < C; c++) gp_buf_printf(&b, "%s%d", c ? "," : "", codes[t * C + c]);
        gp_buf_append_str(&b, "]");
    }
    gp_buf_append_str(&b, "]}");
    test_write_file(path, b.data, b.len);
    gp_buf_free(&b);
}

TEST(codec_public_api) {
    gepard_codec *codec;
    REQUIRE(gepard_codec_load(test_fixture(CODEC_FIXTURE), &codec) == GEPARD_OK);
    CHECK_EQ_INT(gepard_codec_sample_rate(codec), 22050);
    CHECK_EQ_INT(gepard_codec_samples_per_frame(codec), 1024);
    CHECK_EQ_INT(gepard_codec_num_codebooks(codec), 32);
    CHECK_EQ_INT(gepard_codec_num_groups(codec), 8);
    CHECK_EQ_INT(gepard_codec_codebook_size(codec, 1), 7);
    gp_st_file *g;
    gp_error err;
    REQUIRE_OK(gp_st_open(test_fixture(GOLDEN_FIXTURE), &g, &err), &err);
    size_t T;
    int32_t *codes = golden_codes(g, "dec5.codes", &T);
    float *pcm = NULL;
    size_t n = 0;
    REQUIRE(gepard_codec_decode(codec, codes, T, &pcm, &n) == GEPARD_OK);
    REQUIRE(n == T * 1024);
    double e = test_max_abs_diff(pcm, gp_st_find(g, "dec5.pcm")->data, n);
    test_note("API dec5: max abs error %.3g (tolerance 1e-4)", e);
    CHECK(e <= 1e-4);
    /* streaming through the API, frame by frame, from codes and from latents */
    gepard_codec_stream *s;
    REQUIRE(gepard_codec_stream_create(codec, &s) == GEPARD_OK);
    float *part = malloc(n * sizeof(float));
    for (size_t f = 0; f < T; f++)
        REQUIRE(gepard_codec_stream_push(s, codes + f * 32, 1, part + f * 1024) == GEPARD_OK);
    CHECK(memcmp(part, pcm, n * sizeof(float)) == 0);
    gepard_codec_stream_reset(s);
    const float *lat_cm = gp_st_find(g, "dec5.latent")->data;
    float *lat = malloc(T * 32 * sizeof(float));
    for (size_t c = 0; c < 32; c++)
        for (size_t f = 0; f < T; f++) lat[f * 32 + c] = lat_cm[c * T + f];
    REQUIRE(gepard_codec_stream_push_latent(s, lat, 2, part) == GEPARD_OK);
    REQUIRE(gepard_codec_stream_push_latent(s, lat + 64, T - 2, part + 2048) == GEPARD_OK);
    CHECK(memcmp(part, pcm, n * sizeof(float)) == 0);
    codes[3] = 9; /* codebook 3 has 6 levels */
    CHECK(gepard_codec_stream_push(s, codes, 1, part) == GEPARD_ERR_INVALID_ARGUMENT);
    CHECK(strstr(gepard_last_error(), "code 9 at frame 0, channel 3 is out of range") != NULL);
    gepard_codec_stream_free(s);
    /* encode through the API */
    const gp_st_tensor *audio = gp_st_find(g, "enc28000.audio");
    int32_t *k = NULL, *packed = NULL;
    float *latent = NULL;
    size_t frames;
    REQUIRE(gepard_codec_encode(codec, audio->data, audio->numel, &k, &frames, &packed, &latent) ==
            GEPARD_OK);
    size_t T2;
    int32_t *ref = golden_codes(g, "enc28000.codes", &T2),
            *refp = golden_codes(g, "enc28000.packed", &T2);
    REQUIRE(frames == T2);
    int diff = 0, pdiff = 0;
    for (size_t i = 0; i < frames * 32; i++) diff += k[i] != ref[i];
    for (size_t i = 0; i < frames * 8; i++) pdiff += packed[i] != refp[i];
    test_note("API encode: %d of %zu codes and %d packed indices differ from the golden", diff,
              frames * 32, pdiff);
    CHECK(diff == 0 && pdiff == 0); /* no golden value of this case lies on a rounding tie */
    gepard_free(k);
    gepard_free(packed);
    gepard_free(latent);
    gepard_free(pcm);
    free(ref);
    free(refp);
    free(part);
    free(lat);
    free(codes);
    gp_st_close(g);
    gepard_codec_free(codec);
    CHECK(gepard_codec_load("/nonexistent.nemo", &codec) == GEPARD_ERR_NOT_FOUND);
    CHECK(strstr(gepard_last_error(), "No such file") != NULL);
}

/* A decode-only codec (gepard_codec_params.no_encoder) decodes the same
 * samples and refuses to encode with a message that says why. */
TEST(codec_without_encoder_decodes_and_refuses_to_encode) {
    gepard_codec_params p = gepard_codec_default_params();
    p.no_encoder = 1;
    gepard_codec *full, *dec_only;
    REQUIRE(gepard_codec_load(test_fixture(CODEC_FIXTURE), &full) == GEPARD_OK);
    REQUIRE(gepard_codec_load_with_params(test_fixture(CODEC_FIXTURE), &p, &dec_only) == GEPARD_OK);
    gp_st_file *g;
    gp_error err;
    REQUIRE_OK(gp_st_open(test_fixture(GOLDEN_FIXTURE), &g, &err), &err);
    size_t T;
    int32_t *codes = golden_codes(g, "dec5.codes", &T);
    float *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    REQUIRE(gepard_codec_decode(full, codes, T, &a, &na) == GEPARD_OK);
    REQUIRE(gepard_codec_decode(dec_only, codes, T, &b, &nb) == GEPARD_OK);
    CHECK(na == nb && memcmp(a, b, na * sizeof(float)) == 0);
    const gp_st_tensor *audio = gp_st_find(g, "enc28000.audio");
    int32_t *k = NULL;
    size_t frames = 0;
    CHECK_EQ_INT(gepard_codec_encode(dec_only, audio->data, audio->numel, &k, &frames, NULL, NULL),
                 GEPARD_ERR_INVALID_ARGUMENT);
    test_note("%s", gepard_last_error());
    CHECK(strstr(gepard_last_error(), "without its encoder") != NULL && k == NULL);
    gepard_free(a);
    gepard_free(b);
    free(codes);
    gp_st_close(g);
    gepard_codec_free(full);
    gepard_codec_free(dec_only);
}

static int run(test_cmd_result *r, const char *const *args) {
    return test_run_gepard(r, NULL, 0, 120, args);
}

TEST(codec_cli_decode) {
    gp_st_file *g;
    gp_error err;
    REQUIRE_OK(gp_st_open(test_fixture(GOLDEN_FIXTURE), &g, &err), &err);
    size_t T;
    int32_t *codes = golden_codes(g, "dec5.codes", &T);
    const float *golden = gp_st_find(g, "dec5.pcm")->data;
    const char *json = test_tmp("codes.json"), *f32 = test_tmp("out.f32"),
               *wav = test_tmp("out.wav");
    write_codes_json(json, codes, T, 32);
    test_cmd_result r;
    const char *a1[] = {
        "decode", "--codec", test_fixture(CODEC_FIXTURE), "--codes", json, "-o", f32, "--threads",
        "2",      NULL};
    REQUIRE(run(&r, a1) == 0);
    CHECK_MSG(r.status == 0, "decode failed: %s", r.err);
    test_cmd_result_free(&r);
    char *data;
    size_t len;
    REQUIRE_OK(gp_read_file(f32, 0, &data, &len, &err), &err);
    REQUIRE(len == T * 1024 * 4);
    double e = test_max_abs_diff((const float *)data, golden, T * 1024);
    test_note("CLI dec5 .f32: max abs error %.3g (tolerance 1e-4)", e);
    CHECK(e <= 1e-4);
    /* stdout gives the same bytes */
    const char *a2[] = {
        "decode", "-c", test_fixture(CODEC_FIXTURE), "--codes", json, "-o", "-", "--threads",
        "2",      NULL};
    REQUIRE(run(&r, a2) == 0);
    CHECK(r.status == 0 && r.out_len == len && memcmp(r.out, data, len) == 0);
    test_cmd_result_free(&r);
    /* 16-bit and float WAV */
    const char *a3[] = {"decode", "-c", test_fixture(CODEC_FIXTURE), "--codes", json, "-o",
                        wav,      NULL};
    REQUIRE(run(&r, a3) == 0);
    CHECK(r.status == 0);
    test_cmd_result_free(&r);
    gp_audio audio;
    REQUIRE_OK(gp_audio_read(wav, &audio, &err), &err);
    CHECK(audio.sample_rate == 22050 && audio.channels == 1 && audio.frames == T * 1024);
    CHECK(test_max_abs_diff(audio.samples, golden, T * 1024) <= 1.0 / 32768 + 1e-4);
    gp_audio_free(&audio);
    const char *a4[] = {"decode",  "-c", test_fixture(CODEC_FIXTURE), "--codes", json, "-o", wav,
                        "--float", NULL};
    REQUIRE(run(&r, a4) == 0);
    test_cmd_result_free(&r);
    REQUIRE_OK(gp_audio_read(wav, &audio, &err), &err);
    CHECK(test_max_abs_diff(audio.samples, (const float *)data, T * 1024) == 0);
    gp_audio_free(&audio);
    free(data);
    /* out-of-range code: exit 1, a message, and no output file */
    codes[2 * 32 + 4] = 8; /* codebook 4 has 8 levels: 0..7 */
    write_codes_json(json, codes, T, 32);
    const char *bad_out = test_tmp("bad.wav");
    const char *a5[] = {"decode", "-c", test_fixture(CODEC_FIXTURE), "--codes", json, "-o",
                        bad_out,  NULL};
    REQUIRE(run(&r, a5) == 0);
    CHECK_EQ_INT(r.status, 1);
    CHECK_MSG(strstr(r.err, "gepard: error:") && strstr(r.err, "code 8 at frame 2, channel 4"),
              "stderr: %s", r.err);
    CHECK(!gp_path_exists(bad_out));
    test_cmd_result_free(&r);
    /* malformed codes files */
    test_write_file(json, "{\"frames\":3,\"codes\":[[1,2]]}", 28);
    REQUIRE(run(&r, a5) == 0);
    CHECK(r.status == 1 && strstr(r.err, "\"frames\" says 3 but \"codes\" holds 1"));
    test_cmd_result_free(&r);
    test_write_file(json, "{\"codes\":[[1,2]]}", 17);
    REQUIRE(run(&r, a5) == 0);
    CHECK(r.status == 1 && strstr(r.err, "frame 0 must be an array of 32 codes"));
    test_cmd_result_free(&r);
    /* usage errors exit 2 */
    const char *a6[] = {"decode", "--codes", json, NULL};
    REQUIRE(run(&r, a6) == 0);
    CHECK_EQ_INT(r.status, 2);
    test_cmd_result_free(&r);
    const char *a7[] = {"decode", "-c", "/nonexistent.nemo", "--codes", json, "-o", f32, NULL};
    REQUIRE(run(&r, a7) == 0);
    CHECK(r.status == 1 && strstr(r.err, "No such file"));
    test_cmd_result_free(&r);
    free(codes);
    gp_st_close(g);
}

TEST(codec_cli_encode) {
    gp_st_file *g;
    gp_error err;
    REQUIRE_OK(gp_st_open(test_fixture(GOLDEN_FIXTURE), &g, &err), &err);
    const gp_st_tensor *audio = gp_st_find(g, "enc28000.audio");
    size_t T;
    int32_t *ref = golden_codes(g, "enc28000.codes", &T);
    const char *f32 = test_tmp("in.f32"), *wav = test_tmp("in.wav");
    REQUIRE_OK(gp_audio_write_f32(f32, audio->data, audio->numel, &err), &err);
    REQUIRE_OK(gp_audio_write_wav(wav, audio->data, audio->numel, 1, 22050, true, &err), &err);
    const char *inputs[] = {f32, wav};
    for (int i = 0; i < 2; i++) {
        test_cmd_result r;
        const char *a[] = {"encode", "--codec", test_fixture(CODEC_FIXTURE), "-i", inputs[i], NULL};
        REQUIRE(run(&r, a) == 0);
        CHECK_MSG(r.status == 0, "encode failed: %s", r.err);
        cJSON *root = cJSON_Parse(r.out);
        REQUIRE(root);
        const cJSON *codes = cJSON_GetObjectItem(root, "codes");
        CHECK(cJSON_GetObjectItem(root, "frames")->valueint == (int)T);
        CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(root, "packed")) == (int)T);
        int diff = 0;
        for (size_t t = 0; t < T; t++)
            for (int c = 0; c < 32; c++)
                diff += cJSON_GetArrayItem(cJSON_GetArrayItem(codes, (int)t), c)->valueint !=
                        ref[t * 32 + c];
        test_note("CLI encode (%s): %d codes differ from the golden", inputs[i], diff);
        CHECK_EQ_INT(diff, 0);
        cJSON_Delete(root);
        test_cmd_result_free(&r);
    }
    /* wrong rate, stereo, garbage, truncated */
    const char *rate = test_tmp("16k.wav"), *stereo = test_tmp("stereo.wav"),
               *junk = test_tmp("junk.wav"), *cut = test_tmp("cut.wav");
    REQUIRE_OK(gp_audio_write_wav(rate, audio->data, 16000, 1, 16000, false, &err), &err);
    REQUIRE_OK(gp_audio_write_wav(stereo, audio->data, 8000, 2, 22050, false, &err), &err);
    test_write_file(junk, "RIFF\x10\0\0\0WAVEjunkjunkjunk", 20);
    char *bytes;
    size_t len;
    REQUIRE_OK(gp_read_file(wav, 0, &bytes, &len, &err), &err);
    test_write_file(cut, bytes, len / 2);
    free(bytes);
    const struct {
        const char *path, *needle;
    } bad[] = {{rate, "sample rate is 16000 Hz but the codec needs 22050 Hz"},
               {stereo, "has 2 channels"},
               {junk, "not a readable audio file"},
               {cut, "truncated"},
               {"/nonexistent.wav", "No such file"}};
    for (int i = 0; i < 5; i++) {
        test_cmd_result r;
        const char *a[] = {"encode", "-c", test_fixture(CODEC_FIXTURE), "-i", bad[i].path, NULL};
        REQUIRE(run(&r, a) == 0);
        CHECK_MSG(r.status == 1 && strstr(r.err, bad[i].needle), "%s: status %d, stderr: %s",
                  bad[i].path, r.status, r.err);
        test_cmd_result_free(&r);
    }
    free(ref);
    gp_st_close(g);
}

TEST(codec_cli_info) {
    test_cmd_result r;
    const char *a[] = {"info", test_fixture(CODEC_FIXTURE), NULL};
    REQUIRE(run(&r, a) == 0);
    CHECK(r.status == 0);
    CHECK_MSG(strstr(r.out, "base_channels 96") && strstr(r.out, "tensors: 695") &&
                  strstr(r.out, "F32 x679 I32 x16") && strstr(r.out, "pad_mode replicate"),
              "%s", r.out);
    test_cmd_result_free(&r);
    const char *b[] = {"info", test_fixture(GOLDEN_FIXTURE), NULL};
    REQUIRE(run(&r, b) == 0);
    CHECK(r.status == 0 && strstr(r.out, "safetensors") && strstr(r.out, "tensors: 11"));
    test_cmd_result_free(&r);
    const char *c[] = {"info", "/nonexistent", NULL};
    REQUIRE(run(&r, c) == 0);
    CHECK(r.status == 1 && strstr(r.err, "No such file"));
    test_cmd_result_free(&r);
}
