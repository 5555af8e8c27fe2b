/* Tests for examples/heads/pretrained.c and charlm --init-from: a Hugging
 * Face folder (tests/fixtures/hf/llama_tiny with the small Llama-3-style
 * tokenizer of tests/fixtures/pretrained/) through heads eval, generate and
 * export and a fine-tuning run, end to end; bad folders refused. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "files/fs.h"
#include "io/model_io.h"
#include "io/safetensors.h"
#include "tests/testutil.h"

#ifndef HL_BUILD_DIR
#define HL_BUILD_DIR "build"
#endif

#define LLAMA "tests/fixtures/hf/llama_tiny"

static char temp_dir[64];

/* temp_dir/llama: the tiny Llama with a tokenizer; temp_dir/text.txt. */
static void make_folder(void)
{
    strcpy(temp_dir, "/tmp/headlab-pretrained-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(temp_dir));
    char command[512];
    snprintf(command, sizeof command,
             "mkdir %s/llama && cp " LLAMA "/config.json " LLAMA "/model.safetensors "
             "tests/fixtures/pretrained/llama3_style/tokenizer.json %s/llama/",
             temp_dir, temp_dir);
    tu_run_ok(command);
    char path[128];
    snprintf(path, sizeof path, "%s/text.txt", temp_dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    for (int i = 0; i < 300; i++)
        fprintf(f, "hello world %d, the cat sat.\n", i % 7);
    fclose(f);
}

static void remove_folder(void)
{
    char command[128];
    snprintf(command, sizeof command, "rm -rf %s", temp_dir);
    tu_run_ok(command);
}

/* The number after `key` in text. */
static double number_after(const char *text, const char *key)
{
    const char *at = strstr(text, key);
    ck_assert_msg(at, "no \"%s\" in: %s", key, text);
    return strtod(at + strlen(key), NULL);
}

/* heads eval on the fixture's own ids prints transformers' loss, and its
 * eval.safetensors holds transformers' logits. */
START_TEST(test_eval_matches_transformers)
{
    make_folder();
    hl_error err = {0};
    hl_safetensors *f = NULL;
    ck_assert(hl_safetensors_read(LLAMA "/expected.safetensors", &f, &err) == HL_OK);
    hl_tensor *ids = hl_safetensors_load(f, "input_ids", false, &err);
    hl_tensor *loss = hl_safetensors_load(f, "loss", false, &err);
    hl_tensor *logits = hl_safetensors_load(f, "logits", false, &err);
    ck_assert(ids && loss && logits);
    char path[128], command[512], out[16384];
    snprintf(path, sizeof path, "%s/ids.txt", temp_dir);
    FILE *file = fopen(path, "w");
    ck_assert_ptr_nonnull(file);
    for (int b = 0; b < ids->shape[0]; b++)
        for (int t = 0; t < ids->shape[1]; t++)
            fprintf(file, "%d%s", (int)ids->data[b * ids->shape[1] + t],
                    t + 1 < ids->shape[1] ? " " : "\n");
    fclose(file);
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/heads eval --model %s/llama --token-ids %s --out %s/eval", temp_dir,
             path, temp_dir);
    ck_assert_msg(tu_run(command, out, sizeof out) == 0, "%s", out);
    const double got = number_after(out, "loss ");
    ck_assert_msg(fabs(got - (double)loss->data[0]) < 1e-5, "loss %.7f, transformers %.7f", got,
                  (double)loss->data[0]);
    snprintf(path, sizeof path, "%s/eval/eval.safetensors", temp_dir);
    hl_safetensors *written = NULL;
    ck_assert_msg(hl_safetensors_read(path, &written, &err) == HL_OK, "%s", err.message);
    hl_tensor *ours = hl_safetensors_load(written, "logits", false, &err);
    ck_assert(ours && ours->numel == logits->numel && ours->rank == 3);
    tu_assert_close("eval.safetensors logits", ours->data, logits->data, ours->numel, 1e-4);
    ck_assert_ptr_nonnull(hl_safetensors_find(written, "input_ids"));
    hl_tensor_free(ours);
    hl_safetensors_free(written);
    hl_tensor_free(ids);
    hl_tensor_free(loss);
    hl_tensor_free(logits);
    hl_safetensors_free(f);
    remove_folder();
}
END_TEST

/* The mean next-token loss of eval.safetensors' logits, read through the
 * soft cap c·tanh(z/c) when c > 0, in double. */
static double capped_loss(const hl_tensor *logits, const hl_tensor *ids, double c)
{
    const int B = logits->shape[0], T = logits->shape[1], V = logits->shape[2];
    double sum = 0;
    for (int b = 0; b < B; b++)
        for (int t = 0; t + 1 < T; t++) {
            const hl_real *z = logits->data + ((size_t)b * T + t) * V;
            double top = -INFINITY, total = 0;
            for (int v = 0; v < V; v++)
                top = fmax(top, c > 0 ? c * tanh(z[v] / c) : z[v]);
            for (int v = 0; v < V; v++)
                total += exp((c > 0 ? c * tanh(z[v] / c) : z[v]) - top);
            const double zt = z[(int)ids->data[(size_t)b * T + t + 1]];
            sum += top + log(total) - (c > 0 ? c * tanh(zt / c) : zt);
        }
    return sum / (B * (T - 1));
}

/* heads eval prints the loss the model trains on: through its soft cap
 * (before, the plain cross-entropy of the raw logits it writes). */
START_TEST(test_eval_softcap)
{
    make_folder();
    char command[1024], out[4096], path[128];
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/charlm --data %s/text.txt --softcap 1 --steps 4 --ctx 16 --d-model 16 "
             "--heads 2 --layers 1 --batch 2 --eval-every 4 --sample 0 --no-report --out %s/capped",
             temp_dir, temp_dir);
    tu_run_ok(command);
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/heads eval --model %s/capped/model.safetensors --text 'hello world 3' "
             "--out %s/eval", temp_dir, temp_dir);
    ck_assert_msg(tu_run(command, out, sizeof out) == 0, "%s", out);
    const double got = number_after(out, "loss ");
    hl_error err = {0};
    hl_safetensors *f = NULL;
    snprintf(path, sizeof path, "%s/eval/eval.safetensors", temp_dir);
    ck_assert_msg(hl_safetensors_read(path, &f, &err) == HL_OK, "%s", err.message);
    hl_tensor *logits = hl_safetensors_load(f, "logits", false, &err);
    hl_tensor *ids = hl_safetensors_load(f, "input_ids", false, &err);
    ck_assert(logits && ids);
    const double capped = capped_loss(logits, ids, 1), plain = capped_loss(logits, ids, 0);
    ck_assert_msg(fabs(got - capped) < 1e-4 && fabs(capped - plain) > 1e-2,
                  "printed %.6f, capped %.6f, plain %.6f", got, capped, plain);
    hl_tensor_free(logits);
    hl_tensor_free(ids);
    hl_safetensors_free(f);
    remove_folder();
}
END_TEST

/* A model trained with dropout evaluates without it: heads eval and
 * logit-lens give what the same weights with dropout 0 give (before, they ran
 * in training mode and dropped half the activations). */
START_TEST(test_eval_without_dropout)
{
    make_folder();
    char command[1024], out[2][4096], from[128], to[128];
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/charlm --data %s/text.txt --dropout 0.5 --steps 4 --ctx 16 "
             "--d-model 16 --heads 2 --layers 2 --batch 2 --eval-every 4 --sample 0 --no-report "
             "--out %s/drop", temp_dir, temp_dir);
    tu_run_ok(command);
    snprintf(from, sizeof from, "%s/drop/model.safetensors", temp_dir);
    snprintf(to, sizeof to, "%s/drop/none.safetensors", temp_dir);
    hl_error err = {0};
    hl_safetensors *f = NULL;
    ck_assert_msg(hl_safetensors_read(from, &f, &err) == HL_OK, "%s", err.message);
    char config[1024];
    snprintf(config, sizeof config, "%s", hl_safetensors_metadata(f, "config"));
    hl_safetensors_free(f);
    char *at = strstr(config, "dropout=0.5 ");
    ck_assert_msg(at, "%s", config);
    memmove(at + strlen("dropout=0"), at + strlen("dropout=0.5"), strlen(at + 11) + 1);
    const char *keys[] = {"format", "step", "pruned_heads", "task"};
    tu_set_metadata(from, to, keys, 4, "config", config);
    static const char *const commands[] = {
        "eval --text 'hello world 3'", "logit-lens --clean abcdefgh --corrupt abcdxfgh"};
    for (int c = 0; c < 2; c++) {
        for (int k = 0; k < 2; k++) {
            snprintf(command, sizeof command, HL_BUILD_DIR "/heads %s --model %s --out %s/o",
                     commands[c], k ? to : from, temp_dir);
            ck_assert_msg(tu_run(command, out[k], sizeof out[k]) == 0, "%s", out[k]);
        }
        /* all but a first line naming the model */
        const char *a = c ? strchr(out[0], '\n') : out[0], *b = c ? strchr(out[1], '\n') : out[1];
        ck_assert_msg(a && b && !strcmp(a, b), "%s: with dropout 0.5\n%s\nwith 0\n%s",
                      commands[c], out[0], out[1]);
    }
    remove_folder();
}
END_TEST

static void expect_exit(const char *command, int code, const char *fragment);

/* Text through the folder's tokenizer, generation, export, and a fine-tuning
 * run whose checkpoint carries the tokenizer and resumes. */
START_TEST(test_text_generate_export_finetune)
{
    make_folder();
    char command[1024], out[16384];
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/heads eval --model %s/llama --text \"hello world\" --out %s/e",
             temp_dir, temp_dir);
    ck_assert_msg(tu_run(command, out, sizeof out) == 0, "%s", out);
    ck_assert_ptr_nonnull(strstr(out, "ids[0]:"));
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/heads generate --model %s/llama --prompt \"hello\" --tokens 6 "
             "--temperature 0", temp_dir);
    ck_assert_msg(tu_run(command, out, sizeof out) == 0, "%s", out);
    ck_assert_ptr_nonnull(strstr(out, "tokens/s"));
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/heads export --model %s/llama --out %s/exported", temp_dir, temp_dir);
    ck_assert_msg(tu_run(command, out, sizeof out) == 0, "%s", out);
    ck_assert_ptr_nonnull(strstr(out, "LlamaForCausalLM"));
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/charlm --init-from %s/llama --data %s/text.txt --ctx 16 --batch 4 "
             "--steps 6 --eval-every 3 --val-windows 2 --sample 8 --no-report --lr 1e-3 "
             "--out %s/ft", temp_dir, temp_dir, temp_dir);
    ck_assert_msg(tu_run(command, out, sizeof out) == 0, "%s", out);
    ck_assert_ptr_nonnull(strstr(out, "fine-tuning"));
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/heads eval --model %s/ft/model.safetensors --text \"hello world\" "
             "--out %s/e2", temp_dir, temp_dir);
    ck_assert_msg(tu_run(command, out, sizeof out) == 0, "the fine-tuned model: %s", out);
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/charlm --resume %s/ft/checkpoint.safetensors --data %s/text.txt "
             "--steps 9 --eval-every 3 --val-windows 2 --sample 0 --no-report --out %s/ft",
             temp_dir, temp_dir, temp_dir);
    ck_assert_msg(tu_run(command, out, sizeof out) == 0, "resume: %s", out);
    ck_assert_ptr_nonnull(strstr(out, "resumed from"));
    /* A folder without a tokenizer fine-tunes on token files of its size
     * (refused before, with a message that asked for them), and resumes. */
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/tokenize /usr/share/common-licenses/GPL-3 --learn 512 --out "
             "%s/words && " HL_BUILD_DIR
             "/charlm --init-from " LLAMA " --tokens %s/words --ctx 16 --batch 2 --steps 2 "
             "--eval-every 2 --val-windows 2 --sample 0 --no-report --out %s/ft_tokens && "
             HL_BUILD_DIR "/charlm --resume %s/ft_tokens/checkpoint.safetensors --tokens %s/words "
             "--steps 4 --eval-every 2 --val-windows 2 --sample 0 --no-report --out %s/ft_tokens",
             temp_dir, temp_dir, temp_dir, temp_dir, temp_dir, temp_dir);
    ck_assert_msg(tu_run(command, out, sizeof out) == 0, "--tokens: %s", out);
    ck_assert_ptr_nonnull(strstr(out, "resumed from"));
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/tokenize %s/text.txt --out %s/bytes && " HL_BUILD_DIR "/charlm "
             "--init-from " LLAMA " --tokens %s/bytes --steps 2 --sample 0 --no-report "
             "--out %s/ft_bytes", temp_dir, temp_dir, temp_dir, temp_dir);
    expect_exit(command, 2, "has a vocabulary of 256 tokens; the model of");
    remove_folder();
}
END_TEST


static void expect_exit(const char *command, int code, const char *fragment)
{
    char out[8192];
    const int rc = tu_run(command, out, sizeof out);
    ck_assert_msg(rc == code && strstr(out, fragment), "%s: exit %d, wanted %d and \"%s\": %s",
                  command, rc, code, fragment, out);
}

/* The token greedy decoding gives after "hello world": the argmax of heads
 * eval's last logits over the tokenizer's tokens (the model has more). */
static int greedy_after_prompt(void)
{
    char command[512], out[16384], path[128];
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/heads eval --model %s/llama --text \"hello world\" --out %s/greedy", temp_dir,
             temp_dir);
    ck_assert_msg(tu_run(command, out, sizeof out) == 0, "%s", out);
    hl_error err = {0};
    hl_safetensors *f = NULL;
    snprintf(path, sizeof path, "%s/greedy/eval.safetensors", temp_dir);
    ck_assert_msg(hl_safetensors_read(path, &f, &err) == HL_OK, "%s", err.message);
    hl_tensor *logits = hl_safetensors_load(f, "logits", false, &err);
    ck_assert(logits && logits->rank == 3);
    hl_vocab *vocab;
    snprintf(path, sizeof path, "%s/llama", temp_dir);
    ck_assert_msg(hl_gpt_load_vocab(path, &vocab, &err) == HL_OK, "%s", err.message);
    const int T = logits->shape[1], V = hl_vocab_size(vocab);
    hl_vocab_free(vocab);
    ck_assert(V <= logits->shape[2]);
    const hl_real *last = logits->data + (size_t)(T - 1) * logits->shape[2];
    int best = 0;
    for (int v = 1; v < V; v++)
        best = last[v] > last[best] ? v : best;
    hl_tensor_free(logits);
    hl_safetensors_free(f);
    return best;
}

/* dir/config.json names bos 1 (config.json's) and eos [first, second]. */
static void expect_exported_ids(const char *dir, int first, int second)
{
    char path[160], want[64];
    snprintf(path, sizeof path, "%s/config.json", dir);
    size_t n;
    char *text = (char *)hl_fs_read_file(path, &n);
    ck_assert_ptr_nonnull(text);
    snprintf(want, sizeof want, "\"eos_token_id\":\t[%d, %d],", first, second);
    ck_assert_msg(strstr(text, "\"bos_token_id\":\t1,") && strstr(text, want), "%s", text);
    free(text);
}

/* The folder's end-of-sequence token ends generate() as transformers' does,
 * and travels through fine-tuning, resuming and export into config.json. */
START_TEST(test_eos_generate_finetune_export)
{
    make_folder();
    const int eos = greedy_after_prompt();
    char command[2048], out[16384];
    const int other = eos == 3 ? 4 : 3; /* a second id in the list */
    snprintf(command, sizeof command, "printf '{\"eos_token_id\": [%d, %d]}' > "
             "%s/llama/generation_config.json", eos, other, temp_dir);
    tu_run_ok(command);
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/heads generate --model %s/llama --prompt \"hello world\" --tokens 6 "
             "--temperature 0", temp_dir);
    ck_assert_msg(tu_run(command, out, sizeof out) == 0, "%s", out);
    ck_assert_msg(strstr(out, "generated 1 tokens") &&
                  strstr(out, "stopped at the end-of-sequence token"), "%s", out);
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/heads generate --model %s/llama --prompt \"hello world\" --tokens 6 "
             "--temperature 0 --ignore-eos", temp_dir);
    ck_assert_msg(tu_run(command, out, sizeof out) == 0, "%s", out);
    ck_assert_msg(strstr(out, "generated 6 tokens") && !strstr(out, "stopped"), "%s", out);
    /* A post-processor's template puts <|begin_of_text|> (0) first, as
     * transformers' tokenizer(text) does, in eval and in generate. */
    snprintf(command, sizeof command,
             "sed -i 's/\"post_processor\": null/\"post_processor\": {\"type\": "
             "\"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": \"B\"}}, "
             "{\"Sequence\": {\"id\": \"A\"}}], \"special_tokens\": {\"B\": {\"ids\": "
             "[0]}}}/' %s/llama/tokenizer.json && " HL_BUILD_DIR "/heads eval --model %s/llama "
             "--text \"hello world\" --out %s/e3 && " HL_BUILD_DIR "/heads generate --model "
             "%s/llama --prompt \"hello world\" --tokens 2 --ignore-eos", temp_dir, temp_dir,
             temp_dir, temp_dir);
    ck_assert_msg(tu_run(command, out, sizeof out) == 0, "%s", out);
    ck_assert_msg(strstr(out, "ids[0]: 0 8 9\n") && strstr(out, "prompt: 3 tokens"), "%s", out);
    /* generation_config.json's ids over config.json's (eos 2, bos 1). */
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/heads export --model %s/llama --out %s/x1 && " HL_BUILD_DIR
             "/charlm --init-from %s/llama --data %s/text.txt --ctx 16 --batch 2 --steps 2 "
             "--eval-every 2 --val-windows 2 --sample 0 --no-report --out %s/ft && "
             HL_BUILD_DIR "/charlm --resume %s/ft/checkpoint.safetensors --data %s/text.txt "
             "--steps 4 --eval-every 2 --val-windows 2 --sample 0 --no-report --out %s/ft && "
             HL_BUILD_DIR "/heads export --model %s/ft/model.safetensors --out %s/x2",
             temp_dir, temp_dir, temp_dir, temp_dir, temp_dir, temp_dir, temp_dir, temp_dir,
             temp_dir, temp_dir);
    ck_assert_msg(tu_run(command, out, sizeof out) == 0, "%s", out);
    char dir[128];
    snprintf(dir, sizeof dir, "%s/x1", temp_dir);
    expect_exported_ids(dir, eos, other);
    snprintf(dir, sizeof dir, "%s/x2", temp_dir);
    expect_exported_ids(dir, eos, other);
    /* A model headlab trained names none: null, not GPT-2's class default. */
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/charlm --data %s/text.txt --ctx 16 --batch 2 --steps 1 --layers 1 "
             "--no-head-bias --eval-every 1 --val-windows 1 --sample 0 --no-report --out %s/own "
             "&& " HL_BUILD_DIR "/heads export --model %s/own/model.safetensors --out %s/x3 && "
             "grep -c '\"eos_token_id\":.null' %s/x3/config.json", temp_dir, temp_dir,
             temp_dir, temp_dir, temp_dir);
    ck_assert_msg(tu_run(command, out, sizeof out) == 0, "%s", out);
    remove_folder();
}
END_TEST

START_TEST(test_bad_input)
{
    make_folder();
    char command[1024];
    /* The fixture folders have no tokenizer: text is refused, ids are not. */
    expect_exit(HL_BUILD_DIR "/heads eval --model " LLAMA " --text hello", 2,
                "give --token-ids FILE");
    expect_exit(HL_BUILD_DIR "/heads eval --model /nonexistent/folder --text hello", 2,
                "/nonexistent/folder");
    expect_exit(HL_BUILD_DIR "/heads eval --model " LLAMA, 2, "--text STR or --token-ids FILE");
    expect_exit(HL_BUILD_DIR "/heads generate --model " LLAMA " --prompt hi", 2,
                "no vocabulary");
    /* report's probe takes --sequences on a folder without a tokenizer too
     * (it kept 100, as on a toy model, where the flag sizes the test set) */
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/heads report --model " LLAMA " --text \"1 2 3 1 2 3\" --sequences 2 "
             "--out %s/rep > /dev/null && grep -c '2 sequences of' %s/rep/report.html",
             temp_dir, temp_dir);
    tu_run_ok(command);
    /* one answer, with or without --data (each asked for the other before) */
    expect_exit(HL_BUILD_DIR "/heads ablate --model " LLAMA, 2,
                "has no tokenizer headlab reads");
    expect_exit(HL_BUILD_DIR "/heads importance --model " LLAMA " --data tests/main.c", 2,
                "has no tokenizer headlab reads");
    snprintf(command, sizeof command, "printf '1 2 3\\n4 5\\n' > %s/bad.txt && "
             HL_BUILD_DIR "/heads eval --model " LLAMA " --token-ids %s/bad.txt", temp_dir,
             temp_dir);
    expect_exit(command, 2, "line 2 has 2 ids");
    snprintf(command, sizeof command, "printf '1 2 99999\\n' > %s/bad.txt && "
             HL_BUILD_DIR "/heads eval --model " LLAMA " --token-ids %s/bad.txt", temp_dir,
             temp_dir);
    expect_exit(command, 2, "is not a token id of 0..511");
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/charlm --init-from %s/llama --data %s/text.txt --mlp swiglu",
             temp_dir, temp_dir);
    expect_exit(command, 2, "the model comes from the pretrained model");
    /* Why the tokenizer was not read, as heads says it. */
    snprintf(command, sizeof command,
             "head -c 3000 %s/llama/tokenizer.json > %s/cut && mv %s/cut %s/llama/tokenizer.json"
             " && " HL_BUILD_DIR "/charlm --init-from %s/llama --data %s/text.txt --steps 1",
             temp_dir, temp_dir, temp_dir, temp_dir, temp_dir, temp_dir);
    expect_exit(command, 2, "tokenizer.json: not valid JSON");
    snprintf(command, sizeof command, "echo '{' > %s/llama/config.json && " HL_BUILD_DIR
             "/heads scores --model %s/llama", temp_dir, temp_dir);
    expect_exit(command, 2, "config.json: not a JSON object");
    remove_folder();
}
END_TEST

/* Writes text to temp_dir/name and returns the path in path. */
static const char *write_temp(const char *name, const char *text, char path[128])
{
    snprintf(path, 128, "%s/%s", temp_dir, name);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
    return path;
}

/* Exit 2 with fragment in the message, before any work (eval prints no loss). */
static void expect_early_exit(const char *command, const char *fragment)
{
    char out[8192];
    const int rc = tu_run(command, out, sizeof out);
    ck_assert_msg(rc == 2 && strstr(out, fragment) && !strstr(out, "loss"),
                  "%s: exit %d, wanted 2 and \"%s\" before any work: %s", command, rc, fragment,
                  out);
}

/* Bad --token-ids files, inputs and --out places: exit 2 with a message that
 * names the problem, before any work (no "loss" printed). */
START_TEST(test_bad_files)
{
    make_folder();
    char command[1024], ids[128], good[128], file[128];
    write_temp("ok.txt", "1 2 3 4\n5 6 7 8\n", good);
    write_temp("file", "K\n", file);
    static const struct {
        const char *text, *fragment;
    } id_files[] = {
        /* The message shows the bad token alone, not the bytes after it. */
        {"1 2 512\n", ": \"512\" is not a token id of 0..511"},
        {"1 2 x", ": \"x\" is not a token id of 0..511"},
        {"1 2 99999999999999999999999\n", "\"99999999999999999999999\" is not a token id"},
        {"1 -2 3\n", "\"-2\" is not"},
        {"5\n7\n", "one id a line; eval needs at least 2"},
    };
    for (size_t i = 0; i < sizeof id_files / sizeof id_files[0]; i++) {
        write_temp("ids.txt", id_files[i].text, ids);
        snprintf(command, sizeof command,
                 HL_BUILD_DIR "/heads eval --model " LLAMA " --token-ids %s --out %s/e", ids,
                 temp_dir);
        expect_exit(command, 2, id_files[i].fragment);
    }
    /* The last line without its newline is read to its end, not past it. */
    write_temp("ids.txt", "1 2 3\n4 5 6", ids);
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/heads eval --model " LLAMA " --token-ids %s --out %s/e", ids,
             temp_dir);
    expect_exit(command, 0, "ids[1]: 4 5 6\n");
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/heads eval --model " LLAMA " --token-ids %s --out %s/e", temp_dir,
             temp_dir);
    expect_exit(command, 2, "Is a directory");
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/heads eval --model %s/llama --text a --out %s/e", temp_dir, temp_dir);
    expect_exit(command, 2, "--text \"a\" is one token");
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/heads eval --model " LLAMA " --text hello --token-ids %s", good);
    expect_exit(command, 2, "give one of --text and --token-ids, not both");
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/heads maps --model " LLAMA " --text hello --data %s", good);
    expect_exit(command, 2, "give one of --text and --data, not both");
    /* An --out that is a file, or below one, for the commands that write. */
    static const char *const writers[] = {"eval --token-ids %s", "scores", "maps --text hello",
                                          "report", "export", "ablate", "circuits",
                                          "patch --clean hello --corrupt world"};
    for (size_t i = 0; i < sizeof writers / sizeof writers[0]; i++) {
        char args[256];
        snprintf(args, sizeof args, writers[i], good);
        snprintf(command, sizeof command,
                 HL_BUILD_DIR "/heads %s --model %s/llama --out %s", args, temp_dir, file);
        expect_early_exit(command, "is not a directory");
        snprintf(command, sizeof command,
                 HL_BUILD_DIR "/heads %s --model %s/llama --out %s/below", args, temp_dir, file);
        expect_early_exit(command, "cannot create");
    }
    /* An empty --out, or one through a link to nothing. */
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/heads eval --model %s/llama --token-ids %s --out ''", temp_dir, good);
    expect_early_exit(command, "--out is empty");
    snprintf(command, sizeof command,
             "ln -s %s/missing %s/dangling && " HL_BUILD_DIR "/heads eval --model %s/llama "
             "--token-ids %s --out %s/dangling/sub", temp_dir, temp_dir, temp_dir, good, temp_dir);
    expect_early_exit(command, "is a symbolic link to a missing path");
    /* A write that fails once the work is done is bad input too. */
    snprintf(command, sizeof command,
             "ulimit -f 4; " HL_BUILD_DIR "/heads eval --model " LLAMA " --token-ids %s "
             "--out %s/small", good, temp_dir);
    expect_exit(command, 2, "cannot write");
    remove_folder();
}
END_TEST

Suite *heads_pretrained_suite(void)
{
    Suite *s = suite_create("heads_pretrained");
    TCase *tc = tcase_create("programs");
    tcase_set_timeout(tc, 0);
    tcase_add_test(tc, test_eval_matches_transformers);
    tcase_add_test(tc, test_eval_softcap);
    tcase_add_test(tc, test_eval_without_dropout);
    tcase_add_test(tc, test_text_generate_export_finetune);
    tcase_add_test(tc, test_eos_generate_finetune_export);
    tcase_add_test(tc, test_bad_input);
    tcase_add_test(tc, test_bad_files);
    suite_add_tcase(s, tc);
    return s;
}
