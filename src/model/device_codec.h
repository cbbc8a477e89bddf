/* device_codec.h — the codec's decoder on a device (today: a CUDA GPU through
 * the plugin of device_plugin.h). The loaded CPU decoder (with its f32
 * weights still unpacked: the BLAS or reference kernels) is described to the
 * plugin, and the codec then decodes every stream there (codec.h's
 * gp_codec_accel): same weights, same streaming semantics. */
#ifndef GP_MODEL_DEVICE_CODEC_H
#define GP_MODEL_DEVICE_CODEC_H

#include "codec/codec.h"
#include "model/device.h"

/* "f16" ("fp16"; the default, also for NULL, "" and "bf16"), "tf32" or "f32". */
int gp_device_codec_precision_parse(const char *text, gp_dev_codec_precision *out, gp_error *err);
/* "tf32", "f16" or "f32". */
const char *gp_device_codec_precision_name(gp_dev_codec_precision p);
/* Put `codec`'s decoder on the CUDA device of `spec` (kind must be CUDA). */
int gp_device_codec_attach(gp_codec *codec, const gp_device_spec *spec,
                           gp_dev_codec_precision precision, gp_error *err);

#endif
