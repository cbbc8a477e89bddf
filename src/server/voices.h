/* voices.h — the server's voices: a directory scanned once at start.
 *
 * In `--voices DIR` every file defines (part of) a voice named after its
 * stem (the name without extensions):
 *   - a reference clip in any format libsndfile reads (.wav .flac .ogg .mp3
 *     ...): its speaker prefix is computed once at start and kept in memory;
 *   - a saved speaker prefix (.safetensors, from `gepard say --save-voice`);
 *   - a LoRA adapter, NAME.lora.pt or NAME.lora.safetensors, with an optional
 *     NAME.lora.json sidecar {"alpha": A} (else the file's metadata, else
 *     2 x rank); applied per stream at run time.
 * A clip or prefix and an adapter with the same name make one voice with
 * both. Other files (README, sidecars) are skipped; hidden files ignored.
 *
 * The OpenAI names (alloy, ash, ... verse) that no file defines speak with
 * the model's default voice (no speaker prefix); "default" always does.
 */
#ifndef GP_SERVER_VOICES_H
#define GP_SERVER_VOICES_H

#include <stdbool.h>
#include <stddef.h>

#include "base/buf.h"
#include "base/error.h"
#include "gepard.h"

#define GP_VOICE_NAME_MAX 128

typedef struct gp_voice_entry {
    char name[GP_VOICE_NAME_MAX];
    char *prefix_file;   /* file name of the clip or saved prefix, or NULL */
    char *lora_file;     /* file name of the adapter, or NULL */
    gepard_voice *voice; /* NULL: the model's default voice */
    gepard_lora *lora;
    float lora_alpha; /* as given by the sidecar; 0 = from the file */
} gp_voice_entry;

typedef struct gp_voices {
    gp_voice_entry *items; /* sorted by name */
    int count;
} gp_voices;

/* Load every voice in `dir` (NULL: none). `codec` encodes clips. */
int gp_voices_load(gepard_model *model, const gepard_codec *codec, const char *dir, gp_voices **out,
                   gp_error *err);
void gp_voices_free(gp_voices *voices);

/* The entry for `name`, or NULL. */
const gp_voice_entry *gp_voices_find(const gp_voices *voices, const char *name);
/* True for the OpenAI voice names and "default". */
bool gp_voices_is_builtin_name(const char *name);
/* Append a JSON array of every usable name (directory voices, then the
 * built-in names no file overrides). */
int gp_voices_append_names(const gp_voices *voices, gp_buf *out);
/* Every usable voice in the listings' order (directory voices by name, then
 * the built-in names no file overrides): how many there are, and the i-th's
 * name and entry (*entry NULL for a built-in name). */
int gp_voices_listed_count(const gp_voices *voices);
const char *gp_voices_listed(const gp_voices *voices, int i, const gp_voice_entry **entry);
/* The index of `name` in the listings' order, or -1. */
int gp_voices_listed_index(const gp_voices *voices, const char *name);
/* A line for a listing: which files make the voice, or the default's. */
void gp_voice_describe(const gp_voice_entry *entry, char *out, size_t cap);
/* Append the body of GET /v1/audio/voices. */
int gp_voices_append_listing(const gp_voices *voices, gp_buf *out);

#endif
