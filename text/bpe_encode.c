/* Encoding with a BPE vocabulary: chunk by chunk, the merge of lowest id
 * (of a pretrained vocabulary: of lowest rank) first, each distinct chunk once
 * (vocab.h). */
#include <stdlib.h>
#include <string.h>

#include "text/hash.h"
#include "text/pretrained_impl.h"
#include "text/vocab_impl.h"

/* A learnt BPE's merge rank is the token it makes; a pretrained one keeps
 * ranks and tokens apart (its ids are in any order). */
static int32_t pair_rank(const hl_vocab *v, int32_t left, int32_t right)
{
    return v->pretrained ? hl_pretrained_pair_rank(v->pretrained, left, right)
                         : hl_bpe_pair_token(v, left, right);
}

static int32_t rank_token(const hl_vocab *v, int32_t rank)
{
    return v->pretrained ? v->pretrained->merge_token[rank] : rank;
}

static int32_t byte_token(const hl_vocab *v, unsigned char b)
{
    return v->pretrained ? v->pretrained->byte_token[b] : b;
}

/* A chunk already encoded: its bytes in the text and its tokens in the output. */
typedef struct {
    const unsigned char *key; /* NULL for an empty slot */
    size_t len, at, count;    /* the tokens are out[at..at+count) */
} cache_entry;

typedef struct {
    cache_entry *slot;
    size_t n_slots, used; /* n_slots a power of two, kept at least twice used */
} chunk_cache;

static cache_entry *cache_find(const chunk_cache *c, const unsigned char *s, size_t len)
{
    size_t i = (size_t)hl_text_hash(s, len) & (c->n_slots - 1);
    while (c->slot[i].key && (c->slot[i].len != len || memcmp(c->slot[i].key, s, len) != 0))
        i = (i + 1) & (c->n_slots - 1);
    return &c->slot[i];
}

static bool cache_grow(chunk_cache *c)
{
    chunk_cache bigger = {.slot = calloc(2 * c->n_slots, sizeof(cache_entry)),
                          .n_slots = 2 * c->n_slots, .used = c->used};
    if (!bigger.slot)
        return false;
    for (size_t i = 0; i < c->n_slots; i++)
        if (c->slot[i].key)
            *cache_find(&bigger, c->slot[i].key, c->slot[i].len) = c->slot[i];
    free(c->slot);
    *c = bigger;
    return true;
}

/* One chunk's working space, grown to the longest chunk: its tokens as a
 * linked list (a merged-away token is -1) and a min-heap of candidate merges,
 * each (rank << 32 | position of its left token), so the lowest rank pops
 * first and, of one rank, the leftmost. Entries go stale as their tokens merge;
 * they are checked when popped. */
typedef struct {
    int32_t *tok;
    size_t *next, *prev;
    uint64_t *heap;
    size_t cap, n_heap;
} scratch;

static void scratch_free(scratch *s)
{
    free(s->tok);
    free(s->next);
    free(s->prev);
    free(s->heap);
}

static bool scratch_fit(scratch *s, size_t len)
{
    if (len <= s->cap)
        return true;
    scratch_free(s);
    s->cap = len;
    s->tok = malloc(sizeof *s->tok * len);
    s->next = malloc(sizeof *s->next * len);
    s->prev = malloc(sizeof *s->prev * len);
    s->heap = malloc(sizeof *s->heap * 3 * len); /* a push per first pair, two per merge */
    if (s->tok && s->next && s->prev && s->heap)
        return true;
    s->cap = 0;
    return false;
}

static void heap_push(scratch *s, uint64_t e)
{
    size_t i = s->n_heap++;
    for (; i > 0 && s->heap[(i - 1) / 2] > e; i = (i - 1) / 2)
        s->heap[i] = s->heap[(i - 1) / 2];
    s->heap[i] = e;
}

static uint64_t heap_pop(scratch *s)
{
    const uint64_t top = s->heap[0], last = s->heap[--s->n_heap];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= s->n_heap)
            break;
        if (c + 1 < s->n_heap && s->heap[c + 1] < s->heap[c])
            c++;
        if (s->heap[c] >= last)
            break;
        s->heap[i] = s->heap[c];
        i = c;
    }
    s->heap[i] = last;
    return top;
}

/* A candidate merge of the tokens at left and s->next[left], if they merge. */
static void push_pair(const hl_vocab *v, scratch *s, size_t left, size_t len)
{
    const size_t right = s->next[left];
    if (right >= len)
        return;
    const int32_t rank = pair_rank(v, s->tok[left], s->tok[right]);
    if (rank >= 0)
        heap_push(s, (uint64_t)rank << 32 | left);
}

/* The tokens of one chunk (len <= s->cap bytes) into out; their count. */
static size_t encode_chunk(const hl_vocab *v, scratch *s, const unsigned char *chunk,
                           size_t len, int32_t *out)
{
    s->n_heap = 0;
    for (size_t i = 0; i < len; i++) {
        s->tok[i] = byte_token(v, chunk[i]);
        s->next[i] = i + 1;
        s->prev[i] = i - 1; /* SIZE_MAX for the first: no token before */
    }
    for (size_t i = 0; i + 1 < len; i++)
        push_pair(v, s, i, len);
    while (s->n_heap) {
        const uint64_t e = heap_pop(s);
        const int32_t rank = (int32_t)(e >> 32);
        const size_t left = (size_t)(e & 0xffffffffu), right = s->next[left];
        /* Stale: its left token merged away, or either changed since. */
        if (s->tok[left] < 0 || right >= len ||
            pair_rank(v, s->tok[left], s->tok[right]) != rank)
            continue;
        s->tok[left] = rank_token(v, rank);
        s->tok[right] = -1;
        s->next[left] = s->next[right];
        if (s->next[left] < len)
            s->prev[s->next[left]] = left;
        if (s->prev[left] != (size_t)-1)
            push_pair(v, s, s->prev[left], len);
        push_pair(v, s, left, len);
    }
    size_t k = 0;
    for (size_t i = 0; i < len; i = s->next[i])
        out[k++] = s->tok[i];
    return k;
}

static size_t next_chunk(void *ctx, const unsigned char *text, size_t n, size_t i,
                         int32_t *whole, hl_error *err)
{
    (void)ctx;
    (void)err;
    *whole = -1;
    return hl_bpe_next_chunk(text, n, i);
}

hl_status hl_bpe_encode(const hl_vocab *v, const unsigned char *text, size_t n,
                        int32_t **tokens, size_t *n_tokens, hl_error *err)
{
    return hl_bpe_encode_with(v, text, n, next_chunk, NULL, tokens, n_tokens, err);
}

hl_status hl_bpe_encode_with(const hl_vocab *v, const unsigned char *text, size_t n,
                             hl_bpe_next_fn next, void *ctx, int32_t **tokens, size_t *n_tokens,
                             hl_error *err)
{
    *tokens = NULL;
    *n_tokens = 0;
    int32_t *out = malloc(sizeof *out * (n ? n : 1)); /* a token per byte at most */
    chunk_cache cache = {.slot = calloc(1024, sizeof(cache_entry)), .n_slots = 1024};
    scratch s = {0};
    bool ok = out && cache.slot, too_long = false, failed = false;
    size_t k = 0;
    for (size_t i = 0; ok && i < n;) {
        int32_t whole;
        const size_t end = next(ctx, text, n, i, &whole, err), len = end - i;
        if (end <= i) {
            failed = true;
            break;
        }
        if (len > UINT32_MAX) { /* positions in a chunk are 32 bits in the heap */
            too_long = true;
            break;
        }
        cache_entry *e = len > 1 && whole < 0 ? cache_find(&cache, text + i, len) : NULL;
        if (whole >= 0) {
            out[k++] = whole;
        } else if (len == 1) {
            out[k++] = byte_token(v, text[i]);
        } else if (e->key) {
            memcpy(out + k, out + e->at, sizeof *out * e->count);
            k += e->count;
        } else if ((ok = scratch_fit(&s, len))) {
            *e = (cache_entry){.key = text + i, .len = len, .at = k};
            e->count = encode_chunk(v, &s, text + i, len, out + k);
            k += e->count;
            if (++cache.used * 2 > cache.n_slots)
                ok = cache_grow(&cache);
        }
        i = end;
    }
    free(cache.slot);
    scratch_free(&s);
    if (!ok || too_long || failed) {
        free(out);
        if (failed)
            return err->status;
        if (too_long)
            return hl_error_set(err, HL_ERR_ARG, "vocab: a chunk of more than %lu bytes",
                                (unsigned long)UINT32_MAX);
        return hl_error_set(err, HL_ERR_NOMEM, "vocab: out of memory encoding %zu bytes", n);
    }
    int32_t *fit = realloc(out, sizeof *out * (k ? k : 1));
    *tokens = fit ? fit : out;
    *n_tokens = k;
    return HL_OK;
}
