/* avcodec_runtime.c — opening libavcodec / libavutil at run time (see
 * avcodec_runtime.h). */
#include "io/avcodec_runtime.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define GP_AV_STR2(x) #x
#define GP_AV_STR(x) GP_AV_STR2(x)
#define GP_AV_CODEC_SONAME "libavcodec.so." GP_AV_STR(LIBAVCODEC_VERSION_MAJOR)
#define GP_AV_UTIL_SONAME "libavutil.so." GP_AV_STR(LIBAVUTIL_VERSION_MAJOR)

static pthread_once_t av_once = PTHREAD_ONCE_INIT;
static gp_av av_table;
static const gp_av *av_loaded;
static char av_error[512];

static void av_load(void) {
    void *util = dlopen(GP_AV_UTIL_SONAME, RTLD_NOW | RTLD_LOCAL);
    void *codec = util ? dlopen(GP_AV_CODEC_SONAME, RTLD_NOW | RTLD_LOCAL) : NULL;
    if (!util || !codec) {
        snprintf(av_error, sizeof av_error,
                 "AAC needs FFmpeg's %s, which is not installed (%s) — install it (Debian 12: "
                 "apt install libavcodec59) or ask for mp3 or opus",
                 util ? GP_AV_CODEC_SONAME : GP_AV_UTIL_SONAME, dlerror());
        return;
    }
    void *sym;
#define GP_AV_RESOLVE(lib, ret, name, params)                                                      \
    sym = dlsym(lib, #name);                                                                       \
    if (!sym) {                                                                                    \
        snprintf(av_error, sizeof av_error, "%s has no %s: the FFmpeg libraries do not match",     \
                 #lib[0] == 'c' ? GP_AV_CODEC_SONAME : GP_AV_UTIL_SONAME, #name);                  \
        return;                                                                                    \
    }                                                                                              \
    memcpy(&av_table.name, &sym, sizeof sym);
    GP_AV_FUNCTIONS(GP_AV_RESOLVE)
#undef GP_AV_RESOLVE
    av_loaded = &av_table;
}

const gp_av *gp_av_get(gp_error *err) {
    pthread_once(&av_once, av_load);
    if (!av_loaded) gp_fail(err, GEPARD_ERR_UNSUPPORTED, "%s", av_error);
    return av_loaded;
}
