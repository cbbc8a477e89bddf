/* codec_paths.c — see codec_paths.h. */
#include "codec_paths.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "codec/synthetic.h"

/* Replace the first `from` in yaml by `to` (same buffer, room to spare). */
static void yaml_set(char *yaml, const char *from, const char *to) {
    char *p = strstr(yaml, from);
    if (!p) return;
    memmove(p + strlen(to), p + strlen(from), strlen(p + strlen(from)) + 1);
    memcpy(p, to, strlen(to));
}

gp_codec_source *codec_paths_source(int base, gp_error *err) {
    char yaml[4096], to[32];
    snprintf(yaml, sizeof yaml, "%s", gp_codec_nano_22khz_yaml);
    snprintf(to, sizeof to, "base_channels: %d", base);
    yaml_set(yaml, "base_channels: 24", "base_channels: 2");
    yaml_set(yaml, "base_channels: 864", to);
    gp_codec_source *src;
    return gp_codec_synthetic_source(yaml, 3, &src, err) ? NULL : src;
}

gp_codec *codec_paths_load(const gp_codec_source *src, gp_codec_kernels kernels,
                           const char *stage_types, int threads, gp_error *err) {
    gp_codec_options opt;
    gp_codec_options_default(&opt);
    opt.reference = kernels == GP_CODEC_KERNELS_REFERENCE;
    opt.kernels = kernels;
    opt.stage_types = stage_types;
    opt.n_threads = threads;
    gp_codec *c = NULL;
    gp_codec_load_source(src, &opt, &c, err);
    return c;
}

double codec_paths_snr(const float *ref, const float *x, size_t n) {
    double s = 0, e = 0;
    for (size_t i = 0; i < n; i++) {
        s += (double)ref[i] * ref[i];
        e += ((double)ref[i] - x[i]) * ((double)ref[i] - x[i]);
    }
    return isnan(e) ? -INFINITY : e > 0 ? 10 * log10(s / e) : INFINITY;
}
