/* Learning byte-level BPE merges from a text (vocab.h).
 *
 * The text's distinct chunks are counted once; each is then a word: its
 * tokens and its count. Every adjacent pair of tokens has a count (summed
 * over the words, times their counts) and the list of words it occurs in.
 * A merge rewrites only the words on its pair's list, and updates the counts
 * of the pairs around each occurrence. The next merge comes from a lazy max
 * heap: counts of old pairs only fall (a merge adds only pairs with its new
 * token), so an entry whose count has fallen is pushed again with the count
 * it has now, and the first entry popped with its true count is the best. */
#include <stdlib.h>
#include <string.h>

#include "text/hash.h"
#include "text/vocab_impl.h"

typedef struct {
    int32_t *tok;
    size_t len;
    int64_t count; /* of the chunk in the text */
    int32_t seen;  /* the last merge that rewrote it */
} word;

typedef struct {
    uint64_t key; /* left << 32 | right; EMPTY_KEY for an empty slot */
    int64_t count;
    int32_t *words; /* the words it occurs in (may repeat a word, or name one it left) */
    size_t n_words, cap_words;
} pair_entry;

#define EMPTY_KEY UINT64_MAX

typedef struct {
    pair_entry *slot;
    size_t n_slots, used; /* n_slots a power of two, kept at least twice used */
} pair_table;

typedef struct {
    int64_t count;
    int32_t left, right;
} candidate;

typedef struct {
    candidate *at;
    size_t n, cap;
} max_heap;

typedef struct {
    word *words;
    size_t n_words;
    pair_table pairs;
    max_heap heap;
    size_t *len;     /* (size): each token's piece length */
    uint64_t *fresh; /* pairs with the new token, pushed after its merge */
    size_t n_fresh, cap_fresh;
    bool ok;         /* false once an allocation failed */
} learner;

static uint64_t pair_key(int32_t left, int32_t right)
{
    return (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
}

static pair_entry *pair_find(const pair_table *t, uint64_t key)
{
    size_t i = (size_t)((key * 0x9e3779b97f4a7c15u) >> 17) & (t->n_slots - 1);
    while (t->slot[i].key != EMPTY_KEY && t->slot[i].key != key)
        i = (i + 1) & (t->n_slots - 1);
    return &t->slot[i];
}

static pair_entry *pair_table_new_slots(size_t n)
{
    pair_entry *slot = malloc(sizeof *slot * n);
    for (size_t i = 0; slot && i < n; i++)
        slot[i] = (pair_entry){.key = EMPTY_KEY};
    return slot;
}

/* The pair's entry, added with a count of 0 when new; NULL when out of
 * memory. Pointers into the table are good until the next call. */
static pair_entry *pair_get(learner *l, uint64_t key)
{
    pair_table *t = &l->pairs;
    pair_entry *e = pair_find(t, key);
    if (e->key != EMPTY_KEY)
        return e;
    if ((t->used + 1) * 2 > t->n_slots) {
        pair_table bigger = {.slot = pair_table_new_slots(2 * t->n_slots),
                             .n_slots = 2 * t->n_slots, .used = t->used};
        if (!bigger.slot)
            return NULL;
        for (size_t i = 0; i < t->n_slots; i++)
            if (t->slot[i].key != EMPTY_KEY)
                *pair_find(&bigger, t->slot[i].key) = t->slot[i];
        free(t->slot);
        *t = bigger;
        e = pair_find(t, key);
    }
    t->used++;
    *e = (pair_entry){.key = key};
    return e;
}

/* Adds delta to the pair's count; a new occurrence (delta > 0) also lists
 * word w under the pair. */
static void pair_add(learner *l, int32_t left, int32_t right, int64_t delta, int32_t w)
{
    pair_entry *e = pair_get(l, pair_key(left, right));
    if (!e) {
        l->ok = false;
        return;
    }
    e->count += delta;
    if (delta <= 0 || (e->n_words && e->words[e->n_words - 1] == w))
        return;
    if (e->n_words == e->cap_words) {
        const size_t cap = e->cap_words ? 2 * e->cap_words : 4;
        int32_t *words = realloc(e->words, sizeof *words * cap);
        if (!words) {
            l->ok = false;
            return;
        }
        e->words = words;
        e->cap_words = cap;
    }
    e->words[e->n_words++] = w;
}

/* More frequent first; of equal counts the smaller (left, right). */
static bool before(const candidate *a, const candidate *b)
{
    if (a->count != b->count)
        return a->count > b->count;
    return a->left != b->left ? a->left < b->left : a->right < b->right;
}

/* Pairs whose piece would be over HL_VOCAB_PIECE_MAX bytes never enter. */
static void heap_push(learner *l, int32_t left, int32_t right, int64_t count)
{
    max_heap *h = &l->heap;
    if (l->len[left] + l->len[right] > HL_VOCAB_PIECE_MAX)
        return;
    if (h->n == h->cap) {
        const size_t cap = h->cap ? 2 * h->cap : 1024;
        candidate *at = realloc(h->at, sizeof *at * cap);
        if (!at) {
            l->ok = false;
            return;
        }
        h->at = at;
        h->cap = cap;
    }
    const candidate c = {count, left, right};
    size_t i = h->n++;
    for (; i > 0 && before(&c, &h->at[(i - 1) / 2]); i = (i - 1) / 2)
        h->at[i] = h->at[(i - 1) / 2];
    h->at[i] = c;
}

static candidate heap_pop(max_heap *h)
{
    const candidate top = h->at[0], last = h->at[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n)
            break;
        if (c + 1 < h->n && before(&h->at[c + 1], &h->at[c]))
            c++;
        if (!before(&h->at[c], &last))
            break;
        h->at[i] = h->at[c];
        i = c;
    }
    h->at[i] = last;
    return top;
}

/* A pair with token z, to push once z's merge is done. */
static void note_fresh(learner *l, int32_t left, int32_t right)
{
    if (l->n_fresh == l->cap_fresh) {
        const size_t cap = l->cap_fresh ? 2 * l->cap_fresh : 256;
        uint64_t *fresh = realloc(l->fresh, sizeof *fresh * cap);
        if (!fresh) {
            l->ok = false;
            return;
        }
        l->fresh = fresh;
        l->cap_fresh = cap;
    }
    l->fresh[l->n_fresh++] = pair_key(left, right);
}

/* Word w with every (a, b) replaced by z, left to right, and the counts of
 * the pairs around each replacement moved: x a b y loses (x,a), (a,b), (b,y)
 * and gains (x,z), (z,y). x is the token already written (a z when the
 * occurrence before was adjacent: "abab" gives "zz"), y the one not yet read. */
static void merge_word(learner *l, int32_t w, int32_t a, int32_t b, int32_t z)
{
    word *wd = &l->words[w];
    int32_t *t = wd->tok;
    const int64_t f = wd->count;
    size_t k = 0;
    for (size_t r = 0; r < wd->len;) {
        if (r + 1 < wd->len && t[r] == a && t[r + 1] == b) {
            pair_add(l, a, b, -f, w);
            if (k > 0) {
                pair_add(l, t[k - 1], a, -f, w);
                pair_add(l, t[k - 1], z, f, w);
                note_fresh(l, t[k - 1], z);
            }
            if (r + 2 < wd->len) {
                pair_add(l, b, t[r + 2], -f, w);
                pair_add(l, z, t[r + 2], f, w);
                note_fresh(l, z, t[r + 2]);
            }
            t[k++] = z;
            r += 2;
        } else {
            t[k++] = t[r++];
        }
    }
    wd->len = k;
}

typedef struct {
    const unsigned char *s; /* into the text; NULL for an empty slot */
    size_t len;
    int64_t count;
} chunk;

static chunk *chunk_find(chunk *slot, size_t n_slots, const unsigned char *s, size_t len)
{
    size_t i = (size_t)hl_text_hash(s, len) & (n_slots - 1);
    while (slot[i].s && (slot[i].len != len || memcmp(slot[i].s, s, len) != 0))
        i = (i + 1) & (n_slots - 1);
    return &slot[i];
}

/* The distinct chunks of the text with their counts, as words. */
static void count_chunks(learner *l, const unsigned char *text, size_t n)
{
    size_t n_slots = 1024, used = 0;
    chunk *slot = calloc(n_slots, sizeof *slot);
    l->ok = slot != NULL;
    for (size_t i = 0; l->ok && i < n;) {
        const size_t end = hl_bpe_next_chunk(text, n, i);
        chunk *c = chunk_find(slot, n_slots, text + i, end - i);
        if (!c->s && (used + 1) * 2 > n_slots) {
            chunk *bigger = calloc(2 * n_slots, sizeof *bigger);
            if (!(l->ok = bigger != NULL))
                break;
            for (size_t k = 0; k < n_slots; k++)
                if (slot[k].s)
                    *chunk_find(bigger, 2 * n_slots, slot[k].s, slot[k].len) = slot[k];
            free(slot);
            slot = bigger;
            n_slots *= 2;
            c = chunk_find(slot, n_slots, text + i, end - i);
        }
        if (!c->s) {
            *c = (chunk){.s = text + i, .len = end - i};
            used++;
        }
        c->count++;
        i = end;
    }
    /* Chunks of one byte hold no pair: they are left out. */
    l->words = l->ok ? malloc(sizeof *l->words * (used ? used : 1)) : NULL;
    l->ok = l->words != NULL;
    for (size_t j = 0; l->ok && j < n_slots; j++) {
        if (!slot[j].s || slot[j].len < 2)
            continue;
        word *w = &l->words[l->n_words];
        *w = (word){.tok = malloc(sizeof *w->tok * slot[j].len), .len = slot[j].len,
                    .count = slot[j].count, .seen = -1};
        if (!(l->ok = w->tok != NULL))
            break;
        l->n_words++;
        for (size_t k = 0; k < w->len; k++)
            w->tok[k] = slot[j].s[k];
    }
    free(slot);
}

/* Every word's pairs counted, and every pair in the heap. */
static void count_pairs(learner *l)
{
    l->pairs = (pair_table){.slot = pair_table_new_slots(1024), .n_slots = 1024};
    l->ok = l->pairs.slot != NULL;
    for (size_t w = 0; l->ok && w < l->n_words; w++)
        for (size_t k = 0; k + 1 < l->words[w].len; k++)
            pair_add(l, l->words[w].tok[k], l->words[w].tok[k + 1], l->words[w].count,
                     (int32_t)w);
    for (size_t i = 0; l->ok && i < l->pairs.n_slots; i++)
        if (l->pairs.slot[i].key != EMPTY_KEY)
            heap_push(l, (int32_t)(l->pairs.slot[i].key >> 32),
                      (int32_t)(l->pairs.slot[i].key & 0xffffffffu), l->pairs.slot[i].count);
}

/* The next merge: the best pair that occurs at least twice; false when none. */
static bool best_pair(learner *l, int32_t *left, int32_t *right)
{
    while (l->heap.n) {
        const candidate c = heap_pop(&l->heap);
        const int64_t now = pair_find(&l->pairs, pair_key(c.left, c.right))->count;
        if (now != c.count) { /* fallen since it was pushed */
            if (now > 0)
                heap_push(l, c.left, c.right, now);
            continue;
        }
        *left = c.left;
        *right = c.right;
        return c.count >= 2;
    }
    return false;
}

/* Merge z of (a, b) into every word that has it, then the new pairs into
 * the heap. */
static void apply_merge(learner *l, int32_t a, int32_t b, int32_t z)
{
    pair_entry *e = pair_find(&l->pairs, pair_key(a, b));
    int32_t *where = e->words; /* taken: the pair is gone after this merge */
    const size_t n_where = e->n_words;
    e->words = NULL;
    e->n_words = e->cap_words = 0;
    l->n_fresh = 0;
    for (size_t i = 0; l->ok && i < n_where; i++) {
        word *w = &l->words[where[i]];
        if (w->seen == z)
            continue;
        w->seen = z;
        merge_word(l, where[i], a, b, z);
    }
    free(where);
    for (size_t i = 0; l->ok && i < l->n_fresh; i++) {
        const pair_entry *f = pair_find(&l->pairs, l->fresh[i]);
        /* A pair noted twice is pushed twice; the second is dropped when
         * popped, its count then 0 or fallen. */
        if (f->count > 0)
            heap_push(l, (int32_t)(f->key >> 32), (int32_t)(f->key & 0xffffffffu), f->count);
    }
}

static void learner_free(learner *l)
{
    for (size_t w = 0; w < l->n_words; w++)
        free(l->words[w].tok);
    free(l->words);
    for (size_t i = 0; l->pairs.slot && i < l->pairs.n_slots; i++)
        free(l->pairs.slot[i].words);
    free(l->pairs.slot);
    free(l->heap.at);
    free(l->len);
    free(l->fresh);
}

hl_vocab *hl_vocab_learn_bpe(const unsigned char *text, size_t n, int size, hl_error *err)
{
    if (size <= HL_VOCAB_BYTES || size > HL_VOCAB_MAX) {
        hl_error_set(err, HL_ERR_ARG, "vocab: a learnt vocabulary has %d..%d tokens, not %d",
                     HL_VOCAB_BYTES + 1, HL_VOCAB_MAX, size);
        return NULL;
    }
    learner l = {.len = malloc(sizeof *l.len * (size_t)size)};
    int32_t *merges = malloc(sizeof *merges * 2 * (size_t)(size - HL_VOCAB_BYTES));
    int n_merges = 0;
    if (l.len && merges) {
        for (int b = 0; b < HL_VOCAB_BYTES; b++)
            l.len[b] = 1;
        count_chunks(&l, text, n);
        if (l.ok)
            count_pairs(&l);
        int32_t a, b;
        while (l.ok && HL_VOCAB_BYTES + n_merges < size && best_pair(&l, &a, &b)) {
            const int32_t z = HL_VOCAB_BYTES + n_merges;
            merges[2 * n_merges] = a;
            merges[2 * n_merges + 1] = b;
            l.len[z] = l.len[a] + l.len[b];
            n_merges++;
            apply_merge(&l, a, b, z);
        }
    }
    hl_vocab *v = NULL;
    if (l.len && merges && l.ok)
        v = hl_bpe_build(merges, n_merges, 0, err);
    else
        hl_error_set(err, HL_ERR_NOMEM, "vocab: out of memory learning BPE from %zu bytes", n);
    learner_free(&l);
    free(merges);
    return v;
}
