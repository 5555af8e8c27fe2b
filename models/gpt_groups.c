#include "models/gpt_groups.h"

#include <string.h>

int hl_gpt_param_group(void *gpt, const hl_tensor *t, int *n_blocks, int *rows)
{
    const hl_gpt *m = gpt;
    *n_blocks = 0;
    for (int l = 0; l < m->cfg.n_layers; l++) {
        const hl_gpt_block *b = &m->blocks[l];
        const hl_mha *a = &b->attn;
        if (t == a->in_proj_weight) {
            const int D = a->cfg.head_dim;
            rows[0] = a->cfg.num_heads * D;
            rows[1] = rows[2] = a->cfg.kv_heads * D;
            *n_blocks = 3;
            return HL_GPT_GROUP_HIDDEN;
        }
        if (t == b->fc_w && m->cfg.mlp == HL_GPT_MLP_SWIGLU) {
            rows[0] = rows[1] = t->shape[0] / 2;
            *n_blocks = 2;
            return HL_GPT_GROUP_HIDDEN;
        }
        if ((t == a->q_proj_weight || t == a->k_proj_weight || t == a->v_proj_weight ||
                  t == a->out_proj_weight || t == b->fc_w || t == b->proj_w))
            return HL_GPT_GROUP_HIDDEN;
    }
    return HL_GPT_GROUP_OTHER;
}

static void zero(hl_tensor *t)
{
    if (t)
        memset(t->data, 0, t->numel * sizeof *t->data);
}

void hl_gpt_zero_init(hl_gpt *m)
{
    for (int l = 0; l < m->cfg.n_layers; l++) {
        zero(m->blocks[l].attn.out_proj_weight);
        zero(m->blocks[l].proj_w);
    }
    if (m->head_w != m->tok_emb)
        zero(m->head_w);
}
