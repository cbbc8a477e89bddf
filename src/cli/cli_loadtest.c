/* cli_loadtest.c — `gepard loadtest`: drive a speech server with N concurrent
 * streaming requests from one thread and report throughput, time to first
 * audio, the gaps between audio chunks and underruns as JSON
 * (loadtest_report.c).
 *
 * Each request posts {"input", "voice", "response_format"} plus the fields
 * of --body to /v1/audio/speech and reads the streamed audio. The requests
 * run on libcurl's multi interface driven by epoll (curl_multi_socket_action),
 * so the cost of an event does not grow with the number of connections and
 * thousands of streams fit in one thread. Audio length is computed from the
 * bytes, so the format must be pcm (default), wav or f32; the rate is the
 * answer's X-Sample-Rate header (or the WAV header's), else OpenAI's 24000 Hz
 * for pcm and 22050 Hz for f32. Time to first audio is the first byte after a
 * WAV header. */
#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "base/timing.h"
#include "cli/args.h"
#include "cli/fd_limit.h"
#include "cli/loadtest.h"

static const cli_option loadtest_options[] = {
    {"url", 0, "URL", "server base URL (default http://127.0.0.1:8080)"},
    {"concurrency", 'c', "N", "requests in flight at once (default 4)"},
    {"requests", 'n', "M", "requests in all (default 16)"},
    {"text", 0, "TEXT", "what to say (default: a sentence of about three seconds)"},
    {"voice", 0, "NAME", "voice (default \"default\")"},
    {"format", 0, "FMT", "pcm (default), wav or f32"},
    {"body", 0, "JSON", "extra request fields, e.g. '{\"max_frames\":200,\"seed\":1}'"},
    {"api-key", 0, "KEY", "send \"Authorization: Bearer KEY\" (default: $GEPARD_API_KEY)"},
    {"timeout", 0, "S", "give up on a request after S seconds (default 600)"},
    {"ramp", 0, "S", "start the first N requests evenly over S seconds (default 0: at once)"},
    {"prebuffer-ms", 0, "MS",
     "the simulated listener buffers MS of wall time before playing (default 0)"},
    {"duration", 0, "S",
     "keep --concurrency requests in flight for S seconds, then let them finish (a soak; "
     "--requests caps them, default 100000 then)"},
    {"sample", 0, "S",
     "scrape the server's /metrics every S seconds (resident memory, open files, streams) and "
     "check its count of answered requests against the client's at the end (default 10 with "
     "--duration, else off)"},
    {"threads", 0, "N",
     "event loops, each on its own thread with its share of the requests (default: one per "
     "128 in flight, at most half the CPUs and 8)"},
};
#define N_LOADTEST_OPTIONS ((int)(sizeof loadtest_options / sizeof loadtest_options[0]))

#define DEFAULT_TEXT "The quick brown fox jumps over the lazy dog, and then it runs away."
#define MAX_EVENTS 1024
#define MAX_WAIT_MS 200

/* The epoll loop around a curl multi handle. */
typedef struct lt_loop {
    CURLM *multi;
    int epfd;
    double timer_at; /* when libcurl wants CURL_SOCKET_TIMEOUT; < 0: never */
} lt_loop;

static double audio_seconds_of(const lt_request *r, size_t audio_bytes) {
    return (double)audio_bytes / (double)r->bytes_per_sample / (double)r->rate;
}

/* One arrival of body bytes: the listener's accounting (loadtest.h). */
static void on_audio(lt_request *r, double now, size_t audio_before, size_t audio_after) {
    if (audio_after == audio_before) return;
    r->chunks++;
    if (!r->first_audio) {
        r->first_audio = r->last_audio = now;
        return;
    }
    const double delivered = audio_seconds_of(r, audio_before);
    if (now - r->last_audio > r->max_gap_s) {
        r->max_gap_s = now - r->last_audio;
        r->max_gap_at_s = delivered;
    }
    r->last_audio = now;
    double deficit = (now - r->first_audio) - delivered;
    if (deficit > r->worst_deficit_s) {
        r->worst_deficit_s = deficit;
        r->worst_deficit_at_s = delivered;
    }
}

static size_t on_body(char *data, size_t size, size_t n, void *user) {
    lt_request *r = user;
    size_t len = size * n;
    if (r->status != 200) { /* keep the start of an error answer for the report */
        size_t have = strlen(r->error), room = sizeof r->error - 1 - have;
        size_t take = len < room ? len : room;
        for (size_t i = 0; i < take; i++)
            r->error[have + i] = data[i] == '\n' || data[i] == '\r' ? ' ' : data[i];
        r->error[have + take] = 0;
        return len;
    }
    size_t before = r->bytes;
    r->bytes += len;
    for (size_t i = before; i < r->header_bytes && i < r->bytes; i++)
        r->wav[i] = (unsigned char)data[i - before];
    if (r->header_bytes && before < r->header_bytes && r->bytes >= r->header_bytes &&
        memcmp(r->wav, "RIFF", 4) == 0 && memcmp(r->wav + 8, "WAVE", 4) == 0) {
        long rate = (long)r->wav[24] | (long)r->wav[25] << 8 | (long)r->wav[26] << 16 |
                    (long)r->wav[27] << 24;
        if (rate > 0 && rate < 1000000) r->rate = (int)rate;
    }
    size_t h = r->header_bytes;
    on_audio(r, gp_now_s(), before > h ? before - h : 0, r->bytes > h ? r->bytes - h : 0);
    return len;
}

static size_t on_header(char *data, size_t size, size_t n, void *user) {
    lt_request *r = user;
    size_t len = size * n;
    const char *key = "X-Sample-Rate:";
    size_t k = strlen(key);
    if (len > 5 && strncmp(data, "HTTP/", 5) == 0) {
        const char *sp = memchr(data, ' ', len);
        if (sp) r->status = strtol(sp + 1, NULL, 10);
    } else if (len > k && strncasecmp(data, key, k) == 0) {
        int rate = atoi(data + k);
        if (rate > 0 && rate < 1000000) r->rate = rate;
    }
    return len;
}

static int lt_add(lt_run *run, CURLM *multi, int i) {
    lt_request *r = &run->req[i];
    r->easy = curl_easy_init();
    if (!r->easy) return -1;
    char url[2048];
    snprintf(url, sizeof url, "%s/v1/audio/speech", run->url);
    r->header_bytes = strcmp(run->format, "wav") == 0 ? LT_WAV_HEADER : 0;
    r->bytes_per_sample = strcmp(run->format, "f32") == 0 ? 4 : 2;
    r->rate = run->default_rate;
    r->worst_deficit_s = -INFINITY;
    curl_easy_setopt(r->easy, CURLOPT_URL, url);
    curl_easy_setopt(r->easy, CURLOPT_POSTFIELDS, run->body);
    curl_easy_setopt(r->easy, CURLOPT_HTTPHEADER, run->headers);
    curl_easy_setopt(r->easy, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(r->easy, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(r->easy, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(r->easy, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(r->easy, CURLOPT_ERRORBUFFER, r->error);
    curl_easy_setopt(r->easy, CURLOPT_TIMEOUT, run->timeout_s);
    curl_easy_setopt(r->easy, CURLOPT_PRIVATE, r);
    curl_easy_setopt(r->easy, CURLOPT_NOSIGNAL, 1L);
    r->start = gp_now_s();
    return curl_multi_add_handle(multi, r->easy) == CURLM_OK ? 0 : -1;
}

/* Writes the error kind of a finished request into r->kind ("" when it
 * succeeded): http_NNN, timeout, connect, broken_stream (the transfer broke
 * after some audio), connection_lost, no_audio (200 without audio) or
 * curl_other. */
static void classify(lt_request *r) {
    const char *kind = NULL;
    switch (r->curl_code) {
    case CURLE_OK: break;
    case CURLE_OPERATION_TIMEDOUT: kind = "timeout"; break;
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST: kind = "connect"; break;
    case CURLE_PARTIAL_FILE:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING: kind = r->chunks ? "broken_stream" : "connection_lost"; break;
    default: kind = "curl_other"; break;
    }
    if (kind)
        snprintf(r->kind, sizeof r->kind, "%s", kind);
    else if (r->status != 200)
        snprintf(r->kind, sizeof r->kind, "http_%ld", r->status);
    else if (!r->chunks)
        snprintf(r->kind, sizeof r->kind, "no_audio");
    else
        r->kind[0] = 0;
}

static void lt_finish(CURLM *multi, CURLMsg *msg) {
    lt_request *r = NULL;
    curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&r);
    r->end = gp_now_s();
    r->done = true;
    r->curl_code = msg->data.result;
    curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE, &r->status);
    classify(r);
    r->ok = r->kind[0] == 0;
    if (r->curl_code != CURLE_OK && !r->error[0])
        snprintf(r->error, sizeof r->error, "%s", curl_easy_strerror(msg->data.result));
    else if (!r->ok && !r->error[0])
        snprintf(r->error, sizeof r->error, "HTTP %ld", r->status);
    curl_multi_remove_handle(multi, msg->easy_handle);
    curl_easy_cleanup(msg->easy_handle);
    r->easy = NULL;
}

/* libcurl: watch socket `s` for `what`. */
static int on_socket(CURL *easy, curl_socket_t s, int what, void *user, void *socketp) {
    lt_loop *L = user;
    (void)easy;
    if (what == CURL_POLL_REMOVE) {
        epoll_ctl(L->epfd, EPOLL_CTL_DEL, s, NULL);
        curl_multi_assign(L->multi, s, NULL);
        return 0;
    }
    struct epoll_event ev = {.events = (what & CURL_POLL_IN ? EPOLLIN : 0u) |
                                       (what & CURL_POLL_OUT ? EPOLLOUT : 0u),
                             .data.fd = s};
    int op = socketp ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
    if (epoll_ctl(L->epfd, op, s, &ev) != 0) {
        op = errno == ENOENT ? EPOLL_CTL_ADD : errno == EEXIST ? EPOLL_CTL_MOD : -1;
        if (op < 0 || epoll_ctl(L->epfd, op, s, &ev) != 0) return -1;
    }
    if (!socketp) curl_multi_assign(L->multi, s, L);
    return 0;
}

/* libcurl: call CURL_SOCKET_TIMEOUT in `ms` (-1: cancel). */
static int on_timer(CURLM *multi, long ms, void *user) {
    lt_loop *L = user;
    (void)multi;
    L->timer_at = ms < 0 ? -1 : gp_now_s() + (double)ms / 1e3;
    return 0;
}

static int collect_finished(lt_loop *L) {
    int finished = 0, left;
    CURLMsg *msg;
    while ((msg = curl_multi_info_read(L->multi, &left)))
        if (msg->msg == CURLMSG_DONE) {
            lt_finish(L->multi, msg);
            finished++;
        }
    return finished;
}

/* ---- /metrics (--sample) ---- */

typedef struct lt_text {
    char *data;
    size_t len, cap;
} lt_text;

static size_t on_metrics(char *data, size_t size, size_t n, void *user) {
    lt_text *t = user;
    size_t len = size * n;
    if (t->len + len + 1 > t->cap) {
        size_t cap = (t->len + len + 1) * 2;
        char *p = realloc(t->data, cap);
        if (!p) return 0;
        t->data = p;
        t->cap = cap;
    }
    memcpy(t->data + t->len, data, len);
    t->len += len;
    t->data[t->len] = 0;
    return len;
}

/* The value of the sample line `name` (with its labels, if any), or -1. */
static double metric_value(const char *text, const char *name) {
    const size_t k = strlen(name);
    for (const char *line = text; line && *line;) {
        if (strncmp(line, name, k) == 0 && line[k] == ' ') return strtod(line + k + 1, NULL);
        line = strchr(line, '\n');
        if (line) line++;
    }
    return -1;
}

/* One blocking GET of /metrics (a few milliseconds: the event loop waits that
 * long every --sample seconds). */
static bool lt_scrape(const lt_run *run, double t, lt_sample *out) {
    CURL *easy = curl_easy_init();
    if (!easy) return false;
    char url[2048];
    snprintf(url, sizeof url, "%s/metrics", run->url);
    lt_text text = {0};
    curl_easy_setopt(easy, CURLOPT_URL, url);
    curl_easy_setopt(easy, CURLOPT_HTTPHEADER, run->headers);
    curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, on_metrics);
    curl_easy_setopt(easy, CURLOPT_WRITEDATA, &text);
    curl_easy_setopt(easy, CURLOPT_TIMEOUT, 5L);
    curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
    long status = 0;
    bool ok = curl_easy_perform(easy) == CURLE_OK &&
              curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status) == CURLE_OK &&
              status == 200 && text.data;
    if (ok) {
        const double rss = metric_value(text.data, "process_resident_memory_bytes");
        *out = (lt_sample){
            .t = t,
            .rss_mb = rss >= 0 ? rss / 1048576.0 : -1,
            .fds = metric_value(text.data, "process_open_fds"),
            .cpu_s = metric_value(text.data, "process_cpu_seconds_total"),
            .active = metric_value(text.data, "gepard_active_streams"),
            .queued = metric_value(text.data, "gepard_queued_streams"),
            .speech_ok = metric_value(text.data,
                                      "gepard_http_requests_total{route=\"speech\",code=\"200\"}"),
        };
        if (out->speech_ok < 0) out->speech_ok = 0; /* no such line before the first answer */
    }
    free(text.data);
    curl_easy_cleanup(easy);
    return ok;
}

static void lt_add_sample(lt_run *run, double t) {
    lt_sample smp;
    if (!lt_scrape(run, t, &smp)) return;
    if (run->n_samples == run->cap_samples) {
        int cap = run->cap_samples ? 2 * run->cap_samples : 64;
        lt_sample *p = realloc(run->samples, (size_t)cap * sizeof *p);
        if (!p) return;
        run->samples = p;
        run->cap_samples = cap;
    }
    run->samples[run->n_samples++] = smp;
}

/* The scrape after the run: the server counts a response when it has sent
 * it, which can trail the client's last byte by a moment, so it looks again
 * (for up to 2 s) until the count stops short of the client's no more. */
static void lt_scrape_after(lt_run *run, double t) {
    int ok = 0;
    for (int i = 0; i < run->total; i++) ok += run->req[i].ok;
    for (double until = gp_now_s() + 2;;) {
        run->have_after = lt_scrape(run, t, &run->after);
        if (!run->have_after || !run->have_before ||
            run->after.speech_ok - run->before.speech_ok >= ok || gp_now_s() > until)
            return;
        usleep(50000);
    }
}

/* One event loop's share of the run: requests lo .. hi − 1 (its own slots of
 * run->req), at most `conc` in flight; loop w of n starts its k-th request of
 * the first wave at t0 + ramp · (k · n + w) / concurrency, so together they
 * spread the first `concurrency` over --ramp as one loop would. Loop 0 also
 * scrapes /metrics (--sample). */
typedef struct lt_worker {
    lt_run *run;
    int w, n, lo, hi, conc;
    double t0;
    int started, rc;
    double cpu_s; /* this loop's thread CPU time */
    pthread_t thread;
} lt_worker;

/* The calling thread's CPU time: a loop's own, not the process's (a library
 * may run threads of its own: Debian's OpenBLAS spins one per CPU for ~0.1 s
 * after it loads, 1.5 CPU-seconds on 16 cores). */
static double thread_cpu_seconds(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* When this loop's request lo + k may start. */
static double start_time(const lt_worker *wk, int k) {
    const lt_run *run = wk->run;
    if (k >= wk->conc) return wk->t0;
    return wk->t0 + run->ramp_s * (double)(k * wk->n + wk->w) / run->concurrency;
}

/* Milliseconds epoll may sleep: until libcurl's timer or the next start. */
static int wait_ms(const lt_loop *L, double next_start) {
    double now = gp_now_s(), until = now + MAX_WAIT_MS / 1e3;
    if (L->timer_at >= 0 && L->timer_at < until) until = L->timer_at;
    if (next_start >= 0 && next_start < until) until = next_start;
    return until <= now ? 0 : (int)ceil((until - now) * 1e3);
}

/* Whether request `next` may start now: below the loop's share and, with
 * --duration, within it. */
static bool may_start(const lt_worker *wk, int next) {
    const lt_run *run = wk->run;
    return next < wk->hi && (run->duration_s <= 0 || gp_now_s() < wk->t0 + run->duration_s);
}

/* Keep `conc` requests in flight until the loop's share has finished (with
 * --duration: until it is over and those started have finished); the number
 * started ends up in wk->started. */
static void *lt_drive_worker(void *arg) {
    lt_worker *wk = arg;
    lt_run *run = wk->run;
    const double cpu0 = thread_cpu_seconds();
    lt_loop L = {.multi = curl_multi_init(), .epfd = epoll_create1(EPOLL_CLOEXEC), .timer_at = -1};
    wk->rc = -1;
    if (!L.multi || L.epfd < 0) {
        if (L.multi) curl_multi_cleanup(L.multi);
        if (L.epfd >= 0) close(L.epfd);
        return NULL;
    }
    curl_multi_setopt(L.multi, CURLMOPT_SOCKETFUNCTION, on_socket);
    curl_multi_setopt(L.multi, CURLMOPT_SOCKETDATA, &L);
    curl_multi_setopt(L.multi, CURLMOPT_TIMERFUNCTION, on_timer);
    curl_multi_setopt(L.multi, CURLMOPT_TIMERDATA, &L);
    struct epoll_event events[MAX_EVENTS];
    const double t0 = wk->t0;
    double next_sample = wk->w == 0 && run->sample_s > 0 ? t0 + run->sample_s : -1;
    int next = wk->lo, finished = 0, running = 0, rc = 0;
    while (finished < next - wk->lo || may_start(wk, next)) {
        while (may_start(wk, next) && next - wk->lo - finished < wk->conc &&
               start_time(wk, next - wk->lo) <= gp_now_s())
            if (lt_add(run, L.multi, next++)) {
                rc = -1;
                goto out;
            }
        if (next_sample >= 0 && gp_now_s() >= next_sample) {
            lt_add_sample(run, gp_now_s() - t0);
            next_sample += run->sample_s;
        }
        bool waiting = may_start(wk, next) && next - wk->lo - finished < wk->conc;
        double wake = waiting ? start_time(wk, next - wk->lo) : -1;
        if (next_sample >= 0 && (wake < 0 || next_sample < wake)) wake = next_sample;
        int n = epoll_wait(L.epfd, events, MAX_EVENTS, wait_ms(&L, wake));
        for (int i = 0; i < n; i++) {
            int flags = (events[i].events & EPOLLIN ? CURL_CSELECT_IN : 0) |
                        (events[i].events & EPOLLOUT ? CURL_CSELECT_OUT : 0) |
                        (events[i].events & (EPOLLERR | EPOLLHUP) ? CURL_CSELECT_ERR : 0);
            curl_multi_socket_action(L.multi, events[i].data.fd, flags, &running);
        }
        if (L.timer_at >= 0 && gp_now_s() >= L.timer_at) {
            L.timer_at = -1;
            curl_multi_socket_action(L.multi, CURL_SOCKET_TIMEOUT, 0, &running);
        }
        finished += collect_finished(&L);
    }
out:
    wk->started = next - wk->lo;
    for (int i = wk->lo; i < next; i++)
        if (run->req[i].easy) {
            curl_multi_remove_handle(L.multi, run->req[i].easy);
            curl_easy_cleanup(run->req[i].easy);
            run->req[i].easy = NULL;
        }
    curl_multi_cleanup(L.multi);
    close(L.epfd);
    wk->rc = rc;
    wk->cpu_s = thread_cpu_seconds() - cpu0;
    return NULL;
}

/* Run the requests on run->threads event loops, each with a contiguous share
 * of run->req and of the concurrency; afterwards the started requests are
 * moved to the front of run->req and counted in run->total. */
static int lt_drive(lt_run *run) {
    const int n = run->threads;
    lt_worker *wk = calloc((size_t)n, sizeof *wk);
    if (!wk) return -1;
    const double t0 = gp_now_s();
    int rc = 0, launched = 0;
    for (int w = 0; w < n; w++) {
        wk[w] = (lt_worker){.run = run, .w = w, .n = n, .t0 = t0};
        wk[w].lo = (int)((long long)run->total * w / n);
        wk[w].hi = (int)((long long)run->total * (w + 1) / n);
        wk[w].conc = run->concurrency / n + (w < run->concurrency % n);
    }
    for (int w = 1; w < n; w++) {
        if (pthread_create(&wk[w].thread, NULL, lt_drive_worker, &wk[w]) != 0) {
            wk[w].rc = -1; /* this share runs on no loop: reported as a failure */
            rc = -1;
            break;
        }
        launched = w;
    }
    if (rc == 0) lt_drive_worker(&wk[0]);
    for (int w = 1; w <= launched; w++) pthread_join(wk[w].thread, NULL);
    int total = 0;
    run->cpu_s = run->loop_cpu_max_s = 0;
    for (int w = 0; w < n; w++) {
        run->cpu_s += wk[w].cpu_s;
        if (wk[w].cpu_s > run->loop_cpu_max_s) run->loop_cpu_max_s = wk[w].cpu_s;
        if (rc == 0 && wk[w].rc) rc = -1;
        if (wk[w].started && wk[w].lo != total)
            memmove(&run->req[total], &run->req[wk[w].lo],
                    (size_t)wk[w].started * sizeof *run->req);
        total += wk[w].started;
    }
    run->total = total;
    free(wk);
    return rc;
}

/* The request body: the defaults plus --body's fields. */
static int lt_body(const cli_args *a, const char *format, char **out, int *sample_rate) {
    cJSON *body = cJSON_CreateObject();
    cJSON_AddStringToObject(body, "model", "gepard");
    cJSON_AddStringToObject(body, "input", cli_get(a, "text") ? cli_get(a, "text") : DEFAULT_TEXT);
    cJSON_AddStringToObject(body, "voice", cli_get(a, "voice") ? cli_get(a, "voice") : "default");
    cJSON_AddStringToObject(body, "response_format", format);
    const char *extra = cli_get(a, "body");
    if (extra) {
        cJSON *x = cJSON_Parse(extra);
        if (!cJSON_IsObject(x)) {
            cJSON_Delete(x);
            cJSON_Delete(body);
            return cli_usage_error("loadtest", "--body must be a JSON object, got %s", extra);
        }
        for (cJSON *f = x->child; f; f = f->next) {
            cJSON_DeleteItemFromObjectCaseSensitive(body, f->string);
            cJSON_AddItemToObject(body, f->string, cJSON_Duplicate(f, 1));
        }
        cJSON_Delete(x);
    }
    cJSON *rate = cJSON_GetObjectItemCaseSensitive(body, "sample_rate");
    if (cJSON_IsNumber(rate) && rate->valuedouble >= 1 && rate->valuedouble < 1e6)
        *sample_rate = (int)rate->valuedouble;
    *out = cJSON_PrintUnformatted(body);
    cJSON_Delete(body);
    return *out ? CLI_EXIT_OK : cli_runtime_error("out of memory");
}

static int lt_options(const cli_args *a, lt_run *run) {
    long long conc = 4, total = 16;
    double timeout = 600, prebuffer_ms = 0;
    int rc;
    if ((rc = cli_get_float(a, "duration", 0, 1e7, &run->duration_s))) return rc;
    if (run->duration_s > 0) {
        total = 100000;
        run->sample_s = 10;
    }
    long long threads = 0;
    if ((rc = cli_get_int(a, "concurrency", 1, 100000, &conc)) ||
        (rc = cli_get_int(a, "requests", 1, 1000000, &total)) ||
        (rc = cli_get_int(a, "threads", 1, 64, &threads)) ||
        (rc = cli_get_float(a, "timeout", 1, 1e6, &timeout)) ||
        (rc = cli_get_float(a, "ramp", 0, 1e5, &run->ramp_s)) ||
        (rc = cli_get_float(a, "prebuffer-ms", 0, 1e7, &prebuffer_ms)) ||
        (rc = cli_get_float(a, "sample", 0, 1e6, &run->sample_s)))
        return rc;
    if (strcmp(run->format, "pcm") && strcmp(run->format, "wav") && strcmp(run->format, "f32"))
        return cli_usage_error("loadtest", "--format must be pcm, wav or f32 (the audio length "
                                           "is computed from the bytes)");
    run->concurrency = (int)conc;
    run->total = (int)total;
    if (!cli_get(a, "threads")) { /* one loop per 128 in flight, at most half the CPUs and 8 */
        const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        threads = (conc + 127) / 128;
        if (threads > cpus / 2) threads = cpus / 2;
        if (threads > 8) threads = 8;
    }
    if (threads > conc) threads = conc; /* a loop with nothing in flight would idle */
    if (threads > total) threads = total;
    run->threads = threads < 1 ? 1 : (int)threads;
    run->timeout_s = (long)timeout;
    run->prebuffer_s = prebuffer_ms / 1e3;
    /* a socket per request in flight, plus libcurl's and the process's own */
    cli_raise_fd_limit(conc + 64, "--concurrency");
    return CLI_EXIT_OK;
}

int cli_loadtest(int argc, char **argv) {
    cli_args a;
    int rc = cli_parse(&a, "loadtest", "[OPTIONS]",
                       "Send M streaming speech requests, N at a time, to a `gepard serve`\n"
                       "(or any OpenAI-compatible speech server) and print throughput, time to\n"
                       "first audio, real-time factor, the longest gap between audio chunks and\n"
                       "underruns of a listener playing each stream in real time, as JSON.",
                       loadtest_options, N_LOADTEST_OPTIONS, argc, argv);
    if (rc || a.help) return rc;
    lt_run run = {.url = cli_get(&a, "url") ? cli_get(&a, "url") : "http://127.0.0.1:8080",
                  .format = cli_get(&a, "format") ? cli_get(&a, "format") : "pcm"};
    if ((rc = lt_options(&a, &run))) goto done;
    run.default_rate = strcmp(run.format, "pcm") == 0 ? 24000 : 22050;
    if ((rc = lt_body(&a, run.format, &run.body, &run.default_rate))) goto done;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    run.headers = curl_slist_append(NULL, "Content-Type: application/json");
    const char *key = cli_get(&a, "api-key") ? cli_get(&a, "api-key") : getenv("GEPARD_API_KEY");
    char auth[1024];
    if (key && *key) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", key);
        run.headers = curl_slist_append(run.headers, auth);
    }
    run.req = calloc((size_t)run.total, sizeof *run.req);
    if (!run.req || !run.headers) {
        rc = cli_runtime_error("out of memory");
    } else {
        if (run.sample_s > 0) run.have_before = lt_scrape(&run, 0, &run.before);
        double t0 = gp_now_s();
        if (lt_drive(&run)) {
            rc = cli_runtime_error("cannot start the HTTP requests (libcurl or epoll failed; "
                                   "out of memory or file descriptors?)");
        } else {
            run.wall_s = gp_now_s() - t0;
            if (run.sample_s > 0) lt_scrape_after(&run, gp_now_s() - t0);
            lt_report(&run);
        }
    }
    free(run.req);
    free(run.samples);
    curl_slist_free_all(run.headers);
    curl_global_cleanup();
done:
    free(run.body);
    cli_args_free(&a);
    return rc;
}
