/* Writing token files as a stream: see token_file.h. */
#include "data/token_file.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "files/atomic.h"

enum { BUFFER_TOKENS = 1 << 16 }; /* tokens converted to the file's width per write */

struct hl_token_writer {
    hl_atomic_file out;
    hl_token_header h;
    uint64_t *docs;       /* the document starts so far */
    size_t n_docs, cap_docs;
    bool finished;        /* index and header written, nothing more to put */
    unsigned char buf[BUFFER_TOKENS * 4];
};

static void put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static void put64(unsigned char *p, uint64_t v)
{
    put32(p, (uint32_t)v);
    put32(p + 4, (uint32_t)(v >> 32));
}

static void header_bytes(const hl_token_header *h, unsigned char b[HL_TOKEN_HEADER])
{
    memset(b, 0, HL_TOKEN_HEADER);
    memcpy(b, HL_TOKEN_MAGIC, strlen(HL_TOKEN_MAGIC));
    put32(b + 8, h->version);
    put32(b + 12, h->width);
    put64(b + 16, h->n_tokens);
    put32(b + 24, h->vocab_size);
    put64(b + 32, h->vocab_hash);
    put64(b + 40, h->vocab_len);
    put64(b + 48, h->text_bytes);
    put64(b + 56, h->n_docs);
}

hl_token_writer *hl_token_writer_begin(const char *path, const hl_vocab *v, hl_error *err)
{
    hl_token_writer *w = calloc(1, sizeof *w);
    char *text = hl_vocab_format(v);
    if (!w || !text) {
        free(w);
        free(text);
        hl_error_set(err, HL_ERR_NOMEM, "%s: out of memory", path);
        return NULL;
    }
    const size_t len = strlen(text);
    const uint32_t size = (uint32_t)hl_vocab_size(v);
    w->h = (hl_token_header){.version = HL_TOKEN_VERSION, .width = size <= 65536 ? 2 : 4,
                             .vocab_size = size, .vocab_len = len,
                             .vocab_hash = hl_token_vocab_hash(text, len),
                             .tokens_at = (HL_TOKEN_HEADER + len + HL_TOKEN_ALIGN - 1) /
                                          HL_TOKEN_ALIGN * HL_TOKEN_ALIGN};
    if (hl_atomic_begin(&w->out, path, err) != HL_OK) {
        free(text);
        free(w);
        return NULL;
    }
    unsigned char header[HL_TOKEN_HEADER];
    static const unsigned char zeros[HL_TOKEN_ALIGN];
    header_bytes(&w->h, header);
    fwrite(header, 1, sizeof header, w->out.f);
    fwrite(text, 1, len, w->out.f);
    fwrite(zeros, 1, w->h.tokens_at - HL_TOKEN_HEADER - len, w->out.f);
    free(text);
    return w;
}

/* Records a document starting at the next token, unless one already does. */
static hl_status start_document(hl_token_writer *w, hl_error *err)
{
    if (w->n_docs && w->docs[w->n_docs - 1] == w->h.n_tokens)
        return HL_OK;
    if (w->n_docs == w->cap_docs) {
        const size_t cap = w->cap_docs ? 2 * w->cap_docs : 64;
        uint64_t *grown = realloc(w->docs, cap * sizeof *grown);
        if (!grown)
            return hl_error_set(err, HL_ERR_NOMEM, "%s: out of memory", w->out.path);
        w->docs = grown;
        w->cap_docs = cap;
    }
    w->docs[w->n_docs++] = w->h.n_tokens;
    return HL_OK;
}

hl_status hl_token_writer_end_document(hl_token_writer *w, hl_error *err)
{
    return w->n_docs && w->docs[w->n_docs - 1] < w->h.n_tokens ? start_document(w, err) : HL_OK;
}

hl_status hl_token_writer_put(hl_token_writer *w, const int32_t *tokens, size_t n,
                              uint64_t text_bytes, hl_error *err)
{
    for (size_t i = 0; i < n; i++)
        if ((uint32_t)tokens[i] >= w->h.vocab_size)
            return hl_error_set(err, HL_ERR_ARG, "%s: token %d is outside the vocabulary of %u",
                                w->out.path, tokens[i], w->h.vocab_size);
    if (n && !w->n_docs && start_document(w, err) != HL_OK) /* the first document */
        return err->status;
    for (size_t done = 0; done < n;) {
        const size_t k = n - done < BUFFER_TOKENS ? n - done : BUFFER_TOKENS;
        for (size_t i = 0; i < k; i++) {
            const uint32_t t = (uint32_t)tokens[done + i];
            if (w->h.width == 2) {
                w->buf[2 * i] = (unsigned char)t;
                w->buf[2 * i + 1] = (unsigned char)(t >> 8);
            } else {
                put32(w->buf + 4 * i, t);
            }
        }
        fwrite(w->buf, w->h.width, k, w->out.f);
        done += k;
    }
    w->h.n_tokens += n;
    w->h.text_bytes += text_bytes;
    return HL_OK;
}

uint64_t hl_token_writer_count(const hl_token_writer *w) { return w->h.n_tokens; }

hl_status hl_token_writer_finish(hl_token_writer *w, hl_error *err)
{
    if (w->finished)
        return HL_OK;
    /* The index after the tokens: a start at the very end began no document. */
    if (w->n_docs && w->docs[w->n_docs - 1] == w->h.n_tokens)
        w->n_docs--;
    for (size_t i = 0; i < w->n_docs; i++) {
        unsigned char start[8];
        put64(start, w->docs[i]);
        fwrite(start, 1, sizeof start, w->out.f);
    }
    w->h.n_docs = w->n_docs;
    unsigned char header[HL_TOKEN_HEADER];
    header_bytes(&w->h, header);
    /* fseek writes out what is buffered: its failure is often the disk's. */
    if (fseek(w->out.f, 0, SEEK_SET) != 0)
        return hl_error_set(err, HL_ERR_IO, "cannot write %s: %s", w->out.path,
                            strerror(errno));
    /* A failed write shows in the stream's error flag, which the flush
     * checks. */
    fwrite(header, 1, sizeof header, w->out.f);
    if (hl_atomic_flush(&w->out, err) != HL_OK)
        return err->status;
    w->finished = true;
    return HL_OK;
}

hl_status hl_token_writer_commit(hl_token_writer *w, hl_error *err)
{
    if (hl_token_writer_finish(w, err) != HL_OK) {
        hl_token_writer_abort(w);
        return err->status;
    }
    const hl_status st = hl_atomic_commit(&w->out, err);
    free(w->docs);
    free(w);
    return st;
}

void hl_token_writer_abort(hl_token_writer *w)
{
    if (!w)
        return;
    hl_atomic_abort(&w->out);
    free(w->docs);
    free(w);
}
