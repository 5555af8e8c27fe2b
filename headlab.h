/*
 * headlab.h: the one public header of headlab, a small graph-based autodiff
 * framework in C11 for training small transformers and studying attention.
 *
 *     #include "headlab.h"
 *
 *     hl_graph *g = hl_graph_new(0);
 *     hl_tensor *y = hl_softmax(g, hl_linear(g, x, w, b));
 *     hl_tensor *loss = hl_cross_entropy(g, y, targets, -1);
 *     if (hl_graph_backward(g, loss) != HL_OK)
 *         fprintf(stderr, "%s\n", hl_graph_message(g));
 *
 * Modules: core/ (tensors, arena, graph, params, RNG, gradient check,
 * optimizers, safetensors and checkpoint I/O, PNG heatmaps), ops/
 * (differentiable ops), models/ (multi-head attention, a GPT-style model).
 */
#ifndef HEADLAB_H
#define HEADLAB_H

#include "core/arena.h"
#include "core/checkpoint.h"
#include "core/dist.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/gradcheck.h"
#include "core/gradcheck_sweep.h"
#include "core/graph.h"
#include "core/heatmap.h"
#include "core/optim.h"
#include "core/params.h"
#include "core/plot.h"
#include "core/progress.h"
#include "core/real.h"
#include "core/rng.h"
#include "core/safetensors.h"
#include "core/tensor.h"
#include "models/gpt.h"
#include "models/gradcheck_cases.h"
#include "models/heads.h"
#include "models/mha.h"
#include "ops/ops.h"

#endif
