/* api_voice_audio.c — voices from reference recordings: decode the file,
 * mix to mono, resample to the codec's rate (libsoxr), trim silence and
 * length, encode with the codec, compress with the model (see gepard.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "engine/api_error.h"
#include "engine/api_internal.h"
#include "io/audio_file.h"
#include "io/file.h"
#include "io/resample.h"
#include "io/safetensors.h"

#define VOICE_DEFAULT_SECONDS 15.0
#define VOICE_MIN_SECONDS 0.5

/* Trim leading and trailing stretches below -45 dB of the peak, keeping
 * 100 ms of margin. */
static void trim_silence(const float *x, size_t n, int rate, size_t *begin, size_t *end) {
    float peak = 0;
    for (size_t i = 0; i < n; i++) peak = fmaxf(peak, fabsf(x[i]));
    *begin = 0;
    *end = n;
    if (peak <= 0) return;
    float threshold = peak * 0.0056f; /* -45 dB */
    size_t b = 0, e = n;
    while (b < n && fabsf(x[b]) < threshold) b++;
    while (e > b && fabsf(x[e - 1]) < threshold) e--;
    size_t margin = (size_t)rate / 10;
    *begin = b > margin ? b - margin : 0;
    *end = e + margin < n ? e + margin : n;
}

gepard_status gepard_voice_from_audio(gepard_model *m, const gepard_codec *codec,
                                      const float *samples, size_t frames, int channels,
                                      int sample_rate, double max_seconds, gepard_voice **out) {
    *out = NULL;
    gp_error err;
    gp_error_clear(&err);
    if (!codec)
        return gp_api_failf(GEPARD_ERR_INVALID_ARGUMENT,
                            "a codec is needed to turn a recording into a voice");
    if (gp_model_ensure_compressor(m->model, &err)) return gp_api_fail(&err);
    if (max_seconds <= 0) max_seconds = VOICE_DEFAULT_SECONDS;
    float *mono = NULL, *resampled = NULL;
    size_t n = 0;
    const int rate = gepard_codec_sample_rate(codec);
    int rc = gp_downmix_mono(samples, frames, channels, &mono, &err);
    if (!rc) rc = gp_resample(mono, frames, sample_rate, rate, &resampled, &n, &err);
    free(mono);
    if (rc) return gp_api_fail(&err);
    size_t begin, end;
    trim_silence(resampled, n, rate, &begin, &end);
    size_t cap = (size_t)(max_seconds * rate);
    if (end - begin > cap) {
        GP_INFO("reference clip trimmed to its first %.0f s", max_seconds);
        end = begin + cap;
    }
    if ((double)(end - begin) < VOICE_MIN_SECONDS * rate) {
        free(resampled);
        return gp_api_failf(
            GEPARD_ERR_INVALID_ARGUMENT,
            "the reference clip has only %.2f s of sound; use 3-15 s of clear speech",
            (double)(end - begin) / rate);
    }
    int32_t *codes = NULL;
    size_t n_frames = 0;
    gepard_status st =
        gepard_codec_encode(codec, resampled + begin, end - begin, &codes, &n_frames, NULL, NULL);
    free(resampled);
    if (st != GEPARD_OK) return st;
    st = gepard_voice_from_codes(m, codes, n_frames, out);
    gepard_free(codes);
    return st;
}

gepard_status gepard_voice_from_file(gepard_model *m, const gepard_codec *codec, const char *path,
                                     gepard_voice **out) {
    *out = NULL;
    if (!gp_path_exists(path))
        return gp_api_failf(GEPARD_ERR_NOT_FOUND, "%s: no such voice file", path);
    if (gp_st_path_looks_like(path)) return gepard_voice_load(m, path, out);
    gp_error err;
    gp_error_clear(&err);
    gp_audio audio;
    if (gp_audio_read(path, &audio, &err)) return gp_api_fail(&err);
    gepard_status st = gepard_voice_from_audio(m, codec, audio.samples, audio.frames,
                                               audio.channels, audio.sample_rate, 0, out);
    gp_audio_free(&audio);
    if (st != GEPARD_OK) {
        char message[GP_ERROR_MESSAGE_MAX];
        snprintf(message, sizeof message, "%s", gepard_last_error());
        return gp_api_failf(st, "%s: %s", path, message);
    }
    return gp_api_ok();
}
