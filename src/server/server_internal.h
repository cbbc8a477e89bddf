/* server_internal.h — what the server's files share: the server structure,
 * the per-connection request context, OpenAI-shaped errors and the response
 * helpers (http.c), connection accounting (connections.c), suspended
 * connections (wake.c), the speech request options (speech_options.c), the
 * per-request stream bridge (speech_job.c) and the route handlers. */
#ifndef GP_SERVER_SERVER_INTERNAL_H
#define GP_SERVER_SERVER_INTERNAL_H

#include <cjson/cJSON.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/socket.h>

#include "base/buf.h"
#include "io/audio_sink.h"
#include "server/audio_pipe.h"
#include "server/metrics.h"
#include "server/server.h"
#include "server/word_times.h"

typedef struct gp_speech_job gp_speech_job;
typedef struct gp_conn gp_conn;
typedef struct gp_speech_pending gp_speech_pending;
typedef struct gp_voice_task gp_voice_task;
typedef struct gp_ws_hub gp_ws_hub;

/* Requests with ref_audio that may wait for the voice worker at once. */
#define GP_VOICE_QUEUE_MAX 64

/* A connection waiting for something (audio from the engine, a stream's
 * end, a voice being computed) without holding a thread: suspended in
 * libmicrohttpd until signalled (wake.c). All fields are guarded by the
 * server's wake_lock. */
typedef struct gp_wake {
    struct MHD_Connection *connection;
    int fd;          /* for hang-up checks while suspended; -1: none */
    double deadline; /* signal at this time (monotonic seconds) even if nothing came */
    bool suspended;  /* suspended and listed in the server's suspended list */
    bool signaled;   /* a signal came while the connection ran: do not suspend */
    double since;    /* when it was last suspended (for the ticker's periodic look) */
    struct gp_wake *prev, *next;
} gp_wake;

struct gp_server {
    gp_server_params params;
    char *host, *api_key, *model_name; /* owned copies of the params' strings */
    long long created;                 /* Unix time of the start: the models' "created" */
    char **cors_origins;               /* allowed Origin values; "*" matches any */
    int n_cors_origins;                /* 0: no CORS */
    FILE *access_log;                  /* NULL: off */
    bool access_log_owned, access_log_lock_ready;
    pthread_mutex_t access_log_lock;
    uint64_t request_id_seed; /* random at start; request ids count up from it */
    uint64_t request_count;   /* (atomic) */
    struct MHD_Daemon *daemon;
    int port;
    int wyoming_port; /* bound; -1: no Wyoming port */
    gp_metrics *metrics;
    pthread_mutex_t lock; /* guards everything below */
    pthread_cond_t changed;
    bool ready, stopping, stopped;
    gp_server_backend backend;
    gp_speech_job *jobs; /* in-flight speech streams (for shutdown) */
    int n_jobs;
    pthread_t ticker;
    bool ticker_started;
    /* ticker thread only: trim_when_idle (server.c) */
    uint64_t trim_seen_streams;
    double idle_since;
    bool trim_pending;
    /* voice_worker.c (lock) */
    gp_speech_job *orphans; /* (lock) see gp_server_job_orphan */
    gp_voice_task *voice_queue;
    int n_voice_queued;
    pthread_cond_t voice_cond;
    pthread_t voice_worker;
    bool voice_worker_started, voice_worker_stop;
    /* connections.c (conn_lock) */
    pthread_mutex_t conn_lock;
    gp_conn *conns;
    int n_conns; /* open and not being closed by us */
    double conn_last_warn[GP_CONN_CLOSE_COUNT];
    int conn_suppressed[GP_CONN_CLOSE_COUNT];
    gp_ws_hub *ws_hub; /* (lock) ws_tts.c: every WebSocket, started with the first */
    /* wake.c (wake_lock) */
    pthread_mutex_t wake_lock;
    gp_wake *suspended; /* connections suspended now */
    int n_suspended;
};

#define GP_REQUEST_ID_MAX 65 /* 64 characters and the NUL */

/* ---- access_log.c: one line per request ---- */
typedef struct gp_access_entry {
    char request_id[GP_REQUEST_ID_MAX];
    char method[8];
    gp_route route;
    int status; /* 0: no response was sent */
    char voice[GP_VOICE_NAME_MAX];
    long frames;    /* -1: none */
    double ttfa_ms; /* -1: none */
    double t_start; /* monotonic seconds */
    bool disconnected;
} gp_access_entry;

int gp_access_log_open(gp_server *s, gp_error *err);
void gp_access_log_close(gp_server *s);
void gp_access_entry_begin(gp_access_entry *e, const char *request_id, const char *method,
                           gp_route route);
/* Write the entry's line (nothing when the log is off). */
void gp_access_log_write(gp_server *s, const gp_access_entry *e);

/* One HTTP request (libmicrohttpd's per-connection `con_cls`). */
typedef struct gp_http_request {
    gp_server *server;
    struct MHD_Connection *connection;
    gp_route route;
    bool is_get, is_post;
    gp_buf body;
    bool body_too_large;
    bool responded;
    gp_wake wake;                       /* while a handler waits (speech.c) */
    gp_speech_pending *pending;         /* a speech request started and not yet answered */
    char request_id[GP_REQUEST_ID_MAX]; /* sent as x-request-id */
    char model_id[128];                 /* GET /v1/models/{id} or /voices/{id}; "" for the list */
    bool model_id_too_long;
    bool el_stream, el_timestamps; /* ElevenLabs' …/stream, …/with-timestamps */
    bool el_search;                /* ElevenLabs' GET /v2/voices */
    bool el_multi;                 /* ElevenLabs' …/multi-stream-input */
    bool is_options;
    char cors_origin[256]; /* Access-Control-Allow-Origin for this request, or "" */
    gp_access_entry log;   /* its access-log line */
    bool upgraded;         /* answered 101: the socket became a WebSocket (ws_tts.c) */
    void *upgrade;         /* what the handshake found, for the hub (a ws_upgrade; owned) */
    bool log_by_job;       /* a streamed answer's job writes it when freed */
} gp_http_request;

/* An error in OpenAI's shape {"error":{"message","type","param","code"}}. */
typedef struct gp_api_error {
    int status;       /* HTTP status */
    const char *type; /* invalid_request_error, authentication_error, ... */
    const char *code; /* machine-readable, or NULL */
    char param[64];   /* the offending field, or "" */
    char message[GP_ERROR_MESSAGE_MAX];
    int retry_after_s; /* > 0: send Retry-After */
} gp_api_error;

/* Fill `e` and return -1 (so parsers can `return gp_http_fail(...)`). */
int gp_http_fail(gp_api_error *e, int status, const char *param, const char *code, const char *fmt,
                 ...) __attribute__((format(printf, 5, 6)));
/* The api error for a gepard status from the engine (busy → 429, ...). */
void gp_api_error_from_status(gp_api_error *e, gepard_status st, const char *message);

/* ---- http.c: responses (each counts the request in the metrics) ---- */
enum MHD_Result gp_http_send(gp_http_request *r, int status, const char *content_type,
                             gp_buf *body);
enum MHD_Result gp_http_send_json(gp_http_request *r, int status, gp_buf *body);
/* 204 to a CORS preflight (OPTIONS) with the Access-Control-Allow-* headers. */
enum MHD_Result gp_http_send_preflight(gp_http_request *r);
enum MHD_Result gp_http_send_error(gp_http_request *r, const gp_api_error *e);
enum MHD_Result gp_http_send_response(gp_http_request *r, int status,
                                      struct MHD_Response *response);
/* Constant-time check of "Authorization: Bearer KEY". */
bool gp_http_authorized(gp_http_request *r);
/* Did the peer close its end of the connection? (non-blocking) */
bool gp_http_peer_gone(int fd);
int gp_http_connection_fd(struct MHD_Connection *connection);
/* A synthesis may keep the connection silent for long (queued, prefill, or
 * a whole file being collected): raise its inactivity timeout to the request
 * time limit, so libmicrohttpd does not drop it when the first bytes come
 * late. The request-completed callback restores the idle timeout. */
void gp_http_allow_long_request(gp_http_request *r);

/* ---- connections.c: deadlines and limits per connection ---- */
/* libmicrohttpd's MHD_OPTION_NOTIFY_CONNECTION callback (cls: the server). */
void gp_conn_notify(void *cls, struct MHD_Connection *connection, void **socket_context,
                    enum MHD_ConnectionNotificationCode code);
/* The request's headers are in; its body may take `body_bytes` more. */
void gp_conn_headers_received(gp_server *s, struct MHD_Connection *connection,
                              unsigned long long body_bytes);
/* The whole request is in: no receive deadline while it is answered. */
void gp_conn_request_received(gp_server *s, struct MHD_Connection *connection);
/* The response ended; the connection waits for its next request. */
void gp_conn_response_done(gp_server *s, struct MHD_Connection *connection);
/* Shut down receiving connections past their deadline. */
void gp_conn_reap(gp_server *s, double now);
int gp_conn_open_count(gp_server *s);
/* After the daemon stopped: free what is left of the list. */
void gp_conn_free_all(gp_server *s);

/* ---- wake.c: suspended connections ---- */
void gp_wake_init(gp_wake *w, struct MHD_Connection *connection, int fd, double deadline);
/* On the connection's own thread (a handler or content reader): suspend the
 * connection, unless a signal came since the last call (then clear it and
 * return false: look again). Returns true when suspended: return at once
 * (0 from a content reader, MHD_YES from a handler); libmicrohttpd calls
 * again after gp_wake_signal. */
bool gp_wake_suspend(gp_server *s, gp_wake *w);
/* Any thread: resume the connection if it is suspended, else make the next
 * gp_wake_suspend return false. */
void gp_wake_signal(gp_server *s, gp_wake *w);
/* Signal the wake `*wp` points to, reading the pointer under the lock (for
 * a pointer gp_wake_retarget may change from another thread). */
void gp_wake_signal_via(gp_server *s, gp_wake *const *wp);
/* Point `*wp` at `to`; once this returns no signal reaches the old wake. */
void gp_wake_retarget(gp_server *s, gp_wake **wp, gp_wake *to);
/* Take a wake out of the suspended list before its memory goes. */
void gp_wake_forget(gp_server *s, gp_wake *w);
/* Ticker: resume suspended connections whose client hung up or whose
 * deadline passed (the handler or reader then notices and ends them). */
void gp_wake_check(gp_server *s, double now);
/* Shutdown: resume every suspended connection; returns how many there were. */
int gp_wake_resume_all(gp_server *s);

/* ---- voice_worker.c: ref_audio voices off libmicrohttpd's threads ---- */
typedef struct gp_voice_ref {
    const char *b64; /* base64 of an audio file (points into the task's JSON); NULL: none */
    size_t len;
    char param[64];      /* "ref_audio" or "items[2].ref_audio", for errors */
    gepard_voice *voice; /* the result */
} gp_voice_ref;

int gp_voice_worker_start(gp_server *s);
/* Stop after the running task; queued ones fail with 503. */
void gp_voice_worker_stop(gp_server *s);
/* Queue the voices of `refs` (copied) and take ownership of `json`;
 * `wake` is signalled when done. NULL after filling `e` (429 when
 * GP_VOICE_QUEUE_MAX tasks wait, 503 when stopping); `json` stays the
 * caller's then. */
gp_voice_task *gp_voice_task_submit(gp_server *s, const gp_server_backend *b, cJSON *json,
                                    const gp_voice_ref *refs, int n, gp_wake *wake,
                                    gp_api_error *e);
bool gp_voice_task_done(gp_server *s, gp_voice_task *task);
/* After done: hand back the JSON and move the voices into voices[n] (NULL
 * where there was no ref_audio), or fill `e` and return -1; frees the task. */
int gp_voice_task_finish(gp_voice_task *task, cJSON **json, gepard_voice **voices, gp_api_error *e);
/* The request went away: drop the task, or let the worker free it. */
void gp_voice_task_abandon(gp_server *s, gp_voice_task *task);

/* ---- server.c: state shared with the handlers ---- */
/* Copy the backend if the server is ready and not stopping; else fill `e`
 * (503) and return false. */
bool gp_server_backend_get(gp_server *s, gp_server_backend *out, gp_api_error *e);
void gp_server_job_register(gp_server *s, gp_speech_job *job);
void gp_server_job_unregister(gp_server *s, gp_speech_job *job);
/* A job let go of before its (cancelled) stream finished: gp_job_reap
 * frees it once the engine has. */
void gp_server_job_orphan(gp_server *s, gp_speech_job *job);

/* ---- speech_options.c: request fields ---- */
#define GP_OPENAI_PCM_RATE 24000 /* what OpenAI documents for response_format pcm */
/* The rates a response may be resampled to (Cartesia's list; OpenAI's
 * 24000 and the codec's 22050 among them). */
#define GP_RESPONSE_RATE_COUNT 6
extern const int gp_response_rates[GP_RESPONSE_RATE_COUNT];
bool gp_response_rate_allowed(double rate);
#define GP_CONTEXT_ID_MAX 129 /* a Cartesia context_id: 128 bytes and the NUL */
/* How a streamed answer frames its audio as server-sent events. */
typedef enum gp_sse_style {
    GP_SSE_OPENAI = 0, /* data: {"type":"speech.audio.delta","audio":…}, then speech.audio.done */
    GP_SSE_CARTESIA,   /* event: chunk / data: {"type":"chunk","data":…}, then event: done */
    GP_SSE_EL_LINES,   /* ElevenLabs' …/stream/with-timestamps: a JSON object a line
                          {"audio_base64"}, the last with the estimated alignment */
    GP_SSE_EL_OBJECT,  /* ElevenLabs' …/with-timestamps: one JSON object {"audio_base64",
                          "alignment", "normalized_alignment"}, streamed as it grows */
} gp_sse_style;
#define GP_MODEL_ALIAS_COUNT 5
/* gepard, gepard-1.0, tts-1, tts-1-hd, gpt-4o-mini-tts */
extern const char *const gp_model_aliases[GP_MODEL_ALIAS_COUNT];
/* The served name, an alias, or an OpenAI alias with a snapshot suffix
 * ("-YYYY-MM-DD" or "-NNNN": gpt-4o-mini-tts-2025-12-15, tts-1-hd-1106). */
bool gp_model_name_accepted(const gp_server *s, const char *name);
typedef struct gp_speech_options {
    gepard_synth_params params;
    gp_audio_format format;
    bool sse;
    gp_sse_style sse_style;
    char context_id[GP_CONTEXT_ID_MAX]; /* echoed in Cartesia's events; "": none */
    bool stream;          /* false: the whole file in one response with Content-Length */
    int sample_rate;      /* of the response; 0: 24000 for pcm, the codec's own otherwise */
    int bit_rate;         /* MP3/Opus/AAC bits per second; 0: the format's default */
    double speed;         /* OpenAI's speed, 0.25-4.0; 1: as spoken */
    double volume;        /* gain on the samples (Cartesia's generation_config.volume); 1: none */
    bool word_timestamps; /* Cartesia's add_timestamps: estimated word times (word_times.h) */
    char voice[GP_VOICE_NAME_MAX];
    const gp_voice_entry *voice_entry; /* NULL: the default voice */
    const char *ref_audio;             /* base64, points into the request JSON */
    size_t ref_audio_len;
} gp_speech_options;

/* Defaults: mp3, audio stream, default voice, the engine's sampling defaults. */
void gp_speech_options_init(gp_speech_options *o);
/* Read the optional fields present in `obj` over `o` (so batch items inherit
 * the request's fields). `param_prefix` ("items[2].") goes before field
 * names in errors. */
int gp_speech_options_parse(const cJSON *obj, const gp_server *s, const gp_voices *voices,
                            const char *param_prefix, gp_speech_options *o, gp_api_error *e);
/* The required `input`: a non-empty string of at most max_input_chars. */
int gp_speech_input_parse(const cJSON *obj, const gp_server *s, const char **input,
                          gp_api_error *e);
/* A number field of `obj` in [lo, hi], or a string field; absent or null
 * leaves *v alone (and *present false). `prefix` goes before the key in
 * errors ("items[2]." or "generation_config."). */
int gp_field_number(const cJSON *obj, const char *key, const char *prefix, double lo, double hi,
                    double *v, bool *present, gp_api_error *e);
int gp_field_string(const cJSON *obj, const char *key, const char *prefix, const char **v,
                    gp_api_error *e);
/* The same for a text under another field name (Cartesia's `transcript`). */
int gp_speech_text_parse(const cJSON *obj, const gp_server *s, const char *key, const char **text,
                         gp_api_error *e);
/* Gepard's sampling extensions (temperature, top_k, seed, ...) of `obj`. */
int gp_speech_sampling_parse(const cJSON *obj, const gp_server *s, const char *prefix,
                             gepard_synth_params *p, gp_api_error *e);
/* The voice `name` from the server's voices (or a built-in name) into `o`;
 * `param` names the field in errors. */
int gp_speech_voice_set(const gp_voices *voices, const char *name, const char *param,
                        gp_speech_options *o, gp_api_error *e);
/* Parse the body as a JSON object, with errors that say where. */
int gp_request_json(const gp_http_request *r, cJSON **out, gp_api_error *e);

/* ---- speech_job.c: one stream from engine to client ---- */
struct gp_speech_job {
    gp_server *server;
    gepard_stream *stream;
    gepard_voice *own_voice; /* from ref_audio; freed with the job */
    gp_audio_format format;
    bool sse;
    gp_sse_style sse_style;
    char context_id[GP_CONTEXT_ID_MAX];
    char request_id[GP_REQUEST_ID_MAX]; /* for Cartesia's error event */
    double last_chunk_s; /* when the last SSE chunk went out (Cartesia's step_time) */
    int fd;              /* the connection's socket, for hang-up checks; -1: none */
    double deadline;
    gp_wake *wake;                      /* signalled on new audio and at the end (wake_lock) */
    gp_wake own_wake;                   /* a streamed response's (the request's is gone by then) */
    double next_check;                  /* of the socket and the deadline */
    int sample_rate, samples_per_frame; /* of the response; of the codec */
    gp_audio_pipe pipe;                 /* gain, speed, rate and encoder */
    bool want_word_times;      /* Cartesia's SSE with add_timestamps; ElevenLabs' with-timestamps */
    bool el_object_open;       /* GP_SSE_EL_OBJECT: {"audio_base64":" has gone out */
    unsigned char el_carry[2]; /* GP_SSE_EL_OBJECT: the bytes not yet base64'd (a 3-byte group) */
    int el_n_carry;
    char *said;            /* its text, for the estimated word times; NULL: none */
    double speed;          /* of the pipe, for the word times */
    int native_rate;       /* the codec's */
    gp_voiced_span voiced; /* of the audio, for the word times */
    size_t input_tokens;
    /* engine thread → connection thread (lock) */
    pthread_mutex_t lock;
    float *pending;
    size_t n_pending, cap_pending, max_pending;
    bool overflow;
    /* connection thread only */
    float *taken;
    size_t cap_taken;
    bool pipe_open;
    gp_buf raw; /* encoded audio not yet framed (SSE) */
    gp_buf out; /* bytes for the client */
    size_t out_pos;
    bool started, ended, failed, disconnected, recorded;
    gepard_synth_result result;
    char error[GP_ERROR_MESSAGE_MAX];
    gp_access_entry *log;       /* a streamed answer's access-log line (written when freed) */
    gp_speech_job *next;        /* server's in-flight list */
    gp_speech_job *next_orphan; /* server's list of jobs freed before their stream ended */
};

/* `wake` is signalled when audio arrives and at the end; NULL: the job's
 * own, for a streamed response (set up by gp_job_stream_response). */
int gp_job_create(gp_server *s, const gp_server_backend *b, const gp_speech_options *o,
                  struct MHD_Connection *connection, gp_wake *wake, gp_speech_job **out,
                  gp_error *err);
/* Start the stream (registers the job with the server). */
gepard_status gp_job_start(gp_speech_job *job, const gp_server_backend *b, const char *text,
                           const gepard_synth_params *params);
/* Move delivered samples into the encoder (never waits); notice the end, a
 * hang-up or the deadline. */
void gp_job_pump(gp_speech_job *job);
/* libmicrohttpd content reader and free callback for streamed responses:
 * when no audio is ready the reader suspends the connection, and the
 * engine's callbacks resume it. */
ssize_t gp_job_read(void *cls, uint64_t pos, char *buf, size_t max);
void gp_job_free_cb(void *cls);
/* Never waits for the engine: a stream still running is cancelled and the
 * job is freed later by gp_job_reap (the ticker). */
void gp_job_free(gp_speech_job *job);
/* Free the orphaned jobs whose streams have finished (all of them, waiting
 * for the engine, when `wait`). */
void gp_job_reap(gp_server *s, bool wait);
/* For WAV in a complete buffer: write the real sizes into the header. */
void gp_wav_patch_sizes(char *data, size_t len);
/* For FLAC in a complete buffer: write the sample count into STREAMINFO
 * (a stream cannot seek back to it; it says 0, "unknown"). */
void gp_flac_patch_length(char *data, size_t len, uint64_t samples);

/* ---- handlers ---- */
enum MHD_Result gp_handle_speech(gp_http_request *r);
enum MHD_Result gp_handle_speech_batch(gp_http_request *r);
/* One synthesis of `text` with options `o` for request r (speech.c): the
 * JSON the text points into is taken over; answers as the options say
 * (streamed audio or SSE, or a whole file). */
enum MHD_Result gp_speech_run(gp_http_request *r, const gp_server_backend *b, cJSON *json,
                              const char *text, const gp_speech_options *o);
/* A route's request (its JSON) into the text and speech options; -1 with *e. */
typedef int (*gp_speech_parse_fn)(gp_http_request *r, const cJSON *json, const gp_voices *voices,
                                  const char **text, gp_speech_options *o, gp_api_error *e);
/* A synthesis route's handler: resumed, the speech goes on; new, the body is
 * read by `parse` and run (gp_speech_run), or its error answered. */
enum MHD_Result gp_speech_handle(gp_http_request *r, gp_speech_parse_fn parse);
/* cartesia.c: Cartesia's API — POST /tts/bytes, POST /tts/sse, GET /voices
 * and GET /voices/{id}. */
enum MHD_Result gp_handle_tts(gp_http_request *r);
/* A Cartesia TTS request (the JSON of /tts/bytes, or of /tts/sse when
 * `sse`) into speech options and its transcript. */
typedef enum gp_cartesia_route {
    GP_CARTESIA_BYTES,
    GP_CARTESIA_SSE,
    GP_CARTESIA_WEBSOCKET, /* raw audio as SSE; `continue` allowed */
} gp_cartesia_route;
/* Everything of a Cartesia request but its transcript. */
int gp_cartesia_options_parse(const cJSON *json, const gp_server *s, const gp_voices *voices,
                              gp_cartesia_route route, gp_speech_options *o, gp_api_error *e);
int gp_cartesia_request_parse(const cJSON *json, const gp_server *s, const gp_voices *voices,
                              bool sse, const char **text, gp_speech_options *o, gp_api_error *e);
enum MHD_Result gp_handle_cartesia_voices(gp_http_request *r);
/* ws_tts.c: Cartesia's WebSocket, GET /tts/websocket (the handshake; the
 * connection then lives on the server's WebSocket thread). */
#define GP_WS_MAX_CONTEXTS 32
enum MHD_Result gp_handle_tts_websocket(gp_http_request *r);
/* elevenlabs.c: ElevenLabs' routes. gp_elevenlabs_route sets r's route (and
 * the voice id, variant) when `url` is one of them. */
bool gp_elevenlabs_route(gp_http_request *r, const char *url);
enum MHD_Result gp_handle_elevenlabs_tts(gp_http_request *r);
enum MHD_Result gp_handle_elevenlabs_voices(gp_http_request *r);
/* ?output_format= (ElevenLabs' names) into o; -1 with *e. */
int gp_elevenlabs_output_format(gp_http_request *r, gp_speech_options *o, gp_api_error *e);
/* model_id (NULL: none): this server's model or any "eleven_…" id; -1 with *e. */
int gp_elevenlabs_model(const gp_server *s, const char *model, gp_api_error *e);
/* The path's voice_id into o; -1 with *e (voice_not_found). */
int gp_elevenlabs_voice(const gp_http_request *r, const gp_voices *voices, gp_speech_options *o,
                        gp_api_error *e);
/* elevenlabs_ws.c: the handshake of ElevenLabs' WebSockets (the key may
 * come in the first message instead of a header). */
enum MHD_Result gp_handle_elevenlabs_websocket(gp_http_request *r);
/* Whether `given` is the server's API key (constant time; true without one). */
bool gp_http_key_matches(const gp_server *s, const char *given);
/* Start the hub with the Wyoming port's listening socket (before any
 * WebSocket: at the server's start); it owns the socket from here. */
int gp_ws_hub_listen(gp_server *s, int listen_fd);
/* The first address of host:port for a listening socket (AI_PASSIVE). */
int gp_server_resolve_host(const char *host, int port, struct sockaddr_storage *addr,
                           socklen_t *addr_len, bool *ipv6, gp_error *err);
/* wyoming.c: a listening socket on host:port for the Wyoming protocol
 * (port 0: any free one; *bound_port says which). */
int gp_wy_listen(const char *host, int port, int *fd, int *bound_port, gp_error *err);
/* Shutdown: refuse new generations on every WebSocket and Wyoming
 * connection (and new Wyoming connections), then wait until the running
 * contexts are done (each WebSocket closes with 1001) or the deadline;
 * gp_ws_hub_stop cancels the rest and closes everything. */
void gp_ws_hub_drain_begin(gp_server *s);
void gp_ws_hub_drain_wait(gp_server *s, double deadline);
void gp_ws_hub_stop(gp_server *s);
/* The request ended (the connection's completion callback): free what a
 * speech request still holds. */
void gp_speech_pending_free(gp_http_request *r);
/* The playground page (playground_page.c, generated from playground.html). */
extern const char gp_playground_html[];
extern const size_t gp_playground_html_len;
enum MHD_Result gp_handle_playground(gp_http_request *r);

#endif
