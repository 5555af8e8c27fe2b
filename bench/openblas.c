/* OpenBLAS's cblas_?gemm loaded with dlopen, so the benchmark builds and runs
 * without it (see bench/bench.h). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"

/* CBLAS's enum values, so no cblas.h (libopenblas-dev) is needed. */
enum { CBLAS_ROW_MAJOR = 101, CBLAS_NO_TRANS = 111, CBLAS_TRANS = 112 };

typedef void (*sgemm_fn)(int, int, int, int, int, int, float, const float *, int,
                         const float *, int, float, float *, int);
typedef void (*dgemm_fn)(int, int, int, int, int, int, double, const double *, int,
                         const double *, int, double, double *, int);

struct bench_openblas {
    void *lib;
    sgemm_fn sgemm;
    dgemm_fn dgemm;
    void (*set_threads)(int);
    char about[160];
};

/* dlsym's object pointer as a function pointer, without a cast ISO C lacks. */
static bool find(void *lib, const char *name, void *fn, size_t size)
{
    void *sym = dlsym(lib, name);
    if (sym)
        memcpy(fn, &sym, size);
    return sym != NULL;
}

void bench_openblas_environment(int max_threads, hl_isa isa, char *note, size_t note_size)
{
    /* OpenBLAS runs the instruction set of headlab's kernel set, so the two
     * are compared on the same vectors; this also keeps Debian's OpenBLAS
     * 0.3.21, which does not recognise newer AVX-512 CPUs, off its AVX2
     * kernels on them. */
    const char *was = getenv("OPENBLAS_CORETYPE"), *want = bench_openblas_coretype(isa);
    note[0] = '\0';
    if (was && strcmp(was, want))
        snprintf(note, note_size, " (was %.40s)", was);
    setenv("OPENBLAS_CORETYPE", want, 1);
    char threads[16];
    snprintf(threads, sizeof threads, "%d", max_threads);
    setenv("OPENBLAS_NUM_THREADS", threads, 1);
    /* After its last call OpenBLAS's helper threads spin on a core for 2^28
     * cycles (~0.1 s) by default, which would slow the next implementation's
     * block; 2^20 cycles is still far longer than the gap between two calls
     * of a timed block, so OpenBLAS's own times do not change. */
    setenv("OPENBLAS_THREAD_TIMEOUT", "20", 1);
}

bench_openblas *bench_openblas_open(const char *lib, char *why, size_t why_size)
{
    bench_openblas *ob = calloc(1, sizeof *ob);
    if (!ob) {
        snprintf(why, why_size, "out of memory");
        return NULL;
    }
    ob->lib = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!ob->lib) {
        snprintf(why, why_size, "%s", dlerror());
        free(ob);
        return NULL;
    }
    bool ok = find(ob->lib, "cblas_sgemm", &ob->sgemm, sizeof ob->sgemm) &&
              find(ob->lib, "cblas_dgemm", &ob->dgemm, sizeof ob->dgemm) &&
              find(ob->lib, "openblas_set_num_threads", &ob->set_threads,
                   sizeof ob->set_threads);
    if (!ok) {
        snprintf(why, why_size, "%s lacks cblas_sgemm, cblas_dgemm or openblas_set_num_threads",
                 lib);
        bench_openblas_close(ob);
        return NULL;
    }
    char *(*corename)(void) = NULL;
    const char *coretype = getenv("OPENBLAS_CORETYPE");
    if (find(ob->lib, "openblas_get_corename", &corename, sizeof corename))
        snprintf(ob->about, sizeof ob->about, "%s, core %s%s%s", lib, corename(),
                 coretype ? ", OPENBLAS_CORETYPE=" : "", coretype ? coretype : "");
    else
        snprintf(ob->about, sizeof ob->about, "%s", lib);
    return ob;
}

void bench_openblas_close(bench_openblas *ob)
{
    if (!ob)
        return;
    if (ob->lib)
        dlclose(ob->lib);
    free(ob);
}

const char *bench_openblas_about(const bench_openblas *ob) { return ob->about; }

void bench_openblas_set_threads(bench_openblas *ob, int n) { ob->set_threads(n); }

void bench_openblas_gemm(const bench_openblas *ob, bool trans_a, bool trans_b, int M, int N,
                         int K, const hl_real *A, int lda, const hl_real *B, int ldb,
                         hl_real *C, int ldc)
{
    const int ta = trans_a ? CBLAS_TRANS : CBLAS_NO_TRANS;
    const int tb = trans_b ? CBLAS_TRANS : CBLAS_NO_TRANS;
#ifdef HL_REAL_DOUBLE
    ob->dgemm(CBLAS_ROW_MAJOR, ta, tb, M, N, K, 1, A, lda, B, ldb, 0, C, ldc);
#else
    ob->sgemm(CBLAS_ROW_MAJOR, ta, tb, M, N, K, 1, A, lda, B, ldb, 0, C, ldc);
#endif
}
