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
        return hl_pretrained_format(v);
    if (v->merge)
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
        for (size_t i = 0; i < len; i++) {
            if (p[i] == '\\')
                at += sprintf(at, "\\\\");
            else if (p[i] == '\n')
                at += sprintf(at, "\\n");
            else if (p[i] < 0x20 || p[i] > 0x7e)
                at += sprintf(at, "\\x%02x", p[i]);
            else
                *at++ = (char)p[i];
        }
    }
    *at = 0;
    return s;
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* One line's piece, unescaped into out (room for the line's length); its
 * length, or -1 with the reason in err. */
static long unescape_line(const char *line, size_t line_len, int line_no, unsigned char *out,
                          hl_error *err)
{
    size_t n = 0;
    for (size_t i = 0; i < line_len; i++) {
        unsigned char c = (unsigned char)line[i];
        if (c < 0x20 || c > 0x7e) {
            hl_error_set(err, HL_ERR_FORMAT, "vocab line %d: byte 0x%02x must be escaped",
                         line_no, c);
            return -1;
        }
        if (c == '\\') {
            const char next = i + 1 < line_len ? line[i + 1] : 0;
            int hi, lo;
            if (next == '\\' || next == 'n') {
                c = next == 'n' ? '\n' : '\\';
                i++;
            } else if (next == 'x' && i + 3 < line_len && (hi = hex_value(line[i + 2])) >= 0 &&
                       (lo = hex_value(line[i + 3])) >= 0) {
                c = (unsigned char)(hi * 16 + lo);
                i += 3;
            } else {
                hl_error_set(err, HL_ERR_FORMAT,
                             "vocab line %d: a backslash must begin \\\\, \\n or \\xNN", line_no);
                return -1;
            }
        }
        if (n == HL_VOCAB_PIECE_MAX) {
            hl_error_set(err, HL_ERR_FORMAT, "vocab line %d: a piece longer than %d bytes",
                         line_no, HL_VOCAB_PIECE_MAX);
            return -1;
        }
        out[n++] = c;
    }
    return (long)n;
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
        const long len = unescape_line(line, line_len, line_no, out, err);
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
