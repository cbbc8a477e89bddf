/* commands.c — the table of `gepard` subcommands shown by `gepard --help`. */
#include "cli/commands.h"

#include <stddef.h>

#include "cli/cli_codec.h"

const cli_command cli_commands[] = {
    {"decode", "decode NanoCodec codes (JSON) to a WAV or raw float32 file", cli_decode},
    {"encode", "encode mono audio to NanoCodec codes (JSON)", cli_encode},
    {"info", "describe a model file (.nemo codec, .safetensors, torch checkpoint)", cli_info},
    {NULL, NULL, NULL},
};
