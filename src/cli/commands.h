/* commands.h — the `gepard` subcommands; each lives in its own cli_*.c file
 * and receives argv starting at the subcommand name. Each returns an exit
 * code: 0 ok, 1 runtime error, 2 usage error. */
#ifndef GP_CLI_COMMANDS_H
#define GP_CLI_COMMANDS_H

typedef struct cli_command {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv);
} cli_command;

/* The table of every subcommand, terminated by a NULL name. */
extern const cli_command cli_commands[];

#endif
