/*
 * muon.h: the Newton–Schulz orthogonalisation at the heart of the Muon
 * optimizer (Jordan et al. 2024), on the GEMM kernels of ops/gemm.h. The
 * optimizer itself is a kind of train/optim.h; this is its matrix step.
 *
 * X ← G / (‖G‖_F + 1e-7), then `steps` times X ← aX + (bA + cA²)X with
 * A = XXᵀ and (a, b, c) = (3.4445, −4.7750, 2.0315): a quintic iteration that
 * pushes every singular value of X towards 1 (to roughly 0.7 … 1.2), so the
 * result is close to UVᵀ of G's SVD. A tall matrix (rows > cols) is iterated
 * as its transpose, so A is the smaller Gram matrix.
 *
 *     hl_real *work = malloc(hl_muon_work_size(rows, cols) * sizeof *work);
 *     hl_muon_orthogonalize(g, rows, cols, 5, work);   // g (rows,cols) in place
 *
 * A matrix with twice as many columns as rows or more (after the transpose)
 * runs the same iteration on its Gram matrix XXᵀ: the same result in exact
 * arithmetic for fewer multiply-adds (train/muon.c says how). Each product is
 * an hl_gemm (a symmetric one its upper triangle only, hl_gemm_upper, copied
 * below), parallel over its output and with every element summed in a fixed
 * order, and the elementwise passes round each operation once, so the result
 * is bitwise the same for any thread count and on every FMA kernel set.
 */
#ifndef HL_MUON_H
#define HL_MUON_H

#include <stddef.h>

#include "core/real.h"

/* The Newton–Schulz coefficients of Muon's published iteration. */
#define HL_MUON_A 3.4445
#define HL_MUON_B (-4.7750)
#define HL_MUON_C 2.0315

/* Values of work hl_muon_orthogonalize needs for a (rows,cols) matrix. */
size_t hl_muon_work_size(int rows, int cols);

/* g (rows,cols), row-major, replaced by its orthogonalisation after `steps`
 * Newton–Schulz steps; work holds hl_muon_work_size(rows, cols) values. */
void hl_muon_orthogonalize(hl_real *g, int rows, int cols, int steps, hl_real *work);

#endif
