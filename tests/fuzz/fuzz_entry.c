/* The fuzz harness bodies: see fuzz_entry.h. */
#include "tests/fuzz/fuzz_entry.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analysis/patch_pairs.h"
#include "cli/cli.h"
#include "data/token_file.h"
#include "data/token_ids.h"
#include "io/checkpoint.h"
#include "io/csv_read.h"
#include "io/hf.h"
#include "io/model_io.h"
#include "io/safetensors.h"
#include "models/gpt.h"
#include "tasks/toy_task.h"
#include "text/vocab.h"

static bool write_file(const char *path, const uint8_t *data, size_t size)
{
    FILE *fp = fopen(path, "wb");
    if (!fp)
        return false;
    bool ok = fwrite(data, 1, size, fp) == size;
    return fclose(fp) == 0 && ok;
}

/* The bytes in a file of this process's own (the loaders take paths); NULL
 * when it cannot be written. */
static const char *as_file(const uint8_t *data, size_t size)
{
    static char path[64];
    if (!path[0]) {
        const char *dir = getenv("TMPDIR");
        snprintf(path, sizeof path, "%s/hl-fuzz-XXXXXX", dir && strlen(dir) < 40 ? dir : "/tmp");
        int fd = mkstemp(path);
        if (fd < 0)
            return path[0] = '\0', NULL;
        close(fd);
    }
    return write_file(path, data, size) ? path : NULL;
}

/* Also read back from a file by hl_safetensors_read_header, which checks
 * the same rules without the data: the two must agree on every input. */
int hl_fuzz_safetensors(const uint8_t *data, size_t size)
{
    hl_error err = {0};
    hl_safetensors *f = NULL, *head = NULL;
    const char *path = as_file(data, size);
    const bool whole = hl_safetensors_parse(data, size, "fuzz", &f, &err) == HL_OK;
    hl_error_clear(&err);
    if (path && whole != (hl_safetensors_read_header(path, &head, &err) == HL_OK))
        abort();
    if (head && hl_safetensors_count(head) != hl_safetensors_count(f))
        abort();
    hl_safetensors_free(head);
    if (!whole)
        return 0;
    for (size_t i = 0; i < hl_safetensors_count(f); i++) {
        const hl_safetensors_entry_info *e = hl_safetensors_entry(f, i);
        hl_error load_err = {0};
        hl_tensor *t = hl_safetensors_load(f, e->name, false, &load_err);
        if (t) {
            hl_safetensors_copy_to(f, e->name, t, &load_err);
            hl_tensor_free(t);
        }
    }
    hl_safetensors_metadata(f, "config");
    hl_safetensors_free(f);
    return 0;
}

static hl_gpt_config fixture_config(void)
{
    hl_gpt_config cfg = hl_toy_gpt_config();
    cfg.vocab_in = 7;
    cfg.vocab_out = 6;
    cfg.n_ctx = 6;
    cfg.d_model = 8;
    cfg.n_heads = 2;
    cfg.n_layers = 2;
    cfg.mlp = true;
    cfg.norm = HL_GPT_NORM_LAYER;
    return cfg;
}

/* Built once and kept: a load that fails leaves the model as it was, and one
 * that succeeds only overwrites values, so every input meets the same model. */
static hl_gpt *checkpoint_model(hl_optim **opt)
{
    static hl_gpt *m;
    static hl_optim *adamw;
    if (!m) {
        hl_error err = {0};
        hl_gpt_config cfg = fixture_config();
        m = hl_gpt_new(&cfg, &err);
        adamw = m ? hl_optim_new(m->params,
                                 &(hl_optim_config){.kind = HL_OPTIM_ADAMW, .lr = 1e-3,
                                                    .beta1 = 0.9, .beta2 = 0.98, .eps = 1e-8},
                                 &err)
                  : NULL;
    }
    *opt = adamw;
    return adamw ? m : NULL;
}

int hl_fuzz_checkpoint(const uint8_t *data, size_t size)
{
    hl_optim *opt;
    hl_gpt *m = checkpoint_model(&opt);
    const char *path = m ? as_file(data, size) : NULL;
    if (!path)
        return 0;
    hl_error err = {0};
    hl_rng rng;
    hl_rng_seed(&rng, 0);
    hl_checkpoint_rng rngs[] = {{"data", &rng, NULL}};
    int64_t step = 0;
    hl_checkpoint_load(path, m->params, opt, &step, rngs, 1, &err);
    return 0;
}

/* Rough upper bound of the values a parsed config builds (no overflow: every
 * factor is an int). */
static double config_size(const hl_gpt_config *c)
{
    double d = c->d_model;
    return d * ((double)c->vocab_in + c->vocab_out + c->n_ctx + 1) + c->n_layers * d * (12 * d + 16);
}

/* Whether a and b are both absent or store as the same text. */
static bool same_vocab(const hl_vocab *a, const hl_vocab *b)
{
    if (!a || !b)
        return !a && !b;
    char *x = hl_vocab_format(a), *y = hl_vocab_format(b);
    const bool same = x && y && !strcmp(x, y);
    free(x);
    free(y);
    return same;
}

int hl_fuzz_gpt(const uint8_t *data, size_t size)
{
    /* The config parser alone, on the bytes as text. */
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    hl_gpt_config cfg;
    hl_error err = {0};
    hl_gpt_config_parse(text, &cfg, &err);
    free(text);
    /* The bytes as a model file, loaded when its config is small enough. */
    hl_safetensors *f = NULL;
    if (hl_safetensors_parse(data, size, "fuzz", &f, &err) != HL_OK)
        return 0;
    hl_error_clear(&err);
    bool small = hl_gpt_config_parse(hl_safetensors_metadata(f, "config"), &cfg, &err) == HL_OK &&
                 config_size(&cfg) <= HL_FUZZ_MAX_PARAMS;
    hl_safetensors_free(f);
    /* The vocabulary alone reads only the header, so any size; a model that
     * loads must give the same one that way. */
    const char *path = as_file(data, size);
    if (!path)
        return 0;
    hl_vocab *alone = NULL;
    hl_error vocab_err = {0};
    const bool read_alone = hl_gpt_load_vocab(path, &alone, &vocab_err) == HL_OK;
    if (small) {
        hl_gpt_meta meta;
        hl_gpt *m = hl_gpt_load_meta(path, &meta, &err);
        if (m && (!read_alone || !same_vocab(meta.vocab, alone)))
            abort();
        hl_gpt_free(m);
        hl_gpt_meta_clear(&meta);
    }
    hl_vocab_free(alone);
    return 0;
}

/* What every vocabulary that reads must do (aborting when it does not):
 * write and read back to itself, and decode its encoding of a text with every
 * byte to that text. */
static void check_vocab(const hl_vocab *v)
{
    hl_error err = {0};
    char *stored = hl_vocab_format(v);
    hl_vocab *back = stored ? hl_vocab_parse(stored, &err) : NULL;
    char *again = back ? hl_vocab_format(back) : NULL;
    if (stored && (!again || strcmp(stored, again) != 0))
        abort();
    unsigned char sample[2 * 256 + 8];
    for (int i = 0; i < 256; i++)
        sample[i] = sample[2 * 256 - 1 - i] = (unsigned char)i;
    memcpy(sample + 2 * 256, "  the\t\tx", 8);
    int32_t *tokens = NULL;
    unsigned char *decoded = NULL;
    size_t n_tokens, n_decoded;
    if (hl_vocab_encode(v, sample, sizeof sample, &tokens, &n_tokens, &err) == HL_OK &&
        hl_vocab_decode(v, tokens, n_tokens, &decoded, &n_decoded, &err) == HL_OK &&
        (n_decoded != sizeof sample || memcmp(decoded, sample, sizeof sample) != 0))
        abort();
    free(tokens);
    free(decoded);
    free(stored);
    free(again);
    hl_vocab_free(back);
}

int hl_fuzz_vocab(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    hl_error err = {0};
    hl_vocab *v = hl_vocab_parse(text, &err);
    free(text);
    if (v)
        check_vocab(v);
    hl_vocab_free(v);
    return 0;
}

/* A folder of this process's own for the pair files; NULL when it cannot be
 * made. */
static const char *own_dir(void)
{
    static char dir[64];
    if (!dir[0]) {
        const char *tmp = getenv("TMPDIR");
        snprintf(dir, sizeof dir, "%s/hl-fuzz-dir-XXXXXX", tmp && strlen(tmp) < 40 ? tmp : "/tmp");
        if (!mkdtemp(dir))
            return dir[0] = '\0', NULL;
    }
    return dir;
}

int hl_fuzz_tokenizer_json(const uint8_t *data, size_t size)
{
    const char *dir = own_dir();
    char path[128];
    if (!dir)
        return 0;
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    if (!write_file(path, data, size))
        return 0;
    hl_error err = {0};
    hl_vocab *v = hl_vocab_load_pretrained(path, &err);
    if (v)
        check_vocab(v);
    hl_vocab_free(v);
    return 0;
}

int hl_fuzz_vocab_merges(const uint8_t *data, size_t size)
{
    const char *dir = own_dir();
    if (!dir)
        return 0;
    const uint8_t *nul = memchr(data, 0, size);
    const size_t split = nul ? (size_t)(nul - data) : size;
    char vocab[128], merges[128];
    snprintf(vocab, sizeof vocab, "%s/vocab.json", dir);
    snprintf(merges, sizeof merges, "%s/merges.txt", dir);
    if (!write_file(vocab, data, split) ||
        !write_file(merges, data + split + (nul != NULL), size - split - (nul != NULL)))
        return 0;
    hl_error err = {0};
    hl_vocab *v = hl_vocab_load_pretrained(dir, &err);
    if (v)
        check_vocab(v);
    hl_vocab_free(v);
    return 0;
}

int hl_fuzz_cli(const uint8_t *data, size_t size)
{
    enum { MAX_ARGS = 64 };
    char *text = malloc(size + 1), *argv[MAX_ARGS + 1] = {"fuzz"};
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    int argc = 1;
    for (size_t i = 0, start = 0; i <= size && argc <= MAX_ARGS; i++)
        if (i == size || text[i] == '\0' || text[i] == '\n') {
            text[i] = '\0';
            argv[argc++] = text + start;
            start = i + 1;
        }
    int steps = 0, threads = 0;
    double lr = 0, eps = 0.1;
    const char *out = NULL;
    bool flag = false, given = false;
    hl_opt_list list = {0};
    const hl_opt opts[] = {
        HL_OPTION_INT("steps", &steps, 0, 1e8, "N", "steps"),
        HL_OPTION_INT("threads", &threads, 1, 1024, "N", "threads"),
        HL_OPTION_REAL("lr", &lr, 0, 10, "X", "rate", .given = &given),
        HL_OPTION_REAL("eps", &eps, 0, 1, "E", "step", .min_open = true),
        HL_OPTION_TEXT("out", &out, "DIR", "where"),
        HL_OPTION_FLAG("curve", &flag, "a curve"),
        HL_OPTION_LIST("op", &list, "NAME", "ops"),
        {0},
    };
    static char messages[4096];
    FILE *errors = fmemopen(messages, sizeof messages, "w");
    if (errors) {
        hl_cli_parse("fuzz", opts, 1, argc, argv, errors);
        fclose(errors);
    }
    free(text);
    return 0;
}

/* What hl_patch_pairs_parse promises of a task it returns: one row per pair,
 * tokens in range, each pair scored somewhere before its end and nowhere in
 * its padding. */
static void check_pairs(const hl_patch_pairs *p, const hl_gpt_config *cfg)
{
    const hl_patch_task *t = &p->task;
    bool ok = t->B == p->n && p->n >= 1 && t->T >= 2 && t->T <= cfg->n_ctx;
    for (int b = 0; ok && b < t->B; b++) {
        int scored = 0;
        ok = p->length[b] >= 2 && p->length[b] <= t->T;
        for (int i = 0; ok && i < t->T; i++) {
            const size_t at = (size_t)b * t->T + i;
            const int32_t a = t->answer[at], w = t->wrong[at];
            ok = t->clean[at] >= 0 && t->clean[at] < cfg->vocab_in && t->corrupt[at] >= 0 &&
                 t->corrupt[at] < cfg->vocab_in && a >= -1 && a < cfg->vocab_out && w >= -1 &&
                 w < cfg->vocab_out && (a < 0) == (w < 0) &&
                 (a < 0 || (i < p->length[b] - 1 && a == t->clean[at + 1] &&
                            w == t->corrupt[at + 1] &&
                            (t->metric != HL_METRIC_LOGIT_DIFF || a != w)));
            scored += a >= 0;
        }
        ok = ok && scored >= 1 && scored == p->scored[b];
    }
    if (!ok)
        abort();
}

int hl_fuzz_patch_pairs(const uint8_t *data, size_t size)
{
    static hl_vocab *words; /* built once and kept, as checkpoint_model's model */
    if (!words) {
        const unsigned char *pieces[] = {(const unsigned char *)"ab",
                                         (const unsigned char *)" the"};
        hl_error err = {0};
        if (!(words = hl_vocab_from_pieces(pieces, (const size_t[]){2, 4}, 2, &err)))
            return 0;
    }
    const hl_gpt_config numbers = {.vocab_in = 7, .vocab_out = 6, .n_ctx = 6},
                        text = {.vocab_in = 258, .vocab_out = 258, .n_ctx = 16};
    for (int kind = 0; kind < 2; kind++) {
        const hl_gpt_config *cfg = kind ? &text : &numbers;
        hl_patch_pairs p;
        hl_error err = {0};
        if (hl_patch_pairs_parse((const char *)data, size, "fuzz", kind ? words : NULL, cfg,
                                 kind ? HL_METRIC_LOGIT_DIFF : HL_METRIC_LOSS, &p,
                                 &err) == HL_OK) {
            check_pairs(&p, cfg);
            hl_patch_pairs_free(&p);
        }
    }
    return 0;
}

int hl_fuzz_csv(const uint8_t *data, size_t size)
{
    hl_csv_table t;
    hl_error err = {0};
    if (hl_csv_parse((const char *)data, size, "fuzz.csv", &t, &err) != HL_OK)
        return 0;
    /* Every column named, findable by its name, and every row whole. */
    if (t.n_cols < 1 || t.n_cols > HL_CSV_MAX_COLS)
        abort();
    for (int c = 0; c < t.n_cols; c++)
        if (!t.names[c][0] || hl_csv_column(&t, t.names[c]) != c)
            abort();
    double sum = 0;
    for (size_t r = 0; r < t.n_rows; r++)
        for (int c = 0; c < t.n_cols; c++)
            sum += hl_csv_value(&t, r, c) != 0;
    hl_csv_table_free(&t);
    return sum < 0;
}

int hl_fuzz_token_ids(const uint8_t *data, size_t size)
{
    /* A vocabulary of 1000: ids of up to 3 digits, longer words refused. */
    int32_t *ids;
    int rows, cols;
    hl_error err = {0};
    if (hl_token_ids_parse((const char *)data, size, "fuzz.txt", 1000, &ids, &rows, &cols,
                           &err) != HL_OK) {
        if (ids || !err.message[0])
            abort();
        return 0;
    }
    /* rows × cols ids, each in the vocabulary, at most one a two bytes read */
    if (rows < 1 || cols < 1 || (size_t)rows * (size_t)cols > size / 2 + 1)
        abort();
    for (size_t i = 0; i < (size_t)rows * (size_t)cols; i++)
        if (ids[i] < 0 || ids[i] >= 1000)
            abort();
    free(ids);
    return 0;
}

int hl_fuzz_token_file(const uint8_t *data, size_t size)
{
    /* The header and vocabulary parser on the bytes in memory ... */
    hl_error err = {0};
    hl_token_header h;
    hl_vocab *v = NULL;
    if (hl_token_header_parse(data, size, size, "fuzz", &h, &v, &err) == HL_OK &&
        (h.docs_at + 8 * h.n_docs != size || h.docs_at < h.tokens_at + h.n_tokens * h.width ||
         h.tokens_at % HL_TOKEN_ALIGN ||
         hl_vocab_size(v) != (int)h.vocab_size))
        abort(); /* accepted what the format forbids */
    hl_vocab_free(v);
    /* ... and the whole reader on them as a file, every token read. */
    const char *path = as_file(data, size);
    hl_error open_err = {0};
    hl_token_file *f = path ? hl_token_file_open(path, &open_err) : NULL;
    if (!f)
        return 0;
    const hl_token_header *fh = hl_token_file_header(f);
    int32_t window[64];
    for (uint64_t at = 0; at < fh->n_tokens; at += 64) {
        const size_t n = fh->n_tokens - at < 64 ? (size_t)(fh->n_tokens - at) : 64;
        hl_error read_err = {0};
        if (hl_token_file_read(f, at, n, window, &read_err) == HL_OK)
            for (size_t i = 0; i < n; i++)
                if (window[i] < 0 || (uint32_t)window[i] >= fh->vocab_size)
                    abort();
    }
    hl_token_file_close(f);
    return 0;
}

/* The token ids of a config: a refusal says why; what is read is written
 * and read back the same. */
static void fuzz_token_ids(const uint8_t *data, size_t size)
{
    hl_error err = {0};
    hl_hf_token_ids ids = {0}, back = {0};
    if (hl_hf_token_ids_parse((const char *)data, size, "fuzz", &ids, &err) != HL_OK) {
        if (!err.message[0])
            abort();
        return;
    }
    char *text = hl_hf_token_ids_format(&ids);
    if (!text)
        return; /* out of memory */
    if (hl_hf_token_ids_parse(text, strlen(text), "fuzz", &back, &err) != HL_OK ||
        memcmp(&ids, &back, sizeof ids))
        abort();
    free(text);
}

int hl_fuzz_hf_config(const uint8_t *data, size_t size)
{
    hl_error err = {0};
    hl_gpt_config cfg;
    hl_hf_arch arch;
    fuzz_token_ids(data, size);
    if (hl_hf_config_parse((const char *)data, size, "fuzz", &cfg, &arch, &err) != HL_OK) {
        if (!err.message[0])
            abort(); /* a refusal must say why */
        return 0;
    }
    if ((unsigned)arch >= HL_HF_ARCHS)
        abort();
    cfg.vocab_in = cfg.vocab_out = cfg.vocab_in < 64 ? cfg.vocab_in : 64; /* stay small */
    cfg.n_ctx = cfg.n_ctx < 16 ? cfg.n_ctx : 16;
    if ((uint64_t)cfg.d_model * cfg.d_model * cfg.n_layers > HL_FUZZ_MAX_PARAMS / 16 ||
        cfg.mlp_width > 4096)
        return 0;
    hl_gpt *m = hl_gpt_new(&cfg, &err);
    if (!m && !err.message[0])
        abort();
    hl_gpt_free(m);
    return 0;
}

/* A folder of this process's own holding a small config.json, made once. */
static const char *hf_folder(void)
{
    static char dir[64];
    if (dir[0])
        return dir;
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/hl-fuzz-hf-XXXXXX", tmp && strlen(tmp) < 40 ? tmp : "/tmp");
    if (!mkdtemp(dir))
        return dir[0] = '\0', NULL;
    char path[128];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    if (!f)
        return NULL;
    fputs("{\"architectures\":[\"LlamaForCausalLM\"],\"hidden_size\":8,"
          "\"num_attention_heads\":2,\"num_key_value_heads\":1,\"num_hidden_layers\":1,"
          "\"intermediate_size\":16,\"vocab_size\":10,\"max_position_embeddings\":8}",
          f);
    return fclose(f) == 0 ? dir : NULL;
}

int hl_fuzz_hf_index(const uint8_t *data, size_t size)
{
    const char *dir = hf_folder();
    if (!dir)
        return 0;
    char path[128];
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    FILE *f = fopen(path, "wb");
    if (!f)
        return 0;
    const bool ok = fwrite(data, 1, size, f) == size;
    if (fclose(f) != 0 || !ok)
        return 0;
    hl_error err = {0};
    hl_gpt *m = hl_hf_load(dir, &err);
    if (!m && !err.message[0])
        abort();
    hl_gpt_free(m);
    return 0;
}
