/* audio_sink.h — streaming audio encoders: samples go in as they are
 * produced, encoded bytes come out to a file or a write callback (stdout, an
 * HTTP response).
 *
 * Formats: WAV (16-bit PCM, 32-bit float, or G.711 mu-law / A-law), raw
 * 16-bit little-endian PCM, raw float32, raw G.711 mu-law and A-law (8 bits
 * a sample, for telephony; libsndfile encodes them), FLAC (libFLAC), Ogg
 * Opus (libopusenc, which resamples to Opus's 48 kHz internally), MP3
 * (LAME) and AAC in ADTS (libavcodec; io/aac_encoder.h). A WAV sent to a
 * stream cannot be
 * patched afterwards, so its header carries the 0xFFFFFFFF "unknown length"
 * sizes OpenAI's API also uses; a WAV written to a file gets exact sizes.
 * Files are written to a temporary and renamed on success, so a failed or
 * cancelled synthesis never leaves a file that looks complete; a device or
 * FIFO given as the file (/dev/null, /dev/stdout) is written in place, as a
 * stream. A failed write — also at the final flush — is an error naming the
 * path and the OS reason (gp_atomic_file in io/file.h).
 */
#ifndef GP_IO_AUDIO_SINK_H
#define GP_IO_AUDIO_SINK_H

#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"

typedef enum gp_audio_format {
    GP_AUDIO_WAV16 = 0,
    GP_AUDIO_WAV_FLOAT,
    GP_AUDIO_PCM16, /* raw s16le */
    GP_AUDIO_F32,   /* raw float32 le */
    GP_AUDIO_FLAC,
    GP_AUDIO_OPUS, /* Ogg Opus */
    GP_AUDIO_MP3,
    GP_AUDIO_AAC,       /* AAC-LC in ADTS frames (libavcodec's native encoder) */
    GP_AUDIO_MULAW,     /* raw G.711 mu-law, one byte a sample */
    GP_AUDIO_ALAW,      /* raw G.711 A-law */
    GP_AUDIO_WAV_MULAW, /* WAV (format 7) of G.711 mu-law */
    GP_AUDIO_WAV_ALAW,  /* WAV (format 6) of G.711 A-law */
} gp_audio_format;

/* "wav", "pcm", "f32", "flac", "opus"/"ogg", "mp3", "aac", "mulaw"/"ulaw",
 * "alaw" (and "wav-float", "wav-mulaw", "wav-alaw");
 * returns -1 for unknown names and sets *unsupported_reason for known but
 * unsupported ones (none at present). */
int gp_audio_format_parse(const char *name, const char **unsupported_reason);
/* From a file name's extension; -1 if none matches. */
int gp_audio_format_from_path(const char *path);
const char *gp_audio_format_name(gp_audio_format format);
const char *gp_audio_format_mime(gp_audio_format format);

/* Receives encoded bytes; returns 0, or non-zero to abort (client gone). */
typedef int (*gp_audio_write_fn)(const void *data, size_t len, void *user);

typedef struct gp_audio_sink gp_audio_sink;

int gp_audio_sink_open_file(const char *path, gp_audio_format format, int sample_rate,
                            gp_audio_sink **out, gp_error *err);
int gp_audio_sink_open_stream(gp_audio_write_fn write, void *user, gp_audio_format format,
                              int sample_rate, gp_audio_sink **out, gp_error *err);
/* The same with a bit rate in bits per second for the lossy formats (MP3,
 * Opus, AAC; 0: their default of 64000, 32000 and 64000); MP3's is rounded
 * by LAME to the nearest rate its MPEG version has at `sample_rate` (8-64
 * kbit/s at 8-12 kHz, 8-160 at 16-24 kHz, 32-320 at 32-48 kHz). Ignored for
 * the others. */
int gp_audio_sink_open_stream_at(gp_audio_write_fn write, void *user, gp_audio_format format,
                                 int sample_rate, int bit_rate, gp_audio_sink **out, gp_error *err);
/* True for the formats a bit rate applies to. */
bool gp_audio_format_is_lossy(gp_audio_format format);
/* Bits a sample of the uncompressed formats (16, 32, or 8 for G.711); 16
 * for the others (what their decoders give). */
int gp_audio_format_bits(gp_audio_format format);
/* Encode mono samples in [-1, 1] (values outside are clipped). */
int gp_audio_sink_write(gp_audio_sink *sink, const float *samples, size_t n, gp_error *err);
/* Flush the encoder; for files, commit (rename into place) when `commit` is
 * true, otherwise delete the partial file. Frees the sink. */
int gp_audio_sink_close(gp_audio_sink *sink, bool commit, gp_error *err);

#endif
