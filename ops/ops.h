/*
 * ops.h: the differentiable ops. Each takes the graph first, computes its
 * result into the graph's arena and records a node for the backward pass when
 * an input requires grad (and grad mode is on).
 *
 * Shapes are row-major; "(...,K)" means any leading dims. On bad input an op
 * records an error naming itself and the shapes, e.g.
 *     linear: input (8,16,63) does not match weight (64,64)
 * and returns the graph's poisoned tensor; so does every op after it.
 *
 * Index arguments (token ids, targets) are int32 arrays copied into the arena,
 * so the caller's array may change as soon as the op returns.
 *
 *     hl_tensor *h  = hl_linear(g, x, w, b);              // (B,T,E)·(F,E)ᵀ + (F) -> (B,T,F)
 *     hl_tensor *s  = hl_matmul(g, q, k, HL_TRANS_B);     // (B,H,T,D)·(B,H,S,D)ᵀ -> (B,H,T,S)
 *     hl_tensor *p  = hl_softmax(g, hl_mask_causal(g, hl_scale(g, s, 0.25f)));
 */
#ifndef HL_OPS_H
#define HL_OPS_H

#include <stdint.h>

#include "core/graph.h"

/* ---- linear algebra (ops/linear.c, ops/matmul.c) ---- */

enum { HL_TRANS_A = 1, HL_TRANS_B = 2 };

/* x (...,K) · w(N,K)ᵀ + b(N) -> (...,N); b may be NULL. */
hl_tensor *hl_linear(hl_graph *g, hl_tensor *x, hl_tensor *w, hl_tensor *b);
/* hl_gelu(hl_linear(x, w, b)) as one op, with the same bits: the bias and the
 * GELU are taken inside the product's tiles (no passes of their own over the
 * (...,N) output), and backward keeps the pre-activation as hl_gelu does. */
hl_tensor *hl_linear_gelu(hl_graph *g, hl_tensor *x, hl_tensor *w, hl_tensor *b);
/* The same with GELU's tanh form: hl_gelu_tanh(hl_linear(x, w, b)) as one
 * op, with the same bits (GPT-2's MLP). */
hl_tensor *hl_linear_gelu_tanh(hl_graph *g, hl_tensor *x, hl_tensor *w, hl_tensor *b);
/* a (...,M,K) · b (...,K,N) -> (...,M,N), batched over equal leading dims; b may
 * also be rank 2 and shared by every batch. flags: HL_TRANS_A reads a as
 * (...,K,M), HL_TRANS_B reads b as (...,N,K); no transpose is materialised. */
hl_tensor *hl_matmul(hl_graph *g, hl_tensor *a, hl_tensor *b, int flags);

/* ---- shape (ops/shape.c) ---- */

/* A view: shares x's data. One dim may be -1 (inferred). */
hl_tensor *hl_reshape(hl_graph *g, hl_tensor *x, int rank, const int *shape);
/* Output dim i is input dim perm[i]; a contiguous copy. */
hl_tensor *hl_permute(hl_graph *g, hl_tensor *x, const int *perm);
/* Elements start..start+length-1 along dim (negative dims count from the
 * end); a contiguous copy. Splits a packed q|k|v projection. */
hl_tensor *hl_narrow(hl_graph *g, hl_tensor *x, int dim, int start, int length);
/* Swaps two dims; a contiguous copy. */
hl_tensor *hl_transpose(hl_graph *g, hl_tensor *x, int dim0, int dim1);

/* ---- elementwise and reductions (ops/elementwise.c, ops/reduce.c) ---- */

hl_tensor *hl_scale(hl_graph *g, hl_tensor *x, hl_real factor);
/* a + b and a * b, where b broadcasts into a's shape: b's dims, aligned to
 * the right, each equal a's or 1 (a bias (N) on (...,N); a gate (H,1,1) on
 * (B,H,T,D)). The result has a's shape. */
hl_tensor *hl_add(hl_graph *g, hl_tensor *a, hl_tensor *b);
hl_tensor *hl_mul(hl_graph *g, hl_tensor *a, hl_tensor *b);
/* Sum and mean of all elements -> (1). */
hl_tensor *hl_sum(hl_graph *g, hl_tensor *x);
hl_tensor *hl_mean(hl_graph *g, hl_tensor *x);

/* ---- softmax and attention masks (ops/softmax.c, ops/mask.c) ---- */

/* Softmax over the last dim, numerically stable. A row that is all -inf
 * (fully masked) gives zeros and passes zero gradient. */
hl_tensor *hl_softmax(hl_graph *g, hl_tensor *x);

/* Masks take attention scores (B,H,T,S) or (B,T,S) and return a copy with the
 * masked entries set to -inf; gradients flow only through the kept entries. */
/* Blocks key s for query t when s > t (queries may not look ahead). */
hl_tensor *hl_mask_causal(hl_graph *g, hl_tensor *scores);
/* key_is_padding (B,S): nonzero = that key is padding, no query attends to it. */
hl_tensor *hl_mask_key_padding(hl_graph *g, hl_tensor *scores, const hl_tensor *key_is_padding);
/* is_blocked (T,S) or (B,T,S): nonzero = query t may not attend to key s
 * (the polarity of PyTorch's boolean attn_mask). */
hl_tensor *hl_mask_blocked(hl_graph *g, hl_tensor *scores, const hl_tensor *is_blocked);
/* doc_ids (B,S): the document of each key position, query t being at
 * position t (as hl_mask_causal numbers them; T <= S). Blocks key s for
 * query t unless doc_ids[b,s] == doc_ids[b,t]: with the causal mask, a
 * block-diagonal mask that keeps attention inside each document of a packed
 * sequence. The ids are compared as values (whole numbers, e.g. 0, 0, 1, 1,
 * 1, 2). */
hl_tensor *hl_mask_documents(hl_graph *g, hl_tensor *scores, const hl_tensor *doc_ids);
/* bias (T,S) or (B,T,S) is added to the scores (-inf entries block); the bias
 * is a constant: it receives no gradient. */
hl_tensor *hl_mask_additive(hl_graph *g, hl_tensor *scores, const hl_tensor *bias);

/* ---- fused attention (ops/attention.c) ---- */

/* Which keys each query may see in hl_attention: the masks of the ops above,
 * with the same semantics and broadcasting, each optional. */
typedef struct hl_attention_masks {
    bool causal;                  /* key s hidden from query t when s > t */
    const hl_tensor *key_padding; /* (B,S): nonzero = padding, hidden from all */
    const hl_tensor *blocked;     /* (T,S) or (B,T,S): nonzero = hidden */
    const hl_tensor *additive;    /* (T,S) or (B,T,S): added to the scores (-inf hides) */
    const hl_tensor *doc_ids;     /* (B,S): key s hidden from query t in another document */
} hl_attention_masks;

/* Scaled dot-product attention as one op: q (B,H,T,D), k and v (B,H,S,D) ->
 * (B,H,T,D) = softmax(scale·q·kᵀ + masks)·v. It computes what hl_matmul,
 * hl_scale, the hl_mask_* ops, hl_softmax and hl_matmul compute in a row (a
 * fully masked query gives zeros and passes no gradient), but tile by tile
 * (flash attention), skipping causally masked tiles. Up to 256×256 scores a
 * head (T·S <= 65536) it takes whole score rows and, when recording, keeps
 * the (B,H,T,S) probabilities for backward, as the composed ops do; past that
 * the scores never exist whole, the node keeps one value per query, and
 * backward recomputes the probabilities. masks may be NULL. Backward reads
 * the mask tensors again: keep them, unchanged, until hl_graph_backward has
 * run. Attention dropout is not supported.
 *
 *     hl_attention_masks m = {.causal = true};
 *     hl_tensor *o = hl_attention(g, q, k, v, 1 / sqrtf(D), &m);
 */
hl_tensor *hl_attention(hl_graph *g, hl_tensor *q, hl_tensor *k, hl_tensor *v, hl_real scale,
                        const hl_attention_masks *masks);
/* The same with the heads merged: the output is (B,T,H·D), as an output
 * projection reads it, written in place by the kernel. The same bits as
 * hl_attention followed by hl_permute (0,2,1,3) and hl_reshape, without the
 * copy each way. */
hl_tensor *hl_attention_merged(hl_graph *g, hl_tensor *q, hl_tensor *k, hl_tensor *v,
                               hl_real scale, const hl_attention_masks *masks);

/* ---- transformer ops (ops/embedding.c, ops/layernorm.c, ops/rmsnorm.c,
 *      ops/residual.c, ops/gelu.c, ops/swiglu.c, ops/relu2.c, ops/rope.c, ops/qkv_heads.c,
 *      ops/gather_heads.c, ops/smear.c, ops/dropout.c, ops/cross_entropy.c) ---- */

/* weight (V,E) gathered at ids (shape given by rank/shape) -> (shape...,E). */
hl_tensor *hl_embedding(hl_graph *g, hl_tensor *weight, const int32_t *ids, int rank,
                        const int *shape);
/* Normalises over the last dim: (x - mean) / sqrt(var + eps) * gamma + beta,
 * var the biased variance (as PyTorch). gamma and beta (N) may be NULL. */
hl_tensor *hl_layernorm(hl_graph *g, hl_tensor *x, hl_tensor *gamma, hl_tensor *beta,
                        hl_real eps);
/* Normalises over the last dim by the root mean square: x / sqrt(mean(x²) +
 * eps) * gamma (Zhang & Sennrich 2019; Llama's RMSNorm). gamma (N) may be NULL. */
hl_tensor *hl_rmsnorm(hl_graph *g, hl_tensor *x, hl_tensor *gamma, hl_real eps);
/* A pre-norm transformer's residual junction in one op: *sum = a + b (a and b
 * of one shape), returned normalised as hl_layernorm or hl_rmsnorm would.
 * Both outputs take part in backward. The same bits as hl_add then the norm,
 * forward and backward, in one pass over the rows each way instead of three:
 * the sum is normalised while its row is in cache, and in backward the sum's
 * gradient becomes a's without a copy. On error *sum is the poisoned tensor
 * too. */
hl_tensor *hl_add_layernorm(hl_graph *g, hl_tensor *a, hl_tensor *b, hl_tensor *gamma,
                            hl_tensor *beta, hl_real eps, hl_tensor **sum);
hl_tensor *hl_add_rmsnorm(hl_graph *g, hl_tensor *a, hl_tensor *b, hl_tensor *gamma, hl_real eps,
                          hl_tensor **sum);
/* The exact GELU, x·Φ(x), as torch.nn.GELU() by default. */
hl_tensor *hl_gelu(hl_graph *g, hl_tensor *x);
/* GELU's tanh approximation, GPT-2's gelu_new and PyTorch's
 * gelu(x, approximate='tanh'): 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))),
 * computed as x·σ(2u) (the same value; no cancellation for negative x). */
hl_tensor *hl_gelu_tanh(hl_graph *g, hl_tensor *x);
/* SwiGLU's gate (Shazeer 2020): x (...,2F) -> (...,F), silu(x[..., :F]) ·
 * x[..., F:], silu(a) = a·σ(a). With x = linear(h, [W1; W3]) this is Llama's
 * silu(W1·h) ⊙ (W3·h). */
hl_tensor *hl_swiglu(hl_graph *g, hl_tensor *x);
/* ReLU², relu(x)² = max(x, 0)² (So et al. 2021's Primer; modded-nanogpt's
 * MLP), torch.relu(x).square(). Its slope 2·relu(x) is continuous; NaN
 * passes through. */
hl_tensor *hl_relu2(hl_graph *g, hl_tensor *x);
/* Rotary position embedding (Su et al. 2021) of x (...,T,D), D even, by the
 * rotate-half convention of GPT-NeoX and Llama: for i < D/2 and position t
 * (the index along dim -2), θ = t·base^(-2i/D) and
 *     y[i]       = x[i]·cos θ - x[i + D/2]·sin θ
 *     y[i + D/2] = x[i + D/2]·cos θ + x[i]·sin θ
 * The angles and their sines and cosines are computed in double, then rounded. */
hl_tensor *hl_rope(hl_graph *g, hl_tensor *x, hl_real base);
/* Partial rotary, as GPT-NeoX and Pythia (rotary_pct < 1): hl_rope over the
 * first rot_dims values of each row of D (rot_dims even, 2..D), with the
 * angles of a rot_dims-wide row, θ = t·base^(-2i/rot_dims) for i <
 * rot_dims/2; the other D - rot_dims values pass unchanged. hl_rope is the
 * case rot_dims = D, with the same bits. */
hl_tensor *hl_rope_partial(hl_graph *g, hl_tensor *x, hl_real base, int rot_dims);
/* Self-attention's packed projection qkv (B,T,3E), as hl_linear over PyTorch's
 * in_proj_weight gives it, split into heads: returns q and sets *k and *v,
 * each (B,H,T,D) with D = E/H, the node's three outputs. With rope_base > 0, q
 * and k come out rotated as by hl_rope(·, rope_base) (D even). One pass over
 * the data each way, with the same bits as hl_narrow, hl_reshape, hl_permute
 * and hl_rope in turn (ops/qkv_heads.c). On error *k and *v are the poisoned
 * tensor too. */
hl_tensor *hl_qkv_heads(hl_graph *g, hl_tensor *qkv, int heads, hl_real rope_base,
                        hl_tensor **k, hl_tensor **v);
/* The general form, for grouped-query attention (Llama 2/3's
 * num_key_value_heads) and partial rotary (Pythia's rotary_pct): qkv (B,T,(H
 * + 2·Hkv)·D) laid out [q of H heads | k of Hkv | v of Hkv], as hl_linear
 * over the concatenated q, k and v projections gives it; q (B,H,T,D), *k and
 * *v (B,Hkv,T,D). With rope_base > 0, q and k come out rotated as by
 * hl_rope_partial(·, rope_base, rot_dims) over the first rot_dims values of
 * each head (rot_dims 0: all D). hl_qkv_heads is the case kv_heads = heads,
 * rot_dims = 0, with the same bits. hl_gather_heads repeats k and v per query
 * head for the attention. */
hl_tensor *hl_qkv_heads_grouped(hl_graph *g, hl_tensor *qkv, int heads, int kv_heads,
                                hl_real rope_base, int rot_dims, hl_tensor **k, hl_tensor **v);
/* x (B,Hkv,S,D) -> (B,heads,S,D) with out[:,h] = x[:, src[h]], each 0 <=
 * src[h] < Hkv; src is copied into the arena. Grouped-query attention's
 * repeat of each key/value head for its query heads (Llama's repeat_kv is
 * src[h] = h / (heads / Hkv)), feeding hl_attention or the composed ops.
 * Backward adds each output head's gradient into its source head, in h
 * order. */
hl_tensor *hl_gather_heads(hl_graph *g, hl_tensor *x, const int *src, int heads);
/* Smeared keys (Olsson et al. 2022): k (B,H,S,D) and alpha (H) ->
 *     k'[s] = σ(alpha_h)·k[s] + (1 - σ(alpha_h))·k[s-1]   for s >= 1,
 * k'[0] = k[0]: each key mixes in its predecessor by a learned weight per head. */
hl_tensor *hl_smear(hl_graph *g, hl_tensor *k, hl_tensor *alpha);
/* In training mode, zeroes each element with probability p (drawn from the
 * graph's seeded RNG) and scales the rest by 1/(1-p). Otherwise (eval mode or
 * p = 0) it returns x itself, recording nothing. */
hl_tensor *hl_dropout(hl_graph *g, hl_tensor *x, hl_real p);
/* Mean cross-entropy of logits (...,V) against targets (one per row, numel/V
 * of them) over the rows whose target is not ignore_index -> (1). With every
 * row ignored the loss is 0 and the gradient zero. */
hl_tensor *hl_cross_entropy(hl_graph *g, hl_tensor *logits, const int32_t *targets,
                            int32_t ignore_index);
/* hl_cross_entropy of the soft-capped logits cap·tanh(logits/cap) (Gemma 2's
 * final_logit_softcapping, modded-nanogpt's 15·tanh(z/15)), cap > 0, as one
 * op: the capped logits are never stored (each row is capped into per-thread
 * scratch, and backward recomputes them), and backward takes the gradient
 * through the softmax and the cap in one pass over each row. */
hl_tensor *hl_cross_entropy_softcap(hl_graph *g, hl_tensor *logits, const int32_t *targets,
                                    int32_t ignore_index, hl_real cap);
/* Index of the largest value over the last dim, (...,N) -> (...) as hl_real
 * (rank-1 input -> (1)). Not differentiable: use it under no-grad or on a
 * tensor that does not require grad. */
hl_tensor *hl_argmax(hl_graph *g, hl_tensor *x);

#endif
