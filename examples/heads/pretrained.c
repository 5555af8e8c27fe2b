/* heads eval, generate and export: a model's next-token loss and logits on
 * given ids or text (how an import is checked against PyTorch), text sampled
 * with a key/value cache, and a model as a Hugging Face folder. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "examples/heads/heads.h"

/* The ids of --token-ids FILE (data/token_ids.h); exits 2 on a bad file. */
static int32_t *read_id_lines(const char *path, int vocab, int *B, int *T)
{
    size_t size;
    char *text = (char *)hl_fs_read_file(path, &size);
    if (!text)
        heads_bad_input("cannot read %s: %s", path, strerror(errno));
    int32_t *ids;
    hl_error err = {0};
    const hl_status s = hl_token_ids_parse(text, size, path, vocab, &ids, B, T, &err);
    free(text); /* before a refusal, which a leak checker would count */
    if (s == HL_ERR_NOMEM) {
        fprintf(stderr, "heads: %s\n", err.message);
        exit(1);
    }
    if (s != HL_OK)
        heads_bad_input("%s", err.message);
    return ids;
}

/* --text STR in the model's tokenizer, one sequence, with the special tokens
 * its post-processor adds (as transformers' tokenizer(text)). */
static int32_t *encode_text(const study *s, const char *text, int *B, int *T)
{
    if (!s->meta.vocab)
        heads_bad_input("the model has no tokenizer headlab reads%s%s%s: give --token-ids FILE",
                        s->meta.vocab_note[0] ? " (" : "", s->meta.vocab_note,
                        s->meta.vocab_note[0] ? ")" : "");
    int32_t *ids;
    size_t n;
    hl_error err = {0};
    if (hl_vocab_encode_input(s->meta.vocab, (const unsigned char *)text, strlen(text), &ids,
                              &n, &err) != HL_OK)
        heads_fail(&err);
    if (n < 1)
        heads_bad_input("--text encodes to no tokens");
    *B = 1;
    *T = (int)n;
    return ids;
}

static void print_ids(const int32_t *ids, int B, int T)
{
    for (int b = 0; b < B; b++) {
        printf("ids[%d]:", b);
        for (int t = 0; t < T; t++)
            printf(" %d", ids[(size_t)b * T + t]);
        printf("\n");
    }
}

/* logits (B,T,V) as float32 and the ids as int64, in DIR/eval.safetensors. */
static hl_status save_eval(const char *dir, const hl_tensor *logits, const int32_t *ids, int B,
                           int T, hl_error *err)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/eval.safetensors", dir);
    int64_t *wide = malloc((size_t)B * T * sizeof *wide);
    hl_safetensors_writer *w = hl_safetensors_writer_new();
    hl_status st = wide && w ? HL_OK : hl_error_set(err, HL_ERR_NOMEM, "out of memory");
    for (size_t i = 0; st == HL_OK && i < (size_t)B * T; i++)
        wide[i] = ids[i];
    if (st == HL_OK)
        st = hl_safetensors_writer_add(w, "logits", logits, HL_DTYPE_F32, err);
    if (st == HL_OK)
        st = hl_safetensors_writer_add_raw(w, "input_ids", HL_DTYPE_I64, 2,
                                           (const int64_t[]){B, T}, wide, err);
    if (st == HL_OK)
        st = hl_safetensors_writer_save(w, path, err);
    hl_safetensors_writer_free(w);
    free(wide);
    return st;
}

int heads_run_eval(const options *o)
{
    study s = {0};
    hl_error err = {0};
    if (!(s.m = hl_gpt_load_meta(o->model, &s.meta, &err)))
        heads_refuse(&err);
    int B, T;
    int32_t *ids = o->token_ids ? read_id_lines(o->token_ids, s.m->cfg.vocab_in, &B, &T)
                                : encode_text(&s, o->text, &B, &T);
    /* Each token predicts the next: a sequence of one has no loss to report.
     * The ids are freed before a refusal, which a leak checker would count. */
    const int n_ctx = s.m->cfg.n_ctx;
    if (T < 2 || T > n_ctx)
        free(ids);
    if (T > n_ctx)
        heads_bad_input("%d tokens a sequence; the model reads at most %d", T, n_ctx);
    if (T < 2 && o->token_ids)
        heads_bad_input("%s: one id a line; eval needs at least 2 (each predicts the next)",
                        o->token_ids);
    if (T < 2)
        heads_bad_input("--text \"%s\" is one token; eval needs at least 2 (each predicts the "
                        "next)", o->text);
    /* Every token but a sequence's first is a target: the model must be
     * able to predict it (a toy model reads its BOS, never predicts it). */
    for (size_t i = 0; i < (size_t)B * T; i++)
        if (i % (size_t)T && ids[i] >= s.m->cfg.vocab_out) {
            const int token = ids[i];
            free(ids);
            heads_bad_input("%s: sequence %zu, place %zu: token %d is one the model reads but "
                            "cannot predict (its outputs are 0..%d); only a sequence's first "
                            "token may be", o->token_ids ? o->token_ids : "--text",
                            i / (size_t)T + 1, i % (size_t)T + 1, token, s.m->cfg.vocab_out - 1);
        }
    heads_make_out_dir(o);
    int32_t *targets = malloc((size_t)B * T * sizeof *targets);
    if (!targets)
        heads_out_of_memory();
    for (size_t i = 0; i < (size_t)B * T; i++) /* position t predicts t + 1 */
        targets[i] = (i + 1) % (size_t)T ? ids[i + 1] : -1;
    hl_graph *g = hl_graph_new(0);
    hl_graph_set_grad_enabled(g, false);
    hl_graph_set_training(g, false); /* no dropout, whatever the model trained with */
    hl_tensor *logits = hl_gpt_forward(g, s.m, ids, B, T, NULL);
    hl_tensor *loss = hl_gpt_loss(g, s.m, logits, targets, -1);
    if (hl_graph_failed(g))
        heads_fail(&g->error);
    print_ids(ids, B, T);
    printf("loss %.6f nats/token over %d predictions (%d sequence%s of %d tokens)\n",
           (double)loss->data[0], B * (T - 1), B, B == 1 ? "" : "s", T);
    if (save_eval(o->out, logits, ids, B, T, &err) != HL_OK)
        heads_fail(&err);
    printf("wrote %s/eval.safetensors (logits (%d,%d,%d) float32, input_ids)\n", o->out, B, T,
           s.m->cfg.vocab_out);
    hl_graph_free(g);
    free(targets);
    free(ids);
    hl_gpt_meta_clear(&s.meta);
    hl_gpt_free(s.m);
    return 0;
}

int heads_run_export(const options *o)
{
    hl_error err = {0};
    hl_gpt_meta meta;
    hl_gpt *m = hl_gpt_load_meta(o->model, &meta, &err);
    if (!m)
        heads_refuse(&err);
    char why[300];
    if (hl_hf_arch_for(&m->cfg, why, sizeof why) == HL_HF_ARCHS)
        heads_bad_input("%s: no Hugging Face architecture expresses this model: %s", o->model,
                        why);
    if (hl_hf_export(m, &meta.token_ids, o->out, &err) != HL_OK)
        heads_fail(&err);
    printf("wrote %s/config.json (%s) and %s/model.safetensors\n", o->out,
           hl_hf_arch_name(hl_hf_arch_for(&m->cfg, why, sizeof why)), o->out);
    hl_gpt_meta_clear(&meta);
    hl_gpt_free(m);
    return 0;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The text of tokens (printable as it is), or the ids without a vocabulary. */
static void print_tokens(const hl_vocab *v, const int32_t *ids, size_t n)
{
    unsigned char *text;
    size_t len;
    hl_error err = {0};
    if (v && hl_vocab_decode(v, ids, n, &text, &len, &err) == HL_OK) {
        fwrite(text, 1, len, stdout);
        free(text);
        return;
    }
    for (size_t i = 0; i < n; i++)
        printf("%s%d", i ? " " : "", ids[i]);
}

int heads_run_generate(const options *o)
{
    hl_error err = {0};
    hl_gpt_meta meta;
    hl_gpt *m = hl_gpt_load_meta(o->model, &meta, &err);
    if (!m)
        heads_refuse(&err);
    if (!meta.vocab)
        heads_bad_input("%s has no vocabulary to read --prompt with%s%s%s", o->model,
                        meta.vocab_note[0] ? " (" : "", meta.vocab_note,
                        meta.vocab_note[0] ? ")" : "");
    int32_t *ids;
    size_t n;
    if (hl_vocab_encode_input(meta.vocab, (const unsigned char *)o->prompt, strlen(o->prompt),
                              &ids, &n, &err) != HL_OK)
        heads_fail(&err);
    if (n < 1)
        heads_bad_input("--prompt encodes to no tokens");
    if (n + (size_t)o->tokens > (size_t)m->cfg.n_ctx)
        heads_bad_input("%zu prompt tokens and --tokens %d pass the model's %d positions", n,
                        o->tokens, m->cfg.n_ctx);
    int32_t *all = realloc(ids, (n + (size_t)o->tokens) * sizeof *all);
    hl_gpt_cache *cache = all ? hl_gpt_cache_new(m, (int)n + o->tokens, &err) : NULL;
    if (!cache)
        heads_fail(&err);
    hl_rng rng;
    hl_rng_seed(&rng, (uint64_t)o->seed);
    /* A padded embedding's extra tokens have no text: they are never drawn. */
    const int size = hl_vocab_size(meta.vocab);
    const int tokens = size < m->cfg.vocab_out ? size : m->cfg.vocab_out;
    const hl_real *logits;
    const double start = now();
    if (hl_gpt_cache_feed(cache, all, (int)n, &logits, &err) != HL_OK)
        heads_fail(&err);
    const double prompt_done = now();
    /* As transformers' generate(): the end-of-sequence token ends the text. */
    bool stopped = false;
    int made = 0;
    while (made < o->tokens && !stopped) {
        const int32_t id = hl_gpt_sample(logits, tokens, o->temperature, o->top_k, &rng);
        all[n + made++] = id;
        stopped = !o->ignore_eos && hl_hf_token_ids_has_eos(&meta.token_ids, id);
        if (made < o->tokens && !stopped &&
            hl_gpt_cache_feed(cache, &all[n + made - 1], 1, &logits, &err) != HL_OK)
            heads_fail(&err);
    }
    const double end = now();
    print_tokens(meta.vocab, all, n + (size_t)made);
    printf("\n--\nprompt: %zu tokens in %.3f s; generated %d tokens in %.3f s: %.1f tokens/s "
           "(key/value cache, temperature %g, top-k %d, seed %d)%s\n", n, prompt_done - start,
           made, end - prompt_done, made / (end - prompt_done), o->temperature, o->top_k,
           o->seed, stopped ? "; stopped at the end-of-sequence token" : "");
    hl_gpt_cache_free(cache);
    free(all);
    hl_gpt_meta_clear(&meta);
    hl_gpt_free(m);
    return 0;
}
