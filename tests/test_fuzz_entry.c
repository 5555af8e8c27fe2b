/* Tests for tests/fuzz/fuzz_entry.c: every committed fuzz input (the seed
 * corpora and the regressions, inputs that once crashed) replayed through the
 * harness bodies in the normal build, so a fixed crash stays fixed. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/fuzz_entry.h"
#include "tests/testutil.h"

static const struct {
    const char *name;
    hl_fuzz_fn fn;
} harnesses[] = {
    {"safetensors", hl_fuzz_safetensors},
    {"checkpoint", hl_fuzz_checkpoint},
    {"gpt", hl_fuzz_gpt},
    {"cli", hl_fuzz_cli},
    {"patch_pairs", hl_fuzz_patch_pairs},
    {"vocab", hl_fuzz_vocab},
    {"csv", hl_fuzz_csv},
    {"token_file", hl_fuzz_token_file},
    {"token_ids", hl_fuzz_token_ids},
    {"tokenizer_json", hl_fuzz_tokenizer_json},
    {"vocab_merges", hl_fuzz_vocab_merges},
    {"hf_config", hl_fuzz_hf_config},
    {"hf_index", hl_fuzz_hf_index},
};

static uint8_t *read_all(const char *path, size_t *size)
{
    FILE *fp = fopen(path, "rb");
    ck_assert_msg(fp, "cannot open %s", path);
    uint8_t *bytes = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n == cap) {
            cap = cap ? 2 * cap : 4096;
            bytes = realloc(bytes, cap);
            ck_assert_ptr_nonnull(bytes);
        }
        size_t got = fread(bytes + n, 1, cap - n, fp);
        n += got;
        if (got == 0)
            break;
    }
    fclose(fp);
    *size = n;
    return bytes;
}

/* Runs fn on every file of dir; returns how many, or -1 when dir is missing
 * (which the callers fail on: a renamed folder must not replay nothing). */
static int replay_dir(const char *dir, hl_fuzz_fn fn)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int count = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        size_t size;
        uint8_t *bytes = read_all(path, &size);
        fn(bytes, size);
        free(bytes);
        count++;
    }
    closedir(d);
    return count;
}

START_TEST(test_replay_corpus_and_regressions)
{
    const int i = _i;
    char dir[256];
    snprintf(dir, sizeof dir, "tests/fuzz/corpus/%s", harnesses[i].name);
    int seeds = replay_dir(dir, harnesses[i].fn);
    ck_assert_msg(seeds > 0, "no seed inputs in %s", dir);
    snprintf(dir, sizeof dir, "tests/fuzz/regressions/%s", harnesses[i].name);
    ck_assert_msg(replay_dir(dir, harnesses[i].fn) >= 0, "%s is missing", dir);
    /* and a folder that is not there is told apart from an empty one */
    ck_assert_int_eq(replay_dir("tests/fuzz/regressions/no-such-harness", harnesses[i].fn), -1);
}
END_TEST

Suite *fuzz_entry_suite(void)
{
    Suite *s = suite_create("fuzz_entry");
    TCase *tc = tcase_create("fuzz_entry");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_replay_corpus_and_regressions, 0,
                        (int)(sizeof harnesses / sizeof harnesses[0]));
    suite_add_tcase(s, tc);
    return s;
}
