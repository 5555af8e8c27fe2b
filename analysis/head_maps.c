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

/* One byte of a label: printable ASCII as itself, else an escape; false when
 * it does not fit. */
static bool append_byte(char *buf, size_t *at, unsigned char c, bool in_word)
{
    char piece[8];
    if (c == ' ')
        snprintf(piece, sizeof piece, in_word ? "_" : "' '");
    else if (c == '\n')
        snprintf(piece, sizeof piece, "\\n");
    else if (c == '\t')
        snprintf(piece, sizeof piece, "\\t");
    else if (c == '\r')
        snprintf(piece, sizeof piece, "\\r");
    else if (c > ' ' && c < 127)
        snprintf(piece, sizeof piece, "%c", (char)c);
    else
        snprintf(piece, sizeof piece, "\\x%02x", (unsigned)c);
    const size_t len = strlen(piece);
    if (*at + len >= HL_TOKEN_LABEL_MAX)
        return false;
    memcpy(buf + *at, piece, len + 1);
    *at += len;
    return true;
}

const char *hl_token_label(int32_t token, const hl_vocab *vocab, char buf[HL_TOKEN_LABEL_MAX])
{
    size_t len, at = 0;
    const unsigned char *piece = vocab ? hl_vocab_piece(vocab, token, &len) : NULL;
    if (!piece) {
        snprintf(buf, HL_TOKEN_LABEL_MAX, "%d", (int)token);
        return buf;
    }
    buf[0] = 0;
    for (size_t i = 0; i < len && append_byte(buf, &at, piece[i], len > 1); i++)
        ;
    return buf;
}
