/* loadtest.h — what `gepard loadtest`'s driver (cli_loadtest.c) records per
 * request and hands to its report (loadtest_report.c).
 *
 * Every request is a listener playing the stream in real time: it starts
 * playing at its first audio byte (plus an optional prebuffer) and at each
 * later arrival of audio the audio it already had is compared with the time
 * since then. */
#ifndef GP_CLI_LOADTEST_H
#define GP_CLI_LOADTEST_H

#include <curl/curl.h>
#include <stdbool.h>
#include <stddef.h>

#define LT_WAV_HEADER 44

typedef struct lt_request {
    CURL *easy;
    double start, first_audio, last_audio, end; /* gp_now_s(); 0: not yet */
    size_t bytes;                               /* body bytes of a 200 answer */
    size_t header_bytes, bytes_per_sample;      /* 44 for wav; 2 or 4 */
    long status, curl_code;                     /* HTTP status (last status line), CURLE_* */
    int rate;                                   /* samples per second */
    long chunks;                                /* write callbacks that carried audio */
    double max_gap_s;                           /* longest time between two audio arrivals */
    double worst_deficit_s; /* max over later arrivals of elapsed - delivered (or -inf); the
                               report subtracts the prebuffer */
    /* the audio already delivered (s) when the longest gap ended and when the
     * worst deficit was seen: early in a stream, or late */
    double max_gap_at_s, worst_deficit_at_s;
    bool done, ok;
    char kind[24]; /* error kind, "" when ok (cli_loadtest.c: classify) */
    char error[CURL_ERROR_SIZE];
    unsigned char wav[LT_WAV_HEADER];
} lt_request;

/* One scrape of the server's /metrics during the run (--sample). */
typedef struct lt_sample {
    double t;                  /* seconds since the run started */
    double rss_mb, fds, cpu_s; /* process_* (-1: not reported) */
    double active, queued;     /* gepard_active_streams, gepard_queued_streams */
    double speech_ok;          /* gepard_http_requests_total{route="speech",code="200"} */
} lt_sample;

typedef struct lt_run {
    const char *url, *format;
    char *body;
    struct curl_slist *headers;
    long timeout_s;
    int concurrency, total;
    int threads;           /* event loops, each on its own thread (--threads) */
    int default_rate;      /* before any X-Sample-Rate header or WAV header */
    double prebuffer_s;    /* the listener's buffer before it starts playing */
    double ramp_s;         /* the first `concurrency` requests start over this long */
    double wall_s;         /* the run's wall time */
    double cpu_s;          /* the event loops' CPU time, summed over the loops */
    double loop_cpu_max_s; /* the busiest loop's CPU time */
    double duration_s;     /* > 0: start requests for this long (up to total), then drain */
    double sample_s;       /* > 0: scrape /metrics this often */
    lt_request *req;
    /* /metrics: before the run, every sample_s during it, and after it */
    lt_sample *samples;
    int n_samples, cap_samples;
    bool have_before, have_after;
    lt_sample before, after;
} lt_run;

/* Print the run's JSON report on standard output. */
void lt_report(const lt_run *run);

#endif
