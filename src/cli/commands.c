/* commands.c — the table of `gepard` subcommands shown by `gepard --help`. */
#include "cli/commands.h"

#include <stddef.h>

#include "cli/cli_codec.h"

int cli_tokenize(int argc, char **argv);
int cli_codes(int argc, char **argv);
int cli_synth(int argc, char **argv);
int cli_say(int argc, char **argv);
int cli_bench(int argc, char **argv);
int cli_download(int argc, char **argv);
int cli_serve(int argc, char **argv);
int cli_loadtest(int argc, char **argv);

const cli_command cli_commands[] = {
    {"say", "speak a text: to a file, stdout or the speakers", cli_say},
    {"tokenize", "print the token ids of a text (JSON)", cli_tokenize},
    {"codes", "generate audio codes for a text (JSON)", cli_codes},
    {"decode", "decode NanoCodec codes (JSON) to a WAV or raw float32 file", cli_decode},
    {"encode", "encode mono audio to NanoCodec codes (JSON)", cli_encode},
    {"info", "describe a model file (.nemo codec, .safetensors, torch checkpoint)", cli_info},
    {"download", "fetch a model from the Hugging Face Hub into the cache", cli_download},
    {"serve", "an OpenAI-compatible speech server (HTTP, streaming, batching)", cli_serve},
    {"loadtest", "measure a speech server: throughput, time to first audio, RTF", cli_loadtest},
    {"bench", "measure speed and memory on this machine (JSON)", cli_bench},
    {"synth", "write a synthetic real-size checkpoint for benchmarks", cli_synth},
    {NULL, NULL, NULL},
};
