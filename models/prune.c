/* Pruning heads out of a GPT, and the record of which were pruned: see heads.h. */
#include "heads.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/checkpoint.h"
#include "core/safetensors.h"

/* ---- original and current head indices ------------------------------------- */

static bool was_pruned(const hl_head_set *pruned, int l, int h)
{
    return pruned && pruned->on[l][h];
}

int hl_head_original(const hl_head_set *pruned, int n_heads, int l, int current)
{
    if (l < 0 || l >= HL_GPT_MAX_LAYERS || current < 0)
        return -1;
    for (int h = 0; h < n_heads && h < HL_HEADS_MAX; h++)
        if (!was_pruned(pruned, l, h) && current-- == 0)
            return h;
    return -1;
}

int hl_head_current(const hl_head_set *pruned, int n_heads, int l, int original)
{
    if (l < 0 || l >= HL_GPT_MAX_LAYERS || original < 0 || original >= n_heads ||
        original >= HL_HEADS_MAX || was_pruned(pruned, l, original))
        return -1;
    int current = 0;
    for (int h = 0; h < original; h++)
        current += !was_pruned(pruned, l, h);
    return current;
}

/* ---- the pruned_heads record -------------------------------------------- */

int hl_pruned_heads_format(const hl_head_set *pruned, const hl_gpt_config *cfg, char *buf,
                           size_t size)
{
    int n = 0;
    for (int l = 0; l < cfg->n_layers && n >= 0; l++) {
        n += snprintf(buf + n, (size_t)n < size ? size - (size_t)n : 0, "%s%d:", l ? ";" : "", l);
        bool first = true;
        for (int h = 0; h < cfg->n_heads && h < HL_HEADS_MAX && n >= 0; h++)
            if (pruned->on[l][h]) {
                n += snprintf(buf + n, (size_t)n < size ? size - (size_t)n : 0,
                              first ? "%d" : ",%d", h);
                first = false;
            }
    }
    return n;
}

/* Reads "<l>:<h>,<h>..." for layer l at *p, moving *p past it. */
static bool parse_layer(const char **p, int l, const hl_gpt_config *cfg, hl_head_set *pruned)
{
    char *end;
    long layer = strtol(*p, &end, 10);
    if (end == *p || layer != l || *end != ':')
        return false;
    const char *q = end + 1;
    int last = -1;
    while (*q && *q != ';') {
        long h = strtol(q, &end, 10);
        if (end == q || h <= last || h >= cfg->n_heads || h >= HL_HEADS_MAX ||
            (*end && *end != ',' && *end != ';'))
            return false;
        pruned->on[l][h] = true;
        last = (int)h;
        q = end + (*end == ',');
        if (*end == ',' && (!*q || *q == ';'))
            return false;
    }
    *p = q;
    return true;
}

hl_status hl_pruned_heads_parse(const char *text, const hl_gpt_config *cfg, hl_head_set *pruned,
                                hl_error *err)
{
    memset(pruned, 0, sizeof *pruned);
    if (cfg->n_heads > HL_HEADS_MAX)
        return hl_error_set(err, HL_ERR_ARG, "pruned heads: %d heads per layer is over the "
                            "limit of %d", cfg->n_heads, HL_HEADS_MAX);
    const char *p = text;
    for (int l = 0; text && l < cfg->n_layers; l++) {
        if ((l > 0 && *p++ != ';') || !parse_layer(&p, l, cfg, pruned))
            return hl_error_set(err, HL_ERR_FORMAT, "pruned heads: cannot read layer %d of "
                                "\"%s\" (want e.g. \"0:1,3;1:\" for %d layers of %d heads)",
                                l, text, cfg->n_layers, cfg->n_heads);
    }
    if (text && *p)
        return hl_error_set(err, HL_ERR_FORMAT, "pruned heads: \"%s\" lists more than the "
                            "model's %d layers", text, cfg->n_layers);
    for (int l = 0; l < cfg->n_layers; l++) {
        int gone = 0;
        for (int h = 0; h < cfg->n_heads; h++)
            gone += pruned->on[l][h];
        if (gone != cfg->n_heads - hl_gpt_layer_heads(cfg, l))
            return hl_error_set(err, HL_ERR_FORMAT, "pruned heads: layer %d has %d of %d heads "
                                "but %d are recorded as pruned (\"%s\")", l,
                                hl_gpt_layer_heads(cfg, l), cfg->n_heads, gone,
                                text ? text : "no record");
    }
    return HL_OK;
}

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
        b->gate->data[i] = a->gate->data[h];
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
        i++;
    }
}

hl_gpt *hl_gpt_prune(const hl_gpt *m, const hl_head_set *remove, hl_head_set *pruned,
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
    /* ...then the pruned layers' projections and gates, head by head. */
    for (int l = 0; l < cfg.n_layers; l++) {
        copy_kept_heads(&m->blocks[l].attn, &out->blocks[l].attn, remove->on[l]);
        out->blocks[l].attn.head_offset = NULL;
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

/* ---- model files with their pruning record ------------------------------ */

hl_gpt *hl_gpt_load_meta(const char *path, hl_gpt_meta *meta, hl_error *err)
{
    memset(meta, 0, sizeof *meta);
    hl_safetensors *f = NULL;
    if (hl_safetensors_read(path, &f, err) != HL_OK)
        return NULL; /* the message names the file */
    /* A private record, so the message can be prefixed with the path. */
    hl_error local = {0};
    hl_gpt_config cfg;
    hl_status s = hl_gpt_config_parse(hl_safetensors_metadata(f, "config"), &cfg, &local);
    const char *task = hl_safetensors_metadata(f, "task");
    const char *step = hl_safetensors_metadata(f, "step");
    if (s == HL_OK)
        s = hl_pruned_heads_parse(hl_safetensors_metadata(f, "pruned_heads"), &cfg,
                                  &meta->pruned, &local);
    snprintf(meta->task, sizeof meta->task, "%s", task ? task : "");
    meta->step = step ? strtoll(step, NULL, 10) : 0;
    hl_safetensors_free(f);
    hl_gpt *m = s == HL_OK ? hl_gpt_load(path, &local) : NULL;
    if (!m)
        hl_error_set(err, local.status, "%s: %s", path, local.message);
    return m;
}

hl_status hl_gpt_save_meta(const char *path, const hl_gpt *m, const hl_gpt_meta *meta,
                           hl_error *err)
{
    char config[1024], pruned[8192];
    int n = hl_gpt_config_format(&m->cfg, config, sizeof config);
    int k = hl_pruned_heads_format(&meta->pruned, &m->cfg, pruned, sizeof pruned);
    if (n < 0 || (size_t)n >= sizeof config || k < 0 || (size_t)k >= sizeof pruned)
        return hl_error_set(err, HL_ERR_ARG, "save %s: the model config is too long", path);
    hl_checkpoint_meta entries[3] = {{"config", config}, {"pruned_heads", pruned},
                                     {"task", meta->task}};
    return hl_checkpoint_save(path, m->params, NULL, meta->step, NULL, 0, entries,
                              meta->task[0] ? 3 : 2, err);
}
