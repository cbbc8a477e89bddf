/* commands.c — the table of `gepard` subcommands shown by `gepard --help`. */
#include "cli/commands.h"

#include <stddef.h>

int cli_tokenize(int argc, char **argv);
int cli_codes(int argc, char **argv);
int cli_download(int argc, char **argv);

const cli_command cli_commands[] = {
    {"tokenize", "print the token ids of a text (JSON)", cli_tokenize},
    {"codes", "generate audio codes for a text (JSON)", cli_codes},
    {"download", "fetch a model from the Hugging Face Hub into the cache", cli_download},
    {NULL, NULL, NULL},
};
