/* access_log.c — one line per request (--access-log plain|json), to stderr
 * or --access-log-file: when, request id, method, route, status, voice,
 * frames, time to first audio and the whole duration. A request records
 * its fields as it goes (gp_http_request.log); the line is written when the
 * request ends (server.c) or, for a streamed answer, when its stream is
 * freed (speech_job.c), so frames and TTFA are the final ones. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/timing.h"
#include "io/json.h"
#include "server/server_internal.h"

int gp_access_log_open(gp_server *s, gp_error *err) {
    s->access_log = NULL;
    if (s->params.access_log == GP_ACCESS_LOG_OFF) return GEPARD_OK;
    pthread_mutex_init(&s->access_log_lock, NULL);
    s->access_log_lock_ready = true;
    const char *path = s->params.access_log_file;
    if (!path || !*path || strcmp(path, "-") == 0) {
        s->access_log = stderr;
        return GEPARD_OK;
    }
    s->access_log = fopen(path, "a");
    if (!s->access_log)
        return gp_fail(err, GEPARD_ERR_IO,
                       "cannot open the access log %s for appending — does its directory exist "
                       "and may this user write there?",
                       path);
    s->access_log_owned = true;
    return GEPARD_OK;
}

void gp_access_log_close(gp_server *s) {
    if (s->access_log_owned && s->access_log) fclose(s->access_log);
    s->access_log = NULL;
    s->access_log_owned = false;
    if (s->access_log_lock_ready) pthread_mutex_destroy(&s->access_log_lock);
    s->access_log_lock_ready = false;
}

void gp_access_entry_begin(gp_access_entry *e, const char *request_id, const char *method,
                           gp_route route) {
    memset(e, 0, sizeof *e);
    snprintf(e->request_id, sizeof e->request_id, "%s", request_id);
    size_t i = 0;
    for (; method[i] && i + 1 < sizeof e->method; i++) /* a token; anything odd as '?' */
        e->method[i] = method[i] >= 'A' && method[i] <= 'Z' ? method[i] : '?';
    e->method[i] = '\0';
    e->route = route;
    e->t_start = gp_now_s();
    e->frames = -1;
    e->ttfa_ms = -1;
}

static void utc_now(char *out, size_t cap) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char date[32];
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out, cap, "%s.%03ldZ", date, ts.tv_nsec / 1000000L);
}

void gp_access_log_write(gp_server *s, const gp_access_entry *e) {
    if (!s->access_log) return;
    double duration_ms = (gp_now_s() - e->t_start) * 1e3;
    /* no response sent: the client left first (nginx's 499) */
    int status = e->status ? e->status : 499;
    char when[48];
    utc_now(when, sizeof when);
    gp_buf b;
    gp_buf_init(&b);
    int rc = 0;
    if (s->params.access_log == GP_ACCESS_LOG_JSON) {
        rc |= gp_buf_printf(&b, "{\"time\":\"%s\",\"request_id\":", when);
        rc |= gp_json_append_string(&b, e->request_id);
        rc |= gp_buf_printf(&b, ",\"method\":\"%s\",\"route\":\"%s\",\"status\":%d,\"voice\":",
                            e->method, gp_route_name(e->route), status);
        rc |= e->voice[0] ? gp_json_append_string(&b, e->voice) : gp_buf_append_str(&b, "null");
        rc |= e->frames >= 0 ? gp_buf_printf(&b, ",\"frames\":%ld", e->frames)
                             : gp_buf_append_str(&b, ",\"frames\":null");
        rc |= e->ttfa_ms >= 0 ? gp_buf_printf(&b, ",\"ttfa_ms\":%.1f", e->ttfa_ms)
                              : gp_buf_append_str(&b, ",\"ttfa_ms\":null");
        rc |= gp_buf_printf(&b, ",\"duration_ms\":%.1f,\"disconnected\":%s}\n", duration_ms,
                            e->disconnected ? "true" : "false");
    } else {
        rc |= gp_buf_printf(&b, "%s %s %s %s %d voice=%s", when, e->request_id, e->method,
                            gp_route_name(e->route), status, e->voice[0] ? e->voice : "-");
        rc |= e->frames >= 0 ? gp_buf_printf(&b, " frames=%ld", e->frames)
                             : gp_buf_append_str(&b, " frames=-");
        rc |= e->ttfa_ms >= 0 ? gp_buf_printf(&b, " ttfa_ms=%.1f", e->ttfa_ms)
                              : gp_buf_append_str(&b, " ttfa_ms=-");
        rc |= gp_buf_printf(&b, " duration_ms=%.1f%s\n", duration_ms,
                            e->disconnected ? " disconnected" : "");
    }
    if (!rc) {
        pthread_mutex_lock(&s->access_log_lock);
        fwrite(b.data, 1, b.len, s->access_log);
        fflush(s->access_log);
        pthread_mutex_unlock(&s->access_log_lock);
    }
    gp_buf_free(&b);
}
