/* cli_info.c — `gepard info FILE`: what a model file holds (see gepard_describe_file). */
#include <stdio.h>

#include "cli/args.h"
#include "cli/cli_codec.h"
#include "gepard.h"

int cli_info(int argc, char **argv) {
    cli_args args;
    int rc = cli_parse(&args, "info", "FILE",
                       "Describe a model file: a NanoCodec (.nemo, or a state dict with "
                       "model_config.yaml beside it), a .safetensors file or a torch checkpoint.",
                       NULL, 0, argc, argv);
    if (rc || args.help) return rc;
    if (args.positional_count != 1) {
        cli_args_free(&args);
        return cli_usage_error("info", "expected exactly one FILE");
    }
    char *text = NULL;
    if (gepard_describe_file(args.positionals[0], &text) != GEPARD_OK)
        rc = cli_runtime_error("%s", gepard_last_error());
    else
        fputs(text, stdout);
    gepard_free(text);
    cli_args_free(&args);
    return rc;
}
