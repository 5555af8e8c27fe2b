/* Unicode NFC for pretrained vocabularies whose tokenizer.json normalizes
 * (see pretrained_impl.h), by utf8proc. */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "text/pretrained_impl.h"

typedef struct {
    unsigned char *data;
    size_t len, cap;
} buffer;

static bool append(buffer *b, const unsigned char *bytes, size_t n)
{
    if (n > b->cap - b->len) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap - b->len < n)
            cap *= 2;
        unsigned char *grown = realloc(b->data, cap);
        if (!grown)
            return false;
        b->data = grown;
        b->cap = cap;
    }
    memcpy(b->data + b->len, bytes, n);
    b->len += n;
    return true;
}

/* Bytes of valid UTF-8 after which a utf8proc_map call ends at the next
 * ASCII byte: it holds 4 bytes a code point, so a whole text at once would
 * take 4 times the text. (A text without ASCII, not even a newline, is still
 * composed in one call.) */
enum { PIECE_BYTES = 1 << 16 };

/* Where the piece that starts at text[i] ends: at a byte that is not UTF-8,
 * or at an ASCII byte once the piece holds PIECE_BYTES. NFC neither reorders
 * nor composes across an ASCII character (a starter that is never the second
 * of a composition pair), so the pieces composed apart make the text's NFC. */
static size_t piece_end(const unsigned char *text, size_t n, size_t i)
{
    const size_t start = i;
    while (i < n && !(text[i] < 0x80 && i - start >= PIECE_BYTES)) {
        utf8proc_int32_t cp;
        const utf8proc_ssize_t k = utf8proc_iterate(text + i, (utf8proc_ssize_t)(n - i), &cp);
        if (k <= 0)
            break;
        i += (size_t)k;
    }
    return i;
}

bool hl_pretrained_normalize(const unsigned char *text, size_t n, unsigned char **out,
                             size_t *out_len)
{
    /* Hugging Face reads text as a Rust string, always valid UTF-8; here a
     * byte outside it is kept, and the runs between such bytes composed. */
    buffer b = {.data = malloc(n + 1), .cap = n + 1}; /* NFC seldom grows a text */
    bool ok = b.data != NULL;
    for (size_t i = 0; ok && i < n;) {
        const size_t end = piece_end(text, n, i);
        if (end == i) { /* an invalid byte */
            ok = append(&b, text + i, 1);
            i++;
            continue;
        }
        utf8proc_uint8_t *composed = NULL;
        const utf8proc_ssize_t len = utf8proc_map(text + i, (utf8proc_ssize_t)(end - i),
                                                  &composed, UTF8PROC_STABLE | UTF8PROC_COMPOSE);
        ok = len >= 0 && append(&b, composed, (size_t)len);
        free(composed);
        i = end;
    }
    if (!ok) {
        free(b.data);
        return false;
    }
    *out = b.data;
    *out_len = b.len;
    return true;
}
