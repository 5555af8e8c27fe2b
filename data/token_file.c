/* Reading token files by memory-mapping them: see token_file.h. */
#define _DEFAULT_SOURCE /* madvise */
#include "data/token_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct hl_token_file {
    char *path;
    const unsigned char *map; /* the whole file, read-only */
    size_t map_size;
    hl_token_header h;
    hl_vocab *vocab;
    uint64_t fingerprint;
    uint64_t *docs; /* the document starts */
    size_t n_docs;
};

enum { FINGERPRINT_ENDS = 1 << 16 }; /* bytes of tokens hashed at each end */

static uint64_t fnv1a(uint64_t h, const unsigned char *s, size_t len)
{
    for (size_t i = 0; i < len; i++)
        h = (h ^ s[i]) * 1099511628211u;
    return h;
}

#define FNV_START 1469598103934665603u

uint64_t hl_token_vocab_hash(const char *s, size_t len)
{
    return fnv1a(FNV_START, (const unsigned char *)s, len);
}

static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t le64(const unsigned char *p)
{
    return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

int hl_token_magic(const unsigned char *bytes, size_t size)
{
    return size >= 8 && memcmp(bytes, HL_TOKEN_MAGIC "\0\0\0", 8) == 0;
}

hl_status hl_token_header_parse(const unsigned char *b, size_t size, uint64_t file_size,
                                const char *name, hl_token_header *h, hl_vocab **vocab,
                                hl_error *err)
{
    if (vocab)
        *vocab = NULL;
    if (size < HL_TOKEN_HEADER || file_size < HL_TOKEN_HEADER)
        return hl_error_set(err, HL_ERR_FORMAT, "%s: %llu bytes, shorter than a token file's "
                            "%d-byte header (truncated?)", name,
                            (unsigned long long)file_size, HL_TOKEN_HEADER);
    if (!hl_token_magic(b, size))
        return hl_error_set(err, HL_ERR_FORMAT, "%s: not a token file (no \"%s\" magic)", name,
                            HL_TOKEN_MAGIC);
    *h = (hl_token_header){.version = le32(b + 8), .width = le32(b + 12),
                           .n_tokens = le64(b + 16), .vocab_size = le32(b + 24),
                           .vocab_hash = le64(b + 32), .vocab_len = le64(b + 40),
                           .text_bytes = le64(b + 48)};
    if (h->version != 1 && h->version != HL_TOKEN_VERSION)
        return hl_error_set(err, HL_ERR_FORMAT, "%s: token file version %u; this build reads "
                            "versions 1 and %d", name, h->version, HL_TOKEN_VERSION);
    if (h->width != 2 && h->width != 4)
        return hl_error_set(err, HL_ERR_FORMAT, "%s: token width %u bytes (2 or 4)", name,
                            h->width);
    if (h->vocab_size < HL_VOCAB_BYTES || h->vocab_size > HL_VOCAB_MAX)
        return hl_error_set(err, HL_ERR_FORMAT, "%s: vocabulary size %u (%d..%d)", name,
                            h->vocab_size, HL_VOCAB_BYTES, HL_VOCAB_MAX);
    if (h->width == 2 && h->vocab_size > 65536)
        return hl_error_set(err, HL_ERR_FORMAT, "%s: 2-byte tokens for a vocabulary of %u",
                            name, h->vocab_size);
    h->n_docs = le64(b + 56);
    if (le32(b + 28) != 0 || (h->version == 1 && h->n_docs != 0))
        return hl_error_set(err, HL_ERR_FORMAT, "%s: reserved header bytes are not zero", name);
    /* The sizes, compared without overflow: each must fit what follows it. */
    if (h->vocab_len == 0 || h->vocab_len > file_size - HL_TOKEN_HEADER)
        return hl_error_set(err, HL_ERR_FORMAT, "%s: a vocabulary of %llu bytes in a file of "
                            "%llu (truncated?)", name, (unsigned long long)h->vocab_len,
                            (unsigned long long)file_size);
    h->tokens_at = (HL_TOKEN_HEADER + h->vocab_len + HL_TOKEN_ALIGN - 1) / HL_TOKEN_ALIGN *
                   HL_TOKEN_ALIGN;
    const uint64_t room = file_size >= h->tokens_at ? file_size - h->tokens_at : 0;
    /* Version 2's index follows the tokens directly (read byte by byte): a
     * padding there would let a token count one too large pass. */
    h->docs_at = h->tokens_at + h->n_tokens * h->width;
    if (file_size < h->tokens_at || h->n_tokens > room / h->width ||
        h->n_docs > (room - h->n_tokens * h->width) / 8 ||
        h->docs_at + 8 * h->n_docs != file_size)
        return hl_error_set(err, HL_ERR_FORMAT, "%s: %llu bytes, but the header says %llu "
                            "tokens of %u bytes after %llu bytes and %llu documents "
                            "(truncated or padded?)", name,
                            (unsigned long long)file_size, (unsigned long long)h->n_tokens,
                            h->width, (unsigned long long)h->tokens_at,
                            (unsigned long long)h->n_docs);
    if (h->version != 1 && (h->n_docs == 0) != (h->n_tokens == 0))
        return hl_error_set(err, HL_ERR_FORMAT, "%s: %llu documents for %llu tokens", name,
                            (unsigned long long)h->n_docs, (unsigned long long)h->n_tokens);
    if (size < h->tokens_at)
        return hl_error_set(err, HL_ERR_FORMAT, "%s: the header and vocabulary are cut short",
                            name);
    const char *text = (const char *)b + HL_TOKEN_HEADER;
    if (memchr(text, 0, h->vocab_len))
        return hl_error_set(err, HL_ERR_FORMAT, "%s: a NUL byte in the vocabulary", name);
    if (hl_token_vocab_hash(text, h->vocab_len) != h->vocab_hash)
        return hl_error_set(err, HL_ERR_FORMAT, "%s: the vocabulary does not match its hash "
                            "(corrupted)", name);
    for (uint64_t i = HL_TOKEN_HEADER + h->vocab_len; i < h->tokens_at; i++)
        if (b[i])
            return hl_error_set(err, HL_ERR_FORMAT, "%s: padding before the tokens is not zero",
                                name);
    char *copy = malloc(h->vocab_len + 1);
    if (!copy)
        return hl_error_set(err, HL_ERR_NOMEM, "%s: out of memory", name);
    memcpy(copy, text, h->vocab_len);
    copy[h->vocab_len] = 0;
    hl_error local = {0};
    hl_vocab *v = hl_vocab_parse(copy, &local);
    free(copy);
    if (!v)
        return hl_error_set(err, local.status, "%s: %s", name, local.message);
    if ((uint32_t)hl_vocab_size(v) != h->vocab_size) {
        const int got = hl_vocab_size(v);
        hl_vocab_free(v);
        return hl_error_set(err, HL_ERR_FORMAT, "%s: the header says %u tokens but the "
                            "vocabulary has %d", name, h->vocab_size, got);
    }
    if (vocab)
        *vocab = v;
    else
        hl_vocab_free(v);
    return HL_OK;
}

/* The document index of f's mapping into f->docs: {0} for a version-1 file
 * with tokens; each start checked (ascending, the first 0, inside the tokens). */
static hl_status read_docs(hl_token_file *f, hl_error *err)
{
    const hl_token_header *h = &f->h;
    f->n_docs = h->version == 1 ? h->n_tokens > 0 : (size_t)h->n_docs;
    f->docs = malloc((f->n_docs ? f->n_docs : 1) * sizeof *f->docs);
    if (!f->docs)
        return hl_error_set(err, HL_ERR_NOMEM, "%s: out of memory", f->path);
    if (h->version == 1) {
        f->docs[0] = 0;
        return HL_OK;
    }
    for (size_t i = 0; i < f->n_docs; i++) {
        f->docs[i] = le64(f->map + h->docs_at + 8 * i);
        if (i == 0 ? f->docs[i] != 0 : f->docs[i] <= f->docs[i - 1] || f->docs[i] >= h->n_tokens)
            return hl_error_set(err, HL_ERR_FORMAT, "%s: document %zu starts at token %llu "
                                "(the starts must ascend from 0 and lie below %llu)", f->path,
                                i, (unsigned long long)f->docs[i],
                                (unsigned long long)h->n_tokens);
    }
    return HL_OK;
}

hl_token_file *hl_token_file_open(const char *path, hl_error *err)
{
    hl_token_file *f = calloc(1, sizeof *f);
    if (!f || !(f->path = malloc(strlen(path) + 1))) {
        free(f);
        hl_error_set(err, HL_ERR_NOMEM, "%s: out of memory", path);
        return NULL;
    }
    strcpy(f->path, path);
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        hl_error_set(err, HL_ERR_IO, "cannot open %s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        hl_token_file_close(f);
        return NULL;
    }
    if (!S_ISREG(st.st_mode) || st.st_size < HL_TOKEN_HEADER) {
        hl_error_set(err, HL_ERR_FORMAT, "%s: %s", path,
                     S_ISREG(st.st_mode) ? "shorter than a token file's header (truncated?)"
                                         : "not a regular file");
        close(fd);
        hl_token_file_close(f);
        return NULL;
    }
    f->map_size = (size_t)st.st_size;
    void *map = mmap(NULL, f->map_size, PROT_READ, MAP_SHARED, fd, 0);
    close(fd); /* the mapping keeps the file */
    if (map == MAP_FAILED) {
        f->map_size = 0;
        hl_error_set(err, HL_ERR_IO, "cannot map %s: %s", path, strerror(errno));
        hl_token_file_close(f);
        return NULL;
    }
    f->map = map;
    /* Windows are drawn at random: read-ahead would only fill memory. */
    madvise(map, f->map_size, MADV_RANDOM);
    if (hl_token_header_parse(f->map, f->map_size, f->map_size, path, &f->h, &f->vocab, err) !=
            HL_OK ||
        read_docs(f, err) != HL_OK) {
        hl_token_file_close(f);
        return NULL;
    }
    const uint64_t bytes = f->h.n_tokens * f->h.width;
    const uint64_t end = bytes < FINGERPRINT_ENDS ? bytes : FINGERPRINT_ENDS;
    const unsigned char *tokens_end = f->map + f->h.tokens_at + bytes;
    uint64_t h = fnv1a(FNV_START, f->map, f->h.tokens_at);
    h = fnv1a(h, f->map + f->h.tokens_at, end);
    f->fingerprint = fnv1a(h, tokens_end - end, end);
    return f;
}

void hl_token_file_close(hl_token_file *f)
{
    if (!f)
        return;
    if (f->map)
        munmap((void *)f->map, f->map_size);
    hl_vocab_free(f->vocab);
    free(f->docs);
    free(f->path);
    free(f);
}

const char *hl_token_file_path(const hl_token_file *f) { return f->path; }
const hl_token_header *hl_token_file_header(const hl_token_file *f) { return &f->h; }
const hl_vocab *hl_token_file_vocab(const hl_token_file *f) { return f->vocab; }
uint64_t hl_token_file_fingerprint(const hl_token_file *f) { return f->fingerprint; }

const uint64_t *hl_token_file_docs(const hl_token_file *f, size_t *n)
{
    *n = f->n_docs;
    return f->docs;
}

hl_status hl_token_file_read(const hl_token_file *f, uint64_t at, size_t n, int32_t *out,
                             hl_error *err)
{
    if (at > f->h.n_tokens || n > f->h.n_tokens - at)
        return hl_error_set(err, HL_ERR_ARG, "%s: tokens %llu..%llu past its %llu", f->path,
                            (unsigned long long)at, (unsigned long long)(at + n),
                            (unsigned long long)f->h.n_tokens);
    const unsigned char *p = f->map + f->h.tokens_at + at * f->h.width;
    if (f->h.width == 2)
        for (size_t i = 0; i < n; i++)
            out[i] = (int32_t)((uint32_t)p[2 * i] | (uint32_t)p[2 * i + 1] << 8);
    else
        for (size_t i = 0; i < n; i++)
            out[i] = (int32_t)le32(p + 4 * i);
    /* The window's pages leave this process's resident set (they stay in the
     * page cache), so its memory does not grow with the windows it has read. */
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    const size_t first = (size_t)(p - f->map) / page * page;
    const size_t last = (size_t)(p + n * f->h.width - f->map);
    madvise((void *)(f->map + first), last - first, MADV_DONTNEED);
    for (size_t i = 0; i < n; i++)
        if ((uint32_t)out[i] >= f->h.vocab_size)
            return hl_error_set(err, HL_ERR_FORMAT, "%s: token %llu is %u, not below the "
                                "vocabulary size %u", f->path, (unsigned long long)(at + i),
                                (uint32_t)out[i], f->h.vocab_size);
    return HL_OK;
}
