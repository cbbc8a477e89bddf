/* cli_download.c — `gepard download`: fetch a model's files from the Hugging
 * Face Hub into the shared HF cache (io/hub.h) and print the snapshot
 * directory, which `--model` accepts. Without --include it fetches the files
 * of a Gepard checkpoint. It always asks the Hub for the revision's current
 * commit (falling back to the cache when the Hub is unreachable), unless
 * --offline or HF_HUB_OFFLINE=1 keep it off the network.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "io/hub.h"

static const cli_option download_options[] = {
    {"revision", 'r', "REV", "branch, tag or 40-digit commit (default: main)"},
    {"include", 'i', "FILE",
     "a file of the repo to fetch; repeat for more (default: the Gepard "
     "model files)"},
    {"offline", 0, NULL, "use only the cache, never the network (as HF_HUB_OFFLINE=1)"},
};

#define DOWNLOAD_OPTION_COUNT (int)(sizeof download_options / sizeof download_options[0])

/* Every --include value (the parser keeps only the last one). */
static int collect_includes(int argc, char **argv, const char **out) {
    int n = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) break;
        if ((strcmp(a, "--include") == 0 || strcmp(a, "-i") == 0) && i + 1 < argc)
            out[n++] = argv[++i];
        else if (strncmp(a, "--include=", 10) == 0)
            out[n++] = a + 10;
        else if ((strcmp(a, "--revision") == 0 || strcmp(a, "-r") == 0) && i + 1 < argc)
            i++;
    }
    return n;
}

int cli_download(int argc, char **argv) {
    cli_args a;
    int rc = cli_parse(&a, "download", "REPO_ID [--revision REV] [--include FILE ...] [--offline]",
                       "Download a model from the Hugging Face Hub into the shared cache\n"
                       "($HF_HUB_CACHE, $HF_HOME/hub or ~/.cache/huggingface/hub) and print the\n"
                       "snapshot directory, for use with --model. Files after REPO_ID are fetched\n"
                       "as if given with --include. Private or gated repos need HF_TOKEN (or the\n"
                       "token file of `huggingface-cli login`); HF_ENDPOINT selects a mirror.",
                       download_options, DOWNLOAD_OPTION_COUNT, argc, argv);
    if (rc || a.help) return rc;
    gp_hub_file *files = calloc((size_t)argc + 1, sizeof *files);
    const char **names = calloc((size_t)argc + 1, sizeof *names);
    char *snapshot = NULL;
    if (!files || !names) {
        rc = cli_runtime_error("out of memory");
        goto done;
    }
    if (a.positional_count < 1) {
        rc = cli_usage_error("download", "REPO_ID is required (e.g. nineninesix/gepard-1.0)");
        goto done;
    }
    const char *repo = a.positionals[0];
    gp_error err;
    gp_error_clear(&err);
    if (gp_hub_validate_repo_id(repo, &err)) {
        rc = cli_usage_error("download", "%s", err.message);
        goto done;
    }
    int n = collect_includes(argc, argv, names);
    for (int i = 1; i < a.positional_count; i++) names[n++] = a.positionals[i];
    for (int i = 0; i < n && !rc; i++) {
        files[i] = (gp_hub_file){names[i], false};
        if (gp_hub_validate_filename(names[i], &err))
            rc = cli_usage_error("download", "%s", err.message);
    }
    if (!rc && cli_get(&a, "revision") && gp_hub_validate_revision(cli_get(&a, "revision"), &err))
        rc = cli_usage_error("download", "%s", err.message);
    if (rc) goto done;
    const gp_hub_file *list = files;
    size_t count = (size_t)n;
    if (n == 0) list = gp_hub_gepard_files(&count);
    gp_hub_options opts = gp_hub_default_options();
    opts.revision = cli_get(&a, "revision");
    opts.offline = cli_flag(&a, "offline");
    opts.refresh = true;
    if (gp_hub_resolve_repo(&opts, repo, list, count, &snapshot, &err)) {
        rc = cli_runtime_error("%s", err.message);
        goto done;
    }
    printf("%s\n", snapshot);
    rc = cli_write_stdout(NULL, 0);
done:
    free(snapshot);
    free(names);
    free(files);
    cli_args_free(&a);
    return rc;
}
