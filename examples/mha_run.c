/*
 * mha_run: multi-head attention on tensors from safetensors files, forward
 * and (given grad_output) backward, so results can be compared with PyTorch.
 *
 *     build/mha_run --weights W.safetensors --inputs IN.safetensors
 *                   --out OUT.safetensors --heads H [--causal] [--no-weights [--composed]]
 *
 * Exit status: 0 done, 1 out of memory, 2 bad arguments or files (a message
 * says which).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "headlab.h"
#include "io/internal.h"

static const hl_usage usage = {
    "usage: mha_run --weights W.safetensors --inputs IN.safetensors --out OUT.safetensors\n"
    "               --heads H [--causal] [--no-weights [--composed]]\n"
    "\n"
    "Runs torch.nn.MultiheadAttention-compatible attention (batch_first) on files.\n"
    "W holds PyTorch's state_dict names: in_proj_weight (3E,E) or q_proj_weight (E,E),\n"
    "  k_proj_weight (E,kdim), v_proj_weight (E,vdim); in_proj_bias (3E) and\n"
    "  out_proj.bias (E) when the module has biases; out_proj.weight (E,E).\n"
    "IN holds query (B,T,E), key (B,S,kdim), value (B,S,vdim) and optionally\n"
    "  key_padding_mask (B,S) U8 or BOOL, 1 = padding (ignored key);\n"
    "  attn_mask (T,S) of a float type, added to the attention scores (-inf blocks);\n"
    "  grad_output (B,T,E), to run the backward pass.\n"
    "  When key and value are absent, query is used for both (self-attention).\n"
    "  Values must be finite but for attn_mask's -inf.\n"
    "OUT receives output (B,T,E) and attn_weights (B,H,T,S) and, with grad_output,\n"
    "  grad.query, grad.key, grad.value and grad.<weight name> for every weight.\n"
    "  Values are written as F32 (F64 from a REAL=double build).\n",
    "Exit status 0 on success, 1 out of memory, 2 on bad arguments or files.\n",
};

typedef struct {
    const char *weights, *inputs, *out;
    int heads;
    bool causal, no_weights, composed;
} options;

static options parse_options(int argc, char **argv)
{
    options o = {0};
    const hl_opt opts[] = {
        HL_OPTION_TEXT("weights", &o.weights, "FILE", "the module's weights (W above)",
                       .dflt = "required"),
        HL_OPTION_TEXT("inputs", &o.inputs, "FILE", "the inputs (IN above)", .dflt = "required"),
        HL_OPTION_TEXT("out", &o.out, "FILE", "where the outputs go (OUT above)",
                       .dflt = "required"),
        HL_OPTION_INT("heads", &o.heads, 1, 4096, "H", "attention heads, dividing E",
                      .dflt = "required"),
        HL_OPTION_FLAG("causal", &o.causal, "hide key s from query t when s > t"),
        HL_OPTION_FLAG("no-weights", &o.no_weights,
                       "run the path a training step takes (no trace: hl_attention, the fused "
                       "op) and write no attn_weights"),
        HL_OPTION_FLAG("composed", &o.composed,
                       "with --no-weights: the composed ops instead of the fused one, without "
                       "a trace"),
        {0},
    };
    hl_cli_parse_or_exit("mha_run", &usage, opts, argc, argv);
    if (!o.weights || !o.inputs || !o.out || !o.heads)
        hl_cli_bad_input("mha_run", "--weights, --inputs, --out and --heads are required "
                                    "(see --help)");
    if (o.composed && !o.no_weights)
        hl_cli_bad_input("mha_run", "--composed needs --no-weights (with the weights, the "
                                    "composed ops run anyway)");
    return o;
}

#ifdef HL_REAL_DOUBLE
#define OUT_DTYPE HL_DTYPE_F64
#else
#define OUT_DTYPE HL_DTYPE_F32
#endif

/* Tensor `name` of the inputs file, or NULL when it is absent and optional
 * (err set on a load error). Data must be finite; a mask holds 0/1 (U8 or
 * BOOL: PyTorch adds a float key_padding_mask to the scores instead), and
 * an additive mask may block with -inf but holds no NaN or +inf. */
static hl_tensor *input(const hl_safetensors *f, const char *path, const char *name,
                        bool required, hl_error *err)
{
    const hl_safetensors_entry_info *e = hl_safetensors_find(f, name);
    if (!e && required)
        hl_error_set(err, HL_ERR_FORMAT, "%s: no tensor \"%s\"", path, name);
    if (!e || hl_error_failed(err))
        return NULL;
    const bool is_mask = !strcmp(name, "key_padding_mask"), additive = !strcmp(name, "attn_mask");
    if (is_mask ? e->dtype != HL_DTYPE_U8 && e->dtype != HL_DTYPE_BOOL
                : !hl_dtype_is_float(e->dtype)) {
        hl_error_set(err, HL_ERR_FORMAT, "%s: tensor \"%s\" is %s; %s", path, name,
                     hl_dtype_name(e->dtype), is_mask ? "a padding mask is U8 or BOOL (1 = padding)"
                                                      : "it must be a float tensor");
        return NULL;
    }
    if (!is_mask && hl_io_check_values(e, path, additive ? HL_IO_ADDITIVE_MASK : HL_IO_FINITE,
                                       err) != HL_OK)
        return NULL;
    const bool grad = !is_mask && !additive && strcmp(name, "grad_output");
    return hl_safetensors_load(f, name, grad, err);
}

static int run(const options *o, hl_error *err)
{
    hl_safetensors *weights = NULL, *inputs = NULL;
    hl_params *params = hl_params_new();
    hl_graph *g = hl_graph_new(0);
    hl_safetensors_writer *w = hl_safetensors_writer_new();
    hl_mha m = {0};
    hl_tensor *q = NULL, *k = NULL, *v = NULL, *pad = NULL, *mask = NULL, *dy = NULL;
    int rc = 2;
    if (!params || !g || !w) {
        hl_error_set(err, HL_ERR_NOMEM, "out of memory");
        goto done;
    }
    if (hl_safetensors_read(o->weights, &weights, err) ||
        hl_safetensors_read(o->inputs, &inputs, err) ||
        hl_mha_load(&m, params, weights, "", o->heads, err))
        goto done;
    q = input(inputs, o->inputs, "query", true, err);
    bool self = !hl_safetensors_find(inputs, "key") && !hl_safetensors_find(inputs, "value");
    k = self ? q : input(inputs, o->inputs, "key", true, err);
    v = self ? q : input(inputs, o->inputs, "value", true, err);
    pad = input(inputs, o->inputs, "key_padding_mask", false, err);
    mask = input(inputs, o->inputs, "attn_mask", false, err);
    dy = input(inputs, o->inputs, "grad_output", false, err);
    if (hl_error_failed(err))
        goto done;

    hl_mha_masks masks = {.causal = o->causal, .key_padding = pad, .additive = mask};
    hl_mha_trace trace;
    const hl_mha_run how = {.trace = o->no_weights ? NULL : &trace,
                            .path = o->composed ? HL_MHA_COMPOSED : HL_MHA_AUTO};
    hl_tensor *y = hl_mha_forward(g, &m, q, k, v, &masks, &how);
    if (!hl_graph_failed(g) && dy && !hl_tensor_same_shape(dy, y)) {
        char ys[HL_SHAPE_STR_MAX], ds[HL_SHAPE_STR_MAX];
        hl_error_set(err, HL_ERR_SHAPE, "grad_output %s does not match the output %s",
                     hl_shape_str(dy, ds), hl_shape_str(y, ys));
        goto done;
    }
    if (dy)
        hl_graph_backward_from(g, y, dy->data);
    if (hl_graph_failed(g)) { /* an op refused the files' tensors: name them */
        hl_error_set(err, hl_graph_status(g), "%s with %s: %s", o->inputs, o->weights,
                     hl_graph_message(g));
        goto done;
    }
    if (hl_safetensors_writer_add(w, "output", y, OUT_DTYPE, err) ||
        (!o->no_weights &&
         hl_safetensors_writer_add(w, "attn_weights", trace.attn, OUT_DTYPE, err)))
        goto done;
    if (dy) {
        /* In self-attention q, k and v are one tensor: its gradient is the sum. */
        const hl_tensor *sources[] = {q, k, v};
        const char *names[] = {"grad.query", "grad.key", "grad.value"};
        for (int i = 0; i < 3; i++) {
            hl_tensor gt = *sources[i];
            gt.data = gt.grad;
            if (hl_safetensors_writer_add(w, names[i], &gt, OUT_DTYPE, err))
                goto done;
        }
        for (size_t i = 0; i < hl_params_n_tensors(params); i++) {
            hl_tensor gt = *hl_params_tensor(params, i);
            char name[HL_NAME_MAX + 8];
            snprintf(name, sizeof name, "grad.%s", gt.name);
            gt.data = gt.grad;
            if (hl_safetensors_writer_add(w, name, &gt, OUT_DTYPE, err))
                goto done;
        }
    }
    if (hl_safetensors_writer_save(w, o->out, err) == HL_OK)
        rc = 0;
done:
    if (k != q)
        hl_tensor_free(k);
    if (v != q)
        hl_tensor_free(v);
    hl_tensor_free(q);
    hl_tensor_free(pad);
    hl_tensor_free(mask);
    hl_tensor_free(dy);
    hl_safetensors_writer_free(w);
    hl_graph_free(g);
    hl_params_free(params);
    hl_safetensors_free(weights);
    hl_safetensors_free(inputs);
    return rc;
}

int main(int argc, char **argv)
{
    hl_cli_init();
    options o = parse_options(argc, argv);
    hl_error err = {0};
    if (run(&o, &err) == 0)
        return 0;
    fprintf(stderr, "mha_run: %s\n", err.message);
    return err.status == HL_ERR_NOMEM ? 1 : 2;
}
