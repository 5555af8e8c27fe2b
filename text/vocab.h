/*
 * vocab.h: the tokens of a text model — its bytes, or words learnt from a
 * training text with the bytes as fallback.
 *
 * Tokens 0..255 are the bytes themselves, so every text encodes. A learnt
 * vocabulary adds pieces 256..size-1: the most frequent words of the training
 * text as the pre-tokenizer cuts it (hl_vocab_next_word): a run of letters
 * with the one space before it (" the", " LORD", "And" at a line's start), a
 * run of digits, or any other single byte. Encoding maps each word to its
 * piece when the vocabulary has one, else to its bytes; decoding concatenates
 * the pieces, so decode(encode(text)) is the text, whatever its bytes.
 *
 *     hl_vocab *v = hl_vocab_learn(text, n, 4096, &err);       // or hl_vocab_bytes()
 *     int32_t *tokens; size_t n_tokens;
 *     hl_vocab_encode(v, text, n, &tokens, &n_tokens, &err);
 *     char *meta = hl_vocab_format(v);        // stored with the model (model_io.h)
 *     hl_vocab *back = hl_vocab_parse(meta, &err);
 */
#ifndef HL_VOCAB_H
#define HL_VOCAB_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

#define HL_VOCAB_BYTES 256        /* tokens 0..255: the bytes */
#define HL_VOCAB_MAX (1 << 20)    /* tokens at most */
#define HL_VOCAB_PIECE_MAX 48     /* a learnt piece's bytes at most */

typedef struct hl_vocab hl_vocab;

/* The 256 bytes and nothing else (a byte-level model). NULL when out of memory. */
hl_vocab *hl_vocab_bytes(void);
/* The bytes and the size-256 most frequent words of text (ties in byte order)
 * that are 2..HL_VOCAB_PIECE_MAX bytes long; fewer when the text has fewer.
 * HL_ERR_ARG when size is outside 257..HL_VOCAB_MAX. */
hl_vocab *hl_vocab_learn(const unsigned char *text, size_t n, int size, hl_error *err);
/* The bytes and the given pieces, as tokens 256, 257, ... HL_ERR_ARG, naming
 * the piece, for one shorter than 2 or longer than HL_VOCAB_PIECE_MAX bytes,
 * one given twice, or more than HL_VOCAB_MAX tokens in all. */
hl_vocab *hl_vocab_from_pieces(const unsigned char *const *pieces, const size_t *lens, int n,
                               hl_error *err);
void hl_vocab_free(hl_vocab *v);

/* Tokens in the vocabulary (256 for the bytes alone). */
int hl_vocab_size(const hl_vocab *v);
/* The bytes of a token, *len of them; NULL when the token is outside
 * 0..size-1. */
const unsigned char *hl_vocab_piece(const hl_vocab *v, int32_t token, size_t *len);

/* Each token's length in bytes into bytes (size of them), e.g. to turn a loss
 * per token into one per byte. */
void hl_vocab_token_bytes(const hl_vocab *v, double *bytes);

/* The end of the word that starts at text[i] (i < n): see the top. */
size_t hl_vocab_next_word(const unsigned char *text, size_t n, size_t i);

/* The tokens of text into a malloc'd array (*tokens, *n_tokens; free it).
 * Never fails for want of a token; HL_ERR_NOMEM only. */
hl_status hl_vocab_encode(const hl_vocab *v, const unsigned char *text, size_t n,
                          int32_t **tokens, size_t *n_tokens, hl_error *err);
/* The text of tokens into a malloc'd, NUL-terminated array (*text, *len
 * without the NUL). HL_ERR_ARG, naming the position, for a token outside the
 * vocabulary. */
hl_status hl_vocab_decode(const hl_vocab *v, const int32_t *tokens, size_t n,
                          unsigned char **text, size_t *len, hl_error *err);

/* The learnt pieces as one printable-ASCII string (malloc'd; NULL when out of
 * memory): "headlab-words-1" and then each piece of 256.. on a line of its
 * own, with \\, \n and the bytes outside 0x20..0x7e written as \\, \n, \xNN.
 * hl_vocab_parse reads it back, refusing (HL_ERR_FORMAT) any other header, and,
 * naming the line, a bad escape or an empty, one-byte or too long piece;
 * naming both tokens, a piece given twice. */
char *hl_vocab_format(const hl_vocab *v);
hl_vocab *hl_vocab_parse(const char *s, hl_error *err);

#endif
