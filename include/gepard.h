/* gepard.h — the public C API of libgepard, the Gepard text-to-speech engine.
 *
 * Shape (after whisper.h): opaque handles, parameter structs with a
 * *_default_params() function, functions returning a gepard_status and leaving
 * a human-readable message retrievable with gepard_last_error() (per thread).
 * The `gepard` command line tool and the HTTP server use only this header.
 *
 * This header grows as the engine does; every declaration in it is
 * implemented and tested.
 */
#ifndef GEPARD_H
#define GEPARD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GEPARD_VERSION "0.1.0"

typedef enum gepard_status {
    GEPARD_OK = 0,
    GEPARD_ERR_INVALID_ARGUMENT = 1, /* a parameter or the input text is unusable */
    GEPARD_ERR_IO = 2,               /* a file could not be read or written */
    GEPARD_ERR_FORMAT = 3,           /* a file is malformed or not what was expected */
    GEPARD_ERR_UNSUPPORTED = 4,      /* valid, but something this engine cannot run */
    GEPARD_ERR_NOMEM = 5,            /* an allocation failed */
    GEPARD_ERR_NETWORK = 6,          /* a download failed or the network is unreachable */
    GEPARD_ERR_NOT_FOUND = 7,        /* a file, tensor, repo or voice does not exist */
    GEPARD_ERR_CANCELLED = 8,        /* the caller cancelled the operation */
    GEPARD_ERR_AUTH = 9,             /* the server refused our credentials */
    GEPARD_ERR_BUSY = 10,            /* no capacity right now; try again later */
    GEPARD_ERR_INTERNAL = 11         /* a bug: please report it */
} gepard_status;

/* The library version string, e.g. "0.1.0". */
const char *gepard_version(void);

/* The message of the last failing call made by this thread ("" if none). */
const char *gepard_last_error(void);

/* Release a buffer returned by a gepard_* function (NULL is fine). */
void gepard_free(void *ptr);

/* ======================================================================== */
/* Codec: NVIDIA NanoCodec (NeMo AudioCodecModel) — codes <-> audio          */
/* ======================================================================== */
/*
 * A codec is loaded once and shared read-only by any number of threads. Codes
 * are int32 per-dimension FSQ codes, frame-major [n_frames][num_codebooks]
 * (Gepard's unfolded order: codebook c = group c / levels-per-group, dimension
 * c % levels-per-group). Audio is mono float in [-1, 1] at the codec's sample
 * rate; every frame is gepard_codec_samples_per_frame() samples.
 *
 * Accepted paths: a NeMo .nemo archive (tar or tar.gz); a .safetensors or torch
 * .ckpt state dict with model_config.yaml beside it; or a directory holding
 * model_config.yaml and model_weights.safetensors (or model_weights.ckpt).
 */
typedef struct gepard_codec gepard_codec;
typedef struct gepard_codec_stream gepard_codec_stream;

typedef struct gepard_codec_params {
    int n_threads;         /* threads for the convolution kernels; <= 1: the calling thread */
    int reference_kernels; /* 1: plain reference kernels (slow; for checking) */
} gepard_codec_params;

gepard_codec_params gepard_codec_default_params(void);
gepard_status gepard_codec_load(const char *path, gepard_codec **out);
gepard_status gepard_codec_load_with_params(const char *path, const gepard_codec_params *params,
                                            gepard_codec **out);
void gepard_codec_free(gepard_codec *codec);

int gepard_codec_sample_rate(const gepard_codec *codec);       /* e.g. 22050 */
int gepard_codec_samples_per_frame(const gepard_codec *codec); /* e.g. 1024 */
int gepard_codec_num_codebooks(const gepard_codec *codec);     /* e.g. 32 */
/* Number of distinct codes of codebook c (codes are 0 .. size-1); 0 if c is out of range. */
int gepard_codec_codebook_size(const gepard_codec *codec, int c);
int gepard_codec_num_groups(const gepard_codec *codec); /* packed indices per frame, e.g. 8 */

/* Decode n_frames frames of codes [n_frames][num_codebooks]; *pcm receives
 * n_frames * samples_per_frame samples (free with gepard_free). Out-of-range codes are an
 * error naming the frame, codebook, value and range. */
gepard_status gepard_codec_decode(const gepard_codec *codec, const int32_t *codes, size_t n_frames,
                                  float **pcm, size_t *n_samples);

/* Streaming decoder: push frames as they are produced, in chunks of any size; the
 * samples are identical to a one-shot decode of all frames. One stream per utterance
 * (reset to reuse it), used by one thread at a time; the stream owns its state. */
gepard_status gepard_codec_stream_create(const gepard_codec *codec, gepard_codec_stream **out);
/* pcm must hold n_frames * samples_per_frame floats. */
gepard_status gepard_codec_stream_push(gepard_codec_stream *stream, const int32_t *codes,
                                       size_t n_frames, float *pcm);
/* Same from dequantised latents [n_frames][num_codebooks] (frame-major). */
gepard_status gepard_codec_stream_push_latent(gepard_codec_stream *stream, const float *latent,
                                              size_t n_frames, float *pcm);
void gepard_codec_stream_reset(gepard_codec_stream *stream);
void gepard_codec_stream_free(gepard_codec_stream *stream);

/* Encode n mono samples at the codec's rate (zero-padded to whole frames). Outputs,
 * each freed with gepard_free: *codes [n_frames][num_codebooks]; *packed (optional,
 * NULL to skip) [n_frames][num_groups] NeMo group indices; *latent (optional)
 * [n_frames][num_codebooks] encoder output before quantisation. */
gepard_status gepard_codec_encode(const gepard_codec *codec, const float *pcm, size_t n,
                                  int32_t **codes, size_t *n_frames, int32_t **packed,
                                  float **latent);

/* A human-readable description of a model file (a codec, or any .safetensors /
 * torch checkpoint): *text is freed with gepard_free. */
gepard_status gepard_describe_file(const char *path, char **text);

#ifdef __cplusplus
}
#endif

#endif /* GEPARD_H */
