/* metrics.h — the server's counters and histograms, rendered as Prometheus
 * text for GET /metrics.
 *
 * Request counts are kept per route and HTTP status; time to first audio and
 * the real-time factor of finished streams are histograms; engine state
 * (active and queued streams, batch size, frames, KV blocks) is read from
 * gepard_engine_get_stats at scrape time. A ticker samples the engine's frame
 * counter once a second so frames/s covers the last ten seconds. Connections
 * the server closed itself (receive timeout, limits) are counted by reason.
 * Every
 * function is thread-safe (one mutex; updates are a few additions).
 */
#ifndef GP_SERVER_METRICS_H
#define GP_SERVER_METRICS_H

#include <stdbool.h>
#include <stdint.h>

#include "base/buf.h"
#include "gepard.h"

typedef enum gp_route {
    GP_ROUTE_SPEECH = 0,
    GP_ROUTE_SPEECH_BATCH,
    GP_ROUTE_VOICES,
    GP_ROUTE_MODELS,
    GP_ROUTE_HEALTH,
    GP_ROUTE_READY,
    GP_ROUTE_METRICS,
    GP_ROUTE_PLAYGROUND,
    GP_ROUTE_TTS_BYTES,            /* Cartesia's POST /tts/bytes */
    GP_ROUTE_TTS_SSE,              /* Cartesia's POST /tts/sse */
    GP_ROUTE_CARTESIA_VOICES,      /* Cartesia's GET /voices and /voices/{id} */
    GP_ROUTE_TTS_WEBSOCKET,        /* Cartesia's GET /tts/websocket */
    GP_ROUTE_ELEVENLABS_TTS,       /* ElevenLabs' POST /v1/text-to-speech/{voice_id}[/stream] */
    GP_ROUTE_ELEVENLABS_VOICES,    /* ElevenLabs' GET /v1/voices[/{id}], /v2/voices */
    GP_ROUTE_ELEVENLABS_WEBSOCKET, /* ElevenLabs' …/stream-input, …/multi-stream-input */
    GP_ROUTE_WYOMING,              /* a synthesis on the Wyoming port (not HTTP: 200 or the 4xx/5xx
                                      its error event stands for) */
    GP_ROUTE_OTHER,
    GP_ROUTE_COUNT
} gp_route;

const char *gp_route_name(gp_route route);
/* The routes that synthesise speech: POST, authorised, long-running. */
bool gp_route_synthesizes(gp_route route);

/* Why the server closed a connection itself (see connections.c). */
typedef enum gp_conn_close_reason {
    GP_CONN_CLOSE_RECEIVE_TIMEOUT = 0, /* no whole request within --receive-timeout */
    GP_CONN_CLOSE_LIMIT,               /* room for a new connection at --max-connections */
    GP_CONN_CLOSE_PER_CLIENT,          /* over --max-connections-per-client */
    GP_CONN_CLOSE_COUNT
} gp_conn_close_reason;

const char *gp_conn_close_reason_name(gp_conn_close_reason reason);

typedef struct gp_metrics gp_metrics;

int gp_metrics_create(gp_metrics **out);
void gp_metrics_free(gp_metrics *m);

/* A response with `status` was queued for `route`. */
void gp_metrics_count_request(gp_metrics *m, gp_route route, int status);
/* A stream finished: its result (ttfa, rtf, audio seconds) and how it ended. */
void gp_metrics_stream_finished(gp_metrics *m, const gepard_synth_result *r, int disconnected);
/* The server closed a connection for `reason`. */
void gp_metrics_connection_closed(gp_metrics *m, gp_conn_close_reason reason);
/* Sample the engine's frame counter (the ticker calls this every second). */
void gp_metrics_sample_frames(gp_metrics *m, double now, uint64_t frames);
/* Render everything; `engine` may be NULL before the model is loaded. */
int gp_metrics_render(gp_metrics *m, gepard_engine *engine, int max_streams, int max_queue,
                      int open_connections, gp_buf *out);

#endif
