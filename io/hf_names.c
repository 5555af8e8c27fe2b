/* The GPT's parameters in Hugging Face checkpoints: see hf_names.h. */
#include "io/hf_names.h"

#include <stdio.h>
#include <string.h>

/* One parameter's place: ours (after "blocks.<l>." for a block's), theirs
 * (with %d for the layer, %s for GPT-2's prefix), up to three parts. */
typedef struct {
    const char *ours;
    const char *theirs[HL_HF_PARTS_MAX];
    hl_hf_layout layout;
} place;

#define END {NULL, {NULL}, HL_HF_AS_IS}

static const place gpt2_top[] = {
    {"tok_emb.weight", {"%swte.weight"}, HL_HF_AS_IS},
    {"pos_emb.weight", {"%swpe.weight"}, HL_HF_AS_IS},
    {"ln_f.weight", {"%sln_f.weight"}, HL_HF_AS_IS},
    {"ln_f.bias", {"%sln_f.bias"}, HL_HF_AS_IS},
    {"head.weight", {"lm_head.weight"}, HL_HF_AS_IS},
    END,
};
static const place gpt2_block[] = {
    {"ln1.weight", {"%sh.%d.ln_1.weight"}, HL_HF_AS_IS},
    {"ln1.bias", {"%sh.%d.ln_1.bias"}, HL_HF_AS_IS},
    {"ln2.weight", {"%sh.%d.ln_2.weight"}, HL_HF_AS_IS},
    {"ln2.bias", {"%sh.%d.ln_2.bias"}, HL_HF_AS_IS},
    {"attn.in_proj_weight", {"%sh.%d.attn.c_attn.weight"}, HL_HF_TRANSPOSED},
    {"attn.in_proj_bias", {"%sh.%d.attn.c_attn.bias"}, HL_HF_AS_IS},
    {"attn.out_proj.weight", {"%sh.%d.attn.c_proj.weight"}, HL_HF_TRANSPOSED},
    {"attn.out_proj.bias", {"%sh.%d.attn.c_proj.bias"}, HL_HF_AS_IS},
    {"mlp.fc.weight", {"%sh.%d.mlp.c_fc.weight"}, HL_HF_TRANSPOSED},
    {"mlp.fc.bias", {"%sh.%d.mlp.c_fc.bias"}, HL_HF_AS_IS},
    {"mlp.proj.weight", {"%sh.%d.mlp.c_proj.weight"}, HL_HF_TRANSPOSED},
    {"mlp.proj.bias", {"%sh.%d.mlp.c_proj.bias"}, HL_HF_AS_IS},
    END,
};

static const place neox_top[] = {
    {"tok_emb.weight", {"gpt_neox.embed_in.weight"}, HL_HF_AS_IS},
    {"ln_f.weight", {"gpt_neox.final_layer_norm.weight"}, HL_HF_AS_IS},
    {"ln_f.bias", {"gpt_neox.final_layer_norm.bias"}, HL_HF_AS_IS},
    {"head.weight", {"embed_out.weight"}, HL_HF_AS_IS},
    END,
};
#define NEOX "gpt_neox.layers.%d."
static const place neox_block[] = {
    {"ln1.weight", {NEOX "input_layernorm.weight"}, HL_HF_AS_IS},
    {"ln1.bias", {NEOX "input_layernorm.bias"}, HL_HF_AS_IS},
    {"ln2.weight", {NEOX "post_attention_layernorm.weight"}, HL_HF_AS_IS},
    {"ln2.bias", {NEOX "post_attention_layernorm.bias"}, HL_HF_AS_IS},
    {"attn.in_proj_weight", {NEOX "attention.query_key_value.weight"}, HL_HF_NEOX_QKV},
    {"attn.in_proj_bias", {NEOX "attention.query_key_value.bias"}, HL_HF_NEOX_QKV},
    {"attn.out_proj.weight", {NEOX "attention.dense.weight"}, HL_HF_AS_IS},
    {"attn.out_proj.bias", {NEOX "attention.dense.bias"}, HL_HF_AS_IS},
    {"mlp.fc.weight", {NEOX "mlp.dense_h_to_4h.weight"}, HL_HF_AS_IS},
    {"mlp.fc.bias", {NEOX "mlp.dense_h_to_4h.bias"}, HL_HF_AS_IS},
    {"mlp.proj.weight", {NEOX "mlp.dense_4h_to_h.weight"}, HL_HF_AS_IS},
    {"mlp.proj.bias", {NEOX "mlp.dense_4h_to_h.bias"}, HL_HF_AS_IS},
    END,
};

static const place llama_top[] = {
    {"tok_emb.weight", {"model.embed_tokens.weight"}, HL_HF_AS_IS},
    {"ln_f.weight", {"model.norm.weight"}, HL_HF_AS_IS},
    {"head.weight", {"lm_head.weight"}, HL_HF_AS_IS},
    END,
};
#define LLAMA "model.layers.%d."
static const place llama_block[] = {
    {"ln1.weight", {LLAMA "input_layernorm.weight"}, HL_HF_AS_IS},
    {"ln2.weight", {LLAMA "post_attention_layernorm.weight"}, HL_HF_AS_IS},
    {"attn.in_proj_weight",
     {LLAMA "self_attn.q_proj.weight", LLAMA "self_attn.k_proj.weight",
      LLAMA "self_attn.v_proj.weight"},
     HL_HF_AS_IS},
    {"attn.in_proj_bias",
     {LLAMA "self_attn.q_proj.bias", LLAMA "self_attn.k_proj.bias", LLAMA "self_attn.v_proj.bias"},
     HL_HF_AS_IS},
    {"attn.out_proj.weight", {LLAMA "self_attn.o_proj.weight"}, HL_HF_AS_IS},
    {"attn.out_proj.bias", {LLAMA "self_attn.o_proj.bias"}, HL_HF_AS_IS},
    {"mlp.fc.weight", {LLAMA "mlp.gate_proj.weight", LLAMA "mlp.up_proj.weight"}, HL_HF_AS_IS},
    {"mlp.fc.bias", {LLAMA "mlp.gate_proj.bias", LLAMA "mlp.up_proj.bias"}, HL_HF_AS_IS},
    {"mlp.proj.weight", {LLAMA "mlp.down_proj.weight"}, HL_HF_AS_IS},
    {"mlp.proj.bias", {LLAMA "mlp.down_proj.bias"}, HL_HF_AS_IS},
    END,
};

static const place *find(const place *table, const char *ours)
{
    for (; table->ours; table++)
        if (!strcmp(table->ours, ours))
            return table;
    return NULL;
}

/* The rows of each part: q, k, v of an in-projection; gate, up of a fc. */
static void part_rows(const place *p, const hl_gpt *m, int l, const hl_tensor *param, int *rows)
{
    const int D = m->cfg.d_model / m->cfg.n_heads;
    if (p->theirs[2]) {
        rows[0] = hl_gpt_layer_heads(&m->cfg, l) * D;
        rows[1] = rows[2] = hl_gpt_layer_kv_heads(&m->cfg, l) * D;
    } else if (p->theirs[1]) {
        rows[0] = rows[1] = param->shape[0] / 2;
    } else {
        rows[0] = param->shape[0];
    }
}

bool hl_hf_source_of(hl_hf_arch arch, const char *prefix, const hl_gpt *m,
                     const hl_tensor *param, hl_hf_source *src)
{
    const place *top = arch == HL_HF_GPT2 ? gpt2_top : arch == HL_HF_GPT_NEOX ? neox_top
                                                                              : llama_top;
    const place *block = arch == HL_HF_GPT2       ? gpt2_block
                         : arch == HL_HF_GPT_NEOX ? neox_block
                                                  : llama_block;
    int l = -1, used = 0;
    const place *p;
    if (sscanf(param->name, "blocks.%d.%n", &l, &used) == 1 && used > 0)
        p = find(block, param->name + used);
    else
        p = find(top, param->name);
    if (!p)
        return false;
    memset(src, 0, sizeof *src);
    src->layout = p->layout;
    for (int i = 0; i < HL_HF_PARTS_MAX && p->theirs[i]; i++) {
        src->n_parts++;
        /* Each pattern has %s before %d, or %d alone, or neither. */
        if (strstr(p->theirs[i], "%s"))
            snprintf(src->name[i], sizeof src->name[i], p->theirs[i], prefix, l);
        else if (strstr(p->theirs[i], "%d"))
            snprintf(src->name[i], sizeof src->name[i], p->theirs[i], l);
        else
            snprintf(src->name[i], sizeof src->name[i], "%s", p->theirs[i]);
    }
    part_rows(p, m, l, param, src->rows);
    return true;
}

bool hl_hf_is_buffer(const char *name)
{
    static const char *const endings[] = {".attn.bias", ".attn.masked_bias", ".attention.bias",
                                          ".attention.masked_bias", ".rotary_emb.inv_freq"};
    const size_t n = strlen(name);
    for (size_t i = 0; i < sizeof endings / sizeof *endings; i++) {
        const size_t k = strlen(endings[i]);
        if (n > k && !strcmp(name + n - k, endings[i]))
            return true;
    }
    return false;
}

/* Row r of ours is row neox_row(r) of GPT-NeoX's query_key_value: ours
 * [part][h][i], theirs [h][part][i]. */
static int neox_row(int r, int heads, int D)
{
    const int part = r / (heads * D), h = r / D % heads, i = r % D;
    return (h * 3 + part) * D + i;
}

void hl_hf_to_ours(const hl_hf_source *src, const hl_real *theirs, hl_real *ours, int rows,
                   int cols, int heads, int D)
{
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) {
            const size_t to = (size_t)r * cols + c;
            switch (src->layout) {
            case HL_HF_TRANSPOSED:
                ours[to] = theirs[(size_t)c * rows + r];
                break;
            case HL_HF_NEOX_QKV:
                ours[to] = theirs[(size_t)neox_row(r, heads, D) * cols + c];
                break;
            default:
                ours[to] = theirs[to];
            }
        }
}

void hl_hf_to_theirs(const hl_hf_source *src, const hl_real *ours, hl_real *theirs, int rows,
                     int cols, int heads, int D)
{
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) {
            const size_t from = (size_t)r * cols + c;
            switch (src->layout) {
            case HL_HF_TRANSPOSED:
                theirs[(size_t)c * rows + r] = ours[from];
                break;
            case HL_HF_NEOX_QKV:
                theirs[(size_t)neox_row(r, heads, D) * cols + c] = ours[from];
                break;
            default:
                theirs[from] = ours[from];
            }
        }
}
