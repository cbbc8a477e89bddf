/* hub_paths.h — turning what a user passes as --model / --codec (a local
 * path or a Hugging Face repo id) into a local path, downloading into the HF
 * cache when needed. */
#ifndef GP_ENGINE_HUB_PATHS_H
#define GP_ENGINE_HUB_PATHS_H

#include "base/error.h"
#include "gepard.h"

/* A model directory: local paths pass through, repo ids are downloaded. */
int gp_resolve_model_path(const char *path_or_repo, const gepard_load_params *params, char **dir,
                          gp_error *err);
/* A codec file: local paths pass through; for a repo id "org/name" the file
 * "name.nemo" is downloaded. */
int gp_resolve_codec_path(const char *path_or_repo, const gepard_load_params *params, char **path,
                          gp_error *err);

#endif
