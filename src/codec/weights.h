/* weights.h — building codec layers from a state dict, with shape checks and weight-norm
 * folding.
 *
 * NeMo wraps every convolution in weight normalisation; a state dict spells it in one of
 * three ways (CODEC.md §B.1), all accepted:
 *   <p>.conv.parametrizations.weight.original0 / original1   (g, v; torch >= 2.1)
 *   <p>.conv.weight_g / weight_v                              (older torch)
 *   <p>.conv.weight                                           (already folded)
 * and W = g * v / ||v||, the norm taken per index of dim 0 over the other dims, in double
 * (dim 0 is the OUTPUT channel of a Conv1d but the INPUT channel of a ConvTranspose1d). A
 * zero norm is a load error. Every tensor is checked against the shape the config implies;
 * a missing or mis-shaped one is an error naming it, the expected shape and the config
 * settings it came from. Weights of any float dtype are converted to f32.
 */
#ifndef GP_CODEC_WEIGHTS_H
#define GP_CODEC_WEIGHTS_H

#include "codec/source.h"
#include "compute/conv.h"

typedef struct gp_codec_loader {
    const gp_codec_source *src;
    const char *hint; /* the config settings shapes derive from, for messages */
    gp_error *err;
} gp_codec_loader;

/* Conv1d `prefix`: weight [c_out][c_in][kernel], bias [c_out]. */
int gp_codec_load_conv(const gp_codec_loader *ld, const char *prefix, int c_out, int c_in,
                       int kernel, int dilation, int stride, gp_conv1d *out);
/* ConvTranspose1d `prefix`: weight [c_in][c_out/groups][kernel], bias [c_out]. */
int gp_codec_load_convt(const gp_codec_loader *ld, const char *prefix, int c_in, int c_out,
                        int kernel, int stride, int groups, gp_convt1d *out);
/* CodecActivation `prefix` over `channels`: reads Snake alphas as the kind needs
 * (half_snake: <p>.activation.snake_act.alpha [1, C/2, 1]; snake: <p>.activation.alpha
 * [1, C, 1]). */
int gp_codec_load_act(const gp_codec_loader *ld, const char *prefix, gp_act_kind kind, int channels,
                      gp_act *out);

#endif
