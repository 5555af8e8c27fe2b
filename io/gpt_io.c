/* Loading and saving a GPT with its config and metadata: see model_io.h. */
#include "io/model_io.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/checkpoint.h"
#include "io/hf.h"
#include "io/internal.h"
#include "io/safetensors.h"

/* A model file at path, whole or its header alone; a folder (not a Hugging
 * Face one, which the callers load as such) is refused saying what a model
 * path is. */
static hl_status read_model_file(const char *path, bool header_only, hl_safetensors **f,
                                 hl_error *err)
{
    struct stat st;
    if (path && stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return hl_error_set(err, HL_ERR_IO, "%s is a folder without config.json: a model is a "
                            "headlab model file or a Hugging Face folder holding config.json",
                            path);
    return header_only ? hl_safetensors_read_header(path, f, err)
                       : hl_safetensors_read(path, f, err);
}

/* The model a file's config describes, with its weights; messages do not
 * name the file. */
static hl_gpt *gpt_from_file(const hl_safetensors *f, hl_error *err)
{
    hl_gpt_config cfg;
    hl_head_set pruned;
    hl_gpt *m = NULL;
    if (hl_gpt_config_parse(hl_safetensors_metadata(f, "config"), &cfg, err) == HL_OK &&
        hl_pruned_heads_parse(hl_safetensors_metadata(f, "pruned_heads"), &cfg, &pruned, err) ==
            HL_OK)
        m = hl_gpt_new(&cfg, err);
    if (m && (hl_gpt_set_pruned(m, &pruned, err) != HL_OK ||
              hl_io_check_no_extra(f, NULL, m->params, err) != HL_OK)) {
        hl_gpt_free(m);
        m = NULL;
    }
    for (size_t i = 0; m && i < hl_params_n_tensors(m->params); i++) {
        hl_tensor *t = hl_params_tensor(m->params, i);
        if (hl_io_check_tensor(f, NULL, t->name, t, HL_IO_FINITE, err) != HL_OK ||
            hl_safetensors_copy_to(f, t->name, t, err) != HL_OK) {
            hl_gpt_free(m);
            m = NULL;
        }
    }
    return m;
}

hl_gpt *hl_gpt_load(const char *path, hl_error *err)
{
    if (hl_hf_is_folder(path))
        return hl_hf_load(path, err);
    hl_safetensors *f = NULL;
    if (read_model_file(path, false, &f, err) != HL_OK)
        return NULL;
    hl_error local = {0};
    hl_gpt *m = gpt_from_file(f, &local);
    hl_safetensors_free(f);
    if (!m)
        hl_error_set(err, local.status, "%s: %s", path, local.message);
    return m;
}

/* Whether v suits a model of config c: one token each way per vocabulary
 * token, as many as the model has (a pretrained tokenizer: at most). */
static bool vocab_fits(const hl_vocab *v, const hl_gpt_config *c)
{
    const int size = hl_vocab_size(v);
    if (!strcmp(hl_vocab_kind(v), "pretrained"))
        return size <= c->vocab_in && size <= c->vocab_out;
    return size == c->vocab_in && size == c->vocab_out;
}

/* The vocabulary of a model file (model_io.h), checked against its config. */
static hl_status load_vocab(const hl_safetensors *f, const hl_gpt_config *c, hl_vocab **out,
                            hl_error *err)
{
    const char *text = hl_safetensors_metadata(f, "vocab");
    *out = NULL;
    if (!text) {
        const bool bytes = c->vocab_in == HL_VOCAB_BYTES && c->vocab_out == HL_VOCAB_BYTES;
        if (bytes && !(*out = hl_vocab_bytes()))
            return hl_error_set(err, HL_ERR_NOMEM, "out of memory");
        return HL_OK;
    }
    hl_error local = {0};
    if (!(*out = hl_vocab_parse(text, &local)))
        return hl_error_set(err, local.status, "metadata \"vocab\": %s", local.message);
    const int size = hl_vocab_size(*out);
    if (!vocab_fits(*out, c)) {
        hl_vocab_free(*out);
        *out = NULL;
        return hl_error_set(err, HL_ERR_FORMAT,
                            "metadata \"vocab\" has %d tokens but the model reads %d and "
                            "predicts %d",
                            size, c->vocab_in, c->vocab_out);
    }
    return HL_OK;
}

/* The tokenizer of a Hugging Face folder, checked against the model's config. */
static hl_status folder_vocab(const char *path, const hl_gpt_config *c, hl_vocab **out,
                              hl_error *err)
{
    if (!(*out = hl_vocab_load_pretrained(path, err)))
        return err->status;
    if (vocab_fits(*out, c))
        return HL_OK;
    hl_error_set(err, HL_ERR_FORMAT, "%s: the tokenizer has %d tokens, more than the model's %d",
                 path, hl_vocab_size(*out), c->vocab_in);
    hl_vocab_free(*out);
    *out = NULL;
    return HL_ERR_FORMAT;
}

/* A Hugging Face folder (io/hf.h): the model, and its tokenizer when the
 * folder has one that headlab reads. */
static hl_gpt *load_folder(const char *path, hl_gpt_meta *meta, hl_error *err)
{
    hl_gpt *m = hl_hf_load(path, err);
    if (!m)
        return NULL;
    snprintf(meta->task, sizeof meta->task, "pretrained");
    if (hl_hf_read_token_ids(path, &meta->token_ids, err) != HL_OK) {
        hl_gpt_free(m);
        return NULL;
    }
    hl_error local = {0};
    if (folder_vocab(path, &m->cfg, &meta->vocab, &local) != HL_OK)
        snprintf(meta->vocab_note, sizeof meta->vocab_note, "%s", local.message);
    return m;
}

hl_gpt *hl_gpt_load_meta(const char *path, hl_gpt_meta *meta, hl_error *err)
{
    memset(meta, 0, sizeof *meta);
    if (hl_hf_is_folder(path))
        return load_folder(path, meta, err);
    hl_safetensors *f = NULL;
    if (read_model_file(path, false, &f, err) != HL_OK)
        return NULL; /* the message names the file */
    /* A private record, so the message can be prefixed with the path. */
    hl_error local = {0};
    hl_gpt *m = gpt_from_file(f, &local);
    if (m) {
        const char *task = hl_safetensors_metadata(f, "task");
        const char *step = hl_safetensors_metadata(f, "step");
        snprintf(meta->task, sizeof meta->task, "%s", task ? task : "");
        meta->step = step ? strtoll(step, NULL, 10) : 0;
        hl_gpt_pruned_heads(m, &meta->pruned);
        const char *ids = hl_safetensors_metadata(f, "hf_token_ids");
        if (!ids || hl_hf_token_ids_parse(ids, strlen(ids), "metadata \"hf_token_ids\"",
                                          &meta->token_ids, &local) == HL_OK)
            load_vocab(f, &m->cfg, &meta->vocab, &local);
    }
    hl_safetensors_free(f);
    if (hl_error_failed(&local)) {
        hl_gpt_free(m);
        hl_gpt_meta_clear(meta);
        hl_error_set(err, local.status, "%s: %s", path, local.message);
        return NULL;
    }
    return m;
}

hl_status hl_gpt_load_vocab(const char *path, hl_vocab **out, hl_error *err)
{
    *out = NULL;
    hl_gpt_config cfg;
    if (hl_hf_is_folder(path)) {
        hl_hf_arch arch;
        if (hl_hf_read_config(path, &cfg, &arch, err) != HL_OK)
            return err->status;
        return folder_vocab(path, &cfg, out, err);
    }
    hl_safetensors *f = NULL;
    if (read_model_file(path, true, &f, err) != HL_OK)
        return err->status;
    hl_error local = {0};
    if (hl_gpt_config_parse(hl_safetensors_metadata(f, "config"), &cfg, &local) == HL_OK)
        load_vocab(f, &cfg, out, &local);
    hl_safetensors_free(f);
    if (hl_error_failed(&local))
        return hl_error_set(err, local.status, "%s: %s", path, local.message);
    return HL_OK;
}

void hl_gpt_meta_clear(hl_gpt_meta *meta)
{
    hl_vocab_free(meta->vocab);
    meta->vocab = NULL;
}

char *hl_gpt_meta_format_vocab(const hl_vocab *v, bool *failed)
{
    *failed = false;
    if (!v || hl_vocab_size(v) == HL_VOCAB_BYTES)
        return NULL;
    char *s = hl_vocab_format(v);
    *failed = s == NULL;
    return s;
}

char *hl_gpt_meta_format_token_ids(const hl_hf_token_ids *ids, bool *failed)
{
    *failed = false;
    if (!hl_hf_token_ids_any(ids))
        return NULL;
    char *s = hl_hf_token_ids_format(ids);
    *failed = s == NULL;
    return s;
}

hl_status hl_gpt_save_meta(const char *path, const hl_gpt *m, const hl_gpt_meta *meta,
                           hl_error *err)
{
    char config[1024], pruned[8192];
    int n = hl_gpt_config_format(&m->cfg, config, sizeof config);
    int k = hl_pruned_heads_format(&meta->pruned, &m->cfg, pruned, sizeof pruned);
    if (n < 0 || (size_t)n >= sizeof config || k < 0 || (size_t)k >= sizeof pruned)
        return hl_error_set(err, HL_ERR_ARG, "save %s: the model config is too long", path);
    const int V = meta->vocab ? hl_vocab_size(meta->vocab) : 0;
    if (meta->vocab && !vocab_fits(meta->vocab, &m->cfg))
        return hl_error_set(err, HL_ERR_ARG, "save %s: a vocabulary of %d tokens for a model "
                            "that reads %d and predicts %d", path, V, m->cfg.vocab_in,
                            m->cfg.vocab_out);
    bool failed;
    char *vocab = hl_gpt_meta_format_vocab(meta->vocab, &failed);
    if (failed)
        return hl_error_set(err, HL_ERR_NOMEM, "save %s: out of memory", path);
    char *ids = hl_gpt_meta_format_token_ids(&meta->token_ids, &failed);
    if (failed) {
        free(vocab);
        return hl_error_set(err, HL_ERR_NOMEM, "save %s: out of memory", path);
    }
    hl_checkpoint_meta entries[5] = {{"config", config}, {"pruned_heads", pruned}};
    int n_entries = 2;
    if (meta->task[0])
        entries[n_entries++] = (hl_checkpoint_meta){"task", meta->task};
    if (vocab)
        entries[n_entries++] = (hl_checkpoint_meta){"vocab", vocab};
    if (ids)
        entries[n_entries++] = (hl_checkpoint_meta){"hf_token_ids", ids};
    hl_status st = hl_checkpoint_save(path, m->params, NULL, meta->step, NULL, 0, entries,
                                      n_entries, err);
    free(vocab);
    free(ids);
    return st;
}
