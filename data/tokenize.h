/*
 * tokenize.h: text of any length into a token file, a block at a time: each
 * block is cut into chunks of about `chunk` bytes at places where cutting
 * does not change the tokens (hl_vocab_cut), the chunks are encoded in
 * parallel (OpenMP, one chunk per thread at a time) and their tokens written
 * in order, so the file is the same for any thread count and equals the
 * encoding of the whole text at once.
 *
 *     size_t used;
 *     hl_tokenize_block(v, buf, n, HL_TOKENIZE_CHUNK, at_end, writer, &used, &err);
 *     // keep buf[used..n) and append more text after it
 */
#ifndef HL_TOKENIZE_H
#define HL_TOKENIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "data/token_file.h"
#include "text/vocab.h"

#define HL_TOKENIZE_CHUNK ((size_t)1 << 20) /* bytes per chunk, as the programs use */

/* Encodes text[0..n) into w. When last, all of it; otherwise up to the last
 * place it may be cut, the rest to be given again at the start of the next
 * block: *used is the bytes consumed (0 when no place to cut was found:
 * give a longer block). HL_ERR_NOMEM, or the writer's error. */
hl_status hl_tokenize_block(const hl_vocab *v, const unsigned char *text, size_t n, size_t chunk,
                            bool last, hl_token_writer *w, size_t *used, hl_error *err);

/* The bytes of a text of `size` that the fraction `fraction` (0 ≤ F < 1) of
 * it makes: floor(size·F), with F taken as the decimal of 9 places nearest
 * its double and the product computed in integers. A double product floors
 * 100 × 0.29 (the double 0.28999...) to 28; this gives 29, and size/10 for
 * 0.1, as charlm's split. */
uint64_t hl_tokenize_val_bytes(uint64_t size, double fraction);

#endif
