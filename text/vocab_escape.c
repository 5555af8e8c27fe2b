/* The escaping of the vocabulary's stored forms (vocab_impl.h), shared by
 * the words form (vocab_format.c) and the pretrained one
 * (pretrained_format.c). */
#include "text/vocab_impl.h"

#include <stdio.h>

char *hl_vocab_escape(char *at, const unsigned char *p, size_t len)
{
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
    return at;
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

long hl_vocab_unescape(const char *s, size_t len, size_t max, int line, unsigned char *out,
                       hl_error *err)
{
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        int hi, lo;
        if (c < 0x20 || c > 0x7e) {
            hl_error_set(err, HL_ERR_FORMAT, "vocab line %d: byte 0x%02x must be escaped", line,
                         c);
            return -1;
        }
        if (c == '\\') {
            const char next = i + 1 < len ? s[i + 1] : 0;
            if (next == '\\' || next == 'n') {
                c = next == 'n' ? '\n' : '\\';
                i++;
            } else if (next == 'x' && i + 3 < len && (hi = hex_value(s[i + 2])) >= 0 &&
                       (lo = hex_value(s[i + 3])) >= 0) {
                c = (unsigned char)(hi * 16 + lo);
                i += 3;
            } else {
                hl_error_set(err, HL_ERR_FORMAT,
                             "vocab line %d: a backslash must begin \\\\, \\n or \\xNN", line);
                return -1;
            }
        }
        if (n == max) {
            hl_error_set(err, HL_ERR_FORMAT, "vocab line %d: a piece longer than %zu bytes",
                         line, max);
            return -1;
        }
        out[n++] = c;
    }
    return (long)n;
}
