/*
 * headlab.h: the one public header of headlab, a small graph-based autodiff
 * framework in C11 for training small transformers and studying attention.
 * It includes every public header (the op headers of ops/ through
 * ops/ops.h); the internal ones, listed in the Makefile's INTERNAL_HEADERS,
 * are not installed.
 *
 *     #include "headlab.h"
 *
 *     hl_graph *g = hl_graph_new(0);
 *     hl_tensor *y = hl_softmax(g, hl_linear(g, x, w, b));
 *     hl_tensor *loss = hl_cross_entropy(g, y, targets, -1);
 *     if (hl_graph_backward(g, loss) != HL_OK)
 *         fprintf(stderr, "%s\n", hl_graph_message(g));
 *
 * Layers, each building only on some of those before it (tools/check_layers.sh
 * has the table):
 *   core/       the engine: tensors, step arena, autograd graph, params, RNG,
 *               errors, the op vocabulary, the gradient checker
 *   files/      whole-or-nothing file writes, directories, reading a file
 *   text/       vocabularies: bytes, words, BPE
 *   data/       token files, tokenizing a text into one, the window-copy
 *               intervention (spans written again later in a window)
 *   ops/        differentiable ops, a forward and a backward kernel each
 *   cli/        the programs' option parser and process set-up
 *   models/     multi-head attention composed of ops, a GPT-style model
 *   viz/        PNG heatmaps, grids, line plots and circuit diagrams
 *   train/      optimizers, the training step and run, evaluation sets, progress
 *               display, thread tuning, MPI
 *   io/         safetensors, checkpoints, model files, CSV logs and reading CSV
 *   tasks/      datasets and probes: the toy task's sequences and scores, the
 *               repeated-random-tokens induction probe
 *   gradcheck/  the gradient-check catalogue (a case per op) and step sweeps
 *   analysis/   head detectors and roles, ablation, importance, pruning,
 *               patching, composition, copying
 *   report/     a head study's files: CSV tables, pictures, the HTML report
 */
#ifndef HEADLAB_H
#define HEADLAB_H

#include "core/arena.h"
#include "core/error.h"
#include "core/gradcheck.h"
#include "core/graph.h"
#include "core/pages.h"
#include "core/params.h"
#include "core/profile.h"
#include "core/real.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "files/atomic.h"
#include "files/fs.h"
#include "text/vocab.h"
#include "data/documents.h"
#include "data/token_file.h"
#include "data/token_ids.h"
#include "data/tokenize.h"
#include "data/window_copy.h"
#include "ops/isa.h"
#include "ops/ops.h"
#include "cli/cli.h"
#include "models/gpt.h"
#include "models/gpt_cache.h"
#include "models/gpt_groups.h"
#include "models/head_set.h"
#include "models/mha.h"
#include "viz/diagram.h"
#include "viz/heatmap.h"
#include "viz/plot.h"
#include "train/dist.h"
#include "train/eval.h"
#include "train/muon.h"
#include "train/optim.h"
#include "train/progress.h"
#include "train/run.h"
#include "train/step.h"
#include "train/threads.h"
#include "io/checkpoint.h"
#include "io/csv_log.h"
#include "io/csv_read.h"
#include "io/hf.h"
#include "io/model_io.h"
#include "io/safetensors.h"
#include "tasks/probe.h"
#include "tasks/toy_task.h"
#include "gradcheck/cases.h"
#include "gradcheck/sweep.h"
#include "analysis/composition.h"
#include "analysis/copying.h"
#include "analysis/detectors.h"
#include "analysis/head_effects.h"
#include "analysis/head_maps.h"
#include "analysis/heads.h"
#include "analysis/linalg.h"
#include "analysis/patch_pairs.h"
#include "analysis/patching.h"
#include "analysis/prune.h"
#include "analysis/roles.h"
#include "report/head_files.h"
#include "report/head_report.h"
#include "report/html.h"

#endif
