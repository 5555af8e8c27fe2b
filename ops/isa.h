/*
 * isa.h: which kernel set (instruction set) the ops run on.
 *
 * headlab is built once for its target (any x86-64, or AArch64) and picks its
 * kernels at run time, at the first op: the best set the CPU supports, or the
 * one the environment variable HL_ISA names (avx512, avx2, portable). Every
 * set with FMA gives the same bits; see docs/kernels.md.
 *
 *     hl_error err = {0};
 *     if (hl_isa_init_from_env(&err) != HL_OK) {   // a program's first call
 *         fprintf(stderr, "%s\n", err.message);    // HL_ISA=avx512 on an AVX2 CPU
 *         return 2;
 *     }
 *     printf("kernels: %s\n", hl_isa_name(hl_isa_active()));
 *
 * A program that never calls hl_isa_init_from_env still honours a valid
 * HL_ISA; an invalid one is then ignored (the best set runs), since the
 * library cannot report it.
 */
#ifndef HL_OPS_ISA_H
#define HL_OPS_ISA_H

#include <stdbool.h>

#include "core/error.h"

typedef enum hl_isa {
    HL_ISA_PORTABLE, /* plain C vectors, any CPU of the build's target */
    HL_ISA_AVX2,     /* x86-64 with AVX2 and FMA */
    HL_ISA_AVX512,   /* x86-64 with AVX-512F */
    HL_ISA_COUNT
} hl_isa;

/* "avx512", "avx2", "portable". */
const char *hl_isa_name(hl_isa isa);

/* Whether this build has the set and this CPU can run it. */
bool hl_isa_supported(hl_isa isa);

/* The fastest supported set. */
hl_isa hl_isa_best(void);

/* The set the ops run on (choosing it now if no op has run yet). */
hl_isa hl_isa_active(void);

/* Makes isa the active set; refuses one the CPU lacks. Not to be called while
 * ops run on other threads. */
hl_status hl_isa_use(hl_isa isa, hl_error *err);

/* The set named by HL_ISA (unset or empty: the best); an unknown name or a
 * set this CPU lacks is an error that names the value and the sets at hand. */
hl_status hl_isa_init_from_env(hl_error *err);

/* "avx2" -> HL_ISA_AVX2; false for an unknown name. */
bool hl_isa_parse(const char *name, hl_isa *isa);

/* The supported sets as "avx512,avx2,portable" (best first), in buf. */
const char *hl_isa_list(char *buf, int size);

#endif
