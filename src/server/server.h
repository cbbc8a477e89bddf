/* server.h — `gepard serve`: an OpenAI-compatible speech server over
 * libmicrohttpd (see docs/SERVER.md for the HTTP API).
 *
 * Life cycle: gp_server_start listens at once (GET /health answers, /ready
 * says 503) so a supervisor sees the process alive while the model loads;
 * gp_server_set_backend hands over the loaded engine and voices and the
 * server becomes ready; gp_server_shutdown stops accepting, lets in-flight
 * streams finish until a deadline, cancels the rest and stops the daemon;
 * gp_server_free releases it. The backend stays owned by the caller and must
 * outlive gp_server_shutdown.
 *
 * Threads: libmicrohttpd runs a small pool of threads (http_threads), each
 * with its own epoll set, for every connection; nothing blocks on them. A
 * speech request starts an engine stream whose callbacks (on the engine's
 * step thread) only copy samples into the request's buffer and resume the
 * connection; the connection's thread encodes and writes them
 * (speech_job.c). A connection with nothing to send is suspended, not
 * waited on (wake.c), so thousands of streams cost no thread each.
 */
#ifndef GP_SERVER_SERVER_H
#define GP_SERVER_SERVER_H

#include <stddef.h>

#include "base/error.h"
#include "gepard.h"
#include "server/voices.h"

#define GP_SERVER_MAX_BATCH 64

typedef enum gp_access_log_mode {
    GP_ACCESS_LOG_OFF = 0,
    GP_ACCESS_LOG_PLAIN, /* one space-separated line per request */
    GP_ACCESS_LOG_JSON,  /* one JSON object per line */
} gp_access_log_mode;

typedef struct gp_server_params {
    const char *host;               /* address to bind (default 127.0.0.1) */
    int port;                       /* 0: any free port (see gp_server_port) */
    const char *api_key;            /* NULL: no authentication */
    const char *model_name;         /* the id /v1/models lists (default gepard-1.0) */
    size_t max_body_bytes;          /* request body limit (16 MiB) */
    size_t max_input_chars;         /* `input` limit in characters (4096, as OpenAI) */
    size_t max_ref_audio_bytes;     /* decoded ref_audio limit (10 MiB) */
    double max_ref_audio_s;         /* longest ref_audio clip accepted (60 s) */
    int max_frames_limit;           /* largest max_frames a request may ask (4000) */
    int max_batch_items;            /* items of one batch request (16, at most 64) */
    double request_timeout_s;       /* a synthesis running longer is cancelled (600 s) */
    int connection_timeout_s;       /* idle or stalled connections are closed (30 s) */
    int max_connections;            /* open connections at once (256) */
    int max_connections_per_client; /* per client address; 0: no share (128) */
    double receive_timeout_s; /* a whole request must arrive within this (20 s, + body time) */
    int http_threads;         /* libmicrohttpd's threads (epoll each) for all connections and their
                                 audio encoding; 0: one per CPU, at least 4 */
    bool trim_when_idle;      /* malloc_trim once idle for a second after work (true) */
    const char *cors_origins; /* comma-separated origins browsers may call from ("*": any);
                                 NULL: no CORS (OPTIONS is 405) */
    bool word_timestamps;     /* Cartesia's add_timestamps: estimated word times (true); false:
                                 refused (server/word_times.h) */
    int wyoming_port;         /* Home Assistant's Wyoming protocol on host:wyoming_port (10200 is
                                 its usual port); 0: any free port; -1: off (the default) */
    gp_access_log_mode access_log;
    const char *access_log_file; /* NULL or "-": standard error */
} gp_server_params;

gp_server_params gp_server_default_params(void);

/* What the server synthesises with; owned by the caller. */
typedef struct gp_server_backend {
    gepard_model *model;
    const gepard_codec *codec;
    gepard_engine *engine;
    const gp_voices *voices;
    int max_streams, max_queue; /* as the engine was created with */
} gp_server_backend;

typedef struct gp_server gp_server;

int gp_server_start(const gp_server_params *params, gp_server **out, gp_error *err);
/* The port the server listens on. */
int gp_server_port(const gp_server *server);
/* The Wyoming port it listens on; -1: none. */
int gp_server_wyoming_port(const gp_server *server);
/* Connections open now (not counting those the server is closing). */
int gp_server_open_connections(gp_server *server);
/* Make the server ready with a loaded backend. */
void gp_server_set_backend(gp_server *server, const gp_server_backend *backend);
/* Stop accepting connections; wait up to `drain_s` seconds for in-flight
 * requests, cancel what is left, stop the daemon. Idempotent. */
void gp_server_shutdown(gp_server *server, double drain_s);
/* Shuts down (without draining) if needed, then frees. */
void gp_server_free(gp_server *server);

#endif
