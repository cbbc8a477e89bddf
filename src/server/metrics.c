/* metrics.c — counters, histograms and the Prometheus text rendering (see
 * metrics.h). Names follow Prometheus conventions: *_total counters,
 * *_seconds units, histograms with cumulative le buckets, _sum and _count. */
#include "server/metrics.h"

#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/timing.h"

#define STATUS_MIN 100
#define STATUS_SPAN 500 /* 100..599 */
#define HIST_MAX_BUCKETS 16
#define FRAME_SAMPLES 11 /* one a second: a ten second window */

typedef struct histogram {
    const char *name, *help;
    int n_bounds;
    double bounds[HIST_MAX_BUCKETS];
    uint64_t counts[HIST_MAX_BUCKETS + 1]; /* the last is +Inf */
    double sum;
    uint64_t count;
} histogram;

struct gp_metrics {
    pthread_mutex_t lock;
    uint64_t requests[GP_ROUTE_COUNT][STATUS_SPAN];
    uint64_t streams_ok, streams_failed, streams_cancelled, disconnects;
    uint64_t connections_closed[GP_CONN_CLOSE_COUNT];
    double audio_seconds;
    histogram ttfa, rtf;
    double sample_time[FRAME_SAMPLES];
    uint64_t sample_frames[FRAME_SAMPLES];
    int n_samples, next_sample;
};

static const char *const route_names[GP_ROUTE_COUNT] = {
    [GP_ROUTE_SPEECH] = "speech",
    [GP_ROUTE_SPEECH_BATCH] = "speech_batch",
    [GP_ROUTE_VOICES] = "voices",
    [GP_ROUTE_MODELS] = "models",
    [GP_ROUTE_HEALTH] = "health",
    [GP_ROUTE_READY] = "ready",
    [GP_ROUTE_METRICS] = "metrics",
    [GP_ROUTE_PLAYGROUND] = "playground",
    [GP_ROUTE_TTS_BYTES] = "tts_bytes",
    [GP_ROUTE_TTS_SSE] = "tts_sse",
    [GP_ROUTE_CARTESIA_VOICES] = "cartesia_voices",
    [GP_ROUTE_TTS_WEBSOCKET] = "tts_websocket",
    [GP_ROUTE_ELEVENLABS_TTS] = "elevenlabs_tts",
    [GP_ROUTE_ELEVENLABS_VOICES] = "elevenlabs_voices",
    [GP_ROUTE_ELEVENLABS_WEBSOCKET] = "elevenlabs_websocket",
    [GP_ROUTE_WYOMING] = "wyoming",
    [GP_ROUTE_OTHER] = "other",
};

static const char *const close_reason_names[GP_CONN_CLOSE_COUNT] = {
    "receive_timeout", "connection_limit", "per_client_limit"};

const char *gp_conn_close_reason_name(gp_conn_close_reason reason) {
    return (unsigned)reason < GP_CONN_CLOSE_COUNT ? close_reason_names[reason] : "?";
}

bool gp_route_synthesizes(gp_route r) {
    return r == GP_ROUTE_SPEECH || r == GP_ROUTE_SPEECH_BATCH || r == GP_ROUTE_TTS_BYTES ||
           r == GP_ROUTE_TTS_SSE || r == GP_ROUTE_ELEVENLABS_TTS;
}

const char *gp_route_name(gp_route route) {
    return (unsigned)route < GP_ROUTE_COUNT && route_names[route] ? route_names[route] : "other";
}

static void histogram_init(histogram *h, const char *name, const char *help, const double *bounds,
                           int n) {
    memset(h, 0, sizeof *h);
    h->name = name;
    h->help = help;
    h->n_bounds = n < HIST_MAX_BUCKETS ? n : HIST_MAX_BUCKETS;
    memcpy(h->bounds, bounds, (size_t)h->n_bounds * sizeof(double));
}

static void histogram_observe(histogram *h, double v) {
    int i = 0;
    while (i < h->n_bounds && v > h->bounds[i]) i++;
    h->counts[i]++;
    h->sum += v;
    h->count++;
}

int gp_metrics_create(gp_metrics **out) {
    static const double ttfa_bounds[] = {0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
    static const double rtf_bounds[] = {0.05, 0.1, 0.2, 0.35, 0.5, 0.75, 1, 1.5, 2, 5, 10, 50};
    gp_metrics *m = calloc(1, sizeof *m);
    if (!m) return -1;
    pthread_mutex_init(&m->lock, NULL);
    histogram_init(&m->ttfa, "gepard_time_to_first_audio_seconds",
                   "Per stream: time from its start (queueing included) to its first audio.",
                   ttfa_bounds, (int)(sizeof ttfa_bounds / sizeof ttfa_bounds[0]));
    histogram_init(&m->rtf, "gepard_real_time_factor",
                   "Per-stream real-time factor: synthesis time / audio duration (below 1 is "
                   "faster than real time).",
                   rtf_bounds, (int)(sizeof rtf_bounds / sizeof rtf_bounds[0]));
    *out = m;
    return 0;
}

void gp_metrics_free(gp_metrics *m) {
    if (!m) return;
    pthread_mutex_destroy(&m->lock);
    free(m);
}

void gp_metrics_count_request(gp_metrics *m, gp_route route, int status) {
    if ((unsigned)route >= GP_ROUTE_COUNT) route = GP_ROUTE_OTHER;
    if (status < STATUS_MIN || status >= STATUS_MIN + STATUS_SPAN) status = 500;
    pthread_mutex_lock(&m->lock);
    m->requests[route][status - STATUS_MIN]++;
    pthread_mutex_unlock(&m->lock);
}

void gp_metrics_stream_finished(gp_metrics *m, const gepard_synth_result *r, int disconnected) {
    pthread_mutex_lock(&m->lock);
    if (r->status == GEPARD_OK) {
        m->streams_ok++;
        if (r->samples > 0) {
            histogram_observe(&m->ttfa, r->ttfa_ms / 1e3);
            histogram_observe(&m->rtf, r->rtf);
        }
    } else if (r->status == GEPARD_ERR_CANCELLED) {
        m->streams_cancelled++;
    } else {
        m->streams_failed++;
    }
    if (disconnected) m->disconnects++;
    m->audio_seconds += r->audio_seconds;
    pthread_mutex_unlock(&m->lock);
}

void gp_metrics_connection_closed(gp_metrics *m, gp_conn_close_reason reason) {
    if ((unsigned)reason >= GP_CONN_CLOSE_COUNT) return;
    pthread_mutex_lock(&m->lock);
    m->connections_closed[reason]++;
    pthread_mutex_unlock(&m->lock);
}

void gp_metrics_sample_frames(gp_metrics *m, double now, uint64_t frames) {
    pthread_mutex_lock(&m->lock);
    m->sample_time[m->next_sample] = now;
    m->sample_frames[m->next_sample] = frames;
    m->next_sample = (m->next_sample + 1) % FRAME_SAMPLES;
    if (m->n_samples < FRAME_SAMPLES) m->n_samples++;
    pthread_mutex_unlock(&m->lock);
}

/* Frames per second between the oldest and newest sample. Lock held. */
static double frames_per_second_locked(const gp_metrics *m) {
    if (m->n_samples < 2) return 0;
    int newest = (m->next_sample + FRAME_SAMPLES - 1) % FRAME_SAMPLES;
    int oldest = m->n_samples < FRAME_SAMPLES ? 0 : m->next_sample;
    double dt = m->sample_time[newest] - m->sample_time[oldest];
    if (dt <= 0) return 0;
    return (double)(m->sample_frames[newest] - m->sample_frames[oldest]) / dt;
}

static int render_histogram(gp_buf *out, const histogram *h) {
    int rc = gp_buf_printf(out, "# HELP %s %s\n# TYPE %s histogram\n", h->name, h->help, h->name);
    uint64_t cumulative = 0;
    for (int i = 0; i <= h->n_bounds; i++) {
        cumulative += h->counts[i];
        if (i < h->n_bounds)
            rc |= gp_buf_printf(out, "%s_bucket{le=\"%g\"} %llu\n", h->name, h->bounds[i],
                                (unsigned long long)cumulative);
        else
            rc |= gp_buf_printf(out, "%s_bucket{le=\"+Inf\"} %llu\n", h->name,
                                (unsigned long long)cumulative);
    }
    rc |= gp_buf_printf(out, "%s_sum %.6f\n%s_count %llu\n", h->name, h->sum, h->name,
                        (unsigned long long)h->count);
    return rc;
}

static int render_gauge(gp_buf *out, const char *name, const char *type, const char *help,
                        double value) {
    return gp_buf_printf(out, "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n", name, help, name, type,
                         name, value);
}

static int render_requests_locked(const gp_metrics *m, gp_buf *out) {
    int rc = gp_buf_printf(out, "# HELP gepard_http_requests_total HTTP responses by route and "
                                "status code.\n# TYPE gepard_http_requests_total counter\n");
    for (int r = 0; r < GP_ROUTE_COUNT; r++)
        for (int s = 0; s < STATUS_SPAN; s++)
            if (m->requests[r][s])
                rc |= gp_buf_printf(out,
                                    "gepard_http_requests_total{route=\"%s\",code=\"%d\"} %llu\n",
                                    gp_route_name((gp_route)r), s + STATUS_MIN,
                                    (unsigned long long)m->requests[r][s]);
    rc |= gp_buf_printf(out,
                        "# HELP gepard_streams_total Finished synthesis streams by outcome.\n"
                        "# TYPE gepard_streams_total counter\n"
                        "gepard_streams_total{outcome=\"ok\"} %llu\n"
                        "gepard_streams_total{outcome=\"cancelled\"} %llu\n"
                        "gepard_streams_total{outcome=\"failed\"} %llu\n",
                        (unsigned long long)m->streams_ok, (unsigned long long)m->streams_cancelled,
                        (unsigned long long)m->streams_failed);
    rc |= gp_buf_printf(out, "# HELP gepard_http_connections_closed_total Connections the server "
                             "closed itself, by reason.\n"
                             "# TYPE gepard_http_connections_closed_total counter\n");
    for (int r = 0; r < GP_CONN_CLOSE_COUNT; r++)
        rc |= gp_buf_printf(out, "gepard_http_connections_closed_total{reason=\"%s\"} %llu\n",
                            gp_conn_close_reason_name((gp_conn_close_reason)r),
                            (unsigned long long)m->connections_closed[r]);
    return rc;
}

/* Prometheus's standard process metrics: resident memory, CPU time, open
 * descriptors (a soak checks that they stay flat). */
static int render_process(gp_buf *out) {
    int fds = 0;
    DIR *d = opendir("/proc/self/fd");
    for (struct dirent *e; d && (e = readdir(d));)
        if (e->d_name[0] != '.') fds++;
    if (d) closedir(d);
    int rc = render_gauge(out, "process_resident_memory_bytes", "gauge",
                          "Resident memory size in bytes.", (double)gp_current_rss_bytes());
    rc |=
        render_gauge(out, "process_cpu_seconds_total", "counter",
                     "Total user and system CPU time spent in seconds.", gp_process_cpu_seconds());
    rc |= render_gauge(out, "process_open_fds", "gauge", "Number of open file descriptors.",
                       (double)(fds > 0 ? fds - 1 : 0)); /* less the one listing them */
    return rc;
}

int gp_metrics_render(gp_metrics *m, gepard_engine *engine, int max_streams, int max_queue,
                      int open_connections, gp_buf *out) {
    gepard_engine_stats st;
    memset(&st, 0, sizeof st);
    if (engine) gepard_engine_get_stats(engine, &st);
    pthread_mutex_lock(&m->lock);
    int rc = render_requests_locked(m, out);
    rc |= render_gauge(out, "gepard_client_disconnects_total", "counter",
                       "Streams cancelled because the client went away.", (double)m->disconnects);
    rc |= render_gauge(out, "gepard_audio_seconds_total", "counter", "Seconds of audio delivered.",
                       m->audio_seconds);
    rc |= render_histogram(out, &m->ttfa);
    rc |= render_histogram(out, &m->rtf);
    double fps = frames_per_second_locked(m);
    pthread_mutex_unlock(&m->lock);
    rc |= render_gauge(out, "gepard_http_connections_open", "gauge", "Open HTTP connections.",
                       (double)open_connections);
    rc |= render_gauge(out, "gepard_frames_per_second", "gauge",
                       "Frames generated per second over the last ten seconds (all streams).", fps);
    rc |= render_gauge(out, "gepard_active_streams", "gauge",
                       "Streams being synthesised now (the current batch).",
                       (double)st.active_streams);
    rc |= render_gauge(out, "gepard_queued_streams", "gauge", "Streams waiting for a slot.",
                       (double)st.queued_streams);
    rc |= render_gauge(out, "gepard_max_streams", "gauge", "Stream slots (largest batch).",
                       (double)max_streams);
    rc |= render_gauge(out, "gepard_max_queue", "gauge", "Queue places before requests get 429.",
                       (double)max_queue);
    rc |= render_gauge(out, "gepard_engine_steps_total", "counter", "Batched engine steps run.",
                       (double)st.steps);
    rc |= render_gauge(out, "gepard_engine_frames_total", "counter",
                       "Audio frames generated (about 46 ms each).", (double)st.frames);
    rc |= render_gauge(out, "gepard_engine_streams_started_total", "counter",
                       "Streams accepted by the engine.", (double)st.streams_started);
    rc |= render_gauge(out, "gepard_batch_size_max", "gauge",
                       "Largest number of streams stepped together so far.", (double)st.max_batch);
    rc |= render_gauge(out, "gepard_batch_size_mean", "gauge",
                       "Mean number of streams per engine step.", st.mean_batch);
    rc |= render_gauge(out, "gepard_engine_cycle_seconds", "gauge",
                       "Smoothed time of one engine cycle (batched step and its audio); real "
                       "time needs it under a frame's 0.046 s.",
                       st.cycle_ms / 1e3);
    rc |= render_gauge(out, "gepard_engine_step_seconds_total", "counter",
                       "Time in batched backbone steps (where the codec overlaps a GPU step, "
                       "without the overlap).",
                       st.step_seconds);
    rc |= render_gauge(out, "gepard_engine_step_wait_seconds_total", "counter",
                       "Of the step time: waiting for the GPU to finish a step (the rest is "
                       "the host's sampling and bookkeeping).",
                       st.step_wait_seconds);
    rc |=
        render_gauge(out, "gepard_engine_deliver_seconds_total", "counter",
                     "Time decoding audio and handing it to the connections.", st.deliver_seconds);
    rc |= render_gauge(out, "gepard_engine_codec_seconds_total", "counter",
                       "Of the delivery time: in batched codec calls (the new frames of many "
                       "streams decoded at once).",
                       st.codec_seconds);
    rc |= render_gauge(out, "gepard_engine_codec_batches_total", "counter", "Batched codec calls.",
                       (double)st.codec_batches);
    rc |= render_gauge(out, "gepard_realtime_capacity_streams", "gauge",
                       "Streams the engine admits at once while keeping each one real time "
                       "(--realtime-margin; the slot count when that is 0).",
                       (double)st.realtime_capacity);
    rc |= render_gauge(out, "gepard_kv_blocks_used", "gauge", "KV cache blocks in use.",
                       (double)st.kv_blocks_used);
    rc |= render_gauge(out, "gepard_kv_blocks_total", "gauge", "KV cache blocks in all.",
                       (double)st.kv_blocks_total);
    rc |= render_process(out);
    return rc ? -1 : 0;
}
