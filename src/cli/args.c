/* args.c — table-driven option parsing for subcommands (see args.h). */
#include "cli/args.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_usage_error(const char *command, const char *fmt, ...) {
    fprintf(stderr, "gepard %s: ", command);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nRun 'gepard %s --help' for usage.\n", command);
    return CLI_EXIT_USAGE;
}

int cli_runtime_error(const char *fmt, ...) {
    fputs("gepard: error: ", stderr);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return CLI_EXIT_RUNTIME;
}

int cli_write_stdout(const void *data, size_t len) {
    errno = 0;
    if ((len > 0 && fwrite(data, 1, len, stdout) != len) || fflush(stdout) != 0) {
        int e = errno ? errno : EIO;
        clearerr(stdout);
        return cli_runtime_error("standard output: cannot write: %s", strerror(e));
    }
    return CLI_EXIT_OK;
}

int cli_close_stdout(int rc) {
    errno = 0;
    bool failed = fflush(stdout) != 0 || ferror(stdout);
    int e = errno ? errno : EIO;
    errno = 0;
    if (fclose(stdout) != 0 && !failed) {
        failed = true;
        e = errno ? errno : EIO;
    }
    if (!failed) return rc;
    if (rc != CLI_EXIT_OK) return rc; /* already reported */
    return cli_runtime_error("standard output: cannot write: %s", strerror(e));
}

void cli_print_help(const char *command, const char *synopsis, const char *description,
                    const cli_option *options, int option_count) {
    printf("Usage: gepard %s %s\n\n%s\n", command, synopsis, description);
    if (option_count) printf("\nOptions:\n");
    for (int i = 0; i < option_count; i++) {
        char left[96];
        if (options[i].short_name)
            snprintf(left, sizeof left, "-%c, --%s%s%s", options[i].short_name, options[i].name,
                     options[i].value ? " " : "", options[i].value ? options[i].value : "");
        else
            snprintf(left, sizeof left, "    --%s%s%s", options[i].name,
                     options[i].value ? " " : "", options[i].value ? options[i].value : "");
        printf("  %-30s %s\n", left, options[i].help);
    }
    printf("  %-30s %s\n", "-h, --help", "show this help and exit");
}

static int find_option(const cli_option *options, int count, const char *name, size_t len,
                       char short_name) {
    for (int i = 0; i < count; i++) {
        if (short_name) {
            if (options[i].short_name == short_name) return i;
        } else if (strlen(options[i].name) == len && strncmp(options[i].name, name, len) == 0) {
            return i;
        }
    }
    return -1;
}

int cli_parse(cli_args *args, const char *command, const char *synopsis, const char *description,
              const cli_option *options, int option_count, int argc, char **argv) {
    memset(args, 0, sizeof *args);
    args->command = command;
    args->options = options;
    args->option_count = option_count;
    args->values = calloc((size_t)option_count + 1, sizeof *args->values);
    args->positionals = calloc((size_t)argc + 1, sizeof *args->positionals);
    if (!args->values || !args->positionals) {
        cli_args_free(args);
        return cli_runtime_error("out of memory");
    }
    bool only_positionals = false;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (only_positionals || arg[0] != '-' || strcmp(arg, "-") == 0) {
            args->positionals[args->positional_count++] = arg;
            continue;
        }
        if (strcmp(arg, "--") == 0) {
            only_positionals = true;
            continue;
        }
        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
            cli_print_help(command, synopsis, description, options, option_count);
            cli_args_free(args);
            args->help = true;
            return CLI_EXIT_OK;
        }
        int index;
        const char *inline_value = NULL;
        if (arg[1] == '-') {
            const char *name = arg + 2;
            const char *eq = strchr(name, '=');
            size_t len = eq ? (size_t)(eq - name) : strlen(name);
            index = find_option(options, option_count, name, len, 0);
            if (index < 0) {
                int rc = cli_usage_error(command, "unknown option --%.*s", (int)len, name);
                cli_args_free(args);
                return rc;
            }
            if (eq) inline_value = eq + 1;
        } else {
            if (arg[2] != '\0') {
                /* "-5" style negative numbers are positionals only after "--". */
                int rc = cli_usage_error(command, "unknown option %s", arg);
                cli_args_free(args);
                return rc;
            }
            index = find_option(options, option_count, NULL, 0, arg[1]);
            if (index < 0) {
                int rc = cli_usage_error(command, "unknown option %s", arg);
                cli_args_free(args);
                return rc;
            }
        }
        const cli_option *opt = &options[index];
        if (opt->value) {
            if (!inline_value) {
                if (i + 1 >= argc) {
                    int rc = cli_usage_error(command, "option --%s needs a value (%s)", opt->name,
                                             opt->value);
                    cli_args_free(args);
                    return rc;
                }
                inline_value = argv[++i];
            }
            args->values[index] = inline_value;
        } else {
            if (inline_value) {
                int rc = cli_usage_error(command, "option --%s takes no value", opt->name);
                cli_args_free(args);
                return rc;
            }
            args->values[index] = "1";
        }
    }
    return CLI_EXIT_OK;
}

void cli_args_free(cli_args *args) {
    free(args->values);
    free(args->positionals);
    args->values = NULL;
    args->positionals = NULL;
}

const char *cli_get(const cli_args *args, const char *name) {
    for (int i = 0; i < args->option_count; i++)
        if (strcmp(args->options[i].name, name) == 0) return args->values[i];
    return NULL;
}

bool cli_flag(const cli_args *args, const char *name) { return cli_get(args, name) != NULL; }

int cli_get_int(const cli_args *args, const char *name, long long min, long long max,
                long long *out) {
    const char *v = cli_get(args, name);
    if (!v) return CLI_EXIT_OK;
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || end == v || *end)
        return cli_usage_error(args->command, "--%s expects an integer, got \"%s\"", name, v);
    if (x < min || x > max)
        return cli_usage_error(args->command, "--%s must be between %lld and %lld, got %lld", name,
                               min, max, x);
    *out = x;
    return CLI_EXIT_OK;
}

int cli_get_u64(const cli_args *args, const char *name, uint64_t *out) {
    const char *v = cli_get(args, name);
    if (!v) return CLI_EXIT_OK;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno || end == v || *end || v[0] == '-')
        return cli_usage_error(args->command, "--%s expects a non-negative integer, got \"%s\"",
                               name, v);
    *out = x;
    return CLI_EXIT_OK;
}

int cli_get_float(const cli_args *args, const char *name, double min, double max, double *out) {
    const char *v = cli_get(args, name);
    if (!v) return CLI_EXIT_OK;
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || end == v || *end || !isfinite(x))
        return cli_usage_error(args->command, "--%s expects a number, got \"%s\"", name, v);
    if (x < min || x > max)
        return cli_usage_error(args->command, "--%s must be between %g and %g, got %g", name, min,
                               max, x);
    *out = x;
    return CLI_EXIT_OK;
}
