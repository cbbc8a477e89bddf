/* cli_synth.c — `gepard synth`: write a synthetic checkpoint with the real
 * shapes and file formats (random, seeded weights) for benchmarks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "io/file.h"
#include "model/synth.h"

static const cli_option synth_options[] = {
    {"preset", 'p', "NAME", "gepard-1.0 (real sizes, ~1.1 GB) or tiny"},
    {"out", 'o', "DIR", "output directory (the model goes in DIR/model)"},
    {"seed", 0, "N", "random seed (default 1)"},
};

int cli_synth(int argc, char **argv) {
    cli_args a;
    int rc = cli_parse(&a, "synth", "--preset NAME --out DIR [--seed N]",
                       "Write a synthetic Gepard checkpoint with random weights: DIR/model holds\n"
                       "gepard_config.json, config.json, model.safetensors (bf16) and a synthetic\n"
                       "tokenizer.json. For benchmarks and tests only: it speaks noise.",
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
            char *model_dir = gp_path_join(out, "model");
            if (!model_dir || gp_synth_model_write(model_dir, &spec, seed, &err))
                rc = cli_runtime_error("%s", model_dir ? err.message : "out of memory");
            else
                printf("%s\n", model_dir);
            free(model_dir);
        }
    }
    cli_args_free(&a);
    return rc;
}
