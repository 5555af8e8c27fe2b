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

static int combining_class(utf8proc_int32_t cp)
{
    return utf8proc_get_property(cp)->combining_class;
}

/* Room for one code point's canonical decomposition: Unicode's longest has
 * 4 code points. */
enum { PARTS = 8 };

/* cp's canonical decomposition into parts (room for PARTS): how many code
 * points, or 0 when it would need more room. */
static int decompose(utf8proc_int32_t cp, utf8proc_int32_t *parts)
{
    int boundclass = 0;
    const utf8proc_ssize_t k =
        utf8proc_decompose_char(cp, parts, PARTS, UTF8PROC_DECOMPOSE, &boundclass);
    return k > 0 && k <= PARTS ? (int)k : 0;
}

/* Decomposed code point cp continues a run of non-starters (combining
 * class above 0) of length *run, or ends it: *run as it stands after cp. A
 * code point of class 0 may still decompose into non-starters (U+0F73 into
 * U+0F71 U+0F72) or end with some (U+00E9 into e U+0301). */
static void count_marks(utf8proc_int32_t cp, size_t *run)
{
    if (cp < 0x300) { /* nothing below U+0300 combines or decomposes into marks */
        *run = 0;
        return;
    }
    const utf8proc_property_t *p = utf8proc_get_property(cp);
    if (p->combining_class) {
        ++*run;
        return;
    }
    utf8proc_int32_t parts[PARTS];
    const int k = p->decomp_seqindex != UINT16_MAX && !p->decomp_type ? decompose(cp, parts) : 0;
    if (!k)
        *run = 0;
    for (int j = 0; j < k; j++)
        *run = combining_class(parts[j]) ? *run + 1 : 0;
}

/* Where the piece that starts at text[i] ends: at a byte that is not UTF-8,
 * or at an ASCII byte once the piece holds PIECE_BYTES. NFC neither reorders
 * nor composes across an ASCII character (a starter that is never the second
 * of a composition pair), so the pieces composed apart make the text's NFC.
 * *marks: the longest run of non-starters in it once decomposed. */
static size_t piece_end(const unsigned char *text, size_t n, size_t i, size_t *marks)
{
    const size_t start = i;
    size_t run = 0;
    *marks = 0;
    while (i < n && !(text[i] < 0x80 && i - start >= PIECE_BYTES)) {
        utf8proc_int32_t cp;
        const utf8proc_ssize_t k = utf8proc_iterate(text + i, (utf8proc_ssize_t)(n - i), &cp);
        if (k <= 0)
            break;
        count_marks(cp, &run);
        if (run > *marks)
            *marks = run;
        i += (size_t)k;
    }
    return i;
}

/* utf8proc puts the non-starters after each starter in order by a gnome
 * sort, quadratic in a run's length: 32,000 marks of class 230 then 32,000
 * of class 220 (128 KB) took 15.6 s. A piece with a run longer than this is
 * decomposed here, its runs sorted (stably, by class, as NFC orders them),
 * and only composed by utf8proc. A piece whose runs are all shorter is
 * left to utf8proc, whose sort of them costs a bounded amount a code point
 * (the runs are counted after decomposition, as utf8proc sorts them). */
enum { MARKS_SORTED_BY_UTF8PROC = 32 };

typedef struct {
    utf8proc_int32_t cp;
    utf8proc_uint8_t ccc; /* canonical combining class */
    size_t at;            /* place in the run, so that the sort is stable */
} mark;

static int mark_order(const void *a, const void *b)
{
    const mark *x = a, *y = b;
    if (x->ccc != y->ccc)
        return x->ccc < y->ccc ? -1 : 1;
    return x->at < y->at ? -1 : x->at > y->at;
}

/* The run cp[0..n) of non-starters put in order by class, stably (NFC's
 * canonical ordering); marks has room for n. */
static void sort_run(utf8proc_int32_t *cp, size_t n, mark *marks)
{
    for (size_t i = 0; i < n; i++)
        marks[i] = (mark){.cp = cp[i], .ccc = (utf8proc_uint8_t)combining_class(cp[i]), .at = i};
    qsort(marks, n, sizeof *marks, mark_order);
    for (size_t i = 0; i < n; i++)
        cp[i] = marks[i].cp;
}

/* The piece's canonical decomposition into *out (malloc'd, *count code
 * points) with every run of non-starters in order. false out of memory, or
 * (*count 0) when a code point decomposes into more than utf8proc is asked
 * to write, which Unicode's data does not have. The piece is valid UTF-8. */
static bool decompose_sorted(const unsigned char *text, size_t n, utf8proc_int32_t **out,
                             size_t *count)
{
    size_t cap = n + PARTS, len = 0, run_cap = 0;
    utf8proc_int32_t *cp = malloc(cap * sizeof *cp);
    mark *marks = NULL;
    bool ok = cp != NULL;
    *count = 0;
    for (size_t i = 0; ok && i < n;) {
        utf8proc_int32_t c;
        i += (size_t)utf8proc_iterate(text + i, (utf8proc_ssize_t)(n - i), &c);
        if (cap - len < PARTS) {
            utf8proc_int32_t *grown = realloc(cp, 2 * cap * sizeof *cp);
            if (!(ok = grown != NULL))
                break;
            cp = grown;
            cap *= 2;
        }
        const int k = decompose(c, cp + len);
        if (!k) {
            free(cp);
            return true; /* *count 0: composed by utf8proc alone */
        }
        len += (size_t)k;
    }
    for (size_t i = 0; ok && i < len;) {
        size_t end = i + 1; /* cp[i..end): a starter, or a run of non-starters */
        if (combining_class(cp[i])) {
            while (end < len && combining_class(cp[end]))
                end++;
            if (end - i > run_cap) {
                free(marks);
                run_cap = end - i;
                ok = (marks = malloc(run_cap * sizeof *marks)) != NULL;
            }
            if (ok)
                sort_run(cp + i, end - i, marks);
        }
        i = end;
    }
    free(marks);
    if (!ok) {
        free(cp);
        return false;
    }
    *out = cp;
    *count = len;
    return true;
}

/* The NFC of one piece of valid UTF-8, appended to b. */
static bool compose_piece(buffer *b, const unsigned char *text, size_t n, size_t marks)
{
    if (marks > MARKS_SORTED_BY_UTF8PROC) {
        utf8proc_int32_t *cp;
        size_t count;
        if (!decompose_sorted(text, n, &cp, &count))
            return false;
        if (count > 0) {
            /* Composes the code points, in order already, and writes them
             * as UTF-8 over the same buffer (what utf8proc_map does after
             * its own decomposition). */
            const utf8proc_ssize_t len =
                utf8proc_reencode(cp, (utf8proc_ssize_t)count, UTF8PROC_STABLE | UTF8PROC_COMPOSE);
            const bool ok = len >= 0 && append(b, (const unsigned char *)cp, (size_t)len);
            free(cp);
            return ok;
        }
    }
    utf8proc_uint8_t *composed = NULL;
    const utf8proc_ssize_t len =
        utf8proc_map(text, (utf8proc_ssize_t)n, &composed, UTF8PROC_STABLE | UTF8PROC_COMPOSE);
    const bool ok = len >= 0 && append(b, composed, (size_t)len);
    free(composed);
    return ok;
}

bool hl_pretrained_normalize(const unsigned char *text, size_t n, unsigned char **out,
                             size_t *out_len)
{
    /* Hugging Face reads text as a Rust string, always valid UTF-8; here a
     * byte outside it is kept, and the runs between such bytes composed. */
    buffer b = {.data = malloc(n + 1), .cap = n + 1}; /* NFC seldom grows a text */
    bool ok = b.data != NULL;
    for (size_t i = 0; ok && i < n;) {
        size_t marks;
        const size_t end = piece_end(text, n, i, &marks);
        if (end == i) { /* an invalid byte */
            ok = append(&b, text + i, 1);
            i++;
            continue;
        }
        ok = compose_piece(&b, text + i, end - i, marks);
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
