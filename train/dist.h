/*
 * dist.h: data-parallel training across processes with MPI (Open MPI).
 *
 * Built with `make MPI=1` (HL_MPI defined, compiled by mpicc) these functions
 * talk to the other ranks; in a normal build they describe a single process
 * (rank 0 of 1) and do nothing, so programs call them unconditionally.
 *
 * The recipe, as in llm.c and PyTorch's DDP: every rank builds the same model;
 * rank 0's parameters are broadcast; every rank draws the same global batch
 * and trains on its own slice; after backward the gradients are summed over
 * the ranks in one MPI_Allreduce over the contiguous gradient block, so every
 * rank takes the same optimizer step and stays identical.
 *
 *     hl_dist_init(&argc, &argv);
 *     if (hl_dist_check_same("config ...", &err) != HL_OK) hl_dist_abort(2);
 *     hl_dist_broadcast_params(params);
 *     ... loss scaled by (local targets / global targets), backward ...
 *     hl_dist_allreduce_grads(params);
 *     hl_dist_finalize();
 *
 * Buffers of any size go through: MPI counts are ints, so calls are made per
 * chunk of at most INT_MAX elements (HL_DIST_MAX_COUNT=N in the environment
 * lowers that, for tests).
 */
#ifndef HL_DIST_H
#define HL_DIST_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "core/params.h"

/* Starts MPI (a no-op without HL_MPI). Safe to call once per process. */
void hl_dist_init(int *argc, char ***argv);
void hl_dist_finalize(void);
int hl_dist_rank(void);
int hl_dist_size(void);
/* Ends every rank of the job with this exit status (exit() in a single process). */
_Noreturn void hl_dist_abort(int status);

/* HL_OK when every rank passed the same text (a configuration, the seed, the
 * batch size...); otherwise HL_ERR_STATE with a message naming the ranks that
 * differ, on every rank. */
hl_status hl_dist_check_same(const char *text, hl_error *err);

/* The sum of value over the ranks, on every rank (e.g. a loss for display). */
double hl_dist_sum(double value);
/* Copies rank 0's parameter values to every rank. */
void hl_dist_broadcast_params(hl_params *params);
/* Replaces every rank's gradients by their sum over the ranks. */
void hl_dist_allreduce_grads(hl_params *params);
/* Rank 0's all (size × bytes) gets each rank's bytes of mine, in rank order
 * (e.g. every rank's RNG state for a checkpoint); the other ranks' all is
 * not touched (may be NULL). Every rank calls it. */
void hl_dist_gather(const void *mine, int bytes, void *all);
/* An FNV-1a hash of the parameter values' bytes; HL_OK when all ranks agree
 * (a debug check that the ranks are still identical). */
hl_status hl_dist_check_params_equal(const hl_params *params, hl_error *err);

/* Rows [begin, end) of a global batch of `rows` that this rank trains on. */
void hl_dist_shard(int rows, int *begin, int *end);

#endif
