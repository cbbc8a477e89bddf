/* main.c — the `gepard` command: global options and subcommand dispatch.
 * Exit codes everywhere: 0 ok, 1 runtime error, 2 usage error. Standard
 * output is flushed and closed before exiting, so output that could not be
 * written (a full disk, a closed pipe) is an error, never a silent exit 0. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "gepard.h"

static void print_main_help(void) {
    printf("gepard %s — fast Gepard text-to-speech in C\n\n", gepard_version());
    printf("Usage: gepard COMMAND [OPTIONS] [ARGS]\n\nCommands:\n");
    for (const cli_command *c = cli_commands; c->name; c++)
        printf("  %-10s %s\n", c->name, c->summary);
    printf("\nRun 'gepard COMMAND --help' for a command's options.\n");
    printf("Global options: -h, --help (this text), --version (print the version).\n");
    printf("Exit status: 0 success, 1 runtime error, 2 usage error.\n");
}

int main(int argc, char **argv) {
    signal(SIGPIPE, SIG_IGN);
    if (argc < 2) {
        print_main_help();
        return CLI_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        print_main_help();
        return cli_close_stdout(CLI_EXIT_OK);
    }
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
        printf("gepard %s\n", gepard_version());
        return cli_close_stdout(CLI_EXIT_OK);
    }
    for (const cli_command *c = cli_commands; c->name; c++)
        if (strcmp(cmd, c->name) == 0) return cli_close_stdout(c->run(argc - 1, argv + 1));
    fprintf(stderr, "gepard: unknown command \"%s\"\nRun 'gepard --help' for the list.\n", cmd);
    return CLI_EXIT_USAGE;
}
