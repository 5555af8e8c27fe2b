/* A GPT as a Hugging Face model folder: see hf.h. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "files/atomic.h"
#include "files/fs.h"
#include "io/hf.h"
#include "io/hf_names.h"
#include "io/internal.h"
#include "io/safetensors.h"

/* Records the first difference in why; always false. */
static bool differs(char *why, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static bool differs(char *why, size_t size, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, size, fmt, ap);
    va_end(ap);
    return false;
}

/* What no architecture expresses, whichever is closest. */
static bool common_ok(const hl_gpt_config *c, char *why, size_t size)
{
    if (c->smear_keys)
        return differs(why, size, "smeared keys (no Hugging Face architecture has them)");
    if (c->qk_norm)
        return differs(why, size, "QK-norm (GPT-2, GPT-NeoX, Llama and Qwen2 have none)");
    if (c->softcap > 0)
        return differs(why, size, "soft-capped logits (GPT-2, GPT-NeoX, Llama and Qwen2 have "
                       "none)");
    for (int l = 0; l < c->n_layers; l++)
        if (hl_gpt_layer_heads(c, l) != c->n_heads)
            return differs(why, size, "layer %d has %d of %d heads after pruning (the "
                           "architectures have as many heads in every layer)", l,
                           hl_gpt_layer_heads(c, l), c->n_heads);
    if (c->vocab_in != c->vocab_out)
        return differs(why, size, "it reads %d tokens and predicts %d (one vocabulary in "
                       "the architectures)", c->vocab_in, c->vocab_out);
    if (!c->no_head_bias)
        return differs(why, size, "a head bias (head.bias), which GPT-2, GPT-NeoX and Llama "
                       "lack: train with --no-head-bias");
    return true;
}

/* Whether query heads share key/value heads (which GPT-2 and GPT-NeoX lack). */
static bool grouped(const hl_gpt_config *c)
{
    return c->n_kv_heads && c->n_kv_heads != c->n_heads;
}

static bool gpt2_ok(const hl_gpt_config *c, char *why, size_t size)
{
    if (grouped(c))
        return differs(why, size, "GPT-2 has no grouped-query attention");
    if (c->mlp != HL_GPT_MLP_GELU && c->mlp != HL_GPT_MLP_GELU_TANH)
        return differs(why, size, "GPT-2 has a GELU MLP, not %s", hl_gpt_mlp_name(c->mlp));
    if (c->parallel_residual)
        return differs(why, size, "GPT-2 has no parallel residual");
    if (c->no_qkv_bias || c->no_out_bias || c->no_mlp_bias)
        return differs(why, size, "GPT-2's linears all have biases");
    return true;
}

static bool neox_ok(const hl_gpt_config *c, char *why, size_t size)
{
    if (c->mlp != HL_GPT_MLP_GELU && c->mlp != HL_GPT_MLP_GELU_TANH)
        return differs(why, size, "GPT-NeoX has a GELU MLP, not %s", hl_gpt_mlp_name(c->mlp));
    if (grouped(c))
        return differs(why, size, "GPT-NeoX has no grouped-query attention");
    if (c->no_qkv_bias != c->no_out_bias || c->no_mlp_bias)
        return differs(why, size, "GPT-NeoX's attention linears all have biases or none, and "
                       "its MLP has biases");
    return true;
}

static bool llama_ok(const hl_gpt_config *c, hl_hf_arch arch, char *why, size_t size)
{
    if (c->mlp != HL_GPT_MLP_SWIGLU)
        return differs(why, size, "Llama has a SwiGLU MLP, not %s", hl_gpt_mlp_name(c->mlp));
    if (c->parallel_residual)
        return differs(why, size, "Llama has no parallel residual");
    if (c->rotary_dims)
        return differs(why, size, "Llama rotates whole heads, not %d dims", c->rotary_dims);
    if (arch == HL_HF_QWEN2 && c->no_mlp_bias)
        return true;
    if (arch == HL_HF_LLAMA && c->no_qkv_bias == c->no_out_bias)
        return true;
    return differs(why, size, "Llama's attention linears all have biases or none (Qwen2: q, k "
                   "and v only, no MLP bias)");
}

hl_hf_arch hl_hf_arch_for(const hl_gpt_config *c, char *why, size_t size)
{
    if (!common_ok(c, why, size))
        return HL_HF_ARCHS;
    if (c->pos == HL_GPT_POS_LEARNED && c->norm == HL_GPT_NORM_LAYER)
        return gpt2_ok(c, why, size) ? HL_HF_GPT2 : HL_HF_ARCHS;
    if (c->pos == HL_GPT_POS_ROPE && c->norm == HL_GPT_NORM_LAYER)
        return neox_ok(c, why, size) ? HL_HF_GPT_NEOX : HL_HF_ARCHS;
    if (c->pos == HL_GPT_POS_ROPE && c->norm == HL_GPT_NORM_RMS) {
        const hl_hf_arch arch = !c->no_qkv_bias && c->no_out_bias ? HL_HF_QWEN2 : HL_HF_LLAMA;
        return llama_ok(c, arch, why, size) ? arch : HL_HF_ARCHS;
    }
    differs(why, size, "%s positions with %s: GPT-2 has learned positions and LayerNorm, "
            "GPT-NeoX rotary positions and LayerNorm, Llama rotary positions and RMSNorm",
            hl_gpt_pos_name(c->pos), hl_gpt_norm_name(c->norm));
    return HL_HF_ARCHS;
}

static const char *gelu_name(const hl_gpt_config *c)
{
    return c->mlp == HL_GPT_MLP_GELU_TANH ? "gelu_new" : "gelu";
}

/* The fraction f of a head's D dims with int(D·f) = r, the rotated dims as
 * transformers (and set_rotary in hf_config.c) compute them: r/D itself can
 * land a dim short (D 44, r 30: int(44·(30/44)) is 29). */
static double rotary_fraction(int r, int D)
{
    double f = (double)r / D;
    while ((int)(D * f) < r)
        f = nextafter(f, 2);
    return f;
}

/* The rotary settings in transformers 5's form and the older one. */
static void add_rope(cJSON *root, const hl_gpt_config *c, double fraction)
{
    const double base = c->rope_base > 0 ? c->rope_base : HL_GPT_ROPE_BASE;
    cJSON *rope = cJSON_AddObjectToObject(root, "rope_parameters");
    cJSON_AddStringToObject(rope, "rope_type", "default");
    cJSON_AddNumberToObject(rope, "rope_theta", base);
    if (fraction < 1)
        cJSON_AddNumberToObject(rope, "partial_rotary_factor", fraction);
    cJSON_AddNumberToObject(root, "rope_theta", base);
}

static cJSON *config_json(const hl_gpt *m, hl_hf_arch arch)
{
    static const char *const types[HL_HF_ARCHS] = {"gpt2", "gpt_neox", "llama", "mistral",
                                                   "qwen2"};
    const hl_gpt_config *c = &m->cfg;
    const int D = c->d_model / c->n_heads, F = hl_gpt_mlp_width(c);
    cJSON *root = cJSON_CreateObject();
    cJSON_AddItemToObject(root, "architectures",
                          cJSON_CreateStringArray((const char *[]){hl_hf_arch_name(arch)}, 1));
    cJSON_AddStringToObject(root, "model_type", types[arch]);
    cJSON_AddNumberToObject(root, "vocab_size", c->vocab_in);
    cJSON_AddBoolToObject(root, "tie_word_embeddings", c->tie_embeddings);
    if (arch == HL_HF_GPT2) {
        cJSON_AddNumberToObject(root, "n_positions", c->n_ctx);
        cJSON_AddNumberToObject(root, "n_embd", c->d_model);
        cJSON_AddNumberToObject(root, "n_layer", c->n_layers);
        cJSON_AddNumberToObject(root, "n_head", c->n_heads);
        cJSON_AddNumberToObject(root, "n_inner", F);
        cJSON_AddStringToObject(root, "activation_function", gelu_name(c));
        cJSON_AddNumberToObject(root, "layer_norm_epsilon", hl_gpt_norm_eps(c));
        /* headlab drops the embeddings and the blocks' outputs, never the
         * attention weights (attn_pdrop, and attention_dropout below). */
        cJSON_AddNumberToObject(root, "attn_pdrop", 0);
        cJSON_AddNumberToObject(root, "embd_pdrop", c->dropout);
        cJSON_AddNumberToObject(root, "resid_pdrop", c->dropout);
        return root;
    }
    cJSON_AddNumberToObject(root, "hidden_size", c->d_model);
    cJSON_AddNumberToObject(root, "num_attention_heads", c->n_heads);
    cJSON_AddNumberToObject(root, "num_hidden_layers", c->n_layers);
    cJSON_AddNumberToObject(root, "intermediate_size", F);
    cJSON_AddNumberToObject(root, "max_position_embeddings", c->n_ctx);
    if (arch == HL_HF_GPT_NEOX) {
        const double fraction = c->rotary_dims ? rotary_fraction(c->rotary_dims, D) : 1;
        cJSON_AddStringToObject(root, "hidden_act", gelu_name(c));
        cJSON_AddNumberToObject(root, "layer_norm_eps", hl_gpt_norm_eps(c));
        cJSON_AddBoolToObject(root, "use_parallel_residual", c->parallel_residual);
        cJSON_AddBoolToObject(root, "attention_bias", !c->no_qkv_bias);
        cJSON_AddNumberToObject(root, "rotary_pct", fraction);
        cJSON_AddNumberToObject(root, "rotary_emb_base",
                                c->rope_base > 0 ? c->rope_base : HL_GPT_ROPE_BASE);
        add_rope(root, c, fraction);
        cJSON_AddNumberToObject(root, "attention_dropout", 0);
        cJSON_AddNumberToObject(root, "hidden_dropout", c->dropout);
        return root;
    }
    cJSON_AddNumberToObject(root, "num_key_value_heads", c->n_kv_heads ? c->n_kv_heads
                                                                       : c->n_heads);
    cJSON_AddNumberToObject(root, "head_dim", D);
    cJSON_AddStringToObject(root, "hidden_act", "silu");
    cJSON_AddNumberToObject(root, "rms_norm_eps", hl_gpt_norm_eps(c));
    add_rope(root, c, 1);
    if (arch == HL_HF_QWEN2) {
        /* null too: some transformers 4 releases apply Qwen2Config's default
         * window of 4,096 whatever use_sliding_window says. */
        cJSON_AddBoolToObject(root, "use_sliding_window", false);
        cJSON_AddNullToObject(root, "sliding_window");
    } else {
        cJSON_AddBoolToObject(root, "attention_bias", !c->no_qkv_bias);
        cJSON_AddBoolToObject(root, "mlp_bias", !c->no_mlp_bias);
    }
    cJSON_AddNumberToObject(root, "attention_dropout", 0); /* Llama drops nothing else */
    return root;
}

static hl_status write_config(const hl_gpt *m, hl_hf_arch arch, const hl_hf_token_ids *ids,
                              const char *dir, hl_error *err)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    cJSON *root = config_json(m, arch);
    const hl_hf_token_ids none = {0};
    char *text = root && hl_hf_token_ids_add(root, ids ? ids : &none) ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    if (!text)
        return hl_error_set(err, HL_ERR_NOMEM, "%s: out of memory", path);
    hl_atomic_file out;
    hl_status st = hl_atomic_begin(&out, path, err);
    if (st == HL_OK) {
        fprintf(out.f, "%s\n", text);
        st = hl_atomic_commit(&out, err);
    }
    free(text);
    return st;
}

/* One parameter as the checkpoint's tensors (its parts, in their layout). */
static hl_status add_param(hl_safetensors_writer *w, const hl_gpt *m, hl_hf_arch arch,
                           const hl_tensor *p, hl_error *err)
{
    hl_hf_source src;
    if (!hl_hf_source_of(arch, "transformer.", m, p, &src))
        return hl_error_set(err, HL_ERR_ARG, "export: parameter %s has no place in %s",
                            p->name, hl_hf_arch_name(arch));
    const int rows = p->shape[0], cols = p->rank == 2 ? p->shape[1] : 1;
    hl_real *theirs = malloc(p->numel * sizeof *theirs);
    float *values = malloc(p->numel * sizeof *values);
    hl_status st = theirs && values ? HL_OK : hl_error_set(err, HL_ERR_NOMEM, "out of memory");
    if (st == HL_OK)
        hl_hf_to_theirs(&src, p->data, theirs, rows, cols, m->cfg.n_heads,
                        m->cfg.d_model / m->cfg.n_heads);
    for (size_t i = 0; st == HL_OK && i < p->numel; i++)
        values[i] = (float)theirs[i];
    size_t at = 0;
    for (int k = 0; k < src.n_parts && st == HL_OK; k++) {
        const bool transposed = src.layout == HL_HF_TRANSPOSED && p->rank == 2;
        const int64_t shape[2] = {transposed ? cols : src.rows[k],
                                  transposed ? src.rows[k] : cols};
        st = hl_safetensors_writer_add_raw(w, src.name[k], HL_DTYPE_F32, p->rank, shape,
                                           values + at, err);
        at += (size_t)src.rows[k] * cols;
    }
    free(theirs);
    free(values);
    return st;
}

static hl_status write_weights(const hl_gpt *m, hl_hf_arch arch, const char *dir,
                               hl_error *err)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    hl_safetensors_writer *w = hl_safetensors_writer_new();
    hl_status st = w ? HL_OK : hl_error_set(err, HL_ERR_NOMEM, "out of memory");
    for (size_t i = 0; st == HL_OK && i < hl_params_n_tensors(m->params); i++)
        st = add_param(w, m, arch, hl_params_tensor(m->params, i), err);
    if (st == HL_OK)
        st = hl_safetensors_writer_set_metadata(w, "format", "pt", err);
    if (st == HL_OK)
        st = hl_safetensors_writer_save(w, path, err);
    hl_safetensors_writer_free(w);
    return st;
}

hl_status hl_hf_export(const hl_gpt *m, const hl_hf_token_ids *ids, const char *dir,
                       hl_error *err)
{
    char why[300];
    const hl_hf_arch arch = hl_hf_arch_for(&m->cfg, why, sizeof why);
    if (arch == HL_HF_ARCHS)
        return hl_error_set(err, HL_ERR_ARG, "export: no Hugging Face architecture expresses "
                            "this model: %s", why);
    if (hl_fs_make_dirs(dir) != 0)
        return hl_error_set(err, HL_ERR_IO, "%s: cannot create the folder", dir);
    if (write_weights(m, arch, dir, err) != HL_OK)
        return err->status;
    return write_config(m, arch, ids, dir, err);
}
