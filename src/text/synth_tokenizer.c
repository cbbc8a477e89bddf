/* synth_tokenizer.c — training a small byte-level BPE on a built-in corpus
 * and serialising it as a tokenizer.json (see synth_tokenizer.h). */
#include "text/synth_tokenizer.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char corpus[] =
    "The quick brown fox jumps over the lazy dog. A journey of a thousand miles begins with a "
    "single step. It was the best of times, it was the worst of times, it was the age of wisdom, "
    "it was the age of foolishness. Good morning! How are you today? I would like a cup of tea "
    "and something to read while the rain falls outside the window. Please call me when you "
    "arrive at the station, and we will go to the market together before it closes. The weather "
    "this week should be warm and sunny, with a chance of showers on Thursday afternoon. Speech "
    "synthesis turns written text into natural sounding audio, one frame at a time. Our team "
    "built a fast engine that runs on a laptop and on a server with many listeners. Thank you "
    "for listening, and have a wonderful evening. They said that there were three people who "
    "could not find their way home because the road was closed for repairs. What time does the "
    "next train leave for the city? The children played in the garden until the sun went down, "
    "then they came inside for dinner. Numbers like one, two, three, four, five, six, seven, "
    "eight, nine and ten are spoken clearly. He believes the information will be available "
    "through the government website within a few days, although nobody has confirmed it yet. "
    "Technology, science, history, music, and literature are important subjects in every school. "
    "She opened the door, looked around the room, and smiled at everyone who was waiting there. "
    "If you have any questions about your account, our support staff will be happy to help. ";

/* GPT-2 byte-level alphabet: printable bytes map to themselves, the rest to
 * U+0100 upwards in byte order. */
static int byte_to_codepoint(int b) {
    if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)) return b;
    int n = 0;
    for (int x = 0; x < b; x++)
        if (!((x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE && x <= 0xFF)))
            n++;
    return 256 + n;
}

static void append_codepoint(char *s, size_t *len, int cp) {
    if (cp < 0x80) {
        s[(*len)++] = (char)cp;
    } else {
        s[(*len)++] = (char)(0xC0 | (cp >> 6));
        s[(*len)++] = (char)(0x80 | (cp & 0x3F));
    }
    s[*len] = '\0';
}

#define MAX_SYMBOLS 8192
#define MAX_WORDS 1024
#define MAX_WORD_LEN 48

typedef struct bpe_state {
    char *symbols[MAX_SYMBOLS];
    int n_symbols;
    int words[MAX_WORDS][MAX_WORD_LEN];
    int word_len[MAX_WORDS];
    int word_count[MAX_WORDS];
    int n_words;
    unsigned pair_keys[32768];
    int pair_counts[32768];
} bpe_state;

static int add_word(bpe_state *st, const char *w, size_t len) {
    int syms[MAX_WORD_LEN];
    if (len == 0 || len >= MAX_WORD_LEN) return 0;
    for (size_t i = 0; i < len; i++) syms[i] = (unsigned char)w[i]; /* byte symbols 0..255 */
    for (int k = 0; k < st->n_words; k++)
        if (st->word_len[k] == (int)len && memcmp(st->words[k], syms, len * sizeof(int)) == 0) {
            st->word_count[k]++;
            return 0;
        }
    if (st->n_words == MAX_WORDS) return 0;
    memcpy(st->words[st->n_words], syms, len * sizeof(int));
    st->word_len[st->n_words] = (int)len;
    st->word_count[st->n_words] = 1;
    st->n_words++;
    return 0;
}

/* Split like the Qwen regex does for plain English: optional leading space
 * + letters, single digits, punctuation runs. */
static void load_corpus(bpe_state *st) {
    size_t n = strlen(corpus), i = 0;
    while (i < n) {
        size_t j = i;
        if (corpus[j] == ' ') j++;
        if (j < n && ((corpus[j] | 32) >= 'a' && (corpus[j] | 32) <= 'z')) {
            while (j < n && ((corpus[j] | 32) >= 'a' && (corpus[j] | 32) <= 'z')) j++;
        } else {
            j = i + 1;
        }
        add_word(st, corpus + i, j - i);
        i = j;
    }
}

#define PAIR_TABLE 32768

/* The most frequent adjacent pair (ties: smallest ids), counted with an open
 * addressing table keyed by the pair. Returns its count. */
static int best_pair(bpe_state *st, int *left, int *right) {
    unsigned *keys = st->pair_keys;
    int *counts = st->pair_counts;
    memset(counts, 0, sizeof st->pair_counts);
    int best = 0;
    unsigned best_key = 0;
    for (int w = 0; w < st->n_words; w++) {
        for (int k = 0; k + 1 < st->word_len[w]; k++) {
            unsigned key = ((unsigned)st->words[w][k] << 16) | (unsigned)st->words[w][k + 1];
            unsigned h = (key * 2654435761u) & (PAIR_TABLE - 1);
            while (counts[h] && keys[h] != key) h = (h + 1) & (PAIR_TABLE - 1);
            keys[h] = key;
            counts[h] += st->word_count[w];
            if (counts[h] > best || (counts[h] == best && key < best_key)) {
                best = counts[h];
                best_key = key;
            }
        }
    }
    if (!best) return 0;
    *left = (int)(best_key >> 16);
    *right = (int)(best_key & 0xFFFF);
    return best;
}

static void apply_merge(bpe_state *st, int l, int r, int id) {
    for (int w = 0; w < st->n_words; w++) {
        int o = 0;
        for (int k = 0; k < st->word_len[w]; k++) {
            if (k + 1 < st->word_len[w] && st->words[w][k] == l && st->words[w][k + 1] == r) {
                st->words[w][o++] = id;
                k++;
            } else {
                st->words[w][o++] = st->words[w][k];
            }
        }
        st->word_len[w] = o;
    }
}

static const char *added_token_name(int id, char *buf, size_t size) {
    switch (id) {
    case 248044: return "<|endoftext|>";
    case 248045: return "<|im_start|>";
    case 248046: return "<|im_end|>";
    case 248070: return "<|audio_start|>";
    case 248071: return "<|audio_end|>";
    case 248072: return "<tts_pad>";
    case 248073: return "<tts_text_bos>";
    case 248074: return "<tts_text_eod>";
    case 248075: return "<tts_text_bos_single>";
    case 248076: return "<|audio_pad|>";
    default: snprintf(buf, size, "<|reserved_%d|>", id); return buf;
    }
}

int gp_synth_tokenizer_json(gp_buf *out, int max_merges, gp_error *err) {
    bpe_state *st = calloc(1, sizeof *st);
    if (!st) return gp_fail_oom(err, "tokenizer synthesis", sizeof *st);
    for (int b = 0; b < 256; b++) {
        char s[8];
        size_t len = 0;
        append_codepoint(s, &len, byte_to_codepoint(b));
        st->symbols[st->n_symbols++] = strdup(s);
    }
    load_corpus(st);
    cJSON *merges = cJSON_CreateArray();
    for (int m = 0; m < max_merges && st->n_symbols < MAX_SYMBOLS; m++) {
        int l, r;
        if (best_pair(st, &l, &r) < 1) break;
        size_t ll = strlen(st->symbols[l]), rl = strlen(st->symbols[r]);
        char *joined = malloc(ll + rl + 1);
        memcpy(joined, st->symbols[l], ll);
        memcpy(joined + ll, st->symbols[r], rl + 1);
        cJSON *pair = cJSON_CreateArray();
        cJSON_AddItemToArray(pair, cJSON_CreateString(st->symbols[l]));
        cJSON_AddItemToArray(pair, cJSON_CreateString(st->symbols[r]));
        cJSON_AddItemToArray(merges, pair);
        apply_merge(st, l, r, st->n_symbols);
        st->symbols[st->n_symbols++] = joined;
    }
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "version", "1.0");
    cJSON_AddNullToObject(root, "truncation");
    cJSON_AddNullToObject(root, "padding");
    cJSON *added = cJSON_AddArrayToObject(root, "added_tokens");
    for (int id = GP_SYNTH_ADDED_FIRST; id < GP_SYNTH_ADDED_FIRST + GP_SYNTH_ADDED_COUNT; id++) {
        char name[48];
        cJSON *t = cJSON_CreateObject();
        cJSON_AddNumberToObject(t, "id", id);
        cJSON_AddStringToObject(t, "content", added_token_name(id, name, sizeof name));
        cJSON_AddFalseToObject(t, "single_word");
        cJSON_AddFalseToObject(t, "lstrip");
        cJSON_AddFalseToObject(t, "rstrip");
        cJSON_AddFalseToObject(t, "normalized");
        cJSON_AddTrueToObject(t, "special");
        cJSON_AddItemToArray(added, t);
    }
    cJSON *norm = cJSON_AddObjectToObject(root, "normalizer");
    cJSON_AddStringToObject(norm, "type", "NFC");
    cJSON *pre = cJSON_AddObjectToObject(root, "pre_tokenizer");
    cJSON_AddStringToObject(pre, "type", "Sequence");
    cJSON *pres = cJSON_AddArrayToObject(pre, "pretokenizers");
    cJSON *split = cJSON_CreateObject();
    cJSON_AddStringToObject(split, "type", "Split");
    cJSON *pattern = cJSON_AddObjectToObject(split, "pattern");
    cJSON_AddStringToObject(pattern, "Regex",
                            "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|"
                            "\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|"
                            "\\s+");
    cJSON_AddStringToObject(split, "behavior", "Isolated");
    cJSON_AddFalseToObject(split, "invert");
    cJSON_AddItemToArray(pres, split);
    cJSON *bl = cJSON_CreateObject();
    cJSON_AddStringToObject(bl, "type", "ByteLevel");
    cJSON_AddFalseToObject(bl, "add_prefix_space");
    cJSON_AddFalseToObject(bl, "trim_offsets");
    cJSON_AddFalseToObject(bl, "use_regex");
    cJSON_AddItemToArray(pres, bl);
    cJSON_AddNullToObject(root, "post_processor");
    cJSON *dec = cJSON_AddObjectToObject(root, "decoder");
    cJSON_AddStringToObject(dec, "type", "ByteLevel");
    cJSON_AddTrueToObject(dec, "add_prefix_space");
    cJSON_AddTrueToObject(dec, "trim_offsets");
    cJSON_AddTrueToObject(dec, "use_regex");
    cJSON *model = cJSON_AddObjectToObject(root, "model");
    cJSON_AddStringToObject(model, "type", "BPE");
    cJSON_AddNullToObject(model, "dropout");
    cJSON_AddNullToObject(model, "unk_token");
    cJSON_AddStringToObject(model, "continuing_subword_prefix", "");
    cJSON_AddStringToObject(model, "end_of_word_suffix", "");
    cJSON_AddFalseToObject(model, "fuse_unk");
    cJSON_AddFalseToObject(model, "byte_fallback");
    cJSON_AddFalseToObject(model, "ignore_merges");
    cJSON *vocab = cJSON_AddObjectToObject(model, "vocab");
    for (int i = 0; i < st->n_symbols; i++) cJSON_AddNumberToObject(vocab, st->symbols[i], i);
    cJSON_AddItemToObject(model, "merges", merges);
    char *text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    for (int i = 0; i < st->n_symbols; i++) free(st->symbols[i]);
    free(st);
    if (!text) return gp_fail_oom(err, "tokenizer.json", 0);
    int rc = gp_buf_append_str(out, text);
    free(text);
    return rc ? gp_fail_oom(err, "tokenizer.json", 0) : GEPARD_OK;
}
