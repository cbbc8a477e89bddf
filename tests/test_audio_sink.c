/* test_audio_sink.c — every output format round-trips through a decoder
 * (libsndfile reads WAV, FLAC, Ogg Opus and MP3; libavcodec reads the ADTS
 * AAC): right rate, length and,
 * for lossless formats, the exact 16-bit samples; streamed WAV carries the
 * 0xFFFFFFFF sizes; streamed Opus puts out pages early; a cancelled file
 * leaves nothing behind. */
#include <math.h>
#include <sndfile.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "aac_decode.h"
#include "base/buf.h"
#include "io/audio_sink.h"
#include "io/file.h"
#include "test.h"

#define RATE 22050
#define N 30000

static void make_tone(float *x) {
    for (int i = 0; i < N; i++) x[i] = 0.5f * sinf(2 * (float)M_PI * 440.0f * (float)i / RATE);
}

static void write_file(gp_audio_format f, const char *path, const float *x) {
    gp_audio_sink *s;
    gp_error err;
    REQUIRE_OK(gp_audio_sink_open_file(path, f, RATE, &s, &err), &err);
    /* odd chunk sizes, like frames arriving */
    for (int i = 0; i < N; i += 1000)
        REQUIRE_OK(gp_audio_sink_write(s, x + i, N - i < 1000 ? N - i : 1000, &err), &err);
    REQUIRE_OK(gp_audio_sink_close(s, true, &err), &err);
}

static float *read_back(const char *path, int *rate, sf_count_t *frames) {
    SF_INFO info;
    memset(&info, 0, sizeof info);
    SNDFILE *sf = sf_open(path, SFM_READ, &info);
    if (!sf) return NULL;
    if (info.frames <= 0 || info.frames > 10 * N) info.frames = 10 * N;
    float *y = calloc((size_t)info.frames + 4096, sizeof(float));
    *frames = sf_readf_float(sf, y, info.frames + 4096);
    *rate = info.samplerate;
    CHECK_EQ_INT(info.channels, 1);
    sf_close(sf);
    return y;
}

TEST(audio_sink_lossless_formats_round_trip) {
    float x[N];
    make_tone(x);
    const struct {
        gp_audio_format f;
        const char *name;
        double tol;
    } cases[] = {{GP_AUDIO_WAV16, "a.wav", 1.0 / 32767},
                 {GP_AUDIO_WAV_FLOAT, "b.wav", 0},
                 {GP_AUDIO_FLAC, "c.flac", 1.0 / 32767}};
    for (size_t k = 0; k < 3; k++) {
        write_file(cases[k].f, test_tmp(cases[k].name), x);
        int rate;
        sf_count_t frames;
        float *y = read_back(test_tmp(cases[k].name), &rate, &frames);
        REQUIRE_MSG(y, "cannot read back %s", cases[k].name);
        CHECK_EQ_INT(rate, RATE);
        CHECK_EQ_INT(frames, N);
        double d = test_max_abs_diff(x, y, N);
        CHECK_MSG(d <= cases[k].tol + 1e-7, "%s: max diff %g", cases[k].name, d);
        free(y);
    }
}

TEST(audio_sink_lossy_formats_decode) {
    float x[N];
    make_tone(x);
    const struct {
        gp_audio_format f;
        const char *name;
    } cases[] = {{GP_AUDIO_OPUS, "a.opus"}, {GP_AUDIO_MP3, "b.mp3"}};
    for (size_t k = 0; k < 2; k++) {
        write_file(cases[k].f, test_tmp(cases[k].name), x);
        int rate;
        sf_count_t frames;
        float *y = read_back(test_tmp(cases[k].name), &rate, &frames);
        REQUIRE_MSG(y, "cannot decode %s", cases[k].name);
        test_note("%s: %lld frames at %d Hz", cases[k].name, (long long)frames, rate);
        /* decoders add/trim a little padding; the length in seconds must match */
        double seconds = (double)frames / rate;
        CHECK_MSG(fabs(seconds - (double)N / RATE) < 0.1, "%s: %.3f s", cases[k].name, seconds);
        double energy = 0;
        for (sf_count_t i = 0; i < frames; i++) energy += (double)y[i] * y[i];
        CHECK(energy / (double)frames > 0.05); /* the tone survived (rms ~0.35) */
        free(y);
    }
}

static int collect(const void *data, size_t len, void *user) {
    return gp_buf_append(user, data, len);
}

TEST(audio_sink_streamed_wav_and_pcm) {
    float x[100];
    for (int i = 0; i < 100; i++) x[i] = (float)i / 100.0f - 0.5f;
    gp_buf b;
    gp_buf_init(&b);
    gp_audio_sink *s;
    gp_error err;
    REQUIRE_OK(gp_audio_sink_open_stream(collect, &b, GP_AUDIO_WAV16, RATE, &s, &err), &err);
    REQUIRE_OK(gp_audio_sink_write(s, x, 100, &err), &err);
    REQUIRE_OK(gp_audio_sink_close(s, true, &err), &err);
    CHECK_EQ_INT(b.len, 44 + 200);
    CHECK(memcmp(b.data,
                 "RIFF\xff\xff\xff\xff"
                 "WAVE",
                 12) == 0);
    CHECK(memcmp(b.data + 36, "data\xff\xff\xff\xff", 8) == 0);
    gp_buf_clear(&b);
    REQUIRE_OK(gp_audio_sink_open_stream(collect, &b, GP_AUDIO_PCM16, RATE, &s, &err), &err);
    REQUIRE_OK(gp_audio_sink_write(s, x, 100, &err), &err);
    REQUIRE_OK(gp_audio_sink_close(s, true, &err), &err);
    CHECK_EQ_INT(b.len, 200);
    int16_t first;
    memcpy(&first, b.data, 2);
    CHECK_EQ_INT(first, -16384); /* -0.5 * 32767 rounded */
    gp_buf_free(&b);
}

TEST(audio_sink_abort_leaves_no_file) {
    gp_audio_sink *s;
    gp_error err;
    float x[10] = {0};
    REQUIRE_OK(gp_audio_sink_open_file(test_tmp("gone.wav"), GP_AUDIO_WAV16, RATE, &s, &err), &err);
    REQUIRE_OK(gp_audio_sink_write(s, x, 10, &err), &err);
    REQUIRE_OK(gp_audio_sink_close(s, false, &err), &err);
    CHECK(!gp_path_exists(test_tmp("gone.wav")));
    /* no temporaries left either */
    test_cmd_result r;
    const char *ls[] = {"ls", "-A", test_tmpdir(), NULL};
    REQUIRE(test_run_program(&r, NULL, 0, 10, ls) == 0);
    CHECK_MSG(r.out_len == 0, "left over: %s", r.out);
    test_cmd_result_free(&r);
    const char *why = NULL;
    CHECK(gp_audio_format_parse("aac", &why) == GP_AUDIO_AAC && !why);
    CHECK(gp_audio_format_parse("vorbis", &why) < 0);
    CHECK(gp_audio_format_from_path("x.FLAC") == GP_AUDIO_FLAC);
    CHECK(gp_audio_format_from_path("x.aac") == GP_AUDIO_AAC);
    CHECK(strcmp(gp_audio_format_mime(GP_AUDIO_AAC), "audio/aac") == 0);
}

/* The largest granule position of the complete Ogg pages in `b` (0: only
 * header pages so far). */
static long long ogg_last_granule(const gp_buf *b) {
    long long last = 0;
    const unsigned char *p = (const unsigned char *)b->data;
    for (size_t i = 0; b->len >= 27 && i + 27 <= b->len;) {
        if (memcmp(p + i, "OggS", 4) != 0) break;
        int segs = p[i + 26];
        if (i + 27 + (size_t)segs > b->len) break;
        size_t body = 0;
        for (int k = 0; k < segs; k++) body += p[i + 27 + k];
        if (i + 27 + segs + body > b->len) break;
        long long g = 0;
        for (int k = 7; k >= 0; k--) g = (g << 8) | p[i + 6 + k];
        if (g > last) last = g;
        i += 27 + segs + body;
    }
    return last;
}

/* OpenAI recommends streamed opus for low latency: a streamed sink must put
 * out an audio page soon after the first audio, not hold back seconds of it
 * (libopusenc's default decision and muxing delays held ~2.7 s). */
TEST(audio_sink_streamed_opus_pages_come_early) {
    float x[1024];
    for (int i = 0; i < 1024; i++) x[i] = 0.3f * sinf(2 * (float)M_PI * 220.0f * (float)i / RATE);
    gp_buf b;
    gp_buf_init(&b);
    gp_audio_sink *s;
    gp_error err;
    REQUIRE_OK(gp_audio_sink_open_stream(collect, &b, GP_AUDIO_OPUS, RATE, &s, &err), &err);
    int frames = 0;
    while (ogg_last_granule(&b) == 0 && frames < 200) {
        REQUIRE_OK(gp_audio_sink_write(s, x, 1024, &err), &err); /* one codec frame, 46 ms */
        frames++;
    }
    double held_ms = frames * 1024 * 1000.0 / RATE;
    test_note("first audio page after %d frames (%.0f ms of audio)", frames, held_ms);
    /* 50 ms of page interval, the encoder's lookahead, whole 46 ms frames */
    CHECK_MSG(held_ms <= 150, "the first audio page came after %.0f ms of audio", held_ms);
    REQUIRE_OK(gp_audio_sink_close(s, true, &err), &err);
    gp_buf_free(&b);
}

/* The power of frequency f in x (Goertzel). */
static double tone_power(const float *x, size_t n, double f, int rate) {
    double w = 2 * M_PI * f / rate, c = 2 * cos(w), s1 = 0, s2 = 0;
    for (size_t i = 0; i < n; i++) {
        double s0 = x[i] + c * s1 - s2;
        s2 = s1;
        s1 = s0;
    }
    return (s1 * s1 + s2 * s2 - c * s1 * s2) / ((double)n * n);
}

/* OpenAI's response_format "aac": ADTS frames that libavcodec's own decoder
 * reads back (mono AAC-LC, the sink's rate, the length, the tone), and the
 * first frame is out after at most three 1024-sample frames of input. */
TEST(audio_sink_aac_decodes) {
    float x[N];
    make_tone(x);
    const int rates[] = {RATE, 24000};
    for (int r = 0; r < 2; r++) {
        gp_buf b;
        gp_buf_init(&b);
        gp_audio_sink *s;
        gp_error err;
        REQUIRE_OK(gp_audio_sink_open_stream(collect, &b, GP_AUDIO_AAC, rates[r], &s, &err), &err);
        int first_after = -1;
        for (int i = 0; i < N; i += 1000) {
            REQUIRE_OK(gp_audio_sink_write(s, x + i, N - i < 1000 ? N - i : 1000, &err), &err);
            if (first_after < 0 && b.len > 0) first_after = i + 1000;
        }
        REQUIRE_OK(gp_audio_sink_close(s, true, &err), &err);
        REQUIRE(b.len > 7);
        /* ADTS sync word, MPEG-4, no CRC */
        CHECK((unsigned char)b.data[0] == 0xFF && ((unsigned char)b.data[1] & 0xF6) == 0xF0);
        size_t n = 0;
        test_aac_info info;
        float *y = test_aac_decode(b.data, b.len, &n, &info);
        REQUIRE_MSG(y, "libavcodec decoded nothing from %zu bytes", b.len);
        double rms = 0;
        for (size_t i = 0; i < n; i++) rms += (double)y[i] * y[i];
        rms = sqrt(rms / (double)n);
        /* the 440 Hz tone of 22050 Hz samples played at rates[r] */
        double f = 440.0 * rates[r] / RATE;
        double at = tone_power(y, n, f, rates[r]), off = tone_power(y, n, 2.3 * f, rates[r]);
        test_note("%d Hz: %zu bytes, %d ADTS frames (%d refused), %zu samples decoded at %d Hz, "
                  "%d channel(s), rms %.3f, tone / 2.3 x tone power %.3g, first bytes after %d "
                  "samples",
                  rates[r], b.len, info.frames, info.bad_frames, n, info.rate, info.channels, rms,
                  at / (off + 1e-30), first_after);
        CHECK_EQ_INT(info.rate, rates[r]);
        CHECK_EQ_INT(info.channels, 1);
        CHECK_EQ_INT(info.profile, 1); /* FF_PROFILE_AAC_LOW */
        CHECK_EQ_INT(info.bad_frames, 0);
        /* the encoder's 1024-sample priming and the last frame's padding:
         * between N and N + 2048 */
        CHECK_MSG(n >= N && n <= N + 2048, "%zu samples for %d", n, N);
        CHECK(fabs(rms - 0.5 / sqrt(2)) < 0.05); /* the 0.5-amplitude tone (rms 0.354) */
        CHECK(at > 1000 * off);                  /* ... at its frequency */
        CHECK_MSG(first_after > 0 && first_after <= 3000, "first ADTS frame after %d samples",
                  first_after);
        free(y);
        gp_buf_free(&b);
    }
    /* and to a file, by extension */
    write_file(GP_AUDIO_AAC, test_tmp("a.aac"), x);
    size_t len = 0;
    char *bytes = NULL;
    gp_error rerr;
    CHECK(gp_read_file(test_tmp("a.aac"), 1 << 24, &bytes, &len, &rerr) == 0);
    size_t n = 0;
    test_aac_info info;
    float *y = bytes ? test_aac_decode(bytes, len, &n, &info) : NULL;
    CHECK_MSG(y && n >= N && info.rate == RATE, "a.aac: %zu samples", n);
    free(y);
    free(bytes);
    /* AAC has no 23456 Hz */
    gp_audio_sink *s = NULL;
    gp_error err;
    gp_buf b;
    gp_buf_init(&b);
    CHECK_ERR_CONTAINS(gp_audio_sink_open_stream(collect, &b, GP_AUDIO_AAC, 23456, &s, &err), &err,
                       "22050 or 24000");
    gp_buf_free(&b);
}

/* One stream of `n` samples in format f at `rate` (and `bit_rate`) into b. */
static void encode_stream(gp_buf *b, gp_audio_format f, int rate, int bit_rate, const float *x,
                          size_t n) {
    gp_audio_sink *s;
    gp_error err;
    gp_buf_clear(b);
    REQUIRE_OK(gp_audio_sink_open_stream_at(collect, b, f, rate, bit_rate, &s, &err), &err);
    for (size_t i = 0; i < n; i += 1000)
        REQUIRE_OK(gp_audio_sink_write(s, x + i, n - i < 1000 ? n - i : 1000, &err), &err);
    REQUIRE_OK(gp_audio_sink_close(s, true, &err), &err);
}

/* G.711 (telephony's 8-bit mu-law and A-law, raw or in WAV): the codes the
 * ITU-T standard gives for silence and both full scales (a sample past full
 * scale or NaN is clipped first), the WAVE format tags 7 and 6 with 8-bit
 * samples, and a tone read back by libsndfile within G.711's quantisation
 * (~38 dB SNR for a loud signal; 30 dB asserted). */
TEST(audio_sink_g711_codes_and_round_trip) {
    const float edge[5] = {0.0f, 1.0f, -1.0f, 2.0f, NAN};
    const unsigned char mu[5] = {0xFF, 0x80, 0x00, 0x80, 0xFF};
    const unsigned char a[5] = {0xD5, 0xAA, 0x2A, 0xAA, 0xD5};
    gp_buf b;
    gp_buf_init(&b);
    encode_stream(&b, GP_AUDIO_MULAW, 8000, 0, edge, 5);
    REQUIRE(b.len == 5);
    CHECK(memcmp(b.data, mu, 5) == 0);
    encode_stream(&b, GP_AUDIO_ALAW, 8000, 0, edge, 5);
    REQUIRE(b.len == 5);
    CHECK(memcmp(b.data, a, 5) == 0);
    /* streamed WAV: unknown sizes, format 6, 8 bits, a byte a sample */
    encode_stream(&b, GP_AUDIO_WAV_ALAW, 8000, 0, edge, 5);
    REQUIRE(b.len == 44 + 5);
    const unsigned char *h = (const unsigned char *)b.data;
    CHECK(memcmp(h + 4, "\xff\xff\xff\xff", 4) == 0 && h[20] == 6 && h[34] == 8 && h[32] == 1);
    CHECK(memcmp(h + 44, a, 5) == 0);
    gp_buf_free(&b);

    float x[N];
    make_tone(x);
    const gp_audio_format fmts[2] = {GP_AUDIO_WAV_MULAW, GP_AUDIO_WAV_ALAW};
    for (int k = 0; k < 2; k++) {
        const char *path = test_tmp(k ? "a-law.wav" : "mu-law.wav");
        write_file(fmts[k], path, x);
        int rate;
        sf_count_t frames;
        float *y = read_back(path, &rate, &frames);
        REQUIRE_MSG(y, "libsndfile cannot read %s", path);
        CHECK_EQ_INT(rate, RATE);
        CHECK_EQ_INT(frames, N);
        double sig = 0, noise = 0;
        for (int i = 0; i < N; i++) {
            sig += (double)x[i] * x[i];
            noise += ((double)y[i] - x[i]) * ((double)y[i] - x[i]);
        }
        double snr = 10 * log10(sig / (noise + 1e-30));
        test_note("%s: %.1f dB against the input", path, snr);
        CHECK_MSG(snr >= 30, "%s: %.1f dB", path, snr);
        free(y);
    }
    const char *why = NULL;
    CHECK(gp_audio_format_parse("ulaw", &why) == GP_AUDIO_MULAW);
    CHECK(gp_audio_format_parse("pcm_alaw", &why) == GP_AUDIO_ALAW);
    CHECK(gp_audio_format_from_path("call.ulaw") == GP_AUDIO_MULAW);
    CHECK(gp_audio_format_bits(GP_AUDIO_WAV_MULAW) == 8);
    CHECK(strcmp(gp_audio_format_mime(GP_AUDIO_MULAW), "audio/PCMU") == 0);
}

/* A lossy stream's bit rate is what was asked: ~bit_rate/8 bytes a second
 * of MP3 (LAME's CBR frames; ±10 % for the frames at both ends), and a
 * rate MPEG-2 Layer III lacks is rounded to one it has. */
TEST(audio_sink_mp3_bit_rates) {
    const int rate = 24000;
    float *x = malloc(sizeof(float) * 2 * rate);
    for (int i = 0; i < 2 * rate; i++)
        x[i] = 0.4f * sinf(2 * (float)M_PI * 300.0f * (float)i / rate);
    gp_buf b;
    gp_buf_init(&b);
    /* 192 kbit/s is past MPEG-2's 160 at 24 kHz */
    const int bit_rates[4] = {32000, 64000, 128000, 192000},
              made[4] = {32000, 64000, 128000, 160000};
    for (int k = 0; k < 4; k++) {
        encode_stream(&b, GP_AUDIO_MP3, rate, bit_rates[k], x, 2 * (size_t)rate);
        double expect = made[k] / 8.0 * 2;
        test_note("mp3 at %d bit/s: %zu bytes for 2 s", bit_rates[k], b.len);
        CHECK_MSG(fabs((double)b.len - expect) <= 0.1 * expect, "%d bit/s: %zu bytes", bit_rates[k],
                  b.len);
    }
    gp_audio_sink *s;
    gp_error err;
    CHECK(gp_audio_sink_open_stream_at(collect, &b, GP_AUDIO_MP3, rate, -5, &s, &err) != 0);
    CHECK(strstr(err.message, "bit rate") != NULL);
    gp_buf_free(&b);
    free(x);
}
