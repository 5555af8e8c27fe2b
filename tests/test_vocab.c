/* Tests for text/: the pre-tokenizer's words, a learnt vocabulary's pieces
 * (counted by hand on a small text), encode/decode round trips on any bytes,
 * the stored form and its bad input, bad tokens; and a model file that keeps
 * its vocabulary (io/gpt_io.c), or refuses one that does not fit it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "io/checkpoint.h"
#include "io/model_io.h"
#include "text/vocab.h"

#include "tests/testutil.h"

/* decode(encode(text)) is text, byte for byte; the token count is returned. */
static size_t round_trip(const hl_vocab *v, const unsigned char *text, size_t n)
{
    hl_error err = {0};
    int32_t *tokens;
    size_t n_tokens, back_len;
    unsigned char *back;
    ck_assert_int_eq(hl_vocab_encode(v, text, n, &tokens, &n_tokens, &err), HL_OK);
    for (size_t i = 0; i < n_tokens; i++)
        ck_assert(tokens[i] >= 0 && tokens[i] < hl_vocab_size(v));
    ck_assert_msg(hl_vocab_decode(v, tokens, n_tokens, &back, &back_len, &err) == HL_OK, "%s",
                  err.message);
    ck_assert_uint_eq(back_len, n);
    ck_assert(memcmp(back, text, n) == 0);
    free(tokens);
    free(back);
    return n_tokens;
}

static const unsigned char *piece(const hl_vocab *v, int32_t t, size_t *len)
{
    const unsigned char *p = hl_vocab_piece(v, t, len);
    ck_assert_ptr_nonnull(p);
    return p;
}

START_TEST(test_words)
{
    const unsigned char *s = (const unsigned char *)"And the LORD's 12 men,  go\n";
    const size_t n = strlen((const char *)s);
    const char *expect[] = {"And", " the", " LORD's", " ", "12", " men", ",", " ", " go", "\n"};
    size_t i = 0, k = 0;
    for (; i < n; k++) {
        const size_t end = hl_vocab_next_word(s, n, i);
        ck_assert_uint_lt(k, sizeof expect / sizeof expect[0]);
        ck_assert_msg(end - i == strlen(expect[k]) && !memcmp(s + i, expect[k], end - i),
                      "word %zu: \"%.*s\", expected \"%s\"", k, (int)(end - i), s + i, expect[k]);
        i = end;
    }
    ck_assert_uint_eq(k, sizeof expect / sizeof expect[0]);
}
END_TEST

/* Counted by hand: " the" 3, " cat" 2, then " dog", "And", "the" once each
 * (ties in byte order: ' ' < 'A' < 't'). */
START_TEST(test_learn_most_frequent_words)
{
    const char *text = "the cat the cat the dog\nAnd the";
    hl_error err = {0};
    hl_vocab *v = hl_vocab_learn((const unsigned char *)text, strlen(text), 259, &err);
    ck_assert_msg(v, "%s", err.message);
    ck_assert_int_eq(hl_vocab_size(v), 259);
    const char *expect[] = {" the", " cat", " dog"};
    for (int i = 0; i < 3; i++) {
        size_t len;
        const unsigned char *p = piece(v, 256 + i, &len);
        ck_assert_msg(len == strlen(expect[i]) && !memcmp(p, expect[i], len), "token %d", 256 + i);
    }
    /* "the" was not kept: its bytes; " cat" and " the" one token each. */
    int32_t *tokens;
    size_t n;
    ck_assert_int_eq(hl_vocab_encode(v, (const unsigned char *)"the cat the", 11, &tokens, &n,
                                     &err), HL_OK);
    const int32_t want[] = {'t', 'h', 'e', 257, 256};
    ck_assert_uint_eq(n, 5);
    ck_assert(!memcmp(tokens, want, sizeof want));
    free(tokens);
    hl_vocab_free(v);
    /* A vocabulary larger than the text's words holds them all. */
    v = hl_vocab_learn((const unsigned char *)text, strlen(text), 4096, &err);
    ck_assert_int_eq(hl_vocab_size(v), 256 + 5);
    hl_vocab_free(v);
    ck_assert_ptr_null(hl_vocab_learn((const unsigned char *)text, strlen(text), 256, &err));
    ck_assert_int_eq(err.status, HL_ERR_ARG);
    ck_assert_ptr_nonnull(strstr(err.message, "not 256"));
}
END_TEST

START_TEST(test_round_trips)
{
    hl_rng rng;
    hl_rng_seed(&rng, 7);
    unsigned char noise[3000];
    for (size_t i = 0; i < sizeof noise; i++)
        noise[i] = (unsigned char)hl_rng_below(&rng, 256);
    hl_vocab *bytes = hl_vocab_bytes();
    ck_assert_uint_eq(round_trip(bytes, noise, sizeof noise), sizeof noise);
    /* Words learnt from text with UTF-8, digits and punctuation, used on that
     * text, on other text and on random bytes. */
    const char *text = "In the beginning God created the heaven and the earth. 1:1\n"
                       "Au commencement, Dieu cr\xc3\xa9""a les cieux et la terre. \xe2\x80\x94 "
                       "the earth, the earth's heaven\n";
    hl_error err = {0};
    hl_vocab *words = hl_vocab_learn((const unsigned char *)text, strlen(text), 300, &err);
    ck_assert_msg(words, "%s", err.message);
    ck_assert_uint_lt(round_trip(words, (const unsigned char *)text, strlen(text)),
                      strlen(text) / 3);
    const char *other = "And God said, Let there be light: and there was light.";
    round_trip(words, (const unsigned char *)other, strlen(other));
    round_trip(words, noise, sizeof noise);
    round_trip(words, noise, 0);
    hl_vocab_free(words);
    hl_vocab_free(bytes);
}
END_TEST

/* The stored form reads back to the same pieces, whatever their bytes. */
START_TEST(test_format_round_trip)
{
    const char *raw[] = {" the", "a\\b", "x\ny", "\x01\xff", "tab\there", "\\x41"};
    const unsigned char *pieces[6];
    size_t lens[6];
    for (int i = 0; i < 6; i++) {
        pieces[i] = (const unsigned char *)raw[i];
        lens[i] = strlen(raw[i]);
    }
    hl_error err = {0};
    hl_vocab *v = hl_vocab_from_pieces(pieces, lens, 6, &err);
    ck_assert_msg(v, "%s", err.message);
    char *s = hl_vocab_format(v);
    ck_assert_ptr_nonnull(s);
    for (const char *c = s; *c; c++)
        ck_assert_msg(*c == '\n' || (*c >= 0x20 && *c < 0x7f), "byte 0x%02x stored",
                      (unsigned char)*c);
    hl_vocab *back = hl_vocab_parse(s, &err);
    ck_assert_msg(back, "%s", err.message);
    ck_assert_int_eq(hl_vocab_size(back), 256 + 6);
    for (int i = 0; i < 6; i++) {
        size_t len;
        const unsigned char *p = piece(back, 256 + i, &len);
        ck_assert_msg(len == lens[i] && !memcmp(p, raw[i], len), "piece %d", i);
    }
    free(s);
    hl_vocab_free(back);
    hl_vocab_free(v);
    /* The bytes alone: the header and nothing else. */
    hl_vocab *bytes = hl_vocab_bytes();
    s = hl_vocab_format(bytes);
    ck_assert_str_eq(s, "headlab-words-1");
    back = hl_vocab_parse(s, &err);
    ck_assert_int_eq(hl_vocab_size(back), 256);
    free(s);
    hl_vocab_free(back);
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

START_TEST(test_bad_vocab_and_tokens)
{
    expect_parse_error("headlab-words-2\n the", "does not begin with");
    expect_parse_error("", "does not begin with");
    expect_parse_error("headlab-words-1\n the\n\\q", "line 3: a backslash");
    expect_parse_error("headlab-words-1\n\\x4", "line 2: a backslash");
    expect_parse_error("headlab-words-1\n the\n\n and", "line 3: a piece of 0 byte(s)");
    expect_parse_error("headlab-words-1\nx", "line 2: a piece of 1 byte(s)");
    expect_parse_error("headlab-words-1\n the\n the", "pieces 256 and 257 are the same");
    expect_parse_error("headlab-words-1\na\tb", "line 2: byte 0x09 must be escaped");
    expect_parse_error("headlab-words-1\n"
                       "0123456789012345678901234567890123456789012345678",
                       "line 2: a piece longer than 48 bytes");
    /* Pieces of the wrong length. */
    hl_error err0 = {0};
    const unsigned char *one[] = {(const unsigned char *)"a"};
    ck_assert_ptr_null(hl_vocab_from_pieces(one, (size_t[]){1}, 1, &err0));
    ck_assert_msg(strstr(err0.message, "piece 256 has 1 bytes (2..48)"), "%s", err0.message);
    /* Tokens outside the vocabulary do not decode; the message names where. */
    hl_vocab *v = hl_vocab_bytes();
    hl_error err = {0};
    unsigned char *text;
    size_t len;
    const int32_t bad[] = {'a', 256, 'b'};
    ck_assert_int_eq(hl_vocab_decode(v, bad, 3, &text, &len, &err), HL_ERR_ARG);
    ck_assert_ptr_null(text);
    ck_assert_msg(strstr(err.message, "token 256 at position 1 is outside the vocabulary (0..255)"),
                  "%s", err.message);
    const int32_t negative[] = {-1};
    hl_error_clear(&err);
    ck_assert_int_eq(hl_vocab_decode(v, negative, 1, &text, &len, &err), HL_ERR_ARG);
    ck_assert_ptr_null(hl_vocab_piece(v, 300, &len));
    hl_vocab_free(v);
}
END_TEST

/* A model file keeps its learnt vocabulary; a byte model reads as bytes, a
 * toy model has none; a vocabulary of the wrong size or a corrupt one, or a
 * file that is not there, is refused with the file named. */
START_TEST(test_model_file_keeps_its_vocab)
{
    char dir[] = "/tmp/hl_vocab_XXXXXX", path[128], command[160];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/m.safetensors", dir);
    const char *text = "the LORD said unto Moses, the LORD said";
    hl_error err = {0};
    hl_vocab *v = hl_vocab_learn((const unsigned char *)text, strlen(text), 260, &err);
    ck_assert_int_eq(hl_vocab_size(v), 260);
    hl_gpt_config cfg = {.vocab_in = 260, .vocab_out = 260, .n_ctx = 8, .d_model = 8,
                         .n_heads = 2, .n_layers = 1, .norm = HL_GPT_NORM_LAYER, .emb_std = 0.02};
    hl_gpt *m = hl_gpt_new(&cfg, &err);
    ck_assert_msg(m, "%s", err.message);
    hl_gpt_meta meta = {.task = "charlm", .step = 3, .vocab = v};
    ck_assert_msg(hl_gpt_save_meta(path, m, &meta, &err) == HL_OK, "%s", err.message);
    hl_gpt_meta back;
    hl_gpt *loaded = hl_gpt_load_meta(path, &back, &err);
    ck_assert_msg(loaded, "%s", err.message);
    ck_assert_ptr_nonnull(back.vocab);
    ck_assert_int_eq(hl_vocab_size(back.vocab), 260);
    for (int t = 0; t < 260; t++) {
        size_t a, b;
        const unsigned char *pa = piece(v, t, &a), *pb = piece(back.vocab, t, &b);
        ck_assert(a == b && !memcmp(pa, pb, a));
    }
    hl_gpt_free(loaded);
    hl_gpt_meta_clear(&back);
    ck_assert_ptr_null(back.vocab);
    hl_gpt_free(m);
    /* The same vocabulary with a model of 256 tokens: not saved, and a file
     * that has them anyway does not load. */
    cfg.vocab_in = cfg.vocab_out = 256;
    m = hl_gpt_new(&cfg, &err);
    ck_assert_int_eq(hl_gpt_save_meta(path, m, &meta, &err), HL_ERR_ARG);
    ck_assert_msg(strstr(err.message, "a vocabulary of 260 tokens for a model that reads 256"),
                  "%s", err.message);
    hl_error_clear(&err);
    char config[512], *stored = hl_vocab_format(v);
    hl_gpt_config_format(&m->cfg, config, sizeof config);
    hl_checkpoint_meta mismatched[] = {{"config", config}, {"vocab", stored}};
    ck_assert_int_eq(hl_checkpoint_save(path, m->params, NULL, 0, NULL, 0, mismatched, 2, &err),
                     HL_OK);
    free(stored);
    ck_assert_ptr_null(hl_gpt_load_meta(path, &back, &err));
    ck_assert_msg(strstr(err.message, path) &&
                  strstr(err.message, "\"vocab\" has 260 tokens but the model reads 256"),
                  "%s", err.message);
    ck_assert_ptr_null(back.vocab);
    hl_error_clear(&err);
    /* Without one, a 256-token model reads bytes. */
    meta.vocab = NULL;
    ck_assert_int_eq(hl_gpt_save_meta(path, m, &meta, &err), HL_OK);
    loaded = hl_gpt_load_meta(path, &back, &err);
    ck_assert_msg(loaded && back.vocab, "%s", err.message);
    ck_assert_int_eq(hl_vocab_size(back.vocab), 256);
    hl_gpt_free(loaded);
    hl_gpt_meta_clear(&back);
    hl_gpt_free(m);
    /* A model of other sizes reads numbers. */
    cfg.vocab_in = cfg.vocab_out = 17;
    m = hl_gpt_new(&cfg, &err);
    ck_assert_int_eq(hl_gpt_save_meta(path, m, &meta, &err), HL_OK);
    loaded = hl_gpt_load_meta(path, &back, &err);
    ck_assert_ptr_nonnull(loaded);
    ck_assert_ptr_null(back.vocab);
    hl_gpt_free(loaded);
    hl_gpt_free(m);
    /* A corrupt vocabulary in the file: its line is named. */
    cfg.vocab_in = cfg.vocab_out = 257;
    m = hl_gpt_new(&cfg, &err);
    hl_gpt_config_format(&m->cfg, config, sizeof config);
    hl_checkpoint_meta corrupt[] = {{"config", config}, {"vocab", "headlab-words-1\na\\q"}};
    ck_assert_int_eq(hl_checkpoint_save(path, m->params, NULL, 0, NULL, 0, corrupt, 2, &err),
                     HL_OK);
    ck_assert_ptr_null(hl_gpt_load_meta(path, &back, &err));
    ck_assert_msg(strstr(err.message, "metadata \"vocab\": vocab line 2: a backslash"), "%s",
                  err.message);
    hl_gpt_free(m);
    hl_vocab_free(v);
    /* No file there. */
    snprintf(path, sizeof path, "%s/missing.safetensors", dir);
    hl_error_clear(&err);
    ck_assert_ptr_null(hl_gpt_load_meta(path, &back, &err));
    ck_assert_ptr_nonnull(strstr(err.message, path));
    snprintf(command, sizeof command, "rm -rf %s", dir);
    ck_assert_int_eq(system(command), 0);
}
END_TEST

Suite *vocab_suite(void)
{
    Suite *s = suite_create("vocab");
    TCase *tc = tcase_create("vocab");
    tcase_add_test(tc, test_words);
    tcase_add_test(tc, test_learn_most_frequent_words);
    tcase_add_test(tc, test_round_trips);
    tcase_add_test(tc, test_format_round_trip);
    tcase_add_test(tc, test_bad_vocab_and_tokens);
    tcase_add_test(tc, test_model_file_keeps_its_vocab);
    suite_add_tcase(s, tc);
    return s;
}
