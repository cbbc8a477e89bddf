/* config.h — NanoCodec architecture settings read from NeMo's model_config.yaml.
 *
 * Every width, rate, kernel and activation of the decoder
 * (CausalHiFiGANDecoder), encoder (HiFiGANEncoder or CausalHiFiGANEncoder) and
 * quantiser (GroupFiniteScalarQuantizer) comes from the YAML, with NeMo's class
 * defaults when a key is absent (CODEC.md §F.6); nothing assumes the published
 * checkpoint's sizes. gp_codec_config_parse also checks the settings against
 * each other (rate products = samples_per_frame, groups x levels = latent
 * width, ...); the tensor shapes are checked when the weights load.
 */
#ifndef GP_CODEC_CONFIG_H
#define GP_CODEC_CONFIG_H

#include <stdbool.h>

#include "base/error.h"
#include "compute/conv.h"
#include "io/yaml.h"

#define GP_CODEC_MAX_STAGES 8
#define GP_CODEC_MAX_KERNELS 8
#define GP_CODEC_MAX_LEVELS 8

typedef enum gp_codec_out_act { GP_CODEC_OUT_TANH, GP_CODEC_OUT_CLAMP } gp_codec_out_act;

typedef struct gp_codec_resblock_config {
    int n_kernels, kernels[GP_CODEC_MAX_KERNELS];
    int n_dilations, dilations[GP_CODEC_MAX_KERNELS];
} gp_codec_resblock_config;

typedef struct gp_codec_decoder_config {
    int input_dim, base_channels;
    int n_stages, rates[GP_CODEC_MAX_STAGES];
    int in_kernel, out_kernel;
    gp_codec_resblock_config res;
    gp_act_kind activation;
    gp_codec_out_act output_activation;
    bool groups_equal_out; /* n_groups_equal_to_out_channels */
} gp_codec_decoder_config;

typedef struct gp_codec_encoder_config {
    bool causal; /* CausalHiFiGANEncoder */
    int encoded_dim, base_channels;
    int n_stages, rates[GP_CODEC_MAX_STAGES];
    int in_kernel, out_kernel;
    gp_codec_resblock_config res;
    gp_act_kind activation;
    gp_pad_mode pad_mode;
} gp_codec_encoder_config;

typedef struct gp_codec_fsq_config {
    int num_groups;
    int n_levels, levels[GP_CODEC_MAX_LEVELS];
    double eps;
} gp_codec_fsq_config;

typedef struct gp_codec_config {
    int sample_rate, samples_per_frame;
    gp_codec_decoder_config dec;
    gp_codec_encoder_config enc;
    gp_codec_fsq_config fsq;
} gp_codec_config;

/* Read the settings from the model section of a parsed model_config.yaml (the document
 * root, or its top-level `model:` mapping when there is one). */
int gp_codec_config_parse(const gp_yaml_doc *doc, gp_codec_config *cfg, gp_error *err);
/* The mapping holding the model settings (root, or root.model when present). */
const gp_yaml_node *gp_codec_config_model_node(const gp_yaml_doc *doc);

const char *gp_codec_act_name(gp_act_kind kind);
const char *gp_codec_pad_name(gp_pad_mode mode);
/* Channels of decoder stage i's output (i = -1: after pre_conv). */
int gp_codec_decoder_channels(const gp_codec_decoder_config *dec, int stage);
/* Channels of encoder stage i's input (i = n_stages: the last stage's output). */
int gp_codec_encoder_channels(const gp_codec_encoder_config *enc, int stage);

#endif
