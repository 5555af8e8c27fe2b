/*
 * gpt.h: a small GPT-style decoder, composed of ops and the MHA module.
 *
 *   h = tok_emb[x] + pos[t]                             (then dropout)
 *   per block:  h = h + dropout(MHA(norm1(h)))          (causal)
 *               h = h + dropout(proj(act(fc(norm2(h)))))  (when there is an MLP)
 *   logits = head(norm_f(h))
 *
 * The options, today's parts beside GPT-2's:
 *   pos    learned (pos_emb, a parameter), sinusoidal (Vaswani et al.'s fixed
 *          table, of RMS emb_std, not a parameter), rope (rotary positions on
 *          every head's q and k, models/mha.h; nothing added to h) or none
 *   norm   LayerNorm (weight and bias), RMSNorm (weight) or none
 *   mlp    GELU (fc 4d wide) or SwiGLU (fc 2F wide, then silu(first half) ·
 *          second half, F = hl_gpt_mlp_width: 8d/3 rounded up to a multiple of
 *          16, so both have about 8d² weights) or none
 *          gelu_tanh (GELU's tanh approximation, GPT-2's gelu_new), relu2
 *          (relu(x)², fc 4d wide: Primer's and modded-nanogpt's)
 *   tie_embeddings   head.weight is tok_emb.weight (vocab_in = vocab_out)
 *   smear_keys       every head smears its keys (ops/smear.h)
 *   qk_norm          every head's q and k RMS-normalised before rotation, with
 *                    a learned gain (D) per layer for each (models/mha.h)
 *   softcap          the loss reads softcap·tanh(logits/softcap) (hl_gpt_loss;
 *                    0: off). hl_gpt_forward's logits are not capped: the
 *                    cap lives in the loss (ops/cross_entropy.h)
 *                    and in hl_gpt_logit for sampling
 * and what pretrained architectures need (io/hf.h imports GPT-2, GPT-NeoX
 * and Llama-family models onto them):
 *   n_kv_heads       grouped-query attention: fewer key/value heads
 *   rotary_dims      rope on the first rotary_dims of each head (GPT-NeoX)
 *   parallel_residual   h = h + attn(norm1(h)) + mlp(norm2(h)) (GPT-NeoX)
 *   no_*_bias        linears without bias: q/k/v, attention output, MLP, head
 *   mlp_width, norm_eps   the MLP's width and the norms' epsilon, when not
 *                    the defaults'
 * A SwiGLU MLP keeps Llama's separate gate and up projections as the two
 * halves of mlp.fc.weight: rows 0..F-1 the gate, F..2F-1 the up projection.
 *
 * Parameter names (as a PyTorch module would have them): tok_emb.weight,
 * pos_emb.weight, blocks.<l>.attn.{in_proj_weight,in_proj_bias,out_proj.weight,
 * out_proj.bias,smear}, blocks.<l>.ln1.{weight,bias}, blocks.<l>.ln2.*,
 * blocks.<l>.attn.{q_norm,k_norm}.weight,
 * blocks.<l>.mlp.fc.{weight,bias}, blocks.<l>.mlp.proj.*, ln_f.*, head.weight,
 * head.bias; each only where the options call for it.
 *
 *     hl_gpt_config cfg = {.vocab_in = 256, .vocab_out = 256, .n_ctx = 64,
 *                          .d_model = 128, .n_heads = 4, .n_layers = 4,
 *                          .mlp = HL_GPT_MLP_GELU, .norm = HL_GPT_NORM_LAYER,
 *                          .emb_std = 0.02};          // .pos = HL_GPT_POS_ROPE, ...
 *     hl_gpt *m = hl_gpt_new(&cfg, &err);
 *     hl_gpt_init_weights(m, &rng);
 *     hl_tensor *logits = hl_gpt_forward(g, m, tokens, B, T, NULL);
 *
 *     hl_mha_trace trace[2];                          // one per layer
 *     hl_gpt_run run = {.trace = trace, .gate = {[1] = gate1}};   // gate1 (H)
 *     logits = hl_gpt_forward(g, m, tokens, B, T, &run);         // m is not changed
 */
#ifndef HL_GPT_H
#define HL_GPT_H

#include <stdbool.h>
#include <stdint.h>

#include "core/graph.h"
#include "core/params.h"
#include "models/mha.h"

#define HL_GPT_MAX_LAYERS 32
/* The most parameter values hl_gpt_new builds (2^30: 4 GiB of floats, and as
 * much again for the gradients and twice for AdamW's state). A config asking
 * for more is refused before anything is allocated. Heads per layer stop at
 * HL_HEADS_MAX. */
#define HL_GPT_MAX_PARAMS (UINT64_C(1) << 30)
/* Every LayerNorm's epsilon (as PyTorch's default). */
#define HL_GPT_LN_EPS 1e-5
/* Positions a GPT may have: a context of tokens whose every (B,H,T,T) score a
 * trace holds; longer contexts are refused like oversized configs. */
#define HL_GPT_MAX_CTX 65536
/* Heads per layer a GPT (and a head set, models/head_set.h) may have. */
#define HL_HEADS_MAX 256

/* Where positions enter (see the top). */
typedef enum hl_gpt_pos {
    HL_GPT_POS_LEARNED,
    HL_GPT_POS_SINUSOIDAL,
    HL_GPT_POS_ROPE,
    HL_GPT_POS_NONE,
    HL_GPT_POS_KINDS
} hl_gpt_pos;

typedef enum hl_gpt_norm {
    HL_GPT_NORM_NONE,
    HL_GPT_NORM_LAYER, /* LayerNorm */
    HL_GPT_NORM_RMS,   /* RMSNorm */
    HL_GPT_NORM_KINDS
} hl_gpt_norm;

typedef enum hl_gpt_mlp {
    HL_GPT_MLP_NONE,
    HL_GPT_MLP_GELU,
    HL_GPT_MLP_SWIGLU,
    HL_GPT_MLP_GELU_TANH, /* GELU's tanh approximation (GPT-2's gelu_new), fc 4d wide */
    HL_GPT_MLP_RELU2,     /* relu(x)², fc 4d wide */
    HL_GPT_MLP_KINDS
} hl_gpt_mlp;

/* The rotary base when the config leaves it 0 (RoFormer's and Llama's). */
#define HL_GPT_ROPE_BASE 10000.0

typedef struct hl_gpt_config {
    int vocab_in;     /* rows of the token embedding */
    int vocab_out;    /* logits per position */
    int n_ctx;        /* positions (rows of the position embedding) */
    int d_model;
    int n_heads;      /* heads per layer as built; head width d_model / n_heads */
    int n_layers;
    int layer_heads[HL_GPT_MAX_LAYERS]; /* heads left in layer l after pruning; 0 = n_heads */
    int layer_kv_heads[HL_GPT_MAX_LAYERS]; /* key/value heads left; 0 = n_kv_heads */
    hl_gpt_mlp mlp;   /* the MLP of every block (true: GELU) */
    hl_gpt_norm norm; /* pre-norm in blocks and a final norm (true: LayerNorm) */
    double dropout;   /* after embeddings, attention and MLP (training only) */
    double emb_std;   /* embeddings ~ N(0, emb_std) */
    hl_gpt_pos pos;   /* learned (0) unless set */
    double rope_base; /* rotary base with pos rope; 0 means HL_GPT_ROPE_BASE */
    bool tie_embeddings;
    bool smear_keys;
    int n_kv_heads;   /* key/value heads per layer; 0 means n_heads (else divides it) */
    int rotary_dims;  /* with pos rope: rotated dims of each head, even; 0 means all */
    int mlp_width;    /* the MLP's hidden width F; 0 means the default (see below) */
    double norm_eps;  /* every norm's epsilon; 0 means HL_GPT_LN_EPS */
    bool parallel_residual; /* attention and MLP both read the block's input */
    bool no_qkv_bias, no_out_bias, no_mlp_bias, no_head_bias; /* linears without bias */
    bool qk_norm;     /* RMSNorm of each head's q and k, with gains (see the top) */
    double softcap;   /* > 0: the loss soft-caps the logits at it; 0: off */
} hl_gpt_config;

typedef struct hl_gpt_block {
    hl_tensor *ln1_w, *ln1_b, *ln2_w, *ln2_b;          /* (d) each, or NULL */
    hl_mha attn;
    hl_tensor *fc_w, *fc_b, *proj_w, *proj_b;          /* (W,d) (W) (d,F) (d), or NULL:
                                                        * GELU W = F, SwiGLU W = 2F */
} hl_gpt_block;

typedef struct hl_gpt {
    hl_gpt_config cfg;
    hl_params *params;
    hl_tensor *tok_emb;                                /* (vocab_in,d) */
    hl_tensor *pos_emb;   /* (n_ctx,d): learned positions, a parameter; else NULL */
    hl_tensor *pos_table; /* (n_ctx,d): sinusoidal positions, fixed; else NULL */
    hl_gpt_block blocks[HL_GPT_MAX_LAYERS];
    hl_tensor *lnf_w, *lnf_b;                          /* (d) or NULL */
    hl_tensor *head_w, *head_b;                        /* (vocab_out,d), (vocab_out);
                                                        * head_w is tok_emb when tied */
    /* Each head's index as trained: pruning keeps the remaining heads in
     * order, so head h of layer l was head_original[l][h] before (h itself
     * in a model never pruned). Heads are named by it (models/head_set.h). */
    int16_t head_original[HL_GPT_MAX_LAYERS][HL_HEADS_MAX];
    /* Query head h of layer l reads key/value head kv_of[l][h] (h / group
     * until pruning removes query heads; the attention modules read it). */
    int16_t kv_of[HL_GPT_MAX_LAYERS][HL_HEADS_MAX];
} hl_gpt;

/* A model with committed, zeroed parameters; NULL with the reason in err
 * (also for more than HL_GPT_MAX_PARAMS values or HL_HEADS_MAX heads). */
hl_gpt *hl_gpt_new(const hl_gpt_config *cfg, hl_error *err);
/* hl_gpt_new's checks of cfg alone, allocating nothing: HL_OK when it would
 * build the model (memory permitting), else the reason in err. */
hl_status hl_gpt_config_check(const hl_gpt_config *cfg, hl_error *err);
/* The parameter values a config that passes hl_gpt_config_check asks for. */
uint64_t hl_gpt_count_parameters(const hl_gpt_config *cfg);
void hl_gpt_free(hl_gpt *m);
/* Every linear layer's weight and bias U(±1/√fan_in) (in-projection included),
 * embeddings N(0, emb_std), LayerNorm weight 1 and bias 0, QK-norm gains 1. */
void hl_gpt_init_weights(hl_gpt *m, hl_rng *rng);
/* Learned position embeddings started as Vaswani et al.'s sinusoids
 * (pos_emb[t][2i] = sin(t / 10000^(2i/d)), [2i+1] the cos), of RMS emb_std,
 * instead of noise; still trained. A shift by one position is then a fixed
 * rotation of them, which a layer-0 head can learn to attend to the previous
 * token with. No-op unless pos is learned. */
void hl_gpt_init_positions_sinusoidal(hl_gpt *m);

/* The MLP's hidden width F: mlp_width when set, else 4d for GELU and for
 * SwiGLU 8d/3 rounded up to a multiple of 16; 0 without an MLP; for a config
 * hl_gpt_new accepts. */
int hl_gpt_mlp_width(const hl_gpt_config *cfg);
/* x normalised as the model's norms are (LayerNorm with w, b; RMSNorm with
 * w; x itself when the model has none), e.g. ln_f for the logit lens. */
hl_tensor *hl_gpt_normalize(hl_graph *g, const hl_gpt *m, hl_tensor *x, hl_tensor *w,
                            hl_tensor *b);
/* The names of the options as charlm's flags spell them ("rope", "rmsnorm",
 * "swiglu"), and back (-1 for a name that is none of them). */
const char *hl_gpt_pos_name(hl_gpt_pos pos);
const char *hl_gpt_norm_name(hl_gpt_norm norm);
const char *hl_gpt_mlp_name(hl_gpt_mlp mlp);
int hl_gpt_pos_parse(const char *name);
int hl_gpt_norm_parse(const char *name);
int hl_gpt_mlp_parse(const char *name);

/* One forward pass's changes and requests (analysis); every field may be
 * NULL. Layer l's attention gets gate[l] (H_l) and head_offset[l] (H_l,T,D)
 * as in hl_mha_run. */
typedef struct hl_gpt_run {
    hl_tensor *gate[HL_GPT_MAX_LAYERS];
    const hl_tensor *head_offset[HL_GPT_MAX_LAYERS];
    hl_mha_trace *trace; /* n_layers entries: attention (B,H,T,T), heads, q, k, v (B,H,T,D) */
    /* n_layers + 1 entries, filled with the residual stream (B,T,E): resid[l]
     * entering block l (hook_resid_pre), resid[l + 1] leaving it
     * (hook_resid_post), resid[n_layers] before the final LayerNorm. */
    hl_tensor **resid;
    /* Activations to replace, each in its .layer (models/mha.h): q, k, v,
     * pattern, z, resid_pre (before the block reads it) and resid_post. */
    const hl_act_patch *patches;
    int n_patches;
    /* (B,T): the document of each position of packed sequences (whole
     * numbers, e.g. 0,0,0,1,1,2); attention then never crosses a document
     * boundary (causal and block-diagonal: ops/mask.h hl_mask_documents), on
     * either attention path. NULL: one document per sequence. Read again by
     * backward: keep it unchanged until hl_graph_backward has run. */
    const hl_tensor *doc_ids;
} hl_gpt_run;

/* tokens (B,T) with T <= n_ctx -> logits (B,T,vocab_out). run may be NULL. */
hl_tensor *hl_gpt_forward(hl_graph *g, const hl_gpt *m, const int32_t *tokens, int B, int T,
                          const hl_gpt_run *run);

/* The residual stream entering block 0 (B,T,E): token embeddings plus learned
 * or sinusoidal positions (dropout in training mode). */
hl_tensor *hl_gpt_embed(hl_graph *g, const hl_gpt *m, const int32_t *tokens, int B, int T);

/* The blocks from layer `first` on: h (B,T,E) is the residual stream entering
 * block first (hl_gpt_embed's for 0, else hl_gpt_run.resid[first] of a pass
 * on the same tokens), run (may be NULL) as in hl_gpt_forward for those
 * layers (patches of earlier layers do nothing). Returns the stream leaving
 * the last block, before the final norm (also run->resid[n_layers]), with no
 * unembedding. For studies that change one layer and read only what follows
 * it: a sweep over every head reruns a part of the model for each
 * (analysis/head_effects.c). */
hl_tensor *hl_gpt_forward_from(hl_graph *g, const hl_gpt *m, hl_tensor *h, int first,
                               const hl_gpt_run *run);

/* The model's loss on its logits (B,T,vocab_out): hl_cross_entropy, or
 * hl_cross_entropy_softcap at cfg.softcap when that is > 0. */
hl_tensor *hl_gpt_loss(hl_graph *g, const hl_gpt *m, hl_tensor *logits, const int32_t *targets,
                       int32_t ignore_index);
/* A logit as the loss reads it, for sampling: softcap·tanh(z/softcap) (in
 * double, then rounded) when cfg->softcap > 0, else z itself. */
hl_real hl_gpt_logit(const hl_gpt_config *cfg, hl_real z);

/* Heads in layer l (n_heads unless pruned), and its key/value heads
 * (n_kv_heads unless pruning took every query head of some). */
int hl_gpt_layer_heads(const hl_gpt_config *cfg, int l);
int hl_gpt_layer_kv_heads(const hl_gpt_config *cfg, int l);
/* The epsilon of the model's norms. */
double hl_gpt_norm_eps(const hl_gpt_config *cfg);
/* Heads over every layer, and the flat index of head h of layer l (layer 0's
 * heads first). */
int hl_gpt_total_heads(const hl_gpt_config *cfg);
int hl_gpt_head_index(const hl_gpt_config *cfg, int l, int h);
/* The layer and head of flat index i (0 <= i < hl_gpt_total_heads). */
void hl_gpt_head_at(const hl_gpt_config *cfg, int i, int *l, int *h);

/* The config as safetensors metadata strings, and back (for checkpoints). */
int hl_gpt_config_format(const hl_gpt_config *cfg, char *buf, size_t size);
hl_status hl_gpt_config_parse(const char *text, hl_gpt_config *cfg, hl_error *err);

#endif
