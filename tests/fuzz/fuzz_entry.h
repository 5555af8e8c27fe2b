/*
 * fuzz_entry.h: the bodies of the fuzz harnesses, shared by the libFuzzer
 * programs (tests/fuzz/fuzz_main.c, `make fuzz`) and the test suite that
 * replays the committed corpus and regressions in every normal build
 * (tests/test_fuzz_entry.c). Each takes arbitrary bytes, must never crash,
 * leak or hit undefined behaviour, and returns 0 (libFuzzer's convention).
 */
#ifndef HL_FUZZ_ENTRY_H
#define HL_FUZZ_ENTRY_H

#include <stddef.h>
#include <stdint.h>

/* The bytes as a safetensors file (parsed from memory); every entry is then
 * loaded as a tensor and copied into one of its shape, metadata looked up. */
int hl_fuzz_safetensors(const uint8_t *data, size_t size);
/* The bytes as a checkpoint file, loaded into a small GPT with AdamW state and
 * an RNG (the config of tests/fixtures/gpt/weights.safetensors). */
int hl_fuzz_checkpoint(const uint8_t *data, size_t size);
/* The bytes as a model file: its "config" metadata parsed, then the model,
 * its metadata and weights loaded (hl_gpt_load_meta) when the config asks for
 * at most HL_FUZZ_MAX_PARAMS values. */
int hl_fuzz_gpt(const uint8_t *data, size_t size);

/* The bytes as a stored vocabulary (hl_vocab_parse: "headlab-words-1" pieces
 * or "headlab-bpe-1" merges); one that parses is formatted and parsed again,
 * must give the same string, and encodes and decodes a text with every byte. */
int hl_fuzz_vocab(const uint8_t *data, size_t size);

/* The bytes as a tokenizer.json (hl_vocab_load_pretrained); one that loads
 * must do what hl_fuzz_vocab checks of a parsed vocabulary. */
int hl_fuzz_tokenizer_json(const uint8_t *data, size_t size);
/* The bytes as vocab.json, a NUL byte, then merges.txt (the bytes after it),
 * loaded as a folder holding the two; checked as hl_fuzz_tokenizer_json. */
int hl_fuzz_vocab_merges(const uint8_t *data, size_t size);

/* The bytes as a command line (arguments separated by NUL or newline bytes)
 * for the programs' option parser (cli/cli.c), with a table of
 * every kind of option the programs use. */
int hl_fuzz_cli(const uint8_t *data, size_t size);

/* The bytes as a file of patching pairs (analysis/patch_pairs.h), read as
 * token numbers for a model of 7/6 tokens and 6 positions, and as text through
 * a vocabulary of the bytes and two learnt pieces for one of 16 positions
 * with the logit difference; a parsed task is checked against what the
 * parser promises (aborting when it breaks it). */
int hl_fuzz_patch_pairs(const uint8_t *data, size_t size);

/* The bytes as a numeric CSV file (io/csv_read.h); a parsed table is checked
 * against what the parser promises (aborting when it breaks it). */
int hl_fuzz_csv(const uint8_t *data, size_t size);

/* The bytes as sequences of token ids (data/token_ids.h, heads eval
 * --token-ids) for a vocabulary of 1000; accepted ids are checked to be as
 * many as promised and inside the vocabulary, a refusal to say why. */
int hl_fuzz_token_ids(const uint8_t *data, size_t size);

/* The bytes as a token file (data/token_file.h): the header and vocabulary
 * parser on them in memory, then the file opened (memory-mapped) and every
 * token read; an accepted header must describe exactly the bytes, and every
 * token read must be inside the vocabulary. */
int hl_fuzz_token_file(const uint8_t *data, size_t size);

/* The bytes as a Hugging Face config.json (io/hf.h); a config that parses is
 * checked to describe a model hl_gpt_new accepts or refuses with a message. */
int hl_fuzz_hf_config(const uint8_t *data, size_t size);
/* The bytes as a model.safetensors.index.json beside a small Llama-style
 * config.json in a folder of this process's own, loaded with hl_hf_load:
 * the shards it names are looked for in that folder. */
int hl_fuzz_hf_index(const uint8_t *data, size_t size);

/* Models a fuzzed config may build: small, so an input cannot make the fuzzer
 * allocate gigabytes (hl_gpt_new's own limit, HL_GPT_MAX_PARAMS, is larger). */
#define HL_FUZZ_MAX_PARAMS (1 << 20)

typedef int (*hl_fuzz_fn)(const uint8_t *data, size_t size);

#endif
