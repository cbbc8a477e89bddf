/* audio_file.c — libsndfile reader and atomic WAV / raw f32 writers (see audio_file.h). */
#include "io/audio_file.h"

#include "io/audio_sink.h"

#include <errno.h>
#include <sndfile.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "io/file.h"

#define AUDIO_MAX_SAMPLES ((size_t)1 << 31) /* ~13 hours of 44.1 kHz stereo */

/* libsndfile accepts a WAV/AIFF whose data chunk is cut short and only notes it in its
 * log ("data : 112000 (should be 55978)"); treat that as the truncation it is. */
static bool audio_data_truncated(SNDFILE *sf) {
    char log[8192];
    log[0] = '\0';
    sf_command(sf, SFC_GET_LOG_INFO, log, sizeof log);
    log[sizeof log - 1] = '\0';
    for (const char *line = log; line && *line;) {
        const char *end = strchr(line, '\n');
        size_t n = end ? (size_t)(end - line) : strlen(line);
        if ((strncmp(line, "data", 4) == 0 || strncmp(line, "SSND", 4) == 0) &&
            memmem(line, n, "should be", 9))
            return true;
        line = end ? end + 1 : NULL;
    }
    return false;
}

int gp_audio_read(const char *path, gp_audio *out, gp_error *err) {
    memset(out, 0, sizeof *out);
    if (!gp_path_exists(path))
        return gp_fail(err, GEPARD_ERR_NOT_FOUND, "%s: cannot open: %s", path, strerror(ENOENT));
    SF_INFO info;
    memset(&info, 0, sizeof info);
    SNDFILE *sf = sf_open(path, SFM_READ, &info);
    if (!sf)
        return gp_fail(err, GEPARD_ERR_FORMAT,
                       "%s: not a readable audio file (%s) — expected WAV, FLAC, OGG or another "
                       "format libsndfile reads",
                       path, sf_strerror(NULL));
    int rc = GEPARD_OK;
    size_t total;
    if (audio_data_truncated(sf)) {
        sf_close(sf);
        return gp_fail(err, GEPARD_ERR_FORMAT,
                       "%s: the audio data is shorter than the header says — the file is "
                       "truncated",
                       path);
    }
    if (info.channels < 1 || info.samplerate < 1 || info.frames < 0 ||
        gp_mul_size((size_t)info.frames, (size_t)info.channels, &total) != 0 ||
        total > AUDIO_MAX_SAMPLES) {
        sf_close(sf);
        return gp_fail(err, GEPARD_ERR_FORMAT, "%s: implausible audio header (%d channels, %d Hz)",
                       path, info.channels, info.samplerate);
    }
    out->samples = malloc((total ? total : 1) * sizeof(float));
    if (!out->samples) {
        sf_close(sf);
        return gp_fail_oom(err, path, total * sizeof(float));
    }
    sf_count_t got = sf_readf_float(sf, out->samples, info.frames);
    if (got != info.frames)
        rc = gp_fail(err, GEPARD_ERR_FORMAT,
                     "%s: the audio data ends after %lld of %lld frames — the file is truncated",
                     path, (long long)(got < 0 ? 0 : got), (long long)info.frames);
    sf_close(sf);
    if (rc) {
        gp_audio_free(out);
        return rc;
    }
    out->frames = (size_t)info.frames;
    out->channels = info.channels;
    out->sample_rate = info.samplerate;
    return GEPARD_OK;
}

int gp_audio_read_f32(const char *path, gp_audio *out, gp_error *err) {
    memset(out, 0, sizeof *out);
    char *data;
    size_t len;
    int rc = gp_read_file(path, AUDIO_MAX_SAMPLES * sizeof(float), &data, &len, err);
    if (rc) return rc;
    if (len % sizeof(float)) {
        free(data);
        return gp_fail(err, GEPARD_ERR_FORMAT,
                       "%s: %zu bytes is not a whole number of float32 samples", path, len);
    }
    out->frames = len / sizeof(float);
    out->samples = malloc(len ? len : 1);
    if (!out->samples) {
        free(data);
        return gp_fail_oom(err, path, len);
    }
    for (size_t i = 0; i < out->frames; i++) { /* little-endian on every supported host */
        unsigned char *p = (unsigned char *)data + 4 * i;
        uint32_t bits =
            (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
        memcpy(&out->samples[i], &bits, sizeof bits);
    }
    free(data);
    out->channels = 1;
    return GEPARD_OK;
}

void gp_audio_free(gp_audio *audio) {
    free(audio->samples);
    memset(audio, 0, sizeof *audio);
}

int gp_audio_write_wav(const char *path, const float *samples, size_t frames, int channels,
                       int sample_rate, bool float32, gp_error *err) {
    /* Mono goes through the streaming encoder so every WAV gepard writes
     * (say, decode, the server) converts float to 16-bit the same way. */
    if (channels == 1) {
        gp_audio_sink *sink;
        int rc = gp_audio_sink_open_file(path, float32 ? GP_AUDIO_WAV_FLOAT : GP_AUDIO_WAV16,
                                         sample_rate, &sink, err);
        if (rc) return rc;
        rc = gp_audio_sink_write(sink, samples, frames, err);
        int close_rc = gp_audio_sink_close(sink, rc == GEPARD_OK, rc ? NULL : err);
        return rc ? rc : close_rc;
    }
    size_t count = frames * (size_t)channels;
    float *clipped = malloc((count ? count : 1) * sizeof(float));
    if (!clipped) return gp_fail_oom(err, "audio", count * 4);
    for (size_t i = 0; i < count; i++)
        clipped[i] = samples[i] > 1.0f ? 1.0f : samples[i] < -1.0f ? -1.0f : samples[i];
    gp_atomic_file af;
    int rc = gp_atomic_file_open(&af, path, err);
    if (rc) {
        free(clipped);
        return rc;
    }
    SF_INFO info;
    memset(&info, 0, sizeof info);
    info.samplerate = sample_rate;
    info.channels = channels;
    info.format = SF_FORMAT_WAV | (float32 ? SF_FORMAT_FLOAT : SF_FORMAT_PCM_16);
    /* libsndfile writes through the descriptor; the FILE has nothing buffered. */
    SNDFILE *sf = sf_open_fd(fileno(af.fp), SFM_WRITE, &info, 0);
    if (!sf) {
        free(clipped);
        gp_atomic_file_abort(&af);
        return gp_fail(err, GEPARD_ERR_IO, "%s: cannot write WAV: %s", path, sf_strerror(NULL));
    }
    errno = 0;
    sf_count_t wrote = sf_writef_float(sf, clipped, (sf_count_t)frames);
    int write_errno = errno;
    char reason[256];
    snprintf(reason, sizeof reason, "%s", sf_strerror(sf));
    int close_rc = sf_close(sf);
    free(clipped);
    if (wrote != (sf_count_t)frames || close_rc != 0) {
        gp_atomic_file_abort(&af);
        return gp_fail(err, GEPARD_ERR_IO, "%s: cannot write: %s", path,
                       write_errno ? strerror(write_errno) : reason);
    }
    return gp_atomic_file_commit(&af, err);
}

int gp_audio_write_f32(const char *path, const float *samples, size_t count, gp_error *err) {
    gp_atomic_file af;
    int rc = gp_atomic_file_open(&af, path, err);
    if (rc) return rc;
    gp_atomic_file_write(&af, samples, count * sizeof(float)); /* commit reports a failure */
    return gp_atomic_file_commit(&af, err);
}
