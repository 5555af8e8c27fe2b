/*
 * hf_names.h: where each GPT parameter lives in a Hugging Face checkpoint of
 * an architecture, and how it is laid out there; shared by the loader and
 * the exporter (internal to io/).
 *
 * A parameter is one tensor, or the rows of up to three stacked (Llama's
 * q, k, v into in_proj_weight; its gate and up into mlp.fc.weight), stored
 * as they are, transposed (GPT-2's Conv1D keeps (in,out)), or with q, k and
 * v interleaved per head (GPT-NeoX's query_key_value: rows [h][q,k,v][D]
 * where the GPT has [q,k,v][h][D]).
 */
#ifndef HL_IO_HF_NAMES_H
#define HL_IO_HF_NAMES_H

#include <stdbool.h>

#include "core/tensor.h"
#include "io/hf.h"

typedef enum { HL_HF_AS_IS, HL_HF_TRANSPOSED, HL_HF_NEOX_QKV } hl_hf_layout;

#define HL_HF_PARTS_MAX 3

typedef struct {
    int n_parts;
    char name[HL_HF_PARTS_MAX][HL_NAME_MAX + 32]; /* the checkpoint's names */
    int rows[HL_HF_PARTS_MAX];                    /* each part's rows of the parameter */
    hl_hf_layout layout;
} hl_hf_source;

/* Where parameter `param` of m lives in arch's checkpoint; prefix is GPT-2's
 * "transformer." or "" (ignored by the others). False for a parameter the
 * architecture has no place for. */
bool hl_hf_source_of(hl_hf_arch arch, const char *prefix, const hl_gpt *m,
                     const hl_tensor *param, hl_hf_source *src);

/* Whether a checkpoint tensor is a buffer transformers saves but the model
 * recomputes (causal-mask and rotary tables): skipped on load. */
bool hl_hf_is_buffer(const char *name);

/* Converts between a parameter's values (ours, its rows x cols) and the
 * checkpoint's part values (theirs, the parts' rows stacked, in the source's
 * layout); heads and D describe GPT-NeoX's interleaving. */
void hl_hf_to_ours(const hl_hf_source *src, const hl_real *theirs, hl_real *ours, int rows,
                   int cols, int heads, int D);
void hl_hf_to_theirs(const hl_hf_source *src, const hl_real *ours, hl_real *theirs, int rows,
                     int cols, int heads, int D);

#endif
