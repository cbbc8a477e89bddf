/* audio_sink.c — streaming WAV/PCM/F32/G.711/FLAC/Opus/MP3/AAC encoders
 * behind one interface (see audio_sink.h). FLAC uses libFLAC's stream
 * encoder without a seek callback so it works on pipes; Opus uses
 * libopusenc's callbacks; MP3 uses LAME in constant bit rate without a Xing
 * tag, so a stream needs no patching at the end; AAC goes out in
 * self-contained ADTS frames; G.711 is libsndfile writing headerless mu-law
 * or A-law through virtual I/O (a WAV of it gets our own header first). */
#include "io/audio_sink.h"

#include <FLAC/stream_encoder.h>
#include <errno.h>
#include <lame/lame.h>
#include <math.h>
#include <opus/opusenc.h>
#include <sndfile.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "io/aac_encoder.h"
#include "io/file.h"

#define SINK_CHUNK 4096

struct gp_audio_sink {
    gp_audio_format format;
    int rate;
    int bit_rate; /* lossy formats: bits per second; 0: the format's default */
    bool is_file;
    bool seekable; /* a regular file: WAV sizes and FLAC STREAMINFO are patched at the end */
    gp_atomic_file file;
    gp_audio_write_fn write;
    void *user;
    int write_failed;
    int write_errno;     /* the OS reason of the first failed write, when known */
    uint64_t data_bytes; /* WAV payload written */
    FLAC__StreamEncoder *flac;
    OggOpusEnc *opus;
    OggOpusComments *opus_comments;
    lame_global_flags *lame;
    unsigned char *mp3;
    size_t mp3_cap;
    gp_aac_encoder *aac;
    SNDFILE *g711;       /* libsndfile writing raw mu-law or A-law */
    uint64_t g711_bytes; /* what it wrote (its virtual file's length) */
    int16_t s16[SINK_CHUNK];
    FLAC__int32 i32[SINK_CHUNK];
};

int gp_audio_format_parse(const char *name, const char **unsupported_reason) {
    if (unsupported_reason) *unsupported_reason = NULL;
    if (!name) return -1;
    if (!strcasecmp(name, "wav")) return GP_AUDIO_WAV16;
    if (!strcasecmp(name, "wav-float") || !strcasecmp(name, "wav32")) return GP_AUDIO_WAV_FLOAT;
    if (!strcasecmp(name, "pcm") || !strcasecmp(name, "s16") || !strcasecmp(name, "raw"))
        return GP_AUDIO_PCM16;
    if (!strcasecmp(name, "f32") || !strcasecmp(name, "float")) return GP_AUDIO_F32;
    if (!strcasecmp(name, "flac")) return GP_AUDIO_FLAC;
    if (!strcasecmp(name, "opus") || !strcasecmp(name, "ogg")) return GP_AUDIO_OPUS;
    if (!strcasecmp(name, "mp3")) return GP_AUDIO_MP3;
    if (!strcasecmp(name, "aac")) return GP_AUDIO_AAC;
    if (!strcasecmp(name, "mulaw") || !strcasecmp(name, "ulaw") || !strcasecmp(name, "pcm_mulaw"))
        return GP_AUDIO_MULAW;
    if (!strcasecmp(name, "alaw") || !strcasecmp(name, "pcm_alaw")) return GP_AUDIO_ALAW;
    if (!strcasecmp(name, "wav-mulaw") || !strcasecmp(name, "wav-ulaw")) return GP_AUDIO_WAV_MULAW;
    if (!strcasecmp(name, "wav-alaw")) return GP_AUDIO_WAV_ALAW;
    return -1;
}

bool gp_audio_format_is_lossy(gp_audio_format f) {
    return f == GP_AUDIO_MP3 || f == GP_AUDIO_OPUS || f == GP_AUDIO_AAC;
}

int gp_audio_format_bits(gp_audio_format f) {
    switch (f) {
    case GP_AUDIO_WAV_FLOAT:
    case GP_AUDIO_F32: return 32;
    case GP_AUDIO_MULAW:
    case GP_AUDIO_ALAW:
    case GP_AUDIO_WAV_MULAW:
    case GP_AUDIO_WAV_ALAW: return 8;
    default: return 16;
    }
}

int gp_audio_format_from_path(const char *path) {
    static const struct {
        const char *ext;
        gp_audio_format format;
    } exts[] = {{".wav", GP_AUDIO_WAV16}, {".pcm", GP_AUDIO_PCM16},  {".raw", GP_AUDIO_PCM16},
                {".s16", GP_AUDIO_PCM16}, {".f32", GP_AUDIO_F32},    {".flac", GP_AUDIO_FLAC},
                {".opus", GP_AUDIO_OPUS}, {".ogg", GP_AUDIO_OPUS},   {".mp3", GP_AUDIO_MP3},
                {".aac", GP_AUDIO_AAC},   {".ulaw", GP_AUDIO_MULAW}, {".mulaw", GP_AUDIO_MULAW},
                {".alaw", GP_AUDIO_ALAW}};
    for (size_t i = 0; i < sizeof exts / sizeof exts[0]; i++)
        if (gp_path_has_suffix(path, exts[i].ext)) return exts[i].format;
    return -1;
}

const char *gp_audio_format_name(gp_audio_format f) {
    static const char *names[] = {"wav", "wav-float", "pcm",   "f32",  "flac",      "opus",
                                  "mp3", "aac",       "mulaw", "alaw", "wav-mulaw", "wav-alaw"};
    return (unsigned)f < sizeof names / sizeof names[0] ? names[f] : "?";
}

const char *gp_audio_format_mime(gp_audio_format f) {
    switch (f) {
    case GP_AUDIO_WAV16:
    case GP_AUDIO_WAV_FLOAT:
    case GP_AUDIO_WAV_MULAW:
    case GP_AUDIO_WAV_ALAW: return "audio/wav";
    case GP_AUDIO_MULAW: return "audio/PCMU"; /* RFC 4856; the rate goes in X-Sample-Rate */
    case GP_AUDIO_ALAW: return "audio/PCMA";
    case GP_AUDIO_PCM16: return "audio/pcm";
    case GP_AUDIO_F32: return "application/octet-stream";
    case GP_AUDIO_FLAC: return "audio/flac";
    case GP_AUDIO_OPUS: return "audio/ogg";
    case GP_AUDIO_MP3: return "audio/mpeg";
    case GP_AUDIO_AAC: return "audio/aac";
    }
    return "application/octet-stream";
}

static int sink_out(gp_audio_sink *s, const void *data, size_t len) {
    if (s->write_failed || len == 0) return s->write_failed;
    if (s->is_file) {
        if (gp_atomic_file_write(&s->file, data, len)) {
            s->write_failed = 1;
            s->write_errno = s->file.error;
        }
    } else {
        errno = 0;
        if (s->write(data, len, s->user) != 0) {
            s->write_failed = 1;
            s->write_errno = errno;
        }
    }
    return s->write_failed;
}

/* "PATH: cannot write: REASON" for a file, else the stream's reason. */
static int sink_write_error(gp_audio_sink *s, const char *what, gp_error *err) {
    const char *reason = s->write_errno ? strerror(s->write_errno) : "the reader went away";
    if (s->is_file)
        return gp_fail(err, GEPARD_ERR_IO, "%s: cannot write %s: %s", s->file.final_path, what,
                       reason);
    return gp_fail(err, GEPARD_ERR_IO, "cannot write %s: %s", what, reason);
}

static void put_u32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static void put_u16(unsigned char *p, uint16_t v) {
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
}

static bool is_g711(gp_audio_format f) {
    return f == GP_AUDIO_MULAW || f == GP_AUDIO_ALAW || f == GP_AUDIO_WAV_MULAW ||
           f == GP_AUDIO_WAV_ALAW;
}

/* 44-byte canonical header (a 16-byte fmt chunk, then data) for the WAV
 * formats; data_bytes = UINT32_MAX means "unknown". WAVE format tags: 1 PCM,
 * 3 IEEE float, 6 A-law, 7 mu-law. */
static void wav_header(unsigned char h[44], gp_audio_format f, int rate, uint64_t data_bytes) {
    int bits = gp_audio_format_bits(f);
    int tag = f == GP_AUDIO_WAV_FLOAT   ? 3
              : f == GP_AUDIO_WAV_MULAW ? 7
              : f == GP_AUDIO_WAV_ALAW  ? 6
                                        : 1;
    uint32_t data = data_bytes > 0xFFFFFFFFull - 36 ? 0xFFFFFFFFu : (uint32_t)data_bytes;
    memcpy(h, "RIFF", 4);
    put_u32(h + 4, data == 0xFFFFFFFFu ? 0xFFFFFFFFu : data + 36);
    memcpy(h + 8, "WAVEfmt ", 8);
    put_u32(h + 16, 16);
    put_u16(h + 20, (uint16_t)tag);
    put_u16(h + 22, 1);
    put_u32(h + 24, (uint32_t)rate);
    put_u32(h + 28, (uint32_t)rate * (uint32_t)bits / 8);
    put_u16(h + 32, (uint16_t)(bits / 8));
    put_u16(h + 34, (uint16_t)bits);
    memcpy(h + 36, "data", 4);
    put_u32(h + 40, data);
}

/* libsndfile's virtual file for G.711: writes go straight out, and the file
 * is as long as what was written (a headerless format never seeks back). */
static sf_count_t g711_length(void *user) {
    return (sf_count_t)((gp_audio_sink *)user)->g711_bytes;
}

static sf_count_t g711_seek(sf_count_t offset, int whence, void *user) {
    (void)offset;
    (void)whence;
    return g711_length(user);
}

static sf_count_t g711_read(void *ptr, sf_count_t count, void *user) {
    (void)ptr;
    (void)count;
    (void)user;
    return 0;
}

static sf_count_t g711_write(const void *ptr, sf_count_t count, void *user) {
    gp_audio_sink *s = user;
    if (count <= 0) return 0;
    if (sink_out(s, ptr, (size_t)count)) return 0;
    s->g711_bytes += (uint64_t)count;
    s->data_bytes += (uint64_t)count;
    return count;
}

static int g711_open(gp_audio_sink *s, gp_error *err) {
    static SF_VIRTUAL_IO io = {g711_length, g711_seek, g711_read, g711_write, g711_length};
    bool mu = s->format == GP_AUDIO_MULAW || s->format == GP_AUDIO_WAV_MULAW;
    SF_INFO info = {.samplerate = s->rate,
                    .channels = 1,
                    .format = SF_FORMAT_RAW | (mu ? SF_FORMAT_ULAW : SF_FORMAT_ALAW)};
    s->g711 = sf_open_virtual(&io, SFM_WRITE, &info, s);
    if (!s->g711)
        return gp_fail(err, GEPARD_ERR_INTERNAL, "cannot start the G.711 %s encoder: %s",
                       mu ? "mu-law" : "A-law", sf_strerror(NULL));
    return 0;
}

static FLAC__StreamEncoderWriteStatus flac_write_cb(const FLAC__StreamEncoder *enc,
                                                    const FLAC__byte buffer[], size_t bytes,
                                                    uint32_t samples, uint32_t frame, void *user) {
    (void)enc;
    (void)samples;
    (void)frame;
    return sink_out(user, buffer, bytes) ? FLAC__STREAM_ENCODER_WRITE_STATUS_FATAL_ERROR
                                         : FLAC__STREAM_ENCODER_WRITE_STATUS_OK;
}

/* Files are seekable: let libFLAC patch STREAMINFO (length, MD5) at the end. */
static FLAC__StreamEncoderSeekStatus flac_seek_cb(const FLAC__StreamEncoder *enc,
                                                  FLAC__uint64 offset, void *user) {
    (void)enc;
    gp_audio_sink *s = user;
    if (gp_atomic_file_seek(&s->file, (long long)offset) == 0)
        return FLAC__STREAM_ENCODER_SEEK_STATUS_OK;
    s->write_failed = 1;
    s->write_errno = s->file.error;
    return FLAC__STREAM_ENCODER_SEEK_STATUS_ERROR;
}

static FLAC__StreamEncoderTellStatus flac_tell_cb(const FLAC__StreamEncoder *enc,
                                                  FLAC__uint64 *offset, void *user) {
    (void)enc;
    gp_audio_sink *s = user;
    off_t pos = ftello(s->file.fp);
    if (pos < 0) return FLAC__STREAM_ENCODER_TELL_STATUS_ERROR;
    *offset = (FLAC__uint64)pos;
    return FLAC__STREAM_ENCODER_TELL_STATUS_OK;
}

static int opus_write_cb(void *user, const unsigned char *ptr, opus_int32 len) {
    return sink_out(user, ptr, (size_t)len);
}

static int opus_close_cb(void *user) {
    (void)user;
    return 0;
}

static int aac_write_cb(const void *data, size_t len, void *user) {
    return sink_out(user, data, len);
}

static int sink_init_encoder(gp_audio_sink *s, gp_error *err) {
    switch (s->format) {
    case GP_AUDIO_AAC: /* 64 kbit/s, as the MP3 */
        return gp_aac_encoder_create(s->rate, s->bit_rate ? s->bit_rate : 64000, aac_write_cb, s,
                                     &s->aac, err);
    case GP_AUDIO_MULAW:
    case GP_AUDIO_ALAW: return g711_open(s, err);
    case GP_AUDIO_WAV16:
    case GP_AUDIO_WAV_FLOAT:
    case GP_AUDIO_WAV_MULAW:
    case GP_AUDIO_WAV_ALAW: {
        unsigned char h[44];
        wav_header(h, s->format, s->rate, s->seekable ? 0 : UINT64_MAX);
        if (sink_out(s, h, 44)) return sink_write_error(s, "the WAV header", err);
        return is_g711(s->format) ? g711_open(s, err) : 0;
    }
    case GP_AUDIO_FLAC: {
        s->flac = FLAC__stream_encoder_new();
        if (!s->flac) return gp_fail_oom(err, "FLAC encoder", 0);
        FLAC__stream_encoder_set_channels(s->flac, 1);
        FLAC__stream_encoder_set_bits_per_sample(s->flac, 16);
        FLAC__stream_encoder_set_sample_rate(s->flac, (uint32_t)s->rate);
        FLAC__stream_encoder_set_compression_level(s->flac, 5);
        if (FLAC__stream_encoder_init_stream(
                s->flac, flac_write_cb, s->seekable ? flac_seek_cb : NULL,
                s->seekable ? flac_tell_cb : NULL, NULL, s) != FLAC__STREAM_ENCODER_INIT_STATUS_OK)
            return gp_fail(err, GEPARD_ERR_INTERNAL, "cannot start the FLAC encoder");
        return 0;
    }
    case GP_AUDIO_OPUS: {
        OpusEncCallbacks cb = {opus_write_cb, opus_close_cb};
        s->opus_comments = ope_comments_create();
        if (!s->opus_comments) return gp_fail_oom(err, "Opus comments", 0);
        ope_comments_add(s->opus_comments, "ENCODER", "gepard.c");
        int error = 0;
        s->opus = ope_encoder_create_callbacks(&cb, s, s->opus_comments, s->rate, 1, 0, &error);
        if (!s->opus)
            return gp_fail(err, GEPARD_ERR_INTERNAL, "cannot start the Opus encoder: %s",
                           ope_strerror(error));
        ope_encoder_ctl(s->opus, OPUS_SET_BITRATE(s->bit_rate ? s->bit_rate : 32000));
        ope_encoder_ctl(s->opus, OPUS_SET_SIGNAL(OPUS_SIGNAL_VOICE));
        if (!s->seekable) {
            /* A stream is listened to as it comes: libopusenc's defaults
             * buffer 2 s for frame-size decisions and up to 1 s per page.
             * Encode each 20 ms packet at once and close a page every
             * 50 ms (2400 samples at 48 kHz): the first page follows the
             * second codec frame; Ogg's page headers cost ~5 kbit/s. */
            ope_encoder_ctl(s->opus, OPE_SET_DECISION_DELAY(0));
            ope_encoder_ctl(s->opus, OPE_SET_MUXING_DELAY(2400));
        }
        return 0;
    }
    case GP_AUDIO_MP3: {
        s->lame = lame_init();
        if (!s->lame) return gp_fail_oom(err, "MP3 encoder", 0);
        lame_set_in_samplerate(s->lame, s->rate);
        lame_set_out_samplerate(s->lame, s->rate);
        lame_set_num_channels(s->lame, 1);
        lame_set_mode(s->lame, MONO);
        lame_set_brate(s->lame, s->bit_rate ? (s->bit_rate + 500) / 1000 : 64);
        lame_set_bWriteVbrTag(s->lame, 0);
        lame_set_quality(s->lame, 5);
        if (lame_init_params(s->lame) < 0)
            return gp_fail(err, GEPARD_ERR_INTERNAL, "cannot start the MP3 encoder at %d Hz",
                           s->rate);
        s->mp3_cap = SINK_CHUNK * 5 / 4 + 7200;
        s->mp3 = malloc(s->mp3_cap);
        return s->mp3 ? 0 : gp_fail_oom(err, "MP3 buffer", s->mp3_cap);
    }
    default: return 0;
    }
}

static void sink_free(gp_audio_sink *s) {
    if (s->flac) FLAC__stream_encoder_delete(s->flac);
    if (s->opus) ope_encoder_destroy(s->opus);
    if (s->opus_comments) ope_comments_destroy(s->opus_comments);
    if (s->lame) lame_close(s->lame);
    free(s->mp3);
    gp_aac_encoder_free(s->aac);
    if (s->g711) sf_close(s->g711);
    free(s);
}

static int sink_open(gp_audio_sink *s, gp_audio_format format, int rate, int bit_rate,
                     gp_audio_sink **out, gp_error *err) {
    s->format = format;
    s->rate = rate;
    s->bit_rate = gp_audio_format_is_lossy(format) ? bit_rate : 0;
    if (bit_rate < 0 || bit_rate > 512000) {
        if (s->is_file) gp_atomic_file_abort(&s->file);
        sink_free(s);
        return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT, "unsupported bit rate %d", bit_rate);
    }
    if (rate < 1000 || rate > 384000) {
        if (s->is_file) gp_atomic_file_abort(&s->file);
        sink_free(s);
        return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT, "unsupported sample rate %d", rate);
    }
    int rc = sink_init_encoder(s, err);
    if (rc) {
        if (s->is_file) gp_atomic_file_abort(&s->file);
        sink_free(s);
        return rc;
    }
    *out = s;
    return GEPARD_OK;
}

int gp_audio_sink_open_file(const char *path, gp_audio_format format, int sample_rate,
                            gp_audio_sink **out, gp_error *err) {
    *out = NULL;
    gp_audio_sink *s = calloc(1, sizeof *s);
    if (!s) return gp_fail_oom(err, "audio sink", sizeof *s);
    s->is_file = true;
    int rc = gp_atomic_file_open(&s->file, path, err);
    if (rc) {
        free(s);
        return rc;
    }
    s->seekable = s->file.seekable;
    return sink_open(s, format, sample_rate, 0, out, err);
}

int gp_audio_sink_open_stream_at(gp_audio_write_fn write, void *user, gp_audio_format format,
                                 int sample_rate, int bit_rate, gp_audio_sink **out,
                                 gp_error *err) {
    *out = NULL;
    gp_audio_sink *s = calloc(1, sizeof *s);
    if (!s) return gp_fail_oom(err, "audio sink", sizeof *s);
    s->write = write;
    s->user = user;
    return sink_open(s, format, sample_rate, bit_rate, out, err);
}

int gp_audio_sink_open_stream(gp_audio_write_fn write, void *user, gp_audio_format format,
                              int sample_rate, gp_audio_sink **out, gp_error *err) {
    return gp_audio_sink_open_stream_at(write, user, format, sample_rate, 0, out, err);
}

static int16_t to_s16(float x) {
    if (!(x == x)) x = 0; /* NaN */
    if (x > 1) x = 1;
    if (x < -1) x = -1;
    return (int16_t)lrintf(x * 32767.0f);
}

static int sink_encode_chunk(gp_audio_sink *s, const float *x, size_t n) {
    switch (s->format) {
    case GP_AUDIO_WAV16:
    case GP_AUDIO_PCM16: {
        unsigned char bytes[SINK_CHUNK * 2];
        for (size_t i = 0; i < n; i++) put_u16(bytes + 2 * i, (uint16_t)to_s16(x[i]));
        s->data_bytes += 2 * n;
        return sink_out(s, bytes, 2 * n);
    }
    case GP_AUDIO_WAV_FLOAT:
    case GP_AUDIO_F32: {
        unsigned char bytes[SINK_CHUNK * 4];
        for (size_t i = 0; i < n; i++) {
            uint32_t bits;
            memcpy(&bits, &x[i], 4);
            put_u32(bytes + 4 * i, bits);
        }
        s->data_bytes += 4 * n;
        return sink_out(s, bytes, 4 * n);
    }
    case GP_AUDIO_FLAC:
        for (size_t i = 0; i < n; i++) s->i32[i] = to_s16(x[i]);
        return FLAC__stream_encoder_process_interleaved(s->flac, s->i32, (uint32_t)n)
                   ? s->write_failed
                   : 1;
    case GP_AUDIO_OPUS:
        return ope_encoder_write_float(s->opus, x, (int)n) != OPE_OK || s->write_failed;
    case GP_AUDIO_MP3: {
        for (size_t i = 0; i < n; i++) s->s16[i] = to_s16(x[i]);
        int bytes = lame_encode_buffer(s->lame, s->s16, s->s16, (int)n, s->mp3, (int)s->mp3_cap);
        return bytes < 0 || sink_out(s, s->mp3, (size_t)bytes);
    }
    case GP_AUDIO_AAC: return gp_aac_encoder_write(s->aac, x, n) || s->write_failed;
    case GP_AUDIO_MULAW:
    case GP_AUDIO_ALAW:
    case GP_AUDIO_WAV_MULAW:
    case GP_AUDIO_WAV_ALAW:
        /* from 16-bit PCM, as G.711 is defined (14/13 significant bits) */
        for (size_t i = 0; i < n; i++) s->s16[i] = to_s16(x[i]);
        return sf_write_short(s->g711, s->s16, (sf_count_t)n) != (sf_count_t)n || s->write_failed;
    }
    return 1;
}

int gp_audio_sink_write(gp_audio_sink *s, const float *samples, size_t n, gp_error *err) {
    for (size_t i = 0; i < n; i += SINK_CHUNK) {
        size_t m = n - i < SINK_CHUNK ? n - i : SINK_CHUNK;
        if (sink_encode_chunk(s, samples + i, m))
            return s->write_failed ? sink_write_error(s, "the audio", err)
                                   : gp_fail(err, GEPARD_ERR_INTERNAL, "the %s encoder failed",
                                             gp_audio_format_name(s->format));
    }
    return GEPARD_OK;
}

static int sink_finish_encoder(gp_audio_sink *s) {
    if (s->g711) { /* headerless: nothing to write at the end, but closed before a WAV's patch */
        sf_close(s->g711);
        s->g711 = NULL;
    }
    switch (s->format) {
    case GP_AUDIO_FLAC: return !FLAC__stream_encoder_finish(s->flac) || s->write_failed;
    case GP_AUDIO_OPUS: return ope_encoder_drain(s->opus) != OPE_OK || s->write_failed;
    case GP_AUDIO_AAC: return gp_aac_encoder_finish(s->aac) || s->write_failed;
    case GP_AUDIO_MP3: {
        int bytes = lame_encode_flush(s->lame, s->mp3, (int)s->mp3_cap);
        return bytes < 0 || sink_out(s, s->mp3, (size_t)bytes);
    }
    case GP_AUDIO_WAV16:
    case GP_AUDIO_WAV_FLOAT:
    case GP_AUDIO_WAV_MULAW:
    case GP_AUDIO_WAV_ALAW:
        if (s->seekable && !s->write_failed) {
            unsigned char h[44];
            wav_header(h, s->format, s->rate, s->data_bytes);
            if (gp_atomic_file_seek(&s->file, 0) || sink_out(s, h, 44)) {
                s->write_failed = 1;
                s->write_errno = s->file.error;
            }
        }
        return s->write_failed;
    default: return s->write_failed;
    }
}

int gp_audio_sink_close(gp_audio_sink *s, bool commit, gp_error *err) {
    if (!s) return GEPARD_OK;
    int rc = GEPARD_OK;
    if (commit && sink_finish_encoder(s))
        rc = s->write_failed ? sink_write_error(s, "the end of the audio", err)
                             : gp_fail(err, GEPARD_ERR_INTERNAL, "the %s encoder failed at the end",
                                       gp_audio_format_name(s->format));
    if (s->is_file) {
        if (commit && rc == GEPARD_OK)
            rc = gp_atomic_file_commit(&s->file, err);
        else
            gp_atomic_file_abort(&s->file);
    }
    sink_free(s);
    return rc;
}
