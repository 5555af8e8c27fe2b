/* Tests for text/bpe_*.c: GPT-2's chunks on bytes, the C learner and encoder
 * against tests/make_bpe_fixtures.py's plain implementation (identical merges
 * and tokens), round trips on any bytes, the stored form and each refusal of
 * its parser, and a model file that keeps a BPE vocabulary. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "io/model_io.h"
#include "text/vocab.h"

#include "tests/testutil.h"

static unsigned char *read_fixture(const char *name, size_t *n)
{
    char path[256];
    snprintf(path, sizeof path, "tests/fixtures/bpe/%s", name);
    unsigned char *bytes = hl_fs_read_file(path, n);
    ck_assert_msg(bytes, "cannot read %s", path);
    bytes = realloc(bytes, *n + 1); /* NUL-terminated, to read as a string */
    ck_assert_ptr_nonnull(bytes);
    bytes[*n] = 0;
    return bytes;
}

/* decode(encode(text)) is text, byte for byte; the tokens are returned. */
static int32_t *round_trip(const hl_vocab *v, const unsigned char *text, size_t n,
                           size_t *n_tokens)
{
    hl_error err = {0};
    int32_t *tokens;
    unsigned char *back;
    size_t back_len;
    ck_assert_msg(hl_vocab_encode(v, text, n, &tokens, n_tokens, &err) == HL_OK, "%s",
                  err.message);
    ck_assert_msg(hl_vocab_decode(v, tokens, *n_tokens, &back, &back_len, &err) == HL_OK, "%s",
                  err.message);
    ck_assert_uint_eq(back_len, n);
    ck_assert(memcmp(back, text, n) == 0);
    free(back);
    return tokens;
}

START_TEST(test_chunks)
{
    const char *s = "And the LORD's 12 men,  go!!\n\n\tthen  \t x\xc3\xa9y  ";
    const char *expect[] = {"And", " the", " LORD", "'", "s", " 12", " men", ",", " ",
                            " go", "!!", "\n\n", "\t", "then", "  \t", " x\xc3\xa9y", "  "};
    const size_t n = strlen(s), n_expect = sizeof expect / sizeof expect[0];
    size_t i = 0, k = 0;
    for (; i < n; k++) {
        const size_t end = hl_bpe_next_chunk((const unsigned char *)s, n, i);
        ck_assert_uint_lt(k, n_expect);
        ck_assert_msg(end - i == strlen(expect[k]) && !memcmp(s + i, expect[k], end - i),
                      "chunk %zu: \"%.*s\", expected \"%s\"", k, (int)(end - i), s + i,
                      expect[k]);
        i = end;
    }
    ck_assert_uint_eq(k, n_expect);
}
END_TEST

/* The tokens of the line of encodings.txt that begins with key,
 * "<merges> <text>: id id ...". */
static int32_t *fixture_tokens(const char *encodings, const char *key, size_t *n)
{
    const char *line = encodings;
    while (line && strncmp(line, key, strlen(key)) != 0)
        line = (line = strchr(line, '\n')) ? line + 1 : NULL;
    ck_assert_msg(line, "encodings.txt has no line \"%s\"", key);
    const char *p = line + strlen(key);
    int32_t *tokens = malloc(sizeof *tokens * strlen(p));
    *n = 0;
    while (*p && *p != '\n') {
        char *end;
        tokens[(*n)++] = (int32_t)strtol(p, &end, 10);
        ck_assert_ptr_ne(end, p);
        p = end;
    }
    return tokens;
}

/* The C learner gives the Python script's merges and its encodings, on the
 * training text and on one it never saw; merges_all also checks the stop rule
 * (no pair twice) and the piece limit (the runs of "a" and "-" reach it),
 * merges_ab the counts of overlapping pairs ("aaa", "abab"). */
START_TEST(test_fixtures)
{
    const char *names[] = {"merges_300", "merges_all", "merges_ab"};
    const int sizes[] = {300, HL_VOCAB_MAX, HL_VOCAB_MAX};
    size_t n_train, n_ab, n_unseen, n_enc, n_want;
    unsigned char *train = read_fixture("train.txt", &n_train);
    unsigned char *ab = read_fixture("ab.txt", &n_ab);
    unsigned char *unseen = read_fixture("unseen.bin", &n_unseen);
    char *encodings = (char *)read_fixture("encodings.txt", &n_enc);
    for (int m = 0; m < 3; m++) {
        unsigned char *text = m == 2 ? ab : train;
        const size_t n_text = m == 2 ? n_ab : n_train;
        char file[64], key[64];
        snprintf(file, sizeof file, "%s.txt", names[m]);
        char *want = (char *)read_fixture(file, &n_want);
        hl_error err = {0};
        hl_vocab *v = hl_vocab_learn_bpe(text, n_text, sizes[m], &err);
        ck_assert_msg(v, "%s", err.message);
        ck_assert_str_eq(hl_vocab_kind(v), "bpe");
        char *got = hl_vocab_format(v);
        ck_assert_msg(!strcmp(got, want), "%s differs:\n%s", names[m], got);
        for (int t = 0; t < 2; t++) {
            snprintf(key, sizeof key, "%s %s: ", names[m], t ? "unseen" : "train");
            size_t n_tokens, n_expect;
            int32_t *tokens = round_trip(v, t ? unseen : text, t ? n_unseen : n_text, &n_tokens);
            int32_t *expect = fixture_tokens(encodings, key, &n_expect);
            ck_assert_uint_eq(n_tokens, n_expect);
            for (size_t i = 0; i < n_tokens; i++)
                ck_assert_msg(tokens[i] == expect[i], "%s token %zu is %d, expected %d", key,
                              i, tokens[i], expect[i]);
            free(tokens);
            free(expect);
        }
        free(got);
        free(want);
        hl_vocab_free(v);
    }
    free(train);
    free(ab);
    free(unseen);
    free(encodings);
}
END_TEST

/* Any bytes round-trip, 0x00 and 0x80..0xff included, through a vocabulary
 * learnt from text and from noise; repeated text costs fewer tokens. */
START_TEST(test_round_trips)
{
    hl_rng rng;
    hl_rng_seed(&rng, 11);
    enum { N = 20000 };
    unsigned char *noise = malloc(N);
    for (size_t i = 0; i < N; i++)
        noise[i] = (unsigned char)hl_rng_below(&rng, 256);
    size_t n_train, n_tokens;
    unsigned char *train = read_fixture("train.txt", &n_train);
    hl_error err = {0};
    hl_vocab *vocabs[] = {hl_vocab_learn_bpe(train, n_train, 1000, &err),
                          hl_vocab_learn_bpe(noise, N, 600, &err)};
    for (int k = 0; k < 2; k++) {
        ck_assert_msg(vocabs[k], "%s", err.message);
        free(round_trip(vocabs[k], noise, N, &n_tokens));
        free(round_trip(vocabs[k], noise + 17, 1, &n_tokens));
        free(round_trip(vocabs[k], noise, 0, &n_tokens));
        ck_assert_uint_eq(n_tokens, 0);
        free(round_trip(vocabs[k], train, n_train, &n_tokens));
        if (k == 0)
            ck_assert_uint_lt(n_tokens, n_train / 2);
    }
    /* Learnt from noise, it merges pairs of noise bytes: fewer tokens there. */
    free(round_trip(vocabs[1], noise, N, &n_tokens));
    ck_assert_uint_lt(n_tokens, N);
    hl_vocab_free(vocabs[0]);
    hl_vocab_free(vocabs[1]);
    /* Too small or too large a size. */
    ck_assert_ptr_null(hl_vocab_learn_bpe(train, n_train, 256, &err));
    ck_assert_int_eq(err.status, HL_ERR_ARG);
    ck_assert_msg(strstr(err.message, "257..1048576 tokens, not 256"), "%s", err.message);
    /* A text with no pair twice learns no merge: the bytes. */
    hl_error_clear(&err);
    hl_vocab *none = hl_vocab_learn_bpe((const unsigned char *)"abc", 3, 300, &err);
    ck_assert_msg(none, "%s", err.message);
    ck_assert_int_eq(hl_vocab_size(none), 256);
    ck_assert_str_eq(hl_vocab_kind(none), "bytes");
    hl_vocab_free(none);
    free(noise);
    free(train);
}
END_TEST

/* The stored form reads back to the same merges and pieces; the kinds. */
START_TEST(test_format_round_trip)
{
    /* " t", "he", " the", "  the" (two merges of the same bytes are fine) */
    const int32_t merges[] = {' ', 't', 'h', 'e', 256, 257, ' ', 258};
    hl_error err = {0};
    hl_vocab *v = hl_vocab_from_merges(merges, 4, &err);
    ck_assert_msg(v, "%s", err.message);
    char *s = hl_vocab_format(v);
    ck_assert_str_eq(s, "headlab-bpe-1\n32 116\n104 101\n256 257\n32 258");
    hl_vocab *back = hl_vocab_parse(s, &err);
    ck_assert_msg(back, "%s", err.message);
    ck_assert_str_eq(hl_vocab_kind(back), "bpe");
    ck_assert_int_eq(hl_vocab_size(back), 260);
    size_t len;
    const unsigned char *p = hl_vocab_piece(back, 259, &len);
    ck_assert(len == 5 && !memcmp(p, "  the", 5));
    int32_t left, right;
    ck_assert(hl_vocab_merge(back, 258, &left, &right) && left == 256 && right == 257);
    ck_assert(!hl_vocab_merge(back, 'a', &left, &right));
    ck_assert(!hl_vocab_merge(back, 260, &left, &right));
    /* " the" is one token; "  the" is " " and " the" by the chunks. */
    int32_t *tokens;
    size_t n;
    ck_assert_int_eq(hl_vocab_encode(back, (const unsigned char *)"  the", 5, &tokens, &n, &err),
                     HL_OK);
    ck_assert(n == 2 && tokens[0] == ' ' && tokens[1] == 258);
    free(tokens);
    free(s);
    hl_vocab_free(back);
    hl_vocab_free(v);
    /* The other kinds, and a words vocabulary has no merges. */
    hl_vocab *bytes = hl_vocab_bytes();
    ck_assert_str_eq(hl_vocab_kind(bytes), "bytes");
    const unsigned char *pieces[] = {(const unsigned char *)" the"};
    hl_vocab *words = hl_vocab_from_pieces(pieces, (size_t[]){4}, 1, &err);
    ck_assert_str_eq(hl_vocab_kind(words), "words");
    ck_assert(!hl_vocab_merge(words, 256, &left, &right));
    /* BPE learnt from a text without a repeated pair has no merge: it is
     * stored as the bytes are, as a model of 256 tokens keeps them (stored
     * as BPE, its token files did not match the model's on --resume). */
    const char *no_pair = "a.b,c;d:e!f?g";
    hl_vocab *none = hl_vocab_learn_bpe((const unsigned char *)no_pair, strlen(no_pair), 300,
                                        &err);
    ck_assert_msg(none, "%s", err.message);
    ck_assert_int_eq(hl_vocab_size(none), HL_VOCAB_BYTES);
    char *a = hl_vocab_format(none), *b = hl_vocab_format(bytes);
    ck_assert_str_eq(a, b);
    free(a);
    free(b);
    hl_vocab_free(none);
    hl_vocab_free(words);
    hl_vocab_free(bytes);
}
END_TEST

static void expect_parse_error(const char *text, const char *message)
{
    hl_error err = {0};
    hl_vocab *v = hl_vocab_parse(text, &err);
    ck_assert_msg(!v, "parsed \"%s\"", text);
    ck_assert_int_eq(err.status, HL_ERR_FORMAT);
    ck_assert_msg(strstr(err.message, message), "\"%s\": %s", text, err.message);
}

START_TEST(test_bad_merges)
{
    expect_parse_error("headlab-bpe-2\n32 116", "does not begin with \"headlab-words-1\", "
                                                "\"headlab-bpe-1\" or \"headlab-pretrained-1\"");
    expect_parse_error("headlab-bpe-1x", "does not begin with");
    expect_parse_error("headlab-bpe-1\n32 116\n104", "line 3: \"104\" is not two token ids");
    expect_parse_error("headlab-bpe-1\n32 116\n104 x", "line 3: \"104 x\" is not two");
    expect_parse_error("headlab-bpe-1\n32  116", "line 2: \"32  116\" is not two");
    expect_parse_error("headlab-bpe-1\n-1 116", "line 2: \"-1 116\" is not two");
    expect_parse_error("headlab-bpe-1\n32 116 ", "line 2: \"32 116 \" is not two");
    expect_parse_error("headlab-bpe-1\n32 116\n", "line 3: \"\" is not two");
    expect_parse_error("headlab-bpe-1\n32 12345678", "line 2: \"32 12345678\" is not two");
    expect_parse_error("headlab-bpe-1\n32 116\n256 257",
                       "vocab line 3: merges 256 and 257, but token 257 can merge only tokens "
                       "0..256");
    expect_parse_error("headlab-bpe-1\n32 116\n104 101\n32 116",
                       "vocab lines 2 and 4 merge the same pair (32 116)");
    /* 97 97 is "aa", then doubling: 4, 8, 16, 32 bytes; 32 + 16 = 48 fits,
     * 32 + 32 does not. */
    expect_parse_error("headlab-bpe-1\n97 97\n256 256\n257 257\n258 258\n259 259\n260 259\n"
                       "260 260",
                       "vocab line 8: a piece of 64 bytes; at most 48");
    /* Too many: one newline more than HL_VOCAB_MAX - 256 merges allow. */
    const size_t lines = HL_VOCAB_MAX - HL_VOCAB_BYTES + 1;
    char *many = malloc(strlen("headlab-bpe-1") + lines + 1);
    strcpy(many, "headlab-bpe-1");
    memset(many + strlen(many), '\n', lines);
    many[strlen("headlab-bpe-1") + lines] = 0;
    expect_parse_error(many, "1048321 merges; at most 1048320 fit");
    free(many);
    /* The same rules through the API name tokens. */
    hl_error err = {0};
    ck_assert_ptr_null(hl_vocab_from_merges((const int32_t[]){32, 116, 32, 116}, 2, &err));
    ck_assert_int_eq(err.status, HL_ERR_ARG);
    ck_assert_msg(strstr(err.message, "vocab tokens 256 and 257 merge the same pair (32 116)"),
                  "%s", err.message);
    hl_error_clear(&err);
    ck_assert_ptr_null(hl_vocab_from_merges((const int32_t[]){32, -4}, 1, &err));
    ck_assert_msg(strstr(err.message, "vocab token 256: merges 32 and -4"), "%s", err.message);
}
END_TEST

/* A model file keeps its BPE vocabulary and reads it back as BPE. */
START_TEST(test_model_file_keeps_bpe)
{
    char dir[] = "/tmp/hl_bpe_XXXXXX", path[128], command[160];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/m.safetensors", dir);
    size_t n_train;
    unsigned char *train = read_fixture("train.txt", &n_train);
    hl_error err = {0};
    hl_vocab *v = hl_vocab_learn_bpe(train, n_train, 300, &err);
    ck_assert_int_eq(hl_vocab_size(v), 300);
    hl_gpt_config cfg = {.vocab_in = 300, .vocab_out = 300, .n_ctx = 8, .d_model = 8,
                         .n_heads = 2, .n_layers = 1, .norm = HL_GPT_NORM_LAYER, .emb_std = 0.02};
    hl_gpt *m = hl_gpt_new(&cfg, &err);
    ck_assert_msg(m, "%s", err.message);
    hl_gpt_meta meta = {.task = "charlm", .step = 3, .vocab = v};
    ck_assert_msg(hl_gpt_save_meta(path, m, &meta, &err) == HL_OK, "%s", err.message);
    hl_gpt_meta back;
    hl_gpt *loaded = hl_gpt_load_meta(path, &back, &err);
    ck_assert_msg(loaded, "%s", err.message);
    ck_assert_str_eq(hl_vocab_kind(back.vocab), "bpe");
    char *a = hl_vocab_format(v), *b = hl_vocab_format(back.vocab);
    ck_assert_str_eq(a, b);
    free(a);
    free(b);
    hl_gpt_free(loaded);
    hl_gpt_meta_clear(&back);
    hl_gpt_free(m);
    hl_vocab_free(v);
    free(train);
    snprintf(command, sizeof command, "rm -rf %s", dir);
    ck_assert_int_eq(system(command), 0);
}
END_TEST

Suite *bpe_suite(void)
{
    Suite *s = suite_create("bpe");
    TCase *tc = tcase_create("bpe");
    tcase_add_test(tc, test_chunks);
    tcase_add_test(tc, test_fixtures);
    tcase_add_test(tc, test_round_trips);
    tcase_add_test(tc, test_format_round_trip);
    tcase_add_test(tc, test_bad_merges);
    tcase_add_test(tc, test_model_file_keeps_bpe);
    suite_add_tcase(s, tc);
    return s;
}
