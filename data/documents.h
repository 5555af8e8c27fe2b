/*
 * documents.h: the documents of a text and training windows that respect
 * them (docs/token-files.md, "Documents").
 *
 * The rule: a document ends at the end of each input file and after each
 * line holding only a form feed ("\f\n", or "\f\r\n" in a text of CRLF
 * lines, at the start of a line), which stays the last line of the document
 * it ends. Each document is encoded on its own, so no token spans two. Token
 * files keep the starts (hl_token_file_docs); charlm --data --doc-windows
 * finds them with the same rule.
 *
 *     int32_t *tokens; uint64_t *starts; size_t n, n_docs;
 *     hl_docs_encode(vocab, text, size, &tokens, &n, &starts, &n_docs, &err);
 *     size_t at = starts[hl_docs_draw(starts, n_docs, n, T + 1, u)];  // u in [0,1)
 *     hl_docs_ids(starts, n_docs, at, T, ids);                        // (T) ids 0, 0, 1, ...
 */
#ifndef HL_DOCUMENTS_H
#define HL_DOCUMENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "core/real.h"
#include "text/vocab.h"

/* Where the first document of text[0..n) ends: just after its first
 * form-feed line (text[0] starts a line when line_start), or 0 when there
 * is none. *safe is how much of the text can be encoded without cutting such
 * a line in two: n, or the start of a lone "\f" (or "\f\r") at the end whose
 * line may go on (a stream reads more before deciding). */
size_t hl_docs_form_feed_end(const unsigned char *text, size_t n, bool line_start, size_t *safe);

/* text[0..size) (one input file) encoded by v document by document: *tokens
 * (*n of them, caller frees) and the token where each document starts,
 * *starts (*n_docs, ascending from 0, caller frees; none for an empty text).
 * HL_ERR_NOMEM, or the encoder's error. */
hl_status hl_docs_encode(const hl_vocab *v, const unsigned char *text, size_t size,
                         int32_t **tokens, size_t *n, uint64_t **starts, size_t *n_docs,
                         hl_error *err);

/* The documents whose start leaves a window of `window` tokens in a text of
 * size tokens: starts[0..k) with starts[i] + window <= size. */
size_t hl_docs_window_starts(const uint64_t *starts, size_t n_docs, size_t size, size_t window);

/* How many of the size tokens the windows from the first k starts read
 * together: a document longer than the window is read in its first
 * `window` tokens only, the rest of it never. */
uint64_t hl_docs_window_coverage(const uint64_t *starts, size_t k, size_t size, size_t window);

/* Which of the k documents hl_docs_window_starts allows a uniform u in [0,1)
 * picks (k > 0). */
size_t hl_docs_draw(size_t k, double u);

/* The document ids of positions at..at+T-1 into ids (T): 0 for the document
 * holding position at, counting up at each start inside the window (as
 * hl_gpt_run.doc_ids reads them). */
void hl_docs_ids(const uint64_t *starts, size_t n_docs, uint64_t at, int T, hl_real *ids);

#endif
