/*
 * hf.h: Hugging Face model folders, as transformers' save_pretrained writes
 * them, to and from headlab GPTs (models/gpt.h).
 *
 * A folder holds config.json and its weights: model.safetensors, or shards
 * listed by model.safetensors.index.json; tensors in F32, F16, BF16 or F64,
 * converted to hl_real as they load. Three architectures are read, each onto
 * the GPT's options:
 *
 *   GPT2LMHeadModel      learned positions, LayerNorm, gelu_new (tanh GELU) or
 *                        gelu, Conv1D weights stored (in,out), head tied to
 *                        wte without bias; names with or without "transformer."
 *   GPTNeoXForCausalLM   (Pythia) rotary positions on a fraction of each
 *                        head, parallel residual, q/k/v interleaved per head
 *                        in query_key_value, untied head without bias
 *   LlamaForCausalLM     RMSNorm, SwiGLU with separate gate and up projections,
 *                        rotary positions, grouped-query attention, no biases;
 *                        MistralForCausalLM and Qwen2ForCausalLM (q/k/v biases)
 *                        where they differ only by these options
 *
 * Config keys are read in both transformers' older style (rotary_pct,
 * rotary_emb_base, a top-level rope_theta) and transformers 5's
 * rope_parameters. Any other architecture, or an option the GPT cannot
 * express (rope scaling, a sliding window shorter than the context, ...), is
 * refused with HL_ERR_FORMAT and a message naming the file and the key; so is
 * a missing, extra or misshapen tensor, or one holding a NaN or an infinity,
 * naming it.
 *
 *     hl_gpt *m = hl_hf_load("gpt2/", &err);          // config.json + weights
 *     hl_hf_token_ids ids;                             // its bos, eos and pad ids
 *     hl_hf_read_token_ids("gpt2/", &ids, &err);
 *     hl_hf_export(m, &ids, "out/hf/", &err);          // and back, for transformers
 *
 * Exporting writes config.json and model.safetensors (F32) for the
 * architecture that expresses the model exactly (see hl_hf_arch_for);
 * loading an export gives bitwise the same logits.
 */
#ifndef HL_HF_H
#define HL_HF_H

#include <stdbool.h>
#include <stddef.h>

#include "core/error.h"
#include "models/gpt.h"

typedef enum hl_hf_arch {
    HL_HF_GPT2,
    HL_HF_GPT_NEOX,
    HL_HF_LLAMA,
    HL_HF_MISTRAL,
    HL_HF_QWEN2,
    HL_HF_ARCHS
} hl_hf_arch;

/* The architecture's class name ("GPT2LMHeadModel", ...). */
const char *hl_hf_arch_name(hl_hf_arch arch);

/* Whether path is a directory holding a config.json. */
bool hl_hf_is_folder(const char *path);

/* The GPT config and architecture of a config.json's text (len bytes; what
 * names it in messages). */
hl_status hl_hf_config_parse(const char *json, size_t len, const char *what, hl_gpt_config *cfg,
                             hl_hf_arch *arch, hl_error *err);

/* The GPT config and architecture of dir/config.json. */
hl_status hl_hf_read_config(const char *dir, hl_gpt_config *cfg, hl_hf_arch *arch, hl_error *err);

/* The model of a folder, every parameter loaded. NULL with the reason in err. */
hl_gpt *hl_hf_load(const char *dir, hl_error *err);

/* The architecture that expresses m exactly, or HL_HF_ARCHS with the first
 * difference from the closest one in why (size bytes). */
hl_hf_arch hl_hf_arch_for(const hl_gpt_config *cfg, char *why, size_t size);

/* The special tokens a model's configs name: "bos_token_id", "eos_token_id"
 * (a list in some, e.g. Llama 3's) and "pad_token_id", each as many ids as
 * the config gives (n 0: none, the key absent or null). They travel from an
 * imported folder through fine-tuning's checkpoints to an export, where
 * transformers' generate() stops at any eos id; an id need not lie inside
 * the vocabulary (GPT-2's configs name 50256 whatever their size). */
#define HL_HF_IDS_MAX 8
typedef struct hl_hf_id_list {
    int n;
    int id[HL_HF_IDS_MAX];
} hl_hf_id_list;
typedef struct hl_hf_token_ids {
    hl_hf_id_list bos, eos, pad;
} hl_hf_token_ids;

/* The three keys of a JSON object's text (config.json,
 * generation_config.json, a checkpoint's "hf_token_ids" metadata) over *ids:
 * a key present (null included) replaces its list, an absent one leaves it.
 * HL_ERR_FORMAT naming what and the key for a value other than null, a
 * whole number or a list of at most HL_HF_IDS_MAX of them. */
hl_status hl_hf_token_ids_parse(const char *json, size_t len, const char *what,
                                hl_hf_token_ids *ids, hl_error *err);

/* The ids of dir/config.json, with those dir/generation_config.json gives
 * (the ones generate() reads) over them when the folder has that file. */
hl_status hl_hf_read_token_ids(const char *dir, hl_hf_token_ids *ids, hl_error *err);

/* The three keys as a JSON object's text, null where none (malloc'ed; NULL
 * when out of memory). */
char *hl_hf_token_ids_format(const hl_hf_token_ids *ids);

/* Whether ids names any token; whether id is one of its eos ids. */
bool hl_hf_token_ids_any(const hl_hf_token_ids *ids);
bool hl_hf_token_ids_has_eos(const hl_hf_token_ids *ids, int id);

/* Writes dir/config.json and dir/model.safetensors (F32) for m, creating
 * dir; the config names the tokens of ids (NULL: none). HL_ERR_ARG naming
 * the difference for a model no architecture expresses. */
hl_status hl_hf_export(const hl_gpt *m, const hl_hf_token_ids *ids, const char *dir,
                       hl_error *err);

#endif
