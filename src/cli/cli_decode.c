/* cli_decode.c — `gepard decode`: codec codes (JSON) to audio (.wav, raw .f32 or stdout). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/cli_codec.h"
#include "gepard.h"
#include "io/audio_file.h"
#include "io/file.h"
#include "io/json.h"

static const cli_option decode_options[] = {
    {"codec", 'c', "FILE", "NanoCodec: .nemo archive, or state dict + model_config.yaml"},
    {"codes", 0, "FILE", "codes JSON {\"frames\":T,\"codes\":[[...],...]} (frame-major)"},
    {"output", 'o', "OUT", "OUT.wav (22.05 kHz mono), OUT.f32 (raw float32) or - (stdout)"},
    {"float", 0, NULL, "write 32-bit float WAV instead of 16-bit PCM"},
    {"threads", 't', "N", "threads for the decoder (default: all CPUs)"},
    {"reference", 0, NULL, "use the slow reference kernels (for checking; on the CPU)"},
    {"device", 0, "DEV", "cpu, cuda, cuda:N or auto (default: a GPU when one is usable)"},
    {"gpu-precision", 0, "P", "GPU arithmetic: f16 (default), tf32 or f32"},
};

#define N_DECODE_OPTIONS ((int)(sizeof decode_options / sizeof decode_options[0]))

/* Parse and validate the codes file into [T][C]. */
static int read_codes_json(const char *path, int C, int32_t **codes, size_t *frames) {
    cJSON *root;
    gp_error err;
    gp_error_clear(&err);
    if (gp_json_load_file(path, (size_t)1 << 30, &root, &err))
        return cli_runtime_error("%s", err.message);
    int rc = CLI_EXIT_RUNTIME;
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(root, "codes");
    const cJSON *fr = cJSON_GetObjectItemCaseSensitive(root, "frames");
    *codes = NULL;
    if (!cJSON_IsObject(root) || !cJSON_IsArray(list)) {
        cli_runtime_error("%s: expected an object with a \"codes\" array of frames", path);
        goto done;
    }
    size_t T = (size_t)cJSON_GetArraySize(list);
    if (fr && (!gp_json_is_integer(fr) || fr->valuedouble != (double)T)) {
        cli_runtime_error("%s: \"frames\" says %g but \"codes\" holds %zu frames", path,
                          cJSON_IsNumber(fr) ? fr->valuedouble : -1.0, T);
        goto done;
    }
    if (T == 0) {
        cli_runtime_error("%s: \"codes\" is empty — nothing to decode", path);
        goto done;
    }
    *codes = malloc(T * (size_t)C * sizeof(int32_t));
    if (!*codes) {
        cli_runtime_error("out of memory for %zu frames", T);
        goto done;
    }
    size_t t = 0;
    const cJSON *row;
    cJSON_ArrayForEach(row, list) {
        if (!cJSON_IsArray(row) || cJSON_GetArraySize(row) != C) {
            cli_runtime_error("%s: frame %zu must be an array of %d codes (one per codebook)", path,
                              t, C);
            goto done;
        }
        int c = 0;
        const cJSON *v;
        cJSON_ArrayForEach(v, row) {
            if (!gp_json_is_integer(v) || v->valuedouble < -2147483648.0 ||
                v->valuedouble > 2147483647.0) {
                cli_runtime_error("%s: frame %zu, codebook %d is not an integer", path, t, c);
                goto done;
            }
            (*codes)[t * (size_t)C + (size_t)c++] = (int32_t)v->valuedouble;
        }
        t++;
    }
    *frames = T;
    rc = CLI_EXIT_OK;
done:
    if (rc) {
        free(*codes);
        *codes = NULL;
    }
    cJSON_Delete(root);
    return rc;
}

static int write_output(const char *out, const float *pcm, size_t n, int rate, bool float32) {
    gp_error err;
    gp_error_clear(&err);
    int rc = GEPARD_OK;
    if (strcmp(out, "-") == 0) {
        return cli_write_stdout(pcm, n * sizeof(float));
    }
    if (gp_path_has_suffix(out, ".wav"))
        rc = gp_audio_write_wav(out, pcm, n, 1, rate, float32, &err);
    else
        rc = gp_audio_write_f32(out, pcm, n, &err);
    return rc ? cli_runtime_error("%s", err.message) : CLI_EXIT_OK;
}

int cli_decode(int argc, char **argv) {
    cli_args args;
    int rc =
        cli_parse(&args, "decode", "--codec FILE --codes FILE.json -o OUT",
                  "Decode NanoCodec codes to audio.", decode_options, N_DECODE_OPTIONS, argc, argv);
    if (rc || args.help) return rc;
    const char *codec_path = cli_get(&args, "codec"), *codes_path = cli_get(&args, "codes"),
               *out = cli_get(&args, "output");
    if (!codec_path || !codes_path || !out) {
        cli_args_free(&args);
        return cli_usage_error("decode", "--codec, --codes and -o are required");
    }
    if (strcmp(out, "-") != 0 && !gp_path_has_suffix(out, ".wav") &&
        !gp_path_has_suffix(out, ".f32")) {
        cli_args_free(&args);
        return cli_usage_error("decode", "-o must end in .wav or .f32, or be - (got \"%s\")", out);
    }
    gepard_codec *codec = NULL;
    if ((rc = cli_codec_open(&args, codec_path, false, &codec))) {
        cli_args_free(&args);
        return rc;
    }
    int32_t *codes = NULL;
    size_t frames = 0, n = 0;
    float *pcm = NULL;
    rc = read_codes_json(codes_path, gepard_codec_num_codebooks(codec), &codes, &frames);
    if (rc == CLI_EXIT_OK && gepard_codec_decode(codec, codes, frames, &pcm, &n) != GEPARD_OK)
        rc = cli_runtime_error("%s: %s", codes_path, gepard_last_error());
    if (rc == CLI_EXIT_OK)
        rc = write_output(out, pcm, n, gepard_codec_sample_rate(codec), cli_flag(&args, "float"));
    gepard_free(pcm);
    free(codes);
    gepard_codec_free(codec);
    cli_args_free(&args);
    return rc;
}
