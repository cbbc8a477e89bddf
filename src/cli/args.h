/* args.h — the command line parser every `gepard` subcommand uses.
 *
 * Options are declared in a table (long name, optional short letter, whether
 * it takes a value, help text); the parser accepts "--name value",
 * "--name=value", "-x value" and bare flags, collects positionals, and turns
 * mistakes into a usage message with exit code 2. `--help` prints the
 * subcommand's help generated from the same table.
 */
#ifndef GP_CLI_ARGS_H
#define GP_CLI_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CLI_EXIT_OK 0
#define CLI_EXIT_RUNTIME 1
#define CLI_EXIT_USAGE 2

typedef struct cli_option {
    const char *name;  /* long name without "--" */
    char short_name;   /* 0 if none */
    const char *value; /* metavariable ("N", "FILE") or NULL for a flag */
    const char *help;
} cli_option;

typedef struct cli_args {
    const char *command; /* e.g. "tokenize" */
    const cli_option *options;
    int option_count;
    const char **values; /* per option: last value (or "1" for a set flag), NULL if absent */
    const char **positionals;
    int positional_count;
    bool help;
} cli_args;

/* Parse argv (argv[0] is the subcommand name). Returns 0, or CLI_EXIT_USAGE
 * after printing the problem. With --help prints help and sets args->help. */
int cli_parse(cli_args *args, const char *command, const char *synopsis, const char *description,
              const cli_option *options, int option_count, int argc, char **argv);
void cli_args_free(cli_args *args);
void cli_print_help(const char *command, const char *synopsis, const char *description,
                    const cli_option *options, int option_count);

const char *cli_get(const cli_args *args, const char *name);
bool cli_flag(const cli_args *args, const char *name);
/* Typed getters: print a usage error and return CLI_EXIT_USAGE on bad input. */
int cli_get_int(const cli_args *args, const char *name, long long min, long long max,
                long long *out);
int cli_get_float(const cli_args *args, const char *name, double min, double max, double *out);
int cli_get_u64(const cli_args *args, const char *name, uint64_t *out);

/* Print "gepard CMD: message" and a hint to run --help; returns CLI_EXIT_USAGE. */
int cli_usage_error(const char *command, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Print "gepard: message" for a runtime failure; returns CLI_EXIT_RUNTIME. */
int cli_runtime_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Write to standard output and flush, so a full disk or a closed pipe is
 * noticed now: returns CLI_EXIT_OK, or CLI_EXIT_RUNTIME after printing
 * "standard output: cannot write: REASON". */
int cli_write_stdout(const void *data, size_t len);
/* At exit: flush and close standard output and turn a late failure (text
 * printed with printf that only reached the file now) into exit status 1. */
int cli_close_stdout(int rc);

#endif
