/* fuzz_voice.c — libFuzzer harness for saved voices as `--voices DIR` loads
 * them (server/voices.c): a speaker prefix (.safetensors from
 * `gepard say --save-voice`, gepard_voice_load) and a LoRA adapter
 * (.lora.safetensors or .lora.pt, gepard_lora_load), both checked against the
 * tiny fixture model, loaded once ($GEPARD_FIXTURES, default
 * ../shared/fixtures). The loaders take a path, so the input goes into a
 * memfd. Seeds: fuzz/seeds/voice/ and the fixture adapters. */
#include "fuzz_common.h"

#include "base/log.h"
#include "gepard.h"

static gepard_model *model;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    gp_log_set_level(GP_LOG_SILENT);
    const char *fixtures = getenv("GEPARD_FIXTURES");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/model-tiny/model", fixtures ? fixtures : "../shared/fixtures");
    gepard_load_params params = gepard_load_default_params();
    params.device = "cpu";
    params.offline = 1;
    if (gepard_model_load(dir, &params, &model) != GEPARD_OK) {
        fprintf(stderr, "fuzz_voice: cannot load the fixture model %s: %s (set GEPARD_FIXTURES)\n",
                dir, gepard_last_error());
        exit(1);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[64];
    int fd = fuzz_memfd(data, size, path, sizeof path);
    if (fd < 0) return 0;
    gepard_voice *voice = NULL;
    if (gepard_voice_load(model, path, &voice) == GEPARD_OK)
        gepard_voice_free(voice);
    else if (!gepard_last_error()[0])
        abort(); /* a failure needs a message */
    gepard_lora *lora = NULL;
    if (gepard_lora_load(model, path, 1.0f, &lora) == GEPARD_OK)
        gepard_lora_free(lora);
    else if (!gepard_last_error()[0])
        abort();
    close(fd);
    return 0;
}
