/*
 * arena.h: the step arena, a bump allocator for one training step's
 * activations, graph nodes and activation gradients.
 *
 * Memory is handed out 64-byte aligned from a chain of chunks. When a chunk is
 * full, the next one is used, or a new one, twice as large, is added (never
 * moved, so earlier pointers stay valid). hl_arena_reset() forgets every
 * allocation and keeps the chain: a step that allocates what the last one did
 * lands in the same places, so from the second identical step on nothing is
 * allocated and no fresh page is touched (a new chunk's pages cost a fault
 * each on first touch: most of a large model's first step).
 *
 *     hl_arena a;
 *     hl_arena_init(&a, 1 << 20);
 *     float *x = hl_arena_alloc(&a, 256 * sizeof(float));   // NULL if out of memory
 *     hl_arena_reset(&a);                                   // x is gone
 *     hl_arena_free(&a);
 */
#ifndef HL_ARENA_H
#define HL_ARENA_H

#include <stddef.h>

#define HL_ARENA_ALIGN 64

struct hl_arena_chunk;

typedef struct hl_arena {
    struct hl_arena_chunk *chunks;  /* oldest first */
    struct hl_arena_chunk *current; /* the chunk allocations come from */
    size_t used;                   /* bytes handed out since the last reset */
    size_t high_water;             /* most bytes ever in use between resets */
    size_t n_mallocs;              /* chunk allocations over the arena's life */
    size_t min_chunk;              /* smallest chunk to allocate */
} hl_arena;

void hl_arena_init(hl_arena *a, size_t initial_bytes);
/* Aligned, uninitialised memory, or NULL when the system is out of memory. */
void *hl_arena_alloc(hl_arena *a, size_t bytes);
void hl_arena_reset(hl_arena *a);
void hl_arena_free(hl_arena *a);
/* Bytes of all chunks now held. */
size_t hl_arena_capacity(const hl_arena *a);

#endif
