/*
 * token_file.h: a corpus as tokens on disk (docs/token-files.md), read by
 * memory-mapping it and written by streaming, so a corpus larger than memory
 * trains in constant memory and every process that maps it shares the page
 * cache.
 *
 * The format, version 2, every integer little-endian:
 *
 *     offset  size  field
 *          0     8  magic "HLTOK" and three zero bytes
 *          8     4  format version, 2 (1: no document index)
 *         12     4  token width in bytes: 2 when the vocabulary has at most
 *                   65536 tokens, else 4
 *         16     8  token count
 *         24     4  vocabulary size (tokens), 256..HL_VOCAB_MAX
 *         28     4  zero
 *         32     8  FNV-1a 64 hash of the vocabulary string
 *         40     8  length of the vocabulary string in bytes
 *         48     8  bytes of text the tokens encode (bytes per token)
 *         56     8  documents d in the index (version 1: zero)
 *         64     -  the vocabulary string: hl_vocab_format's output, without
 *                   a NUL ("headlab-words-1" alone for the bytes)
 *                   zeros up to the next multiple of 64
 *              w*n  the tokens, each < the vocabulary size
 *              8*d  version 2: the document index, right after the tokens:
 *                   the token where each document starts, ascending, the
 *                   first 0 (d = 0 only when n = 0)
 *
 * The file's length is exactly the end of the index (version 1: of the
 * tokens). A version-1 file reads as one document. Opening checks every header
 * field, the length against the file's size, the vocabulary string (parsed,
 * its hash and size compared with the header's) and the index. Tokens are checked
 * where they are read (hl_token_file_read): a window holding a token >= the
 * vocabulary size is an error naming the file and the position, so opening a
 * file of any size costs the same and touches only its header.
 *
 *     hl_token_file *f = hl_token_file_open("out/kjv/train.tok", &err);
 *     int32_t window[65];
 *     hl_token_file_read(f, offset, 65, window, &err);
 *     hl_token_file_close(f);
 *
 *     hl_token_writer *w = hl_token_writer_begin("train.tok", vocab, &err);
 *     hl_token_writer_put(w, tokens, n, text_bytes, &err);   // again and again
 *     hl_token_writer_end_document(w);                       // where one ends
 *     hl_token_writer_commit(w, &err);                       // or _abort
 */
#ifndef HL_TOKEN_FILE_H
#define HL_TOKEN_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "text/vocab.h"

#define HL_TOKEN_MAGIC "HLTOK"
#define HL_TOKEN_VERSION 2 /* written; 1 and 2 are read */
#define HL_TOKEN_HEADER 64  /* bytes of the fixed header */
#define HL_TOKEN_ALIGN 64   /* the tokens start at a multiple of this */

/* A token file's header, as parsed. */
typedef struct hl_token_header {
    uint32_t version, width, vocab_size;
    uint64_t n_tokens, vocab_hash, vocab_len, text_bytes;
    uint64_t tokens_at; /* where the tokens start: 64 + vocab_len, rounded up to 64 */
    uint64_t n_docs;    /* documents in the index (version 1: 0, no index) */
    uint64_t docs_at;   /* where the index starts (version 1: the file's end) */
} hl_token_header;

/* The FNV-1a 64 hash of a vocabulary string, as the header stores it. */
uint64_t hl_token_vocab_hash(const char *s, size_t len);

/* Checks the first size bytes of a token file (its header and vocabulary,
 * at least; a whole file's tokens are not looked at) whose total length is
 * file_size; on success fills *h and, when vocab is not NULL, the parsed
 * vocabulary (caller frees). HL_ERR_FORMAT naming name and the field. */
hl_status hl_token_header_parse(const unsigned char *bytes, size_t size, uint64_t file_size,
                                const char *name, hl_token_header *h, hl_vocab **vocab,
                                hl_error *err);

typedef struct hl_token_file hl_token_file;

/* Maps path read-only and checks it (see the top). NULL with the reason,
 * naming the file, in err: HL_ERR_IO when it cannot be opened or mapped,
 * HL_ERR_FORMAT for bad contents. */
hl_token_file *hl_token_file_open(const char *path, hl_error *err);
void hl_token_file_close(hl_token_file *f);

const char *hl_token_file_path(const hl_token_file *f);
const hl_token_header *hl_token_file_header(const hl_token_file *f);
/* The file's vocabulary (owned by f). */
const hl_vocab *hl_token_file_vocab(const hl_token_file *f);
/* A fingerprint of the file for checkpoints: FNV-1a 64 over its header, its
 * vocabulary string and the first and last 64 KiB of its tokens. A changed
 * token count, vocabulary or text at either end changes it; a change in the
 * middle that keeps the length does not. */
uint64_t hl_token_file_fingerprint(const hl_token_file *f);

/* The file's documents: *n starts (token indices, ascending, the first 0),
 * owned by f. A version-1 file is one document ({0}); an empty file none. */
const uint64_t *hl_token_file_docs(const hl_token_file *f, size_t *n);

/* Tokens at..at+n-1 into out as int32; HL_ERR_ARG past the end, HL_ERR_FORMAT
 * naming the file and the position for a token >= the vocabulary size. */
hl_status hl_token_file_read(const hl_token_file *f, uint64_t at, size_t n, int32_t *out,
                             hl_error *err);

/* Whether the first bytes of a file are a token file's magic (size >= 8). */
int hl_token_magic(const unsigned char *bytes, size_t size);

typedef struct hl_token_writer hl_token_writer;

/* A token file for the vocabulary v at path, written atomically (files/
 * atomic.h): the header and vocabulary now, the tokens as they come, the
 * counts at the commit. */
hl_token_writer *hl_token_writer_begin(const char *path, const hl_vocab *v, hl_error *err);
/* Appends n tokens that encode text_bytes bytes of text. HL_ERR_ARG, naming
 * the file, for a token outside the vocabulary (nothing is appended). */
hl_status hl_token_writer_put(hl_token_writer *w, const int32_t *tokens, size_t n,
                              uint64_t text_bytes, hl_error *err);
/* The tokens put from now on begin a new document (nothing when none were
 * put since the last start, so no document is empty). */
hl_status hl_token_writer_end_document(hl_token_writer *w, hl_error *err);
/* Tokens written so far. */
uint64_t hl_token_writer_count(const hl_token_writer *w);
/* Writes the index and the counts and flushes the file to disk, not yet in
 * place: two files that belong together (train.tok, val.tok) are both
 * finished before either is committed. On failure w is left to abort. */
hl_status hl_token_writer_finish(hl_token_writer *w, hl_error *err);
/* Finishes w (unless finished) and renames the file into place; frees w
 * either way. */
hl_status hl_token_writer_commit(hl_token_writer *w, hl_error *err);
/* Removes the temporary file and frees w. */
void hl_token_writer_abort(hl_token_writer *w);

#endif
