/*
 * head_maps.h: every head's attention on one input, and its tokens as axis
 * labels (a text model's tokens as their text, numbers otherwise).
 *
 *     hl_tensor *maps = hl_heads_attention(m, tokens, T, &err);   // (N,T,T), N heads
 *     char label[HL_TOKEN_LABEL_MAX];
 *     hl_token_label(tokens[t], vocab, label);                     // "a", "\n", "_the"
 */
#ifndef HL_HEAD_MAPS_H
#define HL_HEAD_MAPS_H

#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"
#include "core/tensor.h"
#include "models/gpt.h"
#include "text/vocab.h"

#define HL_TOKEN_LABEL_MAX 16

/* Every head's attention probabilities on tokens (T) as a heap tensor
 * (N,T,T), heads in the flat order of hl_gpt_head_index; NULL with the
 * reason in err (T outside 1..n_ctx, a token outside the vocabulary). */
hl_tensor *hl_heads_attention(const hl_gpt *m, const int32_t *tokens, int T, hl_error *err);

/* A token as a label: with a vocabulary (text/vocab.h), its text with
 * printable ASCII as itself, \n \t \r as escapes and other bytes as \xNN; a
 * space is "' '" alone and "_" inside a word (" the" is "_the"); cut before
 * the first character that would pass HL_TOKEN_LABEL_MAX - 1 (the PNG axes
 * cut further, to HL_HEATMAP_TOKEN_CHARS). Without one (vocab NULL, or a
 * token outside it), its number. */
const char *hl_token_label(int32_t token, const hl_vocab *vocab, char buf[HL_TOKEN_LABEL_MAX]);

#endif
