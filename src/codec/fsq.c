/* fsq.c — FSQ code <-> value conversions (see fsq.h). */
#include "codec/fsq.h"

#include <math.h>

void gp_fsq_init(gp_fsq *fsq, const gp_codec_fsq_config *cfg) {
    fsq->num_groups = cfg->num_groups;
    fsq->n_levels = cfg->n_levels;
    fsq->channels = cfg->num_groups * cfg->n_levels;
    const float keep = (float)(1.0 - cfg->eps); /* PyTorch casts the Python scalar to f32 */
    int32_t base = 1;
    for (int d = 0; d < cfg->n_levels; d++) {
        int L = cfg->levels[d];
        fsq->levels[d] = L;
        fsq->half[d] = L / 2 > 1 ? L / 2 : 1;
        fsq->base[d] = base;
        base *= L;
        fsq->scale[d] = ((float)(L - 1) / 2.0f) * keep;
        fsq->offset[d] = L % 2 == 0 ? 0.5f : 0.0f;
        fsq->shift[d] = tanf(fsq->offset[d] / fsq->scale[d]);
    }
}

int gp_fsq_levels(const gp_fsq *fsq, int channel) { return fsq->levels[channel % fsq->n_levels]; }

int gp_fsq_check_codes(const gp_fsq *fsq, const int32_t *codes, size_t frames, gp_error *err) {
    for (size_t t = 0; t < frames; t++) {
        for (int c = 0; c < fsq->channels; c++) {
            int32_t k = codes[t * (size_t)fsq->channels + (size_t)c];
            int L = gp_fsq_levels(fsq, c);
            if (k < 0 || k >= L)
                return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT,
                               "code %d at frame %zu, channel %d is out of range: channel %d "
                               "(group %d, dimension %d) takes codes 0..%d",
                               (int)k, t, c, c, c / fsq->n_levels, c % fsq->n_levels, L - 1);
        }
    }
    return GEPARD_OK;
}

void gp_fsq_dequantize(const gp_fsq *fsq, const int32_t *codes, size_t frames, float *latent,
                       size_t ld) {
    for (int c = 0; c < fsq->channels; c++) {
        const float h = (float)fsq->half[c % fsq->n_levels];
        for (size_t t = 0; t < frames; t++)
            latent[(size_t)c * ld + t] =
                ((float)codes[t * (size_t)fsq->channels + (size_t)c] - h) / h;
    }
}

void gp_fsq_dequantize_frames(const gp_fsq *fsq, const int32_t *codes, size_t frames,
                              float *latent) {
    const size_t C = (size_t)fsq->channels;
    for (size_t t = 0; t < frames; t++) {
        for (size_t c = 0; c < C; c++) {
            const float h = (float)fsq->half[c % (size_t)fsq->n_levels];
            latent[t * C + c] = ((float)codes[t * C + c] - h) / h;
        }
    }
}

float gp_fsq_compress(const gp_fsq *fsq, int channel, float x) {
    int d = channel % fsq->n_levels;
    return fsq->scale[d] * tanhf(x + fsq->shift[d]) - fsq->offset[d];
}

void gp_fsq_quantize(const gp_fsq *fsq, const float *latent, size_t ld, size_t frames,
                     int32_t *codes) {
    for (int c = 0; c < fsq->channels; c++) {
        int d = c % fsq->n_levels, L = fsq->levels[d];
        for (size_t t = 0; t < frames; t++) {
            float q = rintf(gp_fsq_compress(fsq, c, latent[(size_t)c * ld + t])); /* half-even */
            if (!(q == q)) q = 0.0f; /* NaN input (a broken encoder output): middle code */
            int k = (int)q + fsq->half[d];
            if (k < 0) k = 0; /* unreachable for finite input; guards NaN */
            if (k >= L) k = L - 1;
            codes[t * (size_t)fsq->channels + (size_t)c] = k;
        }
    }
}

void gp_fsq_pack(const gp_fsq *fsq, const int32_t *codes, size_t frames, int32_t *packed) {
    for (size_t t = 0; t < frames; t++) {
        for (int g = 0; g < fsq->num_groups; g++) {
            int32_t token = 0;
            for (int d = 0; d < fsq->n_levels; d++)
                token += codes[t * (size_t)fsq->channels + (size_t)(g * fsq->n_levels + d)] *
                         fsq->base[d];
            packed[t * (size_t)fsq->num_groups + (size_t)g] = token;
        }
    }
}
