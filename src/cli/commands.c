/* commands.c — the table of `gepard` subcommands shown by `gepard --help`. */
#include "cli/commands.h"

#include <stddef.h>

const cli_command cli_commands[] = {
    {NULL, NULL, NULL},
};
