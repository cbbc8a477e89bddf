/* log.c — the logger and progress line (see log.h). */
#include "base/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static int log_level = -1;     /* -1: not yet decided */
static int progress_mode = -1; /* -1: decide from isatty */
static bool progress_drawn;

static void log_init_locked(void) {
    if (log_level >= 0) return;
    const char *env = getenv("GEPARD_LOG");
    if (env && *env) {
        static const char *names[] = {"debug", "info", "warn", "error", "silent"};
        for (int i = 0; i < 5; i++)
            if (strcmp(env, names[i]) == 0) log_level = i;
        if (log_level >= 0) return;
    }
    log_level = isatty(STDERR_FILENO) ? GP_LOG_INFO : GP_LOG_WARN;
}

void gp_log_set_level(gp_log_level level) {
    pthread_mutex_lock(&log_lock);
    log_level = (int)level;
    pthread_mutex_unlock(&log_lock);
}

gp_log_level gp_log_get_level(void) {
    pthread_mutex_lock(&log_lock);
    log_init_locked();
    int level = log_level;
    pthread_mutex_unlock(&log_lock);
    return (gp_log_level)level;
}

void gp_log(gp_log_level level, const char *fmt, ...) {
    pthread_mutex_lock(&log_lock);
    log_init_locked();
    if ((int)level >= log_level && level < GP_LOG_SILENT) {
        static const char *tags[] = {"debug: ", "", "warning: ", "error: "};
        if (progress_drawn) {
            fputs("\r\033[K", stderr);
        }
        fprintf(stderr, "gepard: %s", tags[level]);
        va_list ap;
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
        progress_drawn = false;
    }
    pthread_mutex_unlock(&log_lock);
}

bool gp_progress_enabled(void) {
    if (progress_mode < 0) return isatty(STDERR_FILENO) != 0;
    return progress_mode != 0;
}

void gp_progress_set_enabled(bool enabled) { progress_mode = enabled ? 1 : 0; }

void gp_progress(const char *fmt, ...) {
    if (!gp_progress_enabled()) return;
    pthread_mutex_lock(&log_lock);
    fputs("\r", stderr);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs("\033[K", stderr);
    fflush(stderr);
    progress_drawn = true;
    pthread_mutex_unlock(&log_lock);
}

void gp_progress_done(void) {
    pthread_mutex_lock(&log_lock);
    if (progress_drawn) {
        fputc('\n', stderr);
        progress_drawn = false;
    }
    pthread_mutex_unlock(&log_lock);
}
