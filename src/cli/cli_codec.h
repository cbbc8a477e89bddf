/* cli_codec.h — helpers shared by the codec subcommands (decode, encode). */
#ifndef GP_CLI_CODEC_H
#define GP_CLI_CODEC_H

#include <stdbool.h>

#include "cli/args.h"
#include "gepard.h"

/* Load the codec named by --codec with --threads / --reference (and its encoder only
 * when `with_encoder`: decoding does not need it); prints the error and returns the
 * exit code on failure. */
int cli_codec_open(const cli_args *args, const char *path, bool with_encoder, gepard_codec **out);

int cli_decode(int argc, char **argv);
int cli_encode(int argc, char **argv);
int cli_info(int argc, char **argv);

#endif
