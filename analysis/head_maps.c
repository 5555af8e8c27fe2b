/* Attention of every head on one input, and token labels: see head_maps.h. */
#include "analysis/head_maps.h"

#include <stdio.h>
#include <string.h>

hl_tensor *hl_heads_attention(const hl_gpt *m, const int32_t *tokens, int T, hl_error *err)
{
    if (!tokens || T < 1 || T > m->cfg.n_ctx) {
        hl_error_set(err, HL_ERR_ARG, "attention maps: %d tokens; the model takes 1 to %d", T,
                     m->cfg.n_ctx);
        return NULL;
    }
    for (int t = 0; t < T; t++)
        if (tokens[t] < 0 || tokens[t] >= m->cfg.vocab_in) {
            hl_error_set(err, HL_ERR_ARG, "attention maps: token %d at position %d is outside "
                         "the model's %d input tokens", tokens[t], t, m->cfg.vocab_in);
            return NULL;
        }
    hl_graph *g = hl_graph_new(0);
    if (!g) {
        hl_error_set(err, HL_ERR_NOMEM, "attention maps: out of memory");
        return NULL;
    }
    hl_graph_set_grad_enabled(g, false);
    hl_graph_set_training(g, false);
    hl_mha_trace trace[HL_GPT_MAX_LAYERS];
    hl_gpt_forward(g, m, tokens, 1, T, &(hl_gpt_run){.trace = trace});
    const int N = hl_gpt_total_heads(&m->cfg);
    hl_tensor *maps = NULL;
    if (hl_graph_failed(g))
        hl_error_set(err, hl_graph_status(g), "attention maps: %s", hl_graph_message(g));
    else
        maps = hl_tensor_new_checked("attention", 3, (int[]){N, T, T}, false, err);
    for (int l = 0, i = 0; maps && l < m->cfg.n_layers; l++) {
        const hl_tensor *a = trace[l].attn; /* (1,H,T,T) */
        memcpy(maps->data + (size_t)i * T * T, a->data, sizeof(hl_real) * a->numel);
        i += a->shape[1];
    }
    hl_graph_free(g);
    return maps;
}

const char *hl_token_label(int32_t token, bool bytes, char buf[HL_TOKEN_LABEL_MAX])
{
    if (!bytes || token < 0 || token > 255)
        snprintf(buf, HL_TOKEN_LABEL_MAX, "%d", (int)token);
    else if (token == ' ')
        snprintf(buf, HL_TOKEN_LABEL_MAX, "' '");
    else if (token == '\n')
        snprintf(buf, HL_TOKEN_LABEL_MAX, "\\n");
    else if (token == '\t')
        snprintf(buf, HL_TOKEN_LABEL_MAX, "\\t");
    else if (token == '\r')
        snprintf(buf, HL_TOKEN_LABEL_MAX, "\\r");
    else if (token > ' ' && token < 127)
        snprintf(buf, HL_TOKEN_LABEL_MAX, "%c", (char)token);
    else
        snprintf(buf, HL_TOKEN_LABEL_MAX, "\\x%02x", (unsigned)token);
    return buf;
}
