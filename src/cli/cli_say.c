/* cli_say.c — `gepard say`: text to speech, streamed as it is generated to a
 * file, to stdout or to the speakers. One stream through the engine; long
 * text is split into sentences and spoken as one continuous recording. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "base/timing.h"
#include "cli/args.h"
#include "cli/synth_options.h"
#include "engine/realtime_note.h"
#include "gepard.h"
#include "io/audio_sink.h"
#include "io/playback.h"
#include "io/resample.h"
#include "io/tempo.h"

/* Texts at least this long (~30 s of speech) let the model's load time the
 * decode step's 12-bit packed weights (0.3-0.8 s of packing, ~0.4 GB), which
 * a shorter one-off synthesis would not win back even where they are faster:
 * a frame saves at most ~5 ms (a 2-core Xeon host's backbone, 21 -> 16 ms). */
#define SAY_PACK_MIN_CHARS 500

#define DEFAULT_MODEL "nineninesix/gepard-1.0"
#define DEFAULT_CODEC "nvidia/nemo-nano-codec-22khz-1.89kbps-21.5fps"

static const cli_option say_options[] = {
    {"model", 'm', "PATH", "model directory or Hub repo id (default " DEFAULT_MODEL ")"},
    {"codec", 0, "PATH", "codec .nemo / directory or Hub repo id (default " DEFAULT_CODEC ")"},
    {"output", 'o', "FILE",
     "write audio to FILE (.wav .flac .ogg/.opus .mp3 .aac .pcm .f32); "
     "- streams raw 16-bit PCM to stdout"},
    {"format", 0, "FMT",
     "wav, flac, opus, mp3, aac, pcm, f32, mulaw or alaw (default: from the file name)"},
    {"float", 0, NULL, "write 32-bit float WAV instead of 16-bit"},
    {"rate", 0, "HZ",
     "sample rate of -o's audio: 8000, 16000, 22050 (the codec's; default), 24000, 44100 or "
     "48000 (libsoxr; e.g. --format mulaw --rate 8000 for telephony)"},
    {"speed", 0, "F", "speak F times as fast, at the same pitch (0.25-4.0, default 1)"},
    {"play", 0, NULL, "play on the speakers (needs a PulseAudio/PipeWire server)"},
    {"file", 'f', "FILE", "read the text from FILE (- for standard input)"},
    {"voice", 0, "FILE", "clone the voice of a recording (any common format) or a saved voice"},
    {"save-voice", 0, "FILE", "save the voice computed from --voice for reuse (.safetensors)"},
    {"no-split", 0, NULL, "speak the text as one piece instead of sentence by sentence"},
    {"json", 0, NULL, "print a JSON summary (frames, seconds, rtf, ttfa_ms)"},
    {"revision", 0, "REV", "Hub revision of the model (default main)"},
    {"offline", 0, NULL, "use only files already in the Hugging Face cache"},
    CLI_SAMPLING_OPTIONS,
    CLI_CODEC_DEVICE_OPTION,
};
#define N_SAY_OPTIONS ((int)(sizeof say_options / sizeof say_options[0]))

static volatile sig_atomic_t interrupted;

static void on_interrupt(int sig) {
    (void)sig;
    interrupted = 1;
}

typedef struct say_state {
    const char *out; /* -o, "-" for stdout, NULL with --play only */
    int format;      /* gp_audio_format of `out` */
    double speed;
    gp_tempo *tempo; /* NULL: speed 1 */
    float *sped;
    size_t n_sped, cap_sped;
    gp_audio_sink *sink;
    int out_rate;            /* of the sink; 0: the codec's */
    gp_resampler *resampler; /* NULL: the codec's rate goes to the sink */
    float *resampled;
    size_t n_resampled, cap_resampled;
    gp_playback *playback;
    bool playback_used; /* --play was on (playback is closed before the summary) */
    int sample_rate;
    size_t samples;
    double start, last_progress;
    int failed;
    gp_error err;
} say_state;

static int write_stdout(const void *data, size_t len, void *user) {
    (void)user;
    if (fwrite(data, 1, len, stdout) != len) return -1;
    return fflush(stdout) == 0 ? 0 : -1;
}

/* Audio at its final speed to the file or stdout (at --rate) and the
 * speakers; `end`: the resampler gives out what it holds. */
static int say_emit(say_state *st, const float *samples, size_t n, bool end) {
    if (n && st->playback && gp_playback_write(st->playback, samples, n, &st->err)) return -1;
    if (st->resampler) {
        st->n_resampled = 0;
        if ((n && gp_resampler_process(st->resampler, samples, n, &st->resampled, &st->n_resampled,
                                       &st->cap_resampled, &st->err)) ||
            (end && gp_resampler_process(st->resampler, NULL, 0, &st->resampled, &st->n_resampled,
                                         &st->cap_resampled, &st->err)))
            return -1;
        samples = st->resampled;
        n = st->n_resampled;
    }
    if (n && st->sink && gp_audio_sink_write(st->sink, samples, n, &st->err)) return -1;
    return 0;
}

/* Through the speed changer (in == NULL: its end) when --speed is not 1. */
static int say_process(say_state *st, const float *samples, size_t n) {
    if (!st->tempo) return say_emit(st, samples, samples ? n : 0, !samples);
    st->n_sped = 0;
    if (gp_tempo_process(st->tempo, samples, n, &st->sped, &st->n_sped, &st->cap_sped, &st->err))
        return -1;
    return say_emit(st, st->sped, st->n_sped, !samples);
}

static int say_on_audio(const float *samples, size_t n, void *user) {
    say_state *st = user;
    if (interrupted) return 1;
    if (say_process(st, samples, n)) {
        st->failed = 1;
        return 1;
    }
    st->samples += n;
    double now = gp_now_s();
    if (now - st->last_progress > 0.25) {
        double audio = (double)st->samples / st->sample_rate;
        double rtf = audio > 0 ? (now - st->start) / audio : 0;
        gp_progress("say: %.1f s of audio, %zu frames, real-time factor %.2f", audio,
                    st->samples / 1024, rtf);
        st->last_progress = now;
    }
    return 0;
}

/* Decide where the audio goes and in which format, before anything loads:
 * a mistake here is reported at once. Returns 0 or an exit code. */
static int plan_outputs(const cli_args *a, say_state *st) {
    const char *out = cli_get(a, "output"), *fmt_name = cli_get(a, "format");
    bool play = cli_flag(a, "play");
    if (!out && !play) {
        if (isatty(STDOUT_FILENO))
            return cli_usage_error("say", "say where the audio goes: -o FILE, -o - or --play");
        out = "-";
    }
    if (out && strcmp(out, "-") == 0 && isatty(STDOUT_FILENO))
        return cli_usage_error("say", "-o - writes binary audio to standard output, which is a "
                                      "terminal here; redirect it (-o - > speech.pcm, or pipe it: "
                                      "-o - | aplay -f S16_LE -r 22050), or use -o FILE or --play");
    st->out = out;
    if (!out && cli_get(a, "rate"))
        return cli_usage_error("say", "--rate sets the rate of -o's audio; the speakers play at "
                                      "the codec's own rate");
    if (!out) return CLI_EXIT_OK;
    int fmt = -1;
    const char *why = NULL;
    if (fmt_name) {
        fmt = gp_audio_format_parse(fmt_name, &why);
        if (fmt < 0)
            return cli_usage_error(
                "say", "%s",
                why ? why : "--format must be wav, flac, opus, mp3, aac, pcm, f32, mulaw or alaw");
    } else if (strcmp(out, "-") == 0) {
        fmt = GP_AUDIO_PCM16;
    } else {
        fmt = gp_audio_format_from_path(out);
        if (fmt < 0)
            return cli_usage_error("say",
                                   "cannot tell the format of \"%s\" from its name; add "
                                   "--format (wav, flac, opus, mp3, aac, pcm, f32, mulaw, alaw)",
                                   out);
    }
    if (cli_flag(a, "float")) {
        if (fmt != GP_AUDIO_WAV16 && fmt != GP_AUDIO_WAV_FLOAT)
            return cli_usage_error("say", "--float applies to WAV output only");
        fmt = GP_AUDIO_WAV_FLOAT;
    }
    st->format = fmt;
    if (cli_get(a, "rate")) {
        long long rate = 0;
        int rc = cli_get_int(a, "rate", 8000, 48000, &rate);
        if (rc) return rc;
        static const int rates[] = {8000, 16000, 22050, 24000, 44100, 48000};
        bool ok = false;
        for (size_t i = 0; i < sizeof rates / sizeof rates[0]; i++) ok |= rate == rates[i];
        if (!ok)
            return cli_usage_error("say",
                                   "--rate must be 8000, 16000, 22050, 24000, 44100 or "
                                   "48000, got %lld",
                                   rate);
        st->out_rate = (int)rate;
    }
    st->speed = 1.0;
    return cli_get_float(a, "speed", GP_TEMPO_MIN, GP_TEMPO_MAX, &st->speed);
}

/* Open what plan_outputs chose: the speakers at the codec's rate, the file
 * or stdout at --rate. */
static int open_outputs(const cli_args *a, int codec_rate, say_state *st) {
    gp_error err;
    if (st->speed != 1.0 && gp_tempo_create(codec_rate, st->speed, &st->tempo, &err))
        return cli_runtime_error("%s", err.message);
    const int rate = st->out_rate ? st->out_rate : codec_rate;
    if (st->out && rate != codec_rate &&
        gp_resampler_create(codec_rate, rate, &st->resampler, &err))
        return cli_runtime_error("%s", err.message);
    if (st->out) {
        int rc = strcmp(st->out, "-") == 0
                     ? gp_audio_sink_open_stream(write_stdout, NULL, (gp_audio_format)st->format,
                                                 rate, &st->sink, &err)
                     : gp_audio_sink_open_file(st->out, (gp_audio_format)st->format, rate,
                                               &st->sink, &err);
        if (rc) return cli_runtime_error("%s", err.message);
    }
    if (cli_flag(a, "play")) {
        if (gp_playback_open(codec_rate, "gepard", &st->playback, &err))
            return cli_runtime_error("%s", err.message);
    }
    return CLI_EXIT_OK;
}

static int load_voice(const cli_args *a, gepard_model *model, gepard_codec *codec,
                      gepard_voice **voice) {
    *voice = NULL;
    const char *path = cli_get(a, "voice"), *save = cli_get(a, "save-voice");
    if (save && !path) return cli_usage_error("say", "--save-voice needs --voice");
    if (!path) return CLI_EXIT_OK;
    if (gepard_voice_from_file(model, codec, path, voice) != GEPARD_OK)
        return cli_runtime_error("%s", gepard_last_error());
    if (save && gepard_voice_save(*voice, save) != GEPARD_OK)
        return cli_runtime_error("%s", gepard_last_error());
    return CLI_EXIT_OK;
}

static void print_summary(const gepard_synth_result *r, FILE *to) {
    fprintf(to,
            "{\"frames\":%zu,\"samples\":%zu,\"seconds\":%.3f,\"elapsed_seconds\":%.3f,"
            "\"rtf\":%.4f,\"ttfa_ms\":%.1f,\"segments\":%d}\n",
            r->frames, r->samples, r->audio_seconds, r->elapsed_seconds, r->rtf, r->ttfa_ms,
            r->segments);
}

int cli_say(int argc, char **argv) {
    cli_args a;
    int rc =
        cli_parse(&a, "say", "[OPTIONS] TEXT | -f FILE | -",
                  "Speak TEXT. Audio streams out as it is generated: to a file (-o), to\n"
                  "stdout as raw 16-bit 22.05 kHz mono PCM (-o -), or to the speakers (--play).\n"
                  "--speed changes the speaking rate and keeps the pitch.",
                  say_options, N_SAY_OPTIONS, argc, argv);
    if (rc || a.help) return rc;
    gepard_synth_params params = gepard_synth_default_params();
    int threads = 0;
    gepard_weight_format weights;
    char *text = NULL;
    gepard_model *model = NULL;
    gepard_codec *codec = NULL;
    gepard_lora *lora = NULL;
    gepard_voice *voice = NULL;
    gepard_engine *engine = NULL;
    say_state st;
    memset(&st, 0, sizeof st);
    gepard_synth_result result;
    memset(&result, 0, sizeof result);
    if ((rc = plan_outputs(&a, &st)) || (rc = cli_read_sampling(&a, &params, &threads, &weights)) ||
        (rc = cli_read_text(&a, "file", &text)))
        goto done;
    params.split_text = !cli_flag(&a, "no-split");
    gepard_load_params lp = gepard_load_default_params();
    lp.weights = weights;
    /* the decode step's packed copy pays for its loading time over a long
     * text only (gepard.h: packed_weights) */
    lp.packed_weights = strlen(text) >= SAY_PACK_MIN_CHARS ? 0 : -1;
    lp.revision = cli_get(&a, "revision");
    lp.offline = cli_flag(&a, "offline");
    cli_read_device(&a, &lp);
    const char *model_path = cli_get(&a, "model") ? cli_get(&a, "model") : DEFAULT_MODEL;
    const char *codec_path = cli_get(&a, "codec") ? cli_get(&a, "codec") : DEFAULT_CODEC;
    gepard_load_params codec_lp = lp;
    codec_lp.revision = NULL;
    gepard_codec_params cp = gepard_codec_default_params();
    cp.n_threads = threads > 0 ? threads : 0;
    cp.no_encoder = !cli_get(&a, "voice"); /* the encoder only clones voices */
    cp.hub = &codec_lp;
    cli_read_codec_device(&a, &cp);
    if (gepard_model_load(model_path, &lp, &model) != GEPARD_OK ||
        gepard_codec_load_with_params(codec_path, &cp, &codec) != GEPARD_OK) {
        rc = cli_runtime_error("%s", gepard_last_error());
        goto done;
    }
    if ((rc = cli_load_lora(&a, model, &lora))) goto done;
    if ((rc = load_voice(&a, model, codec, &voice))) goto done;
    params.voice = voice;
    params.lora = lora;
    st.sample_rate = gepard_codec_sample_rate(codec);
    if ((rc = open_outputs(&a, st.sample_rate, &st))) goto done;
    gepard_engine_params ep = gepard_engine_default_params();
    ep.threads = threads;
    ep.max_streams = 1;
    if (gepard_engine_create(model, codec, &ep, &engine) != GEPARD_OK) {
        rc = cli_runtime_error("%s", gepard_last_error());
        goto done;
    }
    signal(SIGINT, on_interrupt);
    signal(SIGTERM, on_interrupt);
    const char *out_path = cli_get(&a, "output");
    bool to_stdout = st.sink && (!out_path || strcmp(out_path, "-") == 0);
    st.start = gp_now_s();
    gepard_stream_callbacks cb = {.on_audio = say_on_audio, .user = &st};
    gepard_status status = gepard_synthesize(engine, text, &params, &cb, &result);
    gp_progress_done();
    if (status != GEPARD_OK) {
        if (st.failed)
            rc = cli_runtime_error("%s%s", to_stdout ? "standard output: " : "", st.err.message);
        else if (interrupted)
            rc = cli_runtime_error("interrupted; no output written");
        else
            rc = cli_runtime_error("%s", gepard_last_error());
        goto done;
    }
    gp_error err;
    if (say_process(&st, NULL, 0)) { /* what the speed changer holds */
        rc = cli_runtime_error("%s%s", to_stdout ? "standard output: " : "", st.err.message);
        goto done;
    }
    if (st.sink) {
        gp_audio_sink *sink = st.sink;
        st.sink = NULL;
        if (gp_audio_sink_close(sink, true, &err)) {
            rc = cli_runtime_error("%s%s", to_stdout ? "standard output: " : "", err.message);
            goto done;
        }
    }
    if (st.playback) {
        gp_playback *pb = st.playback;
        st.playback = NULL;
        st.playback_used = true;
        if (gp_playback_close(pb, 1, &err)) {
            rc = cli_runtime_error("%s", err.message);
            goto done;
        }
    }
    char note[512];
    if ((st.playback_used || to_stdout) &&
        gp_realtime_note(note, sizeof note, &result, gepard_model_device(model), weights))
        GP_INFO("%s", note);
    if (cli_flag(&a, "json")) {
        const char *out = cli_get(&a, "output");
        bool stdout_audio = (out && strcmp(out, "-") == 0) || (!out && !cli_flag(&a, "play"));
        print_summary(&result, stdout_audio ? stderr : stdout);
    }
done:
    if (st.sink) gp_audio_sink_close(st.sink, false, NULL);
    if (st.playback) gp_playback_close(st.playback, 0, NULL);
    gp_tempo_free(st.tempo);
    free(st.sped);
    gp_resampler_free(st.resampler);
    free(st.resampled);
    gepard_engine_free(engine);
    gepard_voice_free(voice);
    gepard_lora_free(lora);
    gepard_codec_free(codec);
    gepard_model_free(model);
    free(text);
    cli_args_free(&a);
    return rc;
}
