/* hub_paths.c — local path or Hub repo id → local path (see hub_paths.h). */
#include "engine/hub_paths.h"

#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "io/file.h"
#include "io/hub.h"

static void progress_bridge(const char *what, uint64_t done, uint64_t total, void *user) {
    const gepard_load_params *p = user;
    if (p && p->progress) p->progress(what, done, total, p->progress_user);
}

static gp_hub_options hub_options(const gepard_load_params *p) {
    gp_hub_options o = gp_hub_default_options();
    if (p) {
        o.revision = p->revision;
        o.offline = p->offline != 0;
        o.token = p->token;
        if (p->progress) {
            o.progress = progress_bridge;
            o.progress_user = (void *)p;
        }
    }
    o.progress_bar = gp_progress_enabled();
    return o;
}

int gp_resolve_model_path(const char *path_or_repo, const gepard_load_params *params, char **dir,
                          gp_error *err) {
    gp_hub_options o = hub_options(params);
    return gp_hub_resolve_model(&o, path_or_repo, dir, err);
}

int gp_resolve_codec_path(const char *path_or_repo, const gepard_load_params *params, char **path,
                          gp_error *err) {
    *path = NULL;
    if (!path_or_repo || !*path_or_repo)
        return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT, "no codec path or repo id given");
    if (!gp_path_exists(path_or_repo) && !gp_hub_is_repo_id(path_or_repo))
        return gp_fail(err, GEPARD_ERR_NOT_FOUND,
                       "%s: No such file or directory — the codec is NVIDIA's NanoCodec: give "
                       "its .nemo file (nemo-nano-codec-22khz-1.89kbps-21.5fps.nemo), a "
                       "directory holding it, or the Hub repo id "
                       "nvidia/nemo-nano-codec-22khz-1.89kbps-21.5fps"
                       " to download it (what gepard say and serve use when no codec is named)",
                       path_or_repo);
    if (gp_path_exists(path_or_repo)) {
        *path = strdup(path_or_repo);
        return *path ? GEPARD_OK : gp_fail_oom(err, "path", strlen(path_or_repo));
    }
    const char *name = strchr(path_or_repo, '/') + 1;
    char file[512];
    snprintf(file, sizeof file, "%s.nemo", name);
    gp_hub_options o = hub_options(params);
    return gp_hub_resolve_file(&o, path_or_repo, file, path, err);
}
