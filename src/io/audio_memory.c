/* audio_memory.c — libsndfile virtual I/O over a read-only memory block (see
 * audio_memory.h). */
#include "io/audio_memory.h"

#include <sndfile.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"

typedef struct mem_reader {
    const unsigned char *data;
    sf_count_t len, pos;
} mem_reader;

static sf_count_t mem_length(void *user) { return ((mem_reader *)user)->len; }

static sf_count_t mem_seek(sf_count_t offset, int whence, void *user) {
    mem_reader *m = user;
    sf_count_t base = whence == SEEK_SET ? 0 : whence == SEEK_CUR ? m->pos : m->len;
    sf_count_t pos = base + offset;
    if (pos < 0 || pos > m->len) return -1;
    m->pos = pos;
    return pos;
}

static sf_count_t mem_read(void *ptr, sf_count_t count, void *user) {
    mem_reader *m = user;
    sf_count_t n = m->len - m->pos < count ? m->len - m->pos : count;
    if (n <= 0) return 0;
    memcpy(ptr, m->data + m->pos, (size_t)n);
    m->pos += n;
    return n;
}

static sf_count_t mem_write(const void *ptr, sf_count_t count, void *user) {
    (void)ptr;
    (void)count;
    (void)user;
    return 0;
}

static sf_count_t mem_tell(void *user) { return ((mem_reader *)user)->pos; }

int gp_audio_read_memory(const void *data, size_t len, double max_seconds, const char *origin,
                         gp_audio *out, gp_error *err) {
    memset(out, 0, sizeof *out);
    if (!data || len == 0)
        return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT, "%s: the audio data is empty", origin);
    mem_reader m = {data, (sf_count_t)len, 0};
    SF_VIRTUAL_IO io = {mem_length, mem_seek, mem_read, mem_write, mem_tell};
    SF_INFO info;
    memset(&info, 0, sizeof info);
    SNDFILE *sf = sf_open_virtual(&io, SFM_READ, &info, &m);
    if (!sf)
        return gp_fail(err, GEPARD_ERR_FORMAT,
                       "%s: not a readable audio file (%s) — send WAV, FLAC, Ogg, MP3 or another "
                       "format libsndfile reads",
                       origin, sf_strerror(NULL));
    size_t total = 0;
    if (info.channels < 1 || info.channels > 64 || info.samplerate < 1000 ||
        info.samplerate > 384000 || info.frames <= 0 ||
        gp_mul_size((size_t)info.frames, (size_t)info.channels, &total) != 0) {
        sf_close(sf);
        return gp_fail(err, GEPARD_ERR_FORMAT,
                       "%s: implausible audio header (%d channels, %d Hz, %lld frames)", origin,
                       info.channels, info.samplerate, (long long)info.frames);
    }
    if ((double)info.frames > max_seconds * info.samplerate) {
        sf_close(sf);
        return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT,
                       "%s: the clip lasts %.1f s; send at most %.0f s (3-15 s of clear speech "
                       "is best)",
                       origin, (double)info.frames / info.samplerate, max_seconds);
    }
    out->samples = malloc(total * sizeof(float));
    if (!out->samples) {
        sf_close(sf);
        return gp_fail_oom(err, origin, total * sizeof(float));
    }
    sf_count_t got = sf_readf_float(sf, out->samples, info.frames);
    sf_close(sf);
    if (got != info.frames) {
        gp_audio_free(out);
        return gp_fail(err, GEPARD_ERR_FORMAT,
                       "%s: the audio data ends after %lld of %lld frames — it is truncated",
                       origin, (long long)(got < 0 ? 0 : got), (long long)info.frames);
    }
    out->frames = (size_t)info.frames;
    out->channels = info.channels;
    out->sample_rate = info.samplerate;
    return GEPARD_OK;
}
