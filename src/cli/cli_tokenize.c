/* cli_tokenize.c — `gepard tokenize`: text → token ids (and the model input
 * layout with --layout) as one line of JSON. */
#include <stdio.h>
#include <stdlib.h>

#include "base/buf.h"
#include "cli/args.h"
#include "cli/synth_options.h"
#include "gepard.h"

static const cli_option tokenize_options[] = {
    {"model", 'm', "DIR", "Gepard model directory (tokenizer.json, gepard_config.json)"},
    {"layout", 0, NULL, "also print the model input layout (text repetition, markers)"},
};

static void append_ids(gp_buf *b, const char *key, const int32_t *ids, size_t n) {
    gp_buf_printf(b, "\"%s\":[", key);
    for (size_t i = 0; i < n; i++) gp_buf_printf(b, i ? ",%d" : "%d", ids[i]);
    gp_buf_append_str(b, "]");
}

int cli_tokenize(int argc, char **argv) {
    cli_args a;
    int rc = cli_parse(&a, "tokenize", "--model DIR [--layout] TEXT",
                       "Print the token ids of TEXT (use - to read standard input) as JSON:\n"
                       "{\"ids\":[...]} or, with --layout, {\"ids\":[...],\"layout\":[...]}.",
                       tokenize_options, 2, argc, argv);
    if (rc || a.help) return rc;
    char *text = NULL;
    gepard_tokenizer *tok = NULL;
    int32_t *ids = NULL, *layout = NULL;
    size_t n_ids = 0, n_layout = 0;
    if (!cli_get(&a, "model")) {
        rc = cli_usage_error("tokenize", "--model DIR is required");
        goto done;
    }
    if ((rc = cli_read_text(&a, NULL, &text))) goto done;
    if (gepard_tokenizer_load(cli_get(&a, "model"), &tok) != GEPARD_OK ||
        gepard_tokenize(tok, text, &ids, &n_ids) != GEPARD_OK ||
        (cli_flag(&a, "layout") && gepard_text_layout(tok, ids, n_ids, &layout, &n_layout))) {
        rc = cli_runtime_error("%s", gepard_last_error());
        goto done;
    }
    gp_buf out;
    gp_buf_init(&out);
    gp_buf_append_str(&out, "{");
    append_ids(&out, "ids", ids, n_ids);
    if (cli_flag(&a, "layout")) {
        gp_buf_append_str(&out, ",");
        append_ids(&out, "layout", layout, n_layout);
    }
    gp_buf_append_str(&out, "}\n");
    rc = cli_write_stdout(out.data, out.len);
    gp_buf_free(&out);
done:
    gepard_free(ids);
    gepard_free(layout);
    gepard_tokenizer_free(tok);
    free(text);
    cli_args_free(&a);
    return rc;
}
