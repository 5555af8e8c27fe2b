/* madvise and MADV_HUGEPAGE are Linux extensions. */
#define _DEFAULT_SOURCE
#include "core/pages.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "core/arena.h"

#define HUGE_PAGE ((size_t)2 << 20)

static size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

size_t hl_pages_size(size_t bytes)
{
    if (bytes > SIZE_MAX - HUGE_PAGE)
        return 0;
    return bytes < HUGE_PAGE ? round_up(bytes ? bytes : 1, HL_ARENA_ALIGN)
                             : round_up(bytes, HUGE_PAGE);
}

void *hl_pages_alloc(size_t bytes)
{
    const size_t size = hl_pages_size(bytes);
    if (!size)
        return NULL;
    if (size < HUGE_PAGE)
        return aligned_alloc(HL_ARENA_ALIGN, size);
    void *p = aligned_alloc(HUGE_PAGE, size);
#ifdef MADV_HUGEPAGE
    if (p)
        (void)madvise(p, size, MADV_HUGEPAGE); /* advice only: may be refused */
#endif
    return p;
}
