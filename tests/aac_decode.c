/* aac_decode.c — see aac_decode.h. */
#include "aac_decode.h"

#include "io/avcodec_runtime.h"

#include <stdlib.h>
#include <string.h>

static int append(float **out, size_t *n, size_t *cap, const AVFrame *f) {
    if (*n + (size_t)f->nb_samples > *cap) {
        size_t c = *cap ? *cap * 2 : 65536;
        while (c < *n + (size_t)f->nb_samples) c *= 2;
        float *p = realloc(*out, c * sizeof(float));
        if (!p) return -1;
        *out = p;
        *cap = c;
    }
    const float *src = (const float *)f->data[0]; /* FLTP: channel 0 */
    memcpy(*out + *n, src, (size_t)f->nb_samples * sizeof(float));
    *n += (size_t)f->nb_samples;
    return 0;
}

static void drain(const gp_av *av, AVCodecContext *ctx, AVFrame *frame, float **out, size_t *n,
                  size_t *cap, test_aac_info *info) {
    while (av->avcodec_receive_frame(ctx, frame) == 0) {
        info->rate = frame->sample_rate;
        info->channels = frame->ch_layout.nb_channels;
        if (frame->format == AV_SAMPLE_FMT_FLTP) append(out, n, cap, frame);
        av->av_frame_unref(frame);
    }
}

float *test_aac_decode(const void *data, size_t len, size_t *n, test_aac_info *info) {
    memset(info, 0, sizeof *info);
    *n = 0;
    gp_error err;
    const gp_av *av = gp_av_get(&err);
    if (!av) return NULL;
    const AVCodec *codec = av->avcodec_find_decoder(AV_CODEC_ID_AAC);
    AVCodecParserContext *parser = av->av_parser_init(AV_CODEC_ID_AAC);
    AVCodecContext *ctx = codec ? av->avcodec_alloc_context3(codec) : NULL;
    AVPacket *pkt = av->av_packet_alloc();
    AVFrame *frame = av->av_frame_alloc();
    float *out = NULL;
    size_t cap = 0;
    if (!parser || !ctx || !pkt || !frame || av->avcodec_open2(ctx, codec, NULL) < 0) goto done;
    /* the parser wants padded input */
    unsigned char *buf = calloc(len + AV_INPUT_BUFFER_PADDING_SIZE, 1);
    if (!buf) goto done;
    memcpy(buf, data, len);
    const unsigned char *p = buf;
    size_t left = len;
    for (;;) {
        uint8_t *frame_data = NULL;
        int frame_size = 0;
        int used = av->av_parser_parse2(parser, ctx, &frame_data, &frame_size, p, (int)left,
                                        AV_NOPTS_VALUE, AV_NOPTS_VALUE, 0);
        if (used < 0) break;
        p += used;
        left -= (size_t)used;
        if (frame_size > 0) {
            info->frames++;
            pkt->data = frame_data;
            pkt->size = frame_size;
            if (av->avcodec_send_packet(ctx, pkt) < 0) info->bad_frames++;
            drain(av, ctx, frame, &out, n, &cap, info);
        }
        if (left == 0 && frame_size == 0) break; /* parser flushed */
    }
    av->avcodec_send_packet(ctx, NULL);
    drain(av, ctx, frame, &out, n, &cap, info);
    info->profile = ctx->profile;
    free(buf);
done:
    av->av_frame_free(&frame);
    av->av_packet_free(&pkt);
    av->avcodec_free_context(&ctx);
    if (parser) av->av_parser_close(parser);
    if (*n == 0) {
        free(out);
        out = NULL;
    }
    return out;
}
