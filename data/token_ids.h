/*
 * token_ids.h: sequences of token ids written as text (heads eval
 * --token-ids FILE), one sequence a line, decimal ids separated by spaces or
 * tabs, every sequence of one length. Lines without an id (empty, blanks
 * alone) are skipped; a carriage return counts as a blank, so CRLF files
 * read as LF ones. Parsed within each line's bytes: a last line without a
 * newline, or a NUL byte, is read like any other byte.
 *
 *     int32_t *ids; int rows, cols;
 *     if (hl_token_ids_parse(text, n, "ids.txt", vocab, &ids, &rows, &cols, &err) != HL_OK)
 *         ...err.message...
 *     // ids: rows × cols, row after row; free(ids)
 */
#ifndef HL_TOKEN_IDS_H
#define HL_TOKEN_IDS_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

/* text[0..n) into *ids (malloc'ed), *rows sequences of *cols ids each, every
 * id in 0..vocab-1. HL_ERR_FORMAT, naming `name` and the line, for a word
 * that is not such an id, lines of different lengths, or no id at all;
 * HL_ERR_NOMEM. On error *ids is NULL and *rows, *cols 0. */
hl_status hl_token_ids_parse(const char *text, size_t n, const char *name, int vocab,
                             int32_t **ids, int *rows, int *cols, hl_error *err);

#endif
