/* fuzz_audio.c — libFuzzer harness for audio input held in memory
 * (io/audio_memory.c over libsndfile: WAV, FLAC, Ogg, MP3, AIFF ...), the
 * path a ref_audio upload and a voices-directory clip take. Decoding is
 * bounded to 60 s as the server bounds it. Seeds: fuzz/seeds/audio/ and
 * small files from scripts/fuzz-seeds.sh. */
#include "fuzz_common.h"

#include "base/log.h"
#include "io/audio_memory.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gp_log_set_level(GP_LOG_SILENT);
    gp_error err;
    gp_error_clear(&err);
    gp_audio audio;
    memset(&audio, 0, sizeof audio);
    int rc = gp_audio_read_memory(data, size, 60.0, "ref_audio", &audio, &err);
    fuzz_check_error(rc, &err);
    if (!rc) gp_audio_free(&audio);
    return 0;
}
