/* Tests for analysis/patch_pairs.c: a good file read into one padded task
 * (token numbers and text with escapes), each refusal with its message, and
 * that patching the padded task of pairs of different lengths gives what the
 * pairs give alone, combined: on the GPT of tests/fixtures/gpt. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/patch_pairs.h"
#include "io/model_io.h"
#include "tests/testutil.h"

#ifdef HL_REAL_DOUBLE
#define PAIRS_TOL 1e-10
#else
#define PAIRS_TOL 1e-5
#endif

/* tests/fixtures/gpt's sizes: tokens 0..6 in, 0..5 out, 6 positions. */
static hl_gpt_config fixture_config(void)
{
    return (hl_gpt_config){.vocab_in = 7, .vocab_out = 6, .n_ctx = 6};
}

static hl_status parse(const char *text, const hl_vocab *vocab, const hl_gpt_config *cfg,
                       hl_patch_metric metric, hl_patch_pairs *p, hl_error *err)
{
    return hl_patch_pairs_parse(text, strlen(text), "p.tsv", vocab, cfg, metric, p, err);
}

static void expect_tokens(const char *what, const int32_t *got, const int32_t *want, int n)
{
    for (int i = 0; i < n; i++)
        ck_assert_msg(got[i] == want[i], "%s[%d]: %d, want %d", what, i, got[i], want[i]);
}

/* Token numbers: comments, an empty line, \r\n, pairs of lengths 4 and 3,
 * default and listed positions, padding with each pair's last token. */
START_TEST(test_patch_pairs_token_numbers)
{
    const hl_gpt_config cfg = fixture_config();
    hl_patch_pairs p;
    hl_error err = {0};
    const char *text = "# clean\tcorrupt\tpositions\n"
                       "\n"
                       "6 1 2 3\t6,4 2 0\t0,2\r\n"
                       "  5 0 1 \t5 0 2\n";
    ck_assert_msg(parse(text, NULL, &cfg, HL_METRIC_LOGIT_DIFF, &p, &err) == HL_OK, "%s",
                  err.message);
    ck_assert_int_eq(p.n, 2);
    ck_assert_int_eq(p.task.B, 2);
    ck_assert_int_eq(p.task.T, 4);
    ck_assert_int_eq(p.task.metric, HL_METRIC_LOGIT_DIFF);
    ck_assert_int_eq(p.line[0], 3);
    ck_assert_int_eq(p.line[1], 4);
    ck_assert_int_eq(p.length[0], 4);
    ck_assert_int_eq(p.length[1], 3);
    ck_assert_int_eq(p.scored[0], 2);
    ck_assert_int_eq(p.scored[1], 1);
    expect_tokens("clean", p.task.clean, (const int32_t[]){6, 1, 2, 3, 5, 0, 1, 1}, 8);
    expect_tokens("corrupt", p.task.corrupt, (const int32_t[]){6, 4, 2, 0, 5, 0, 2, 2}, 8);
    expect_tokens("answer", p.task.answer, (const int32_t[]){1, -1, 3, -1, -1, 1, -1, -1}, 8);
    expect_tokens("wrong", p.task.wrong, (const int32_t[]){4, -1, 0, -1, -1, 2, -1, -1}, 8);
    hl_patch_pairs_free(&p);
    ck_assert_ptr_null(p.buf);
    hl_patch_pairs_free(&p); /* an empty one too */
}
END_TEST

/* Text through a vocabulary, with every escape and a raw UTF-8 byte. */
START_TEST(test_patch_pairs_text)
{
    const hl_gpt_config cfg = {.vocab_in = 258, .vocab_out = 258, .n_ctx = 8};
    const unsigned char *pieces[] = {(const unsigned char *)"ab"};
    hl_error err = {0};
    hl_vocab *v = hl_vocab_from_pieces(pieces, (const size_t[]){2}, 1, &err);
    ck_assert_msg(v, "%s", err.message);
    hl_patch_pairs p;
    const char *text = "ab\\t\\n\\\\\\x41\xc3\tab\\x00\\x7f\\xff\xc3\xc3\t1,3\n";
    ck_assert_msg(parse(text, v, &cfg, HL_METRIC_LOSS, &p, &err) == HL_OK, "%s", err.message);
    ck_assert_int_eq(p.task.T, 6);
    expect_tokens("clean", p.task.clean, (const int32_t[]){256, '\t', '\n', '\\', 'A', 0xc3}, 6);
    expect_tokens("corrupt", p.task.corrupt, (const int32_t[]){256, 0, 0x7f, 0xff, 0xc3, 0xc3},
                  6);
    expect_tokens("answer", p.task.answer, (const int32_t[]){-1, '\n', -1, 'A', -1, -1}, 6);
    hl_patch_pairs_free(&p);
    hl_vocab_free(v);
}
END_TEST

/* Each refusal names the file's line and the problem, and leaves *out empty. */
START_TEST(test_patch_pairs_refusals)
{
    const hl_gpt_config cfg = fixture_config(), text_cfg = {.vocab_in = 256, .vocab_out = 256,
                                                            .n_ctx = 6};
    hl_vocab *bytes = hl_vocab_bytes();
    ck_assert_ptr_nonnull(bytes);
    static const struct {
        const char *text;
        bool is_text, diff;
        const char *message;
    } cases[] = {
        {"", false, false, "p.tsv: no pairs"},
        {"# only a comment\n\n", false, false, "p.tsv: no pairs"},
        {"1 2 3\n", false, false, "p.tsv line 1: one field"},
        {"1 2\t1 3\t0\tx\n", false, false, "p.tsv line 1: more than 3 fields"},
        {"#\n1 2 3\t1 3\n", false, false,
         "p.tsv line 2: the clean input has 3 tokens and the corrupted 2"},
        {"1 2 3\t1 3 3\t2\n", false, false, "p.tsv line 1: position 2 is out of range: the pair "
                                            "has 3 tokens, so positions 0..1"},
        {"1 2 3\t1 3 3\t99999999999999999999\n", false, false,
         "position 99999999999999999999 is out of range"},
        {"1 2 3\t1 3 3\t0,\n", false, false, "positions are numbers separated by commas"},
        {"1 2 3\t1 3 3\t,0\n", false, false, "positions are numbers separated by commas"},
        {"1 2 3\t1 3 3\t0 1\n", false, false, "positions are numbers separated by commas"},
        {"1 2 7\t1 3 3\n", false, false, "line 1: the clean input's token 7 is not in the "
                                         "model's vocabulary (0..6)"},
        {"1 2 3\t1 -3 3\n", false, false, "line 1: the corrupted input is token numbers 0..6"},
        {"1 6 2\t1 2 2\t0\n", false, false, "position 0: token 6 is not an output token"},
        {"1 2 3\t1 3 3\t1\n", false, true, "position 1: both inputs continue with token 3"},
        {"1 2 3 4 5 0 1\t1 2 3 4 5 0 1\n", false, false, "longer than the model's context of 6"},
        {"1\t2\n", false, false, "line 1: the inputs have 1 token"},
        {" , \t1 2\n", false, false, "line 1: the clean input is empty"},
        {"ab\\q\tabc\n", true, false, "line 1: a backslash in the clean text must begin"},
        {"abc\tab\\x4\n", true, false, "line 1: a backslash in the corrupted text must begin"},
        {"abc\tab\\\n", true, false, "a backslash in the corrupted text"},
        {"a\x01" "c\tabc\n", true, false, "line 1: byte 0x01 in the clean text must be escaped"},
        {"abc\t\n", true, false, "line 1: the corrupted text is empty"},
        {"abcdefg\tabcdefh\n", true, false, "the clean input is 7 tokens, longer than the "
                                            "model's context of 6"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        hl_patch_pairs p = {.n = 99};
        hl_error err = {0};
        const hl_status s = parse(cases[i].text, cases[i].is_text ? bytes : NULL,
                                  cases[i].is_text ? &text_cfg : &cfg,
                                  cases[i].diff ? HL_METRIC_LOGIT_DIFF : HL_METRIC_LOSS, &p,
                                  &err);
        ck_assert_msg(s == HL_ERR_FORMAT, "case %zu (%s) accepted", i, cases[i].text);
        ck_assert_msg(strstr(err.message, cases[i].message), "case %zu: \"%s\", want \"%s\"", i,
                      err.message, cases[i].message);
        ck_assert_msg(p.n == 0 && !p.buf, "case %zu left a task", i);
    }
    /* A line too long, and text that is not NUL-terminated where it ends. */
    const size_t long_n = HL_PATCH_PAIRS_LINE_MAX + 10;
    char *big = malloc(long_n);
    ck_assert_ptr_nonnull(big);
    memcpy(big, "1 2\t1 3\n", 8);
    memset(big + 8, ' ', long_n - 8);
    hl_patch_pairs p;
    hl_error err = {0};
    ck_assert_int_eq(hl_patch_pairs_parse(big, long_n, "p.tsv", NULL, &cfg, HL_METRIC_LOSS, &p,
                                          &err),
                     HL_ERR_FORMAT);
    ck_assert_msg(strstr(err.message, "p.tsv line 2: longer than"), "%s", err.message);
    hl_error_clear(&err);
    ck_assert_int_eq(hl_patch_pairs_parse(big, 7, "p.tsv", NULL, &cfg, HL_METRIC_LOSS, &p, &err),
                     HL_OK);
    ck_assert_int_eq(p.task.T, 2);
    hl_patch_pairs_free(&p);
    free(big);
    hl_vocab_free(bytes);
}
END_TEST

/* The normalised score of a dataset from its pairs alone: each pair i's score
 * s_i = (P_i - X_i) / g_i (gap g_i = C_i - X_i, n_i scored positions) puts
 * the dataset's mean at Σ n_i s_i g_i / Σ n_i g_i. NaN where s_0 is NaN. */
static double combined(const double *s, const double *g, const int *n, int pairs, size_t k,
                       size_t stride)
{
    double num = 0, den = 0;
    for (int i = 0; i < pairs; i++) {
        num += n[i] * s[i * stride + k] * g[i];
        den += n[i] * g[i];
    }
    return num / den;
}

static void expect_close(const char *what, const double *got, const double *want, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (isnan(want[i])) {
            ck_assert_msg(isnan(got[i]), "%s[%zu]: %g, want NaN", what, i, got[i]);
            continue;
        }
        ck_assert_msg(fabs(got[i] - want[i]) <= PAIRS_TOL * fmax(1, fabs(want[i])),
                      "%s[%zu]: %.10g, the pairs alone %.10g", what, i, got[i], want[i]);
    }
}

/* Pairs of 6, 4 and 3 tokens, padded to 6: every patching result is the
 * pairs' own results combined, for both metrics. */
START_TEST(test_patch_pairs_padding_is_exact)
{
    hl_error err = {0};
    hl_gpt *m = hl_gpt_load("tests/fixtures/gpt/weights.safetensors", &err);
    ck_assert_msg(m, "%s", err.message);
    static const char *const lines[] = {"1 2 3 4 5 0\t1 4 3 2 5 1\t2,4\n", "6 2 5 1\t6 3 5 2\n",
                                        "3 0 4\t3 1 5\t0,1\n"};
    enum { P = 3, L = 2, H = 2, N = 4, CELLS = (L + 1) * N * N };
    char all[256] = "# three pairs\n";
    for (int i = 0; i < P; i++)
        strcat(all, lines[i]);
    for (int metric = 0; metric < 2; metric++) {
        const hl_patch_metric kind = metric ? HL_METRIC_LOGIT_DIFF : HL_METRIC_LOSS;
        hl_patch_pairs whole, alone[P];
        ck_assert_msg(parse(all, NULL, &m->cfg, kind, &whole, &err) == HL_OK, "%s", err.message);
        ck_assert_int_eq(whole.task.T, 6);
        double gap[P], got[CELLS], want[CELLS], each[P][CELLS], seq[2][P];
        int n[P];
        ck_assert_int_eq(hl_patch_sequence_metrics(m, &whole.task, seq[0], seq[1], &err), HL_OK);
        for (int i = 0; i < P; i++) {
            ck_assert_int_eq(parse(lines[i], NULL, &m->cfg, kind, &alone[i], &err), HL_OK);
            double c, x;
            ck_assert_msg(hl_patch_baselines(m, &alone[i].task, &c, &x, &err) == HL_OK, "%s",
                          err.message);
            gap[i] = c - x;
            n[i] = alone[i].scored[0];
            expect_close("clean of each pair", &seq[0][i], &c, 1);
            expect_close("corrupted of each pair", &seq[1][i], &x, 1);
        }
        /* The normalised results. */
        for (int what = 0; what < 4; what++) {
            const char *name[] = {"patch z", "patch k", "paths q", "attrib z"};
            const size_t cells = what == 2 ? N * N : L * H;
            for (int i = 0; i <= P; i++) {
                const hl_patch_task *t = i < P ? &alone[i].task : &whole.task;
                double *out = i < P ? each[i] : got;
                hl_status s = what == 0   ? hl_patch_heads(m, t, HL_ACT_Z, false, out, &err)
                              : what == 1 ? hl_patch_heads(m, t, HL_ACT_K, false, out, &err)
                              : what == 2 ? hl_patch_paths(m, t, HL_ACT_Q, out, &err)
                                          : hl_patch_attrib_heads(m, t, HL_ACT_Z, false, out, &err);
                ck_assert_msg(s == HL_OK, "%s: %s", name[what], err.message);
            }
            for (size_t k = 0; k < cells; k++)
                want[k] = combined(&each[0][0], gap, n, P, k, CELLS);
            expect_close(name[what], got, want, cells);
        }
        /* The plain means: direct logit attribution and the logit lens. */
        const double ones[P] = {1, 1, 1};
        ck_assert_int_eq(hl_patch_logit_attribution(m, &whole.task, got, &err), HL_OK);
        for (int i = 0; i < P; i++)
            ck_assert_int_eq(hl_patch_logit_attribution(m, &alone[i].task, each[i], &err), HL_OK);
        for (size_t k = 0; k < L * H; k++)
            want[k] = combined(&each[0][0], ones, n, P, k, CELLS);
        expect_close("direct logit attribution", got, want, L * H);
        int32_t top[(L + 1) * 6];
        ck_assert_int_eq(hl_patch_logit_lens(m, &whole.task, 1, got, top, &err), HL_OK);
        for (int i = 0; i < P; i++)
            ck_assert_int_eq(hl_patch_logit_lens(m, &alone[i].task, 1, each[i], top, &err), HL_OK);
        for (size_t k = 0; k <= L; k++)
            want[k] = combined(&each[0][0], ones, n, P, k, CELLS);
        expect_close("logit lens", got, want, L + 1);
        for (int i = 0; i < P; i++)
            hl_patch_pairs_free(&alone[i]);
        hl_patch_pairs_free(&whole);
    }
    hl_gpt_free(m);
}
END_TEST

Suite *patch_pairs_suite(void)
{
    Suite *s = suite_create("patch_pairs");
    TCase *tc = tcase_create("patch_pairs");
    tcase_add_test(tc, test_patch_pairs_token_numbers);
    tcase_add_test(tc, test_patch_pairs_text);
    tcase_add_test(tc, test_patch_pairs_refusals);
    tcase_add_test(tc, test_patch_pairs_padding_is_exact);
    suite_add_tcase(s, tc);
    return s;
}
