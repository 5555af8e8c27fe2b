/* Tests for text/pretrained_*.c: GPT-2's tokenizer from each of its three
 * forms (tokenizer.json, vocab.json + merges.txt, encoder.json + vocab.bpe)
 * gives the reference ids of tests/fixtures/gpt2-tokenizer/ (tiktoken's and
 * Hugging Face tokenizers', made by the real libraries) and decodes back to
 * the text; a hand-made Llama 3-style tokenizer (Split regex, ignore_merges,
 * special tokens, ids not bytes-first) gives the ids derived by hand below;
 * the stored form reads back to the same tokenizer; hl_vocab_cut's places
 * do not change the tokens; bytes that are not UTF-8 encode and decode; and
 * each refusal is HL_ERR_FORMAT naming the file and the field. */
#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <utf8proc.h>

#include "files/fs.h"
#include "text/pretrained_impl.h"
#include "text/vocab.h"

#include "tests/testutil.h"

#define GPT2_DIR "tests/fixtures/gpt2-tokenizer"
#define LLAMA3_STYLE "tests/fixtures/pretrained/llama3_style/tokenizer.json"

static hl_vocab *load_ok(const char *path)
{
    hl_error err = {0};
    hl_vocab *v = hl_vocab_load_pretrained(path, &err);
    ck_assert_msg(v, "%s: %s", path, err.message);
    ck_assert_str_eq(hl_vocab_kind(v), "pretrained");
    return v;
}

/* The tokens of text, checked to decode back to it byte for byte. */
static int32_t *encode_round_trip(const hl_vocab *v, const char *text, size_t n,
                                  size_t *n_tokens)
{
    hl_error err = {0};
    int32_t *tokens;
    unsigned char *back;
    size_t back_len;
    ck_assert_msg(hl_vocab_encode(v, (const unsigned char *)text, n, &tokens, n_tokens, &err) ==
                  HL_OK, "%s", err.message);
    ck_assert_msg(hl_vocab_decode(v, tokens, *n_tokens, &back, &back_len, &err) == HL_OK, "%s",
                  err.message);
    ck_assert_msg(back_len == n && memcmp(back, text, n) == 0, "\"%.40s\" does not decode back",
                  text);
    free(back);
    return tokens;
}

static cJSON *read_cases(const char *name)
{
    char path[256];
    snprintf(path, sizeof path, GPT2_DIR "/%s", name);
    size_t n;
    unsigned char *text = hl_fs_read_file(path, &n);
    ck_assert_msg(text, "cannot read %s", path);
    cJSON *json = cJSON_ParseWithLength((const char *)text, n);
    free(text);
    ck_assert_msg(cJSON_IsArray(cJSON_GetObjectItem(json, "cases")), "%s: no cases", path);
    return json;
}

/* Every case of a cases file gives exactly its "ids" and decodes back. */
static void check_cases(const hl_vocab *v, const char *cases_file)
{
    cJSON *json = read_cases(cases_file);
    int count = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(json, "cases")) {
        const char *text = cJSON_GetObjectItem(c, "text")->valuestring;
        const cJSON *ids = cJSON_GetObjectItem(c, "ids");
        size_t n_tokens;
        int32_t *tokens = encode_round_trip(v, text, strlen(text), &n_tokens);
        ck_assert_msg(n_tokens == (size_t)cJSON_GetArraySize(ids),
                      "%s case %d (\"%.30s\"): %zu tokens, expected %d", cases_file, count, text,
                      n_tokens, cJSON_GetArraySize(ids));
        size_t i = 0;
        const cJSON *id;
        cJSON_ArrayForEach(id, ids) {
            ck_assert_msg(tokens[i] == id->valueint, "%s case %d (\"%.30s\"): token %zu is %d, "
                          "expected %d", cases_file, count, text, i, tokens[i], id->valueint);
            i++;
        }
        free(tokens);
        count++;
    }
    ck_assert_int_eq(count, 20);
    cJSON_Delete(json);
}

/* A fresh temporary folder; its path in dir (room for 64). */
static void temp_dir(char *dir)
{
    snprintf(dir, 64, "%s/hl-pretrained-XXXXXX", "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

/* dir/name as a link to the fixture file (absolute, as the folder is elsewhere). */
static void link_fixture(const char *dir, const char *name, const char *fixture)
{
    char from[4096], to[256], cwd[2048];
    ck_assert_ptr_nonnull(getcwd(cwd, sizeof cwd));
    snprintf(from, sizeof from, "%s/" GPT2_DIR "/%s", cwd, fixture);
    snprintf(to, sizeof to, "%s/%s", dir, name);
    ck_assert_int_eq(symlink(from, to), 0);
}

static void remove_dir(const char *dir)
{
    char command[128];
    snprintf(command, sizeof command, "rm -rf '%s'", dir);
    tu_run_ok(command);
}

START_TEST(test_gpt2_tokenizer_json)
{
    hl_vocab *v = load_ok(GPT2_DIR "/tokenizer.json");
    ck_assert_int_eq(hl_vocab_size(v), 50257);
    check_cases(v, "tokenizer_json_cases.json");
    hl_vocab_free(v);
    v = load_ok(GPT2_DIR); /* the folder: tokenizer.json comes first */
    check_cases(v, "tokenizer_json_cases.json");
    hl_vocab_free(v);
}
END_TEST

/* The pair under both its names: the ids of tiktoken, with <|endoftext|> as
 * text (no added tokens in these files). */
START_TEST(test_gpt2_pairs)
{
    static const char *const names[][2] = {{"vocab.json", "merges.txt"},
                                           {"encoder.json", "vocab.bpe"}};
    for (int i = 0; i < 2; i++) {
        char dir[64];
        temp_dir(dir);
        link_fixture(dir, names[i][0], "encoder.json");
        link_fixture(dir, names[i][1], "vocab.bpe");
        hl_vocab *v = load_ok(dir);
        ck_assert_int_eq(hl_vocab_size(v), 50257);
        check_cases(v, "cases.json");
        hl_vocab_free(v);
        remove_dir(dir);
    }
}
END_TEST

/* Pieces are raw bytes (not GPT-2's alphabet), so every existing caller works. */
START_TEST(test_pieces_are_bytes)
{
    hl_vocab *v = load_ok(GPT2_DIR "/tokenizer.json");
    size_t len;
    const unsigned char *p = hl_vocab_piece(v, 220, &len); /* "Ġ" */
    ck_assert(len == 1 && p[0] == ' ');
    p = hl_vocab_piece(v, 995, &len); /* "Ġworld" */
    ck_assert(len == 6 && !memcmp(p, " world", 6));
    p = hl_vocab_piece(v, 50256, &len);
    ck_assert(len == 13 && !memcmp(p, "<|endoftext|>", 13));
    ck_assert_ptr_null(hl_vocab_piece(v, 50257, &len));
    double *bytes = malloc(sizeof *bytes * 50257);
    hl_vocab_token_bytes(v, bytes);
    ck_assert(bytes[995] == 6 && bytes[50256] == 13);
    free(bytes);
    /* The merge of lowest rank that makes " world" joins two of its parts. */
    int32_t left, right;
    size_t left_len, right_len;
    ck_assert(hl_vocab_merge(v, 995, &left, &right));
    const unsigned char *a = hl_vocab_piece(v, left, &left_len);
    const unsigned char *b = hl_vocab_piece(v, right, &right_len);
    ck_assert(left_len + right_len == 6 && !memcmp(a, " world", left_len) &&
              !memcmp(b, " world" + left_len, right_len));
    ck_assert(!hl_vocab_merge(v, 220, &left, &right));
    hl_vocab_free(v);
}
END_TEST

/* Bytes that are not UTF-8 fall between the regex's matches, into pre-tokens
 * of their own: every byte string encodes and decodes back. */
START_TEST(test_invalid_utf8)
{
    hl_vocab *v = load_ok(GPT2_DIR "/tokenizer.json");
    char text[2 * 256 + 16];
    for (int i = 0; i < 256; i++)
        text[i] = text[2 * 256 - 1 - i] = (char)i;
    memcpy(text + 512, "  the\xff\xfe x\xc3", 11);
    size_t n_tokens;
    free(encode_round_trip(v, text, 523, &n_tokens));
    /* A lone bad byte between words: "a", "\xff", " b". */
    int32_t *tokens = encode_round_trip(v, "a\xff b", 4, &n_tokens);
    ck_assert_uint_eq(n_tokens, 3);
    ck_assert_int_eq(tokens[0], 64);  /* "a" */
    ck_assert_int_eq(tokens[1], 187); /* the byte 0xff ("ÿ" in GPT-2's alphabet) */
    ck_assert_int_eq(tokens[2], 275); /* " b" */
    free(tokens);
    hl_vocab_free(v);
}
END_TEST

/* The hand-made Llama 3-style tokenizer (tests/make_pretrained_fixtures.py):
 * ids 0 and 1 are <|begin_of_text|> and <|eot_id|>; ids 2..7 the merges'
 * pieces by rank (h+e, l+l, he+ll, " "+w, o+r, " w"+or); 8 "hello" and
 * 9 " world", which no merge makes; byte b is token 10 + b. The text
 *
 *     <|begin_of_text|>hello world<|eot_id|>hellos 1234 worst
 *
 * is: the special 0; "hello" and " world", pre-tokens of Llama 3's regex
 * found whole in the vocabulary (ignore_merges): 8, 9; the special 1;
 * "hellos", not whole, so merged: h e l l o s -> he (rank 0) -> ll (rank 1)
 * -> hell (rank 2), then no pair merges: hell o s = 4, 10+'o' = 121,
 * 10+'s' = 125; " " alone (no alternative takes a space before a digit but
 * \s+): 10+' ' = 42; "123" and "4" (\p{N}{1,3}), none a piece and none
 * merging: 59 60 61, 62; " worst": " "+w (rank 3) -> o+r (rank 4) -> " w"+or
 * (rank 5) = " wor" s t: 7, 125, 126. */
START_TEST(test_llama3_style)
{
    hl_vocab *v = load_ok(LLAMA3_STYLE);
    ck_assert_int_eq(hl_vocab_size(v), 266);
    const char *text = "<|begin_of_text|>hello world<|eot_id|>hellos 1234 worst";
    const int32_t expect[] = {0, 8, 9, 1, 4, 121, 125, 42, 59, 60, 61, 62, 7, 125, 126};
    size_t n_tokens;
    int32_t *tokens = encode_round_trip(v, text, strlen(text), &n_tokens);
    ck_assert_uint_eq(n_tokens, sizeof expect / sizeof expect[0]);
    for (size_t i = 0; i < n_tokens; i++)
        ck_assert_msg(tokens[i] == expect[i], "token %zu is %d, expected %d", i, tokens[i],
                      expect[i]);
    free(tokens);
    /* A special token cut short is text: the pre-tokens "<|" and "eot", whose
     * bytes no merge joins: 10+'<', 10+'|', 10+'e', 10+'o', 10+'t'. */
    const int32_t cut_short[] = {70, 134, 111, 121, 126};
    tokens = encode_round_trip(v, "<|eot", 5, &n_tokens);
    ck_assert_uint_eq(n_tokens, 5);
    ck_assert(!memcmp(tokens, cut_short, sizeof cut_short));
    free(tokens);
    hl_vocab_free(v);
}
END_TEST

/* \s is Unicode's White_Space, as in Hugging Face's tokenizers and
 * tiktoken: U+180E (a format character) is not one, so " \u180E" is one
 * pre-token, whose space merges with the separator's first byte (GPT-2's
 * 28053, "Ġá"); PCRE2's own \s split them (220, a lone space). */
START_TEST(test_white_space_is_unicode)
{
    hl_vocab *v = load_ok(GPT2_DIR "/tokenizer.json");
    size_t n;
    int32_t *tokens = encode_round_trip(v, "x \xe1\xa0\x8ey", 6, &n);
    const int32_t want[] = {87, 28053, 254, 236, 88};
    ck_assert_uint_eq(n, 5);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(tokens[i] == want[i], "token %zu is %d, not %d", i, tokens[i], want[i]);
    free(tokens);
    hl_vocab_free(v);
}
END_TEST

/* The tokens of text[0..n) under v. */
static int32_t *encode(const hl_vocab *v, const char *text, size_t n, size_t *n_tokens)
{
    hl_error err = {0};
    int32_t *tokens;
    ck_assert_msg(hl_vocab_encode(v, (const unsigned char *)text, n, &tokens, n_tokens, &err) ==
                  HL_OK, "%s", err.message);
    return tokens;
}

/* A tokenizer.json with normalizer NFC (Qwen2's, GPT-NeoX's; refused before)
 * encodes a text as it encodes the text's NFC form: a decomposed "é" as the
 * composed one, which the same tokenizer without the normalizer does not. A
 * byte that is not UTF-8 stays as it is. The stored form keeps the
 * normalizer; one it does not know is refused. */
START_TEST(test_nfc_normalizer)
{
    char dir[64], command[512], path[128];
    temp_dir(dir);
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    snprintf(command, sizeof command,
             "sed 's/\"normalizer\": null/\"normalizer\": {\"type\": \"NFC\"}/' " LLAMA3_STYLE
             " > %s && grep -q NFC %s", path, path);
    tu_run_ok(command);
    hl_vocab *v = load_ok(path), *plain = load_ok(LLAMA3_STYLE);
    static const char composed[] = "caf\xc3\xa9 \xff\xc3\xa9t\xc3\xa9",
                      decomposed[] = "cafe\xcc\x81 \xff" "e\xcc\x81te\xcc\x81";
    size_t n_a, n_b, n_c;
    int32_t *a = encode(v, composed, strlen(composed), &n_a);
    int32_t *b = encode(v, decomposed, strlen(decomposed), &n_b);
    int32_t *c = encode(plain, decomposed, strlen(decomposed), &n_c);
    ck_assert_msg(n_a == n_b && !memcmp(a, b, n_a * sizeof *a), "NFC: %zu and %zu tokens", n_a,
                  n_b);
    ck_assert_msg(n_c != n_a || memcmp(a, c, n_a * sizeof *a), "no normalizer, same tokens");
    unsigned char *back;
    size_t back_len;
    hl_error err = {0};
    ck_assert(hl_vocab_decode(v, b, n_b, &back, &back_len, &err) == HL_OK);
    ck_assert_msg(back_len == strlen(composed) && !memcmp(back, composed, back_len),
                  "decodes to %.*s", (int)back_len, back);
    free(back);
    char *s = hl_vocab_format(v);
    ck_assert_ptr_nonnull(strstr(s, "\nignore_merges 1\nnormalizer NFC\ntokens "));
    hl_vocab *stored = hl_vocab_parse(s, &err);
    ck_assert_msg(stored, "%s", err.message);
    free(c);
    c = encode(stored, decomposed, strlen(decomposed), &n_c);
    ck_assert(n_c == n_a && !memcmp(a, c, n_a * sizeof *a));
    char *nfd = strstr(s, "normalizer NFC");
    memcpy(nfd + strlen("normalizer NF"), "D", 1);
    ck_assert_ptr_null(hl_vocab_parse(s, &err));
    ck_assert_msg(strstr(err.message, "the normalizer is NFC"), "%s", err.message);
    free(s);
    free(a);
    free(b);
    /* A text longer than the pieces NFC is composed in: "e" + U+0301 falls
     * across the 65,536th byte, where a cut would leave it decomposed. */
    enum { REPEATS = 20000 };
    char *long_composed = malloc(5 * REPEATS + 1), *long_decomposed = malloc(5 * REPEATS + 1);
    for (int i = 0; i < REPEATS; i++) {
        memcpy(long_composed + 4 * i, "\xc3\xa9x ", 4);
        memcpy(long_decomposed + 5 * i, "e\xcc\x81x ", 5);
    }
    a = encode(v, long_composed, 4 * REPEATS, &n_a);
    b = encode(v, long_decomposed, 5 * REPEATS, &n_b);
    ck_assert_msg(n_a == n_b && !memcmp(a, b, n_a * sizeof *a), "long NFC: %zu and %zu tokens",
                  n_a, n_b);
    free(long_composed);
    free(long_decomposed);
    free(a);
    free(b);
    free(c);
    hl_vocab_free(stored);
    hl_vocab_free(plain);
    hl_vocab_free(v);
    remove_dir(dir);
}
END_TEST

/* Runs of more non-starters than utf8proc is left to order (whose sort is
 * quadratic in a run's length) are decomposed and ordered first: the text
 * comes out as utf8proc alone makes it, on runs of 33 to 300 marks of ten
 * kinds (U+0344 decomposes into two marks; U+0F73, of class 0, into two of
 * classes 129 and 130) after starters that decompose (U+1E09: c, cedilla,
 * acute), compose (e, a), or are Hangul, and with a byte that is not UTF-8
 * between them. */
START_TEST(test_nfc_long_runs_of_marks)
{
    static const utf8proc_int32_t starters[] = {'a', 'e', 'c', 0xE9, 0x1E09, 0xAC00, 0x1100},
                                  marks[] = {0x301, 0x316, 0x327, 0x334, 0x345,
                                             0x344, 0x5B0, 0xF71, 0x328, 0xF73};
    enum { PIECES = 40, MOST = 300 };
    unsigned char *text = malloc(PIECES * (MOST + 1) * 4 + PIECES);
    uint32_t seed = 12345;
    size_t n = 0;
    for (int p = 0; p < PIECES; p++) {
        seed = seed * 1664525u + 1013904223u;
        n += (size_t)utf8proc_encode_char(starters[(seed >> 8) % 7], text + n);
        seed = seed * 1664525u + 1013904223u;
        const int run = 33 + (int)((seed >> 8) % (MOST - 32));
        for (int i = 0; i < run; i++) {
            seed = seed * 1664525u + 1013904223u;
            n += (size_t)utf8proc_encode_char(marks[(seed >> 8) % 10], text + n);
        }
        if (p == PIECES / 2)
            text[n++] = 0xff;
    }
    unsigned char *got, *want;
    size_t got_len;
    ck_assert(hl_pretrained_normalize(text, n, &got, &got_len));
    const size_t half = (size_t)((unsigned char *)memchr(text, 0xff, n) - text);
    utf8proc_uint8_t *a, *b;
    const utf8proc_ssize_t la = utf8proc_map(text, (utf8proc_ssize_t)half, &a,
                                             UTF8PROC_STABLE | UTF8PROC_COMPOSE),
                           lb = utf8proc_map(text + half + 1, (utf8proc_ssize_t)(n - half - 1),
                                             &b, UTF8PROC_STABLE | UTF8PROC_COMPOSE);
    ck_assert(la > 0 && lb > 0);
    want = malloc((size_t)(la + 1 + lb));
    memcpy(want, a, (size_t)la);
    want[la] = 0xff;
    memcpy(want + la + 1, b, (size_t)lb);
    ck_assert_msg(got_len == (size_t)(la + 1 + lb) && !memcmp(got, want, got_len),
                  "%zu bytes, utf8proc's %zd", got_len, la + 1 + lb);
    free(a);
    free(b);
    free(want);
    free(got);
    free(text);
}
END_TEST

/* format -> parse gives the same tokenizer (same tokens on every case) and
 * the same string again. */
START_TEST(test_stored_form)
{
    const char *paths[] = {GPT2_DIR "/tokenizer.json", LLAMA3_STYLE};
    for (int k = 0; k < 2; k++) {
        hl_vocab *v = load_ok(paths[k]);
        char *s = hl_vocab_format(v);
        ck_assert_ptr_nonnull(s);
        hl_error err = {0};
        hl_vocab *back = hl_vocab_parse(s, &err);
        ck_assert_msg(back, "%s", err.message);
        ck_assert_str_eq(hl_vocab_kind(back), "pretrained");
        char *again = hl_vocab_format(back);
        ck_assert_str_eq(s, again);
        if (k == 0)
            check_cases(back, "tokenizer_json_cases.json");
        if (k == 1) { /* the fuzz seed written by tests/make_pretrained_fixtures.py */
            size_t n;
            char *seed = (char *)hl_fs_read_file("tests/fuzz/corpus/vocab/pretrained.txt", &n);
            ck_assert(seed && n == strlen(s) && !memcmp(seed, s, n));
            free(seed);
        }
        free(s);
        free(again);
        hl_vocab_free(back);
        hl_vocab_free(v);
    }
    hl_error err = {0};
    ck_assert_ptr_null(hl_vocab_parse("headlab-pretrained-1\npattern x\nignore_merges 2", &err));
    ck_assert(err.status == HL_ERR_FORMAT && strstr(err.message, "line 3"));
}
END_TEST

/* Every place hl_vocab_cut finds splits the cases' texts, one after the
 * other, into parts whose tokens are those of the whole. */
START_TEST(test_cut)
{
    hl_vocab *v = load_ok(GPT2_DIR "/tokenizer.json");
    cJSON *json = read_cases("tokenizer_json_cases.json");
    size_t n = 0;
    char *text = malloc(1 << 20);
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(json, "cases")) {
        const char *s = cJSON_GetObjectItem(c, "text")->valuestring;
        memcpy(text + n, s, strlen(s));
        n += strlen(s);
    }
    cJSON_Delete(json);
    size_t n_whole, cuts = 0;
    int32_t *whole = encode_round_trip(v, text, n, &n_whole);
    size_t at = 0, k = 0;
    while (at < n) {
        size_t p = hl_vocab_cut(v, (const unsigned char *)text, n, at + 1);
        cuts += p < n;
        size_t n_part;
        int32_t *part = encode_round_trip(v, text + at, p - at, &n_part);
        ck_assert_msg(k + n_part <= n_whole && !memcmp(part, whole + k, n_part * sizeof *part),
                      "cutting at %zu changes the tokens", p);
        k += n_part;
        free(part);
        at = p;
    }
    ck_assert_uint_eq(k, n_whole);
    ck_assert_uint_gt(cuts, 20);
    /* No place at a newline next to a Unicode space's bytes: "x\u00A0\n" ends
     * in one piece at a part's end and in two within the whole ("\u00A0",
     * "\n"), and "\n\u00A0\n" likewise (a vocabulary that merges them would
     * encode the parts differently). Both were places. */
    static const char near_spaces[] = "ab\xc2\xa0\ncd,ef\n\xc2\xa0\ngh";
    const size_t m = sizeof near_spaces - 1;
    ck_assert_uint_eq(hl_vocab_cut(v, (const unsigned char *)near_spaces, m, 1), m);
    ck_assert_uint_eq(hl_vocab_cut(v, (const unsigned char *)"ab\ncd", 5, 1), 3);
    free(whole);
    free(text);
    hl_vocab_free(v);
}
END_TEST

/* ---- refusals ---- */

/* A BPE model over "a" and "b" with the given parts, as tokenizer.json text. */
#define MODEL(vocab, merges) \
    "\"model\": {\"type\": \"BPE\", \"vocab\": " vocab ", \"merges\": " merges "}"
#define BYTE_LEVEL "\"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false}"

/* n bytes of text (NUL bytes too) as dir/name. */
static void write_file(const char *dir, const char *name, const char *text, size_t n)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(text, 1, n, f), n);
    ck_assert_int_eq(fclose(f), 0);
}

/* Loading dir gives HL_ERR_FORMAT naming the file name, with each fragment
 * (NULL-terminated) in the message; what says what was written. */
static void check_refused(const char *dir, const char *name, const char *what, va_list fragments)
{
    hl_error err = {0};
    hl_vocab *v = hl_vocab_load_pretrained(dir, &err);
    ck_assert_msg(!v, "%s was accepted: %.200s", name, what);
    ck_assert_msg(err.status == HL_ERR_FORMAT, "%.200s: status %d (%s)", what, err.status,
                  err.message);
    ck_assert_msg(strstr(err.message, name), "\"%s\" does not name %s", err.message, name);
    for (const char *s; (s = va_arg(fragments, const char *));)
        ck_assert_msg(strstr(err.message, s), "\"%s\" lacks \"%s\"", err.message, s);
}

/* Writes text as dir/name, loads dir and expects HL_ERR_FORMAT with each
 * fragment (NULL-terminated) in the message. */
static void expect_refused(const char *name, const char *text, ...)
{
    char dir[64];
    temp_dir(dir);
    write_file(dir, name, text, strlen(text));
    va_list fragments;
    va_start(fragments, text);
    check_refused(dir, name, text, fragments);
    va_end(fragments);
    remove_dir(dir);
}

/* As expect_refused, for a folder already written, which is then removed. */
static void expect_dir_refused(const char *dir, const char *name, ...)
{
    va_list fragments;
    va_start(fragments, name);
    check_refused(dir, name, dir, fragments);
    va_end(fragments);
    remove_dir(dir);
}

/* The Llama 3-style tokenizer.json with post_processor set to the JSON
 * given, written into a fresh folder (dir). */
static void write_with_post_processor(char *dir, const char *post_processor)
{
    size_t n;
    char *text = (char *)hl_fs_read_file(LLAMA3_STYLE, &n);
    ck_assert_ptr_nonnull(text);
    cJSON *root = cJSON_Parse(text), *pp = cJSON_Parse(post_processor);
    ck_assert(root && pp);
    cJSON_DeleteItemFromObjectCaseSensitive(root, "post_processor");
    cJSON_AddItemToObject(root, "post_processor", pp);
    char *out = cJSON_PrintUnformatted(root);
    temp_dir(dir);
    write_file(dir, "tokenizer.json", out, strlen(out));
    cJSON_Delete(root);
    free(out);
    free(text);
}

#define TEMPLATE(single, specials)                                                       \
    "{\"type\":\"Sequence\",\"processors\":[{\"type\":\"ByteLevel\"},"                   \
    "{\"type\":\"TemplateProcessing\",\"single\":[" single "],\"pair\":[],"               \
    "\"special_tokens\":{" specials "}}]}"
#define SPECIAL(name) "{\"SpecialToken\":{\"id\":\"" name "\",\"type_id\":0}}"
#define INPUT(name) "{\"Sequence\":{\"id\":\"" name "\",\"type_id\":0}}"
#define BOS_IDS "\"<|begin_of_text|>\":{\"id\":\"<|begin_of_text|>\",\"ids\":[0]," \
                "\"tokens\":[\"<|begin_of_text|>\"]}"
#define EOT_IDS "\"<|eot_id|>\":{\"id\":\"<|eot_id|>\",\"ids\":[1],\"tokens\":[\"<|eot_id|>\"]}"

/* A post-processor's template (Llama 3's puts <|begin_of_text|> first):
 * hl_vocab_encode_input puts its special tokens around the input, as
 * transformers' tokenizer(text); hl_vocab_encode does not; the stored form
 * keeps it; a template headlab cannot follow is refused, naming the field. */
START_TEST(test_post_processor_template)
{
    char dir[64];
    write_with_post_processor(dir, TEMPLATE(SPECIAL("<|begin_of_text|>") "," INPUT("A") ","
                                            SPECIAL("<|eot_id|>"), BOS_IDS "," EOT_IDS));
    hl_vocab *v = load_ok(dir);
    remove_dir(dir);
    hl_error err = {0};
    int32_t *ids;
    size_t n;
    ck_assert(hl_vocab_encode_input(v, (const unsigned char *)"hello world", 11, &ids, &n,
                                    &err) == HL_OK);
    ck_assert(n == 4 && ids[0] == 0 && ids[1] == 8 && ids[2] == 9 && ids[3] == 1);
    free(ids);
    ck_assert(hl_vocab_encode(v, (const unsigned char *)"hello world", 11, &ids, &n, &err) ==
              HL_OK);
    ck_assert(n == 2 && ids[0] == 8 && ids[1] == 9);
    free(ids);
    char *s = hl_vocab_format(v);
    ck_assert_msg(strstr(s, "\ntemplate 0 A 1\n"), "%.300s", s);
    hl_vocab *back = hl_vocab_parse(s, &err);
    ck_assert_msg(back, "%s", err.message);
    ck_assert(hl_vocab_encode_input(back, (const unsigned char *)"", 0, &ids, &n, &err) ==
              HL_OK);
    ck_assert(n == 2 && ids[0] == 0 && ids[1] == 1);
    free(ids);
    hl_vocab_free(back);
    /* the stored line, malformed */
    const char *const bad_lines[] = {"template 0 A A", "template x A", "template 0",
                                     "template 0  A", "template 1 2 3 4 5 6 7 8 9 A"};
    for (int i = 0; i < 5; i++) {
        char *at = strstr(s, "template 0 A 1");
        char *t = malloc(strlen(s) + 64);
        sprintf(t, "%.*s%s%s", (int)(at - s), s, bad_lines[i], at + strlen("template 0 A 1"));
        err = (hl_error){0};
        ck_assert_msg(!hl_vocab_parse(t, &err) && strstr(err.message, "template"), "%s: %s",
                      bad_lines[i], err.message);
        free(t);
    }
    free(s);
    /* without a template: the same tokens either way, and the same tokens as
     * the templated one (a token file made before templates were kept) */
    hl_vocab *plain = load_ok(LLAMA3_STYLE), *gpt2 = load_ok(GPT2_DIR "/tokenizer.json");
    ck_assert(hl_vocab_same_tokens(v, plain) && hl_vocab_same_tokens(plain, v));
    ck_assert(!hl_vocab_same_tokens(v, gpt2));
    hl_vocab_free(plain);
    hl_vocab_free(gpt2);
    hl_vocab_free(v);
    v = load_ok(LLAMA3_STYLE);
    ck_assert(hl_vocab_encode_input(v, (const unsigned char *)"hello world", 11, &ids, &n,
                                    &err) == HL_OK);
    ck_assert(n == 2 && ids[0] == 8 && ids[1] == 9);
    free(ids);
    hl_vocab_free(v);

    const char *const refused[][2] = {
        {"{\"type\":\"RobertaProcessing\"}", "post_processor RobertaProcessing"},
        {TEMPLATE(SPECIAL("<|begin_of_text|>") "," INPUT("B"), BOS_IDS), "Sequence B"},
        {TEMPLATE(INPUT("A") "," INPUT("A"), BOS_IDS), "Sequence A once"},
        {TEMPLATE(SPECIAL("<s>") "," INPUT("A"), BOS_IDS), "no ids for \"<s>\""},
        {TEMPLATE(SPECIAL("<|begin_of_text|>"), BOS_IDS), "no Sequence A"},
        {TEMPLATE(SPECIAL("x") "," INPUT("A"), "\"x\":{\"id\":\"x\",\"ids\":[999]}"),
         "id 999 is not a token of 0..265"},
        {"{\"type\":\"Sequence\",\"processors\":[" TEMPLATE(INPUT("A"), "") "]}",
         "post_processor Sequence is not supported"},
        {"{\"type\":\"Sequence\",\"processors\":[{\"type\":\"TemplateProcessing\",\"single\":["
         INPUT("A") "]},{\"type\":\"TemplateProcessing\",\"single\":[" INPUT("A") "]}]}",
         "a second TemplateProcessing"},
        {"{\"type\":\"Sequence\",\"processors\":[{\"type\":\"TemplateProcessing\",\"single\":["
         INPUT("A") "]},{\"type\":\"RobertaProcessing\"}]}",
         "post_processor RobertaProcessing is not supported"},
        {"7", "post_processor has no type"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        write_with_post_processor(dir, refused[i][0]);
        expect_dir_refused(dir, "tokenizer.json", refused[i][1], NULL);
    }
}
END_TEST

/* Whether GPT-2's alphabet names byte b by itself (else by U+0100 onwards). */
static bool printable_byte(int b)
{
    return (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
}

/* A vocab.json of the 256 bytes under GPT-2's names, ids 0..255, each on
 * line 2 + its byte, and, when extra is not NULL, the name extra (n bytes,
 * NUL bytes kept) as id 256 on line 258; its length in *len. */
static char *byte_vocab(const char *extra, size_t n, size_t *len)
{
    char *s = malloc(16 * 256 + n + 32);
    ck_assert_ptr_nonnull(s);
    size_t at = (size_t)sprintf(s, "{"), shifted = 0;
    for (int b = 0; b < 256; b++) {
        const unsigned name = printable_byte(b) ? (unsigned)b : 0x100 + (unsigned)shifted++;
        at += (size_t)sprintf(s + at, "%s\n\"\\u%04x\": %d", b ? "," : "", name, b);
    }
    if (extra) {
        at += (size_t)sprintf(s + at, ",\n\"");
        memcpy(s + at, extra, n);
        at += n;
        at += (size_t)sprintf(s + at, "\": 256");
    }
    at += (size_t)sprintf(s + at, "\n}");
    *len = at;
    return s;
}

/* A tokenizer.json (GPT-2's pre-tokenizer) with that vocab (n bytes) and
 * merges (a JSON list); its length in *len. */
static char *byte_tokenizer_json(const char *vocab, size_t n, const char *merges, size_t *len)
{
    static const char head[] = "{" BYTE_LEVEL ", \"model\": {\"type\": \"BPE\", \"vocab\": ";
    char *s = malloc(sizeof head + n + strlen(merges) + 32);
    ck_assert_ptr_nonnull(s);
    memcpy(s, head, sizeof head - 1);
    memcpy(s + sizeof head - 1, vocab, n);
    *len = sizeof head - 1 + n;
    *len += (size_t)sprintf(s + *len, ", \"merges\": %s}}", merges);
    return s;
}

START_TEST(test_refusals)
{
    expect_refused("tokenizer.json", "{\"model\": ", "not valid JSON", NULL);
    expect_refused("tokenizer.json", "[1, 2]", "not a JSON object", NULL);
    expect_refused("tokenizer.json", "{" BYTE_LEVEL "}", "model is missing", NULL);
    expect_refused("tokenizer.json", "{\"model\": {\"type\": \"WordLevel\"}}", "model.type",
                   "WordLevel", NULL);
    expect_refused("tokenizer.json", "{\"model\": {\"type\": \"Unigram\"}}", "model.type",
                   "SentencePiece", "--token-ids FILE", NULL);
    expect_refused("tokenizer.json", "{\"model\": {\"type\": \"WordPiece\"}}", "model.type",
                   "SentencePiece", NULL);
    expect_refused("tokenizer.json", "{\"model\": {\"type\": \"BPE\", \"byte_fallback\": true}}",
                   "model.byte_fallback", "SentencePiece", "--token-ids", NULL);
    expect_refused("tokenizer.json",
                   "{\"normalizer\": {\"type\": \"NFKC\"}, " MODEL("{}", "[]") "}",
                   "normalizer", "only null or NFC", "SentencePiece", NULL);
    expect_refused("tokenizer.json", "{\"normalizer\": {\"type\": \"Sequence\", \"normalizers\": "
                   "[]}, " MODEL("{}", "[]") "}", "normalizer", NULL);
    expect_refused("tokenizer.json", "{\"pre_tokenizer\": {\"type\": \"Metaspace\"}, "
                   MODEL("{}", "[]") "}", "pre_tokenizer.type", "Metaspace", "SentencePiece",
                   NULL);
    expect_refused("tokenizer.json", "{\"pre_tokenizer\": {\"type\": \"Whitespace\"}, "
                   MODEL("{}", "[]") "}", "pre_tokenizer.type", "Whitespace", NULL);
    expect_refused("tokenizer.json", "{" MODEL("{}", "[]") "}", "pre_tokenizer.type", NULL);
    expect_refused("tokenizer.json", "{\"pre_tokenizer\": {\"type\": \"ByteLevel\", "
                   "\"add_prefix_space\": true}, " MODEL("{}", "[]") "}",
                   "pre_tokenizer.add_prefix_space", NULL);
    expect_refused("tokenizer.json", "{\"pre_tokenizer\": {\"type\": \"Sequence\", "
                   "\"pretokenizers\": [{\"type\": \"Split\", \"pattern\": {\"String\": \" \"}, "
                   "\"behavior\": \"Isolated\"}, {\"type\": \"ByteLevel\", \"use_regex\": false}]}, "
                   MODEL("{}", "[]") "}", "pre_tokenizer.pretokenizers[0].pattern.Regex", NULL);
    expect_refused("tokenizer.json", "{" BYTE_LEVEL ", \"model\": {\"type\": \"BPE\", "
                   "\"merges\": []}}", "model.vocab", NULL);
    expect_refused("tokenizer.json", "{" BYTE_LEVEL ", " MODEL("{\"a\": 0}", "{}") "}",
                   "model.merges", NULL);
    expect_refused("tokenizer.json", "{" BYTE_LEVEL ", " MODEL("{\"a\": 0, \"b\": 2}", "[]") "}",
                   "model.vocab", "no token has id 1", NULL);
    expect_refused("tokenizer.json", "{" BYTE_LEVEL ", " MODEL("{\"a\": 0, \"b\": \"x\"}", "[]")
                   "}", "model.vocab", "\"b\" has no id", NULL);
    expect_refused("tokenizer.json", "{" BYTE_LEVEL ", " MODEL("{\"a\": 0, \"b\": 1}",
                   "[\"a x\"]") "}", "model.merges[0]", "\"x\"", "not in model.vocab", NULL);
    expect_refused("tokenizer.json", "{" BYTE_LEVEL ", " MODEL("{\"a\": 0, \"b\": 1}",
                   "[[\"a\"]]") "}", "model.merges[0]", NULL);
    expect_refused("tokenizer.json", "{" BYTE_LEVEL ", " MODEL("{\"a\": 0, \"b\": 1}", "[]") "}",
                   "model.vocab", "no token for the byte 0x00", NULL);
    expect_refused("tokenizer.json", "{" BYTE_LEVEL ", " MODEL("{\"a\": 0}", "[]") ", "
                   "\"added_tokens\": [{\"id\": 0, \"content\": \"z\"}]}", "added_tokens[0]",
                   NULL);
    expect_refused("tokenizer.json", "{" BYTE_LEVEL ", " MODEL("{\"a\": 0}", "[]") ", "
                   "\"added_tokens\": [{\"id\": 1, \"content\": \"<s>\", \"lstrip\": true}]}",
                   "added_tokens[0].lstrip", NULL);
    expect_refused("vocab.json", "{\"a\": 0}", "merges.txt", "missing", NULL);
    expect_refused("merges.txt", "a b\n", "vocab.json", "missing", NULL);
    char dir[64];
    temp_dir(dir);
    hl_error err = {0};
    ck_assert_ptr_null(hl_vocab_load_pretrained(dir, &err));
    ck_assert_msg(err.status == HL_ERR_FORMAT && strstr(err.message, dir) &&
                  strstr(err.message, "no tokenizer.json"), "%s", err.message);
    remove_dir(dir);
}
END_TEST

/* A merge of the pair files naming an unknown piece, and one whose result is
 * no piece, name the file and the line or merge. */
START_TEST(test_pair_refusals)
{
    char dir[64], path[128];
    temp_dir(dir);
    link_fixture(dir, "vocab.json", "encoder.json");
    snprintf(path, sizeof path, "%s/merges.txt", dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("#version: 0.2\n\xc4\xa0 t\nh zzzz\n", f);
    fclose(f);
    hl_error err = {0};
    ck_assert_ptr_null(hl_vocab_load_pretrained(dir, &err));
    ck_assert_msg(err.status == HL_ERR_FORMAT && strstr(err.message, "merges.txt line 3") &&
                  strstr(err.message, "\"zzzz\" is not a piece"), "%s", err.message);
    f = fopen(path, "w");
    fputs("\xc4\xa0 t\n\xc4\xa0t \xc4\xa0t\n", f); /* " t" + " t" is no token */
    fclose(f);
    hl_error_clear(&err);
    ck_assert_ptr_null(hl_vocab_load_pretrained(dir, &err));
    ck_assert_msg(err.status == HL_ERR_FORMAT && strstr(err.message, "merges.txt: merge 1") &&
                  strstr(err.message, "which is no token"), "%s", err.message);
    remove_dir(dir);
    hl_error_clear(&err);
    ck_assert_ptr_null(hl_vocab_load_pretrained("/nonexistent/model", &err));
    ck_assert_int_eq(err.status, HL_ERR_IO);
}
END_TEST

/* A merge whose two pieces together are longer than the longest token (here
 * "A"x300 twice) is refused before its pieces are joined: it used to write
 * the 600 bytes into a buffer of all the pieces' bytes (557), past its end.
 * Each importer and the stored form refuse it, naming where it was read. */
START_TEST(test_merge_longer_than_any_token)
{
    char a300[301], line[640];
    memset(a300, 'A', 300);
    a300[300] = 0;
    size_t vocab_n, json_n;
    char *vocab = byte_vocab(a300, 300, &vocab_n), dir[64];
    temp_dir(dir);
    write_file(dir, "vocab.json", vocab, vocab_n);
    snprintf(line, sizeof line, "#version: 0.2\n%s %s\n", a300, a300);
    write_file(dir, "merges.txt", line, strlen(line));
    expect_dir_refused(dir, "merges.txt", "merge 0", "longer than any token", NULL);

    snprintf(line, sizeof line, "[\"%s %s\"]", a300, a300);
    char *json = byte_tokenizer_json(vocab, vocab_n, line, &json_n);
    temp_dir(dir);
    write_file(dir, "tokenizer.json", json, json_n);
    expect_dir_refused(dir, "tokenizer.json", "model.merges", "longer than any token", NULL);
    free(json);
    free(vocab);

    /* The stored form (as a model or token file holds it): token 256 is
     * "A"x300, and merge 0 joins it with itself. */
    char *stored = malloc(8 * 256 + 2 * 300 + 128), *at = stored;
    ck_assert_ptr_nonnull(stored);
    at += sprintf(at, "headlab-pretrained-1\npattern .\nignore_merges 0\ntokens 257");
    for (int b = 0; b < 256; b++)
        at += sprintf(at, "\nt \\x%02x", b);
    sprintf(at, "\nt %s\nmerges 1\n256 256", a300);
    hl_error err = {0};
    ck_assert_ptr_null(hl_vocab_parse(stored, &err));
    ck_assert_msg(err.status == HL_ERR_FORMAT && strstr(err.message, "merge 0") &&
                  strstr(err.message, "longer than any token"), "%s", err.message);
    /* The same with a merge that fits ("A"x300 is no merge's result, so the
     * message is the other one): the check is on length, not on the name. */
    sprintf(at, "\nt %s\nmerges 1\n65 65", a300);
    hl_error_clear(&err);
    ck_assert_ptr_null(hl_vocab_parse(stored, &err));
    ck_assert_msg(err.status == HL_ERR_FORMAT && strstr(err.message, "which is no token"), "%s",
                  err.message);
    free(stored);
}
END_TEST

/* Text after the JSON value of vocab.json or tokenizer.json is refused (it
 * used to be ignored); whitespace after it is not. */
START_TEST(test_text_after_json)
{
    size_t vocab_n, json_n;
    char *vocab = byte_vocab(NULL, 0, &vocab_n), dir[64];
    char *junk = malloc(vocab_n + 32);
    ck_assert_ptr_nonnull(junk);
    memcpy(junk, vocab, vocab_n);
    memcpy(junk + vocab_n, " \n\t\r\n", 5);
    temp_dir(dir);
    write_file(dir, "vocab.json", junk, vocab_n + 5);
    write_file(dir, "merges.txt", "#version: 0.2\n", 14);
    hl_vocab_free(load_ok(dir));
    memcpy(junk + vocab_n, " trailing junk", 14);
    write_file(dir, "vocab.json", junk, vocab_n + 14);
    expect_dir_refused(dir, "vocab.json", "text after the value", "line 258", NULL);
    free(junk);

    char *json = byte_tokenizer_json(vocab, vocab_n, "[]", &json_n);
    junk = malloc(json_n + 32);
    ck_assert_ptr_nonnull(junk);
    memcpy(junk, json, json_n);
    memcpy(junk + json_n, "\n", 1);
    temp_dir(dir);
    write_file(dir, "tokenizer.json", junk, json_n + 1);
    hl_vocab_free(load_ok(dir));
    memcpy(junk + json_n, "{\"garbage\": [1,2", 16);
    write_file(dir, "tokenizer.json", junk, json_n + 16);
    expect_dir_refused(dir, "tokenizer.json", "text after the value", NULL);
    free(junk);
    free(json);
    free(vocab);
}
END_TEST

/* A NUL byte in merges.txt, vocab.json or tokenizer.json is refused, naming
 * the file and the line: the readers take lines and names as C strings, so it
 * used to drop every merge after it, or cut a name short ("AB\0C" was "AB").
 * So is the escape \u0000 in a JSON string; an escaped backslash before
 * "u0000" is no NUL. */
START_TEST(test_nul_byte)
{
    char dir[64];
    temp_dir(dir);
    link_fixture(dir, "vocab.json", "encoder.json");
    static const char merges[] = "#version: 0.2\n\xc4\xa0 t\n\0h zzzz\n";
    write_file(dir, "merges.txt", merges, sizeof merges - 1);
    expect_dir_refused(dir, "merges.txt", "merges.txt line 3", "NUL byte", NULL);
    /* Nor is an empty merges.txt (a cut file): it would tokenize byte by byte. */
    temp_dir(dir);
    link_fixture(dir, "vocab.json", "encoder.json");
    write_file(dir, "merges.txt", "\n", 1);
    expect_dir_refused(dir, "merges.txt", "merges.txt: empty", NULL);

    static const struct {
        const char *name, *why; /* a token's name in the JSON text, the refusal */
        size_t n;
    } names[] = {{"AB\0C", "not valid JSON (NUL byte", 4},
                 {"AB\\u0000C", "not valid JSON (string \"AB\\u0000C\" holds \\u0000", 9}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        size_t vocab_n, json_n;
        char *vocab = byte_vocab(names[i].name, names[i].n, &vocab_n);
        temp_dir(dir);
        write_file(dir, "vocab.json", vocab, vocab_n);
        write_file(dir, "merges.txt", "#version: 0.2\n", 14);
        expect_dir_refused(dir, "vocab.json", names[i].why, "line 258", NULL);
        char *json = byte_tokenizer_json(vocab, vocab_n, "[]", &json_n);
        temp_dir(dir);
        write_file(dir, "tokenizer.json", json, json_n);
        expect_dir_refused(dir, "tokenizer.json", names[i].why, "line 258", NULL);
        free(json);
        free(vocab);
    }
    /* The name AB\u0000C, its backslash escaped, in either file. */
    size_t vocab_n, json_n;
    char *vocab = byte_vocab("AB\\\\u0000C", 10, &vocab_n);
    temp_dir(dir);
    write_file(dir, "vocab.json", vocab, vocab_n);
    write_file(dir, "merges.txt", "#version: 0.2\n", 14);
    hl_vocab_free(load_ok(dir));
    char *json = byte_tokenizer_json(vocab, vocab_n, "[]", &json_n);
    temp_dir(dir);
    write_file(dir, "tokenizer.json", json, json_n);
    hl_vocab_free(load_ok(dir));
    free(json);
    free(vocab);
}
END_TEST

Suite *pretrained_suite(void)
{
    Suite *s = suite_create("pretrained");
    TCase *tc = tcase_create("pretrained");
    tcase_set_timeout(tc, 0);
    tcase_add_test(tc, test_gpt2_tokenizer_json);
    tcase_add_test(tc, test_gpt2_pairs);
    tcase_add_test(tc, test_pieces_are_bytes);
    tcase_add_test(tc, test_invalid_utf8);
    tcase_add_test(tc, test_llama3_style);
    tcase_add_test(tc, test_nfc_normalizer);
    tcase_add_test(tc, test_nfc_long_runs_of_marks);
    tcase_add_test(tc, test_white_space_is_unicode);
    tcase_add_test(tc, test_stored_form);
    tcase_add_test(tc, test_post_processor_template);
    tcase_add_test(tc, test_cut);
    tcase_add_test(tc, test_refusals);
    tcase_add_test(tc, test_pair_refusals);
    tcase_add_test(tc, test_merge_longer_than_any_token);
    tcase_add_test(tc, test_text_after_json);
    tcase_add_test(tc, test_nul_byte);
    suite_add_tcase(s, tc);
    return s;
}
