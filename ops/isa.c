/* Run-time choice of the kernel set (see ops/isa.h and ops/kernels.h). */
#include "ops/isa.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/kernels.h"

static const char *const isa_names[HL_ISA_COUNT] = {"portable", "avx2", "avx512"};

const hl_kernel_set *hl_kernels_of(hl_isa isa)
{
    switch (isa) {
    case HL_ISA_PORTABLE:
        return &hl_kernel_set_portable;
#if defined(__x86_64__)
    case HL_ISA_AVX2:
        return &hl_kernel_set_avx2;
    case HL_ISA_AVX512:
        return &hl_kernel_set_avx512;
#endif
    default:
        return NULL;
    }
}

const char *hl_isa_name(hl_isa isa)
{
    return isa >= 0 && isa < HL_ISA_COUNT ? isa_names[isa] : "unknown";
}

bool hl_isa_parse(const char *name, hl_isa *isa)
{
    for (int i = 0; i < HL_ISA_COUNT; i++)
        if (name && strcmp(name, isa_names[i]) == 0) {
            *isa = (hl_isa)i;
            return true;
        }
    return false;
}

bool hl_isa_supported(hl_isa isa)
{
    if (!hl_kernels_of(isa))
        return false;
#if defined(__x86_64__)
    /* libgcc's probe also checks that the OS saves the wider registers. */
    __builtin_cpu_init();
    if (isa == HL_ISA_AVX512)
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma");
    if (isa == HL_ISA_AVX2)
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
    return true;
}

hl_isa hl_isa_best(void)
{
    for (int i = HL_ISA_COUNT - 1; i > 0; i--)
        if (hl_isa_supported((hl_isa)i))
            return (hl_isa)i;
    return HL_ISA_PORTABLE;
}

const char *hl_isa_list(char *buf, int size)
{
    int used = 0;
    buf[0] = '\0';
    for (int i = HL_ISA_COUNT - 1; i >= 0; i--)
        if (hl_isa_supported((hl_isa)i) && used < size)
            used += snprintf(buf + used, (size_t)(size - used), "%s%s", used ? "," : "",
                             isa_names[i]);
    return buf;
}

/* ---- The active set. Ops read it on every call, so it is one atomic
 * pointer; the first reader chooses it, once. */
static _Atomic(const hl_kernel_set *) active;
static pthread_once_t chosen = PTHREAD_ONCE_INIT;

/* HL_ISA's set, or the best when it is unset or names no supported set. */
static hl_isa isa_from_env(bool *valid)
{
    const char *name = getenv("HL_ISA");
    hl_isa isa;
    *valid = true;
    if (!name || !*name)
        return hl_isa_best();
    if (hl_isa_parse(name, &isa) && hl_isa_supported(isa))
        return isa;
    *valid = false;
    return hl_isa_best();
}

static void choose(void)
{
    bool valid;
    atomic_store(&active, hl_kernels_of(isa_from_env(&valid)));
}

const hl_kernel_set *hl_kernels(void)
{
    const hl_kernel_set *ks = atomic_load_explicit(&active, memory_order_acquire);
    if (ks)
        return ks;
    pthread_once(&chosen, choose);
    return atomic_load(&active);
}

hl_isa hl_isa_active(void) { return hl_kernels()->isa; }

hl_status hl_isa_use(hl_isa isa, hl_error *err)
{
    if (!hl_isa_supported(isa)) {
        char have[64];
        return hl_error_set(err, HL_ERR_ARG,
                            "kernel set '%s' is not supported on this CPU (it has: %s)",
                            hl_isa_name(isa), hl_isa_list(have, sizeof have));
    }
    pthread_once(&chosen, choose);
    atomic_store(&active, hl_kernels_of(isa));
    return HL_OK;
}

hl_status hl_isa_init_from_env(hl_error *err)
{
    bool valid;
    const hl_isa isa = isa_from_env(&valid);
    if (!valid) {
        char have[64];
        hl_isa named;
        const char *value = getenv("HL_ISA");
        if (hl_isa_parse(value, &named))
            return hl_error_set(err, HL_ERR_ARG,
                                "HL_ISA=%s: this CPU lacks that instruction set (it has: %s)",
                                value, hl_isa_list(have, sizeof have));
        return hl_error_set(err, HL_ERR_ARG,
                            "HL_ISA=%s: unknown kernel set (avx512, avx2 or portable; this "
                            "CPU has: %s)",
                            value, hl_isa_list(have, sizeof have));
    }
    return hl_isa_use(isa, err);
}
