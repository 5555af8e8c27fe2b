/*
 * arena.h: the step arena, a bump allocator for one training step's
 * activations, graph nodes and activation gradients.
 *
 * Memory is handed out 64-byte aligned from a chain of chunks. When a chunk is
 * full, a new one is added (never moved, so earlier pointers stay valid).
 * hl_arena_reset() forgets every allocation; if the step needed more than one
 * chunk, the chain is replaced by a single chunk as large as the step's
 * high-water mark, so from the second identical step on nothing is allocated.
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
    struct hl_arena_chunk *chunks; /* newest first */
    size_t used;                   /* bytes handed out since the last reset */
    size_t high_water;             /* most bytes ever in use between resets */
    size_t n_mallocs;              /* chunk allocations over the arena's life */
    size_t min_chunk;              /* smallest chunk to allocate */
} hl_arena;

void hl_arena_init(hl_arena *a, size_t initial_bytes);
/* Aligned, uninitialised memory, or NULL when the system is out of memory. */
void *hl_arena_alloc(hl_arena *a, size_t bytes);
void *hl_arena_calloc(hl_arena *a, size_t bytes);
void hl_arena_reset(hl_arena *a);
void hl_arena_free(hl_arena *a);
/* Bytes of all chunks now held. */
size_t hl_arena_capacity(const hl_arena *a);

#endif
