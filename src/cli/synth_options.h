/* synth_options.h — the sampling options shared by `gepard codes`, `say`
 * and `bench`, and the text argument rules (TEXT, `-` for stdin, -f FILE). */
#ifndef GP_CLI_SYNTH_OPTIONS_H
#define GP_CLI_SYNTH_OPTIONS_H

#include "cli/args.h"
#include "gepard.h"

/* Where the model runs (shared by codes, say, serve and bench). */
#define CLI_DEVICE_OPTIONS                                                                         \
    {"device", 0, "DEV", "cpu, cuda, cuda:N or auto (default: a GPU when one is usable)"}, {       \
        "gpu-precision", 0, "P",                                                                   \
            "GPU arithmetic: bf16 (default; the codec in FP16) or f32 (reproduces the CPU)"        \
    }

/* Where the codec decodes (say, serve). */
#define CLI_CODEC_DEVICE_OPTION                                                                    \
    {                                                                                              \
        "codec-device", 0, "DEV",                                                                  \
            "where the codec decodes: cpu, cuda, cuda:N or auto (default: as --device)"            \
    }

/* Entries to splice into a command's option table. */
#define CLI_SAMPLING_OPTIONS                                                                       \
    {"temperature", 0, "F", "sampling temperature (default 1.0; <= 0 is greedy)"},                 \
        {"top-k", 0, "N", "keep the N most likely codes per channel (default 0 = all)"},           \
        {"max-frames", 0, "N", "stop after N frames of ~46 ms (default 2000)"},                    \
        {"stop-threshold", 0, "F", "stop when the stop head's probability exceeds F (0.5)"},       \
        {"repetition-penalty", 0, "F", "penalise codes used in the recent window (default 1.0)"},  \
        {"repetition-window", 0, "N", "frames the penalty looks back; 0 = all (default 32)"},      \
        {"cfg-scale", 0, "F", "classifier-free guidance scale (default 1.0 = off)"},               \
        {"cfg-frames", 0, "N", "guide only the first N frames (default: all)"},                    \
        {"cfg-uncond", 0, "MODE", "unconditional branch: empty_text (default) or audio_only"},     \
        {"force-stop-frames", 0, "N", "end after exactly N frames unless it stops earlier"},       \
        {"seed", 0, "N", "random seed (default: a fresh one each run)"},                           \
        {"threads", 't', "N", "compute threads (default: all CPUs)"},                              \
        {"dtype", 0, "FMT", "weight format: f32, bf16 (default), int8 or q4"}, CLI_DEVICE_OPTIONS, \
        {"lora", 0, "FILE", "apply a LoRA adapter (.pt or .safetensors)"}, {                       \
        "lora-alpha", 0, "A", "the adapter's alpha (default: from the file, else 2 x rank)"        \
    }

/* Fill params (defaults already set) from the parsed options. Returns 0 or
 * CLI_EXIT_USAGE after printing the problem. */
int cli_read_sampling(const cli_args *args, gepard_synth_params *params, int *threads,
                      gepard_weight_format *weights);

/* The text to speak: the single positional TEXT, `-` or -f FILE for a file /
 * stdin. *text is malloc'ed. Returns 0, CLI_EXIT_USAGE or CLI_EXIT_RUNTIME. */
int cli_read_text(const cli_args *args, const char *file_option, char **text);

/* --device / --gpu-precision into load params (strings point into args). */
void cli_read_device(const cli_args *args, gepard_load_params *lp);
/* --codec-device (else --device) and --gpu-precision into codec params. */
void cli_read_codec_device(const cli_args *args, gepard_codec_params *cp);

/* The adapter named by --lora (alpha from --lora-alpha), or NULL. */
int cli_load_lora(const cli_args *args, gepard_model *model, gepard_lora **lora);

/* Load model + optional LoRA (--lora / --lora-alpha) for a command. */
int cli_load_model(const cli_args *args, gepard_weight_format weights, gepard_model **model,
                   gepard_lora **lora);

#endif
