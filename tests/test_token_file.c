/* Tests for data/token_file.c and data/token_write.c: the round trip for
 * each kind of vocabulary and width, and every way a file can be wrong. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/testutil.h"

static const char *text =
    "In the beginning God created the heaven and the earth.\n"
    "And the earth was without form, and void; and darkness was upon the face of the deep.\n"
    "And the Spirit of God moved upon the face of the waters.\n  12 34 x=y; \xc3\xa9t\xc3\xa9\n";

static char path[64];

static void temp_path(void)
{
    strcpy(path, "/tmp/hl-tok-XXXXXX");
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
}

/* text encoded by v, written in three pieces, into path. */
static void write_tokens(const hl_vocab *v, int32_t **tokens, size_t *n)
{
    hl_error err = {0};
    ck_assert_int_eq(hl_vocab_encode(v, (const unsigned char *)text, strlen(text), tokens, n,
                                     &err), HL_OK);
    hl_token_writer *w = hl_token_writer_begin(path, v, &err);
    ck_assert_msg(w, "%s", err.message);
    const size_t a = *n / 3, b = 2 * *n / 3;
    ck_assert_int_eq(hl_token_writer_put(w, *tokens, a, 10, &err), HL_OK);
    ck_assert_int_eq(hl_token_writer_put(w, *tokens + a, b - a, 20, &err), HL_OK);
    ck_assert_int_eq(hl_token_writer_put(w, *tokens + b, *n - b, strlen(text) - 30, &err),
                     HL_OK);
    ck_assert_int_eq(hl_token_writer_count(w), *n);
    ck_assert_int_eq(hl_token_writer_commit(w, &err), HL_OK);
}

/* text -> tokens -> file -> tokens -> text, for v. */
static void round_trip(hl_vocab *v, uint32_t width)
{
    int32_t *tokens;
    size_t n;
    write_tokens(v, &tokens, &n);
    hl_error err = {0};
    hl_token_file *f = hl_token_file_open(path, &err);
    ck_assert_msg(f, "%s", err.message);
    const hl_token_header *h = hl_token_file_header(f);
    ck_assert_uint_eq(h->width, width);
    ck_assert_uint_eq(h->n_tokens, n);
    ck_assert_uint_eq(h->text_bytes, strlen(text));
    ck_assert_uint_eq(h->tokens_at % HL_TOKEN_ALIGN, 0);
    ck_assert_int_eq(hl_vocab_size(hl_token_file_vocab(f)), hl_vocab_size(v));
    char *a = hl_vocab_format(v), *b = hl_vocab_format(hl_token_file_vocab(f));
    ck_assert_str_eq(a, b);
    ck_assert_uint_eq(h->vocab_hash, hl_token_vocab_hash(a, strlen(a)));
    int32_t *back = malloc(sizeof *back * n);
    ck_assert_int_eq(hl_token_file_read(f, 0, n, back, &err), HL_OK);
    ck_assert_mem_eq(back, tokens, sizeof *back * n);
    unsigned char *decoded;
    size_t len;
    ck_assert_int_eq(hl_vocab_decode(hl_token_file_vocab(f), back, n, &decoded, &len, &err),
                     HL_OK);
    ck_assert_uint_eq(len, strlen(text));
    ck_assert_mem_eq(decoded, text, len);
    /* a window in the middle, and reads past the end refused */
    ck_assert_int_eq(hl_token_file_read(f, 5, 7, back, &err), HL_OK);
    ck_assert_mem_eq(back, tokens + 5, sizeof *back * 7);
    ck_assert_int_eq(hl_token_file_read(f, n - 3, 4, back, &err), HL_ERR_ARG);
    ck_assert_int_eq(hl_token_file_read(f, (uint64_t)-1, 2, back, &err), HL_ERR_ARG);
    free(decoded);
    free(back);
    free(a);
    free(b);
    free(tokens);
    hl_token_file_close(f);
    remove(path);
}

START_TEST(test_round_trip_every_vocabulary)
{
    temp_path();
    hl_error err = {0};
    hl_vocab *bytes = hl_vocab_bytes();
    round_trip(bytes, 2);
    hl_vocab *words = hl_vocab_learn((const unsigned char *)text, strlen(text), 300, &err);
    ck_assert_ptr_nonnull(words);
    round_trip(words, 2);
    hl_vocab *bpe = hl_vocab_learn_bpe((const unsigned char *)text, strlen(text), 300, &err);
    ck_assert_ptr_nonnull(bpe);
    round_trip(bpe, 2);
    /* more than 65536 tokens: 4-byte tokens */
    enum { N = 65536 };
    unsigned char(*pieces)[3] = malloc(sizeof *pieces * N);
    const unsigned char **ptr = malloc(sizeof *ptr * N);
    size_t *lens = malloc(sizeof *lens * N);
    for (int i = 0; i < N; i++) {
        pieces[i][0] = (unsigned char)('a' + i % 26);
        pieces[i][1] = (unsigned char)(i / 26 % 256);
        pieces[i][2] = (unsigned char)(i / 26 / 256);
        ptr[i] = pieces[i];
        lens[i] = 3;
    }
    hl_vocab *big = hl_vocab_from_pieces(ptr, lens, N, &err);
    ck_assert_msg(big, "%s", err.message);
    round_trip(big, 4);
    free(pieces);
    free(ptr);
    free(lens);
    hl_vocab_free(big);
    hl_vocab_free(bytes);
    hl_vocab_free(words);
    hl_vocab_free(bpe);
}
END_TEST

/* The file's bytes, to break and write back. */
static unsigned char *file_bytes(size_t *size)
{
    unsigned char *b = hl_fs_read_file(path, size);
    ck_assert_ptr_nonnull(b);
    return b;
}

static void put_bytes(const unsigned char *b, size_t size)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(b, 1, size, f), size);
    fclose(f);
}

/* The file with size bytes b, patched at `at` with len bytes of patch, must
 * be refused with a message naming the file and containing fragment. */
static void expect_refused(const unsigned char *b, size_t size, size_t at, const void *patch,
                           size_t len, const char *fragment)
{
    unsigned char *copy = malloc(size + 64);
    memcpy(copy, b, size);
    if (patch)
        memcpy(copy + at, patch, len);
    put_bytes(copy, size);
    free(copy);
    hl_error err = {0};
    hl_token_file *f = hl_token_file_open(path, &err);
    ck_assert_msg(!f, "opened a file with %s", fragment);
    ck_assert_msg(strstr(err.message, path) && strstr(err.message, fragment),
                  "message \"%s\" lacks the path or \"%s\"", err.message, fragment);
}

START_TEST(test_bad_files_are_refused)
{
    temp_path();
    hl_error err = {0};
    hl_vocab *v = hl_vocab_learn((const unsigned char *)text, strlen(text), 280, &err);
    int32_t *tokens;
    size_t n, size;
    write_tokens(v, &tokens, &n);
    unsigned char *b = file_bytes(&size);
    const uint32_t three = 3, huge = 1u << 30, two_vocab = 300;
    const uint64_t one_more = n + 1, bad_hash = 12345, long_vocab = 1u << 30, zero = 0;
    expect_refused(b, size, 0, "HLTOX", 5, "magic");
    expect_refused(b, size, 8, &three, 4, "version 3");
    expect_refused(b, size, 12, &three, 4, "width 3");
    expect_refused(b, size, 16, &one_more, 8, "truncated");
    expect_refused(b, size, 24, &huge, 4, "vocabulary size");
    expect_refused(b, size, 24, &two_vocab, 4, "vocabulary has 280");
    expect_refused(b, size, 28, &three, 4, "reserved");
    expect_refused(b, size, 32, &bad_hash, 8, "hash");
    expect_refused(b, size, 40, &long_vocab, 8, "truncated");
    expect_refused(b, size, 40, &zero, 8, "vocabulary of 0 bytes");
    expect_refused(b, size, 64, "x", 1, "hash");
    expect_refused(b, size - 1, 0, NULL, 0, "truncated");
    expect_refused(b, 30, 0, NULL, 0, "truncated");
    expect_refused(b, 0, 0, NULL, 0, "truncated");
    /* a vocabulary that does not parse, with its hash right */
    {
        unsigned char *c = malloc(size);
        memcpy(c, b, size);
        c[64 + 12] = 'z'; /* "headlab-wordz-1" */
        uint64_t len, h;
        memcpy(&len, c + 40, 8);
        h = hl_token_vocab_hash((const char *)c + 64, len);
        memcpy(c + 32, &h, 8);
        expect_refused(c, size, 0, NULL, 0, "does not begin");
        free(c);
    }
    /* a token >= the vocabulary size: the file opens, the window that holds
     * it is refused, naming its position */
    const uint16_t bad = 280;
    unsigned char *c = malloc(size);
    memcpy(c, b, size);
    hl_token_header th;
    ck_assert_int_eq(hl_token_header_parse(b, size, size, path, &th, NULL, &err), HL_OK);
    memcpy(c + th.tokens_at + (n - 4) * 2, &bad, 2);
    put_bytes(c, size);
    free(c);
    hl_token_file *f = hl_token_file_open(path, &err);
    ck_assert_msg(f, "%s", err.message);
    int32_t window[8];
    ck_assert_int_eq(hl_token_file_read(f, 0, 8, window, &err), HL_OK);
    ck_assert_int_eq(hl_token_file_read(f, n - 8, 8, window, &err), HL_ERR_FORMAT);
    ck_assert_msg(strstr(err.message, path) && strstr(err.message, "is 280"), "%s",
                  err.message);
    char where[32];
    snprintf(where, sizeof where, "token %zu", n - 4);
    ck_assert_msg(strstr(err.message, where), "%s", err.message);
    hl_token_file_close(f);
    /* a writer refuses a token outside its vocabulary */
    hl_error werr = {0};
    hl_token_writer *w = hl_token_writer_begin(path, v, &werr);
    const int32_t outside[2] = {5, 280};
    ck_assert_int_eq(hl_token_writer_put(w, outside, 2, 2, &werr), HL_ERR_ARG);
    hl_token_writer_abort(w);
    /* not a file, and a missing one */
    hl_error e2 = {0};
    ck_assert_ptr_null(hl_token_file_open("/tmp", &e2));
    ck_assert_ptr_nonnull(strstr(e2.message, "not a regular file"));
    hl_error e3 = {0};
    ck_assert_ptr_null(hl_token_file_open("/nonexistent/x.tok", &e3));
    ck_assert_int_eq(e3.status, HL_ERR_IO);
    free(b);
    free(tokens);
    hl_vocab_free(v);
    remove(path);
}
END_TEST

/* Documents: the index a writer keeps (no empty document, none at the end),
 * a version-1 file read as one document, and a bad index refused. */
START_TEST(test_documents)
{
    temp_path();
    hl_vocab *v = hl_vocab_bytes();
    hl_error err = {0};
    hl_token_writer *w = hl_token_writer_begin(path, v, &err);
    const int32_t abc[] = {'a', 'b', 'c'}, de[] = {'d', 'e'};
    ck_assert_int_eq(hl_token_writer_end_document(w, &err), HL_OK); /* nothing yet */
    ck_assert_int_eq(hl_token_writer_put(w, abc, 3, 3, &err), HL_OK);
    ck_assert_int_eq(hl_token_writer_end_document(w, &err), HL_OK);
    ck_assert_int_eq(hl_token_writer_end_document(w, &err), HL_OK); /* empty: none */
    ck_assert_int_eq(hl_token_writer_put(w, de, 2, 2, &err), HL_OK);
    ck_assert_int_eq(hl_token_writer_end_document(w, &err), HL_OK); /* at the end: none */
    ck_assert_int_eq(hl_token_writer_commit(w, &err), HL_OK);
    hl_token_file *f = hl_token_file_open(path, &err);
    ck_assert_msg(f, "%s", err.message);
    ck_assert_uint_eq(hl_token_file_header(f)->version, 2);
    size_t n;
    const uint64_t *docs = hl_token_file_docs(f, &n);
    ck_assert_uint_eq(n, 2);
    ck_assert(docs[0] == 0 && docs[1] == 3);
    const hl_token_header h = *hl_token_file_header(f);
    hl_token_file_close(f);
    size_t size;
    unsigned char *b = file_bytes(&size);
    ck_assert_uint_eq(size, h.docs_at + 16);
    ck_assert_uint_eq(h.docs_at, h.tokens_at + 10);
    /* the index refused: out of order, past the tokens, a count that does not fit */
    const uint64_t seven = 7, zero = 0, three = 3;
    expect_refused(b, size, h.docs_at + 8, &seven, 8, "document 1 starts at token 7");
    expect_refused(b, size, h.docs_at + 8, &zero, 8, "document 1 starts at token 0");
    expect_refused(b, size, h.docs_at, &three, 8, "document 0 starts at token 3");
    expect_refused(b, size, 56, &three, 8, "truncated");
    /* version 1: no index, one document */
    const uint32_t one = 1;
    memcpy(b + 8, &one, 4);
    memcpy(b + 56, &zero, 8);
    put_bytes(b, (size_t)(h.tokens_at + 10));
    f = hl_token_file_open(path, &err);
    ck_assert_msg(f, "%s", err.message);
    docs = hl_token_file_docs(f, &n);
    ck_assert(n == 1 && docs[0] == 0);
    int32_t back[5];
    ck_assert_int_eq(hl_token_file_read(f, 0, 5, back, &err), HL_OK);
    ck_assert(back[0] == 'a' && back[4] == 'e');
    hl_token_file_close(f);
    memcpy(b + 56, &three, 8); /* version 1 has no document count */
    expect_refused(b, (size_t)(h.tokens_at + 10), 0, NULL, 0, "reserved");
    free(b);
    hl_vocab_free(v);
    remove(path);
}
END_TEST

/* The fingerprint changes with the tokens at either end and the vocabulary. */
START_TEST(test_fingerprint)
{
    temp_path();
    hl_vocab *v = hl_vocab_bytes();
    int32_t *tokens;
    size_t n, size;
    write_tokens(v, &tokens, &n);
    hl_error err = {0};
    hl_token_file *f = hl_token_file_open(path, &err);
    const uint64_t before = hl_token_file_fingerprint(f);
    hl_token_file_close(f);
    unsigned char *b = file_bytes(&size);
    hl_token_header th;
    ck_assert_int_eq(hl_token_header_parse(b, size, size, path, &th, NULL, &err), HL_OK);
    b[th.docs_at - 2] = 'Q'; /* the last token, before the document index */
    put_bytes(b, size);
    f = hl_token_file_open(path, &err);
    ck_assert_msg(f, "%s", err.message);
    ck_assert_uint_ne(hl_token_file_fingerprint(f), before);
    hl_token_file_close(f);
    free(b);
    free(tokens);
    hl_vocab_free(v);
    remove(path);
}
END_TEST

Suite *token_file_suite(void)
{
    Suite *s = suite_create("token_file");
    TCase *tc = tcase_create("token_file");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_round_trip_every_vocabulary);
    tcase_add_test(tc, test_bad_files_are_refused);
    tcase_add_test(tc, test_fingerprint);
    tcase_add_test(tc, test_documents);
    suite_add_tcase(s, tc);
    return s;
}
