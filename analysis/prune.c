/* Pruning heads out of a GPT: see heads.h. */
#include "analysis/prune.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* ---- pruning ---------------------------------------------------------------- */

static hl_status check_removal(const hl_gpt *m, const hl_head_set *remove,
                               const hl_head_set *pruned, int kept[], hl_error *err)
{
    if (m->cfg.n_heads > HL_HEADS_MAX)
        return hl_error_set(err, HL_ERR_ARG, "prune: %d heads per layer is over the limit of %d",
                            m->cfg.n_heads, HL_HEADS_MAX);
    for (int l = 0; l < HL_GPT_MAX_LAYERS; l++) {
        const int H = l < m->cfg.n_layers ? hl_gpt_layer_heads(&m->cfg, l) : 0;
        kept[l] = H;
        for (int h = 0; h < HL_HEADS_MAX; h++) {
            if (!remove->on[l][h])
                continue;
            if (l >= m->cfg.n_layers)
                return hl_error_set(err, HL_ERR_ARG, "prune: there is no layer %d (the model "
                                    "has %d)", l, m->cfg.n_layers);
            if (h >= H)
                return hl_error_set(err, HL_ERR_ARG, "prune: layer %d has no head %d (it has "
                                    "%d)", l, h, H);
            kept[l]--;
        }
        if (l < m->cfg.n_layers && kept[l] == 0)
            return hl_error_set(err, HL_ERR_ARG, "prune: cannot remove every head of layer %d "
                                "(it has %d); keep at least one", l, H);
        int gone = 0;
        for (int h = 0; pruned && l < m->cfg.n_layers && h < m->cfg.n_heads; h++)
            gone += pruned->on[l][h];
        if (pruned && l < m->cfg.n_layers && gone != m->cfg.n_heads - H)
            return hl_error_set(err, HL_ERR_ARG, "prune: the pruning record lists %d heads of "
                                "layer %d as gone, but the model has %d of %d", gone, l, H,
                                m->cfg.n_heads);
    }
    return HL_OK;
}

/* Copies the kept heads' rows of the in-projection (q, k and v parts) and
 * columns of the out-projection from layer a to layer b. */
static void copy_kept_heads(const hl_mha *a, hl_mha *b, const bool *removed)
{
    const int H = a->cfg.num_heads, K = b->cfg.num_heads, D = a->cfg.head_dim;
    const int E = a->cfg.embed_dim;
    const size_t row = (size_t)D * E; /* one head's rows of the in-projection */
    for (int h = 0, i = 0; h < H; h++) {
        if (removed[h])
            continue;
        for (int part = 0; part < 3; part++) {
            memcpy(b->in_proj_weight->data + (size_t)(part * K + i) * row,
                   a->in_proj_weight->data + (size_t)(part * H + h) * row, row * sizeof(hl_real));
            if (a->in_proj_bias)
                memcpy(b->in_proj_bias->data + (size_t)(part * K + i) * D,
                       a->in_proj_bias->data + (size_t)(part * H + h) * D, D * sizeof(hl_real));
        }
        for (int o = 0; o < E; o++)
            memcpy(b->out_proj_weight->data + (size_t)o * K * D + (size_t)i * D,
                   a->out_proj_weight->data + (size_t)o * H * D + (size_t)h * D,
                   D * sizeof(hl_real));
        if (a->smear)
            b->smear->data[i] = a->smear->data[h];
        i++;
    }
}

hl_gpt *hl_prune_heads(const hl_gpt *m, const hl_head_set *remove, hl_head_set *pruned,
                       hl_error *err)
{
    int kept[HL_GPT_MAX_LAYERS];
    if (!m || !remove) {
        hl_error_set(err, HL_ERR_ARG, "prune: NULL model or head set");
        return NULL;
    }
    if (check_removal(m, remove, pruned, kept, err) != HL_OK)
        return NULL;
    hl_gpt_config cfg = m->cfg;
    for (int l = 0; l < cfg.n_layers; l++)
        cfg.layer_heads[l] = kept[l];
    hl_gpt *out = hl_gpt_new(&cfg, err);
    if (!out)
        return NULL;
    /* Everything whose shape did not change is copied whole... */
    for (size_t i = 0; i < hl_params_n_tensors(out->params); i++) {
        hl_tensor *t = hl_params_tensor(out->params, i);
        const hl_tensor *src = hl_params_find(m->params, t->name);
        if (src && hl_tensor_same_shape(src, t))
            memcpy(t->data, src->data, t->numel * sizeof(hl_real));
    }
    /* ...then the pruned layers' projections, head by head; the kept heads
     * keep their names. */
    for (int l = 0; l < cfg.n_layers; l++) {
        copy_kept_heads(&m->blocks[l].attn, &out->blocks[l].attn, remove->on[l]);
        for (int h = 0, i = 0; h < hl_gpt_layer_heads(&m->cfg, l); h++)
            if (!remove->on[l][h])
                out->head_original[l][i++] = m->head_original[l][h];
    }
    if (pruned) {
        hl_head_set gone = {0};
        for (int l = 0; l < cfg.n_layers; l++)
            for (int h = 0; h < hl_gpt_layer_heads(&m->cfg, l); h++)
                if (remove->on[l][h])
                    gone.on[l][hl_head_original(pruned, cfg.n_heads, l, h)] = true;
        for (int l = 0; l < cfg.n_layers; l++)
            for (int h = 0; h < cfg.n_heads; h++)
                pruned->on[l][h] |= gone.on[l][h];
    }
    return out;
}
