/* avcodec_runtime.h — FFmpeg's libavcodec / libavutil opened at run time.
 *
 * Only the `aac` response format needs FFmpeg, and libavcodec drags in a
 * hundred-odd megabytes of codec libraries; so, as with the CUDA plugin,
 * nothing links it: the first AAC request dlopens the libraries this build's
 * headers belong to (libavcodec.so.MAJOR, libavutil.so.MAJOR) and resolves
 * the few functions below. Without them an AAC request gets a clear error
 * and every other format works as before. Struct layouts come from the
 * headers, so the major versions must match (the SONAMEs say so). */
#ifndef GP_IO_AVCODEC_RUNTIME_H
#define GP_IO_AVCODEC_RUNTIME_H

#include <libavcodec/avcodec.h>
#include <libavutil/channel_layout.h>
#include <libavutil/frame.h>
#include <libavutil/log.h>

#include "base/error.h"

/* X(library, return type, name, parameter list) */
#define GP_AV_FUNCTIONS(X)                                                                         \
    X(codec, const AVCodec *, avcodec_find_encoder_by_name, (const char *))                        \
    X(codec, const AVCodec *, avcodec_find_decoder, (enum AVCodecID))                              \
    X(codec, AVCodecContext *, avcodec_alloc_context3, (const AVCodec *))                          \
    X(codec, int, avcodec_open2, (AVCodecContext *, const AVCodec *, AVDictionary **))             \
    X(codec, void, avcodec_free_context, (AVCodecContext **))                                      \
    X(codec, int, avcodec_send_frame, (AVCodecContext *, const AVFrame *))                         \
    X(codec, int, avcodec_receive_packet, (AVCodecContext *, AVPacket *))                          \
    X(codec, int, avcodec_send_packet, (AVCodecContext *, const AVPacket *))                       \
    X(codec, int, avcodec_receive_frame, (AVCodecContext *, AVFrame *))                            \
    X(codec, AVPacket *, av_packet_alloc, (void))                                                  \
    X(codec, void, av_packet_free, (AVPacket **))                                                  \
    X(codec, void, av_packet_unref, (AVPacket *))                                                  \
    X(codec, AVCodecParserContext *, av_parser_init, (int))                                        \
    X(codec, int, av_parser_parse2,                                                                \
      (AVCodecParserContext *, AVCodecContext *, uint8_t **, int *, const uint8_t *, int, int64_t, \
       int64_t, int64_t))                                                                          \
    X(codec, void, av_parser_close, (AVCodecParserContext *))                                      \
    X(util, AVFrame *, av_frame_alloc, (void))                                                     \
    X(util, void, av_frame_free, (AVFrame **))                                                     \
    X(util, int, av_frame_get_buffer, (AVFrame *, int))                                            \
    X(util, int, av_frame_make_writable, (AVFrame *))                                              \
    X(util, void, av_frame_unref, (AVFrame *))                                                     \
    X(util, void, av_channel_layout_default, (AVChannelLayout *, int))                             \
    X(util, int, av_log_get_level, (void))                                                         \
    X(util, void, av_log_set_level, (int))                                                         \
    X(util, int, av_strerror, (int, char *, size_t))

#define GP_AV_FIELD(lib, ret, name, params) ret(*name) params;
typedef struct gp_av {
    GP_AV_FUNCTIONS(GP_AV_FIELD)
} gp_av;
#undef GP_AV_FIELD

/* The functions, loaded once; NULL with a message saying what to install. */
const gp_av *gp_av_get(gp_error *err);

#endif
