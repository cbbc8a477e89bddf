/* synth_options.c — parsing the shared sampling options (see
 * synth_options.h). */
#include "cli/synth_options.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"

int cli_read_sampling(const cli_args *a, gepard_synth_params *p, int *threads,
                      gepard_weight_format *weights) {
    double f;
    long long n;
    uint64_t u;
    int rc;
#define GET_FLOAT(name, field, lo, hi)                                                             \
    f = p->field;                                                                                  \
    if ((rc = cli_get_float(a, name, lo, hi, &f))) return rc;                                      \
    p->field = (float)f
#define GET_INT(name, field, lo, hi)                                                               \
    n = p->field;                                                                                  \
    if ((rc = cli_get_int(a, name, lo, hi, &n))) return rc;                                        \
    p->field = (int)n
    GET_FLOAT("temperature", temperature, -1e6, 1e6);
    GET_INT("top-k", top_k, 0, 1 << 20);
    GET_INT("max-frames", max_frames, 1, 1000000);
    GET_FLOAT("stop-threshold", stop_threshold, -1e6, 1e6);
    GET_FLOAT("repetition-penalty", repetition_penalty, 1e-6, 1e6);
    GET_INT("repetition-window", repetition_window, 0, 1000000);
    GET_FLOAT("cfg-scale", cfg_scale, -1e6, 1e6);
    GET_INT("cfg-frames", cfg_frames, 0, 1000000);
    GET_INT("force-stop-frames", force_stop_frames, 0, 1000000);
#undef GET_FLOAT
#undef GET_INT
    const char *mode = cli_get(a, "cfg-uncond");
    if (mode) {
        if (strcmp(mode, "empty_text") == 0)
            p->cfg_uncond = GEPARD_CFG_EMPTY_TEXT;
        else if (strcmp(mode, "audio_only") == 0)
            p->cfg_uncond = GEPARD_CFG_AUDIO_ONLY;
        else
            return cli_usage_error(
                a->command, "--cfg-uncond must be empty_text or audio_only, got \"%s\"", mode);
    }
    if (cli_get(a, "seed")) {
        if ((rc = cli_get_u64(a, "seed", &u))) return rc;
        p->seed = u;
        p->random_seed = 0;
    }
    if (threads) {
        n = 0;
        if ((rc = cli_get_int(a, "threads", 0, 1024, &n))) return rc;
        *threads = (int)n;
    }
    if (weights) {
        const char *d = cli_get(a, "dtype");
        *weights = GEPARD_WEIGHTS_DEFAULT;
        if (d) {
            if (strcmp(d, "f32") == 0)
                *weights = GEPARD_WEIGHTS_F32;
            else if (strcmp(d, "bf16") == 0)
                *weights = GEPARD_WEIGHTS_BF16;
            else if (strcmp(d, "int8") == 0)
                *weights = GEPARD_WEIGHTS_INT8;
            else if (strcmp(d, "q4") == 0)
                *weights = GEPARD_WEIGHTS_Q4;
            else
                return cli_usage_error(a->command,
                                       "--dtype must be f32, bf16, int8 or q4, got \"%s\"", d);
        }
    }
    return CLI_EXIT_OK;
}

static int read_stream(FILE *fp, const char *name, char **text) {
    gp_buf b;
    gp_buf_init(&b);
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, fp)) > 0) {
        if (gp_buf_append(&b, chunk, n) != 0) {
            gp_buf_free(&b);
            return cli_runtime_error("out of memory reading %s", name);
        }
    }
    if (ferror(fp)) {
        gp_buf_free(&b);
        return cli_runtime_error("cannot read %s", name);
    }
    *text = gp_buf_detach(&b, NULL);
    return *text ? CLI_EXIT_OK : cli_runtime_error("out of memory");
}

int cli_read_text(const cli_args *a, const char *file_option, char **text) {
    *text = NULL;
    const char *file = file_option ? cli_get(a, file_option) : NULL;
    if (file && a->positional_count > 0)
        return cli_usage_error(a->command, "give the text either as TEXT or with -f, not both");
    if (!file && a->positional_count == 0)
        return cli_usage_error(a->command, "no text given (TEXT, or - to read standard input)");
    if (a->positional_count > 1)
        return cli_usage_error(a->command,
                               "expected one TEXT argument, got %d — put the text in quotes",
                               a->positional_count);
    if (!file && strcmp(a->positionals[0], "-") != 0) {
        *text = strdup(a->positionals[0]);
        return *text ? CLI_EXIT_OK : cli_runtime_error("out of memory");
    }
    if (!file || strcmp(file, "-") == 0) return read_stream(stdin, "standard input", text);
    FILE *fp = fopen(file, "rb");
    if (!fp) return cli_runtime_error("%s: cannot open the text file", file);
    int rc = read_stream(fp, file, text);
    fclose(fp);
    return rc;
}

int cli_load_lora(const cli_args *a, gepard_model *model, gepard_lora **lora) {
    *lora = NULL;
    const char *lora_path = cli_get(a, "lora");
    if (!lora_path) return CLI_EXIT_OK;
    double alpha = 0;
    int rc = cli_get_float(a, "lora-alpha", 1e-6, 1e6, &alpha);
    if (rc) return rc;
    if (gepard_lora_load(model, lora_path, (float)alpha, lora) != GEPARD_OK)
        return cli_runtime_error("%s", gepard_last_error());
    return CLI_EXIT_OK;
}

void cli_read_device(const cli_args *a, gepard_load_params *lp) {
    lp->device = cli_get(a, "device");
    lp->gpu_precision = cli_get(a, "gpu-precision");
}

void cli_read_codec_device(const cli_args *a, gepard_codec_params *cp) {
    cp->device = cli_get(a, "codec-device") ? cli_get(a, "codec-device") : cli_get(a, "device");
    cp->gpu_precision = cli_get(a, "gpu-precision");
}

int cli_load_model(const cli_args *a, gepard_weight_format weights, gepard_model **model,
                   gepard_lora **lora) {
    *model = NULL;
    *lora = NULL;
    const char *dir = cli_get(a, "model");
    if (!dir) return cli_usage_error(a->command, "--model DIR is required");
    gepard_load_params lp = gepard_load_default_params();
    lp.weights = weights;
    lp.packed_weights = -1; /* inspection runs are short: load fast (gepard.h) */
    cli_read_device(a, &lp);
    if (gepard_model_load(dir, &lp, model) != GEPARD_OK)
        return cli_runtime_error("%s", gepard_last_error());
    return cli_load_lora(a, *model, lora);
}
