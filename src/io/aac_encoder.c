/* aac_encoder.c — FFmpeg's native AAC encoder behind the small interface of
 * aac_encoder.h. Samples collect into one 1024-sample frame; every packet
 * the encoder returns gets an ADTS header (ISO 14496-3, 1.A.2.2) and goes
 * to the write callback. No libavformat: the header is 7 bytes. */
#include "io/aac_encoder.h"

#include "io/avcodec_runtime.h"

#include <stdlib.h>
#include <string.h>

struct gp_aac_encoder {
    const gp_av *av; /* FFmpeg, opened at run time */
    AVCodecContext *ctx;
    AVFrame *frame;
    AVPacket *packet;
    int freq_index; /* ADTS sampling_frequency_index */
    int filled;     /* samples in `frame` */
    int64_t pts;
    gp_aac_write_fn write;
    void *user;
    unsigned char buf[7 + 8192]; /* one ADTS frame (an AAC frame is < 6144 bits per channel) */
};

static const int aac_rates[] = {96000, 88200, 64000, 48000, 44100, 32000, 24000,
                                22050, 16000, 12000, 11025, 8000,  7350};

int gp_aac_encoder_create(int rate, int bitrate, gp_aac_write_fn write, void *user,
                          gp_aac_encoder **out, gp_error *err) {
    *out = NULL;
    int index = -1;
    for (int i = 0; i < (int)(sizeof aac_rates / sizeof aac_rates[0]); i++)
        if (aac_rates[i] == rate) index = i;
    if (index < 0)
        return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT,
                       "AAC cannot carry %d Hz audio; use 22050 or 24000 Hz (AAC's rates run "
                       "from 7350 to 96000 Hz)",
                       rate);
    const gp_av *av = gp_av_get(err);
    if (!av) return GEPARD_ERR_UNSUPPORTED;
    /* The encoder reports statistics ("Qavg: ...") at the info level when
     * it closes; library code does not print. Errors still show. */
    if (av->av_log_get_level() > AV_LOG_ERROR) av->av_log_set_level(AV_LOG_ERROR);
    const AVCodec *codec = av->avcodec_find_encoder_by_name("aac");
    if (!codec)
        return gp_fail(err, GEPARD_ERR_UNSUPPORTED,
                       "this libavcodec has no native AAC encoder; use mp3 or opus instead");
    gp_aac_encoder *e = calloc(1, sizeof *e);
    if (!e) return gp_fail_oom(err, "AAC encoder", sizeof *e);
    e->av = av;
    e->freq_index = index;
    e->write = write;
    e->user = user;
    e->ctx = av->avcodec_alloc_context3(codec);
    e->frame = av->av_frame_alloc();
    e->packet = av->av_packet_alloc();
    if (!e->ctx || !e->frame || !e->packet) {
        gp_aac_encoder_free(e);
        return gp_fail_oom(err, "AAC encoder", 0);
    }
    e->ctx->sample_fmt = AV_SAMPLE_FMT_FLTP;
    e->ctx->sample_rate = rate;
    e->ctx->bit_rate = bitrate;
    e->ctx->profile = FF_PROFILE_AAC_LOW;
    e->ctx->time_base = (AVRational){1, rate};
    av->av_channel_layout_default(&e->ctx->ch_layout, 1);
    int rc = av->avcodec_open2(e->ctx, codec, NULL);
    if (rc < 0) {
        char why[AV_ERROR_MAX_STRING_SIZE] = "";
        av->av_strerror(rc, why, sizeof why);
        gp_aac_encoder_free(e);
        return gp_fail(err, GEPARD_ERR_INTERNAL, "cannot start the AAC encoder at %d Hz: %s", rate,
                       why);
    }
    e->frame->format = AV_SAMPLE_FMT_FLTP;
    e->frame->sample_rate = rate;
    e->frame->nb_samples = e->ctx->frame_size > 0 ? e->ctx->frame_size : 1024;
    av->av_channel_layout_default(&e->frame->ch_layout, 1);
    if (av->av_frame_get_buffer(e->frame, 0) < 0) {
        gp_aac_encoder_free(e);
        return gp_fail_oom(err, "AAC frame", 0);
    }
    *out = e;
    return GEPARD_OK;
}

/* The 7-byte ADTS header of an AAC-LC mono frame of `payload` bytes. */
static void adts_header(unsigned char h[7], int freq_index, size_t payload) {
    size_t len = payload + 7;
    h[0] = 0xFF;
    h[1] = 0xF1;                                             /* sync, MPEG-4, layer 0, no CRC */
    h[2] = (unsigned char)((1 << 6) | (freq_index << 2));    /* profile LC (object type 2 - 1) */
    h[3] = (unsigned char)((1 << 6) | ((len >> 11) & 0x03)); /* channel configuration 1 */
    h[4] = (unsigned char)((len >> 3) & 0xFF);
    h[5] = (unsigned char)(((len & 0x07) << 5) | 0x1F); /* buffer fullness 0x7FF: VBR */
    h[6] = 0xFC;
}

/* Send `frame` (NULL: end of input) and write every packet that comes out. */
static int encode(gp_aac_encoder *e, AVFrame *frame) {
    const gp_av *av = e->av;
    if (av->avcodec_send_frame(e->ctx, frame) < 0) return -1;
    for (;;) {
        int rc = av->avcodec_receive_packet(e->ctx, e->packet);
        if (rc == AVERROR(EAGAIN) || rc == AVERROR_EOF) return 0;
        if (rc < 0) return -1;
        size_t n = (size_t)e->packet->size;
        if (n > sizeof e->buf - 7) {
            av->av_packet_unref(e->packet);
            return -1;
        }
        adts_header(e->buf, e->freq_index, n);
        memcpy(e->buf + 7, e->packet->data, n);
        av->av_packet_unref(e->packet);
        if (e->write(e->buf, n + 7, e->user)) return -1;
    }
}

static int send_filled(gp_aac_encoder *e) {
    e->frame->nb_samples = e->filled;
    e->frame->pts = e->pts;
    e->pts += e->filled;
    e->filled = 0;
    return encode(e, e->frame);
}

int gp_aac_encoder_write(gp_aac_encoder *e, const float *x, size_t n) {
    const gp_av *av = e->av;
    int size = e->ctx->frame_size > 0 ? e->ctx->frame_size : 1024;
    while (n > 0) {
        /* the encoder may still hold the last frame's buffer */
        if (e->filled == 0 && av->av_frame_make_writable(e->frame) < 0) return -1;
        e->frame->nb_samples = size;
        float *dst = (float *)e->frame->data[0];
        size_t m = (size_t)(size - e->filled) < n ? (size_t)(size - e->filled) : n;
        for (size_t i = 0; i < m; i++) {
            float v = x[i];
            dst[e->filled + (int)i] = v != v ? 0.0f : v > 1 ? 1.0f : v < -1 ? -1.0f : v;
        }
        e->filled += (int)m;
        x += m;
        n -= m;
        if (e->filled == size && send_filled(e)) return -1;
    }
    return 0;
}

int gp_aac_encoder_finish(gp_aac_encoder *e) {
    if (e->filled > 0 && send_filled(e)) return -1;
    return encode(e, NULL);
}

void gp_aac_encoder_free(gp_aac_encoder *e) {
    if (!e) return;
    const gp_av *av = e->av;
    av->avcodec_free_context(&e->ctx);
    av->av_frame_free(&e->frame);
    av->av_packet_free(&e->packet);
    free(e);
}
