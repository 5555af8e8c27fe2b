/* config.json of a Hugging Face causal LM onto a GPT config: see hf.h. */
#include "io/hf.h"
#include "text/json.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static const char *const arch_names[HL_HF_ARCHS] = {
    "GPT2LMHeadModel", "GPTNeoXForCausalLM", "LlamaForCausalLM", "MistralForCausalLM",
    "Qwen2ForCausalLM",
};

const char *hl_hf_arch_name(hl_hf_arch arch)
{
    return (unsigned)arch < HL_HF_ARCHS ? arch_names[arch] : "?";
}

bool hl_hf_is_folder(const char *path)
{
    char config[4096];
    struct stat st;
    if (!path || stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
        return false;
    int n = snprintf(config, sizeof config, "%s/config.json", path);
    return n > 0 && (size_t)n < sizeof config && stat(config, &st) == 0;
}

/* What a parse reads from: the JSON object and the name for messages. */
typedef struct {
    const cJSON *root;
    const char *what;
    hl_error *err;
} config_src;

static bool fail(const config_src *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool fail(const config_src *c, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    hl_error_set(c->err, HL_ERR_FORMAT, "%s: %s", c->what, msg);
    return false;
}

static const cJSON *item(const cJSON *obj, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    return v && !cJSON_IsNull(v) ? v : NULL;
}

/* Integer key >= min into *out; the first key present of a NULL-ended list
 * (old and new spellings). Missing: *out = fallback, or an error when
 * fallback < 0. */
static bool get_int(const config_src *c, const char *const *keys, int min, int fallback,
                    int *out)
{
    for (; *keys; keys++) {
        const cJSON *v = item(c->root, *keys);
        if (!v)
            continue;
        const double x = cJSON_IsNumber(v) ? v->valuedouble : NAN;
        if (!(x >= min && x <= 1 << 30 && x == floor(x)))
            return fail(c, "\"%s\" must be a whole number >= %d", *keys, min);
        *out = (int)x;
        return true;
    }
    if (fallback < 0)
        return fail(c, "\"%s\" is missing", keys[-1]);
    *out = fallback;
    return true;
}

#define KEYS(...) ((const char *const[]){__VA_ARGS__, NULL})

/* A number in (lo, hi) from obj's key into *out, or fallback when absent. */
static bool get_real(const config_src *c, const cJSON *obj, const char *key, double lo,
                     double hi, double fallback, double *out)
{
    const cJSON *v = item(obj, key);
    if (!v) {
        *out = fallback;
        return true;
    }
    if (!cJSON_IsNumber(v) || !(v->valuedouble > lo && v->valuedouble < hi))
        return fail(c, "\"%s\" must be a number in (%g, %g)", key, lo, hi);
    *out = v->valuedouble;
    return true;
}

/* A norm's epsilon: as get_real in (0, 1), and no smaller than the smallest
 * normal hl_real, so that it does not round to 0 (the norms need eps > 0). */
static bool get_eps(const config_src *c, const char *key, double fallback, double *out)
{
    if (!get_real(c, c->root, key, 0, 1, fallback, out))
        return false;
    if (*out < HL_REAL_MIN)
        return fail(c, "\"%s\" %.3g is below the smallest normal %s, %.3g", key, *out,
                    HL_REAL_NAME, (double)HL_REAL_MIN);
    return true;
}

static bool get_bool(const config_src *c, const char *key, bool fallback, bool *out)
{
    const cJSON *v = item(c->root, key);
    if (!v) {
        *out = fallback;
        return true;
    }
    if (!cJSON_IsBool(v))
        return fail(c, "\"%s\" must be true or false", key);
    *out = cJSON_IsTrue(v);
    return true;
}

/* A key that must be absent, null, or equal to the value the GPT expresses. */
static bool refuse_true(const config_src *c, const char *key, const char *why)
{
    const cJSON *v = item(c->root, key);
    if (v && !cJSON_IsFalse(v))
        return fail(c, "\"%s\" is set: %s is not supported", key, why);
    return true;
}

static bool find_arch(const config_src *c, hl_hf_arch *arch)
{
    const cJSON *list = item(c->root, "architectures");
    const cJSON *first = cJSON_IsArray(list) ? cJSON_GetArrayItem(list, 0) : NULL;
    if (!cJSON_IsString(first))
        return fail(c, "\"architectures\" must be a list naming the model class");
    if (cJSON_GetArraySize(list) != 1)
        return fail(c, "\"architectures\" names %d classes; one is supported",
                    cJSON_GetArraySize(list));
    for (int a = 0; a < HL_HF_ARCHS; a++)
        if (!strcmp(first->valuestring, arch_names[a])) {
            *arch = (hl_hf_arch)a;
            return true;
        }
    return fail(c, "architecture \"%.100s\" is not supported (GPT2LMHeadModel, "
                "GPTNeoXForCausalLM, LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM)",
                first->valuestring);
}

/* GELU by name: exact or tanh; anything else refused. */
static bool get_gelu(const config_src *c, const char *key, const char *fallback,
                     hl_gpt_mlp *mlp)
{
    const cJSON *v = item(c->root, key);
    const char *name = cJSON_IsString(v) ? v->valuestring : v ? NULL : fallback;
    if (name && !strcmp(name, "gelu"))
        *mlp = HL_GPT_MLP_GELU;
    else if (name && (!strcmp(name, "gelu_new") || !strcmp(name, "gelu_pytorch_tanh")))
        *mlp = HL_GPT_MLP_GELU_TANH;
    else
        return fail(c, "\"%s\" is \"%.40s\": gelu, gelu_new and gelu_pytorch_tanh are "
                    "supported", key, name ? name : "(not a string)");
    return true;
}

/* The rotary base and fraction as transformers reads them: transformers 5's
 * rope_parameters {rope_theta, rope_type, partial_rotary_factor} first, then
 * the older top-level keys, which differ by architecture. GPT-NeoX takes
 * rotary_emb_base and rotary_pct (default 0.25; its config sets its own
 * over a top-level rope_theta or partial_rotary_factor); the Llama family
 * takes rope_theta, and rotates whole heads (a partial_rotary_factor is
 * refused: transformers 5 ignores it, 4 fails on it). A rope_scaling is read
 * too. Only the plain ("default") rotation is expressed. */
static bool get_rope(const config_src *c, bool neox, double *base, double *fraction)
{
    const cJSON *params = item(c->root, "rope_parameters");
    const cJSON *scaling = item(c->root, "rope_scaling");
    /* Both are read: with the two present, transformers 4 reads rope_scaling
     * alone and 5 prefers it to rope_parameters. (item: null is absent.) */
    const cJSON *sources[] = {params, scaling};
    for (int i = 0; i < 2; i++) {
        const cJSON *p = sources[i];
        if (!p)
            continue;
        if (!cJSON_IsObject(p))
            return fail(c, "\"%s\" must be an object or null",
                        i ? "rope_scaling" : "rope_parameters");
        const cJSON *type = item(p, "rope_type") ? item(p, "rope_type") : item(p, "type");
        if (type && (!cJSON_IsString(type) || strcmp(type->valuestring, "default")))
            return fail(c, "rope type \"%.40s\" is not supported (only \"default\" rotary "
                        "positions, without scaling)",
                        cJSON_IsString(type) ? type->valuestring : "?");
    }
    double theta = 0, pct = 0; /* 0 when absent */
    /* The base is used as an hl_real: one beyond its range would be inf. */
    if (params && (!get_real(c, params, "rope_theta", 1, HL_REAL_MAX, 0, &theta) ||
                   !get_real(c, params, "partial_rotary_factor", 0, 1.0000001, 0, &pct)))
        return false;
    double old_theta = 0, old_pct = 0;
    if (!get_real(c, c->root, neox ? "rotary_emb_base" : "rope_theta", 1, HL_REAL_MAX, 0,
                  &old_theta) ||
        !get_real(c, c->root, neox ? "rotary_pct" : "partial_rotary_factor", 0, 1.0000001, 0,
                  &old_pct))
        return false;
    theta = theta ? theta : old_theta;
    pct = pct ? pct : old_pct;
    if (!neox && pct && pct != 1)
        return fail(c, "\"partial_rotary_factor\" %g: this architecture rotates whole heads "
                    "in transformers (a part only in GPT-NeoX)", pct);
    *base = theta ? theta : 10000;
    *fraction = pct ? pct : neox ? 0.25 : 1;
    return true;
}

/* The rotated dims of a head: GPT-NeoX's int(head_dim · fraction). */
static bool set_rotary(const config_src *c, hl_gpt_config *cfg, double fraction)
{
    const int head_dim = cfg->d_model / cfg->n_heads;
    const int dims = (int)(head_dim * fraction);
    if (dims < 2 || dims % 2)
        return fail(c, "rotary dims %d (head width %d times %g) must be even and >= 2", dims,
                    head_dim, fraction);
    cfg->rotary_dims = dims == head_dim ? 0 : dims;
    return true;
}

static bool parse_gpt2(const config_src *c, hl_gpt_config *cfg)
{
    int inner;
    cfg->pos = HL_GPT_POS_LEARNED;
    cfg->norm = HL_GPT_NORM_LAYER;
    cfg->no_head_bias = true;
    if (!get_int(c, KEYS("n_embd"), 1, 768, &cfg->d_model) ||
        !get_int(c, KEYS("n_head"), 1, 12, &cfg->n_heads) ||
        !get_int(c, KEYS("n_layer"), 1, 12, &cfg->n_layers) ||
        !get_int(c, KEYS("n_positions"), 1, 1024, &cfg->n_ctx) ||
        !get_int(c, KEYS("vocab_size"), 1, 50257, &cfg->vocab_in) ||
        !get_int(c, KEYS("n_inner"), 1, 0, &inner) ||
        !get_gelu(c, "activation_function", "gelu_new", &cfg->mlp) ||
        !get_eps(c, "layer_norm_epsilon", 1e-5, &cfg->norm_eps) ||
        !get_bool(c, "tie_word_embeddings", true, &cfg->tie_embeddings) ||
        !refuse_true(c, "scale_attn_by_inverse_layer_idx", "scaling attention by the layer") ||
        !refuse_true(c, "add_cross_attention", "cross-attention"))
        return false;
    bool scaled;
    if (!get_bool(c, "scale_attn_weights", true, &scaled))
        return false;
    if (!scaled)
        return fail(c, "\"scale_attn_weights\" is false: unscaled attention is not supported");
    /* In 64 bits: n_embd may be up to 2^30, and 4 times that overflows an int. */
    const int64_t default_width = (int64_t)4 * cfg->d_model;
    if (!inner && default_width > 1 << 30)
        return fail(c, "\"n_embd\" %d times 4 (the MLP width when \"n_inner\" is absent) is "
                    "over 2^30", cfg->d_model);
    cfg->mlp_width = inner == default_width ? 0 : inner;
    return true;
}

static bool parse_neox(const config_src *c, hl_gpt_config *cfg)
{
    double base, fraction;
    bool bias;
    cfg->pos = HL_GPT_POS_ROPE;
    cfg->norm = HL_GPT_NORM_LAYER;
    cfg->no_head_bias = true;
    if (!get_int(c, KEYS("hidden_size"), 1, -1, &cfg->d_model) ||
        !get_int(c, KEYS("num_attention_heads"), 1, -1, &cfg->n_heads) ||
        !get_int(c, KEYS("num_hidden_layers"), 1, -1, &cfg->n_layers) ||
        !get_int(c, KEYS("intermediate_size"), 1, -1, &cfg->mlp_width) ||
        !get_int(c, KEYS("max_position_embeddings"), 1, 2048, &cfg->n_ctx) ||
        !get_int(c, KEYS("vocab_size"), 1, -1, &cfg->vocab_in) ||
        !get_gelu(c, "hidden_act", "gelu", &cfg->mlp) ||
        !get_eps(c, "layer_norm_eps", 1e-5, &cfg->norm_eps) ||
        !get_bool(c, "use_parallel_residual", true, &cfg->parallel_residual) ||
        !get_bool(c, "tie_word_embeddings", false, &cfg->tie_embeddings) ||
        !get_bool(c, "attention_bias", true, &bias) || !get_rope(c, true, &base, &fraction))
        return false;
    if (cfg->d_model % cfg->n_heads)
        return fail(c, "\"hidden_size\" %d is not divisible by \"num_attention_heads\" %d",
                    cfg->d_model, cfg->n_heads);
    cfg->rope_base = base;
    cfg->no_qkv_bias = cfg->no_out_bias = !bias;
    return set_rotary(c, cfg, fraction);
}

/* Llama, and Mistral and Qwen2 where they differ from it by options (and
 * by transformers' defaults: the context, the key/value heads). */
static bool parse_llama(const config_src *c, hl_hf_arch arch, hl_gpt_config *cfg)
{
    double base, fraction;
    bool attn_bias, mlp_bias;
    int head_dim, window;
    cfg->pos = HL_GPT_POS_ROPE;
    cfg->norm = HL_GPT_NORM_RMS;
    cfg->mlp = HL_GPT_MLP_SWIGLU;
    cfg->no_head_bias = true;
    if (!get_int(c, KEYS("hidden_size"), 1, -1, &cfg->d_model) ||
        !get_int(c, KEYS("num_attention_heads"), 1, -1, &cfg->n_heads) ||
        !get_int(c, KEYS("num_key_value_heads"), 1, 0, &cfg->n_kv_heads) ||
        !get_int(c, KEYS("num_hidden_layers"), 1, -1, &cfg->n_layers) ||
        !get_int(c, KEYS("intermediate_size"), 1, -1, &cfg->mlp_width) ||
        !get_int(c, KEYS("max_position_embeddings"), 1,
                 arch == HL_HF_MISTRAL ? 131072 : arch == HL_HF_QWEN2 ? 32768 : 2048,
                 &cfg->n_ctx) ||
        !get_int(c, KEYS("vocab_size"), 1, -1, &cfg->vocab_in) ||
        !get_int(c, KEYS("head_dim"), 1, 0, &head_dim) ||
        !get_int(c, KEYS("sliding_window"), 1, 0, &window) ||
        !get_eps(c, "rms_norm_eps", 1e-6, &cfg->norm_eps) ||
        !get_bool(c, "tie_word_embeddings", false, &cfg->tie_embeddings) ||
        !get_bool(c, "attention_bias", false, &attn_bias) ||
        !get_bool(c, "mlp_bias", false, &mlp_bias) || !get_rope(c, false, &base, &fraction))
        return false;
    /* transformers' Mistral and Qwen2 have no such options: biases are fixed
     * (below), and any in the file are left over, so refused. */
    if (arch != HL_HF_LLAMA)
        attn_bias = mlp_bias = false;
    /* Without the key, transformers' own defaults: Mistral 8, Qwen2 32; null
     * is one key/value head a query head there too. */
    const bool kv_null = cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(c->root,
                                                                       "num_key_value_heads"));
    if (!cfg->n_kv_heads)
        cfg->n_kv_heads = kv_null || arch == HL_HF_LLAMA ? cfg->n_heads
                          : arch == HL_HF_MISTRAL        ? 8
                                                         : 32;
    const cJSON *act = item(c->root, "hidden_act");
    if (act && (!cJSON_IsString(act) || strcmp(act->valuestring, "silu")))
        return fail(c, "\"hidden_act\" is \"%.40s\": only silu (SwiGLU) is supported",
                    cJSON_IsString(act) ? act->valuestring : "?");
    /* pretraining_tp > 1 only slices the same products (transformers 4). */
    int tp;
    if (!get_int(c, KEYS("pretraining_tp"), 1, 1, &tp))
        return false;
    /* In 64 bits: both factors may be up to 2^30. */
    if (cfg->d_model % cfg->n_heads ||
        (head_dim && (int64_t)head_dim * cfg->n_heads != cfg->d_model))
        return fail(c, "\"head_dim\" %d times \"num_attention_heads\" %d is not "
                    "\"hidden_size\" %d", head_dim ? head_dim : cfg->d_model / cfg->n_heads,
                    cfg->n_heads, cfg->d_model);
    if (cfg->n_kv_heads == cfg->n_heads)
        cfg->n_kv_heads = 0;
    if (arch == HL_HF_QWEN2) { /* q, k and v biased, the output not */
        /* transformers slides the layers from max_window_layers on (28 by
         * default), with a window (4096 by default; null: none) */
        bool sliding;
        int first_sliding;
        if (!get_bool(c, "use_sliding_window", false, &sliding) ||
            !get_int(c, KEYS("max_window_layers"), 0, 28, &first_sliding))
            return false;
        const bool windowless = cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(c->root,
                                                                              "sliding_window"));
        if (sliding && !windowless && first_sliding < cfg->n_layers)
            return fail(c, "\"use_sliding_window\" is true from layer %d on: sliding-window "
                        "attention on some layers is not supported", first_sliding);
        window = 0;
        attn_bias = true;
        cfg->no_out_bias = true;
    }
    /* Mistral's window: transformers' 4096 when the key is absent, none when
     * it is null; Llama's config has none (a sliding_window there is unread).
     * A window at least the context long never hides a key: take the window
     * as the context instead. */
    if (arch == HL_HF_MISTRAL && !cJSON_GetObjectItemCaseSensitive(c->root, "sliding_window"))
        window = 4096;
    if (arch == HL_HF_MISTRAL && window && window < cfg->n_ctx)
        cfg->n_ctx = window;
    cfg->rope_base = base;
    cfg->no_qkv_bias = !attn_bias;
    cfg->no_out_bias = cfg->no_out_bias || !attn_bias;
    cfg->no_mlp_bias = !mlp_bias;
    return set_rotary(c, cfg, fraction);
}

hl_status hl_hf_config_parse(const char *json, size_t len, const char *what, hl_gpt_config *cfg,
                             hl_hf_arch *arch, hl_error *err)
{
    memset(cfg, 0, sizeof *cfg);
    char why[HL_JSON_WHY_MAX] = "no text";
    cJSON *root = NULL;
    const hl_status parsed = json ? hl_json_parse(json, len, &root, why) : HL_ERR_ARG;
    config_src c = {root, what ? what : "config.json", err};
    bool ok = false;
    if (parsed == HL_ERR_NOMEM)
        return hl_error_set(err, parsed, "%s: %s", c.what, why);
    if (!root)
        fail(&c, "not a JSON object (not valid JSON: %s)", why);
    else if (!cJSON_IsObject(root))
        fail(&c, "not a JSON object");
    else if (find_arch(&c, arch))
        ok = *arch == HL_HF_GPT2        ? parse_gpt2(&c, cfg)
             : *arch == HL_HF_GPT_NEOX ? parse_neox(&c, cfg)
                                       : parse_llama(&c, *arch, cfg);
    cJSON_Delete(root);
    if (!ok)
        return err->status;
    cfg->vocab_out = cfg->vocab_in;
    cfg->emb_std = 0.02;
    /* Rotary models state long contexts they never need whole here. */
    if (cfg->pos == HL_GPT_POS_ROPE && cfg->n_ctx > HL_GPT_MAX_CTX)
        cfg->n_ctx = HL_GPT_MAX_CTX;
    if (cfg->n_layers > HL_GPT_MAX_LAYERS || cfg->n_heads > HL_HEADS_MAX)
        return hl_error_set(err, HL_ERR_FORMAT, "%s: %d layers of %d heads; headlab builds up "
                            "to %d layers of %d heads", c.what, cfg->n_layers, cfg->n_heads,
                            HL_GPT_MAX_LAYERS, HL_HEADS_MAX);
    return HL_OK;
}
