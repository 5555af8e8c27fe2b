/*
 * qkv_heads.h: a packed q|k|v projection split into heads, rotated on the way
 * (ops/qkv_heads.c). ops/ops.h includes every op header.
 *
 *     hl_tensor *k, *v, *q = hl_qkv_heads(g, hl_linear(g, x, w_qkv, b_qkv), H, 10000, &k, &v);
 */
#ifndef HL_OPS_QKV_HEADS_H
#define HL_OPS_QKV_HEADS_H

#include "core/graph.h"

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

#endif
