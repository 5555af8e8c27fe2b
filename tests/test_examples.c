/* Tests of the example programs as a user runs them: exit codes and messages
 * on bad input, the mha_run round trip against the PyTorch fixtures, and a
 * short toy_heads run with its files, the same model from every kernel set
 * with FMA. HL_BUILD_DIR (set by the Makefile)
 * names the folder holding the programs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/safetensors.h"
#include "ops/kernels.h"
#include "tests/testutil.h"

#ifndef HL_BUILD_DIR
#define HL_BUILD_DIR "build"
#endif

static char temp_dir[TU_DIR_MAX];

static void expect_failure(const char *command, int code, const char *fragment)
{
    char out[4096];
    int rc = tu_run(command, out, sizeof out);
    ck_assert_msg(rc == code, "%s: exit %d, wanted %d; said: %s", command, rc, code, out);
    ck_assert_msg(strstr(out, fragment), "%s: message \"%s\" lacks \"%s\"", command, out, fragment);
}

/* mha_run on the PyTorch fixtures: with the weights (the composed ops), and
 * with --no-weights, the path a training step takes (the fused op) and the
 * composed ops without a trace: every tensor the fixture holds (but the
 * weights) agrees. */
START_TEST(test_mha_run_round_trip)
{
    tu_make_dir(temp_dir, "examples");
    static const char *const cases[][2] = {{"cross", ""}, {"self_causal", "--causal"},
                                           {"self_key_padding", ""}};
    static const char *const modes[] = {"", "--no-weights", "--no-weights --composed"};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int mode = 0; mode < 3; mode++) {
            const char *name = cases[c][0];
            char command[1024], out[4096], path[256];
            snprintf(path, sizeof path, "%s/%s-%d.safetensors", temp_dir, name, mode);
            snprintf(command, sizeof command,
                     HL_BUILD_DIR "/mha_run --weights tests/fixtures/mha/%s/weights.safetensors "
                     "--inputs tests/fixtures/mha/%s/inputs.safetensors --out %s --heads %s %s %s",
                     name, name, path, !strcmp(name, "self_causal") ? "4" : "2", cases[c][1],
                     modes[mode]);
            ck_assert_msg(tu_run(command, out, sizeof out) == 0, "%s: %s", command, out);
            hl_error err = {0};
            hl_safetensors *got = NULL, *want = NULL;
            char expected[256];
            snprintf(expected, sizeof expected, "tests/fixtures/mha/%s/expected.safetensors",
                     name);
            ck_assert_msg(hl_safetensors_read(path, &got, &err) == HL_OK, "%s", err.message);
            ck_assert_msg(hl_safetensors_read(expected, &want, &err) == HL_OK, "%s",
                          err.message);
            /* Every tensor the fixture expects, mha_run wrote (without the
             * weights under --no-weights), and they agree. */
            const bool weights = mode == 0;
            ck_assert_uint_eq(hl_safetensors_count(got),
                              hl_safetensors_count(want) - (weights ? 0 : 1));
            ck_assert(!hl_safetensors_find(got, "attn_weights") == !weights);
            for (size_t i = 0; i < hl_safetensors_count(want); i++) {
                const char *tensor = hl_safetensors_entry(want, i)->name;
                if (!weights && !strcmp(tensor, "attn_weights"))
                    continue;
                hl_tensor *a = hl_safetensors_load(got, tensor, false, &err);
                hl_tensor *b = hl_safetensors_load(want, tensor, false, &err);
                ck_assert_msg(a && b, "%s %s: %s", name, modes[mode], err.message);
                tu_assert_close(tensor, a->data, b->data, a->numel, 1e-5);
                hl_tensor_free(a);
                hl_tensor_free(b);
            }
            hl_safetensors_free(got);
            hl_safetensors_free(want);
        }
    tu_remove_dir(temp_dir);
}
END_TEST

/* Output that cannot be written to stdout (a closed descriptor, a full
 * device) is an exit status of 2 with a message, not success: gradcheck's
 * table, a program's --help. Written to /dev/null, the same run exits 0. */
START_TEST(test_lost_stdout_is_a_failure)
{
    /* (in braces: tu_run's 2>&1 would copy the closed descriptor to stderr) */
    expect_failure("{ " HL_BUILD_DIR "/gradcheck --op softmax >&-; }", 2,
                   "cannot write standard output");
    expect_failure("{ " HL_BUILD_DIR "/toy_heads --help >&-; }", 2,
                   "cannot write standard output");
    if (access("/dev/full", W_OK) == 0)
        expect_failure("{ " HL_BUILD_DIR "/demo_engine --steps 2 > /dev/full; }", 2,
                       "No space left on device");
    expect_failure(HL_BUILD_DIR "/gradcheck --op softmax > /dev/null && echo fine", 0, "fine");
}
END_TEST

START_TEST(test_mha_run_bad_input)
{
    tu_make_dir(temp_dir, "examples");
    char command[1024], path[256];
    expect_failure(HL_BUILD_DIR "/mha_run --heads 2", 2, "required");
    expect_failure(HL_BUILD_DIR "/mha_run --bogus", 2, "unknown");
    expect_failure(HL_BUILD_DIR "/mha_run --weights w --inputs i --out o --heads 2 --composed",
                   2, "--composed needs --no-weights");
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/mha_run --weights tests/fixtures/mha/cross/weights.safetensors "
             "--inputs /nonexistent.safetensors --out %s/o.safetensors --heads 2", temp_dir);
    expect_failure(command, 2, "/nonexistent.safetensors");
    /* Inputs that do not fit the weights: the shapes are named. */
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/mha_run --weights tests/fixtures/mha/cross/weights.safetensors "
             "--inputs tests/fixtures/mha/self/inputs.safetensors --out %s/o.safetensors "
             "--heads 2", temp_dir);
    expect_failure(command, 2, "kdim 6");
    /* ... and so are the files (the op's message named neither) */
    expect_failure(command, 2, "tests/fixtures/mha/self/inputs.safetensors with "
                               "tests/fixtures/mha/cross/weights.safetensors: mha: ");
    /* Heads that do not divide E. */
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/mha_run --weights tests/fixtures/mha/self/weights.safetensors "
             "--inputs tests/fixtures/mha/self/inputs.safetensors --out %s/o.safetensors "
             "--heads 3", temp_dir);
    expect_failure(command, 2, "does not split into 3 heads");
    /* A truncated weights file. */
    snprintf(path, sizeof path, "%s/cut.safetensors", temp_dir);
    snprintf(command, sizeof command,
             "head -c 100 tests/fixtures/mha/self/weights.safetensors > %s && " HL_BUILD_DIR
             "/mha_run --weights %s --inputs tests/fixtures/mha/self/inputs.safetensors "
             "--out %s/o.safetensors --heads 2",
             path, path, temp_dir);
    expect_failure(command, 2, "cut.safetensors");
    /* A float padding mask (PyTorch would add it to the scores), a NaN query,
     * +inf in an additive mask (-inf blocks; +inf gives NaN). */
    static const char *const bad[][2] = {
        {"key_padding_mask", "tensor \"key_padding_mask\" is F32; a padding mask is U8 or BOOL"},
        {"query", "tensor \"query\" holds NaN at element 3"},
        {"attn_mask", "tensor \"attn_mask\" holds infinity at element 0 (an additive mask"},
    };
    for (int i = 0; i < 3; i++) {
        hl_error err = {0};
        hl_safetensors *f = NULL;
        ck_assert(hl_safetensors_read("tests/fixtures/mha/self/inputs.safetensors", &f, &err) ==
                  HL_OK);
        hl_tensor *q = hl_safetensors_load(f, "query", false, &err);
        hl_tensor *dy = hl_safetensors_load(f, "grad_output", false, &err);
        hl_tensor *pad = hl_tensor_new("pad", 2, (int[]){2, 5}, false);
        ck_assert(q && dy && pad);
        hl_safetensors_free(f);
        if (i == 1)
            q->data[3] = NAN;
        hl_safetensors_writer *w = hl_safetensors_writer_new();
        ck_assert(hl_safetensors_writer_add(w, "query", q, HL_DTYPE_F32, &err) == HL_OK &&
                  hl_safetensors_writer_add(w, "grad_output", dy, HL_DTYPE_F32, &err) == HL_OK);
        if (i == 0)
            ck_assert(hl_safetensors_writer_add(w, "key_padding_mask", pad, HL_DTYPE_F32, &err) ==
                      HL_OK);
        hl_tensor *add = hl_tensor_new("attn_mask", 2, (int[]){5, 5}, false);
        add->data[0] = INFINITY;
        if (i == 2)
            ck_assert(hl_safetensors_writer_add(w, "attn_mask", add, HL_DTYPE_F32, &err) == HL_OK);
        hl_tensor_free(add);
        snprintf(path, sizeof path, "%s/in.safetensors", temp_dir);
        ck_assert(hl_safetensors_writer_save(w, path, &err) == HL_OK);
        hl_safetensors_writer_free(w);
        hl_tensor_free(q);
        hl_tensor_free(dy);
        hl_tensor_free(pad);
        snprintf(command, sizeof command,
                 HL_BUILD_DIR "/mha_run --weights tests/fixtures/mha/self/weights.safetensors "
                 "--inputs %s --out %s/o.safetensors --heads 2", path, temp_dir);
        expect_failure(command, 2, bad[i][1]);
    }
    snprintf(path, sizeof path, "%s/o.safetensors", temp_dir);
    ck_assert_int_ne(access(path, F_OK), 0); /* nothing written on failure */
    tu_remove_dir(temp_dir);
}
END_TEST

START_TEST(test_toy_heads_short_run)
{
    tu_make_dir(temp_dir, "examples");
    char command[1024], out[4096], path[256];
    expect_failure(HL_BUILD_DIR "/toy_heads --steps -3", 2, "--steps");
    expect_failure(HL_BUILD_DIR "/toy_heads --frobnicate", 2, "unknown");
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/toy_heads --steps 20 --eval-every 10 --heldout 100 --out %s/toy",
             temp_dir);
    ck_assert_msg(tu_run(command, out, sizeof out) == 0, "%s", out);
    const char *files[] = {"scores.csv", "train.csv", "grid.png", "grid_mean.png",
                           "grid_step0.png", "attn_L0H0.png", "attn_L1H3.png",
                           "model.safetensors", "checkpoint.safetensors",
                           "report/report.html", "report/scores.csv"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/toy/%s", temp_dir, files[i]);
        ck_assert_msg(access(path, F_OK) == 0, "toy_heads did not write %s", files[i]);
    }
    snprintf(path, sizeof path, "%s/toy/scores.csv", temp_dir);
    FILE *f = fopen(path, "r");
    char header[256];
    ck_assert_ptr_nonnull(fgets(header, sizeof header, f));
    ck_assert_str_eq(header, "layer,head,previous_token,two_back,induction,first_token,entropy,"
                             "ablation_delta\n");
    int rows = 0;
    while (fgets(header, sizeof header, f))
        rows++;
    fclose(f);
    ck_assert_int_eq(rows, 8);
    /* Resuming from its checkpoint continues to the new total. */
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/toy_heads --steps 30 --eval-every 10 --heldout 100 --no-report "
             "--out %s/toy --seed 3 "
             "--resume %s/toy/checkpoint.safetensors",
             temp_dir, temp_dir);
    ck_assert_msg(tu_run(command, out, sizeof out) == 0, "%s", out);
    ck_assert_msg(strstr(out, "at step 20 (--seed unused: the weights and the training data go "
                              "on from the checkpoint)"), "%s", out);
    /* ... train.csv's seconds going on from the checkpoint's row (they
     * started again from 0). */
    snprintf(path, sizeof path, "%s/toy/train.csv", temp_dir);
    hl_csv_table log;
    hl_error err = {0};
    ck_assert_msg(hl_csv_read(path, &log, &err) == HL_OK, "%s", err.message);
    const int seconds = hl_csv_column(&log, "seconds");
    ck_assert(log.n_rows == 4 && seconds >= 0);
    for (size_t r = 1; r < log.n_rows; r++)
        ck_assert_msg(hl_csv_value(&log, r, seconds) >= hl_csv_value(&log, r - 1, seconds),
                      "row %zu: %g seconds after %g", r, hl_csv_value(&log, r, seconds),
                      hl_csv_value(&log, r - 1, seconds));
    hl_csv_table_free(&log);
    /* A checkpoint at or past --steps has nothing to train: exit 2, nothing written. */
    snprintf(path, sizeof path, "%s/toy/model.safetensors", temp_dir);
    struct stat before, after;
    ck_assert_int_eq(stat(path, &before), 0);
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/toy_heads --steps 10 --no-report --out %s/toy "
             "--resume %s/toy/checkpoint.safetensors",
             temp_dir, temp_dir);
    ck_assert_int_eq(tu_run(command, out, sizeof out), 2);
    ck_assert_msg(strstr(out, "checkpoint is at step 30; nothing to train"), "%s", out);
    ck_assert_int_eq(stat(path, &after), 0);
    ck_assert(before.st_mtim.tv_sec == after.st_mtim.tv_sec &&
              before.st_mtim.tv_nsec == after.st_mtim.tv_nsec);
    /* A model file given as the checkpoint says what it lacks. */
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/toy_heads --steps 40 --no-report --out %s/toy --resume %s",
             temp_dir, path);
    ck_assert_int_eq(tu_run(command, out, sizeof out), 2);
    ck_assert_msg(strstr(out, "model.safetensors: no optimizer state"), "%s", out);
    /* Resuming into a new directory writes a train.csv with its header. */
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/toy_heads --steps 40 --eval-every 10 --heldout 100 --no-report "
             "--out %s/next "
             "--resume %s/toy/checkpoint.safetensors",
             temp_dir, temp_dir);
    ck_assert_msg(tu_run(command, out, sizeof out) == 0, "%s", out);
    snprintf(path, sizeof path, "%s/next/train.csv", temp_dir);
    f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    ck_assert_ptr_nonnull(fgets(header, sizeof header, f));
    fclose(f);
    ck_assert_msg(!strncmp(header, "step,train_loss,", 16), "%s", header);
    tu_remove_dir(temp_dir);
}
END_TEST

/* temp_dir/text.txt, a text with structure to learn: a repeated verse with a
 * counter; its path into path. */
static void write_verse_text(char *path, size_t size)
{
    snprintf(path, size, "%s/text.txt", temp_dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    for (int i = 0; i < 400; i++)
        fprintf(f, "the cat sat on mat %d.\n", i % 10);
    fclose(f);
}

START_TEST(test_charlm_learns_and_resumes)
{
    tu_make_dir(temp_dir, "examples");
    char path[256], command[1024], out[4096];
    write_verse_text(path, sizeof path);
    FILE *f;
    const char *model = "--ctx 16 --d-model 32 --heads 2 --layers 1 --batch 8 --eval-every 50";
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/charlm --data %s %s --steps 150 --out %s/lm --sample 40", path, model,
             temp_dir);
    ck_assert_msg(tu_run(command, out, sizeof out) == 0, "%s", out);
    snprintf(path, sizeof path, "%s/lm/train.csv", temp_dir);
    f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    char line[256];
    double first = -1, last = -1, v;
    ck_assert_ptr_nonnull(fgets(line, sizeof line, f)); /* header */
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "%*[^,],%*[^,],%lf", &v) == 1) {
            if (first < 0)
                first = v;
            last = v;
        }
    fclose(f);
    /* Validation loss starts near ln 256 = 5.5 and must fall well below it. */
    ck_assert_msg(first > 4.5 && last < 3.0, "validation loss %g -> %g", first, last);
    /* The head files: detectors per evaluation (4 evaluations x 2 heads), the
     * plot, the model and its report. */
    const char *files[] = {"heads.png", "position_loss.csv", "model.safetensors",
                           "report/report.html", "report/composition.csv"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/lm/%s", temp_dir, files[i]);
        ck_assert_msg(access(path, F_OK) == 0, "charlm did not write %s", files[i]);
    }
    snprintf(path, sizeof path, "%s/lm/heads.csv", temp_dir);
    f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
    ck_assert_str_eq(line, "step,layer,head,previous_token,duplicate_token,induction,copying,"
                           "first_token,local,self,entropy,two_back,previous_token_tl,duplicate_token_tl,"
                           "induction_tl,induction_text\n");
    int rows = 0;
    while (fgets(line, sizeof line, f))
        rows++;
    fclose(f);
    ck_assert_int_eq(rows, 4 * 2);
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/charlm --data %s/text.txt %s --steps 200 --out %s/lm --sample 0 "
             "--no-report --resume %s/lm/checkpoint.safetensors",
             temp_dir, model, temp_dir, temp_dir);
    ck_assert_msg(tu_run(command, out, sizeof out) == 0, "%s", out);
    ck_assert_ptr_nonnull(strstr(out, "resumed from"));
    ck_assert_ptr_nonnull(strstr(out, "step 200:"));
    /* train.csv's seconds go on from the checkpoint's row (they restarted at
     * 0 before) */
    snprintf(path, sizeof path, "%s/lm/train.csv", temp_dir);
    f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
    double seconds = 0;
    for (rows = 0; fgets(line, sizeof line, f); rows++) {
        const double now = strtod(strrchr(line, ',') + 1, NULL);
        ck_assert_msg(now >= seconds, "seconds %g after %g: %s", now, seconds, line);
        seconds = now;
    }
    fclose(f);
    ck_assert_int_eq(rows, 5);
    /* An attention-only model without LayerNorm, as its file says. */
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/charlm --data %s/text.txt %s --steps 5 --out %s/bare --sample 0 "
             "--no-report --no-mlp --no-layernorm", temp_dir, model, temp_dir);
    ck_assert_msg(tu_run(command, out, sizeof out) == 0, "%s", out);
    snprintf(path, sizeof path, "%s/bare/model.safetensors", temp_dir);
    hl_error err = {0};
    hl_gpt *bare = hl_gpt_load(path, &err);
    ck_assert_msg(bare, "%s", err.message);
    ck_assert(!bare->cfg.mlp && !bare->cfg.norm && !bare->blocks[0].fc_w &&
              !bare->lnf_w);
    hl_gpt_free(bare);
    tu_remove_dir(temp_dir);
}
END_TEST

/* From DIR/SUB/ablation.csv: checks the header (unless NULL), then in the row
 * starting with `row` reads fields field_a and field_b (1-based; field_b 0:
 * none). */
static void read_ablation(const char *dir, const char *sub, const char *header, const char *row,
                          int field_a, double *a, int field_b, double *b)
{
    char path[256], line[1024];
    snprintf(path, sizeof path, "%s/%s/ablation.csv", dir, sub);
    FILE *f = fopen(path, "r");
    ck_assert_msg(f, "no %s", path);
    ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
    if (header)
        ck_assert_msg(!strncmp(line, header, strlen(header)) && line[strlen(header)] == '\n',
                      "%s: %s", path, line);
    bool found = false;
    while (!found && fgets(line, sizeof line, f))
        found = !strncmp(line, row, strlen(row));
    fclose(f);
    ck_assert_msg(found, "%s has no row %s", path, row);
    int at = 1, read = 0;
    for (char *field = line; field; field = strchr(field, ','), field = field ? field + 1 : NULL) {
        if (at == field_a)
            *a = strtod(field, NULL), read++;
        if (at == field_b)
            *b = strtod(field, NULL), read++;
        at++;
    }
    ck_assert_msg(read == (field_b ? 2 : 1), "%s: row %s is short", path, row);
}

/* charlm on learnt words: the model file keeps the vocabulary, a resumed run
 * reads it from the checkpoint, the sample and the maps speak words. */
START_TEST(test_charlm_words)
{
    tu_make_dir(temp_dir, "examples");
    char path[256], command[1024], out[8192];
    snprintf(path, sizeof path, "%s/text.txt", temp_dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    for (int i = 0; i < 300; i++)
        fprintf(f, "the cat sat on the mat and the dog sat on the log %d\n", i % 7);
    fclose(f);
    const char *model = "--ctx 16 --d-model 32 --heads 2 --layers 2 --batch 8 --eval-every 20";
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/charlm --data %s %s --vocab 300 --steps 40 --out %s/lm "
             "--sample 20 --no-report", path, model, temp_dir);
    ck_assert_msg(tu_run(command, out, sizeof out) == 0, "%s", out);
    /* 9 words of 2+ bytes ("the", " cat", ..., " log"): the vocabulary holds them all,
     * and says it holds fewer than asked. */
    ck_assert_msg(strstr(out, "265 tokens (bytes and learnt words)"), "%s", out);
    ck_assert_msg(strstr(out, "note: --vocab 300: the text gives 265 tokens"), "%s", out);
    snprintf(path, sizeof path, "%s/lm/model.safetensors", temp_dir);
    hl_error err = {0};
    hl_gpt_meta meta;
    hl_gpt *m = hl_gpt_load_meta(path, &meta, &err);
    ck_assert_msg(m, "%s", err.message);
    ck_assert_int_eq(m->cfg.vocab_in, 265);
    ck_assert_int_eq(hl_vocab_size(meta.vocab), 265);
    hl_gpt_free(m);
    hl_gpt_meta_clear(&meta);
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/charlm --data %s/text.txt %s --steps 60 --out %s/lm --sample 0 "
             "--no-report --resume %s/lm/checkpoint.safetensors", temp_dir, model, temp_dir,
             temp_dir);
    ck_assert_msg(tu_run(command, out, sizeof out) == 0, "%s", out);
    ck_assert_ptr_nonnull(strstr(out, "step 60:"));
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/heads maps --model %s/lm/model.safetensors --text 'the cat sat' "
             "--out %s/maps", temp_dir, temp_dir);
    ck_assert_msg(tu_run(command, out, sizeof out) == 0, "%s", out);
    ck_assert_msg(strstr(out, "3 tokens"), "%s", out);
    snprintf(path, sizeof path, "%s/maps/maps.csv", temp_dir);
    f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    char line[256];
    bool labelled = false;
    while (fgets(line, sizeof line, f))
        labelled |= strstr(line, ",2,\"_sat\",") != NULL;
    fclose(f);
    ck_assert_msg(labelled, "maps.csv labels no query \"_sat\"");
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/charlm --data %s/text.txt --vocab 300 --out %s/lm --resume "
             "%s/lm/checkpoint.safetensors", temp_dir, temp_dir, temp_dir);
    expect_failure(command, 2, "the vocabulary comes from the checkpoint");
    /* Ablation on repeated text, per token and per byte; on text windows,
     * with the ICL score. */
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/heads ablate --model %s/lm/model.safetensors --data %s/text.txt "
             "--repeat --windows 6 --out %s/rep", temp_dir, temp_dir, temp_dir);
    ck_assert_msg(tu_run(command, out, sizeof out) == 0, "%s", out);
    ck_assert_msg(strstr(out, "6 windows of 8 tokens from") && strstr(out, "each repeated"),
                  "%s", out);
    double loss, per_byte;
    read_ablation(temp_dir, "rep", "heads,ablation,repeat_loss,repeat_accuracy,first_loss,"
                  "first_accuracy,delta_repeat_loss,delta_first_loss,repeat_loss_per_byte,"
                  "first_loss_per_byte", "none,none,", 3, &loss, 9, &per_byte);
    /* Every repeated target is a word of 3 or 4 bytes or " " or a digit. */
    ck_assert_msg(per_byte < loss && per_byte > loss / 4, "%g nats/token, %g nats/byte", loss,
                  per_byte);
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/heads ablate --model %s/lm/model.safetensors --data %s/text.txt "
             "--windows 6 --out %s/icl", temp_dir, temp_dir, temp_dir);
    ck_assert_msg(tu_run(command, out, sizeof out) == 0, "%s", out);
    ck_assert_msg(strstr(out, "ICL score (loss at positions 12..14 minus 2..2)"), "%s", out);
    double icl, icl_zero;
    read_ablation(temp_dir, "icl", "heads,ablation,text_loss,text_accuracy,delta_text_loss,"
                  "text_loss_per_byte,icl_score,icl_score_per_byte", "none,none,", 7, &icl, 0, NULL);
    read_ablation(temp_dir, "icl", NULL, "L1H0,zero,", 7, &icl_zero, 0, NULL);
    ck_assert_msg(isfinite(icl) && isfinite(icl_zero) && icl != icl_zero, "ICL %g, zero %g", icl,
                  icl_zero);
    expect_failure(HL_BUILD_DIR "/heads scores --model x --repeat", 2,
                   "--repeat belongs to the ablate and importance commands");
    tu_remove_dir(temp_dir);
}
END_TEST

/* charlm with today's parts: the config survives the model file and the
 * checkpoint, the resumed run keeps them, and the heads commands run on it. */
START_TEST(test_charlm_modern)
{
    tu_make_dir(temp_dir, "examples");
    char path[256], command[1024], out[8192];
    write_verse_text(path, sizeof path);
    const char *model = "--ctx 16 --d-model 32 --heads 2 --layers 2 --batch 8 --eval-every 20 "
                        "--pos rope --rope-base 500 --norm rmsnorm --mlp swiglu --tie --smear";
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/charlm --data %s %s --steps 20 --out %s/lm --sample 0 --no-report",
             path, model, temp_dir);
    ck_assert_msg(tu_run(command, out, sizeof out) == 0, "%s", out);
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/charlm --data %s --steps 40 --out %s/lm --sample 0 --no-report "
             "--resume %s/lm/checkpoint.safetensors", path, temp_dir, temp_dir);
    ck_assert_msg(tu_run(command, out, sizeof out) == 0, "%s", out);
    ck_assert_ptr_nonnull(strstr(out, "step 40:"));
    char file[256];
    snprintf(file, sizeof file, "%s/lm/model.safetensors", temp_dir);
    hl_error err = {0};
    hl_gpt *m = hl_gpt_load(file, &err);
    ck_assert_msg(m, "%s", err.message);
    ck_assert(m->cfg.pos == HL_GPT_POS_ROPE && m->cfg.rope_base == 500 &&
              m->cfg.norm == HL_GPT_NORM_RMS && m->cfg.mlp == HL_GPT_MLP_SWIGLU &&
              m->cfg.tie_embeddings && m->cfg.smear_keys && !m->pos_emb);
    /* Trained: the smear weights moved from their start at 0. */
    ck_assert(m->blocks[0].attn.smear->data[0] != 0);
    hl_gpt_free(m);
    static const char *const commands[] = {"scores", "circuits", "patch", "logit-lens"};
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++) {
        snprintf(command, sizeof command, HL_BUILD_DIR "/heads %s --model %s --out %s/%s",
                 commands[i], file, temp_dir, commands[i]);
        ck_assert_msg(tu_run(command, out, sizeof out) == 0, "heads %s: %s", commands[i], out);
    }
    /* The loss by position, as charlm draws it and as plotcsv compares runs. */
    snprintf(file, sizeof file, "%s/lm/position_loss.png", temp_dir);
    ck_assert_int_eq(access(file, F_OK), 0);
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/plotcsv --file %s/lm/position_loss.csv --file %s/lm/position_loss.csv "
             "--x position --y val_loss --y target_bytes --out %s/cmp.png", temp_dir, temp_dir,
             temp_dir);
    ck_assert_msg(tu_run(command, out, sizeof out) == 0, "%s", out);
    ck_assert_msg(strstr(out, "(4 series)"), "%s", out);
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/plotcsv --file %s/lm/heads.csv --x step --y induction --where layer=1 "
             "--where head=0 --out %s/one.png", temp_dir, temp_dir);
    ck_assert_msg(tu_run(command, out, sizeof out) == 0 && !strstr(out, "empty"), "%s", out);
    /* A --where that keeps no row: drawn, and said. */
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/plotcsv --file %s/lm/heads.csv --x step --y induction --where layer=9 "
             "--out %s/none.png", temp_dir, temp_dir);
    ck_assert_msg(tu_run(command, out, sizeof out) == 0 &&
                  strstr(out, "no induction has a finite value against step in the rows --where "
                              "keeps; its series is empty"), "%s", out);
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/plotcsv --file %s/lm/train.csv --x step --y nope --out %s/x.png",
             temp_dir, temp_dir);
    expect_failure(command, 2, "train.csv has no column nope (--y)");
    /* Values no axis can show: the columns and files are named. */
    snprintf(path, sizeof path, "%s/wide.csv", temp_dir);
    FILE *wide = fopen(path, "w");
    ck_assert_ptr_nonnull(wide);
    fputs("step,loss\n1,1e308\n2,-1e308\n", wide);
    fclose(wide);
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/plotcsv --file %s --x step --y loss --out %s/w.png", path, temp_dir);
    char want[512];
    snprintf(want, sizeof want, "span more than an axis can show (--x step, --y loss of %s)",
             path);
    expect_failure(command, 2, want);
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/plotcsv --file %s/lm/model.safetensors --x a --y b --out %s/x.png",
             temp_dir, temp_dir);
    expect_failure(command, 2, "model.safetensors");
    expect_failure(HL_BUILD_DIR "/plotcsv --file tests/main.c --x a --y b", 2, "required");
    tu_remove_dir(temp_dir);
}
END_TEST

/* A pruned model fine-tuned by charlm keeps its pruning record in its
 * checkpoint and model files (both failed to load before), and heads.csv
 * names the heads as trained. */
START_TEST(test_charlm_fine_tunes_pruned)
{
    tu_make_dir(temp_dir, "examples");
    char path[256], command[4096], out[8192];
    write_verse_text(path, sizeof path);
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/charlm --data %s --ctx 16 --d-model 16 --heads 4 --layers 2 "
             "--batch 4 --steps 4 --eval-every 4 --sample 0 --no-report --out %s/lm && "
             HL_BUILD_DIR "/heads prune --model %s/lm/model.safetensors --heads 0.1 --data %s "
             "--windows 2 --out %s/p && "
             HL_BUILD_DIR "/charlm --data %s --init-from %s/p/pruned.safetensors --batch 4 "
             "--steps 2 --eval-every 2 --sample 0 --no-report --out %s/ft && "
             HL_BUILD_DIR "/charlm --data %s --resume %s/ft/checkpoint.safetensors --steps 4 "
             "--eval-every 2 --sample 0 --no-report --out %s/ft && "
             HL_BUILD_DIR "/heads scores --model %s/ft/model.safetensors --out %s/s",
             path, temp_dir, temp_dir, path, temp_dir, path, temp_dir, temp_dir, path, temp_dir,
             temp_dir, temp_dir, temp_dir);
    ck_assert_msg(tu_run(command, out, sizeof out) == 0, "%s", out);
    ck_assert_msg(strstr(out, "L0H2") && !strstr(out, "L0H1 "), "%s", out);
    snprintf(path, sizeof path, "%s/ft/heads.csv", temp_dir);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    char line[512];
    int rows = 0;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "2,0,", 4) || !strncmp(line, "4,0,", 4)) {
            ck_assert_msg(strncmp(line + 4, "1,", 2), "pruned L0H1 in heads.csv: %s", line);
            rows++;
        }
    fclose(f);
    ck_assert_int_eq(rows, 2 * 3);
    tu_remove_dir(temp_dir);
}
END_TEST

/* --preset speedrun: the recipe's flags printed at the start, the model and
 * optimizer they set, a flag given too overriding the preset's value, and a
 * falling loss. */
START_TEST(test_charlm_preset)
{
    tu_make_dir(temp_dir, "examples");
    char path[256], command[1024], out[8192];
    write_verse_text(path, sizeof path);
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/charlm --data %s --ctx 16 --d-model 32 --heads 2 --layers 2 "
             "--batch 8 --eval-every 30 --steps 60 --warmup 10 --decay-frac 0.25 "
             "--preset speedrun --out %s/lm --sample 0 --no-report", path, temp_dir);
    ck_assert_msg(tu_run(command, out, sizeof out) == 0, "%s", out);
    ck_assert_msg(strstr(out, "preset speedrun: --pos rope --norm rmsnorm --mlp relu2 --qk-norm "
                              "--zero-init --softcap 30 --optim muon --muon-lr 0.01 --lr 0.01 "
                              "--beta1 0.8 --beta2 0.95 --warmup 10 --schedule wsd "
                              "--decay-frac 0.25"), "%s", out);
    ck_assert_msg(strstr(out, "optimizer: Muon"), "%s", out);
    char file[256];
    snprintf(file, sizeof file, "%s/lm/model.safetensors", temp_dir);
    hl_error err = {0};
    hl_gpt *m = hl_gpt_load(file, &err);
    ck_assert_msg(m, "%s", err.message);
    ck_assert(m->cfg.pos == HL_GPT_POS_ROPE && m->cfg.norm == HL_GPT_NORM_RMS &&
              m->cfg.mlp == HL_GPT_MLP_RELU2 && m->cfg.qk_norm && m->cfg.softcap == 30);
    hl_gpt_free(m);
    snprintf(file, sizeof file, "%s/lm/train.csv", temp_dir);
    FILE *f = fopen(file, "r");
    ck_assert_ptr_nonnull(f);
    char line[256];
    double first = -1, last = -1, v, lr = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "%*[^,],%*[^,],%lf,%*[^,],%*[^,],%lf", &v, &lr) == 2) {
            first = first < 0 ? v : first;
            last = v;
        }
    fclose(f);
    ck_assert_msg(last > 0 && last < first - 0.5, "validation loss %g -> %g", first, last);
    /* The last row's rate is its step's, the 60th: 1/15 of the way down
     * (WSD over the last 15 steps), not the 0 of a step never taken. */
    ck_assert_msg(fabs(lr - 0.01 / 15) < 1e-8, "last row's lr %g", lr);
    expect_failure(HL_BUILD_DIR "/charlm --data tests/main.c --preset fastest", 2,
                   "unknown --preset fastest (speedrun)");
    /* The preset's on/off parts turned off (they could not be before). */
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/charlm --data %s --ctx 16 --d-model 32 --heads 2 --layers 1 "
             "--batch 2 --eval-every 2 --steps 2 --preset speedrun --no-qk-norm --no-zero-init "
             "--schedule cosine --out %s/off --sample 0 --no-report", path, temp_dir);
    ck_assert_msg(tu_run(command, out, sizeof out) == 0, "%s", out);
    ck_assert_msg(strstr(out, "--mlp relu2 --softcap 30"), "%s", out);
    /* the decay's share is no flag of a cosine schedule */
    ck_assert_msg(strstr(out, "--warmup 20 --schedule cosine\n"), "%s", out);
    snprintf(file, sizeof file, "%s/off/model.safetensors", temp_dir);
    ck_assert_msg(m = hl_gpt_load(file, &err), "%s", err.message);
    ck_assert(!m->cfg.qk_norm && m->cfg.mlp == HL_GPT_MLP_RELU2);
    ck_assert_msg(!strstr(out, "zero-initialised"), "%s", out);
    hl_gpt_free(m);
    expect_failure(HL_BUILD_DIR "/charlm --data tests/main.c --qk-norm --no-qk-norm", 2,
                   "--qk-norm and --no-qk-norm: give one");
    /* ... with the preset too (the off flag won), and --muon-lr is no flag
     * of AdamW's. */
    expect_failure(HL_BUILD_DIR "/charlm --data tests/main.c --preset speedrun --zero-init "
                   "--no-zero-init", 2, "--zero-init and --no-zero-init: give one");
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/charlm --data %s --ctx 16 --d-model 32 --heads 2 --layers 1 "
             "--batch 2 --steps 10 --preset speedrun --optim adamw --tie --out %s/adamw "
             "--sample 0 --no-report", path, temp_dir);
    ck_assert_msg(tu_run(command, out, sizeof out) == 0, "%s", out);
    ck_assert_msg(strstr(out, "--optim adamw --lr 0.01 ") && !strstr(out, "--muon-lr"), "%s",
                  out);
    ck_assert_msg(strstr(out, "zero-initialised projections (the head is the embedding)\n"),
                  "%s", out);
    /* 10 steps of a 20-step warm-up, the decay over the last 8: the rate's
     * most is step 7's, 3/8 (the decay's) where the ramp is at 8/20, not the
     * 10/20 the ramp would reach alone. */
    ck_assert_msg(strstr(out, "the rate reaches 0.38 of its peak at most"), "%s", out);
    tu_remove_dir(temp_dir);
}
END_TEST

/* --preset=NAME is the preset as --preset NAME is; a resumed run continues
 * with the checkpoint's optimizer and schedule without their flags, a flag
 * given overriding one; a model-size flag the checkpoint disagrees with is
 * refused, one it agrees with accepted. */
START_TEST(test_charlm_resume_keeps_training)
{
    tu_make_dir(temp_dir, "examples");
    char path[256], command[1024], out[8192];
    write_verse_text(path, sizeof path);
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/charlm --data %s --ctx 16 --d-model 32 --heads 2 --layers 2 "
             "--batch 8 --eval-every 10 --steps 10 --warmup 4 --preset=speedrun --out %s/lm "
             "--sample 0 --no-report", path, temp_dir);
    ck_assert_msg(tu_run(command, out, sizeof out) == 0, "%s", out);
    ck_assert_msg(strstr(out, "optimizer: Muon (lr 0.01,"), "%s", out);
    const char *resume = HL_BUILD_DIR "/charlm --data %s --steps 20 --eval-every 10 --out %s/%s "
                         "--sample 0 --no-report --resume %s/lm/checkpoint.safetensors %s";
    snprintf(command, sizeof command, resume, path, temp_dir, "a", temp_dir, "--heads 2");
    ck_assert_msg(tu_run(command, out, sizeof out) == 0, "%s", out);
    ck_assert_msg(strstr(out, "resumed from") && strstr(out, "optimizer: Muon (lr 0.01,") &&
                      strstr(out, "AdamW (lr 0.01, betas 0.8, 0.95, weight decay 0.01) on the "
                             "rest") &&
                      strstr(out, "schedule: 4 warm-up steps, then wsd (linear decay to 0 "
                                  "over the last 0.8 of the steps)"),
                  "%s", out);
    snprintf(command, sizeof command, resume, path, temp_dir, "b", temp_dir, "--lr 0.002");
    ck_assert_msg(tu_run(command, out, sizeof out) == 0, "%s", out);
    ck_assert_msg(strstr(out, "AdamW (lr 0.002,") && strstr(out, "then wsd"), "%s", out);
    snprintf(command, sizeof command, resume, path, temp_dir, "c", temp_dir, "--d-model 64");
    expect_failure(command, 2, "--d-model with --resume: the model of");
    /* --muon-lr alone: the checkpoint says Muon. */
    snprintf(command, sizeof command, resume, path, temp_dir, "d", temp_dir, "--muon-lr 0.005");
    ck_assert_msg(tu_run(command, out, sizeof out) == 0, "%s", out);
    ck_assert_msg(strstr(out, "optimizer: Muon (lr 0.005,"), "%s", out);
    /* Training flags out of range in the checkpoint: refused, naming it. */
    char ckpt[256], bad[256];
    snprintf(ckpt, sizeof ckpt, "%s/lm/checkpoint.safetensors", temp_dir);
    snprintf(bad, sizeof bad, "%s/bad.safetensors", temp_dir);
    const char *keys[] = {"format", "config", "task", "vocab", "step", "optim", "rng.data",
                          "rng.dropout"};
    tu_set_metadata(ckpt, bad, keys, 8, "training", "--optim muon --lr 20");
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/charlm --data %s --steps 20 --out %s/e --resume %s", path, temp_dir,
             bad);
    expect_failure(command, 2, "bad.safetensors: its training flags (\"training\" metadata)");
    tu_remove_dir(temp_dir);
}
END_TEST

/* A resumed run keeps the data flags too (--batch, --copy-windows,
 * --copy-span, --doc-windows, and the window of a fine-tuning run's --ctx),
 * and AdamW's betas:
 * stopped at 10 steps and resumed to 20 without them, it writes the model of
 * 20 steps straight (before, they fell back to their defaults without a
 * word), and the same heads.png (read back from the logs, the first run's
 * points are drawn too). A --ctx longer than the model's positions is
 * refused. */
START_TEST(test_charlm_resume_keeps_data_flags)
{
    tu_make_dir(temp_dir, "examples");
    char path[256], command[2048], a[256], b[256];
    write_verse_text(path, sizeof path);
    snprintf(command, sizeof command,
             "(cat %s; printf '\\f\\n'; cat %s) > %s/docs.txt", path, path, temp_dir);
    tu_run_ok(command);
    static const char *const runs[][2] = {
        {"--ctx 16 --d-model 16 --heads 2 --layers 1",
         "--batch 4 --copy-windows 0.5 --copy-span 3 --doc-windows --beta1 0.7 --beta2 0.9"},
        {"--init-from %s/docs/model.safetensors", "--ctx 8 --batch 3"},
    };
    for (int i = 0; i < 2; i++) {
        char model[256];
        snprintf(model, sizeof model, runs[i][0], temp_dir);
        const char *common = "--eval-every 5 --sample 0 --no-report";
        snprintf(command, sizeof command,
                 HL_BUILD_DIR "/charlm --data %s/docs.txt %s %s %s --steps 20 --out %s/straight "
                 "&& " HL_BUILD_DIR "/charlm --data %s/docs.txt %s %s %s --steps 10 --out %s/two "
                 "&& " HL_BUILD_DIR "/charlm --data %s/docs.txt %s --steps 20 --out %s/two "
                 "--resume %s/two/checkpoint.safetensors",
                 temp_dir, model, runs[i][1], common, temp_dir, temp_dir, model, runs[i][1],
                 common, temp_dir, temp_dir, common, temp_dir, temp_dir);
        if (!i) /* the first run's model is the second's to fine-tune */
            snprintf(command + strlen(command), sizeof command - strlen(command),
                     " && cp -r %s/straight %s/docs", temp_dir, temp_dir);
        tu_run_ok(command);
        snprintf(a, sizeof a, "%s/straight/model.safetensors", temp_dir);
        snprintf(b, sizeof b, "%s/two/model.safetensors", temp_dir);
        ck_assert_msg(tu_same_file(a, b), "%s: resumed without the flags, another model",
                      runs[i][1]);
        /* heads.png draws the earlier run's points too */
        snprintf(a, sizeof a, "%s/straight/heads.png", temp_dir);
        snprintf(b, sizeof b, "%s/two/heads.png", temp_dir);
        ck_assert_msg(tu_same_file(a, b), "%s: the resumed run's heads.png", runs[i][1]);
        if (!i) { /* a flag given overrides the checkpoint's, --no-doc-windows too */
            char out[8192];
            snprintf(command, sizeof command,
                     HL_BUILD_DIR "/charlm --data %s/docs.txt --steps 22 --batch 2 "
                     "--no-doc-windows %s --out %s/two --resume %s/two/checkpoint.safetensors",
                     temp_dir, common, temp_dir, temp_dir);
            ck_assert_msg(tu_run(command, out, sizeof out) == 0, "%s", out);
            ck_assert_msg(!strstr(out, "documents:") && strstr(out, "batch 2"), "%s", out);
        }
        snprintf(command, sizeof command, "rm -r %s/straight %s/two", temp_dir, temp_dir);
        tu_run_ok(command);
    }
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/charlm --data %s/docs.txt --steps 20 --ctx 32 --out %s/long --resume "
             "%s/docs/checkpoint.safetensors", temp_dir, temp_dir, temp_dir);
    expect_failure(command, 2, "--ctx 32: the model of");
    tu_remove_dir(temp_dir);
}
END_TEST

/* charlm with --tokenizer bpe: the model file keeps the merges, a resumed run
 * reads them from the checkpoint, and heads labels its maps with BPE pieces. */
START_TEST(test_charlm_bpe)
{
    tu_make_dir(temp_dir, "examples");
    char path[256], command[1024], out[8192];
    snprintf(path, sizeof path, "%s/text.txt", temp_dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    for (int i = 0; i < 300; i++)
        fprintf(f, "the cat sat on the mat and the dog sat on the log %d\n", i % 7);
    fclose(f);
    const char *model = "--ctx 16 --d-model 32 --heads 2 --layers 2 --batch 8 --eval-every 20";
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/charlm --data %s %s --tokenizer bpe --vocab 400 --steps 20 "
             "--out %s/lm --sample 20 --no-report", path, model, temp_dir);
    ck_assert_msg(tu_run(command, out, sizeof out) == 0, "%s", out);
    /* Merges stop when every chunk is one token: well before 400. */
    int size = 0;
    const char *said = strstr(out, "tokens (byte-level BPE)");
    ck_assert_msg(said, "%s", out);
    while (said > out && said[-1] == ' ')
        said--;
    while (said > out && said[-1] >= '0' && said[-1] <= '9')
        said--;
    size = atoi(said);
    ck_assert_msg(size > 256 && size < 400, "%s", out);
    snprintf(path, sizeof path, "%s/lm/model.safetensors", temp_dir);
    hl_error err = {0};
    hl_gpt_meta meta;
    hl_gpt *m = hl_gpt_load_meta(path, &meta, &err);
    ck_assert_msg(m, "%s", err.message);
    ck_assert_int_eq(m->cfg.vocab_in, size);
    ck_assert_str_eq(hl_vocab_kind(meta.vocab), "bpe");
    hl_gpt_free(m);
    hl_gpt_meta_clear(&meta);
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/charlm --data %s/text.txt %s --steps 30 --out %s/lm --sample 0 "
             "--no-report --resume %s/lm/checkpoint.safetensors", temp_dir, model, temp_dir,
             temp_dir);
    ck_assert_msg(tu_run(command, out, sizeof out) == 0, "%s", out);
    ck_assert_msg(strstr(out, "step 30:") && strstr(out, "tokens (byte-level BPE)"), "%s", out);
    /* "the", " cat", " sat": a chunk each, each chunk one token. */
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/heads maps --model %s/lm/model.safetensors --text 'the cat sat' "
             "--out %s/maps", temp_dir, temp_dir);
    ck_assert_msg(tu_run(command, out, sizeof out) == 0, "%s", out);
    ck_assert_msg(strstr(out, "3 tokens"), "%s", out);
    snprintf(path, sizeof path, "%s/maps/maps.csv", temp_dir);
    f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    char line[256];
    bool labelled = false;
    while (fgets(line, sizeof line, f))
        labelled |= strstr(line, ",2,\"_sat\",") != NULL;
    fclose(f);
    ck_assert_msg(labelled, "maps.csv labels no query \"_sat\"");
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/charlm --data %s/text.txt --tokenizer bpe --out %s/lm --resume "
             "%s/lm/checkpoint.safetensors", temp_dir, temp_dir, temp_dir);
    expect_failure(command, 2, "--tokenizer with --resume: the vocabulary comes from the "
                               "checkpoint");
    tu_remove_dir(temp_dir);
}
END_TEST

/* tools/induction.sh (make induction) end to end on a small text and a
 * few steps: the phase-change table with a row per evaluation, and every
 * causal number named. */
START_TEST(test_induction_script)
{
    tu_make_dir(temp_dir, "examples");
    char path[256], command[1024], out[16384];
    write_verse_text(path, sizeof path);
    FILE *f;
    snprintf(command, sizeof command,
             "BUILD=" HL_BUILD_DIR " DATA=%s CHARLM_FLAGS='--steps 20 --eval-every 10 --ctx 16 "
             "--threads 1' tools/induction.sh %s/ind", path, temp_dir);
    ck_assert_msg(tu_run(command, out, sizeof out) == 0, "%s", out);
    /* The summary file, not the printout: the sampled text before it may hold
     * any byte, a NUL included. */
    char summary[8192];
    snprintf(path, sizeof path, "%s/ind/summary.txt", temp_dir);
    f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    summary[fread(summary, 1, sizeof summary - 1, f)] = '\0';
    fclose(f);
    const char *said[] = {"heads at step 20: induction L1H", "previous-token L0H",
                          "repeated validation text (second half)", "ICL score on validation",
                          "zero-ablating L0H", "K-composition L0H", "(random baseline 0.", "wall time"};
    for (size_t i = 0; i < sizeof said / sizeof said[0]; i++)
        ck_assert_msg(strstr(summary, said[i]), "the summary lacks \"%s\": %s", said[i], summary);
    snprintf(path, sizeof path, "%s/ind/phase_change.csv", temp_dir);
    char line[256];
    int rows = 0;
    f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
    ck_assert_str_eq(line, "step,val_loss,icl_score,icl_score_per_byte,best_induction,"
                           "best_induction_text,best_induction_layer0,best_previous_token\n");
    while (fgets(line, sizeof line, f))
        ck_assert_int_eq(atoi(line), 10 * rows++);
    fclose(f);
    ck_assert_int_eq(rows, 3);
    tu_remove_dir(temp_dir);
}
END_TEST

START_TEST(test_charlm_bad_input)
{
    expect_failure(HL_BUILD_DIR "/charlm", 2, "--data");
    expect_failure(HL_BUILD_DIR "/charlm --data /nonexistent.txt", 2, "/nonexistent.txt");
    expect_failure(HL_BUILD_DIR "/charlm --data tests/fixtures/optim.safetensors --lr nan", 2,
                   "--lr");
    expect_failure(HL_BUILD_DIR "/charlm --data tests/main.c --ctx 4000", 2, "at least");
    expect_failure(HL_BUILD_DIR "/charlm --data tests/main.c --schedule linear", 2,
                   "unknown --schedule linear (cosine, constant or wsd)");
    expect_failure(HL_BUILD_DIR "/charlm --data tests/main.c --warmup -1", 2, "--warmup");
    expect_failure(HL_BUILD_DIR "/charlm --data tests/main.c --vocab 100", 2,
                   "--vocab 100: 0 for the bytes, or more than 256 for learnt words");
    expect_failure(HL_BUILD_DIR "/charlm --data tests/main.c --vocab x", 2, "--vocab");
    expect_failure(HL_BUILD_DIR "/charlm --data tests/main.c --tokenizer lzw --vocab 300", 2,
                   "unknown --tokenizer lzw (bytes, words or bpe)");
    expect_failure(HL_BUILD_DIR "/charlm --data tests/main.c --tokenizer bpe", 2,
                   "--tokenizer bpe needs --vocab N, N > 256");
    expect_failure(HL_BUILD_DIR "/charlm --data tests/main.c --tokenizer bpe --vocab 200", 2,
                   "--vocab 200: 0 for the bytes");
    expect_failure(HL_BUILD_DIR "/charlm --data tests/main.c --tokenizer bytes --vocab 300", 2,
                   "--tokenizer bytes with --vocab 300: the bytes are 256 tokens");
    expect_failure(HL_BUILD_DIR "/charlm --data tests/main.c --pos-init fourier", 2,
                   "unknown --pos-init fourier (normal or sinusoidal)");
    expect_failure(HL_BUILD_DIR "/charlm --data tests/main.c --emb-std 0", 2, "--emb-std");
    expect_failure(HL_BUILD_DIR "/charlm --data tests/main.c --pos alibi", 2,
                   "unknown --pos alibi (learned, sinusoidal, rope or none)");
    expect_failure(HL_BUILD_DIR "/charlm --data tests/main.c --norm batchnorm", 2,
                   "unknown --norm batchnorm");
    expect_failure(HL_BUILD_DIR "/charlm --data tests/main.c --mlp relu", 2,
                   "unknown --mlp relu");
    expect_failure(HL_BUILD_DIR "/charlm --data tests/main.c --softcap -1", 2, "--softcap");
    expect_failure(HL_BUILD_DIR "/charlm --data tests/main.c --resume x --qk-norm", 2,
                   "--qk-norm or --softcap with --resume");
    expect_failure(HL_BUILD_DIR "/charlm --data tests/main.c --pos rope --pos-init sinusoidal",
                   2, "--pos-init sinusoidal starts learned positions");
    expect_failure(HL_BUILD_DIR "/charlm --data tests/main.c --pos rope --heads 2 --d-model 6",
                   2, "even head width");
    expect_failure(HL_BUILD_DIR "/charlm --data tests/main.c --rope-base 1", 2, "--rope-base");
    expect_failure(HL_BUILD_DIR "/charlm --data tests/main.c --rope-base 500", 2,
                   "--rope-base belongs to --pos rope (--pos is learned)");
    expect_failure(HL_BUILD_DIR "/charlm --data tests/main.c --no-mlp --mlp swiglu", 2,
                   "--no-mlp with --mlp swiglu");
    expect_failure(HL_BUILD_DIR "/charlm --data tests/main.c --resume x --smear", 2,
                   "the model comes from the checkpoint");
    /* A model flag given as its "off" value is given all the same (these
     * were dropped without a word). */
    expect_failure(HL_BUILD_DIR "/charlm --data tests/main.c --resume x --softcap 0", 2,
                   "--qk-norm or --softcap with --resume");
    expect_failure(HL_BUILD_DIR "/charlm --data tests/main.c --resume x --kv-heads 0", 2,
                   "the model comes from the checkpoint");
    expect_failure(HL_BUILD_DIR "/charlm --data tests/main.c --resume x --rotary-dims 0", 2,
                   "the model comes from the checkpoint");
    expect_failure(HL_BUILD_DIR "/charlm --data tests/main.c --resume x --vocab 0", 2,
                   "--vocab with --resume");
    expect_failure(HL_BUILD_DIR "/charlm --tokens x --vocab 0", 2,
                   "--vocab or --tokenizer with --tokens");
    expect_failure(HL_BUILD_DIR "/charlm --data tests/main.c --tokens x", 2,
                   "--data and --tokens: give one");
    expect_failure(HL_BUILD_DIR "/charlm --data tests/main.c --prompt ''", 2,
                   "--prompt is empty: sampling starts from one token at least");
    expect_failure(HL_BUILD_DIR "/charlm --data tests/main.c --resume x --doc-windows "
                   "--no-doc-windows", 2, "--doc-windows and --no-doc-windows: give one");
    /* initialisation flags: the weights come from the file (they were ignored) */
    expect_failure(HL_BUILD_DIR "/charlm --data tests/main.c --resume x --emb-std 0.1", 2,
                   "--emb-std starts new weights; --resume brings its own");
    expect_failure(HL_BUILD_DIR "/charlm --data tests/main.c --init-from x --pos-init "
                   "sinusoidal", 2, "--pos-init starts new weights; --init-from brings its own");
    expect_failure(HL_BUILD_DIR "/charlm --data tests/main.c --val-windows -3", 2,
                   "--val-windows");
}
END_TEST

/* The programs refuse an unknown or unsupported kernel set before doing
 * anything, and --help ends with the set that runs. */
START_TEST(test_programs_kernel_sets)
{
    expect_failure("HL_ISA=sse9 " HL_BUILD_DIR "/toy_heads --steps 1 --out /nonexistent/x", 2,
                   "HL_ISA=sse9: unknown kernel set");
    /* A team the OpenMP runtime cannot start (it crashed at 100000). */
    expect_failure("OMP_NUM_THREADS=100000 " HL_BUILD_DIR "/toy_heads --steps 1 --out "
                   "/nonexistent/x", 2, "OMP_NUM_THREADS=100000: at most 1024 threads");
    char out[8192];
    ck_assert_int_eq(tu_run("HL_ISA=portable " HL_BUILD_DIR "/toy_heads --help", out, sizeof out),
                     0);
    ck_assert_msg(strstr(out, "kernels: portable"), "%s", out);
    for (int i = 0; i < HL_ISA_COUNT; i++)
        if (!hl_isa_supported((hl_isa)i)) {
            char command[256], want[64];
            snprintf(command, sizeof command, "HL_ISA=%s " HL_BUILD_DIR "/charlm --help",
                     hl_isa_name((hl_isa)i));
            snprintf(want, sizeof want, "HL_ISA=%s: this CPU lacks", hl_isa_name((hl_isa)i));
            expect_failure(command, 2, want);
        }
}
END_TEST

/* Every FMA set, at 1 and 2 threads, writes the same model; the portable set
 * without FMA trains too (its loss is checked by the examples suite). */
START_TEST(test_toy_heads_same_bits_every_kernel_set)
{
    char dir[] = "/tmp/headlab-isa-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char command[1024], first[256] = "", path[256];
    for (int i = HL_ISA_COUNT - 1; i >= 0; i--) {
        const hl_isa isa = (hl_isa)i;
        if (!hl_isa_supported(isa) || !hl_kernels_of(isa)->fma)
            continue;
        for (int threads = 1; threads <= 2; threads++) {
            snprintf(path, sizeof path, "%s/%s-%d", dir, hl_isa_name(isa), threads);
            snprintf(command, sizeof command,
                     "HL_ISA=%s OMP_NUM_THREADS=%d " HL_BUILD_DIR "/toy_heads --seed 3 "
                     "--steps 300 --no-report --out %s",
                     hl_isa_name(isa), threads, path);
            tu_run_ok(command);
            strcat(path, "/model.safetensors");
            if (!first[0])
                strcpy(first, path);
            else
                ck_assert_msg(tu_same_file(first, path), "%s and %s differ", first, path);
        }
    }
    snprintf(command, sizeof command, "rm -rf %s", dir);
    ck_assert_int_eq(system(command), 0);
}
END_TEST

/* Writes text into path (a test fixture file). */
static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_msg(f, "cannot write %s", path);
    fputs(text, f);
    fclose(f);
}

/* tools/check_layers.sh, on a copy of the tree's shape: it refuses a layer
 * that includes a higher one in either include form, viz/ reaching io/ (its
 * file writes come from files/) and core/ calling ops/ without an include,
 * and passes a clean tree. */
START_TEST(test_check_layers_both_include_forms)
{
    tu_make_dir(temp_dir, "examples");
    char command[1024], out[4096], path[256];
    snprintf(command, sizeof command,
             "mkdir -p %s/tools %s/core %s/ops %s/viz && cp tools/check_layers.sh %s/tools/",
             temp_dir, temp_dir, temp_dir, temp_dir, temp_dir);
    ck_assert_int_eq(system(command), 0);
    snprintf(path, sizeof path, "%s/ops/a.h", temp_dir);
    write_file(path, "#include <stdio.h>\n#include <sys/types.h>\n#include \"core/error.h\"\n");
    snprintf(command, sizeof command, "%s/tools/check_layers.sh", temp_dir);
    ck_assert_msg(tu_run(command, out, sizeof out) == 0, "%s", out);
    static const char *const bad[] = {"#include \"ops/a.h\"\n", "#include <ops/a.h>\n"};
    snprintf(path, sizeof path, "%s/core/b.h", temp_dir);
    for (int i = 0; i < 2; i++) {
        write_file(path, bad[i]);
        ck_assert_msg(tu_run(command, out, sizeof out) == 1, "%s passed: %s", bad[i], out);
        ck_assert_msg(strstr(out, "core/b.h:1: core/ may not include ops/"), "%s", out);
    }
    remove(path);
    snprintf(path, sizeof path, "%s/viz/c.c", temp_dir);
    write_file(path, "#include \"files/atomic.h\"\n");
    ck_assert_msg(tu_run(command, out, sizeof out) == 0, "%s", out);
    write_file(path, "#include \"io/checkpoint.h\"\n");
    ck_assert_msg(tu_run(command, out, sizeof out) == 1, "viz/ including io/ passed: %s", out);
    ck_assert_msg(strstr(out, "viz/c.c:1: viz/ may not include io/"), "%s", out);
    remove(path);
    /* report/ builds on analysis/ and tasks/; analysis/ on neither, in
     * either include form. */
    char mkdirs[512];
    snprintf(mkdirs, sizeof mkdirs, "mkdir -p %s/analysis %s/report", temp_dir, temp_dir);
    ck_assert_int_eq(system(mkdirs), 0);
    snprintf(path, sizeof path, "%s/report/e.c", temp_dir);
    write_file(path, "#include \"analysis/heads.h\"\n#include <tasks/probe.h>\n");
    ck_assert_msg(tu_run(command, out, sizeof out) == 0, "%s", out);
    remove(path);
    static const char *const upward[][2] = {
        {"#include \"report/html.h\"\n", "analysis/d.c:1: analysis/ may not include report/"},
        {"#include <tasks/probe.h>\n", "analysis/d.c:1: analysis/ may not include tasks/"},
    };
    snprintf(path, sizeof path, "%s/analysis/d.c", temp_dir);
    for (int i = 0; i < 2; i++) {
        write_file(path, upward[i][0]);
        ck_assert_msg(tu_run(command, out, sizeof out) == 1, "%s passed: %s", upward[i][0], out);
        ck_assert_msg(strstr(out, upward[i][1]), "%s", out);
    }
    remove(path);
    /* Calls, from the objects: core/ calling into ops/ with a prototype of
     * its own is refused; ops/ calling core/ is not. */
    snprintf(command, sizeof command,
             "cd %s && mkdir -p build/obj/core build/obj/ops && "
             "printf 'void hl_x_op(void);\nvoid hl_x_core(void) { hl_x_op(); }\n' >core/x.c && "
             "printf 'void hl_x_core2(void);\nvoid hl_x_op(void) { hl_x_core2(); }\n' "
             ">ops/y.c && printf 'void hl_x_core2(void) {}\n' >core/z.c && "
             "cc -c core/x.c -o build/obj/core/x.o && cc -c ops/y.c -o build/obj/ops/y.o && "
             "cc -c core/z.c -o build/obj/core/z.o",
             temp_dir);
    ck_assert_int_eq(system(command), 0);
    snprintf(command, sizeof command, "cd %s && tools/check_layers.sh", temp_dir);
    ck_assert_msg(tu_run(command, out, sizeof out) == 1, "core/ calling ops/ passed: %s", out);
    ck_assert_msg(strstr(out, "core/ uses hl_x_op from ops/"), "%s", out);
    ck_assert_msg(!strstr(out, "hl_x_core2"), "ops/ calling core/ was refused: %s", out);
    /* ... and an object whose source is gone (a moved file) is not read. */
    snprintf(command, sizeof command, "cd %s && rm core/x.c && tools/check_layers.sh", temp_dir);
    ck_assert_msg(tu_run(command, out, sizeof out) == 0, "a stale object was read: %s", out);
    tu_remove_dir(temp_dir);
}
END_TEST

Suite *examples_suite(void)
{
    Suite *s = suite_create("examples");
    TCase *tc = tcase_create("examples");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_mha_run_round_trip);
    tcase_add_test(tc, test_mha_run_bad_input);
    tcase_add_test(tc, test_lost_stdout_is_a_failure);
    tcase_add_test(tc, test_toy_heads_short_run);
    tcase_add_test(tc, test_charlm_learns_and_resumes);
    tcase_add_test(tc, test_charlm_words);
    tcase_add_test(tc, test_charlm_modern);
    tcase_add_test(tc, test_charlm_preset);
    tcase_add_test(tc, test_charlm_fine_tunes_pruned);
    tcase_add_test(tc, test_charlm_resume_keeps_training);
    tcase_add_test(tc, test_charlm_resume_keeps_data_flags);
    tcase_add_test(tc, test_charlm_bpe);
    tcase_add_test(tc, test_induction_script);
    tcase_add_test(tc, test_charlm_bad_input);
    tcase_add_test(tc, test_programs_kernel_sets);
    tcase_add_test(tc, test_check_layers_both_include_forms);
    suite_add_tcase(s, tc);
    /* Whole training runs: no time limit, since their work is fixed and a
     * sanitizer build or a slow machine takes many times longer. */
    TCase *runs = tcase_create("runs");
    tcase_set_timeout(runs, 0);
    tcase_add_test(runs, test_toy_heads_same_bits_every_kernel_set);
    suite_add_tcase(s, runs);
    return s;
}
