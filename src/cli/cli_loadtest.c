/* cli_loadtest.c — `gepard loadtest`: drive a speech server with N concurrent
 * streaming requests (libcurl multi, one thread) and report throughput, time
 * to first audio and per-stream real-time factor as JSON.
 *
 * Each request posts {"input", "voice", "response_format"} plus the fields
 * of --body to /v1/audio/speech and reads the streamed audio. Audio length
 * is computed from the bytes, so the format must be pcm (default), wav or
 * f32; time to first audio is the first byte after a WAV header. */
#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/timing.h"
#include "cli/args.h"
#include "cli/fd_limit.h"

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
};
#define N_LOADTEST_OPTIONS ((int)(sizeof loadtest_options / sizeof loadtest_options[0]))

#define DEFAULT_TEXT "The quick brown fox jumps over the lazy dog, and then it runs away."
#define MAX_ERRORS 5

typedef struct lt_request {
    CURL *easy;
    double start, first_audio, end;
    size_t bytes, header_bytes, bytes_per_sample;
    long status;
    int rate;
    bool done, ok;
    char error[CURL_ERROR_SIZE];
} lt_request;

typedef struct lt_run {
    const char *url, *format;
    char *body;
    struct curl_slist *headers;
    long timeout_s;
    int concurrency, total;
    lt_request *req;
} lt_run;

static size_t on_body(char *data, size_t size, size_t n, void *user) {
    lt_request *r = user;
    size_t len = size * n;
    (void)data;
    r->bytes += len;
    if (!r->first_audio && r->bytes > r->header_bytes) r->first_audio = gp_now_s();
    return len;
}

static size_t on_header(char *data, size_t size, size_t n, void *user) {
    lt_request *r = user;
    size_t len = size * n;
    const char *key = "X-Sample-Rate:";
    size_t k = strlen(key);
    if (len > k && strncasecmp(data, key, k) == 0) {
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
    bool wav = strcmp(run->format, "wav") == 0;
    r->header_bytes = wav ? 44 : 0;
    r->bytes_per_sample = strcmp(run->format, "f32") == 0 ? 4 : 2;
    r->rate = 22050;
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

static void lt_finish(CURLM *multi, CURLMsg *msg) {
    lt_request *r = NULL;
    curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&r);
    r->end = gp_now_s();
    r->done = true;
    curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE, &r->status);
    r->ok = msg->data.result == CURLE_OK && r->status == 200 && r->bytes > r->header_bytes;
    if (msg->data.result != CURLE_OK && !r->error[0])
        snprintf(r->error, sizeof r->error, "%s", curl_easy_strerror(msg->data.result));
    else if (r->status != 200 && !r->error[0])
        snprintf(r->error, sizeof r->error, "HTTP %ld", r->status);
    curl_multi_remove_handle(multi, msg->easy_handle);
    curl_easy_cleanup(msg->easy_handle);
    r->easy = NULL;
}

/* Keep `concurrency` requests in flight until `total` have finished. */
static int lt_drive(lt_run *run) {
    CURLM *multi = curl_multi_init();
    if (!multi) return -1;
    int next = 0, finished = 0, running = 0;
    while (finished < run->total) {
        while (next < run->total && next - finished < run->concurrency)
            if (lt_add(run, multi, next++)) {
                curl_multi_cleanup(multi);
                return -1;
            }
        curl_multi_perform(multi, &running);
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(multi, &left)))
            if (msg->msg == CURLMSG_DONE) {
                lt_finish(multi, msg);
                finished++;
            }
        if (finished < run->total) curl_multi_poll(multi, NULL, 0, 100, NULL);
    }
    curl_multi_cleanup(multi);
    return 0;
}

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* {"p50","p90","p99","mean","min","max"} of n values (sorted in place). */
static void print_distribution(const char *name, double *v, int n, const char *tail) {
    printf("  \"%s\": ", name);
    if (n == 0) {
        printf("null%s\n", tail);
        return;
    }
    qsort(v, (size_t)n, sizeof *v, compare_doubles);
    double sum = 0;
    for (int i = 0; i < n; i++) sum += v[i];
#define PCT(p) v[(int)ceil((p) / 100.0 * n) - 1 < 0 ? 0 : (int)ceil((p) / 100.0 * n) - 1]
    printf("{\"p50\": %.4g, \"p90\": %.4g, \"p99\": %.4g, \"mean\": %.4g, \"min\": %.4g, "
           "\"max\": %.4g}%s\n",
           PCT(50), PCT(90), PCT(99), sum / n, v[0], v[n - 1], tail);
#undef PCT
}

static void lt_report(const lt_run *run, double wall) {
    double *ttfa = calloc((size_t)run->total + 1, sizeof(double));
    double *rtf = calloc((size_t)run->total + 1, sizeof(double));
    int ok = 0, n_errors = 0;
    double audio = 0;
    for (int i = 0; i < run->total; i++) {
        const lt_request *r = &run->req[i];
        if (!r->ok) continue;
        double seconds =
            (double)(r->bytes - r->header_bytes) / (double)r->bytes_per_sample / r->rate;
        audio += seconds;
        ttfa[ok] = (r->first_audio - r->start) * 1e3;
        rtf[ok] = seconds > 0 ? (r->end - r->start) / seconds : 0;
        ok++;
    }
    printf("{\n  \"url\": \"%s\",\n  \"concurrency\": %d,\n  \"requests\": %d,\n  \"ok\": %d,\n"
           "  \"failed\": %d,\n  \"wall_seconds\": %.3f,\n  \"audio_seconds\": %.3f,\n"
           "  \"audio_seconds_per_second\": %.4f,\n  \"aggregate_rtf\": %.4f,\n"
           "  \"requests_per_second\": %.4f,\n",
           run->url, run->concurrency, run->total, ok, run->total - ok, wall, audio,
           wall > 0 ? audio / wall : 0, audio > 0 ? wall / audio : 0, wall > 0 ? ok / wall : 0);
    print_distribution("ttfa_ms", ttfa, ok, ",");
    print_distribution("rtf", rtf, ok, ",");
    printf("  \"errors\": [");
    for (int i = 0; i < run->total && n_errors < MAX_ERRORS; i++)
        if (!run->req[i].ok) {
            cJSON *s = cJSON_CreateString(run->req[i].error);
            char *text = s ? cJSON_PrintUnformatted(s) : NULL;
            printf("%s%s", n_errors++ ? ", " : "", text ? text : "\"?\"");
            free(text);
            cJSON_Delete(s);
        }
    printf("]\n}\n");
    free(ttfa);
    free(rtf);
}

/* The request body: the defaults plus --body's fields. */
static int lt_body(const cli_args *a, const char *format, char **out) {
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
    *out = cJSON_PrintUnformatted(body);
    cJSON_Delete(body);
    return *out ? CLI_EXIT_OK : cli_runtime_error("out of memory");
}

int cli_loadtest(int argc, char **argv) {
    cli_args a;
    int rc = cli_parse(&a, "loadtest", "[OPTIONS]",
                       "Send M streaming speech requests, N at a time, to a `gepard serve`\n"
                       "(or any OpenAI-compatible speech server) and print throughput, time to\n"
                       "first audio and real-time factor percentiles as JSON.",
                       loadtest_options, N_LOADTEST_OPTIONS, argc, argv);
    if (rc || a.help) return rc;
    lt_run run = {.url = cli_get(&a, "url") ? cli_get(&a, "url") : "http://127.0.0.1:8080",
                  .format = cli_get(&a, "format") ? cli_get(&a, "format") : "pcm"};
    long long conc = 4, total = 16;
    double timeout = 600;
    if ((rc = cli_get_int(&a, "concurrency", 1, 100000, &conc)) ||
        (rc = cli_get_int(&a, "requests", 1, 1000000, &total)) ||
        (rc = cli_get_float(&a, "timeout", 1, 1e6, &timeout)))
        goto done;
    if (strcmp(run.format, "pcm") && strcmp(run.format, "wav") && strcmp(run.format, "f32")) {
        rc = cli_usage_error("loadtest", "--format must be pcm, wav or f32 (the audio length is "
                                         "computed from the bytes)");
        goto done;
    }
    run.concurrency = (int)conc;
    cli_raise_fd_limit(conc + 64, "--concurrency");
    run.total = (int)total;
    run.timeout_s = (long)timeout;
    if ((rc = lt_body(&a, run.format, &run.body))) goto done;
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
        double t0 = gp_now_s();
        if (lt_drive(&run))
            rc = cli_runtime_error("cannot start the HTTP requests (libcurl)");
        else
            lt_report(&run, gp_now_s() - t0);
    }
    free(run.req);
    curl_slist_free_all(run.headers);
    curl_global_cleanup();
done:
    free(run.body);
    cli_args_free(&a);
    return rc;
}
