#include "train/dist.h"

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef HL_MPI
#include <mpi.h>
#endif

#ifdef HL_REAL_DOUBLE
#define MPI_REAL_TYPE MPI_DOUBLE
#else
#define MPI_REAL_TYPE MPI_FLOAT
#endif

#ifdef HL_MPI

/* Element counts of MPI calls are ints: larger buffers go in chunks of at most
 * this many. HL_DIST_MAX_COUNT in the environment lowers it, so tests can run
 * the chunked path without 2^31-element buffers. */
static size_t max_count = INT_MAX;

static void read_max_count(void)
{
    const char *text = getenv("HL_DIST_MAX_COUNT");
    char *end = NULL;
    long long n = text ? strtoll(text, &end, 10) : 0;
    if (text && *end == '\0' && n >= 1 && n <= INT_MAX)
        max_count = (size_t)n;
}

/* The next chunk of a buffer of n elements, done of them already sent. */
static int chunk_count(size_t done, size_t n)
{
    return (int)(n - done < max_count ? n - done : max_count);
}

static void bcast_chunked(void *data, size_t n, MPI_Datatype type, size_t elem_size)
{
    unsigned char *p = data;
    for (size_t done = 0; done < n;) {
        int count = chunk_count(done, n);
        MPI_Bcast(p + done * elem_size, count, type, 0, MPI_COMM_WORLD);
        done += (size_t)count;
    }
}

static void allreduce_sum_chunked(hl_real *data, size_t n)
{
    for (size_t done = 0; done < n;) {
        int count = chunk_count(done, n);
        MPI_Allreduce(MPI_IN_PLACE, data + done, count, MPI_REAL_TYPE, MPI_SUM, MPI_COMM_WORLD);
        done += (size_t)count;
    }
}

static uint64_t fnv1a(const void *bytes, size_t n)
{
    const unsigned char *p = bytes;
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ULL;
    return h;
}

void hl_dist_init(int *argc, char ***argv)
{
    int started = 0;
    MPI_Initialized(&started);
    if (!started)
        MPI_Init(argc, argv);
    /* Errors in collectives end the job with a message rather than hang. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    read_max_count();
}

/* Before hl_dist_init (e.g. in a test) a process is rank 0 of 1. */
static bool mpi_running(void)
{
    int started = 0, finished = 0;
    MPI_Initialized(&started);
    MPI_Finalized(&finished);
    return started && !finished;
}

void hl_dist_finalize(void)
{
    if (mpi_running())
        MPI_Finalize();
}

int hl_dist_rank(void)
{
    int rank = 0;
    if (mpi_running())
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    return rank;
}

int hl_dist_size(void)
{
    int size = 1;
    if (mpi_running())
        MPI_Comm_size(MPI_COMM_WORLD, &size);
    return size;
}

void hl_dist_abort(int status)
{
    fflush(stdout);
    fflush(stderr);
    if (hl_dist_size() > 1)
        MPI_Abort(MPI_COMM_WORLD, status);
    hl_dist_finalize();
    exit(status);
}

/* Gathers one hash per rank and names the first rank that differs from rank 0. */
static hl_status check_hashes(uint64_t mine, const char *what, hl_error *err)
{
    int size = hl_dist_size();
    if (size == 1)
        return HL_OK;
    uint64_t *all = malloc(sizeof *all * (size_t)size);
    if (!all)
        return hl_error_set(err, HL_ERR_NOMEM, "dist: out of memory");
    MPI_Allgather(&mine, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, MPI_COMM_WORLD);
    int differs = -1;
    for (int r = 1; r < size && differs < 0; r++)
        if (all[r] != all[0])
            differs = r;
    free(all);
    if (differs >= 0)
        return hl_error_set(err, HL_ERR_STATE, "dist: rank %d's %s differs from rank 0's "
                            "(%d ranks)", differs, what, size);
    return HL_OK;
}

hl_status hl_dist_check_same(const char *text, hl_error *err)
{
    return check_hashes(fnv1a(text, strlen(text)), "configuration", err);
}

double hl_dist_sum(double value)
{
    double total = value;
    if (hl_dist_size() > 1)
        MPI_Allreduce(&value, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return total;
}

void hl_dist_broadcast_params(hl_params *params)
{
    if (hl_dist_size() > 1)
        bcast_chunked(hl_params_values(params), hl_params_count(params), MPI_REAL_TYPE,
                      sizeof(hl_real));
}

void hl_dist_allreduce_grads(hl_params *params)
{
    /* One call over the whole contiguous block (per 2^31 - 1 elements). Open
     * MPI's reduction order is fixed for a given rank count, so every rank gets
     * the same bits. */
    if (hl_dist_size() > 1)
        allreduce_sum_chunked(hl_params_grads(params), hl_params_count(params));
}

void hl_dist_gather(const void *mine, int bytes, void *all)
{
    if (hl_dist_size() > 1)
        MPI_Gather(mine, bytes, MPI_BYTE, all, bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
    else
        memcpy(all, mine, (size_t)bytes);
}

hl_status hl_dist_check_params_equal(const hl_params *params, hl_error *err)
{
    uint64_t h = fnv1a(hl_params_values(params), hl_params_count(params) * sizeof(hl_real));
    return check_hashes(h, "parameters", err);
}

#else /* one process */

void hl_dist_init(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
}

void hl_dist_finalize(void) {}
int hl_dist_rank(void) { return 0; }
int hl_dist_size(void) { return 1; }

void hl_dist_abort(int status)
{
    fflush(stdout);
    exit(status);
}

hl_status hl_dist_check_same(const char *text, hl_error *err)
{
    (void)text;
    (void)err;
    return HL_OK;
}

double hl_dist_sum(double value) { return value; }
void hl_dist_broadcast_params(hl_params *params) { (void)params; }
void hl_dist_allreduce_grads(hl_params *params) { (void)params; }

void hl_dist_gather(const void *mine, int bytes, void *all)
{
    memcpy(all, mine, (size_t)bytes);
}

hl_status hl_dist_check_params_equal(const hl_params *params, hl_error *err)
{
    (void)params;
    (void)err;
    return HL_OK;
}

#endif

void hl_dist_shard(int rows, int *begin, int *end)
{
    int rank = hl_dist_rank(), size = hl_dist_size();
    *begin = (int)((int64_t)rows * rank / size);
    *end = (int)((int64_t)rows * (rank + 1) / size);
}
