/* Tests for io/hf_*.c: Hugging Face model folders. Three tiny models saved by
 * transformers 5.17 (tests/fixtures/hf/, made by the script of their README)
 * load and give transformers' own logits, attention probabilities, hidden
 * states, loss and every parameter's gradient, on both attention paths; bad
 * configs, tensors and folders are refused naming the file and the field. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/rng.h"
#include "files/fs.h"
#include "io/hf.h"
#include "io/hf_names.h"
#include "io/model_io.h"
#include "analysis/prune.h"
#include "io/safetensors.h"
#include "ops/ops.h"
#include "tests/testutil.h"

#define HF "tests/fixtures/hf/"
/* The parity bounds: activations 1e-4 absolute, the loss 1e-5,
 * gradients 1e-4 of their tensor's largest value. */
#define ACT_TOL 1e-4
#define LOSS_TOL 1e-5
#define GRAD_TOL 1e-4

static hl_tensor *expected(const hl_safetensors *f, const char *name)
{
    hl_error err = {0};
    hl_tensor *t = hl_safetensors_load(f, name, false, &err);
    ck_assert_msg(t, "%s", err.message);
    return t;
}

static void expect_close(const hl_safetensors *f, const char *name, const hl_real *got,
                         size_t n, double tol)
{
    hl_tensor *want = expected(f, name);
    ck_assert_uint_eq(want->numel, n);
    tu_assert_close(name, got, want->data, n, tol);
    hl_tensor_free(want);
}

/* The largest |x| of n values. */
static double largest(const hl_real *x, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++)
        m = fmax(m, fabs((double)x[i]));
    return m;
}

/* Every parameter's gradient in the checkpoint's names and layout against
 * transformers' grad.<name>. */
static void expect_grads(const hl_gpt *m, hl_hf_arch arch, const hl_safetensors *f)
{
    const char *prefix = arch == HL_HF_GPT2 ? "transformer." : "";
    for (size_t i = 0; i < hl_params_n_tensors(m->params); i++) {
        const hl_tensor *p = hl_params_tensor(m->params, i);
        hl_hf_source src;
        ck_assert_msg(hl_hf_source_of(arch, prefix, m, p, &src), "%s", p->name);
        const int rows = p->shape[0], cols = p->rank == 2 ? p->shape[1] : 1;
        hl_real *theirs = malloc(p->numel * sizeof *theirs);
        ck_assert(theirs);
        hl_hf_to_theirs(&src, p->grad, theirs, rows, cols, m->cfg.n_heads,
                        m->cfg.d_model / m->cfg.n_heads);
        size_t at = 0;
        for (int k = 0; k < src.n_parts; k++) {
            char name[HL_NAME_MAX + 48];
            /* transformers 5 saves GPT-NeoX's head as embed_out.weight but
             * names the parameter lm_head.weight. */
            const bool neox_head = !strcmp(src.name[k], "embed_out.weight");
            snprintf(name, sizeof name, "grad.%s", neox_head ? "lm_head.weight" : src.name[k]);
            hl_tensor *want = expected(f, name);
            const double tol = GRAD_TOL * largest(want->data, want->numel);
            tu_assert_close(name, theirs + at, want->data, want->numel, tol);
            at += want->numel;
            hl_tensor_free(want);
        }
        ck_assert_uint_eq(at, p->numel);
        free(theirs);
    }
}

/* The fixture's ids, (B,T), as int32. */
static int32_t *fixture_ids(const hl_safetensors *f, int *B, int *T)
{
    const hl_safetensors_entry_info *e = hl_safetensors_find(f, "input_ids");
    ck_assert(e && e->dtype == HL_DTYPE_I64 && e->rank == 2);
    *B = (int)e->shape[0];
    *T = (int)e->shape[1];
    hl_tensor *t = expected(f, "input_ids");
    int32_t *ids = malloc(t->numel * sizeof *ids);
    ck_assert(ids);
    for (size_t i = 0; i < t->numel; i++)
        ids[i] = (int32_t)t->data[i];
    hl_tensor_free(t);
    return ids;
}

/* One model of tests/fixtures/hf/ against transformers: traced (composed
 * attention: probabilities and hidden states too) or not (the fused op). */
static void expect_model(const char *name, hl_hf_arch arch, bool traced)
{
    char dir[128], path[160];
    snprintf(dir, sizeof dir, HF "%s", name);
    snprintf(path, sizeof path, "%s/expected.safetensors", dir);
    hl_error err = {0};
    hl_gpt *m = hl_gpt_load(dir, &err);
    ck_assert_msg(m, "%s", err.message);
    hl_safetensors *f = NULL;
    ck_assert_msg(hl_safetensors_read(path, &f, &err) == HL_OK, "%s", err.message);
    int B, T;
    int32_t *ids = fixture_ids(f, &B, &T);
    int32_t *targets = malloc((size_t)B * T * sizeof *targets);
    ck_assert(targets);
    for (int i = 0; i < B * T; i++) /* position t predicts t + 1; the last predicts nothing */
        targets[i] = (i + 1) % T ? ids[i + 1] : -1;

    const int L = m->cfg.n_layers;
    hl_mha_trace trace[HL_GPT_MAX_LAYERS];
    hl_tensor *resid[HL_GPT_MAX_LAYERS + 1];
    hl_gpt_run run = {.trace = trace, .resid = resid};
    hl_graph *g = hl_graph_new(0);
    hl_tensor *logits = hl_gpt_forward(g, m, ids, B, T, traced ? &run : NULL);
    hl_tensor *loss = hl_cross_entropy(g, logits, targets, -1);
    ck_assert_msg(hl_graph_backward(g, loss) == HL_OK, "%s", hl_graph_message(g));
    expect_close(f, "logits", logits->data, logits->numel, ACT_TOL);
    expect_close(f, "loss", loss->data, 1, LOSS_TOL);
    expect_grads(m, arch, f);
    for (int l = 0; traced && l <= L; l++) {
        char key[32];
        snprintf(key, sizeof key, "hidden_states.%d", l);
        hl_tensor *h = l < L ? resid[l] : hl_gpt_normalize(g, m, resid[L], m->lnf_w, m->lnf_b);
        expect_close(f, key, h->data, h->numel, ACT_TOL);
        if (l < L) {
            snprintf(key, sizeof key, "attentions.%d", l);
            expect_close(f, key, trace[l].attn->data, trace[l].attn->numel, ACT_TOL);
        }
    }
    hl_graph_free(g);
    free(targets);
    free(ids);
    hl_safetensors_free(f);
    hl_gpt_free(m);
}

START_TEST(test_gpt2_matches_transformers)
{
    expect_model("gpt2_tiny", HL_HF_GPT2, true);
    expect_model("gpt2_tiny", HL_HF_GPT2, false);
}
END_TEST

START_TEST(test_pythia_matches_transformers)
{
    expect_model("pythia_tiny", HL_HF_GPT_NEOX, true);
    expect_model("pythia_tiny", HL_HF_GPT_NEOX, false);
}
END_TEST

START_TEST(test_llama_matches_transformers)
{
    expect_model("llama_tiny", HL_HF_LLAMA, true);
    expect_model("llama_tiny", HL_HF_LLAMA, false);
}
END_TEST

/* Each architecture's options land where the GPT expresses them. */
START_TEST(test_configs_map_onto_options)
{
    hl_error err = {0};
    hl_gpt *m = hl_gpt_load(HF "gpt2_tiny", &err);
    ck_assert_msg(m, "%s", err.message);
    ck_assert(m->cfg.mlp == HL_GPT_MLP_GELU_TANH && m->cfg.tie_embeddings &&
              m->cfg.no_head_bias && !m->head_b && m->cfg.pos == HL_GPT_POS_LEARNED);
    hl_gpt_free(m);
    ck_assert(m = hl_gpt_load(HF "pythia_tiny", &err));
    ck_assert(m->cfg.parallel_residual && m->cfg.rotary_dims == 4 && !m->cfg.tie_embeddings &&
              m->cfg.mlp == HL_GPT_MLP_GELU && m->cfg.mlp_width == 256);
    hl_gpt_free(m);
    ck_assert(m = hl_gpt_load(HF "llama_tiny", &err));
    ck_assert(m->cfg.n_kv_heads == 2 && m->cfg.norm == HL_GPT_NORM_RMS && m->cfg.no_qkv_bias &&
              m->cfg.no_out_bias && m->cfg.no_mlp_bias && m->cfg.mlp_width == 176);
    ck_assert_int_eq(m->blocks[0].attn.in_proj_weight->shape[0], 64 + 2 * 2 * 16);
    hl_gpt_free(m);
}
END_TEST

/* A config.json's text, parsed; the status, with the message in err. */
static hl_status parse(const char *json, hl_gpt_config *cfg, hl_error *err)
{
    hl_hf_arch arch;
    memset(err, 0, sizeof *err);
    return hl_hf_config_parse(json, strlen(json), "x/config.json", cfg, &arch, err);
}

static void expect_refused(const char *json, const char *part)
{
    hl_gpt_config cfg;
    hl_error err;
    ck_assert_msg(parse(json, &cfg, &err) == HL_ERR_FORMAT, "accepted %s", json);
    ck_assert_msg(strstr(err.message, "x/config.json") && strstr(err.message, part),
                  "\"%s\" lacks \"%s\"", err.message, part);
}

#define LLAMA_BASE "\"hidden_size\":64,\"num_attention_heads\":4,\"num_hidden_layers\":2," \
                   "\"intermediate_size\":176,\"vocab_size\":512"

START_TEST(test_config_styles_and_refusals)
{
    hl_gpt_config cfg;
    hl_error err;
    /* The older style: rotary_pct and rotary_emb_base at the top. */
    ck_assert_msg(parse("{\"architectures\":[\"GPTNeoXForCausalLM\"],\"hidden_size\":64,"
                        "\"num_attention_heads\":4,\"num_hidden_layers\":2,"
                        "\"intermediate_size\":256,\"vocab_size\":50,\"rotary_pct\":0.5,"
                        "\"rotary_emb_base\":500}",
                        &cfg, &err) == HL_OK, "%s", err.message);
    ck_assert(cfg.rotary_dims == 8 && cfg.rope_base == 500 && cfg.parallel_residual);
    /* Qwen2: q, k, v biased, the output not; a top-level rope_theta. */
    ck_assert_msg(parse("{\"architectures\":[\"Qwen2ForCausalLM\"]," LLAMA_BASE
                        ",\"num_key_value_heads\":1,\"rope_theta\":1000000.0}",
                        &cfg, &err) == HL_OK, "%s", err.message);
    ck_assert(!cfg.no_qkv_bias && cfg.no_out_bias && cfg.n_kv_heads == 1 &&
              cfg.rope_base == 1e6);
    /* Mistral's window is transformers' 4096 when the key is absent, none when
     * null; Llama reads no window; pretraining_tp only slices the products. */
    static const struct {
        const char *arch, *rest;
        int n_ctx;
    } windows[] = {
        {"MistralForCausalLM", "", 4096},
        {"MistralForCausalLM", ",\"sliding_window\":null", 8192},
        {"MistralForCausalLM", ",\"sliding_window\":100", 100},
        {"LlamaForCausalLM", ",\"sliding_window\":100,\"pretraining_tp\":2", 8192},
    };
    for (size_t i = 0; i < sizeof windows / sizeof windows[0]; i++) {
        char json[512];
        snprintf(json, sizeof json, "{\"architectures\":[\"%s\"]," LLAMA_BASE
                 ",\"max_position_embeddings\":8192%s}", windows[i].arch, windows[i].rest);
        ck_assert_msg(parse(json, &cfg, &err) == HL_OK, "%s: %s", json, err.message);
        ck_assert_msg(cfg.n_ctx == windows[i].n_ctx, "%s: n_ctx %d", json, cfg.n_ctx);
    }
    expect_refused("{\"architectures\":[\"BertModel\"]}", "architecture \"BertModel\"");
    expect_refused("{\"architectures\":[\"LlamaForCausalLM\"]," LLAMA_BASE
                   ",\"rope_scaling\":{\"rope_type\":\"llama3\",\"factor\":8}}",
                   "rope type \"llama3\"");
    /* With rope_parameters too, which transformers reads second (it loaded,
     * unscaled, before); a null rope_scaling is none. */
    expect_refused("{\"architectures\":[\"LlamaForCausalLM\"]," LLAMA_BASE
                   ",\"rope_parameters\":{\"rope_type\":\"default\",\"rope_theta\":10000},"
                   "\"rope_scaling\":{\"rope_type\":\"linear\",\"factor\":4}}",
                   "rope type \"linear\"");
    ck_assert_msg(parse("{\"architectures\":[\"LlamaForCausalLM\"]," LLAMA_BASE
                        ",\"rope_scaling\":null}", &cfg, &err) == HL_OK, "%s", err.message);
    expect_refused("{\"architectures\":[\"LlamaForCausalLM\"]," LLAMA_BASE
                   ",\"hidden_act\":\"gelu\"}", "\"hidden_act\"");
    /* A base beyond hl_real's range would be inf in the rotary tables (in the
     * double build, past a double's: refused by the JSON reader). */
#ifdef HL_REAL_DOUBLE
    expect_refused("{\"architectures\":[\"LlamaForCausalLM\"]," LLAMA_BASE
                   ",\"rope_theta\":1e400}", "a number past a double's range (rope_theta)");
#else
    expect_refused("{\"architectures\":[\"LlamaForCausalLM\"]," LLAMA_BASE
                   ",\"rope_theta\":1e300}", "\"rope_theta\" must be a number in (1, ");
#endif
    /* An epsilon that would round to 0 (or lose precision) as hl_real: the
     * norms need it above 0. */
    expect_refused("{\"architectures\":[\"GPT2LMHeadModel\"],\"layer_norm_epsilon\":1e-320}",
                   "\"layer_norm_epsilon\" 1e-320 is below the smallest normal " HL_REAL_NAME);
    expect_refused("{\"architectures\":[\"GPTNeoXForCausalLM\"]," LLAMA_BASE
                   ",\"layer_norm_eps\":1e-320}", "\"layer_norm_eps\" 1e-320 is below");
#ifndef HL_REAL_DOUBLE
    expect_refused("{\"architectures\":[\"LlamaForCausalLM\"]," LLAMA_BASE
                   ",\"rms_norm_eps\":1e-40}", "\"rms_norm_eps\" 1e-40 is below");
#endif
    ck_assert_msg(parse("{\"architectures\":[\"LlamaForCausalLM\"]," LLAMA_BASE
                        ",\"rms_norm_eps\":1e-30}", &cfg, &err) == HL_OK, "%s", err.message);
    ck_assert(cfg.norm_eps == 1e-30);
    expect_refused("{\"architectures\":[\"LlamaForCausalLM\"],\"hidden_size\":64}",
                   "\"num_attention_heads\" is missing");
    expect_refused("{\"architectures\":[\"GPT2LMHeadModel\"],\"n_embd\":-3}", "\"n_embd\"");
    expect_refused("{\"architectures\":[\"GPT2LMHeadModel\"],"
                   "\"activation_function\":\"relu\"}", "\"activation_function\"");
    expect_refused("{\"architectures\":[\"GPT2LMHeadModel\"],"
                   "\"scale_attn_by_inverse_layer_idx\":true}",
                   "scale_attn_by_inverse_layer_idx");
    /* transformers' Qwen2 slides the layers from max_window_layers on (28):
     * refused when a layer of the model would */
    expect_refused("{\"architectures\":[\"Qwen2ForCausalLM\"]," LLAMA_BASE
                   ",\"use_sliding_window\":true,\"max_window_layers\":1}",
                   "\"use_sliding_window\" is true from layer 1 on");
    ck_assert_msg(parse("{\"architectures\":[\"Qwen2ForCausalLM\"]," LLAMA_BASE
                        ",\"use_sliding_window\":true}", &cfg, &err) == HL_OK, "%s",
                  err.message);
    ck_assert_msg(parse("{\"architectures\":[\"Qwen2ForCausalLM\"]," LLAMA_BASE
                        ",\"use_sliding_window\":true,\"max_window_layers\":0,"
                        "\"sliding_window\":null}", &cfg, &err) == HL_OK, "%s", err.message);
    /* Llama rotates whole heads; GPT-NeoX reads its own keys, not these */
    expect_refused("{\"architectures\":[\"LlamaForCausalLM\"]," LLAMA_BASE
                   ",\"partial_rotary_factor\":0.5}", "\"partial_rotary_factor\" 0.5");
    ck_assert_msg(parse("{\"architectures\":[\"GPTNeoXForCausalLM\"],\"hidden_size\":64,"
                        "\"num_attention_heads\":4,\"num_hidden_layers\":2,"
                        "\"intermediate_size\":256,\"vocab_size\":512,\"rope_theta\":500,"
                        "\"partial_rotary_factor\":0.5}", &cfg, &err) == HL_OK, "%s",
                  err.message);
    ck_assert(cfg.rope_base == 10000 && cfg.rotary_dims == 4);
    /* Mistral and Qwen2 have no bias options, and their own kv-head defaults */
    ck_assert_msg(parse("{\"architectures\":[\"MistralForCausalLM\"],\"hidden_size\":64,"
                        "\"num_attention_heads\":8,\"num_hidden_layers\":2,"
                        "\"intermediate_size\":176,\"vocab_size\":512,"
                        "\"attention_bias\":true,\"mlp_bias\":true}", &cfg, &err) == HL_OK,
                  "%s", err.message);
    ck_assert(cfg.no_qkv_bias && cfg.no_out_bias && cfg.no_mlp_bias && cfg.n_kv_heads == 0);
    ck_assert_msg(parse("{\"architectures\":[\"MistralForCausalLM\"],\"hidden_size\":64,"
                        "\"num_attention_heads\":16,\"num_hidden_layers\":2,"
                        "\"intermediate_size\":176,\"vocab_size\":512}", &cfg, &err) == HL_OK,
                  "%s", err.message);
    ck_assert_int_eq(cfg.n_kv_heads, 8);
    ck_assert_msg(parse("{\"architectures\":[\"MistralForCausalLM\"],\"hidden_size\":64,"
                        "\"num_attention_heads\":16,\"num_hidden_layers\":2,"
                        "\"intermediate_size\":176,\"vocab_size\":512,"
                        "\"num_key_value_heads\":null}", &cfg, &err) == HL_OK,
                  "%s", err.message);
    ck_assert_int_eq(cfg.n_kv_heads, 0); /* null: one for each query head */
    ck_assert_msg(parse("{\"architectures\":[\"MistralForCausalLM\"],\"hidden_size\":64,"
                        "\"num_attention_heads\":16,\"num_hidden_layers\":2,"
                        "\"intermediate_size\":176,\"vocab_size\":512}", &cfg, &err) == HL_OK,
                  "%s", err.message);
    /* ... and context defaults: Mistral's window of 4,096 within its 131,072
     * positions, Qwen2's 32,768, Llama's 2,048 */
    ck_assert_int_eq(cfg.n_ctx, 4096);
    ck_assert(parse("{\"architectures\":[\"MistralForCausalLM\"]," LLAMA_BASE
                    ",\"sliding_window\":null}", &cfg, &err) == HL_OK);
    ck_assert_int_eq(cfg.n_ctx, HL_GPT_MAX_CTX);
    ck_assert(parse("{\"architectures\":[\"Qwen2ForCausalLM\"]," LLAMA_BASE "}", &cfg,
                    &err) == HL_OK);
    ck_assert_int_eq(cfg.n_ctx, 32768);
    ck_assert(parse("{\"architectures\":[\"LlamaForCausalLM\"]," LLAMA_BASE "}", &cfg,
                    &err) == HL_OK);
    ck_assert_int_eq(cfg.n_ctx, 2048);
    expect_refused("[1,2]", "not a JSON object");
    expect_refused("{\"architectures\":", "not a JSON object");
}
END_TEST

/* A copy of a fixture folder in a fresh temporary directory, to break. */
static void copy_folder(const char *from, char *to, size_t size)
{
    char cmd[512];
    snprintf(to, size, "/tmp/hl_hf_XXXXXX");
    ck_assert(mkdtemp(to));
    snprintf(cmd, sizeof cmd, "cp %s/config.json %s/model.safetensors %s/", from, from, to);
    tu_run_ok(cmd);
}

static void expect_load_error(const char *dir, const char *part)
{
    hl_error err = {0};
    hl_gpt *m = hl_gpt_load(dir, &err);
    ck_assert_msg(!m && err.status != HL_OK, "loaded %s", dir);
    ck_assert_msg(strstr(err.message, part), "\"%s\" lacks \"%s\"", err.message, part);
}

static void remove_folder(const char *dir)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    tu_run_ok(cmd);
}

/* How rewrite_weights changes a model's tensors: each field names one tensor
 * (NULL: none). */
typedef struct {
    const char *drop;    /* left out */
    const char *add;     /* added, of shape (3) */
    const char *reshape; /* one row fewer */
    const char *to_i32;  /* stored as I32, its values times 100, truncated */
    const char *to_nan;  /* its last value NaN */
} rewrite;

/* Writes the model's tensors back, changed as r says. */
static void rewrite_weights(const char *dir, rewrite r)
{
    char path[256];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    hl_error err = {0};
    hl_safetensors *f = NULL;
    ck_assert(hl_safetensors_read(path, &f, &err) == HL_OK);
    hl_safetensors_writer *w = hl_safetensors_writer_new();
    for (size_t i = 0; i < hl_safetensors_count(f); i++) {
        const hl_safetensors_entry_info *e = hl_safetensors_entry(f, i);
        if (r.drop && !strcmp(e->name, r.drop))
            continue;
        hl_tensor *t = hl_safetensors_load(f, e->name, false, &err);
        ck_assert(t);
        if (r.reshape && !strcmp(e->name, r.reshape))
            t->shape[0]--, t->numel -= t->numel / (size_t)(t->shape[0] + 1);
        if (r.to_nan && !strcmp(e->name, r.to_nan))
            t->data[t->numel - 1] = NAN;
        if (r.to_i32 && !strcmp(e->name, r.to_i32)) {
            int32_t *ints = malloc(t->numel * sizeof *ints);
            for (size_t k = 0; k < t->numel; k++)
                ints[k] = (int32_t)(t->data[k] * 100);
            ck_assert(hl_safetensors_writer_add_raw(w, e->name, HL_DTYPE_I32, e->rank, e->shape,
                                                    ints, &err) == HL_OK);
            free(ints);
        } else {
            ck_assert(hl_safetensors_writer_add(w, e->name, t, HL_DTYPE_F32, &err) == HL_OK);
        }
        hl_tensor_free(t);
    }
    if (r.add) {
        hl_tensor *t = hl_tensor_new("x", 1, (int[]){3}, false);
        ck_assert(hl_safetensors_writer_add(w, r.add, t, HL_DTYPE_F32, &err) == HL_OK);
        hl_tensor_free(t);
    }
    ck_assert_msg(hl_safetensors_writer_save(w, path, &err) == HL_OK, "%s", err.message);
    hl_safetensors_writer_free(w);
    hl_safetensors_free(f);
}

/* Writes text as dir/name. */
static void write_text_file(const char *dir, const char *name, const char *text)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    ck_assert_msg(f, "cannot write %s", path);
    fputs(text, f);
    ck_assert(fclose(f) == 0);
}

START_TEST(test_bad_folders)
{
    char dir[64], path[128];
    copy_folder(HF "llama_tiny", dir, sizeof dir);
    rewrite_weights(dir, (rewrite){.drop = "model.layers.1.self_attn.k_proj.weight"});
    expect_load_error(dir, "tensor \"model.layers.1.self_attn.k_proj.weight\" is missing");
    remove_folder(dir);

    copy_folder(HF "llama_tiny", dir, sizeof dir);
    rewrite_weights(dir, (rewrite){.add = "model.layers.0.extra.weight"});
    expect_load_error(dir, "tensor \"model.layers.0.extra.weight\" has no place");
    remove_folder(dir);

    copy_folder(HF "pythia_tiny", dir, sizeof dir);
    rewrite_weights(dir, (rewrite){.reshape = "gpt_neox.layers.0.mlp.dense_h_to_4h.weight"});
    expect_load_error(dir, "\"gpt_neox.layers.0.mlp.dense_h_to_4h.weight\" has shape (255,64)");
    remove_folder(dir);

    /* A config of a larger model than the weights: refused by the values
     * counted, before that model is built. */
    copy_folder(HF "gpt2_tiny", dir, sizeof dir);
    write_text_file(dir, "config.json", "{\"architectures\":[\"GPT2LMHeadModel\"],"
                    "\"n_embd\":512,\"n_head\":8,\"n_layer\":4,\"vocab_size\":512}");
    expect_load_error(dir, "config.json asks for 13396992 parameter values; the weights hold "
                      "136960");
    remove_folder(dir);

    copy_folder(HF "gpt2_tiny", dir, sizeof dir);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    ck_assert(unlink(path) == 0);
    expect_load_error(dir, "no model.safetensors");
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    FILE *index = fopen(path, "w");
    ck_assert(index);
    fputs("{\"weight_map\":{\"transformer.wte.weight\":\"model-00001-of-00002.safetensors\"}}",
          index);
    fclose(index);
    expect_load_error(dir, "model-00001-of-00002.safetensors");
    remove_folder(dir);

    expect_load_error("/nonexistent/folder", "/nonexistent/folder");
}
END_TEST

/* Parses json over *ids, expecting success. */
static void parse_ids_ok(const char *json, hl_hf_token_ids *ids)
{
    hl_error err = {0};
    ck_assert_msg(hl_hf_token_ids_parse(json, strlen(json), "c.json", ids, &err) == HL_OK,
                  "%s: %s", json, err.message);
}

/* bos, eos and pad ids: a number, a list or null; a key absent leaves the
 * id read before; anything else refused naming the key; the folder's
 * generation_config.json over its config.json; the text written back. */
START_TEST(test_token_ids)
{
    hl_hf_token_ids ids = {0};
    parse_ids_ok("{\"bos_token_id\": 1, \"eos_token_id\": [128001, 128009], "
                 "\"pad_token_id\": null}", &ids);
    ck_assert(ids.bos.n == 1 && ids.bos.id[0] == 1 && ids.pad.n == 0);
    ck_assert(ids.eos.n == 2 && ids.eos.id[0] == 128001 && ids.eos.id[1] == 128009);
    ck_assert(hl_hf_token_ids_has_eos(&ids, 128009) && !hl_hf_token_ids_has_eos(&ids, 1));
    parse_ids_ok("{\"eos_token_id\": 7, \"vocab_size\": 9}", &ids);
    ck_assert(ids.bos.n == 1 && ids.bos.id[0] == 1 && ids.eos.n == 1 && ids.eos.id[0] == 7);
    parse_ids_ok("{\"bos_token_id\": null}", &ids);
    ck_assert(ids.bos.n == 0 && hl_hf_token_ids_any(&ids));
    ck_assert(ids.eos.n == 1 && ids.eos.id[0] == 7);
    char *text = hl_hf_token_ids_format(&ids);
    ck_assert_str_eq(text, "{\"bos_token_id\":null,\"eos_token_id\":7,\"pad_token_id\":null}");
    free(text);
    const char *const bad[] = {"{\"eos_token_id\": 1.5}", "{\"eos_token_id\": \"2\"}",
                               "{\"pad_token_id\": [1, null]}", "{\"bos_token_id\": 3e9}",
                               "{\"eos_token_id\": [1, 2, 3, 4, 5, 6, 7, 8, 9]}"};
    const char *const key[] = {"eos_token_id", "eos_token_id", "pad_token_id", "bos_token_id",
                               "eos_token_id"};
    for (int i = 0; i < 5; i++) {
        hl_error err = {0};
        hl_hf_token_ids before = ids;
        ck_assert_int_eq(hl_hf_token_ids_parse(bad[i], strlen(bad[i]), "c.json", &ids, &err),
                         HL_ERR_FORMAT);
        ck_assert_msg(strstr(err.message, "c.json") && strstr(err.message, key[i]), "%s: %s",
                      bad[i], err.message);
        ck_assert(!memcmp(&before, &ids, sizeof ids)); /* untouched */
    }
    hl_error err = {0};
    ck_assert_int_eq(hl_hf_token_ids_parse("[1]", 3, "c.json", &ids, &err), HL_ERR_FORMAT);

    char dir[64];
    copy_folder(HF "pythia_tiny", dir, sizeof dir);
    err = (hl_error){0};
    ck_assert(hl_hf_read_token_ids(dir, &ids, &err) == HL_OK);
    ck_assert(ids.bos.n == 1 && ids.bos.id[0] == 0 && ids.eos.n == 1 && ids.eos.id[0] == 2);
    write_text_file(dir, "generation_config.json", "{\"eos_token_id\": 0}");
    ck_assert(hl_hf_read_token_ids(dir, &ids, &err) == HL_OK);
    ck_assert(ids.bos.n == 1 && ids.bos.id[0] == 0 && ids.eos.n == 1 && ids.eos.id[0] == 0);
    write_text_file(dir, "generation_config.json", "{\"eos_token_id\": 0");
    err = (hl_error){0};
    ck_assert_int_eq(hl_hf_read_token_ids(dir, &ids, &err), HL_ERR_FORMAT);
    ck_assert_msg(strstr(err.message, "generation_config.json"), "%s", err.message);
    remove_folder(dir);
}
END_TEST

/* config.json and the index are one JSON value each: text after it (a file
 * cut or concatenated by accident) is refused, not ignored. */
START_TEST(test_json_files_end_after_the_value)
{
    hl_gpt_config cfg;
    hl_error err;
    const char *config = "{\"architectures\":[\"LlamaForCausalLM\"]," LLAMA_BASE "}";
    ck_assert_msg(parse(config, &cfg, &err) == HL_OK, "%s", err.message);
    expect_refused("{\"architectures\":[\"LlamaForCausalLM\"]," LLAMA_BASE "}} not json",
                   "text after the value at byte");
    expect_refused("{\"architectures\":[\"LlamaForCausalLM\"]," LLAMA_BASE "} \n\x01",
                   "control byte 0x01");
    /* What cJSON takes without a word (each read before): a key given twice
     * (Python keeps the last, cJSON the first), a raw tab in a string, a
     * number past a double's range. */
    expect_refused("{\"architectures\":[\"LlamaForCausalLM\"]," LLAMA_BASE
                   ",\"hidden_size\":32}", "the key \"hidden_size\" is given twice");
    expect_refused("{\"architectures\":[\"Llama\tForCausalLM\"]," LLAMA_BASE "}",
                   "control byte 0x09 at byte 24, line 1, in a string");
    expect_refused("{\"architectures\":[\"LlamaForCausalLM\"]," LLAMA_BASE
                   ",\"rope_theta\":1e999}", "a number past a double's range (rope_theta)");
    /* an escaped quote or backslash does not end the string */
    expect_refused("{\"architectures\":[\"a\\\"b\\\\\",\"\n\"]}", "in a string");

    char dir[64], from[128], to[128];
    copy_folder(HF "llama_tiny", dir, sizeof dir);
    /* model.safetensors comes first, as in transformers: an index beside it
     * is not read (an export over a sharded folder left one) */
    write_text_file(dir, "model.safetensors.index.json", "{\"weight_map\":{\"lm_head.wei");
    hl_gpt *m = hl_gpt_load(dir, &err);
    ck_assert_msg(m, "%s", err.message);
    hl_gpt_free(m);
    snprintf(from, sizeof from, "%s/model.safetensors", dir);
    snprintf(to, sizeof to, "%s/weights.safetensors", dir);
    ck_assert(rename(from, to) == 0);
    const char *index = "{\"weight_map\":{\"lm_head.weight\":\"weights.safetensors\"}}";
    write_text_file(dir, "model.safetensors.index.json", index);
    m = hl_gpt_load(dir, &err);
    ck_assert_msg(m, "%s", err.message);
    hl_gpt_free(m);
    char text[256];
    snprintf(text, sizeof text, "%s,{}", index);
    write_text_file(dir, "model.safetensors.index.json", text);
    expect_load_error(dir, "model.safetensors.index.json: not valid JSON (text after the value");
    write_text_file(dir, "model.safetensors.index.json", "{\"weight_map\":{\"lm_head.wei");
    expect_load_error(dir, "model.safetensors.index.json: not valid JSON (error near byte");
    remove_folder(dir);
}
END_TEST

/* Products of two config numbers, each up to 2^30, are taken in 64 bits: in
 * an int they overflow (undefined; in practice they wrap). */
START_TEST(test_config_products_do_not_overflow)
{
    /* 4 * 2^30 would wrap to 0, the "no n_inner" value. */
    expect_refused("{\"architectures\":[\"GPT2LMHeadModel\"],\"n_embd\":1073741824}",
                   "\"n_embd\" 1073741824 times 4");
    /* (2^29 + 8) * 8 = 2^32 + 64 would wrap to hidden_size 64. */
    expect_refused("{\"architectures\":[\"LlamaForCausalLM\"],\"hidden_size\":64,"
                   "\"num_attention_heads\":8,\"num_hidden_layers\":2,"
                   "\"intermediate_size\":176,\"vocab_size\":512,\"head_dim\":536870920}",
                   "\"head_dim\" 536870920 times \"num_attention_heads\" 8 is not "
                   "\"hidden_size\" 64");
}
END_TEST

/* Values that are no weights, refused naming the file, the tensor and what
 * is wrong: an integer tensor; a NaN (which would load a model whose every
 * loss is NaN), with the element. */
START_TEST(test_bad_weight_values_refused)
{
    static const struct {
        const char *folder;
        rewrite r;
        const char *part;
    } cases[] = {
        {"llama_tiny", {.to_i32 = "model.layers.0.input_layernorm.weight"},
         "/model.safetensors: tensor \"model.layers.0.input_layernorm.weight\" is I32; weights "
         "are read from F32, F16, BF16 or F64"},
        {"gpt2_tiny", {.to_nan = "transformer.h.1.mlp.c_proj.weight"},
         "/model.safetensors: tensor \"transformer.h.1.mlp.c_proj.weight\" holds NaN at element "
         "16383 (values must be finite)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char from[64], dir[64];
        snprintf(from, sizeof from, HF "%s", cases[i].folder);
        copy_folder(from, dir, sizeof dir);
        rewrite_weights(dir, cases[i].r);
        expect_load_error(dir, cases[i].part);
        remove_folder(dir);
    }
}
END_TEST

/* A model split over shards that an index names loads as the single file does. */
START_TEST(test_sharded_weights)
{
    char dir[64], path[160];
    copy_folder(HF "llama_tiny", dir, sizeof dir);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    hl_error err = {0};
    hl_safetensors *f = NULL;
    ck_assert(hl_safetensors_read(path, &f, &err) == HL_OK);
    hl_safetensors_writer *shard[2] = {hl_safetensors_writer_new(), hl_safetensors_writer_new()};
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    FILE *index = fopen(path, "w");
    ck_assert(index);
    fputs("{\"metadata\":{},\"weight_map\":{", index);
    for (size_t i = 0; i < hl_safetensors_count(f); i++) {
        const hl_safetensors_entry_info *e = hl_safetensors_entry(f, i);
        hl_tensor *t = hl_safetensors_load(f, e->name, false, &err);
        ck_assert(t && hl_safetensors_writer_add(shard[i % 2], e->name, t, HL_DTYPE_F32, &err) ==
                           HL_OK);
        fprintf(index, "%s\"%s\":\"model-0000%zu-of-00002.safetensors\"", i ? "," : "",
                e->name, i % 2 + 1);
        hl_tensor_free(t);
    }
    fputs("}}", index);
    fclose(index);
    for (int s = 0; s < 2; s++) {
        snprintf(path, sizeof path, "%s/model-0000%d-of-00002.safetensors", dir, s + 1);
        ck_assert(hl_safetensors_writer_save(shard[s], path, &err) == HL_OK);
        hl_safetensors_writer_free(shard[s]);
    }
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    ck_assert(unlink(path) == 0);
    hl_gpt *sharded = hl_gpt_load(dir, &err);
    ck_assert_msg(sharded, "%s", err.message);
    hl_gpt *whole = hl_gpt_load(HF "llama_tiny", &err);
    ck_assert(whole);
    for (size_t i = 0; i < hl_params_n_tensors(whole->params); i++) {
        const hl_tensor *a = hl_params_tensor(whole->params, i);
        const hl_tensor *b = hl_params_find(sharded->params, a->name);
        ck_assert(b && !memcmp(a->data, b->data, a->numel * sizeof *a->data));
    }
    hl_gpt_free(whole);
    hl_gpt_free(sharded);
    hl_safetensors_free(f);
    remove_folder(dir);
}
END_TEST

/* The logits of m on a fixed batch, in a malloc'd array. */
static hl_real *logits_of(const hl_gpt *m, size_t *n)
{
    int32_t ids[2 * 9];
    for (int i = 0; i < 2 * 9; i++)
        ids[i] = (int32_t)((i * 37 + 11) % m->cfg.vocab_in);
    hl_graph *g = hl_graph_new(0);
    hl_tensor *logits = hl_gpt_forward(g, m, ids, 2, 9, NULL);
    ck_assert_msg(!hl_graph_failed(g), "%s", hl_graph_message(g));
    hl_real *copy = malloc(logits->numel * sizeof *copy);
    ck_assert(copy);
    memcpy(copy, logits->data, logits->numel * sizeof *copy);
    *n = logits->numel;
    hl_graph_free(g);
    return copy;
}

/* m exported and imported again gives bitwise the same weights and logits,
 * and the same architecture. */
static void check_round_trip(hl_gpt *m, const char *name)
{
    /* The export writes F32: weights a float holds (the double build's
     * random ones are rounded to it here) come back as they were. */
    for (size_t i = 0; i < hl_params_n_tensors(m->params); i++) {
        hl_tensor *t = hl_params_tensor(m->params, i);
        for (size_t j = 0; j < t->numel; j++)
            t->data[j] = (hl_real)(float)t->data[j];
    }
    char to[64];
    hl_error err = {0};
    snprintf(to, sizeof to, "/tmp/hl_export_XXXXXX");
    ck_assert(mkdtemp(to));
    ck_assert_msg(hl_hf_export(m, NULL, to, &err) == HL_OK, "%s: %s", name, err.message);
    hl_gpt *back = hl_gpt_load(to, &err);
    ck_assert_msg(back, "%s: %s", name, err.message);
    ck_assert_uint_eq(hl_params_n_tensors(back->params), hl_params_n_tensors(m->params));
    ck_assert_int_eq(back->cfg.rotary_dims, m->cfg.rotary_dims);
    size_t n, n_back;
    hl_real *a = logits_of(m, &n), *b = logits_of(back, &n_back);
    ck_assert_uint_eq(n, n_back);
    ck_assert_msg(!memcmp(a, b, n * sizeof *a), "%s: logits differ after export", name);
    char why[300];
    ck_assert_int_eq(hl_hf_arch_for(&back->cfg, why, sizeof why),
                     hl_hf_arch_for(&m->cfg, why, sizeof why));
    free(a);
    free(b);
    hl_gpt_free(back);
    remove_folder(to);
}

/* Each fixture, and a GPT-NeoX model whose rotated share of a head (30 of
 * 44 dims) written as 30/44 read back as 29 dims (refused as odd). */
START_TEST(test_export_reimports_bitwise)
{
    const char *const names[] = {"gpt2_tiny", "pythia_tiny", "llama_tiny"};
    hl_error err = {0};
    for (int i = 0; i < 3; i++) {
        char from[128];
        snprintf(from, sizeof from, HF "%s", names[i]);
        hl_gpt *m = hl_gpt_load(from, &err);
        ck_assert_msg(m, "%s", err.message);
        check_round_trip(m, names[i]);
        hl_gpt_free(m);
    }
    const hl_gpt_config cfg = {.vocab_in = 11, .vocab_out = 11, .n_ctx = 16, .d_model = 88,
                               .n_heads = 2, .n_layers = 1, .mlp = HL_GPT_MLP_GELU,
                               .norm = HL_GPT_NORM_LAYER, .pos = HL_GPT_POS_ROPE,
                               .rotary_dims = 30, .parallel_residual = true,
                               .no_head_bias = true, .emb_std = 0.02};
    hl_gpt *m = hl_gpt_new(&cfg, &err);
    ck_assert_msg(m, "%s", err.message);
    hl_rng rng;
    hl_rng_seed(&rng, 5);
    hl_gpt_init_weights(m, &rng);
    char why[300];
    ck_assert_int_eq(hl_hf_arch_for(&m->cfg, why, sizeof why), HL_HF_GPT_NEOX);
    check_round_trip(m, "GPT-NeoX, 30 of 44 dims rotated");
    hl_gpt_free(m);
    const hl_gpt_config qwen2 = {.vocab_in = 11, .vocab_out = 11, .n_ctx = 16, .d_model = 16,
                                 .n_heads = 4, .n_kv_heads = 2, .n_layers = 1,
                                 .mlp = HL_GPT_MLP_SWIGLU, .norm = HL_GPT_NORM_RMS,
                                 .pos = HL_GPT_POS_ROPE, .no_out_bias = true,
                                 .no_mlp_bias = true, .no_head_bias = true, .emb_std = 0.02};
    ck_assert_msg(m = hl_gpt_new(&qwen2, &err), "%s", err.message);
    hl_gpt_init_weights(m, &rng);
    ck_assert_int_eq(hl_hf_arch_for(&m->cfg, why, sizeof why), HL_HF_QWEN2);
    check_round_trip(m, "Qwen2");
    hl_gpt_free(m);
}
END_TEST

/* dir/config.json holds each of the NULL-ended fragments. */
static void expect_config_has(const char *dir, const char *const *parts)
{
    char path[128];
    snprintf(path, sizeof path, "%s/config.json", dir);
    size_t n;
    char *text = (char *)hl_fs_read_file(path, &n);
    ck_assert_ptr_nonnull(text);
    for (; *parts; parts++)
        ck_assert_msg(strstr(text, *parts), "no %s in %s", *parts, text);
    free(text);
}

/* A model trained with dropout exports it where headlab applies it, on the
 * embeddings and the blocks' outputs: never on the attention weights. */
START_TEST(test_export_dropout)
{
    hl_gpt_config cfg = {.vocab_in = 11, .vocab_out = 11, .n_ctx = 8, .d_model = 8,
                         .n_heads = 2, .n_layers = 1, .mlp = HL_GPT_MLP_GELU,
                         .norm = HL_GPT_NORM_LAYER, .no_head_bias = true, .dropout = 0.25,
                         .emb_std = 0.02};
    const char *const gpt2[] = {"\"attn_pdrop\":\t0,", "\"embd_pdrop\":\t0.25,",
                                "\"resid_pdrop\":\t0.25,", NULL};
    const char *const neox[] = {"\"attention_dropout\":\t0,", "\"hidden_dropout\":\t0.25,",
                                NULL};
    const char *const llama[] = {"\"attention_dropout\":\t0,", NULL};
    const char *const *want[3] = {gpt2, neox, llama};
    for (int i = 0; i < 3; i++) {
        if (i == 1)
            cfg.pos = HL_GPT_POS_ROPE;
        if (i == 2) {
            cfg.mlp = HL_GPT_MLP_SWIGLU;
            cfg.norm = HL_GPT_NORM_RMS;
            cfg.no_qkv_bias = cfg.no_out_bias = cfg.no_mlp_bias = true;
        }
        hl_error err = {0};
        hl_gpt *m = hl_gpt_new(&cfg, &err);
        ck_assert_msg(m, "%s", err.message);
        char to[64];
        snprintf(to, sizeof to, "/tmp/hl_export_XXXXXX");
        ck_assert(mkdtemp(to));
        ck_assert_msg(hl_hf_export(m, NULL, to, &err) == HL_OK, "%s", err.message);
        expect_config_has(to, want[i]);
        hl_gpt_free(m);
        remove_folder(to);
    }
}
END_TEST

/* Models no architecture expresses are refused, naming the difference. */
START_TEST(test_export_refusals)
{
    hl_gpt_config cfg = {.vocab_in = 11, .vocab_out = 11, .n_ctx = 8, .d_model = 8,
                         .n_heads = 2, .n_layers = 1, .mlp = HL_GPT_MLP_GELU,
                         .norm = HL_GPT_NORM_LAYER, .emb_std = 0.02};
    char why[300];
    ck_assert_int_eq(hl_hf_arch_for(&cfg, why, sizeof why), HL_HF_ARCHS);
    ck_assert_msg(strstr(why, "head bias"), "%s", why);
    cfg.no_head_bias = true;
    ck_assert_int_eq(hl_hf_arch_for(&cfg, why, sizeof why), HL_HF_GPT2);
    /* exported as GPT-2 before, a folder whose c_attn no loader could read */
    cfg.n_kv_heads = 1;
    ck_assert_int_eq(hl_hf_arch_for(&cfg, why, sizeof why), HL_HF_ARCHS);
    ck_assert_msg(strstr(why, "GPT-2 has no grouped-query attention"), "%s", why);
    cfg.n_kv_heads = 0;
    cfg.smear_keys = true;
    ck_assert_int_eq(hl_hf_arch_for(&cfg, why, sizeof why), HL_HF_ARCHS);
    ck_assert_msg(strstr(why, "smeared keys"), "%s", why);
    cfg.smear_keys = false;
    cfg.pos = HL_GPT_POS_ROPE;
    cfg.mlp = HL_GPT_MLP_SWIGLU;
    ck_assert_int_eq(hl_hf_arch_for(&cfg, why, sizeof why), HL_HF_ARCHS);
    ck_assert_msg(strstr(why, "GPT-NeoX has a GELU MLP"), "%s", why);
    cfg.norm = HL_GPT_NORM_RMS;
    cfg.no_qkv_bias = cfg.no_out_bias = cfg.no_mlp_bias = true;
    ck_assert_int_eq(hl_hf_arch_for(&cfg, why, sizeof why), HL_HF_LLAMA);
    cfg.no_qkv_bias = false;
    ck_assert_int_eq(hl_hf_arch_for(&cfg, why, sizeof why), HL_HF_QWEN2);
    cfg.pos = HL_GPT_POS_SINUSOIDAL;
    ck_assert_int_eq(hl_hf_arch_for(&cfg, why, sizeof why), HL_HF_ARCHS);
    ck_assert_msg(strstr(why, "sinusoidal positions"), "%s", why);
}
END_TEST

/* Logits of m on a fixed batch with layer l's gate (NULL: none). */
static hl_real *gated_logits(const hl_gpt *m, int l, hl_tensor *gate, size_t *n)
{
    int32_t ids[2 * 9];
    for (int i = 0; i < 2 * 9; i++)
        ids[i] = (int32_t)((i * 37 + 11) % m->cfg.vocab_in);
    hl_gpt_run run = {0};
    run.gate[l] = gate;
    hl_graph *g = hl_graph_new(0);
    hl_tensor *logits = hl_gpt_forward(g, m, ids, 2, 9, gate ? &run : NULL);
    ck_assert_msg(!hl_graph_failed(g), "%s", hl_graph_message(g));
    hl_real *copy = malloc(logits->numel * sizeof *copy);
    ck_assert(copy);
    memcpy(copy, logits->data, logits->numel * sizeof *copy);
    *n = logits->numel;
    hl_graph_free(g);
    return copy;
}

/* Grouped-query attention pruned: Llama's query heads 0 and 1 of layer 0
 * share key/value head 0, which goes with them; head 3 alone leaves its
 * key/value head 1 to head 2. The pruned model computes what the gated one
 * does, and saves and loads with its groups. */
START_TEST(test_prune_grouped_heads)
{
    hl_error err = {0};
    hl_gpt *m = hl_gpt_load(HF "llama_tiny", &err);
    ck_assert_msg(m, "%s", err.message);
    hl_head_set off = {0}, pruned = {0};
    off.on[0][0] = off.on[0][1] = off.on[1][3] = true;
    hl_gpt *small = hl_prune_heads(m, &off, &pruned, &err);
    ck_assert_msg(small, "%s", err.message);
    ck_assert_int_eq(hl_gpt_layer_heads(&small->cfg, 0), 2);
    ck_assert_int_eq(hl_gpt_layer_kv_heads(&small->cfg, 0), 1);
    ck_assert_int_eq(hl_gpt_layer_heads(&small->cfg, 1), 3);
    ck_assert_int_eq(hl_gpt_layer_kv_heads(&small->cfg, 1), 2);
    ck_assert(small->kv_of[1][0] == 0 && small->kv_of[1][1] == 0 && small->kv_of[1][2] == 1);
    ck_assert(small->kv_of[0][0] == 0 && small->kv_of[0][1] == 0);
    ck_assert_int_eq(small->blocks[0].attn.in_proj_weight->shape[0], (2 + 2 * 1) * 16);

    /* The gated model: both layers' removed heads at 0 (one run per layer's
     * gate would do; here both at once through two gates). */
    hl_tensor *g0 = hl_tensor_new("g0", 1, (int[]){4}, false);
    hl_tensor *g1 = hl_tensor_new("g1", 1, (int[]){4}, false);
    for (int h = 0; h < 4; h++) {
        g0->data[h] = off.on[0][h] ? 0 : 1;
        g1->data[h] = off.on[1][h] ? 0 : 1;
    }
    int32_t ids[2 * 9];
    for (int i = 0; i < 2 * 9; i++)
        ids[i] = (int32_t)((i * 37 + 11) % m->cfg.vocab_in);
    hl_gpt_run run = {.gate = {g0, g1}};
    hl_graph *g = hl_graph_new(0);
    hl_tensor *want = hl_gpt_forward(g, m, ids, 2, 9, &run);
    size_t n;
    hl_real *got = gated_logits(small, 0, NULL, &n);
    ck_assert_uint_eq(n, want->numel);
    tu_assert_close("pruned against gated", got, want->data, n, 1e-5);

    char dir[64], path[96];
    snprintf(dir, sizeof dir, "/tmp/hl_gqa_XXXXXX");
    ck_assert(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/pruned.safetensors", dir);
    hl_gpt_meta meta = {.pruned = pruned};
    ck_assert_msg(hl_gpt_save_meta(path, small, &meta, &err) == HL_OK, "%s", err.message);
    hl_gpt_meta back_meta;
    hl_gpt *back = hl_gpt_load_meta(path, &back_meta, &err);
    ck_assert_msg(back, "%s", err.message);
    size_t n_back;
    hl_real *again = gated_logits(back, 0, NULL, &n_back);
    ck_assert_msg(n_back == n && !memcmp(again, got, n * sizeof *got), "reloaded differs");
    ck_assert(back->kv_of[1][2] == 1 && back->head_original[1][2] == 2);
    free(again);
    free(got);
    hl_gpt_meta_clear(&back_meta);
    hl_gpt_free(back);
    remove_folder(dir);
    hl_graph_free(g);
    hl_tensor_free(g0);
    hl_tensor_free(g1);
    hl_gpt_free(small);
    hl_gpt_free(m);
}
END_TEST

Suite *hf_suite(void)
{
    Suite *s = suite_create("hf");
    TCase *parity = tcase_create("parity");
    tcase_set_timeout(parity, 0);
    tcase_add_test(parity, test_gpt2_matches_transformers);
    tcase_add_test(parity, test_pythia_matches_transformers);
    tcase_add_test(parity, test_llama_matches_transformers);
    tcase_add_test(parity, test_configs_map_onto_options);
    tcase_add_test(parity, test_prune_grouped_heads);
    suite_add_tcase(s, parity);
    TCase *bad = tcase_create("bad input");
    tcase_set_timeout(bad, 0);
    tcase_add_test(bad, test_config_styles_and_refusals);
    tcase_add_test(bad, test_bad_folders);
    tcase_add_test(bad, test_sharded_weights);
    tcase_add_test(bad, test_json_files_end_after_the_value);
    tcase_add_test(bad, test_config_products_do_not_overflow);
    tcase_add_test(bad, test_bad_weight_values_refused);
    tcase_add_test(bad, test_token_ids);
    suite_add_tcase(s, bad);
    TCase *export = tcase_create("export");
    tcase_set_timeout(export, 0);
    tcase_add_test(export, test_export_reimports_bitwise);
    tcase_add_test(export, test_export_refusals);
    tcase_add_test(export, test_export_dropout);
    suite_add_tcase(s, export);
    return s;
}
