/* Sets of heads and the record of pruned ones: see head_set.h. */
#include "models/head_set.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int hl_head_set_count(const hl_head_set *s)
{
    int n = 0;
    for (int l = 0; l < HL_GPT_MAX_LAYERS; l++)
        for (int h = 0; h < HL_HEADS_MAX; h++)
            n += s->on[l][h];
    return n;
}

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

hl_status hl_gpt_set_pruned(hl_gpt *m, const hl_head_set *pruned, hl_error *err)
{
    const hl_gpt_config *c = &m->cfg;
    const int group = c->n_kv_heads ? c->n_heads / c->n_kv_heads : 1;
    for (int l = 0; l < c->n_layers; l++) {
        int kept = 0;
        for (int h = 0; h < c->n_heads && h < HL_HEADS_MAX; h++)
            kept += !was_pruned(pruned, l, h);
        if (kept != hl_gpt_layer_heads(c, l))
            return hl_error_set(err, HL_ERR_ARG, "pruned heads: layer %d keeps %d of its %d "
                                "heads, but the model has %d there", l, kept, c->n_heads,
                                hl_gpt_layer_heads(c, l));
    }
    for (int l = 0; l < c->n_layers; l++) {
        /* The key/value heads of the kept query heads, renumbered in order. */
        int renumbered[HL_HEADS_MAX];
        for (int k = 0; k < c->n_heads; k++)
            renumbered[k] = -1;
        for (int h = 0; h < hl_gpt_layer_heads(c, l); h++) {
            m->head_original[l][h] = (int16_t)hl_head_original(pruned, c->n_heads, l, h);
            renumbered[m->head_original[l][h] / group] = 0;
        }
        for (int k = 0, n = 0; k < c->n_heads; k++)
            if (renumbered[k] == 0)
                renumbered[k] = n++;
        for (int h = 0; group > 1 && h < hl_gpt_layer_heads(c, l); h++)
            m->kv_of[l][h] = (int16_t)renumbered[m->head_original[l][h] / group];
    }
    return HL_OK;
}

void hl_gpt_pruned_heads(const hl_gpt *m, hl_head_set *pruned)
{
    memset(pruned, 0, sizeof *pruned);
    for (int l = 0; l < m->cfg.n_layers; l++)
        for (int h = 0; h < m->cfg.n_heads; h++)
            pruned->on[l][h] = hl_gpt_head_current(m, l, h) < 0;
}

int hl_gpt_head_current(const hl_gpt *m, int l, int original)
{
    if (l < 0 || l >= m->cfg.n_layers)
        return -1;
    for (int h = 0; h < hl_gpt_layer_heads(&m->cfg, l); h++)
        if (m->head_original[l][h] == original)
            return h;
    return -1;
}

/* ---- the pruned_heads record -------------------------------------------- */

/* Where the text continues once n characters are written: NULL, with no room,
 * when n is already past the end (buf + n would point beyond the buffer). */
static char *tail(char *buf, size_t size, int n) { return (size_t)n < size ? buf + n : NULL; }
static size_t room(size_t size, int n) { return (size_t)n < size ? size - (size_t)n : 0; }

int hl_pruned_heads_format(const hl_head_set *pruned, const hl_gpt_config *cfg, char *buf,
                           size_t size)
{
    int n = 0;
    for (int l = 0; l < cfg->n_layers && n >= 0; l++) {
        n += snprintf(tail(buf, size, n), room(size, n), "%s%d:", l ? ";" : "", l);
        bool first = true;
        for (int h = 0; h < cfg->n_heads && h < HL_HEADS_MAX && n >= 0; h++)
            if (pruned->on[l][h]) {
                n += snprintf(tail(buf, size, n), room(size, n), first ? "%d" : ",%d", h);
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
