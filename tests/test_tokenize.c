/* Tests for data/tokenize.c and text/vocab_cut.c: text encoded in chunks cut
 * by hl_vocab_cut gives the tokens of the whole text, for every vocabulary
 * kind and chunk size, and the same file for 1 and 2 threads. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/testutil.h"

/* A text of n bytes drawn from pieces that stress the pre-tokenizers: runs of
 * spaces and newlines, letters, digits, punctuation, UTF-8. */
static unsigned char *random_text(size_t n, uint64_t seed)
{
    static const char *parts[] = {" the", " LORD", "And", "\n", "\n\n", "  ", " ", "12", "3",
                                  ",", ".", ";", "'s", "\t", "\r\n", "x", "\xc3\xa9",
                                  " of", "God", "  the", "\n ", " \n", "(", "))"};
    hl_rng rng;
    hl_rng_seed(&rng, seed);
    unsigned char *t = malloc(n + 8);
    size_t at = 0;
    while (at < n) {
        const char *p = parts[(size_t)(hl_rng_uniform(&rng) * (sizeof parts / sizeof *parts))];
        for (size_t i = 0; p[i] && at < n; i++)
            t[at++] = (unsigned char)p[i];
    }
    return t;
}

/* Every cut hl_vocab_cut finds splits text into parts whose tokens are the
 * whole text's. */
static void check_cuts(const hl_vocab *v, const unsigned char *t, size_t n)
{
    hl_error err = {0};
    int32_t *whole, *a, *b;
    size_t n_whole, n_a, n_b;
    ck_assert_int_eq(hl_vocab_encode(v, t, n, &whole, &n_whole, &err), HL_OK);
    int cuts = 0;
    for (size_t from = 0; from < n;) {
        const size_t p = hl_vocab_cut(v, t, n, from);
        if (p >= n)
            break;
        ck_assert_int_eq(hl_vocab_encode(v, t, p, &a, &n_a, &err), HL_OK);
        ck_assert_int_eq(hl_vocab_encode(v, t + p, n - p, &b, &n_b, &err), HL_OK);
        ck_assert_msg(n_a + n_b == n_whole && !memcmp(a, whole, sizeof *a * n_a) &&
                          !memcmp(b, whole + n_a, sizeof *b * n_b),
                      "%s: cutting at %zu changes the tokens", hl_vocab_kind(v), p);
        free(a);
        free(b);
        cuts++;
        from = p + 1;
    }
    ck_assert_int_gt(cuts, 10);
    free(whole);
}

START_TEST(test_cuts_keep_the_tokens)
{
    const size_t n = 3000;
    unsigned char *t = random_text(n, 7);
    hl_error err = {0};
    hl_vocab *v[3] = {hl_vocab_bytes(), hl_vocab_learn(t, n, 320, &err),
                      hl_vocab_learn_bpe(t, n, 400, &err)};
    for (int k = 0; k < 3; k++) {
        ck_assert_msg(v[k], "%s", err.message);
        check_cuts(v[k], t, n);
        hl_vocab_free(v[k]);
    }
    free(t);
    /* CRLF lines and Chinese without spaces: places at every line end for
     * the learnt vocabularies (there were none). */
    static const char crlf[] = "\xe4\xb8\xad\xe6\x96\x87\xe3\x80\x82\r\n";
    const size_t m = 60 * (sizeof crlf - 1);
    unsigned char *lines = malloc(m);
    for (size_t i = 0; i < m; i += sizeof crlf - 1)
        memcpy(lines + i, crlf, sizeof crlf - 1);
    hl_vocab *learnt[2] = {hl_vocab_learn(lines, m, 300, &err),
                           hl_vocab_learn_bpe(lines, m, 300, &err)};
    for (int k = 0; k < 2; k++) {
        ck_assert_msg(learnt[k], "%s", err.message);
        ck_assert_uint_eq(hl_vocab_cut(learnt[k], lines, m, 0), sizeof crlf - 3);
        check_cuts(learnt[k], lines, m);
        hl_vocab_free(learnt[k]);
    }
    free(lines);
}
END_TEST

/* text through hl_tokenize_block in blocks of `block` bytes and chunks of
 * `chunk` into path, as a program streams it. */
static void tokenize_file(const hl_vocab *v, const unsigned char *t, size_t n, size_t block,
                          size_t chunk, const char *path)
{
    hl_error err = {0};
    hl_token_writer *w = hl_token_writer_begin(path, v, &err);
    ck_assert_msg(w, "%s", err.message);
    unsigned char *buf = malloc(n + 1);
    size_t have = 0, fed = 0, cap = block;
    for (;;) {
        const size_t take = cap - have < n - fed ? cap - have : n - fed;
        memcpy(buf + have, t + fed, take);
        have += take;
        fed += take;
        size_t used;
        ck_assert_int_eq(hl_tokenize_block(v, buf, have, chunk, fed == n, w, &used, &err),
                         HL_OK);
        memmove(buf, buf + used, have - used);
        have -= used;
        if (fed == n)
            break;
        if (used == 0 && have == cap)
            cap *= 2;
    }
    ck_assert_int_eq(have, 0);
    ck_assert_int_eq(hl_token_writer_commit(w, &err), HL_OK);
    free(buf);
}

START_TEST(test_blocks_equal_the_whole_text)
{
    const size_t n = 20000;
    unsigned char *t = random_text(n, 11);
    hl_error err = {0};
    hl_vocab *v[3] = {hl_vocab_bytes(), hl_vocab_learn(t, n, 320, &err),
                      hl_vocab_learn_bpe(t, n, 500, &err)};
    const char *whole = "/tmp/hl-tokenize-whole.tok", *parts = "/tmp/hl-tokenize-parts.tok";
    for (int k = 0; k < 3; k++) {
        int32_t *tokens;
        size_t n_tokens;
        ck_assert_int_eq(hl_vocab_encode(v[k], t, n, &tokens, &n_tokens, &err), HL_OK);
        hl_token_writer *w = hl_token_writer_begin(whole, v[k], &err);
        ck_assert_int_eq(hl_token_writer_put(w, tokens, n_tokens, n, &err), HL_OK);
        ck_assert_int_eq(hl_token_writer_commit(w, &err), HL_OK);
        free(tokens);
        const size_t shapes[][2] = {{n, n}, {4096, 100}, {1000, 1}, {50, 7}, {16, 16}};
        for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
            tokenize_file(v[k], t, n, shapes[s][0], shapes[s][1], parts);
            ck_assert_msg(tu_same_file(whole, parts), "%s: blocks of %zu, chunks of %zu differ "
                          "from the whole text", hl_vocab_kind(v[k]), shapes[s][0],
                          shapes[s][1]);
        }
        /* the same file for 1 and 2 threads */
        const int threads = omp_get_max_threads();
        omp_set_num_threads(1);
        tokenize_file(v[k], t, n, 2048, 64, whole);
        omp_set_num_threads(2);
        tokenize_file(v[k], t, n, 2048, 64, parts);
        omp_set_num_threads(threads);
        ck_assert_msg(tu_same_file(whole, parts), "%s: 1 and 2 threads differ",
                      hl_vocab_kind(v[k]));
        hl_vocab_free(v[k]);
    }
    remove(whole);
    remove(parts);
    free(t);
}
END_TEST

/* The validation split, floor(size·F) for F as written: products meant to
 * be whole (100 × 0.29, where the double 0.29 is 0.28999...), products just
 * below a whole number at large sizes (where a double product nudged up
 * by a few ulps gave one byte more), and size/10 for 0.1. */
START_TEST(test_val_bytes)
{
    static const struct {
        uint64_t size;
        double fraction;
        uint64_t bytes;
    } cases[] = {
        {100, 0.29, 29},
        {100, 0.57, 57},
        {100, 0.333, 33},
        {526919393, 0.987743, 520460941},      /* × F = ...941.999999 */
        {3818025495, 0.815101, 3112076398},    /* ...398.999995 */
        {1099509628643, 0.493, 542058246920},  /* ...920.999 */
        {(uint64_t)1 << 40, 0.5, (uint64_t)1 << 39},
        {7, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        ck_assert_msg(hl_tokenize_val_bytes(cases[i].size, cases[i].fraction) == cases[i].bytes,
                      "%llu × %g: %llu, want %llu", (unsigned long long)cases[i].size,
                      cases[i].fraction,
                      (unsigned long long)hl_tokenize_val_bytes(cases[i].size, cases[i].fraction),
                      (unsigned long long)cases[i].bytes);
    for (uint64_t size = 0; size < 100000; size++)
        ck_assert_uint_eq(hl_tokenize_val_bytes(size, 0.1), size / 10);
    const uint64_t big = ((uint64_t)1 << 40) - 7;
    ck_assert_uint_eq(hl_tokenize_val_bytes(big, 0.1), big / 10);
}
END_TEST

Suite *tokenize_suite(void)
{
    Suite *s = suite_create("tokenize");
    TCase *tc = tcase_create("tokenize");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_cuts_keep_the_tokens);
    tcase_add_test(tc, test_blocks_equal_the_whole_text);
    tcase_add_test(tc, test_val_bytes);
    suite_add_tcase(s, tc);
    return s;
}
