/* cli_synth.c — `gepard synth`: write a synthetic checkpoint with the real
 * shapes and file formats (random, seeded weights) for benchmarks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "codec/synthetic.h"
#include "io/file.h"
#include "model/synth.h"

static const cli_option synth_options[] = {
    {"preset", 'p', "NAME",
     "gepard-1.0 (real sizes, ~1.1 GB; runs to max_frames) or tiny (stops after ~1-5 s)"},
    {"out", 'o', "DIR", "output directory: DIR/model and DIR/codec"},
    {"seed", 0, "N", "random seed (default 1)"},
};

int cli_synth(int argc, char **argv) {
    cli_args a;
    int rc =
        cli_parse(&a, "synth", "--preset NAME --out DIR [--seed N]",
                  "Write a synthetic Gepard checkpoint with random weights: DIR/model holds\n"
                  "gepard_config.json, config.json, model.safetensors (bf16) and a synthetic\n"
                  "tokenizer.json; DIR/codec a NanoCodec of the real widths (decoder base 864,\n"
                  "encoder base 24; model_config.yaml + model_weights.safetensors). For\n"
                  "benchmarks and tests only: it speaks noise.",
                  synth_options, 3, argc, argv);
    if (rc || a.help) return rc;
    const char *preset = cli_get(&a, "preset"), *out = cli_get(&a, "out");
    uint64_t seed = 1;
    gp_synth_model_spec spec;
    if (!preset || !out) {
        rc = cli_usage_error("synth", "--preset and --out are required");
    } else if (a.positional_count) {
        rc = cli_usage_error("synth", "unexpected argument \"%s\"", a.positionals[0]);
    } else if ((rc = cli_get_u64(&a, "seed", &seed)) == 0) {
        if (gp_synth_model_preset(preset, &spec) != 0) {
            rc = cli_usage_error("synth", "unknown preset \"%s\" (gepard-1.0 or tiny)", preset);
        } else {
            gp_error err;
            char *model_dir = gp_path_join(out, "model"), *codec_dir = gp_path_join(out, "codec");
            if (!model_dir || !codec_dir)
                rc = cli_runtime_error("out of memory");
            else if (gp_synth_model_write(model_dir, &spec, seed, &err) ||
                     gp_codec_synthetic_write(codec_dir, gp_codec_nano_22khz_yaml, seed, &err))
                rc = cli_runtime_error("%s", err.message);
            else
                printf("%s\n%s\n", model_dir, codec_dir);
            free(model_dir);
            free(codec_dir);
        }
    }
    cli_args_free(&a);
    return rc;
}
