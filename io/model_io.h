/*
 * model_io.h: models to and from safetensors files. MHA weights use
 * PyTorch's nn.MultiheadAttention names; a GPT file carries its config (and
 * its task, step and pruning record) in the metadata, so it loads alone.
 *
 *     hl_gpt *m = hl_gpt_load("out/toy_heads/model.safetensors", &err);
 *
 *     hl_gpt_meta meta;
 *     hl_gpt *m = hl_gpt_load_meta("model.safetensors", &meta, &err);
 *     hl_gpt_save_meta("copy.safetensors", m, &meta, &err);
 *     hl_gpt_meta_clear(&meta);                       // its vocabulary
 *     hl_gpt_free(m);
 */
#ifndef HL_MODEL_IO_H
#define HL_MODEL_IO_H

#include <stdint.h>

#include "core/error.h"
#include "io/hf.h"
#include "io/safetensors.h"
#include "models/gpt.h"
#include "models/head_set.h"
#include "models/mha.h"
#include "text/vocab.h"

/* Builds a module from PyTorch-named weights in f (under prefix), deducing E,
 * kdim, vdim and bias from the shapes found; declares its parameters in p and
 * commits p, then copies the values in. Errors name the missing, misshapen
 * or not finite tensor, or one under prefix that the module has no place
 * for (an out_proj.bias without in_proj_bias, a stray name). */
hl_status hl_mha_load(hl_mha *m, hl_params *p, const hl_safetensors *f, const char *prefix,
                      int num_heads, hl_error *err);

/* A model built from the "config" metadata of a safetensors file (a
 * checkpoint or a model.safetensors) with every parameter copied from it.
 * NULL, with the reason in err, when the file, the config or a parameter is
 * missing or misshapen, a parameter holds a value that is not finite, or the
 * file holds a tensor the model has no place for. */
hl_gpt *hl_gpt_load(const char *path, hl_error *err);

/* What a model file says besides its weights. */
typedef struct hl_gpt_meta {
    char task[32];      /* metadata "task" ("toy_heads", "charlm"), "" when absent */
    int64_t step;       /* metadata "step", 0 when absent */
    hl_head_set pruned; /* original heads removed ("pruned_heads") */
    hl_vocab *vocab;    /* a text model's tokens, or NULL (see below); owned after
                         * hl_gpt_load_meta, borrowed when the caller sets it to save */
    /* A Hugging Face folder without a tokenizer headlab reads: why (its
     * message, e.g. a SentencePiece tokenizer refused); "" otherwise. */
    char vocab_note[HL_ERROR_MESSAGE_MAX];
    /* The special tokens of an imported model's configs (io/hf.h), kept in
     * the file's "hf_token_ids" metadata; none for a model headlab trained. */
    hl_hf_token_ids token_ids;
} hl_gpt_meta;

/* hl_gpt_load, and the metadata above, checked against the config. The
 * vocabulary is the file's "vocab" (text/vocab.h: a learnt one, its size the
 * model's vocab_in and vocab_out; a pretrained one may be smaller, as
 * checkpoints pad their embeddings), else the bytes for a model of 256 tokens
 * in and out (a byte-level charlm), else NULL; hl_gpt_meta_clear frees it.
 * A Hugging Face folder (io/hf.h) loads with the tokenizer its files hold
 * (hl_vocab_load_pretrained) and the token ids its configs name, its task
 * "pretrained"; a folder whose tokenizer headlab does not read loads without
 * one, the reason in vocab_note. */
hl_gpt *hl_gpt_load_meta(const char *path, hl_gpt_meta *meta, hl_error *err);
void hl_gpt_meta_clear(hl_gpt_meta *meta);
/* The "vocab" metadata string of v (malloc'd), or NULL when v is NULL or the
 * bytes alone, which a file states by leaving it out; *failed when out of
 * memory. For checkpoints, which store it too. */
char *hl_gpt_meta_format_vocab(const hl_vocab *v, bool *failed);
/* The "hf_token_ids" metadata string of ids (malloc'd), or NULL when it names
 * no token; *failed when out of memory. For checkpoints too. */
char *hl_gpt_meta_format_token_ids(const hl_hf_token_ids *ids, bool *failed);
/* The vocabulary hl_gpt_load_meta gives with the model at path, without
 * reading the weights: a model file's header (its config and "vocab"), or a
 * folder's config.json and tokenizer. *out is NULL for a model without one
 * (a byte model is given the bytes); a folder whose tokenizer headlab does
 * not read is an error, its reason in err. */
hl_status hl_gpt_load_vocab(const char *path, hl_vocab **out, hl_error *err);
/* Weights, config, task, step, pruned_heads and a learnt vocabulary, written
 * atomically; loads back with hl_gpt_load or hl_gpt_load_meta. HL_ERR_ARG
 * for a vocabulary whose size is not the model's vocab_in and vocab_out. */
hl_status hl_gpt_save_meta(const char *path, const hl_gpt *m, const hl_gpt_meta *meta,
                           hl_error *err);

#endif
