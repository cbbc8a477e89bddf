/* speak.c — the smallest program that embeds libgepard through gepard.h:
 * load a model and a codec (local paths or Hugging Face repo ids), create an
 * engine, and stream one synthesis into a WAV file as the audio arrives.
 *
 *   build/release/examples/speak MODEL CODEC "Text to speak." out.wav
 *
 * The WAV header is written with placeholder sizes and patched at the end.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "gepard.h"

typedef struct wav_out {
    FILE *fp;
    uint32_t samples;
} wav_out;

static void put32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static void write_header(FILE *fp, int rate, uint32_t samples) {
    unsigned char h[44] = "RIFF....WAVEfmt ";
    put32(h + 4, 36 + samples * 2);
    put32(h + 16, 16);
    h[20] = 1; /* PCM */
    h[22] = 1; /* mono */
    put32(h + 24, (uint32_t)rate);
    put32(h + 28, (uint32_t)rate * 2);
    h[32] = 2;
    h[34] = 16;
    memcpy(h + 36, "data", 4);
    put32(h + 40, samples * 2);
    fseek(fp, 0, SEEK_SET);
    fwrite(h, 1, 44, fp);
}

/* Called on the engine thread each time a frame of audio is ready. */
static int on_audio(const float *x, size_t n, void *user) {
    wav_out *w = user;
    for (size_t i = 0; i < n; i++) {
        float v = x[i] > 1 ? 1 : x[i] < -1 ? -1 : x[i];
        int16_t s = (int16_t)(v * 32767.0f + (v >= 0 ? 0.5f : -0.5f));
        fwrite(&s, 2, 1, w->fp);
    }
    w->samples += (uint32_t)n;
    return 0; /* non-zero would cancel */
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s MODEL CODEC TEXT OUT.wav\n", argv[0]);
        return 2;
    }
    gepard_model *model = NULL;
    gepard_codec *codec = NULL;
    gepard_engine *engine = NULL;
    int rc = 1;
    if (gepard_model_load(argv[1], NULL, &model) != GEPARD_OK ||
        gepard_codec_load(argv[2], &codec) != GEPARD_OK ||
        gepard_engine_create(model, codec, NULL, &engine) != GEPARD_OK) {
        fprintf(stderr, "error: %s\n", gepard_last_error());
        goto done;
    }
    wav_out w = {fopen(argv[4], "wb"), 0};
    if (!w.fp) {
        fprintf(stderr, "error: cannot create %s\n", argv[4]);
        goto done;
    }
    write_header(w.fp, gepard_codec_sample_rate(codec), 0);
    gepard_synth_params params = gepard_synth_default_params();
    params.temperature = 0.4f; /* the upstream "production" operating point */
    gepard_stream_callbacks cb = {.on_audio = on_audio, .user = &w};
    gepard_synth_result result;
    if (gepard_synthesize(engine, argv[3], &params, &cb, &result) != GEPARD_OK) {
        fprintf(stderr, "error: %s\n", gepard_last_error());
        fclose(w.fp);
        remove(argv[4]);
        goto done;
    }
    write_header(w.fp, gepard_codec_sample_rate(codec), w.samples);
    fclose(w.fp);
    printf("%s: %.2f s of audio in %.2f s (first audio after %.0f ms)\n", argv[4],
           result.audio_seconds, result.elapsed_seconds, result.ttfa_ms);
    rc = 0;
done:
    gepard_engine_free(engine);
    gepard_codec_free(codec);
    gepard_model_free(model);
    return rc;
}
