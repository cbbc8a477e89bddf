/* cli_bench.c — `gepard bench`: one JSON object of speed figures measured on
 * a real or synthetic checkpoint, next to the machine's measured limits. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/synth_options.h"
#include "gepard.h"

static const cli_option bench_options[] = {
    {"model", 'm', "PATH", "model directory or repo id (e.g. from `gepard synth`)"},
    {"codec", 0, "PATH", "codec .nemo / directory or repo id"},
    {"dtype", 0, "FMT", "weight format: f32, bf16 (default), int8 or q4"},
    {"compare", 0, "FMT", "also measure the backbone with a second weight format"},
    {"threads", 't', "N", "threads (default: all CPUs)"},
    {"frames", 0, "N", "frames per measurement (default 64)"},
    {"text", 0, "TEXT", "the sentence to prefill and time to first audio"},
    {"streams", 0, "N,N,...",
     "GPU: batch sizes of the aggregate measurement (default 1,64,256); with --codec-only the "
     "codec's batches (1: one stream), --frames calls each"},
    {"codec-only", 0, NULL,
     "GPU: only the codec decoder (gpu_codec), in --gpu-precision alone when it names one"},
    {"frames-per-call", 0, "K",
     "GPU, with --codec-only: each stream decodes K frames per call (default 1; the engine "
     "under load decodes 1)"},
    CLI_DEVICE_OPTIONS,
};

static int parse_format(const char *command, const char *name, const char *value,
                        gepard_weight_format *out) {
    if (!value) return CLI_EXIT_OK;
    static const struct {
        const char *name;
        gepard_weight_format f;
    } names[] = {{"f32", GEPARD_WEIGHTS_F32},
                 {"bf16", GEPARD_WEIGHTS_BF16},
                 {"int8", GEPARD_WEIGHTS_INT8},
                 {"q4", GEPARD_WEIGHTS_Q4}};
    for (size_t i = 0; i < 4; i++)
        if (strcmp(value, names[i].name) == 0) {
            *out = names[i].f;
            return CLI_EXIT_OK;
        }
    return cli_usage_error(command, "--%s must be f32, bf16, int8 or q4, got \"%s\"", name, value);
}

int cli_bench(int argc, char **argv) {
    cli_args a;
    int rc =
        cli_parse(&a, "bench", "--model PATH --codec PATH [OPTIONS]",
                  "Measure gepard on this machine and print one JSON object: per-frame backbone\n"
                  "and codec time, prefill speed, real-time factor, time to first audio, peak\n"
                  "RSS, and the measured roofline (memory bandwidth, FMA peaks) with each\n"
                  "phase's fraction of its bound. Use `gepard synth` for real-size weights.",
                  bench_options, (int)(sizeof bench_options / sizeof bench_options[0]), argc, argv);
    if (rc || a.help) return rc;
    gepard_bench_params p = gepard_bench_default_params();
    long long n;
    p.model = cli_get(&a, "model");
    p.codec = cli_get(&a, "codec");
    if (cli_get(&a, "text")) p.text = cli_get(&a, "text");
    if (!p.codec || (!p.model && !cli_flag(&a, "codec-only"))) {
        rc = cli_usage_error("bench", "--model and --codec are required (--codec-only: --codec)");
    } else if (a.positional_count) {
        rc = cli_usage_error("bench", "unexpected argument \"%s\"", a.positionals[0]);
    } else if (!(rc = parse_format("bench", "dtype", cli_get(&a, "dtype"), &p.weights)) &&
               !(rc = parse_format("bench", "compare", cli_get(&a, "compare"), &p.compare))) {
        n = 0;
        if (!(rc = cli_get_int(&a, "threads", 0, 1024, &n))) p.threads = (int)n;
        n = p.frames;
        if (!rc && !(rc = cli_get_int(&a, "frames", 1, 100000, &n))) p.frames = (int)n;
        p.device = cli_get(&a, "device");
        p.gpu_precision = cli_get(&a, "gpu-precision");
        p.codec_only = cli_flag(&a, "codec-only");
        n = 1;
        if (!rc && !(rc = cli_get_int(&a, "frames-per-call", 1, 4096, &n)))
            p.codec_frames_per_call = (int)n;
    }
    int streams[32], n_streams = 0;
    const char *list = cli_get(&a, "streams");
    for (const char *q = list; !rc && q && *q && n_streams < 32;) {
        char *end;
        long v = strtol(q, &end, 10);
        if (end == q || v < 1 || v > 65536 || (*end && *end != ',')) {
            rc = cli_usage_error("bench",
                                 "--streams takes numbers 1..65536 separated by commas, "
                                 "got \"%s\"",
                                 list);
            break;
        }
        streams[n_streams++] = (int)v;
        q = *end ? end + 1 : end;
    }
    if (n_streams) {
        p.streams = streams;
        p.n_streams = n_streams;
    }
    char *json = NULL;
    if (!rc) {
        if (gepard_benchmark(&p, &json) != GEPARD_OK)
            rc = cli_runtime_error("%s", gepard_last_error());
        else
            printf("%s\n", json);
    }
    gepard_free(json);
    cli_args_free(&a);
    return rc;
}
