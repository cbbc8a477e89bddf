/* realtime_note.c — see realtime_note.h. */
#include "engine/realtime_note.h"

#include <stdio.h>
#include <string.h>

#include "compute/matrix.h"

bool gp_realtime_note(char *buf, size_t size, const gepard_synth_result *r, const char *device,
                      gepard_weight_format weights) {
    if (r->audio_seconds < 1.0 || r->rtf <= 1.0 || !device || strcmp(device, "cpu") != 0)
        return false;
    const char *now = weights == GEPARD_WEIGHTS_DEFAULT
                          ? "bf16"
                          : gp_weight_format_name((gp_weight_format)weights);
    const char *hint = weights == GEPARD_WEIGHTS_Q4
                           ? "give it more cores (--threads) or a GPU (--device cuda)"
                       : weights == GEPARD_WEIGHTS_INT8
                           ? "--dtype q4 is faster still, at a larger accuracy cost"
                           : "--dtype int8 runs the language model ~1.6x faster at a small "
                             "accuracy cost";
    snprintf(buf, size,
             "note: this machine made the audio slower than real time (real-time factor %.2f "
             "with %s weights), so playing it as it arrives stutters; %s (README, \"Weight "
             "formats\")",
             r->rtf, now, hint);
    return true;
}
