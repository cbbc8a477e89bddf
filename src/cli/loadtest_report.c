/* loadtest_report.c — `gepard loadtest`'s JSON report: throughput, time to
 * first audio, per-stream real-time factor, the gaps between audio chunks,
 * underruns of a real-time listener, and errors by kind (see loadtest.h and
 * docs/SERVER.md, "Load testing"). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/loadtest.h"

#define MAX_ERRORS 5
#define MAX_KINDS 32

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The p-th percentile (nearest rank) of n sorted values. */
static double percentile(const double *v, int n, double p) {
    int i = (int)ceil(p / 100.0 * n) - 1;
    return v[i < 0 ? 0 : i >= n ? n - 1 : i];
}

/* "name": {"p50","p90","p99","mean","min","max"} of n values (sorted in place). */
static void print_distribution(const char *name, double *v, int n, const char *tail) {
    printf("  \"%s\": ", name);
    if (n == 0) {
        printf("null%s\n", tail);
        return;
    }
    qsort(v, (size_t)n, sizeof *v, compare_doubles);
    double sum = 0;
    for (int i = 0; i < n; i++) sum += v[i];
    printf("{\"p50\": %.4g, \"p90\": %.4g, \"p99\": %.4g, \"mean\": %.4g, \"min\": %.4g, "
           "\"max\": %.4g}%s\n",
           percentile(v, n, 50), percentile(v, n, 90), percentile(v, n, 99), sum / n, v[0],
           v[n - 1], tail);
}

static void print_json_string(const char *s) {
    cJSON *j = cJSON_CreateString(s);
    char *text = j ? cJSON_PrintUnformatted(j) : NULL;
    fputs(text ? text : "\"?\"", stdout);
    free(text);
    cJSON_Delete(j);
}

/* "errors_by_kind": {"http_429": 3, ...} and "errors": the first messages. */
static void print_errors(const lt_run *run) {
    const char *kinds[MAX_KINDS];
    int counts[MAX_KINDS], n_kinds = 0, n_errors = 0;
    for (int i = 0; i < run->total; i++) {
        const lt_request *r = &run->req[i];
        if (r->ok) continue;
        const char *k = r->done ? r->kind : "not_finished";
        int j = 0;
        while (j < n_kinds && strcmp(kinds[j], k)) j++;
        if (j == n_kinds && n_kinds == MAX_KINDS) j = MAX_KINDS - 1, k = "other";
        if (j == n_kinds) kinds[n_kinds] = k, counts[n_kinds++] = 0;
        counts[j]++;
    }
    printf("  \"errors_by_kind\": {");
    for (int j = 0; j < n_kinds; j++) {
        printf("%s", j ? ", " : "");
        print_json_string(kinds[j]);
        printf(": %d", counts[j]);
    }
    printf("},\n  \"errors\": [");
    for (int i = 0; i < run->total && n_errors < MAX_ERRORS; i++)
        if (!run->req[i].ok) {
            printf("%s", n_errors++ ? ", " : "");
            print_json_string(run->req[i].error);
        }
    printf("]\n");
}

/* Seconds of audio in an ok request's body. */
static double audio_seconds(const lt_request *r) {
    return (double)(r->bytes - r->header_bytes) / (double)r->bytes_per_sample / (double)r->rate;
}

static int compare_starts(const void *a, const void *b) {
    const double x = (*(const lt_request *const *)a)->start;
    const double y = (*(const lt_request *const *)b)->start;
    return (x > y) - (x < y);
}

/* "full_load": audio per second while the load was whole — from the last
 * first audio of the first `concurrency` requests started to the first end
 * of the last `concurrency` started (one wave: from its last first audio to
 * its first end) — without the ramp of a burst nor the tail of the last
 * streams, each stream's audio counted as arriving evenly between its first
 * and last chunk. null when that window is under a second. */
static void print_full_load(const lt_run *run) {
    const lt_request **order = malloc((size_t)(run->total > 0 ? run->total : 1) * sizeof *order);
    int n = 0;
    for (int i = 0; order && i < run->total; i++)
        if (run->req[i].ok && run->req[i].first_audio > 0) order[n++] = &run->req[i];
    const int wave = run->concurrency < n ? run->concurrency : n;
    double from = 0, to = 0, t0 = 0;
    if (n > 0 && wave > 0) {
        qsort(order, (size_t)n, sizeof *order, compare_starts);
        t0 = order[0]->start;
        from = order[0]->first_audio;
        for (int k = 0; k < wave; k++)
            if (order[k]->first_audio > from) from = order[k]->first_audio;
        to = order[n - 1]->end;
        for (int k = n - wave; k < n; k++)
            if (order[k]->end < to) to = order[k]->end;
    }
    if (!order || to - from < 1.0) {
        printf("  \"full_load\": null,\n");
        free(order);
        return;
    }
    double audio = 0;
    for (int k = 0; k < n; k++) {
        const lt_request *r = order[k];
        const double a = r->first_audio, b = r->last_audio > a ? r->last_audio : a;
        const double lo = a > from ? a : from, hi = b < to ? b : to;
        if (b == a)
            audio += a >= from && a <= to ? audio_seconds(r) : 0;
        else if (hi > lo)
            audio += audio_seconds(r) * (hi - lo) / (b - a);
    }
    printf("  \"full_load\": {\"from_s\": %.3f, \"seconds\": %.3f, "
           "\"audio_seconds_per_second\": %.4f},\n",
           from - t0, to - from, audio / (to - from));
    free(order);
}

/* Gaps and underruns over every stream that got audio, ok or not. */
static void print_listening(const lt_run *run, double *gaps) {
    int n_gaps = 0, underruns = 0, streams = 0;
    double max_gap = 0, worst = -INFINITY;
    /* where in each stream (ms of audio delivered) its longest gap and its
     * underrun came */
    double *gap_at = calloc((size_t)run->total + 1, sizeof(double));
    double *underrun_at = calloc((size_t)run->total + 1, sizeof(double));
    for (int i = 0; i < run->total; i++) {
        const lt_request *r = &run->req[i];
        if (!r->chunks) continue;
        streams++;
        if (r->chunks >= 2) {
            if (gap_at) gap_at[n_gaps] = r->max_gap_at_s * 1e3;
            gaps[n_gaps++] = r->max_gap_s * 1e3;
            if (r->max_gap_s > max_gap) max_gap = r->max_gap_s;
        }
        double deficit = r->worst_deficit_s - run->prebuffer_s;
        if (deficit > 0 && underrun_at) underrun_at[underruns] = r->worst_deficit_at_s * 1e3;
        if (deficit > 0) underruns++;
        if (deficit > worst) worst = deficit;
    }
    printf("  \"streams_with_audio\": %d,\n  \"prebuffer_ms\": %.1f,\n", streams,
           run->prebuffer_s * 1e3);
    if (n_gaps)
        printf("  \"max_gap_ms\": %.2f,\n", max_gap * 1e3);
    else
        printf("  \"max_gap_ms\": null,\n");
    print_distribution("stream_max_gap_ms", gaps, n_gaps, ",");
    print_distribution("stream_max_gap_at_audio_ms", gap_at, gap_at ? n_gaps : 0, ",");
    printf("  \"underruns\": %d,\n  \"worst_underrun_ms\": %.2f,\n", underruns,
           worst > 0 ? worst * 1e3 : 0);
    print_distribution("underrun_at_audio_ms", underrun_at, underrun_at ? underruns : 0, ",");
    free(gap_at);
    free(underrun_at);
    if (isfinite(worst))
        printf("  \"min_headroom_ms\": %.2f,\n", -worst * 1e3);
    else
        printf("  \"min_headroom_ms\": null,\n");
}

/* A metric for JSON: null when the server did not report it. */
static void print_number(const char *name, double v, const char *tail) {
    if (v < 0)
        printf("\"%s\": null%s", name, tail);
    else
        printf("\"%s\": %.6g%s", name, v, tail);
}

/* "server": what /metrics said during the run (--sample): every sample, the
 * resident memory and open files after warm-up (the first sample past a
 * quarter of the run) and at the end, and the server's count of answered
 * speech requests against the client's. */
static void print_server(const lt_run *run, int client_ok) {
    if (run->sample_s <= 0) return;
    printf("  \"server\": {\n    \"samples\": [");
    for (int i = 0; i < run->n_samples; i++) {
        const lt_sample *p = &run->samples[i];
        printf("%s\n      {\"t\": %.1f, ", i ? "," : "", p->t);
        print_number("rss_mb", p->rss_mb, ", ");
        print_number("open_fds", p->fds, ", ");
        print_number("cpu_seconds", p->cpu_s, ", ");
        print_number("active", p->active, ", ");
        print_number("queued", p->queued, "}");
    }
    printf("%s],\n", run->n_samples ? "\n    " : "");
    const lt_sample *warm = NULL, *last = run->have_after ? &run->after : NULL;
    for (int i = 0; i < run->n_samples && !warm; i++)
        if (run->samples[i].t >= run->wall_s / 4) warm = &run->samples[i];
    if (warm && last && warm->rss_mb >= 0 && last->rss_mb >= 0) {
        const double hours = (last->t - warm->t) / 3600;
        printf("    \"rss_mb\": {\"after_warmup\": %.1f, \"at_end\": %.1f, \"growth\": %.1f, "
               "\"growth_per_hour\": %.1f},\n",
               warm->rss_mb, last->rss_mb, last->rss_mb - warm->rss_mb,
               hours > 0 ? (last->rss_mb - warm->rss_mb) / hours : 0);
        printf("    \"open_fds\": {\"after_warmup\": %.0f, \"at_end\": %.0f},\n", warm->fds,
               last->fds);
    } else {
        printf("    \"rss_mb\": null,\n    \"open_fds\": null,\n");
    }
    if (run->have_before && run->have_after) {
        const double served = run->after.speech_ok - run->before.speech_ok;
        printf("    \"speech_200_answered\": %.0f,\n    \"client_ok\": %d,\n"
               "    \"counts_match\": %s\n  },\n",
               served, client_ok, served == client_ok ? "true" : "false");
    } else {
        printf("    \"speech_200_answered\": null,\n    \"client_ok\": %d,\n"
               "    \"counts_match\": null\n  },\n",
               client_ok);
    }
}

void lt_report(const lt_run *run) {
    double *ttfa = calloc((size_t)run->total + 1, sizeof(double));
    double *rtf = calloc((size_t)run->total + 1, sizeof(double));
    double *gaps = calloc((size_t)run->total + 1, sizeof(double));
    if (!ttfa || !rtf || !gaps) {
        fprintf(stderr, "gepard: out of memory for the loadtest report\n");
        free(ttfa), free(rtf), free(gaps);
        return;
    }
    int ok = 0;
    long chunks = 0;
    double audio = 0, wall = run->wall_s;
    for (int i = 0; i < run->total; i++) {
        const lt_request *r = &run->req[i];
        chunks += r->chunks;
        if (!r->ok) continue;
        const double seconds = audio_seconds(r);
        audio += seconds;
        ttfa[ok] = (r->first_audio - r->start) * 1e3;
        rtf[ok] = seconds > 0 ? (r->end - r->start) / seconds : 0;
        ok++;
    }
    printf("{\n  \"url\": ");
    print_json_string(run->url);
    printf(",\n  \"concurrency\": %d,\n  \"requests\": %d,\n  \"ok\": %d,\n"
           "  \"failed\": %d,\n  \"wall_seconds\": %.3f,\n  \"audio_seconds\": %.3f,\n"
           "  \"audio_seconds_per_second\": %.4f,\n  \"aggregate_rtf\": %.4f,\n"
           "  \"requests_per_second\": %.4f,\n  \"chunks\": %ld,\n",
           run->concurrency, run->total, ok, run->total - ok, wall, audio,
           wall > 0 ? audio / wall : 0, audio > 0 ? wall / audio : 0, wall > 0 ? ok / wall : 0,
           chunks);
    print_full_load(run);
    print_distribution("ttfa_ms", ttfa, ok, ",");
    print_distribution("rtf", rtf, ok, ",");
    print_listening(run, gaps);
    const double busiest = wall > 0 ? run->loop_cpu_max_s / wall : 0;
    printf("  \"client_threads\": %d,\n  \"client_cpu_seconds\": %.3f,\n"
           "  \"client_cpu_share\": %.3f,\n  \"client_busiest_loop_share\": %.3f,\n",
           run->threads, run->cpu_s, wall > 0 ? run->cpu_s / wall : 0, busiest);
    print_server(run, ok);
    print_errors(run);
    printf("}\n");
    const int threads = run->threads > 0 ? run->threads : 1;
    if (wall > 1 && busiest > 0.8) {
        char loops[64] = "event loop";
        if (threads > 1) snprintf(loops, sizeof loops, "busiest of %d event loops", threads);
        fprintf(stderr,
                "gepard: warning: the load generator's %s used %.0f%% of a core; its arrival "
                "times (gaps, underruns) may include its own delays — use more --threads (or "
                "several processes)\n",
                loops, 100 * busiest);
    }
    free(ttfa);
    free(rtf);
    free(gaps);
}
