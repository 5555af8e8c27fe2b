#include "core/arena.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/pages.h"

typedef struct hl_arena_chunk {
    struct hl_arena_chunk *next;
    size_t size; /* bytes of data */
    size_t used;
    unsigned char *data;
} hl_arena_chunk;

static size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

/* A chunk spans whole huge pages where it is large enough (core/pages.h): a
 * fresh chunk's first touch then costs one fault per 2 MiB instead of one per
 * 4 KiB, which on a virtual machine is most of a large model's first step
 * (2.6 million faults at nanoGPT's size). */
static hl_arena_chunk *chunk_new(size_t size)
{
    hl_arena_chunk *c = malloc(sizeof *c);
    if (!c)
        return NULL;
    size = hl_pages_size(size);
    c->data = size ? hl_pages_alloc(size) : NULL;
    if (!c->data) {
        free(c);
        return NULL;
    }
    c->next = NULL;
    c->size = size;
    c->used = 0;
    return c;
}

static void chunks_free(hl_arena_chunk *c)
{
    while (c) {
        hl_arena_chunk *next = c->next;
        free(c->data);
        free(c);
        c = next;
    }
}

void hl_arena_init(hl_arena *a, size_t initial_bytes)
{
    memset(a, 0, sizeof *a);
    a->min_chunk = round_up(initial_bytes ? initial_bytes : 1 << 20, HL_ARENA_ALIGN);
}

void *hl_arena_alloc(hl_arena *a, size_t bytes)
{
    if (bytes > SIZE_MAX / 2)
        return NULL;
    bytes = round_up(bytes ? bytes : 1, HL_ARENA_ALIGN);
    hl_arena_chunk *c = a->current;
    /* Move on to the next chunk of the chain, kept from earlier steps, until
     * one has room; a step that repeats the last one lands where it did. */
    while (c && c->size - c->used < bytes && c->next)
        c = c->next;
    if (!c || c->size - c->used < bytes) {
        /* Grow geometrically so a step with many small allocations needs few chunks. */
        size_t size = a->min_chunk;
        if (c && size < 2 * c->size)
            size = 2 * c->size;
        if (size < bytes)
            size = bytes;
        hl_arena_chunk *fresh = chunk_new(size);
        if (!fresh)
            return NULL;
        a->n_mallocs++;
        if (c)
            c->next = fresh;
        else
            a->chunks = fresh;
        c = fresh;
    }
    a->current = c;
    void *p = c->data + c->used;
    c->used += bytes;
    a->used += bytes;
    if (a->used > a->high_water)
        a->high_water = a->used;
    return p;
}

void hl_arena_reset(hl_arena *a)
{
    for (hl_arena_chunk *c = a->chunks; c; c = c->next)
        c->used = 0;
    a->current = a->chunks;
    a->used = 0;
}

void hl_arena_free(hl_arena *a)
{
    chunks_free(a->chunks);
    a->chunks = a->current = NULL;
    a->used = 0;
}

size_t hl_arena_capacity(const hl_arena *a)
{
    size_t n = 0;
    for (const hl_arena_chunk *c = a->chunks; c; c = c->next)
        n += c->size;
    return n;
}
