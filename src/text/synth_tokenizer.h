/* synth_tokenizer.h — a synthetic Qwen3.5-style tokenizer.json for
 * benchmark checkpoints: byte-level BPE trained on a small built-in English
 * corpus (so English text tokenizes at a realistic ~1.3-1.6 tokens per word),
 * the Qwen3.5 split regex and NFC normaliser, and added tokens at the real
 * Qwen3.5 ids 248044-248076. Not a real model's vocabulary. */
#ifndef GP_TEXT_SYNTH_TOKENIZER_H
#define GP_TEXT_SYNTH_TOKENIZER_H

#include "base/buf.h"
#include "base/error.h"

/* First added-token id and count (Qwen3.5: 248044, 33 tokens). */
#define GP_SYNTH_ADDED_FIRST 248044
#define GP_SYNTH_ADDED_COUNT 33

/* Write the tokenizer.json document into `out`; `merges` caps the number of
 * BPE merges learned. */
int gp_synth_tokenizer_json(gp_buf *out, int merges, gp_error *err);

#endif
