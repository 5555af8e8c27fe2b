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

/* The key/value heads that some kept query head reads, numbered in order
 * (new[k] = -1 for one no kept head reads); returns how many are kept. */
static int kept_kv_heads(const hl_mha *a, const bool *removed, int *renumbered)
{
    for (int k = 0; k < a->cfg.kv_heads; k++)
        renumbered[k] = -1;
    for (int h = 0; h < a->cfg.num_heads; h++)
        if (!removed[h])
            renumbered[hl_mha_kv_head(a, h)] = 0;
    int n = 0;
    for (int k = 0; k < a->cfg.kv_heads; k++)
        if (renumbered[k] == 0)
            renumbered[k] = n++;
    return n;
}

/* Copies the kept query heads' rows of the in-projection's q part, the kept
 * key/value heads' rows of its k and v parts (a key/value head goes when
 * every query head of its group has gone) and the kept heads' columns of the
 * out-projection from layer a to layer b; kv_of gets which kept key/value
 * head each kept query head reads. */
static void copy_kept_heads(const hl_mha *a, hl_mha *b, const bool *removed, int16_t *kv_of)
{
    const int H = a->cfg.num_heads, Hb = b->cfg.num_heads, D = a->cfg.head_dim;
    const int K = a->cfg.kv_heads, Kb = b->cfg.kv_heads, E = a->cfg.embed_dim;
    const size_t row = (size_t)D * E; /* one head's rows of the in-projection */
    int renumbered[HL_HEADS_MAX];
    kept_kv_heads(a, removed, renumbered);
    /* Head i of part p starts at row part_start[p] + i·D, in a and in b. */
    const int from[3] = {0, H * D, (H + K) * D}, to[3] = {0, Hb * D, (Hb + Kb) * D};
    for (int p = 0; p < 3; p++)
        for (int h = 0, i = 0; h < (p ? K : H); h++) {
            if (p ? renumbered[h] < 0 : removed[h])
                continue;
            memcpy(b->in_proj_weight->data + ((size_t)to[p] + (size_t)i * D) * E,
                   a->in_proj_weight->data + ((size_t)from[p] + (size_t)h * D) * E,
                   row * sizeof(hl_real));
            if (a->in_proj_bias)
                memcpy(b->in_proj_bias->data + to[p] + (size_t)i * D,
                       a->in_proj_bias->data + from[p] + (size_t)h * D, D * sizeof(hl_real));
            i++;
        }
    for (int h = 0, i = 0; h < H; h++) {
        if (removed[h])
            continue;
        for (int o = 0; o < E; o++)
            memcpy(b->out_proj_weight->data + (size_t)o * Hb * D + (size_t)i * D,
                   a->out_proj_weight->data + (size_t)o * H * D + (size_t)h * D,
                   D * sizeof(hl_real));
        if (a->smear)
            b->smear->data[i] = a->smear->data[h];
        kv_of[i++] = (int16_t)renumbered[hl_mha_kv_head(a, h)];
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
    const bool grouped = cfg.n_kv_heads && cfg.n_kv_heads != cfg.n_heads;
    for (int l = 0; l < cfg.n_layers; l++) {
        int renumbered[HL_HEADS_MAX];
        cfg.layer_heads[l] = kept[l];
        if (grouped)
            cfg.layer_kv_heads[l] = kept_kv_heads(&m->blocks[l].attn, remove->on[l], renumbered);
    }
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
        copy_kept_heads(&m->blocks[l].attn, &out->blocks[l].attn, remove->on[l],
                        out->kv_of[l]);
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
