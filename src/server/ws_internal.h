/* ws_internal.h — what the parts of the server's long-lived text-in
 * connections share: ws_hub.c (the thread that polls every such socket:
 * Cartesia's WebSockets, handed over by libmicrohttpd, and the Wyoming
 * port's connections, accepted there; frames in and out), ws_tts.c
 * (contexts, utterances, Cartesia's messages) and wyoming.c (Home
 * Assistant's Wyoming events, spoken through the same contexts). Everything
 * here belongs to the hub thread unless marked. */
#ifndef GP_SERVER_WS_INTERNAL_H
#define GP_SERVER_WS_INTERNAL_H

#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdbool.h>

#include "server/audio_pipe.h"
#include "server/server_internal.h"
#include "server/word_times.h"

#define WS_MAX_MESSAGE ((size_t)1 << 20)
#define WS_MAX_TEXT ((size_t)64 << 10)
#define WS_MAX_OUT ((size_t)8 << 20)
/* Wyoming: the most a client's unread events may hold before the hub stops
 * reading it (more than one whole event: a header line, its data and its
 * payload are 1 MiB each at most) */
#define WS_MAX_IN ((size_t)4 << 20)
/* Utterances of one context generating at once: the one playing and the
 * next. More would only hold engine slots other listeners need: the audio
 * goes out in order, in real time, whatever runs ahead. */
#define WS_CONTEXT_AHEAD 2
/* A context's next piece waits this long for room in a full engine queue
 * before the context fails with 429 (a piece running ahead waits as long as
 * the one playing lasts). */
#define WS_BUSY_LIMIT_S 30.0

typedef struct ws_utterance {
    char *text;            /* waiting to be started (stream NULL); freed once started */
    char *said;            /* the text once started, for estimated word times; NULL: none */
    gp_voiced_span voiced; /* its audio's voiced span (word times) */
    gepard_stream *stream; /* NULL: not started yet */
    gp_ws_hub *hub;
    pthread_mutex_t lock; /* pcm, n, cap, overflow: engine thread → hub */
    float *pcm;
    size_t n, cap;
    bool overflow;
    float *taken; /* hub only */
    size_t cap_taken;
    int chunk_flush_id; /* the flush that spoke it (0: none), on its chunks */
    int flush_done_first,
        flush_done_last; /* flush_done ids to send once it has gone out (0: none) */
    double busy_since;   /* the engine's queue was full when it was to start (0: not) */
    struct ws_utterance *next;
} ws_utterance;

typedef struct ws_context {
    char id[GP_CONTEXT_ID_MAX];
    /* Wyoming: the request ends with synthesize-stopped (synthesize-start);
     * audio-start has gone out; samples sent so far (the events' timestamps) */
    bool wy_streaming, wy_audio_started;
    uint64_t wy_samples;
    gepard_engine *engine; /* (outlives the hub) */
    int native_rate;       /* the codec's */
    double audio_s;        /* seconds of the context's audio so far (word times' offset) */
    int buffer_delay_ms;   /* max_buffer_delay_ms: an unfinished sentence goes after this; -1:
                              it waits for its end */
    double text_since;     /* when the text waiting now began to wait (0: none waits) */
    gp_speech_options opts;
    gp_audio_pipe pipe;
    gp_buf raw; /* encoded audio not yet sent */
    char *text; /* transcript not yet spoken */
    size_t len;
    bool ended;  /* "continue": false came: the rest is spoken, then done */
    int flushes; /* flush ids given so far */
    int raw_flush_id;
    ws_utterance *head, *tail;
    double last_chunk_s;
    struct ws_context *next;
} ws_context;

typedef enum ws_proto {
    WS_PROTO_WEBSOCKET = 0, /* Cartesia's /tts/websocket (RFC 6455 frames) */
    WS_PROTO_WYOMING,       /* the Wyoming port (JSON lines, optional payloads) */
} ws_proto;

/* What a WebSocket speaks (from the path of its handshake). */
typedef enum ws_dialect {
    WS_DIALECT_CARTESIA = 0, /* /tts/websocket */
    WS_DIALECT_EL_SINGLE,    /* ElevenLabs' /v1/text-to-speech/{voice}/stream-input */
    WS_DIALECT_EL_MULTI,     /* ElevenLabs' …/multi-stream-input (contexts) */
} ws_dialect;

/* The handshake's findings, handed to the connection (ws_hub.c). */
typedef struct ws_upgrade {
    gp_server *server;
    ws_dialect dialect;
    gp_speech_options opts; /* ElevenLabs: voice and output format from the path and query */
    bool need_key;          /* ElevenLabs: no key in the headers; the first message must have it */
} ws_upgrade;

typedef struct ws_conn ws_conn;

/* How a connection's protocol speaks for its contexts: ws_tts.c's contexts
 * call these, one table per protocol (Cartesia's in ws_tts.c, Wyoming's in
 * wyoming.c, ElevenLabs' in elevenlabs_ws.c). */
typedef struct ws_speaker {
    /* the context's encoded audio (x->raw, not empty) as the protocol's message */
    void (*audio)(ws_conn *c, ws_context *x);
    /* an utterance's estimated times, after its audio (NULL: never asked for) */
    void (*times)(ws_conn *c, ws_context *x, const ws_utterance *u);
    /* the context is done: its last message */
    void (*done)(ws_conn *c, ws_context *x);
    /* an error for a context (`done`: it is over) or the connection (no id) */
    void (*error)(ws_conn *c, const char *context_id, bool done, int status, const char *code,
                  const char *message);
} ws_speaker;

extern const ws_speaker gp_ws_cartesia_speaker, gp_el_ws_speaker, gp_wy_speaker;

struct ws_conn {
    int fd;
    ws_proto proto;
    const ws_speaker *speaker;
    ws_dialect dialect;
    gp_speech_options el_opts; /* ElevenLabs: each context's options start from these */
    bool el_need_key;
    bool el_closing; /* ElevenLabs' close_socket: closed once every context is done */
    double opened_s; /* when the hub took the connection */
    struct MHD_UpgradeResponseHandle *urh; /* WebSocket: libmicrohttpd's; Wyoming: NULL */
    gp_buf in, msg, out;
    size_t out_pos;
    int msg_opcode; /* of the fragmented message being assembled; -1: none */
    ws_context *contexts;
    int n_contexts;
    bool close_sent, dead;
    /* Wyoming: the bytes `in` must hold before an event can be whole (not
     * parsed again before); an event waits for the running synthesis; the
     * connection has streamed (a plain synthesize is then the stream's
     * copy, ignored, as Piper does); closing: our side shut, the client's
     * input read and dropped until its end or this time */
    size_t wy_need;
    bool wy_held, wy_streamed;
    double wy_linger_until;
    double last_activity;
    struct ws_conn *next;
};

struct gp_ws_hub {
    gp_server *server;
    pthread_t thread;
    int efd;
    int listen_fd;             /* the Wyoming port; -1: none (closed when draining) */
    double accept_pause_until; /* out of descriptors: the port is not polled until then */
    pthread_mutex_t lock;      /* incoming, stop, draining, live */
    ws_conn *incoming;
    bool stop, draining;
    int live;            /* connections adopted and not yet closed */
    ws_conn *conns;      /* hub thread only */
    ws_utterance *dying; /* cancelled, waiting for the engine to let go */
};

/* Wake the hub (any thread; the engine's callbacks). */
void gp_ws_hub_wake(gp_ws_hub *h);
/* Queue a text frame / a close frame for the client. */
void gp_ws_send_text(ws_conn *c, const gp_buf *json);
void gp_ws_close(ws_conn *c, int code, const char *reason);
/* An error event: for a context (`done`: it is over; else it goes on) or for
 * the connection (context_id NULL). */
void gp_ws_send_error(ws_conn *c, const char *context_id, bool done, int status, const char *code,
                      const char *message);
/* A whole message from the client. */
void gp_ws_on_message(gp_ws_hub *h, ws_conn *c, int opcode, gp_buf *m);
/* Move a context's audio out, retire finished utterances, end it when done;
 * false when the context was removed. */
bool gp_ws_context_pump(gp_ws_hub *h, ws_conn *c, ws_context *x);
void gp_ws_context_remove(gp_ws_hub *h, ws_conn *c, ws_context *x);
/* Free a context (unlinked already), its utterances cancelled. */
void gp_ws_context_free(gp_ws_hub *h, ws_context *x);
/* Free cancelled utterances whose streams have ended (all, waiting, when `wait`). */
void gp_ws_reap_dying(gp_ws_hub *h, bool wait);
/* A new context on c for generation options `opts` (copied); NULL after an
 * error event. */
ws_context *gp_ws_context_open(gp_ws_hub *h, ws_conn *c, const char *id,
                               const gp_speech_options *opts, const gp_server_backend *b);
/* Add `text` to the context's transcript and speak what it completes:
 * everything when `end` (nothing more will come), else its whole sentences.
 * False when the context failed (its error event sent, it is gone). */
bool gp_ws_context_add_text(gp_ws_hub *h, ws_conn *c, ws_context *x, const char *text, bool end);

/* The handshake of a WebSocket route (headers checked, 101 answered, the
 * socket handed to the hub with `u`'s findings, copied). */
enum MHD_Result gp_ws_upgrade(gp_http_request *r, const ws_upgrade *u);
/* Find a context by id on c (NULL: none). */
ws_context *gp_ws_context_find(ws_conn *c, const char *id);
/* Queue everything the context's transcript holds as an utterance (a
 * flush); false when the context failed. */
bool gp_ws_context_flush(gp_ws_hub *h, ws_conn *c, ws_context *x);

/* ---- elevenlabs_ws.c ---- */
/* A whole text message of an ElevenLabs WebSocket. */
void gp_el_ws_on_message(gp_ws_hub *h, ws_conn *c, const cJSON *json);
/* An error message ({"message", "error", "code"}); `fatal`: the socket closes. */
void gp_el_ws_send_error(ws_conn *c, const char *context_id, int status, const char *code,
                         const char *text, bool fatal);
/* An ElevenLabs socket still without its key this long after opening is closed. */
#define EL_WS_KEY_WAIT_S 10.0

/* ---- wyoming.c ---- */
typedef struct gp_wy_event {
    cJSON *header;       /* the header line's JSON (owns `type`) */
    const char *type;    /* NULL: a blank line, nothing to do */
    cJSON *data;         /* "data" with the data_length bytes merged over it */
    const char *payload; /* payload_len bytes, inside the input */
    size_t payload_len;
} gp_wy_event;
/* One event at the start of p[0..avail): the bytes it takes (a blank line
 * counts too: type NULL), 0 when it is not whole yet (*need: the bytes it
 * takes at least), or -1 with *why when the bytes cannot be an event. Free
 * *ev with gp_wy_event_free. */
long gp_wy_parse_event(const char *p, size_t avail, gp_wy_event *ev, const char **why,
                       size_t *need);
void gp_wy_event_free(gp_wy_event *ev);
/* Parse and act on the whole events in c->in (a new synthesis waits while
 * one runs on the connection: events are handled in order). */
void gp_wy_on_input(gp_ws_hub *h, ws_conn *c);
/* An error event; `fatal`: the connection closes after it. */
void gp_wy_send_error(ws_conn *c, const char *code, const char *text, bool fatal);

#endif
