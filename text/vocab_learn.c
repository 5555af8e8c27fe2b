/* Learning a vocabulary: the most frequent words of a text (vocab.h). */
#include "text/vocab.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "text/hash.h"

typedef struct {
    const unsigned char *word; /* into the text; NULL for an empty slot */
    size_t len;
    size_t count;
} word_count;

typedef struct {
    word_count *slot;
    size_t n_slots, used; /* n_slots a power of two, kept at least twice used */
} word_table;

static word_count *find(word_table *t, const unsigned char *s, size_t len)
{
    size_t i = (size_t)hl_text_hash(s, len) & (t->n_slots - 1);
    while (t->slot[i].word && (t->slot[i].len != len || memcmp(t->slot[i].word, s, len) != 0))
        i = (i + 1) & (t->n_slots - 1);
    return &t->slot[i];
}

static bool grow(word_table *t)
{
    word_table bigger = {.slot = calloc(2 * t->n_slots, sizeof(word_count)),
                         .n_slots = 2 * t->n_slots, .used = t->used};
    if (!bigger.slot)
        return false;
    for (size_t i = 0; i < t->n_slots; i++)
        if (t->slot[i].word)
            *find(&bigger, t->slot[i].word, t->slot[i].len) = t->slot[i];
    free(t->slot);
    *t = bigger;
    return true;
}

/* Most frequent first; equal counts in byte order (shorter first on a tie of
 * the common prefix), so the vocabulary depends on the text alone. */
static int by_count(const void *pa, const void *pb)
{
    const word_count *a = pa, *b = pb;
    if (a->count != b->count)
        return a->count > b->count ? -1 : 1;
    const int c = memcmp(a->word, b->word, a->len < b->len ? a->len : b->len);
    return c ? c : (a->len > b->len) - (a->len < b->len);
}

hl_vocab *hl_vocab_learn(const unsigned char *text, size_t n, int size, hl_error *err)
{
    if (size <= HL_VOCAB_BYTES || size > HL_VOCAB_MAX) {
        hl_error_set(err, HL_ERR_ARG, "vocab: a learnt vocabulary has %d..%d tokens, not %d",
                     HL_VOCAB_BYTES + 1, HL_VOCAB_MAX, size);
        return NULL;
    }
    word_table t = {.slot = calloc(1024, sizeof(word_count)), .n_slots = 1024};
    bool ok = t.slot != NULL;
    for (size_t i = 0; ok && i < n;) {
        const size_t end = hl_vocab_next_word(text, n, i);
        const size_t len = end - i;
        if (len >= 2 && len <= HL_VOCAB_PIECE_MAX) {
            word_count *w = find(&t, text + i, len);
            if (!w->word) {
                *w = (word_count){.word = text + i, .len = len};
                if (++t.used * 2 > t.n_slots && !(ok = grow(&t)))
                    break;
                w = find(&t, text + i, len);
            }
            w->count++;
        }
        i = end;
    }
    /* The words, packed to the front of the table, then ranked. */
    size_t n_words = 0;
    for (size_t i = 0; ok && i < t.n_slots; i++)
        if (t.slot[i].word)
            t.slot[n_words++] = t.slot[i];
    const int keep = n_words < (size_t)(size - HL_VOCAB_BYTES) ? (int)n_words
                                                               : size - HL_VOCAB_BYTES;
    const unsigned char **pieces = ok ? malloc(sizeof *pieces * (size_t)(keep ? keep : 1)) : NULL;
    size_t *lens = ok ? malloc(sizeof *lens * (size_t)(keep ? keep : 1)) : NULL;
    hl_vocab *v = NULL;
    if (pieces && lens) {
        qsort(t.slot, n_words, sizeof *t.slot, by_count);
        for (int i = 0; i < keep; i++) {
            pieces[i] = t.slot[i].word;
            lens[i] = t.slot[i].len;
        }
        v = hl_vocab_from_pieces(pieces, lens, keep, err);
    } else {
        hl_error_set(err, HL_ERR_NOMEM, "vocab: out of memory counting the words of %zu bytes",
                     n);
    }
    free(pieces);
    free(lens);
    free(t.slot);
    return v;
}
