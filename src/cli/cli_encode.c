/* cli_encode.c — `gepard encode`: audio to NanoCodec codes (JSON on stdout or -o FILE). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/buf.h"
#include "cli/args.h"
#include "cli/cli_codec.h"
#include "gepard.h"
#include "io/audio_file.h"
#include "io/file.h"

static const cli_option encode_options[] = {
    {"codec", 'c', "FILE", "NanoCodec: .nemo archive, or state dict + model_config.yaml"},
    {"input", 'i', "IN", "mono audio at the codec's rate (WAV, FLAC, ...) or raw .f32 samples"},
    {"output", 'o', "FILE", "write the JSON here instead of stdout"},
    {"threads", 't', "N", "threads for the encoder (default: all CPUs)"},
    {"reference", 0, NULL, "use the slow reference kernels (for checking; on the CPU)"},
    {"device", 0, "DEV", "cpu, cuda, cuda:N or auto (default: a GPU when one is usable)"},
};

#define N_ENCODE_OPTIONS ((int)(sizeof encode_options / sizeof encode_options[0]))

int cli_codec_open(const cli_args *args, const char *path, bool with_encoder, gepard_codec **out) {
    long long threads = sysconf(_SC_NPROCESSORS_ONLN);
    if (threads < 1) threads = 1;
    int rc = cli_get_int(args, "threads", 1, 256, &threads);
    if (rc) return rc;
    gepard_codec_params p = gepard_codec_default_params();
    p.n_threads = (int)threads;
    p.reference_kernels = cli_flag(args, "reference");
    p.device = cli_get(args, "device");
    p.gpu_precision = cli_get(args, "gpu-precision");
    p.no_encoder = !with_encoder;
    if (!p.device && p.reference_kernels) p.device = "cpu";
    if (gepard_codec_load_with_params(path, &p, out) != GEPARD_OK)
        return cli_runtime_error("%s", gepard_last_error());
    return CLI_EXIT_OK;
}

static int append_rows(gp_buf *b, const char *key, const int32_t *v, size_t rows, size_t cols) {
    int oom = gp_buf_printf(b, ",\"%s\":[", key);
    for (size_t t = 0; t < rows; t++) {
        oom |= gp_buf_append_str(b, t ? ",[" : "[");
        for (size_t c = 0; c < cols; c++)
            oom |= gp_buf_printf(b, "%s%d", c ? "," : "", (int)v[t * cols + c]);
        oom |= gp_buf_append_str(b, "]");
    }
    return oom | gp_buf_append_str(b, "]");
}

static int encode_read_input(const char *in, int rate, gp_audio *audio) {
    gp_error err;
    gp_error_clear(&err);
    int rc = gp_path_has_suffix(in, ".f32") ? gp_audio_read_f32(in, audio, &err)
                                            : gp_audio_read(in, audio, &err);
    if (rc) return cli_runtime_error("%s", err.message);
    if (gp_path_has_suffix(in, ".f32")) audio->sample_rate = rate;
    if (audio->channels != 1) {
        int channels = audio->channels;
        gp_audio_free(audio);
        return cli_runtime_error("%s: has %d channels; the codec encodes mono audio — mix it "
                                 "down first",
                                 in, channels);
    }
    if (audio->sample_rate != rate) {
        int got = audio->sample_rate;
        gp_audio_free(audio);
        return cli_runtime_error("%s: sample rate is %d Hz but the codec needs %d Hz — resample "
                                 "it first",
                                 in, got, rate);
    }
    if (audio->frames == 0) {
        gp_audio_free(audio);
        return cli_runtime_error("%s: contains no samples", in);
    }
    return CLI_EXIT_OK;
}

int cli_encode(int argc, char **argv) {
    cli_args args;
    int rc = cli_parse(&args, "encode", "--codec FILE -i IN [-o OUT.json]",
                       "Encode mono audio into NanoCodec codes, printed as JSON "
                       "{\"frames\":T,\"codes\":[[...]],\"packed\":[[...]]}.",
                       encode_options, N_ENCODE_OPTIONS, argc, argv);
    if (rc || args.help) return rc;
    const char *codec_path = cli_get(&args, "codec"), *in = cli_get(&args, "input"),
               *out = cli_get(&args, "output");
    if (!codec_path || !in) {
        cli_args_free(&args);
        return cli_usage_error("encode", "--codec and -i are required");
    }
    gepard_codec *codec = NULL;
    if ((rc = cli_codec_open(&args, codec_path, true, &codec))) {
        cli_args_free(&args);
        return rc;
    }
    gp_audio audio = {0};
    int32_t *codes = NULL, *packed = NULL;
    size_t T = 0;
    gp_buf json;
    gp_buf_init(&json);
    rc = encode_read_input(in, gepard_codec_sample_rate(codec), &audio);
    if (rc == CLI_EXIT_OK && gepard_codec_encode(codec, audio.samples, audio.frames, &codes, &T,
                                                 &packed, NULL) != GEPARD_OK)
        rc = cli_runtime_error("%s: %s", in, gepard_last_error());
    if (rc == CLI_EXIT_OK) {
        int oom = gp_buf_printf(&json, "{\"frames\":%zu", T);
        oom |= append_rows(&json, "codes", codes, T, (size_t)gepard_codec_num_codebooks(codec));
        oom |= append_rows(&json, "packed", packed, T, (size_t)gepard_codec_num_groups(codec));
        oom |= gp_buf_append_str(&json, "}\n");
        if (oom) rc = cli_runtime_error("out of memory");
    }
    if (rc == CLI_EXIT_OK && out) {
        gp_atomic_file af;
        gp_error err;
        gp_error_clear(&err);
        if (gp_atomic_file_open(&af, out, &err) == GEPARD_OK) {
            gp_atomic_file_write(&af, json.data, json.len);
            gp_atomic_file_commit(&af, &err); /* reports a failed write */
        }
        if (err.code) rc = cli_runtime_error("%s", err.message);
    } else if (rc == CLI_EXIT_OK) {
        rc = cli_write_stdout(json.data, json.len);
    }
    gp_buf_free(&json);
    gepard_free(codes);
    gepard_free(packed);
    gp_audio_free(&audio);
    gepard_codec_free(codec);
    cli_args_free(&args);
    return rc;
}
