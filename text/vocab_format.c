/* A vocabulary as one printable string and back, to store with a model
 * (vocab.h). */
#include "text/pretrained_impl.h"
#include "text/vocab_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HEADER "headlab-words-1"

char *hl_vocab_format(const hl_vocab *v)
{
    if (v->pretrained)
        return hl_pretrained_format(v, true);
    /* Without a merge BPE is the bytes, and is stored as they are (a model
     * stores no vocabulary of 256 tokens, and a token file's must match). */
    if (v->merge && hl_vocab_size(v) > HL_VOCAB_BYTES)
        return hl_bpe_format(v);
    const int size = hl_vocab_size(v);
    size_t room = sizeof HEADER, len;
    for (int t = HL_VOCAB_BYTES; t < size; t++) {
        hl_vocab_piece(v, t, &len);
        room += 4 * len + 1; /* every byte escaped at worst, and the newline */
    }
    char *s = malloc(room), *at = s;
    if (!s)
        return NULL;
    at += sprintf(at, "%s", HEADER);
    for (int t = HL_VOCAB_BYTES; t < size; t++) {
        const unsigned char *p = hl_vocab_piece(v, t, &len);
        *at++ = '\n';
        at = hl_vocab_escape(at, p, len);
    }
    *at = 0;
    return s;
}

hl_vocab *hl_vocab_parse(const char *s, hl_error *err)
{
    const size_t pre_len = strlen(HL_PRETRAINED_HEADER);
    if (strncmp(s, HL_PRETRAINED_HEADER, pre_len) == 0 && (!s[pre_len] || s[pre_len] == '\n'))
        return hl_pretrained_parse(s, err);
    const size_t bpe_len = strlen(HL_BPE_HEADER);
    if (strncmp(s, HL_BPE_HEADER, bpe_len) == 0 && (!s[bpe_len] || s[bpe_len] == '\n'))
        return hl_bpe_parse(s, err);
    const size_t header_len = strlen(HEADER);
    if (strncmp(s, HEADER, header_len) != 0 || (s[header_len] && s[header_len] != '\n')) {
        hl_error_set(err, HL_ERR_FORMAT, "vocab: does not begin with \"%s\", \"%s\" or "
                     "\"%s\"", HEADER, HL_BPE_HEADER, HL_PRETRAINED_HEADER);
        return NULL;
    }
    size_t n = 0;
    for (const char *c = s + header_len; *c; c++)
        n += *c == '\n';
    if (n > HL_VOCAB_MAX - HL_VOCAB_BYTES) {
        hl_error_set(err, HL_ERR_FORMAT, "vocab: %zu pieces; at most %d fit", n,
                     HL_VOCAB_MAX - HL_VOCAB_BYTES);
        return NULL;
    }
    /* Unescaped, a piece is never longer than its line. */
    unsigned char *bytes = malloc(strlen(s) + 1);
    const unsigned char **pieces = malloc(sizeof *pieces * (n + 1));
    size_t *lens = malloc(sizeof *lens * (n + 1));
    hl_vocab *v = NULL;
    if (!bytes || !pieces || !lens) {
        hl_error_set(err, HL_ERR_NOMEM, "vocab: out of memory");
        goto done;
    }
    const char *line = s + header_len;
    for (size_t i = 0; i < n; i++) {
        line++; /* past the newline */
        const char *end = strchr(line, '\n');
        const size_t line_len = end ? (size_t)(end - line) : strlen(line);
        const int line_no = (int)i + 2;
        unsigned char *out = bytes + (line - s);
        const long len =
            hl_vocab_unescape(line, line_len, HL_VOCAB_PIECE_MAX, line_no, out, err);
        if (len < 0)
            goto done;
        if (len < 2) {
            hl_error_set(err, HL_ERR_FORMAT,
                         "vocab line %d: a piece of %ld byte(s); pieces have 2..%d", line_no,
                         len, HL_VOCAB_PIECE_MAX);
            goto done;
        }
        pieces[i] = out;
        lens[i] = (size_t)len;
        line += line_len;
    }
    hl_error local = {0};
    v = hl_vocab_from_pieces(pieces, lens, (int)n, &local);
    if (!v)
        hl_error_set(err, local.status == HL_ERR_NOMEM ? HL_ERR_NOMEM : HL_ERR_FORMAT, "%s",
                     local.message);
done:
    free(bytes);
    free(pieces);
    free(lens);
    return v;
}
