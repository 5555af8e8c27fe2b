/*
 * demo_engine: the engine end to end on a task attention solves.
 *
 * One attention layer (4 heads, causal) between a token embedding (+ learned
 * positions) and a linear read-out learns to output, at every position t, the
 * token at t-1: a "previous-token" lookup that only attention can do. Every
 * gradient comes from autograd; the loop reuses one step arena.
 *
 *     build/demo_engine [--steps N] [--seed S]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "headlab.h"

enum { V = 12, T = 16, E = 32, H = 4, B = 16 };

typedef struct {
    hl_params *params;
    hl_tensor *tok, *pos, *unembed, *unembed_bias;
    hl_mha attn;
} demo_model;

static const hl_usage usage = {
    "usage: demo_engine [--steps N] [--seed S]\n"
    "Trains one attention layer to copy the previous token.\n",
    NULL,
};

static hl_tensor *forward(hl_graph *g, demo_model *m, const int32_t *tokens,
                          const int32_t *targets, hl_mha_trace *trace)
{
    hl_tensor *x = hl_embedding(g, m->tok, tokens, 2, (int[]){B, T});
    int32_t positions[B * T];
    for (int i = 0; i < B * T; i++)
        positions[i] = i % T;
    x = hl_add(g, x, hl_embedding(g, m->pos, positions, 2, (int[]){B, T}));
    hl_mha_masks masks = {.causal = true};
    hl_tensor *h = hl_add(g, x, hl_mha_forward(g, &m->attn, x, x, x, &masks, &(hl_mha_run){.trace = trace}));
    hl_tensor *logits = hl_linear(g, h, m->unembed, m->unembed_bias);
    return hl_cross_entropy(g, logits, targets, -1);
}

int main(int argc, char **argv)
{
    int steps = 300, seed = 1;
    const hl_opt opts[] = {
        HL_OPTION_INT("steps", &steps, 1, 1000000, "N", "training steps"),
        HL_OPTION_INT("seed", &seed, 0, 1 << 30, "S", "seed of the weights and the data"),
        {0},
    };
    hl_cli_init();
    hl_cli_parse_or_exit("demo_engine", &usage, opts, argc, argv);
    demo_model m = {.params = hl_params_new()};
    hl_error err = {0};
    m.tok = hl_params_add(m.params, "tok_emb.weight", 2, (int[]){V, E});
    m.pos = hl_params_add(m.params, "pos_emb.weight", 2, (int[]){T, E});
    m.unembed = hl_params_add(m.params, "head.weight", 2, (int[]){V, E});
    m.unembed_bias = hl_params_add(m.params, "head.bias", 1, (int[]){V});
    hl_mha_config cfg = {.embed_dim = E, .num_heads = H, .bias = true};
    if (hl_mha_declare(&m.attn, m.params, "attn.", &cfg, &err) != HL_OK ||
        hl_params_commit(m.params) != HL_OK) {
        fprintf(stderr, "demo_engine: %s%s\n", err.message, hl_params_error(m.params)->message);
        return 1;
    }
    hl_rng rng;
    hl_rng_seed(&rng, (uint64_t)seed);
    hl_init_normal(m.tok, &rng, 0, 1);
    hl_init_normal(m.pos, &rng, 0, 1);
    hl_init_kaiming_uniform(m.unembed, &rng, E);
    hl_init_kaiming_uniform(m.unembed_bias, &rng, E);
    hl_mha_init_weights(&m.attn, &rng);

    printf("demo_engine: %zu parameters; predict the previous token with one causal "
           "attention layer (%d heads)\n", hl_params_n_values(m.params), H);
    hl_graph *g = hl_graph_new(0);
    int32_t tokens[B * T], targets[B * T];
    const hl_real lr = 0.1f;
    for (int step = 0; step < steps; step++) {
        for (int i = 0; i < B * T; i++)
            tokens[i] = (int32_t)hl_rng_below(&rng, V);
        for (int i = 0; i < B * T; i++)
            targets[i] = i % T == 0 ? -1 : tokens[i - 1]; /* -1: position 0 has no target */
        hl_params_zero_grad(m.params);
        hl_mha_trace trace;
        hl_tensor *loss = forward(g, &m, tokens, targets, &trace);
        if (hl_graph_backward(g, loss) != HL_OK) {
            fprintf(stderr, "demo_engine: step %d: %s\n", step, hl_graph_message(g));
            return 1;
        }
        if (step % 50 == 0 || step == steps - 1) {
            /* How much attention the last query puts on its previous token, per head. */
            printf("step %4d  loss %.4f  attention on t-1:", step, (double)loss->data[0]);
            for (int h = 0; h < H; h++) {
                double mass = 0;
                for (int t = 1; t < T; t++)
                    mass += trace.attn->data[((size_t)h * T + t) * T + t - 1];
                printf(" %.2f", mass / (T - 1));
            }
            printf("\n");
        }
        hl_real *w = hl_params_values(m.params), *dw = hl_params_grads(m.params);
        for (size_t i = 0; i < hl_params_count(m.params); i++)
            w[i] -= lr * dw[i];
        hl_graph_reset(g);
    }
    printf("arena: %zu bytes at the high-water mark, %zu allocations over %d step%s\n",
           g->arena.high_water, g->arena.n_mallocs, steps, steps == 1 ? "" : "s");
    hl_graph_free(g);
    hl_params_free(m.params);
    return 0;
}
