/*
 * pages.h: large buffers that live for many steps (parameters, gradients, an
 * optimizer's moments, the step arena's chunks), on transparent huge pages.
 *
 * A buffer of 2 MiB or more is placed on 2 MiB boundaries and offered to the
 * kernel's transparent huge pages (MADV_HUGEPAGE: advice, which a kernel with
 * them off ignores); a smaller one is only 64-byte aligned. On 4 KiB pages a
 * pass over such buffers after a step's forward and backward can be limited
 * by address translation rather than by memory: on a 2-core virtual machine
 * AdamW over the 10.8 M parameters of a 6-layer, d-384 GPT took 36-112 ms
 * after the backward, against 4.6 ms alone, and 7.5-13 ms on huge pages.
 *
 *     hl_real *m = hl_pages_alloc(n * sizeof *m);   // NULL if out of memory
 *     ...
 *     free(m);
 */
#ifndef HL_PAGES_H
#define HL_PAGES_H

#include <stddef.h>

/* Uninitialised memory for hl_pages_size(bytes) bytes, to be given back with
 * free(), or NULL when the system is out of memory. */
void *hl_pages_alloc(size_t bytes);
/* What hl_pages_alloc reserves for bytes, all of it usable: bytes rounded up
 * to whole huge pages from 2 MiB on, else to 64 bytes; 0 when that cannot be
 * represented. */
size_t hl_pages_size(size_t bytes);

#endif
