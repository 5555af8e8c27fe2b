/*
 * mha.h: multi-head attention as a composition of headlab ops, so its
 * backward comes from autograd and no attention-specific gradient code exists.
 *
 *   MultiHead(Q,K,V) = Concat(head_1..head_H)·W_Oᵀ + b_O,
 *   head_h = softmax(Q_h K_hᵀ / √D + mask) V_h,   D = E / H
 *
 * Options (hl_mha_config): smeared keys replace K_h by hl_smear_docs(K_h)
 * (within the masks' documents), then QK-norm replaces Q_h and K_h by
 * hl_rmsnorm over D with a learned gain (D) shared by the layer's heads, then
 * rotary positions replace Q_h and K_h by hl_rope(Q_h) and hl_rope(K_h), on
 * both paths below. Traces and patches of q and k see them before all three,
 * as TransformerLens's hook_q and hook_k do (its hook_rot_q/k come after).
 *
 * With fewer key/value heads than query heads (grouped-query attention), k
 * and v are projected per key/value head and handed to each query head of
 * its group (hl_gather_heads, ops/gather_heads.h) before either path, so
 * traces and patches of k and v see one (B,H,S,D) tensor per query head.
 *
 * Weights use PyTorch's nn.MultiheadAttention state_dict names under a prefix:
 * `<prefix>in_proj_weight (3E,E)` and `<prefix>in_proj_bias (3E)` when kdim =
 * vdim = E, otherwise `q_proj_weight (E,E)`, `k_proj_weight (E,kdim)`,
 * `v_proj_weight (E,vdim)` and `in_proj_bias (3E)`; then `out_proj.weight
 * (E,E)` and `out_proj.bias (E)`. Biases exist only with bias on. After
 * pruning, H·D < E takes the place of E as the in-projection's output width
 * and the out-projection's input width.
 *
 * Analysis changes a forward pass, never the module: a run (hl_mha_run) may
 * multiply head h's output by a gate g_h (g_h = 0 ablates it; with a gate
 * that requires grad, ∂L/∂g_h after backward is the head-importance score of
 * Michel et al. 2019), add an offset to the head outputs (mean ablation), and
 * ask for a trace of the attention probabilities and head outputs. A module is
 * therefore const in every forward pass and may serve several at once.
 *
 * Two paths compute the heads:
 *   - the composed ops (matmul, scale, masks, softmax, matmul), the reference,
 *     which keep the probabilities (a trace needs them);
 *   - hl_attention (ops/attention.c), one fused op: it skips causally
 *     masked tiles, and past 256×256 scores a head it never holds the
 *     (B,H,T,S) probabilities, so memory grows with T, not T².
 * The run picks (hl_mha_path): a trace or a pattern patch takes the composed
 * ops; otherwise HL_MHA_AUTO takes the fused op: faster than the composed ops
 * at most sizes measured, level or a few percent behind on one head of 1,024
 * keys (docs/performance.md, `make bench`'s MHA rows), and without their
 * (B,H,T,S) probabilities past 256×256 scores a head.
 * HL_MHA_COMPOSED and HL_MHA_FUSED force a path.
 * Both agree to rounding (tests/test_attention.c), and the gate and offset
 * apply to the head outputs on either. Neither has attention dropout.
 * On the fused path the mask tensors are read again by backward: keep them
 * unchanged until hl_graph_backward has run.
 *
 *     hl_params *p = hl_params_new();
 *     hl_mha mha;
 *     hl_mha_config cfg = {.embed_dim = 64, .num_heads = 4, .bias = true};
 *     hl_mha_declare(&mha, p, "attn.", &cfg, &err);
 *     hl_params_commit(p);
 *     hl_mha_init_weights(&mha, &rng);
 *     hl_mha_masks masks = {.causal = true};
 *     hl_tensor *y = hl_mha_forward(g, &mha, x, x, x, &masks, NULL);
 *
 *     hl_mha_trace trace;                                  // attn (B,H,T,S), heads
 *     hl_mha_run run = {.gate = gate, .trace = &trace};    // gate (H), e.g. 1,0,1,1
 *     y = hl_mha_forward(g, &mha, x, x, x, &masks, &run);
 *
 *     // head 2's output replaced by a clean run's (activation patching)
 *     hl_act_patch z = {.act = HL_ACT_Z, .value = clean_heads, .where = head2};  // head2 (1,H,1,1)
 *     y = hl_mha_forward(g, &mha, x, x, x, &masks, &(hl_mha_run){.patches = &z, .n_patches = 1});
 */
#ifndef HL_MHA_H
#define HL_MHA_H

#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"
#include "core/graph.h"
#include "core/params.h"
#include "core/rng.h"

typedef struct hl_mha_config {
    int embed_dim; /* E */
    int num_heads; /* H; must divide E */
    int kdim;      /* width of keys; 0 means E */
    int vdim;      /* width of values; 0 means E */
    bool bias;     /* in-projection biases, and the out-projection's unless no_out_bias */
    bool no_out_bias; /* with bias: q, k and v biased, the output not (Qwen2) */
    int head_dim;  /* D; 0 means E / H. Set by pruning, where H·D < E */
    /* Grouped-query attention: key/value heads, 0 meaning H. Query head h
     * reads key/value head kv_of[h], or h / (H / kv_heads) when kv_of is NULL
     * (then kv_heads must divide H). Needs kdim = vdim = E. */
    int kv_heads;
    const int16_t *kv_of; /* (H), the caller's, read at every forward; or NULL */
    /* With rotary_base: the first rotary_dims (even) of each head's D are
     * rotated, the rest pass unchanged (GPT-NeoX's partial rotary); 0 means D. */
    int rotary_dims;
    /* > 0: rotary positions (hl_rope, ops/rope.h: rotate-half) on q and k, with
     * this base (10000 in RoFormer and Llama); 0: none. D must be even.
     * Queries and keys are both numbered from position 0, as in
     * self-attention; for cross-attention that is rarely what is meant. */
    double rotary_base;
    /* Smeared keys (hl_smear_docs, ops/smear.h): each head mixes every key
     * with the one before by a learned weight σ(smear_h), parameter
     * `<prefix>smear (H)`, but the first key of each of the masks' documents. */
    bool smear_keys;
    /* QK-norm (Henry et al. 2020; OLMo 2, Qwen3, modded-nanogpt): every
     * head's q and k are RMS-normalised over D before rotation, x /
     * sqrt(mean(x²) + qk_norm_eps) · gain, with the gains `<prefix>q_norm.weight
     * (D)` and `<prefix>k_norm.weight (D)` (1 at init; Qwen3's q_norm and
     * k_norm). qk_norm_eps 0 means HL_MHA_QK_NORM_EPS. */
    bool qk_norm;
    double qk_norm_eps;
} hl_mha_config;

/* QK-norm's epsilon when the config leaves it 0 (PyTorch's LayerNorm default). */
#define HL_MHA_QK_NORM_EPS 1e-5

typedef struct hl_mha {
    hl_mha_config cfg;      /* with kdim, vdim and head_dim filled in */
    bool packed;            /* one (3E,E) in-projection */
    /* (HD + 2·KD, E), (HD + 2·KD) with K = kv_heads: q of every head, then
     * k, then v of every key/value head */
    hl_tensor *in_proj_weight, *in_proj_bias;
    hl_tensor *q_proj_weight, *k_proj_weight, *v_proj_weight; /* unpacked only */
    hl_tensor *out_proj_weight, *out_proj_bias;           /* (E,HD), (E) */
    hl_tensor *smear;                                     /* (H) with smear_keys, else NULL */
    hl_tensor *q_norm, *k_norm;                           /* (D) each with qk_norm, else NULL */
} hl_mha;

/* Which keys each query may see. Mask tensors use nonzero = true. */
typedef struct hl_mha_masks {
    bool causal;                  /* key s hidden from query t when s > t */
    const hl_tensor *key_padding; /* (B,S): nonzero = padding, hidden from all */
    const hl_tensor *blocked;     /* (T,S) or (B,T,S): nonzero = hidden */
    const hl_tensor *additive;    /* (T,S) or (B,T,S): added to the scores */
    const hl_tensor *doc_ids;     /* (B,S): documents; query t (at key position t) sees
                                   * only keys of its own (ops/mask.h hl_mask_documents) */
} hl_mha_masks;

/* What a forward pass can hand back for inspection (named graph tensors). */
typedef struct hl_mha_trace {
    hl_tensor *attn;  /* (B,H,T,S) attention probabilities */
    hl_tensor *heads; /* (B,H,T,D) each head's output after gate and offset, before W_O */
    hl_tensor *q, *k, *v; /* (B,H,T,D), (B,H,S,D), (B,H,S,D): projections with bias, unscaled,
                           * before smearing and rotation */
} hl_mha_trace;

/* The activations a pass can replace (hl_act_patch), as TransformerLens
 * names them: q, k, v (hook_q/k/v), pattern (hook_pattern), z (hook_z: the
 * head outputs after gate and offset, before W_O); and for a GPT the residual
 * stream entering and leaving a block (hook_resid_pre/post). */
typedef enum hl_act {
    HL_ACT_Q,
    HL_ACT_K,
    HL_ACT_V,
    HL_ACT_PATTERN,
    HL_ACT_Z,
    HL_ACT_RESID_PRE,
    HL_ACT_RESID_POST,
    HL_ACTS
} hl_act;

/* Replaces activation `act` where `where` is 1 by `value`:
 *     act' = act - act * where + value * where   (exactly value where 1)
 * value has the activation's shape (e.g. a clean run's trace, copied out of
 * its graph); where broadcasts into it (hl_add's rule: (1,H,1,1) one head,
 * (1,1,T,1) some positions, (1,H,T,1) both) or is NULL for everywhere. Both
 * are read, never written, and must outlive the graph's backward. Gradients
 * flow through act' to the activation (where 0) and to value if it wants
 * them. */
typedef struct hl_act_patch {
    int layer; /* the GPT block; hl_mha_forward ignores it */
    hl_act act;
    const hl_tensor *value;
    const hl_tensor *where;
} hl_act_patch;

/* act with the patches of kind `kind` among the n given applied, in order
 * (layers are not looked at); &g->poison, with the error in g, when a value
 * does not have act's shape. The models call it at each activation. */
hl_tensor *hl_act_patch_apply(hl_graph *g, hl_tensor *act, hl_act kind,
                              const hl_act_patch *patches, int n_patches);

typedef enum hl_mha_path {
    HL_MHA_AUTO,     /* the faster path for the size, the composed ops under a trace */
    HL_MHA_COMPOSED, /* the composed ops */
    HL_MHA_FUSED,    /* hl_attention (a trace still takes the composed ops) */
} hl_mha_path;

/* One forward pass's changes and requests; every field may be NULL. */
typedef struct hl_mha_run {
    /* (H): head h's output is multiplied by gate_h. A heap or graph tensor of
     * the caller's; when it requires grad, backward fills its gradient. */
    hl_tensor *gate;
    /* (H,T,D): added to the (gated) head outputs; its T must match the
     * queries'. With gate_h = 0 and head_offset_h = head h's mean output,
     * head h is mean-ablated. */
    const hl_tensor *head_offset;
    /* Filled with this pass's attention, head outputs and projections;
     * asking for it selects the composed path (see above). */
    hl_mha_trace *trace;
    hl_mha_path path; /* HL_MHA_AUTO (0) unless set */
    /* Activations to replace (the q, k, v, pattern and z kinds; a pattern
     * patch selects the composed path, the others keep either). */
    const hl_act_patch *patches;
    int n_patches;
} hl_mha_run;

/* Declares the module's parameters in p (prefix may be "" or e.g.
 * "blocks.0.attn."). HL_OK, or an error in err. */
hl_status hl_mha_declare(hl_mha *m, hl_params *p, const char *prefix,
                         const hl_mha_config *cfg, hl_error *err);
/* PyTorch's initialisation, after hl_params_commit: xavier-uniform over the
 * in-projection (each unpacked weight on its own), zero biases, out-projection
 * weight U(±1/√E). */
void hl_mha_init_weights(hl_mha *m, hl_rng *rng);
/* H·D: the width of the concatenated heads (E unless heads were pruned). */
int hl_mha_inner_dim(const hl_mha *m);
/* The key/value head query head h reads (h itself without grouping). */
int hl_mha_kv_head(const hl_mha *m, int h);
/* k or v (B,K,S,D) of the key/value heads handed to every query head
 * (B,H,S,D), head h its hl_mha_kv_head; x itself without grouping. */
hl_tensor *hl_mha_ungroup(hl_graph *g, const hl_mha *m, hl_tensor *x);

/* query (B,T,E), key (B,S,kdim), value (B,S,vdim) -> (B,T,E). masks and
 * run may be NULL. Pass the same tensor as query, key and value for
 * self-attention (one packed projection). */
hl_tensor *hl_mha_forward(hl_graph *g, const hl_mha *m, hl_tensor *query, hl_tensor *key,
                          hl_tensor *value, const hl_mha_masks *masks, const hl_mha_run *run);

#endif
