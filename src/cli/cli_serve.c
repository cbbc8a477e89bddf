/* cli_serve.c — `gepard serve`: the OpenAI-compatible speech server.
 *
 * Listens first (so /health answers while the model loads), loads the model,
 * codec and voices, creates the engine and makes the server ready, then
 * waits for SIGTERM or SIGINT: in-flight streams get --drain seconds to
 * finish, the rest are cancelled, and the process exits 0. The signals are
 * blocked in every thread and taken with sigwait on the main thread, so no
 * handler runs inside libmicrohttpd or the engine. */
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/buf.h"
#include "cli/args.h"
#include "cli/fd_limit.h"
#include "cli/synth_options.h"
#include "gepard.h"
#include "server/server.h"

#define DEFAULT_MODEL "nineninesix/gepard-1.0"
#define DEFAULT_CODEC "nvidia/nemo-nano-codec-22khz-1.89kbps-21.5fps"
#define SERVE_MALLOC_ARENAS 2
/* On a GPU a cycle may use 80% of a frame's 46 ms: the rest absorbs prefill
 * chunks and jitter (engine/admission.h). A GPU batch costs little more than
 * one stream, so keeping every listener real time costs little throughput.
 * On a CPU it is off by default: two cores hold one or two streams in real
 * time, and making the rest wait would cut the aggregate by more than half
 * (docs/SERVER.md) — listeners that play as they receive want it on. */
#define SERVE_REALTIME_MARGIN_GPU 0.8

static const cli_option serve_options[] = {
    {"model", 'm', "PATH", "model directory or Hub repo id (default " DEFAULT_MODEL ")"},
    {"codec", 0, "PATH", "codec .nemo / directory or Hub repo id (default " DEFAULT_CODEC ")"},
    {"host", 0, "ADDR", "address to listen on (default 127.0.0.1; 0.0.0.0 for every interface)"},
    {"port", 'p', "N", "TCP port (default 8080; 0 picks a free one)"},
    {"wyoming-port", 0, "N",
     "also speak Home Assistant's Wyoming protocol on this TCP port (usually 10200; off by "
     "default; no authentication: it listens on --host)"},
    {"voices", 0, "DIR", "voices: reference clips, saved voices and *.lora.* adapters"},
    {"api-key", 0, "KEY", "require \"Authorization: Bearer KEY\" (default: $GEPARD_API_KEY)"},
    {"max-streams", 0, "N", "streams synthesised together in one batch (default 16; 256 on a GPU)"},
    {"max-queue", 0, "N",
     "requests waiting for a slot before 429 (default 64; 4 x slots on a GPU)"},
    {"realtime-margin", 0, "F",
     "admit a waiting request only while every running stream still gets a frame within F x "
     "its duration (default 0.8 on a GPU; 0, every slot however slow, on the CPU)"},
    {"max-input-chars", 0, "N", "longest input text in characters (default 4096)"},
    {"max-body-mb", 0, "N", "largest request body in MiB (default 16)"},
    {"max-frames", 0, "N", "largest max_frames a request may ask for (default 4000)"},
    {"request-timeout", 0, "S", "stop a synthesis running longer than S seconds (default 600)"},
    {"max-connections", 0, "N", "open connections at once (default 256)"},
    {"max-connections-per-client", 0, "N",
     "connections one client address may hold (default 128; 0: no share)"},
    {"http-threads", 0, "N",
     "threads serving every connection and encoding its audio (default: one per CPU, "
     "at least 4)"},
    {"receive-timeout", 0, "S",
     "a request's headers and body must arrive within S seconds (default 20)"},
    {"drain", 0, "S", "on SIGTERM, let streams finish for up to S seconds (default 10)"},
    {"model-name", 0, "NAME", "the model id /v1/models lists (default gepard-1.0)"},
    {"access-log", 0, "MODE",
     "one line per request: off (default), plain or json (id, route, status, voice, frames, "
     "TTFA, duration)"},
    {"access-log-file", 0, "FILE",
     "append the access log to FILE instead of standard error (implies plain unless "
     "--access-log says json)"},
    {"no-word-timestamps", 0, NULL,
     "refuse Cartesia's add_timestamps instead of answering with word times estimated from the "
     "audio (Gepard has no alignment of words to frames)"},
    {"cors-origin", 0, "ORIGIN",
     "let browser pages from ORIGIN (https://app.example:8443, or * for any) call the API; "
     "repeat it or give a comma list (default: no CORS)"},
    {"threads", 't', "N", "compute threads (default: all CPUs)"},
    {"dtype", 0, "FMT", "weight format: f32, bf16 (default), int8 or q4"},
    {"kv-cache-mb", 0, "N", "KV cache size (default: enough for every slot's worst case)"},
    {"warm-up", 0, "N",
     "before saying ready, run synthetic batches of 1 to N streams so the GPU's graphs and "
     "kernels exist and admission has timed each size (default: --max-streams on a GPU; "
     "0, off, on the CPU)"},
    {"revision", 0, "REV", "Hub revision of the model (default main)"},
    {"offline", 0, NULL, "use only files already in the Hugging Face cache"},
    CLI_DEVICE_OPTIONS,
    CLI_CODEC_DEVICE_OPTION,
};
#define N_SERVE_OPTIONS ((int)(sizeof serve_options / sizeof serve_options[0]))

typedef struct serve_config {
    gp_server_params server;
    gepard_engine_params engine;
    gepard_load_params load;
    double drain_s;
    const char *model, *codec, *voices;
    const char *codec_device;
    bool streams_given, queue_given, margin_given; /* else set for the device once loaded */
    long long warm_up; /* largest warm-up batch; -1: by device (load_backend) */
} serve_config;

static int parse_dtype(const cli_args *a, gepard_weight_format *w) {
    const char *d = cli_get(a, "dtype");
    *w = GEPARD_WEIGHTS_DEFAULT;
    if (!d) return CLI_EXIT_OK;
    static const struct {
        const char *name;
        gepard_weight_format format;
    } names[] = {{"f32", GEPARD_WEIGHTS_F32},
                 {"bf16", GEPARD_WEIGHTS_BF16},
                 {"int8", GEPARD_WEIGHTS_INT8},
                 {"q4", GEPARD_WEIGHTS_Q4}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(d, names[i].name) == 0) {
            *w = names[i].format;
            return CLI_EXIT_OK;
        }
    return cli_usage_error("serve", "--dtype must be f32, bf16, int8 or q4, got \"%s\"", d);
}

/* Every --cors-origin (the option parser keeps only the last) joined with
 * commas; the server splits and checks them. */
static int join_cors_origins(int argc, char **argv, gp_buf *out) {
    static const char opt[] = "--cors-origin";
    size_t n = sizeof opt - 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) break;
        const char *v = NULL;
        if (strcmp(argv[i], opt) == 0 && i + 1 < argc)
            v = argv[++i];
        else if (strncmp(argv[i], opt, n) == 0 && argv[i][n] == '=')
            v = argv[i] + n + 1;
        if (!v) continue;
        if ((out->len && gp_buf_append_str(out, ",")) || gp_buf_append_str(out, v))
            return cli_runtime_error("out of memory reading --cors-origin");
    }
    return CLI_EXIT_OK;
}

static int read_config(const cli_args *a, serve_config *c) {
    c->server = gp_server_default_params();
    c->engine = gepard_engine_default_params();
    c->load = gepard_load_default_params();
    c->drain_s = 10;
    long long port = c->server.port, wyoming = -1, streams = c->engine.max_streams,
              queue = c->engine.max_queue;
    long long chars = (long long)c->server.max_input_chars, body_mb = 16, threads = 0, kv = 0;
    long long frames = c->server.max_frames_limit;
    c->warm_up = -1;
    double timeout = c->server.request_timeout_s;
    long long conns = c->server.max_connections, per_client = c->server.max_connections_per_client;
    long long http_threads = c->server.http_threads;
    int rc;
    if ((rc = cli_get_int(a, "port", 0, 65535, &port)) ||
        (rc = cli_get_int(a, "wyoming-port", 0, 65535, &wyoming)) ||
        (rc = cli_get_int(a, "max-streams", 1, 4096, &streams)) ||
        (rc = cli_get_int(a, "max-queue", 0, 100000, &queue)) ||
        (rc = cli_get_int(a, "max-input-chars", 1, 1000000, &chars)) ||
        (rc = cli_get_int(a, "max-body-mb", 1, 4096, &body_mb)) ||
        (rc = cli_get_int(a, "max-frames", 1, 1000000, &frames)) ||
        (rc = cli_get_int(a, "threads", 0, 1024, &threads)) ||
        (rc = cli_get_int(a, "kv-cache-mb", 0, 1 << 20, &kv)) ||
        (rc = cli_get_int(a, "warm-up", 0, 4096, &c->warm_up)) ||
        (rc = cli_get_float(a, "request-timeout", 0.1, 1e6, &timeout)) ||
        (rc = cli_get_float(a, "drain", 0, 1e6, &c->drain_s)) ||
        (rc = cli_get_float(a, "realtime-margin", 0, 100, &c->engine.realtime_margin)) ||
        (rc = cli_get_int(a, "max-connections", 1, 1000000, &conns)) ||
        (rc = cli_get_int(a, "max-connections-per-client", 0, 1000000, &per_client)) ||
        (rc = cli_get_int(a, "http-threads", 0, 256, &http_threads)) ||
        (rc = cli_get_float(a, "receive-timeout", 0.1, 1e6, &c->server.receive_timeout_s)) ||
        (rc = parse_dtype(a, &c->load.weights)))
        return rc;
    c->server.port = (int)port;
    c->server.wyoming_port = (int)wyoming;
    c->server.max_input_chars = (size_t)chars;
    c->server.max_body_bytes = (size_t)body_mb << 20;
    c->server.max_frames_limit = (int)frames;
    c->server.request_timeout_s = timeout;
    c->server.max_connections = (int)conns;
    c->server.max_connections_per_client = (int)per_client;
    c->server.http_threads = (int)http_threads;
    if (cli_get(a, "host")) c->server.host = cli_get(a, "host");
    if (cli_get(a, "model-name")) c->server.model_name = cli_get(a, "model-name");
    const char *log = cli_get(a, "access-log");
    c->server.access_log_file = cli_get(a, "access-log-file");
    if (!log)
        c->server.access_log = c->server.access_log_file ? GP_ACCESS_LOG_PLAIN : GP_ACCESS_LOG_OFF;
    else if (strcmp(log, "off") == 0)
        c->server.access_log = GP_ACCESS_LOG_OFF;
    else if (strcmp(log, "plain") == 0)
        c->server.access_log = GP_ACCESS_LOG_PLAIN;
    else if (strcmp(log, "json") == 0)
        c->server.access_log = GP_ACCESS_LOG_JSON;
    else
        return cli_usage_error("serve", "--access-log must be off, plain or json, got \"%s\"", log);
    c->server.api_key = cli_get(a, "api-key") ? cli_get(a, "api-key") : getenv("GEPARD_API_KEY");
    if (c->server.api_key && !*c->server.api_key) c->server.api_key = NULL;
    c->engine.max_streams = (int)streams;
    c->engine.max_queue = (int)queue;
    c->streams_given = cli_get(a, "max-streams") != NULL;
    c->queue_given = cli_get(a, "max-queue") != NULL;
    c->margin_given = cli_get(a, "realtime-margin") != NULL;
    c->engine.threads = (int)threads;
    c->engine.kv_cache_mb = (int)kv;
    c->load.revision = cli_get(a, "revision");
    c->load.offline = cli_flag(a, "offline");
    cli_read_device(a, &c->load);
    c->model = cli_get(a, "model") ? cli_get(a, "model") : DEFAULT_MODEL;
    c->codec = cli_get(a, "codec") ? cli_get(a, "codec") : DEFAULT_CODEC;
    c->voices = cli_get(a, "voices");
    c->codec_device = cli_get(a, "codec-device");
    return CLI_EXIT_OK;
}

typedef struct serve_backend {
    gepard_model *model;
    gepard_codec *codec;
    gp_voices *voices;
    gepard_engine *engine;
} serve_backend;

/* A GPU batches hundreds of streams in a step for little more than the cost
 * of one: unless told otherwise, give it that many slots (the KV cache is
 * then sized to at most 60% of the free device memory, see engine.c). */
#define GPU_DEFAULT_STREAMS 256

static int load_backend(serve_config *c, serve_backend *b) {
    gepard_load_params codec_lp = c->load;
    codec_lp.revision = NULL;
    gepard_codec_params cp = gepard_codec_default_params();
    cp.n_threads = c->engine.threads;
    cp.hub = &codec_lp;
    cp.device = c->codec_device ? c->codec_device : c->load.device;
    cp.gpu_precision = c->load.gpu_precision;
    if (gepard_model_load(c->model, &c->load, &b->model) != GEPARD_OK ||
        gepard_codec_load_with_params(c->codec, &cp, &b->codec) != GEPARD_OK)
        return cli_runtime_error("%s", gepard_last_error());
    if (strncmp(gepard_model_device(b->model), "cuda", 4) == 0) {
        if (!c->streams_given) c->engine.max_streams = GPU_DEFAULT_STREAMS;
        if (!c->queue_given) c->engine.max_queue = 4 * c->engine.max_streams;
        if (!c->margin_given) c->engine.realtime_margin = SERVE_REALTIME_MARGIN_GPU;
        if (c->warm_up < 0) c->warm_up = c->engine.max_streams;
    }
    if (c->warm_up < 0) c->warm_up = 0;
    gp_error err;
    gp_error_clear(&err);
    if (gp_voices_load(b->model, b->codec, c->voices, &b->voices, &err))
        return cli_runtime_error("%s", err.message);
    if (gepard_engine_create(b->model, b->codec, &c->engine, &b->engine) != GEPARD_OK)
        return cli_runtime_error("%s", gepard_last_error());
    if (c->warm_up > 0) {
        const int n = c->warm_up < c->engine.max_streams ? (int)c->warm_up : c->engine.max_streams;
        fprintf(stderr, "gepard serve: warming up (batches of 1 to %d stream%s)\n", n,
                n == 1 ? "" : "s");
        double seconds = 0;
        if (gepard_engine_warm_up(b->engine, n, 0, &seconds) != GEPARD_OK)
            return cli_runtime_error("%s — the server cannot serve; check the device, or start "
                                     "it with --warm-up 0 to see requests fail one by one",
                                     gepard_last_error());
        fprintf(stderr, "gepard serve: warmed up in %.1f s\n", seconds);
    }
    return CLI_EXIT_OK;
}

static void free_backend(serve_backend *b) {
    gepard_engine_free(b->engine);
    gp_voices_free(b->voices);
    gepard_codec_free(b->codec);
    gepard_model_free(b->model);
}

int cli_serve(int argc, char **argv) {
    cli_args a;
    int rc =
        cli_parse(&a, "serve", "[OPTIONS]",
                  "Serve speech over HTTP: POST /v1/audio/speech (OpenAI-compatible, streamed\n"
                  "audio or SSE), /v1/audio/speech/batch, GET /v1/audio/voices, /v1/models,\n"
                  "/health, /ready, /metrics and a playground page at /. Audio is mono: pcm at\n"
                  "24 kHz (OpenAI's rate), the other formats at 22050 Hz. Stops gracefully\n"
                  "on SIGTERM or Ctrl-C. See docs/SERVER.md.",
                  serve_options, N_SERVE_OPTIONS, argc, argv);
    if (rc || a.help) {
        cli_args_free(&a);
        return rc;
    }
    serve_config c;
    serve_backend b;
    gp_buf cors;
    gp_buf_init(&cors);
    memset(&b, 0, sizeof b);
    gp_server *server = NULL;
    if (a.positional_count > 0) {
        rc = cli_usage_error("serve", "unexpected argument \"%s\"", a.positionals[0]);
        goto done;
    }
    if ((rc = read_config(&a, &c))) goto done;
    if ((rc = join_cors_origins(argc, argv, &cors))) goto done;
    struct stat st;
    if (c.voices && (stat(c.voices, &st) != 0 || !S_ISDIR(st.st_mode))) {
        /* now, not after the model has loaded */
        rc = cli_runtime_error("%s: the voices directory does not exist — create it (with "
                               "NAME.wav clips) or leave --voices out",
                               c.voices);
        goto done;
    }
    c.server.cors_origins = cors.data;
    c.server.word_timestamps = !cli_flag(&a, "no-word-timestamps");
#ifdef __GLIBC__
    /* glibc gives threads up to 8 arenas per CPU; requests freed on another
     * thread than the one that allocated them spread free memory over all
     * of them, and the resident size creeps. Two arenas (unless
     * MALLOC_ARENA_MAX says otherwise) measured flat; see docs/SERVER.md. */
    if (!getenv("MALLOC_ARENA_MAX")) mallopt(M_ARENA_MAX, SERVE_MALLOC_ARENAS);
#endif
    /* a socket per connection, plus model files, voices and some slack */
    cli_raise_fd_limit((long)c.server.max_connections * 2 + 256, "--max-connections");
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stop, NULL); /* inherited by every thread started below */
    gp_error err;
    gp_error_clear(&err);
    if (gp_server_start(&c.server, &server, &err)) {
        rc = cli_runtime_error("%s", err.message);
        goto done;
    }
    fprintf(stderr, "gepard serve: listening on http://%s:%d (loading the model)\n", c.server.host,
            gp_server_port(server));
    if (gp_server_wyoming_port(server) >= 0) {
        fprintf(stderr, "gepard serve: Wyoming on tcp://%s:%d\n", c.server.host,
                gp_server_wyoming_port(server));
        if (c.server.api_key)
            fprintf(stderr, "gepard serve: note: the Wyoming port has no authentication (the "
                            "protocol has none); --api-key guards HTTP only\n");
    }
    if ((rc = load_backend(&c, &b))) goto done;
    gp_server_backend sb = {.model = b.model,
                            .codec = b.codec,
                            .engine = b.engine,
                            .voices = b.voices,
                            .max_streams = c.engine.max_streams,
                            .max_queue = c.engine.max_queue};
    gp_server_set_backend(server, &sb);
    fprintf(stderr, "gepard serve: ready (%d voice%s from %s, %d streams)\n", b.voices->count,
            b.voices->count == 1 ? "" : "s", c.voices ? c.voices : "no voices directory",
            c.engine.max_streams);
    int sig = 0;
    sigwait(&stop, &sig);
    fprintf(stderr, "gepard serve: %s, stopping (up to %.0f s for running streams)\n",
            sig == SIGINT ? "interrupted" : "terminated", c.drain_s);
    gp_server_shutdown(server, c.drain_s);
done:
    gp_server_free(server);
    gp_buf_free(&cors);
    free_backend(&b);
    cli_args_free(&a);
    return rc;
}
