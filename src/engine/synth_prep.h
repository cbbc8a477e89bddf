/* synth_prep.h — turning public synthesis parameters and text into what the
 * generator needs: gp_gen_params, checked UTF-8 text, layout ids, and the
 * context-length check. Shared by gepard_generate_codes and the engine. */
#ifndef GP_ENGINE_SYNTH_PREP_H
#define GP_ENGINE_SYNTH_PREP_H

#include "engine/api_internal.h"
#include "model/generate.h"

/* Convert and validate; draws a seed when params->random_seed is set. */
int gp_synth_params_convert(const gepard_synth_params *in, gp_gen_params *out, gp_error *err);

/* Tokenize `text` (len bytes) and build the layout. Fails on empty or
 * whitespace-only text, invalid UTF-8, and when prefix rows + layout +
 * max_frames exceed the model's context. *ids is malloc'ed. */
int gp_synth_layout(const gepard_model *model, const char *text, size_t len, int prefix_rows,
                    int max_frames, int32_t **ids, int *n_ids, gp_error *err);

#endif
