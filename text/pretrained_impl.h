/*
 * pretrained_impl.h: what a pretrained byte-level BPE vocabulary
 * (hl_vocab_load_pretrained) holds besides its pieces, and the parts that
 * pretrained_*.c, bpe_encode.c and vocab*.c share; internal to text/.
 *
 * Every importer (tokenizer.json, vocab.json + merges.txt, the stored form)
 * fills an hl_pretrained_spec, which hl_pretrained_build checks and turns into
 * an hl_vocab, so each rule is written once.
 */
#ifndef HL_TEXT_PRETRAINED_IMPL_H
#define HL_TEXT_PRETRAINED_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "text/vocab_impl.h"

#define HL_PRETRAINED_HEADER "headlab-pretrained-1" /* the stored form's first line */

/* GPT-2's pre-tokenizer regex (a ByteLevel pre-tokenizer with use_regex). */
#define HL_PRETRAINED_GPT2_PATTERN \
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"

/* The special tokens the post-processor puts around one input
 * (TemplateProcessing's "single", e.g. Llama 3's <|begin_of_text|> $A):
 * ids[0..before) before its tokens, ids[before..n) after them. */
#define HL_PRETRAINED_TEMPLATE_MAX 8
typedef struct hl_pretrained_template {
    int32_t ids[HL_PRETRAINED_TEMPLATE_MAX];
    int n, before;
} hl_pretrained_template;

/* A vocabulary as read, before its checks: token t's raw bytes are
 * bytes[start[t]..start[t]+len[t]), or absent when !present[t]. */
typedef struct hl_pretrained_spec {
    int size;                   /* tokens: the largest id + 1 */
    int cap_ids;                /* ids the arrays below have room for */
    unsigned char *bytes;       /* the pieces' bytes, in any order */
    size_t n_bytes, cap_bytes;
    size_t *start, *len;        /* (size) */
    bool *present;              /* (size) */
    bool *added;                /* (size): matched whole in the text (added_tokens) */
    int32_t *merges;            /* (2*n_merges): rank i merges merges[2i], merges[2i+1] */
    int n_merges;
    char *pattern;              /* the pre-tokenizer's regex, PCRE2 syntax */
    bool ignore_merges;         /* a pre-token that is a piece whole is that token */
    bool nfc;                   /* the text is put in Unicode NFC first (normalizer NFC) */
    hl_pretrained_template template;
    /* where each part was read, for messages ("FILE: model.vocab") */
    const char *vocab_at, *merges_at, *pattern_at, *template_at;
} hl_pretrained_spec;

struct hl_pretrained {
    void *code;                 /* the compiled pattern (pcre2_code_8) */
    char *pattern;
    bool ignore_merges;
    bool nfc;                   /* hl_pretrained_normalize before encoding */
    hl_pretrained_template template; /* hl_vocab_encode_input's special tokens */
    bool known_pattern;         /* GPT-2's, Llama 3's or Qwen2's: hl_vocab_cut may cut */
    int32_t byte_token[256];    /* the token of each single byte */
    int n_merges;
    int32_t *merge;             /* (2*n_merges) the pairs by rank */
    int32_t *merge_token;       /* (n_merges) the token rank r makes */
    int32_t *pair_slot;         /* open addressing: ranks by their pair; -1 empty */
    size_t n_pair_slots;
    int32_t *piece_slot;        /* open addressing: tokens by their bytes (the
                                 * lower id of two alike); -1 empty */
    size_t n_piece_slots;
    int32_t *added;             /* the added tokens, longest first */
    int n_added;
};

/* text[0..n) in Unicode NFC into *out (malloc'd, *out_len bytes): each
 * run of valid UTF-8 composed as Hugging Face's NFC normalizer does, any
 * other byte kept as it is. False when out of memory. */
bool hl_pretrained_normalize(const unsigned char *text, size_t n, unsigned char **out,
                             size_t *out_len);

/* Grows spec to hold ids 0..id (id < HL_VOCAB_MAX); false when out of memory
 * or out of range. */
bool hl_pretrained_spec_reserve(hl_pretrained_spec *spec, int32_t id);
/* Token id's raw bytes; false when out of memory. */
bool hl_pretrained_spec_set(hl_pretrained_spec *spec, int32_t id, const unsigned char *bytes,
                            size_t len);
void hl_pretrained_spec_free(hl_pretrained_spec *spec);

/* The vocabulary of spec, checked: no gap in the ids, no empty piece, every
 * single byte a piece, each merge's parts and result pieces (so no result
 * longer than the longest piece), no pair merged twice, a pattern PCRE2
 * compiles, the template's ids tokens. Messages begin with the part's
 * spec->*_at; HL_ERR_FORMAT (HL_ERR_NOMEM when out of memory). */
hl_vocab *hl_pretrained_build(const hl_pretrained_spec *spec, hl_error *err);
void hl_pretrained_free(struct hl_pretrained *p);

/* The token with these raw bytes (the lower id of two alike), or -1. */
int32_t hl_pretrained_piece_token(const hl_vocab *v, const unsigned char *s, size_t len);
/* The rank of the merge of left and right, or -1 when none merges them. */
int32_t hl_pretrained_pair_rank(const struct hl_pretrained *p, int32_t left, int32_t right);

/* hl_vocab_encode, hl_vocab_format (with_template false: without the
 * template line, for hl_vocab_same_tokens), hl_vocab_cut's test and
 * hl_vocab_merge for a pretrained vocabulary (pretrained_encode.c,
 * pretrained_format.c). */
hl_status hl_pretrained_encode(const hl_vocab *v, const unsigned char *text, size_t n,
                               int32_t **tokens, size_t *n_tokens, hl_error *err);
char *hl_pretrained_format(const hl_vocab *v, bool with_template);
hl_vocab *hl_pretrained_parse(const char *s, hl_error *err);
/* ---- importing (pretrained_load.c, pretrained_json.c) ---- */

/* A file's bytes, NUL-terminated, malloc'd (*n without the NUL); NULL with
 * the reason in err (HL_ERR_IO, HL_ERR_NOMEM). */
char *hl_pretrained_read_file(const char *path, size_t *n, hl_error *err);
/* HL_ERR_FORMAT naming path and the line when text (n bytes) holds a NUL
 * byte: the readers find names and lines as C strings, which a NUL would cut
 * short without a word. */
hl_status hl_pretrained_check_nul(const char *path, const char *text, size_t n, hl_error *err);
/* text (n bytes) read by hl_json_parse (text/json.h); NULL with the reason in
 * err, naming path and where, otherwise. */
struct cJSON *hl_pretrained_parse_json(const char *path, const char *text, size_t n,
                                       hl_error *err);

/* The pieces of a vocabulary, by the names the files give them (GPT-2's
 * byte-to-unicode alphabet), for the merges to name them. */
typedef struct hl_pretrained_names hl_pretrained_names;
/* A JSON object piece -> id (a cJSON *, vocab.json or model.vocab) into
 * spec->pieces (each name decoded to raw bytes) and a table of the names;
 * NULL with the reason, naming at, in err. */
hl_pretrained_names *hl_pretrained_names_read(const void *object, hl_pretrained_spec *spec,
                                              const char *at, hl_error *err);
/* The id of a piece by its name (len bytes), or -1. */
int32_t hl_pretrained_names_id(const hl_pretrained_names *t, const char *name, size_t len);
void hl_pretrained_names_free(hl_pretrained_names *t);

/* A name in the byte-to-unicode alphabet as raw bytes into out (room for
 * len bytes): each character its byte; a name with a character outside the
 * alphabet is its UTF-8 bytes as they are (as Hugging Face's ByteLevel
 * decoder does). Returns the length. */
size_t hl_pretrained_decode_name(const char *name, size_t len, unsigned char *out);

/* A tokenizer.json file's text into a vocabulary (pretrained_json.c). */
hl_vocab *hl_pretrained_load_json(const char *path, const char *text, size_t n, hl_error *err);

/* The lowest-ranked merge that makes token, as hl_vocab_merge. */
bool hl_pretrained_merge(const hl_vocab *v, int32_t token, int32_t *left, int32_t *right);
/* Whether no added token's occurrence in text spans position p. */
bool hl_pretrained_cut_ok(const hl_vocab *v, const unsigned char *text, size_t n, size_t p);

#endif
