/* Tests for the programs on token files: build/tokenize (examples/
 * tokenize.c), charlm --tokens and heads --data with a token file. Bitwise
 * the same model from --tokens as from --data, resumes that are refused, bad
 * files, a pretrained tokenizer's files and ids (--pretrained, --print), and a
 * step from a sparse multi-GB file in little memory. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/testutil.h"

#ifndef HL_BUILD_DIR
#define HL_BUILD_DIR "build"
#endif

static char dir[64];

static void make_dir(void)
{
    strcpy(dir, "/tmp/headlab-tokens-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void remove_dir(void)
{
    char command[128];
    snprintf(command, sizeof command, "rm -rf %s", dir);
    ck_assert_int_eq(system(command), 0);
}

static void expect_failure(const char *command, int code, const char *fragment)
{
    char out[4096];
    int rc = tu_run(command, out, sizeof out);
    ck_assert_msg(rc == code, "%s: exit %d, wanted %d; said: %s", command, rc, code, out);
    ck_assert_msg(strstr(out, fragment), "%s: message \"%s\" lacks \"%s\"", command, out, fragment);
}

/* dir/text.txt: verses with words, digits and line breaks. */
static void write_text(void)
{
    char path[128];
    snprintf(path, sizeof path, "%s/text.txt", dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    for (int i = 0; i < 600; i++)
        fprintf(f, "%d:%d And the cat sat on the mat, and it was good %d.\n", i / 30, i % 30,
                i % 7);
    fclose(f);
}

#define TINY "--steps 8 --eval-every 4 --d-model 16 --heads 2 --layers 1 --ctx 16 --batch 4 " \
             "--sample 0 --no-report --seed 5"

START_TEST(test_tokenize_same_for_any_thread_count)
{
    make_dir();
    write_text();
    char command[1024];
    const char *vocabs[] = {"", "--learn 300", "--learn 320 --tokenizer bpe"};
    for (int k = 0; k < 3; k++) {
        for (int threads = 1; threads <= 2; threads++) {
            snprintf(command, sizeof command,
                     "OMP_NUM_THREADS=%d " HL_BUILD_DIR "/tokenize %s/text.txt %s --out %s/t%d",
                     threads, dir, vocabs[k], dir, threads);
            tu_run_ok(command);
        }
        char a[128], b[128];
        for (int i = 0; i < 2; i++) {
            const char *name = i ? "val.tok" : "train.tok";
            snprintf(a, sizeof a, "%s/t1/%s", dir, name);
            snprintf(b, sizeof b, "%s/t2/%s", dir, name);
            ck_assert_msg(tu_same_file(a, b), "%s %s: 1 and 2 threads differ", vocabs[k], name);
        }
    }
    /* Two files cut at a line break read as one text: the tokens of their
     * concatenation, each file a document (its own encoding changes no token
     * where a line break separates two non-spaces). */
    snprintf(command, sizeof command,
             "head -n 300 %s/text.txt > %s/a.txt && tail -n +301 %s/text.txt > %s/b.txt && "
             HL_BUILD_DIR "/tokenize %s/a.txt %s/b.txt --learn 320 --tokenizer bpe --out %s/ab",
             dir, dir, dir, dir, dir, dir, dir);
    tu_run_ok(command);
    char a[128], b[128];
    snprintf(a, sizeof a, "%s/ab/train.tok", dir);
    snprintf(b, sizeof b, "%s/t2/train.tok", dir);
    hl_error err = {0};
    hl_token_file *fa = hl_token_file_open(a, &err), *fb = hl_token_file_open(b, &err);
    ck_assert_msg(fa && fb, "%s", err.message);
    const uint64_t n = hl_token_file_header(fa)->n_tokens;
    ck_assert_uint_eq(n, hl_token_file_header(fb)->n_tokens);
    int32_t *ta = malloc(n * sizeof *ta), *tb = malloc(n * sizeof *tb);
    ck_assert_int_eq(hl_token_file_read(fa, 0, n, ta, &err), HL_OK);
    ck_assert_int_eq(hl_token_file_read(fb, 0, n, tb, &err), HL_OK);
    ck_assert_mem_eq(ta, tb, n * sizeof *ta);
    size_t docs_a, docs_b;
    const uint64_t *starts = hl_token_file_docs(fa, &docs_a);
    hl_token_file_docs(fb, &docs_b);
    ck_assert_uint_eq(docs_a, 2);
    ck_assert_uint_eq(docs_b, 1);
    ck_assert(starts[1] > 0 && starts[1] < n);
    free(ta);
    free(tb);
    hl_token_file_close(fa);
    hl_token_file_close(fb);
    /* A form-feed line ends a document too; charlm trains on windows that
     * start at documents and never attend across one. */
    snprintf(command, sizeof command,
             "(head -n 200 %s/text.txt; printf '\\f\\n'; tail -n +201 %s/text.txt) > %s/c.txt && "
             HL_BUILD_DIR "/tokenize %s/c.txt --out %s/c && " HL_BUILD_DIR "/charlm --tokens "
             "%s/c --doc-windows --qk-norm --mlp relu2 --softcap 10 --out %s/c/run " TINY,
             dir, dir, dir, dir, dir, dir, dir);
    char out[8192];
    int rc = tu_run(command, out, sizeof out);
    ck_assert_msg(rc == 0, "%s: exit %d: %s", command, rc, out);
    ck_assert_msg(strstr(out, "documents: 2 in the training text, 2 of them start a window"),
                  "%s", out);
    /* two long documents: the windows read a small share, and say so */
    ck_assert_msg(strstr(out, "of the training tokens (they start at documents only: a document "
                              "longer than a window is read in its first --ctx + 1 tokens"),
                  "%s", out);
    remove_dir();
}
END_TEST

/* charlm --tokens trains the model charlm --data trains, bit for bit; resumes
 * from its checkpoint, and refuses other files or another vocabulary. */
START_TEST(test_charlm_tokens_bitwise_and_resume)
{
    make_dir();
    write_text();
    char command[2048];
    const char *kinds[][2] = {{"", ""}, {"--learn 320 --tokenizer bpe", "--vocab 320 --tokenizer bpe"},
                              {"--learn 300", "--vocab 300"}};
    for (int k = 0; k < 3; k++) {
        snprintf(command, sizeof command,
                 HL_BUILD_DIR "/tokenize %s/text.txt %s --out %s/tok%d && "
                 HL_BUILD_DIR "/charlm --data %s/text.txt %s " TINY " --out %s/data%d && "
                 HL_BUILD_DIR "/charlm --tokens %s/tok%d " TINY " --out %s/tokens%d",
                 dir, kinds[k][0], dir, k, dir, kinds[k][1], dir, k, dir, k, dir, k);
        tu_run_ok(command);
        char a[128], b[128];
        snprintf(a, sizeof a, "%s/data%d/model.safetensors", dir, k);
        snprintf(b, sizeof b, "%s/tokens%d/model.safetensors", dir, k);
        ck_assert_msg(tu_same_file(a, b), "%s: --tokens and --data train different models",
                      kinds[k][1]);
    }
    /* resume: more steps from the checkpoint (the same command's --seed
     * said to be unused) */
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/charlm --tokens %s/tok1 " TINY " --steps 12 --out %s/tokens1 "
             "--resume %s/tokens1/checkpoint.safetensors", dir, dir, dir);
    char said[8192];
    ck_assert_int_eq(tu_run(command, said, sizeof said), 0);
    ck_assert_msg(strstr(said, "at step 8 (--seed unused: the batches, dropout and sampling go "
                               "on from the checkpoint's random state)"), "%s", said);
    /* another corpus with the same vocabulary: refused */
    snprintf(command, sizeof command,
             "head -c 20000 %s/text.txt > %s/short.txt && " HL_BUILD_DIR "/tokenize "
             "%s/short.txt --vocab-from %s/tokens1/model.safetensors --out %s/other",
             dir, dir, dir, dir, dir);
    tu_run_ok(command);
    /* --vocab-from reads the header only: a NaN in the weights (which every
     * loader of the model refuses) does not matter, a file cut short does.
     * The last 8 bytes hold NaN as two floats or one double. */
    snprintf(command, sizeof command,
             "cp %s/tokens1/model.safetensors %s/nan.safetensors && "
             "printf '\\000\\000\\300\\177\\000\\000\\370\\177' | dd of=%s/nan.safetensors "
             "bs=1 seek=$(($(stat -c %%s %s/nan.safetensors) - 8)) conv=notrunc status=none && "
             HL_BUILD_DIR "/tokenize %s/short.txt --vocab-from %s/nan.safetensors --out %s/nan",
             dir, dir, dir, dir, dir, dir, dir);
    tu_run_ok(command);
    char want[128], got[128];
    snprintf(want, sizeof want, "%s/other/train.tok", dir);
    snprintf(got, sizeof got, "%s/nan/train.tok", dir);
    ck_assert_msg(tu_same_file(want, got), "--vocab-from a file with a NaN weight");
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/heads eval --model %s/nan.safetensors --text abc --out %s/e", dir,
             dir);
    expect_failure(command, 2, "holds NaN");
    snprintf(command, sizeof command,
             "head -c -1 %s/nan.safetensors > %s/cut.safetensors && " HL_BUILD_DIR "/tokenize "
             "%s/short.txt --vocab-from %s/cut.safetensors --out %s/cut",
             dir, dir, dir, dir, dir);
    expect_failure(command, 2, "cut.safetensors");
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/charlm --tokens %s/other " TINY " --steps 16 --out %s/tokens1 "
             "--resume %s/tokens1/checkpoint.safetensors", dir, dir, dir);
    expect_failure(command, 2, "was not trained on");
    /* a checkpoint of a --data run names no token files: refused */
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/charlm --tokens %s/tok1 " TINY " --steps 16 --out %s/data1 "
             "--resume %s/data1/checkpoint.safetensors", dir, dir, dir);
    expect_failure(command, 2, "was not trained from token files");
    /* the same files under a path with a space, resumed twice (the second
     * reads the path back from the checkpoint) */
    snprintf(command, sizeof command,
             "cp -r %s/tok1 '%s/tok copy' && " HL_BUILD_DIR "/charlm --tokens '%s/tok copy' " TINY
             " --steps 14 --out %s/tokens1 --resume %s/tokens1/checkpoint.safetensors && "
             HL_BUILD_DIR "/charlm --tokens '%s/tok copy' " TINY " --steps 16 --out %s/tokens1 "
             "--resume %s/tokens1/checkpoint.safetensors", dir, dir, dir, dir, dir, dir, dir, dir);
    tu_run_ok(command);
    /* another vocabulary: refused on resume, and by heads */
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/charlm --tokens %s/tok0 " TINY " --steps 18 --out %s/tokens1 "
             "--resume %s/tokens1/checkpoint.safetensors", dir, dir, dir);
    expect_failure(command, 2, "another vocabulary");
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/heads scores --model %s/tokens1/model.safetensors --data "
             "%s/tok0/val.tok --out %s/h", dir, dir, dir);
    expect_failure(command, 2, "another vocabulary");
    /* heads reads the model's own token file as the text it encodes */
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/heads scores --model %s/tokens1/model.safetensors --data "
             "%s/tok1/val.tok --out %s/h1 && " HL_BUILD_DIR "/heads scores --model "
             "%s/tokens1/model.safetensors --data %s/text.txt --out %s/h2",
             dir, dir, dir, dir, dir, dir);
    tu_run_ok(command);
    remove_dir();
}
END_TEST

/* Writes a copy of src with len bytes of patch at `at` (or cut to `at` bytes
 * when patch is NULL) to dst. */
static void patched_copy(const char *src, const char *dst, long at, const void *patch,
                         size_t len)
{
    size_t size;
    unsigned char *b = hl_fs_read_file(src, &size);
    ck_assert_ptr_nonnull(b);
    if (patch)
        memcpy(b + at, patch, len);
    else
        size = (size_t)at;
    FILE *f = fopen(dst, "wb");
    ck_assert_uint_eq(fwrite(b, 1, size, f), size);
    fclose(f);
    free(b);
}

START_TEST(test_bad_token_files)
{
    make_dir();
    write_text();
    char command[2048], src[128], dst[128];
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/tokenize %s/text.txt --out %s/good && mkdir %s/bad", dir, dir,
             dir);
    tu_run_ok(command);
    const uint32_t nine = 9, three = 3;
    const uint64_t big = (uint64_t)1 << 40, hash = 42;
    const uint16_t token = 300;
    const struct {
        long at;
        const void *patch;
        size_t len;
        const char *says;
    } cases[] = {
        {0, "HLTOQ", 5, "magic"},     {8, &nine, 4, "version 9"},
        {12, &three, 4, "width 3"},   {16, &big, 8, "truncated"},
        {24, &nine, 4, "vocabulary size 9"},  {32, &hash, 8, "hash"},
        {40, &big, 8, "truncated"},   {100, NULL, 0, "truncated"},
        {5000, NULL, 0, "truncated"}, {128, &token, 2, "not below the vocabulary size"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        /* the bad token goes first in val.tok, where the first validation
         * window reads it */
        const char *name = cases[i].patch == &token ? "val.tok" : "train.tok";
        snprintf(command, sizeof command, "cp %s/good/*.tok %s/bad/", dir, dir);
        tu_run_ok(command);
        snprintf(src, sizeof src, "%s/good/%s", dir, name);
        snprintf(dst, sizeof dst, "%s/bad/%s", dir, name);
        patched_copy(src, dst, cases[i].at, cases[i].patch, cases[i].len);
        snprintf(command, sizeof command,
                 HL_BUILD_DIR "/charlm --tokens %s/bad " TINY " --out %s/run --val-windows 1",
                 dir, dir);
        expect_failure(command, 2, cases[i].says);
        expect_failure(command, 2, dst);
    }
    expect_failure(HL_BUILD_DIR "/charlm --tokens /nonexistent", 2, "/nonexistent/train.tok");
    expect_failure(HL_BUILD_DIR "/charlm --tokens x --data y", 2, "give one");
    expect_failure(HL_BUILD_DIR "/charlm --tokens x --vocab 300", 2, "token files");
    snprintf(command, sizeof command, HL_BUILD_DIR "/charlm --data %s/good/train.tok", dir);
    expect_failure(command, 2, "train.tok is a token file of build/tokenize");
    /* ... nor text to tokenize, nor a model whose vocabulary to take; nor is
     * a folder without config.json a model (read as a file before). */
    snprintf(command, sizeof command, HL_BUILD_DIR "/tokenize %s/good/val.tok --out %s/t", dir,
             dir);
    expect_failure(command, 2, "val.tok is a token file of tokenize, not text");
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/tokenize --pretrained tests/fixtures/gpt2-tokenizer --print "
             "%s/good/val.tok", dir);
    expect_failure(command, 2, "val.tok is a token file of tokenize, not text");
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/tokenize tests/main.c --vocab-from %s/good/val.tok --out %s/t", dir,
             dir);
    expect_failure(command, 2, "--vocab-from");
    expect_failure(command, 2, "val.tok is a token file; it takes a model");
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/tokenize tests/main.c --vocab-from %s/good --out %s/t", dir, dir);
    expect_failure(command, 2, "good is a folder without config.json: a model is a headlab "
                               "model file or a Hugging Face folder");
    /* tokenize's bad input */
    expect_failure(HL_BUILD_DIR "/tokenize --out /tmp/x", 2, "no text files");
    expect_failure(HL_BUILD_DIR "/tokenize /nonexistent.txt --out /tmp/x", 2,
                   "/nonexistent.txt");
    expect_failure(HL_BUILD_DIR "/tokenize tests/main.c", 2, "--out");
    expect_failure(HL_BUILD_DIR "/tokenize --out /tmp/x tests/main.c", 2,
                   "the text files come first, before every flag");
    expect_failure(HL_BUILD_DIR "/tokenize tests/main.c --out /tmp/x --tokenizer bpe", 2,
                   "--learn");
    expect_failure(HL_BUILD_DIR "/tokenize tests/main.c --out /tmp/x --learn 100", 2,
                   "--learn");
    expect_failure(HL_BUILD_DIR "/tokenize tests/main.c --out /tmp/x --vocab-from /nonexist",
                   2, "/nonexist");
    expect_failure(HL_BUILD_DIR "/tokenize tests/main.c --out /tmp/x --val-fraction 1", 2,
                   "--val-fraction");
    /* A disk that fills while val.tok is written (a file-size limit between
     * the two files' sizes): exit 2 naming the file and its reason, and both
     * token files of the run before as they were (train.tok was replaced
     * before val.tok was begun). */
    snprintf(command, sizeof command,
             "mkdir %s/before && cp %s/good/*.tok %s/before/ && "
             "for i in $(seq 40); do cat %s/text.txt; done > %s/long.txt && trap '' XFSZ && "
             "ulimit -f 1000 && " HL_BUILD_DIR "/tokenize %s/long.txt --out %s/good "
             "--val-fraction 0.9", dir, dir, dir, dir, dir, dir, dir);
    expect_failure(command, 2, "val.tok: File too large");
    for (int i = 0; i < 2; i++) {
        snprintf(src, sizeof src, "%s/before/%s.tok", dir, i ? "val" : "train");
        snprintf(dst, sizeof dst, "%s/good/%s.tok", dir, i ? "val" : "train");
        ck_assert_msg(tu_same_file(src, dst), "%s changed", dst);
    }
    snprintf(command, sizeof command, "test $(ls %s/good | wc -l) = 2", dir);
    tu_run_ok(command);
    remove_dir();
}
END_TEST

/* tokenize --pretrained: token files whose vocabulary reads back without the
 * folder and whose tokens are the text's; --print gives GPT-2's ids of a
 * file on one line; the flags' conflicts are refused. */
START_TEST(test_tokenize_pretrained)
{
    make_dir();
    write_text();
    char command[1024], out[4096], path[128];
    snprintf(command, sizeof command, HL_BUILD_DIR "/tokenize %s/text.txt --pretrained "
             "tests/fixtures/gpt2-tokenizer --out %s/tok", dir, dir);
    tu_run_ok(command);
    hl_error err = {0};
    hl_vocab *v = hl_vocab_load_pretrained("tests/fixtures/gpt2-tokenizer", &err);
    ck_assert_msg(v, "%s", err.message);
    snprintf(path, sizeof path, "%s/text.txt", dir);
    size_t n;
    unsigned char *text = hl_fs_read_file(path, &n);
    ck_assert_ptr_nonnull(text);
    /* Each file holds the tokens of its part: the last n/10 bytes are val's. */
    const size_t n_val = (size_t)((double)n * 0.1), begin[] = {0, n - n_val}, end[] = {n - n_val, n};
    static const char *const parts[] = {"train.tok", "val.tok"};
    for (int i = 0; i < 2; i++) {
        int32_t *tokens;
        size_t n_tokens;
        ck_assert(hl_vocab_encode(v, text + begin[i], end[i] - begin[i], &tokens, &n_tokens,
                                  &err) == HL_OK);
        snprintf(path, sizeof path, "%s/tok/%s", dir, parts[i]);
        hl_token_file *f = hl_token_file_open(path, &err);
        ck_assert_msg(f, "%s", err.message);
        ck_assert_str_eq(hl_vocab_kind(hl_token_file_vocab(f)), "pretrained");
        ck_assert_uint_eq(hl_token_file_header(f)->n_tokens, n_tokens);
        int32_t *read = malloc(sizeof *read * (n_tokens + 1));
        ck_assert(hl_token_file_read(f, 0, n_tokens, read, &err) == HL_OK);
        ck_assert(!memcmp(read, tokens, sizeof *read * n_tokens));
        free(read);
        free(tokens);
        hl_token_file_close(f);
    }
    free(text);
    hl_vocab_free(v);
    snprintf(path, sizeof path, "%s/hello.txt", dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("Hello world\n", f);
    fclose(f);
    snprintf(command, sizeof command, HL_BUILD_DIR "/tokenize --pretrained "
             "tests/fixtures/gpt2-tokenizer/tokenizer.json --print %s", path);
    ck_assert_int_eq(tu_run(command, out, sizeof out), 0);
    ck_assert_str_eq(out, "15496 995 198\n");
    expect_failure(HL_BUILD_DIR "/tokenize --pretrained /nonexistent --print tests/main.c", 2,
                   "/nonexistent");
    expect_failure(HL_BUILD_DIR "/tokenize --pretrained tests/fixtures/gpt2-tokenizer --print "
                   "tests/main.c --out /tmp/x", 2, "--print FILE encodes that one file");
    expect_failure(HL_BUILD_DIR "/tokenize tests/main.c --out /tmp/x --pretrained d "
                   "--learn 300", 2, "--pretrained takes that vocabulary as it is");
    expect_failure(HL_BUILD_DIR "/tokenize tests/main.c --out /tmp/x --pretrained d "
                   "--vocab-from m", 2, "one vocabulary, not two");
    /* --vocab-from a model folder: its tokenizer, which must fit the model's
     * config; a folder without one says why */
    expect_failure(HL_BUILD_DIR "/tokenize tests/main.c --out /tmp/x --vocab-from "
                   "tests/fixtures/hf/gpt2_tiny", 2, "no tokenizer.json");
    snprintf(command, sizeof command,
             "mkdir %s/gpt2 && cp tests/fixtures/hf/gpt2_tiny/config.json "
             "tests/fixtures/gpt2-tokenizer/tokenizer.json %s/gpt2/ && " HL_BUILD_DIR
             "/tokenize %s/text.txt --vocab-from %s/gpt2 --out %s/small", dir, dir, dir, dir, dir);
    expect_failure(command, 2, "the tokenizer has 50257 tokens, more than the model's 512");
    snprintf(command, sizeof command,
             "sed -i 's/\"vocab_size\": 512/\"vocab_size\": 50257/' %s/gpt2/config.json && "
             HL_BUILD_DIR "/tokenize %s/text.txt --vocab-from %s/gpt2 --out %s/folder",
             dir, dir, dir, dir);
    tu_run_ok(command);
    char want[128], got[128];
    snprintf(want, sizeof want, "%s/tok/train.tok", dir);
    snprintf(got, sizeof got, "%s/folder/train.tok", dir);
    ck_assert_msg(tu_same_file(want, got), "--vocab-from a folder and --pretrained differ");
    remove_dir();
}
END_TEST

/* A header of the bytes vocabulary for n 2-byte tokens (all zero: token 0). */
static void sparse_token_file(const char *path, uint64_t n)
{
    const char *vocab = "headlab-words-1";
    unsigned char h[128] = "HLTOK";
    const uint32_t version = 1, width = 2, size = 256;
    const uint64_t len = strlen(vocab), hash = hl_token_vocab_hash(vocab, len), bytes = n;
    memcpy(h + 8, &version, 4);
    memcpy(h + 12, &width, 4);
    memcpy(h + 16, &n, 8);
    memcpy(h + 24, &size, 4);
    memcpy(h + 32, &hash, 8);
    memcpy(h + 40, &len, 8);
    memcpy(h + 48, &bytes, 8);
    memcpy(h + 64, vocab, len);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(h, 1, sizeof h, f), sizeof h);
    ck_assert_int_eq(ftruncate(fileno(f), (off_t)(128 + 2 * n)), 0);
    fclose(f);
}

/* A 3 GB token file (sparse: it takes no disk) trains a step, and the
 * process's peak resident memory stays far below the file's size: windows
 * are read where they lie, nothing reads the file whole. The bound, 448 MiB,
 * is below the smaller (validation) file's 512 MiB, so reading either file
 * whole fails it, and it leaves room for AddressSanitizer. */
START_TEST(test_sparse_multi_gb_file_trains_in_little_memory)
{
    make_dir();
    char path[128], command[1024];
    snprintf(path, sizeof path, "%s/train.tok", dir);
    sparse_token_file(path, (uint64_t)3 << 29); /* 1.6e9 tokens, 3 GiB */
    snprintf(path, sizeof path, "%s/val.tok", dir);
    sparse_token_file(path, (uint64_t)1 << 28); /* 512 MiB */
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/charlm --tokens %s --steps 1 --eval-every 1 --d-model 16 "
             "--heads 2 --layers 1 --ctx 16 --batch 4 --sample 0 --no-report --out %s/run "
             ">/dev/null",
             dir, dir);
    char measure[1200];
    snprintf(measure, sizeof measure, HL_BUILD_DIR "/test_headlab --peak-rss '%s'", command);
    FILE *p = popen(measure, "r");
    ck_assert_ptr_nonnull(p);
    long peak_kib = -1;
    const int read = fscanf(p, "%ld", &peak_kib);
    ck_assert_msg(pclose(p) == 0 && read == 1, "%s failed", command);
    ck_assert_msg(peak_kib < 448 * 1024, "peak RSS %ld KiB from a 3 GiB token file", peak_kib);
    /* --data on a text that would not fit the memory allowed: exit 2, pointing to
     * tokenize, before reading it; first under an address-space limit (not
     * under AddressSanitizer, which reserves terabytes of address space for
     * its shadow memory), then as a text of 8 GiB, whose tokens would need 64
     * GiB, more than this machine has */
#ifndef __SANITIZE_ADDRESS__
    snprintf(command, sizeof command,
             "truncate -s 1G %s/big.txt && ulimit -v 1500000 && " HL_BUILD_DIR
             "/charlm --data %s/big.txt --out %s/big", dir, dir, dir);
    expect_failure(command, 2, "build/tokenize");
#endif
    snprintf(command, sizeof command,
             "truncate -s 8G %s/huge.txt && " HL_BUILD_DIR "/charlm --data %s/huge.txt --out %s/huge",
             dir, dir, dir);
    expect_failure(command, 2, "build/tokenize");
    remove_dir();
}
END_TEST

/* --val-fraction F: the last size·F bytes validate, size·F taken as the
 * decimal F is (100 bytes at 0.29: 29, where the double 0.29 gives 28.99..). */
START_TEST(test_tokenize_val_fraction)
{
    make_dir();
    write_text();
    char command[512], out[2048];
    static const struct {
        const char *fraction;
        int val;
    } cases[] = {{"0.29", 29}, {"0.1", 10}, {"0.57", 57}, {"0.333", 33}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        snprintf(command, sizeof command,
                 "head -c 100 %s/text.txt > %s/100.txt && " HL_BUILD_DIR "/tokenize "
                 "%s/100.txt --out %s/split --val-fraction %s", dir, dir, dir, dir,
                 cases[i].fraction);
        ck_assert_msg(tu_run(command, out, sizeof out) == 0, "%s", out);
        char want[64];
        snprintf(want, sizeof want, "val.tok (%d tokens)", cases[i].val);
        ck_assert_msg(strstr(out, want), "--val-fraction %s: %s", cases[i].fraction, out);
    }
    remove_dir();
}
END_TEST

Suite *tokens_suite(void)
{
    Suite *s = suite_create("tokens");
    TCase *tc = tcase_create("tokens");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_tokenize_same_for_any_thread_count);
    tcase_add_test(tc, test_charlm_tokens_bitwise_and_resume);
    tcase_add_test(tc, test_bad_token_files);
    tcase_add_test(tc, test_tokenize_val_fraction);
    tcase_add_test(tc, test_tokenize_pretrained);
    tcase_add_test(tc, test_sparse_multi_gb_file_trains_in_little_memory);
    suite_add_tcase(s, tc);
    return s;
}
