/* cli_codes.c — `gepard codes`: text → audio codes as JSON
 * {"frames":T,"codes":[[C ints],…]} (frame-major), for inspection and for
 * `gepard decode`. */
#include <stdio.h>
#include <stdlib.h>

#include "base/buf.h"
#include "cli/args.h"
#include "cli/codes_json.h"
#include "cli/synth_options.h"
#include "gepard.h"

static const cli_option codes_options[] = {
    {"model", 'm', "DIR", "Gepard model directory"},
    {"ref-codes", 0, "FILE", "voice reference as codes JSON (same format as the output)"},
    CLI_SAMPLING_OPTIONS,
};
#define N_CODES_OPTIONS ((int)(sizeof codes_options / sizeof codes_options[0]))

static int load_voice(const cli_args *a, gepard_model *model, gepard_voice **voice) {
    const char *path = cli_get(a, "ref-codes");
    *voice = NULL;
    if (!path) return CLI_EXIT_OK;
    int C = gepard_model_channels(model);
    int vocab[4096];
    for (int c = 0; c < C && c < 4096; c++) vocab[c] = gepard_model_channel_vocab(model, c);
    int32_t *codes;
    size_t frames;
    gp_error err;
    if (gp_codes_json_read(path, C, vocab, &codes, &frames, NULL, &err))
        return cli_runtime_error("%s", err.message);
    if (frames == 0) {
        free(codes);
        return cli_runtime_error("%s: the reference has no frames", path);
    }
    gepard_status st = gepard_voice_from_codes(model, codes, frames, voice);
    free(codes);
    return st ? cli_runtime_error("%s", gepard_last_error()) : CLI_EXIT_OK;
}

int cli_codes(int argc, char **argv) {
    cli_args a;
    int rc =
        cli_parse(&a, "codes", "--model DIR [OPTIONS] TEXT",
                  "Generate the audio codes for TEXT (use - to read standard input) and print\n"
                  "them as JSON: {\"frames\":T,\"codes\":[[32 ints],...]}.",
                  codes_options, N_CODES_OPTIONS, argc, argv);
    if (rc || a.help) return rc;
    gepard_synth_params params = gepard_synth_default_params();
    params.split_text = 0;
    int threads = 0;
    gepard_weight_format weights;
    char *text = NULL;
    gepard_model *model = NULL;
    gepard_lora *lora = NULL;
    gepard_voice *voice = NULL;
    int32_t *codes = NULL;
    size_t frames = 0;
    if ((rc = cli_read_sampling(&a, &params, &threads, &weights)) ||
        (rc = cli_read_text(&a, NULL, &text)) ||
        (rc = cli_load_model(&a, weights, &model, &lora)) || (rc = load_voice(&a, model, &voice)))
        goto done;
    params.voice = voice;
    params.lora = lora;
    if (gepard_generate_codes(model, text, &params, threads, &codes, &frames) != GEPARD_OK) {
        rc = cli_runtime_error("%s", gepard_last_error());
        goto done;
    }
    gp_buf out;
    gp_buf_init(&out);
    if (gp_codes_json_write(&out, codes, frames, gepard_model_channels(model)) ||
        gp_buf_append_str(&out, "\n"))
        rc = cli_runtime_error("out of memory writing the codes");
    else
        rc = cli_write_stdout(out.data, out.len);
    gp_buf_free(&out);
done:
    gepard_free(codes);
    gepard_voice_free(voice);
    gepard_lora_free(lora);
    gepard_model_free(model);
    free(text);
    cli_args_free(&a);
    return rc;
}
