/* The GEMM driver (see ops/gemm.h): cache blocking, packing and threading
 * around the register-tiled micro-kernels of the active kernel set
 * (ops/kernels/gemm_micro.c). */
#include "ops/gemm.h"

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "ops/kernels.h"

/* The Goto/BLIS loop nest: for each nc-wide column panel of C and each
 * kc-deep slice of K, op(B)'s (kc,nc) block is packed into nr-wide slivers;
 * then for each mc-tall row block, op(A)'s (mc,kc) block is packed into
 * mr-tall slivers and every mr×nr tile of the block is updated by the
 * micro-kernel, the B sliver staying in L1 while A slivers stream from L2.
 * Packing pads partial slivers with zeros, so the kernel only sees whole
 * tiles; alpha is applied while packing A. Small products read an operand
 * already laid out as the kernel wants it in place instead. Block sizes are
 * the most for each cache level, in elements: the same bytes for float and
 * double. */
enum {
    /* 384 floats: one pass over C for a K of 384 and two for 768, where 256
     * took two and three, each pass loading and storing C's tiles again
     * (GEMMs of the 6x6 model's shapes, one thread, AVX-512 on Zen 5: 4 %
     * faster; AVX2: level). The B sliver is up to 48 KiB with AVX-512's 32
     * columns: L1 on Zen 5 and recent Intel cores, L2 on a 32 KiB L1, which
     * still feeds two vector loads per 28 multiply-adds. */
    KC = 1536 / sizeof(hl_real),
    MC = 192,  /* an A block of up to 288 KiB for L2 */
    NC = 2048, /* a B panel of up to 3 MiB for L3 */
    ALIGN = 64,
    KC_MIN = 64, /* blocks for when the buffers cannot be allocated */
};

/* Below this many multiply-adds a product runs on one thread: it takes under
 * 10 µs, and measured on 2 cores a second thread does not make it faster.
 * Above it, each thread gets about this much at least (two threads from this
 * much on): spread over all 16 threads of a 16-core Xeon, a batch of small
 * products (32 x (64,32,64), 4 Mi multiply-adds) ran at 1 to 143 GFLOP/s,
 * where one thread ran 91. */
#define GEMM_PARALLEL_MIN_WORK 1048576.0

typedef struct {
    bool trans_a, trans_b;
    int M, N, K;
    hl_real alpha, beta;
    size_t lda, ldb, ldc;
    const hl_gemm_kernel *kern;
    hl_gemm_pack_fn *pack, *pack_transposed; /* the kernel set's */
    int mr, nr;              /* kern's tile */
    bool direct_a, direct_b; /* whole slivers read in place, not packed */
    bool upper;              /* C's tiles wholly below its diagonal skipped */
    const hl_real *bias;     /* the row C starts from (beta unused), or NULL */
    hl_gemm_act_fn *act;     /* the GELU taken of C, when gelu is not NULL */
    hl_real *gelu;           /* act(C) goes here (row stride ldc), or NULL */
} gemm_shape;

/* Packing buffers of one thread and the block sizes they hold. */
typedef struct {
    hl_real *a, *b; /* (mc,kc) as mc/mr slivers; (kc,nc) as nc/nr slivers */
    int mc, nc, kc;
} gemm_work;

static int min_int(int a, int b) { return a < b ? a : b; }
static int max_int(int a, int b) { return a > b ? a : b; }
static int round_up(int n, int to) { return (n + to - 1) / to * to; }

/* The kernel that does an M×N product in the least time: a big tile is
 * fastest, but on a small product its zero padding can cost more. */
static const hl_gemm_kernel *choose_kernel(const hl_gemm_kernel *kernels, int M, int N)
{
    const hl_gemm_kernel *best = kernels;
    double best_cost = 0;
    for (const hl_gemm_kernel *k = kernels; k->fn; k++) {
        const double cost = (double)round_up(M, k->mr) * round_up(N, k->nr) / k->speed;
        if (k == kernels || cost < best_cost) {
            best = k;
            best_cost = cost;
        }
    }
    return best;
}

/* Slivers of w columns of alpha·src, a kb×n block read along its rows (row
 * stride lds): sliver s holds columns s·w.. as dst[k·w + j], columns past n
 * zero. A few rows at a time across all slivers: rows lds apart can share one
 * cache set, and a sliver uses only part of each line, so a sliver at a time
 * loads each line from beyond L1 once per sliver it holds (perf, one thread:
 * the weight gradient of a (384,1536) weight from 2,048 rows spent 12 % of its
 * time packing, 85 % of that on this load; 5-7 % faster this way). */
static void pack_rows(const gemm_shape *s, hl_real alpha, const hl_real *src, size_t lds, int kb,
                      int n, int w, hl_real *dst)
{
    enum { ROWS = 8 };
    for (int k = 0; k < kb; k += ROWS)
        for (int j = 0; j < n; j += w)
            s->pack(min_int(w, n - j), w, min_int(ROWS, kb - k), alpha, src + (size_t)k * lds + j,
                    lds, dst + (size_t)j * kb + (size_t)k * w, w);
}

/* Slivers of alpha·op(A)[i0.., k0..] for an mb×kb block: sliver s holds rows
 * s·mr.. as dst[k·mr + r], rows past mb zero. */
static void pack_a(const gemm_shape *s, const hl_real *A, int i0, int k0, int mb, int kb,
                   hl_real *dst)
{
    const int mr = s->mr;
    if (s->trans_a) {
        pack_rows(s, s->alpha, A + (size_t)k0 * s->lda + i0, s->lda, kb, mb, mr, dst);
        return;
    }
    for (int i = 0; i < mb; i += mr, dst += (size_t)mr * kb)
        s->pack_transposed(min_int(mr, mb - i), mr, kb, s->alpha,
                                A + (size_t)(i0 + i) * s->lda + k0, s->lda, dst, mr);
}

/* Slivers of op(B)[k0.., j0..] for a kb×nb block: sliver s holds columns
 * s·nr.. as dst[k·nr + j], columns past nb zero. */
static void pack_b(const gemm_shape *s, const hl_real *B, int k0, int j0, int kb, int nb,
                   hl_real *dst)
{
    const int nr = s->nr;
    if (!s->trans_b) {
        pack_rows(s, 1, B + (size_t)k0 * s->ldb + j0, s->ldb, kb, nb, nr, dst);
        return;
    }
    for (int j = 0; j < nb; j += nr, dst += (size_t)nr * kb)
        s->pack_transposed(min_int(nr, nb - j), nr, kb, 1, B + (size_t)(j0 + j) * s->ldb + k0,
                           s->ldb, dst, nr);
}

/* One tile of C, rows×cols of it real, starting from beta·C or, when bias is
 * not NULL, from the bias's cols values: a partial tile goes through a whole
 * one on the stack, with the same arithmetic. */
static void tile(const gemm_shape *s, int kc, hl_gemm_micro_fn *fn, const hl_real *a,
                 size_t a_step, const hl_real *b, size_t b_step, hl_real beta,
                 const hl_real *bias, hl_real *c, int rows, int cols)
{
    if (rows == s->mr && cols == s->nr) {
        fn(kc, a, a_step, b, b_step, beta, bias, c, s->ldc);
        return;
    }
    _Alignas(ALIGN) hl_real t[HL_GEMM_MAX_MR * HL_GEMM_MAX_NR];
    _Alignas(ALIGN) hl_real bias_row[HL_GEMM_MAX_NR] = {0};
    const int nr = s->nr;
    if (bias)
        bias = memcpy(bias_row, bias, (size_t)cols * sizeof *bias);
    else if (beta != 0)
        for (int r = 0; r < rows; r++)
            for (int j = 0; j < cols; j++)
                t[r * nr + j] = c[r * s->ldc + j];
    fn(kc, a, a_step, b, b_step, beta, bias, t, (size_t)nr);
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < cols; j++)
            c[r * s->ldc + j] = t[r * nr + j];
}

/* The epilogue, on an mb×nb block of C at (i0, j0) while it is in L2, once
 * K's last slice is added: act(C), a GELU, is written to s->gelu. The same
 * arithmetic as hl_gelu (or hl_gelu_tanh) after the product, without its pass
 * over memory. */
static void epilogue(const gemm_shape *s, hl_real *C, int i0, int j0, int mb, int nb)
{
    if (!s->gelu)
        return;
    for (int i = i0; i < i0 + mb; i++)
        s->act(C + (size_t)i * s->ldc + j0, s->gelu + (size_t)i * s->ldc + j0, (size_t)nb);
}

/* A rows×cols tile of C into L2, where the next tile's C is asked for while
 * the current one's sums run: C is touched once a K slice, so a big product's
 * tiles come from L3 or memory, and the kernel's first loads of them (or its
 * stores, when beta is 0) would wait there. One thread, avx512, the twelve
 * GEMMs of one layer in a throwaway harness, with and without this in
 * alternate calls: 4.6-5.4 % less time at 2,048 rows and d 384, 2.2-2.9 % at
 * 1,024 rows and d 768. */
static void prefetch_tile(const gemm_shape *s, const hl_real *c, int rows, int cols)
{
    enum { LINE = 64 / sizeof(hl_real) };
    for (int r = 0; r < rows; r++, c += s->ldc) {
        for (int j = 0; j < cols; j += LINE)
            __builtin_prefetch(c + j, 1, 2);
        __builtin_prefetch(c + cols - 1, 1, 2); /* the line a row misaligned to lines ends in */
    }
}

/* C[m0..m1, n0..n1) = beta·C + alpha·op(A)·op(B) for one matrix of a batch.
 * An operand read in place still has its partial sliver, if any, packed. */
static void gemm_block(const gemm_shape *s, const hl_real *A, const hl_real *B, hl_real *C,
                       int m0, int m1, int n0, int n1, const gemm_work *w)
{
    const int mr = s->mr, nr = s->nr;
    for (int jc = n0; jc < n1; jc += w->nc) {
        const int nc = min_int(w->nc, n1 - jc);
        const int nc_whole = s->direct_b ? nc / nr * nr : 0;
        for (int pc = 0; pc < s->K; pc += w->kc) {
            const int kc = min_int(w->kc, s->K - pc);
            /* beta scales C once, before the first slice is added; a bias is
             * where the first slice starts instead (the kernel reads it as
             * it would have read C filled with it: the same sums). */
            const bool first = pc == 0, last = pc + kc == s->K;
            const hl_real beta = first ? s->beta : 1;
            const hl_real *bias = first ? s->bias : NULL;
            pack_b(s, B, pc, jc + nc_whole, kc, nc - nc_whole, w->b + (size_t)nc_whole * kc);
            for (int ic = m0; ic < m1; ic += w->mc) {
                const int mc = min_int(w->mc, m1 - ic);
                if (s->upper && jc + nc <= ic) /* every column left of every row */
                    continue;
                const int mc_whole = s->direct_a ? mc / mr * mr : 0;
                pack_a(s, A, ic + mc_whole, pc, mc - mc_whole, kc, w->a + (size_t)mc_whole * kc);
                for (int jr = 0; jr < nc; jr += nr) {
                    const bool b_direct = jr < nc_whole;
                    const hl_real *b = b_direct ? B + (size_t)pc * s->ldb + jc + jr
                                                : w->b + (size_t)jr * kc;
                    const size_t b_step = b_direct ? s->ldb : (size_t)nr;
                    for (int ir = 0; ir < mc; ir += mr) {
                        if (s->upper && jc + jr + nr <= ic + ir)
                            continue;
                        /* the next tile: below, or atop the next sliver */
                        const bool down = ir + mr < mc;
                        const int next_ir = down ? ir + mr : 0, next_jr = down ? jr : jr + nr;
                        if (next_jr < nc)
                            prefetch_tile(s, C + (size_t)(ic + next_ir) * s->ldc + jc + next_jr,
                                          min_int(mr, mc - next_ir), min_int(nr, nc - next_jr));
                        const bool a_direct = ir < mc_whole;
                        const hl_real *a = w->a + (size_t)ir * kc;
                        size_t a_step = mr;
                        hl_gemm_micro_fn *fn = s->kern->fn;
                        if (a_direct && s->trans_a) {
                            a = A + (size_t)pc * s->lda + ic + ir;
                            a_step = s->lda;
                        } else if (a_direct) {
                            a = A + (size_t)(ic + ir) * s->lda + pc;
                            a_step = s->lda;
                            fn = s->kern->fn_rows;
                        }
                        tile(s, kc, fn, a, a_step, b, b_step, beta, bias ? bias + jc + jr : NULL,
                             C + (size_t)(ic + ir) * s->ldc + jc + jr, min_int(mr, mc - ir),
                             min_int(nr, nc - jr));
                    }
                }
                if (last)
                    epilogue(s, C, ic, jc, mc, nc);
            }
        }
    }
}

/* C = beta·C (or the bias) over a block, for products with nothing to add
 * (K or alpha 0), and its GELU. */
static void scale_block(const gemm_shape *s, hl_real *C, int m0, int m1, int n0, int n1)
{
    for (int i = m0; i < m1; i++) {
        hl_real *row = C + (size_t)i * s->ldc;
        for (int j = n0; j < n1; j++)
            row[j] = s->bias ? s->bias[j] : s->beta == 0 ? 0 : s->beta * row[j];
        if (s->gelu)
            s->act(row + n0, s->gelu + (size_t)i * s->ldc + n0, (size_t)(n1 - n0));
    }
}

/* Each thread's packing buffer, kept from call to call and grown when a call
 * needs more (to 2.2 MiB at most): a fresh allocation per call would often be
 * freshly mapped memory, paying a page fault per 4 KiB. A thread that exits
 * (OpenMP ends the surplus ones when a team shrinks) frees its buffer through
 * the key's destructor. */
static _Thread_local hl_real *thread_buf;
static _Thread_local size_t thread_buf_bytes;
static pthread_key_t thread_buf_key;
static pthread_once_t thread_buf_once = PTHREAD_ONCE_INIT;
static bool thread_buf_keyed; /* the key exists (its creation can fail) */

static void thread_buf_make_key(void)
{
    thread_buf_keyed = pthread_key_create(&thread_buf_key, free) == 0;
}

/* Buffers for blocks of up to mb×nb of C; false when out of memory. */
static bool work_alloc(gemm_work *w, const gemm_shape *s, int mb, int nb)
{
    w->kc = min_int(KC, s->K);
    w->mc = min_int(MC / s->mr * s->mr, round_up(mb, s->mr));
    w->nc = min_int(NC / s->nr * s->nr, round_up(nb, s->nr));
    const size_t bytes_a = round_up(w->mc * w->kc * (int)sizeof(hl_real), ALIGN);
    const size_t bytes_b = round_up(w->nc * w->kc * (int)sizeof(hl_real), ALIGN);
    if (bytes_a + bytes_b > thread_buf_bytes) {
        /* The new buffer first: on failure the old one stays this thread's
         * (and its key's, freed once at the thread's exit). */
        hl_real *grown = aligned_alloc(ALIGN, bytes_a + bytes_b);
        if (!grown)
            return false;
        free(thread_buf);
        thread_buf = grown;
        thread_buf_bytes = bytes_a + bytes_b;
        pthread_once(&thread_buf_once, thread_buf_make_key);
        if (thread_buf_keyed)
            pthread_setspecific(thread_buf_key, thread_buf);
    }
    w->a = thread_buf;
    w->b = thread_buf + bytes_a / sizeof(hl_real);
    return true;
}

/* The first of `units` row (or column) units of part p of `parts`: equal
 * counts, or for the rows of an upper triangle equal areas (the rows above x
 * of an n-square hold x·(n - x/2) of its n²/2 elements). */
static int part_start(int units, int p, int parts, bool upper)
{
    if (!upper || p == parts)
        return (int)((int64_t)units * p / parts);
    return (int)(units * (1 - sqrt(1 - (double)p / parts)) + 0.5);
}

/* A single product's `parts` as a grid of pm row slices by pn column slices
 * (pm·pn = parts, no more slices than tiles along either side), the one whose
 * slices have the fewest rows plus columns. A thread packs the rows of op(A) and the columns
 * of op(B) of its slice, so slices of a few rows would have every thread pack
 * nearly all of op(B): on 16 threads of a Xeon, the linear layers of GPT-2
 * small (1,024 tokens, d 768) ran 7.0-7.4x faster than on one thread when
 * split into 16 slices of 64 rows. A prime count of parts stays one strip. */
static void choose_grid(int M, int N, int m_units, int n_units, int parts, int *pm, int *pn)
{
    *pm = M >= N ? min_int(parts, m_units) : 1;
    *pn = M >= N ? 1 : min_int(parts, n_units);
    double best = (double)M / *pm + (double)N / *pn;
    for (int r = 1; r <= parts; r++) {
        const int c = parts / r;
        if (r * c != parts || r > m_units || c > n_units)
            continue;
        /* each slice's packing: its rows and its columns, times K */
        const double cost = (double)M / r + (double)N / c;
        if (cost < best) {
            best = cost;
            *pm = r;
            *pn = c;
        }
    }
}

/* How a call's product is cut into tasks (see gemm_run). */
typedef struct {
    const hl_real *A, *B;
    hl_real *C;
    size_t stride_a, stride_b, stride_c;
    int parts, pm, pn, m_units, n_units, tasks;
    int rows_max, cols_max; /* the most rows and columns of a slice */
    bool scale_only;        /* K or alpha 0: C is only scaled */
} gemm_split;

/* Tasks t0..t1 of sp on the calling thread. */
static void run_tasks(const gemm_shape *s, const gemm_split *sp, int t0, int t1)
{
    /* Out of memory, the smallest blocks on the stack give the same sums. */
    _Alignas(ALIGN) hl_real stack_a[HL_GEMM_MAX_MR * KC_MIN];
    _Alignas(ALIGN) hl_real stack_b[KC_MIN * HL_GEMM_MAX_NR];
    gemm_work w = {0};
    if (!sp->scale_only && !work_alloc(&w, s, sp->rows_max, sp->cols_max))
        w = (gemm_work){stack_a, stack_b, s->mr, s->nr, KC_MIN};
    const int parts = sp->parts, pm = sp->pm, pn = sp->pn;
    for (int t = t0; t < t1; t++) {
        const int i = t / parts, p_m = t % parts / pn, p_n = t % parts % pn;
        const int m0 = part_start(sp->m_units, p_m, pm, s->upper) * s->mr;
        const int m1 = min_int(part_start(sp->m_units, p_m + 1, pm, s->upper) * s->mr, s->M);
        const int n0 = part_start(sp->n_units, p_n, pn, false) * s->nr;
        const int n1 = min_int(part_start(sp->n_units, p_n + 1, pn, false) * s->nr, s->N);
        hl_real *Ci = sp->C + (size_t)i * sp->stride_c;
        if (sp->scale_only)
            scale_block(s, Ci, m0, m1, n0, n1);
        else
            gemm_block(s, sp->A + (size_t)i * sp->stride_a, sp->B + (size_t)i * sp->stride_b,
                       Ci, m0, m1, n0, n1, &w);
    }
}

static void gemm_run(bool trans_a, bool trans_b, int M, int N, int K, hl_real alpha,
                     const hl_real *A, int lda, const hl_real *B, int ldb, hl_real beta,
                     hl_real *C, int ldc, int batch, size_t stride_a, size_t stride_b,
                     size_t stride_c, const hl_real *bias, hl_gemm_act_fn *act, hl_real *gelu,
                     bool upper)
{
    if (M <= 0 || N <= 0 || K < 0 || batch <= 0)
        return;
    const hl_kernel_set *ks = hl_kernels();
    const hl_gemm_kernel *kern = choose_kernel(ks->gemm, M, N);
    /* Whole slivers are read in place, not packed, where an operand is laid
     * out as a kernel reads it (A transposed, or not for kernels with
     * fn_rows; B untransposed) and packing would not pay: a sliver is used
     * by few tiles (N or M small), and its rows are few (K small) or reread
     * too seldom to fight over cache sets. A transposed A whose rows lie a
     * multiple of 4 KiB apart (M = 1024, 2048, ...) maps every row of a
     * sliver to the same L1 sets: reread by many tiles (N > 128), it is
     * packed even when K is small (perf: its in-place kernel ran at 55-75%
     * of the packed one's rate at M >= 1024, N >= 256, K = 64). Rows exactly
     * 4 or 8 KiB apart (1,024 or 2,048 keys of attention's probabilities)
     * stall the in-place kernel at any N once K passes 64: batches of four
     * (1024, N 32-128, K 1024) products, one thread, ran at 36-78 GFLOP/s in
     * place and 68-98 packed on a Zen 4 core's avx512 kernels (avx2: 5 %
     * slower to 12 % faster packed; portable: 10 % slower to 6 % faster),
     * where with rows 12, 16 or 32 KiB apart in place was the faster by
     * 2-37 %. Why those two strides, perf (cpu-clock only) does not say. */
    const size_t row_bytes = (size_t)lda * sizeof(hl_real);
    const bool set_conflicts = trans_a && row_bytes % 4096 == 0;
    const bool stalls = trans_a && (row_bytes == 4096 || row_bytes == 8192) && K > 64;
    const bool direct_a = (trans_a || kern->fn_rows) && alpha == 1 && !stalls &&
                          (N <= 128 || (K <= 64 && !set_conflicts));
    const bool direct_b = !trans_b && (M <= MC || K <= 64);
    const gemm_shape s = {.trans_a = trans_a,
                          .trans_b = trans_b,
                          .M = M,
                          .N = N,
                          .K = K,
                          .alpha = alpha,
                          .beta = beta,
                          .lda = (size_t)lda,
                          .ldb = (size_t)ldb,
                          .ldc = (size_t)ldc,
                          .kern = kern,
                          .pack = ks->gemm_pack,
                          .pack_transposed = ks->gemm_pack_transposed,
                          .mr = kern->mr,
                          .nr = kern->nr,
                          .direct_a = direct_a,
                          .direct_b = direct_b,
                          .upper = upper,
                          .bias = bias,
                          .act = act,
                          .gelu = gelu};
    const bool scale_only = K == 0 || alpha == 0;

    /* Tasks are (matrix, part) pairs, a part being a slice of the matrix's
     * rows (or of its columns, when it is wider than tall) in whole tiles,
     * of an upper triangle's rows as much of its area each.
     * Matrices are split only as far as needed to give every thread an equal
     * share; each element is still summed by one thread in one order. */
    int threads = 1;
#ifdef _OPENMP
    const double work = (double)batch * M * N * (K > 0 ? K : 1) * (upper ? 0.5 : 1);
    if (work >= GEMM_PARALLEL_MIN_WORK && !omp_in_parallel()) {
        const double shares = work / GEMM_PARALLEL_MIN_WORK;
        threads = omp_get_max_threads();
        if (shares < threads)
            threads = shares < 2 ? 2 : (int)shares;
    }
#endif
    int parts = 1;
    while ((batch * parts) % threads != 0 && batch * parts < 8 * threads)
        parts++;
    const int m_units = (M + s.mr - 1) / s.mr, n_units = (N + s.nr - 1) / s.nr;
    int pm, pn;
    if (batch == 1 && !upper) {
        choose_grid(M, N, m_units, n_units, parts, &pm, &pn);
    } else {
        const bool split_rows = upper || M >= N;
        pm = split_rows ? min_int(parts, m_units) : 1;
        pn = split_rows ? 1 : min_int(parts, n_units);
    }
    parts = pm * pn;
    const int tasks = batch * parts;
    if (threads > tasks)
        threads = tasks;
    int rows_max = 0, cols_max = 0;
    for (int p = 0; p < pm; p++)
        rows_max = max_int(rows_max, (part_start(m_units, p + 1, pm, upper) -
                                      part_start(m_units, p, pm, upper)) * s.mr);
    for (int p = 0; p < pn; p++)
        cols_max = max_int(cols_max, (part_start(n_units, p + 1, pn, false) -
                                      part_start(n_units, p, pn, false)) * s.nr);

    const gemm_split sp = {.A = A, .B = B, .C = C, .stride_a = stride_a, .stride_b = stride_b,
                           .stride_c = stride_c, .parts = parts, .pm = pm, .pn = pn,
                           .m_units = m_units, .n_units = n_units, .tasks = tasks,
                           .rows_max = rows_max, .cols_max = cols_max,
                           .scale_only = scale_only};
#ifdef _OPENMP
    if (threads > 1) {
#pragma omp parallel num_threads(threads)
        {
            /* equal contiguous shares, in thread order */
            const int id = omp_get_thread_num(), n = omp_get_num_threads();
            run_tasks(&s, &sp, (int)((int64_t)tasks * id / n),
                      (int)((int64_t)tasks * (id + 1) / n));
        }
        return;
    }
#endif
    /* One thread runs every task without a parallel region: even unused, one
     * costs a few µs in libgomp, as much as a tenth of a 128×128×128 product. */
    run_tasks(&s, &sp, 0, tasks);
}

void hl_gemm_batched(bool trans_a, bool trans_b, int M, int N, int K, hl_real alpha,
                     const hl_real *A, int lda, const hl_real *B, int ldb, hl_real beta,
                     hl_real *C, int ldc, int batch, size_t stride_a, size_t stride_b,
                     size_t stride_c)
{
    gemm_run(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, batch, stride_a,
             stride_b, stride_c, NULL, NULL, NULL, false);
}

void hl_gemm(bool trans_a, bool trans_b, int M, int N, int K, hl_real alpha, const hl_real *A,
             int lda, const hl_real *B, int ldb, hl_real beta, hl_real *C, int ldc)
{
    gemm_run(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, 1, 0, 0, 0, NULL,
             NULL, NULL, false);
}

void hl_gemm_upper(bool trans_a, bool trans_b, int N, int K, hl_real alpha, const hl_real *A,
                   int lda, const hl_real *B, int ldb, hl_real beta, hl_real *C, int ldc)
{
    gemm_run(trans_a, trans_b, N, N, K, alpha, A, lda, B, ldb, beta, C, ldc, 1, 0, 0, 0, NULL,
             NULL, NULL, true);
}

void hl_gemm_bias_gelu(bool trans_a, bool trans_b, int M, int N, int K, const hl_real *A,
                       int lda, const hl_real *B, int ldb, const hl_real *bias, hl_real *C,
                       hl_gemm_act_fn *act, hl_real *gelu, int ldc)
{
    gemm_run(trans_a, trans_b, M, N, K, 1, A, lda, B, ldb, 0, C, ldc, 1, 0, 0, 0, bias, act,
             gelu, false);
}
