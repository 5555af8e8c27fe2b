/* Tests for io/safetensors_read.c and io/safetensors_write.c: round trips,
 * the exact bytes written, atomic saving, and one malformed file per reader
 * rule. */
#include <dirent.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/safetensors.h"
#include "io/internal.h"
#include "tests/testutil.h"

// ----------------------------------------------------------------------------
// helpers

static char tmpdir[64];

static void make_tmpdir(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/hl_st_XXXXXX");
    ck_assert_msg(mkdtemp(tmpdir) != NULL, "mkdtemp failed");
}

/* The number of entries in the temp dir (so tests can see leftovers). */
static int tmpdir_entries(void)
{
    DIR *d = opendir(tmpdir);
    ck_assert(d != NULL);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return n;
}

/* Removes the temp dir and everything in it (files and empty directories). */
static void remove_tmpdir(void)
{
    DIR *d = opendir(tmpdir);
    if (!d)
        return;
    for (struct dirent *e; (e = readdir(d));) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        char path[512];
        snprintf(path, sizeof path, "%s/%s", tmpdir, e->d_name);
        remove(path);
    }
    closedir(d);
    rmdir(tmpdir);
}

static const char *tmp_path(const char *name, char *buf, size_t size)
{
    snprintf(buf, size, "%s/%s", tmpdir, name);
    return buf;
}

static void put_le64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++, v >>= 8)
        p[i] = (unsigned char)(v & 0xFF);
}

/* A file image: 8-byte length, the header, then data_len bytes. */
static unsigned char *image(const char *header, size_t data_len, size_t *len)
{
    size_t n = strlen(header);
    *len = 8 + n + data_len;
    unsigned char *bytes = calloc(1, *len);
    ck_assert(bytes != NULL);
    put_le64(bytes, n);
    memcpy(bytes + 8, header, n);
    for (size_t i = 0; i < data_len; i++)
        bytes[8 + n + i] = (unsigned char)i;
    return bytes;
}

/* Fails unless parsing bytes fails with status, *out NULL and a message
 * containing every fragment (a NULL-terminated list). */
static void expect_parse_error(const unsigned char *bytes, size_t len, hl_status status, ...)
{
    hl_error err = {0};
    hl_safetensors *f = (hl_safetensors *)1;
    hl_status s = hl_safetensors_parse(bytes, len, "bad.safetensors", &f, &err);
    ck_assert_msg(s == status && err.status == status, "status %s, want %s (message: %s)",
                  hl_status_name(s), hl_status_name(status), err.message);
    ck_assert_ptr_null(f);
    ck_assert_msg(strstr(err.message, "safetensors bad.safetensors: ") == err.message,
                  "message does not name the file: %s", err.message);
    va_list ap;
    va_start(ap, status);
    for (const char *frag; (frag = va_arg(ap, const char *));)
        ck_assert_msg(strstr(err.message, frag), "message lacks \"%s\": %s", frag, err.message);
    va_end(ap);
}

/* expect_parse_error (HL_ERR_FORMAT) on image(header, data_len). */
#define EXPECT_BAD(header, data_len, ...)                                                \
    do {                                                                                 \
        size_t len_;                                                                     \
        unsigned char *bytes_ = image(header, data_len, &len_);                          \
        expect_parse_error(bytes_, len_, HL_ERR_FORMAT, __VA_ARGS__, (const char *)NULL); \
        free(bytes_);                                                                    \
    } while (0)

static hl_safetensors *parse_ok(const char *header, size_t data_len)
{
    size_t len;
    unsigned char *bytes = image(header, data_len, &len);
    hl_error err = {0};
    hl_safetensors *f = NULL;
    hl_status s = hl_safetensors_parse(bytes, len, "good.safetensors", &f, &err);
    free(bytes);
    ck_assert_msg(s == HL_OK && f, "parse failed: %s", err.message);
    return f;
}

static hl_safetensors *read_ok(const char *path)
{
    hl_error err = {0};
    hl_safetensors *f = NULL;
    ck_assert_msg(hl_safetensors_read(path, &f, &err) == HL_OK, "%s", err.message);
    return f;
}

static void save_ok(hl_safetensors_writer *w, const char *path)
{
    hl_error err = {0};
    ck_assert_msg(hl_safetensors_writer_save(w, path, &err) == HL_OK, "%s", err.message);
}

static unsigned char *slurp(const char *path, size_t *len)
{
    FILE *fp = fopen(path, "rb");
    ck_assert_msg(fp != NULL, "cannot open %s", path);
    fseek(fp, 0, SEEK_END);
    *len = (size_t)ftell(fp);
    fseek(fp, 0, SEEK_SET);
    unsigned char *bytes = malloc(*len ? *len : 1);
    ck_assert(bytes && fread(bytes, 1, *len, fp) == *len);
    fclose(fp);
    return bytes;
}

static uint64_t get_le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

// ----------------------------------------------------------------------------
// writing and reading back

START_TEST(test_dtype_helpers)
{
    ck_assert_str_eq(hl_dtype_name(HL_DTYPE_F32), "F32");
    ck_assert_str_eq(hl_dtype_name(HL_DTYPE_BOOL), "BOOL");
    ck_assert_str_eq(hl_dtype_name((hl_dtype)99), "?");
    ck_assert_uint_eq(hl_dtype_size(HL_DTYPE_F64), 8);
    ck_assert_uint_eq(hl_dtype_size(HL_DTYPE_I32), 4);
    ck_assert_uint_eq(hl_dtype_size(HL_DTYPE_U8), 1);
    ck_assert_uint_eq(hl_dtype_size((hl_dtype)-1), 0);
    ck_assert(hl_safetensors_utf8_valid("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 14));
    ck_assert(!hl_safetensors_utf8_valid("\xff", 1));
    ck_assert(!hl_safetensors_utf8_valid("\xc0\xaf", 2));     /* overlong '/' */
    ck_assert(!hl_safetensors_utf8_valid("\xed\xa0\x80", 3)); /* a surrogate */
    ck_assert(!hl_safetensors_utf8_valid("\xc3", 1));         /* cut short */
}
END_TEST

START_TEST(test_roundtrip_real)
{
    make_tmpdir();
    char path[128];
    tmp_path("model.safetensors", path, sizeof path);
    hl_tensor *w = tu_random("w", 2, (int[]){3, 5}, false, 1, -2, 2);
    hl_tensor *b = tu_random("b", 1, (int[]){7}, false, 2, -1, 1);
    hl_tensor *x = tu_random("x", 4, (int[]){2, 1, 3, 2}, false, 3, -1e6, 1e6);
    x->data[0] = (hl_real)1e-30;  /* representable in float too */
    hl_safetensors_writer *wr = hl_safetensors_writer_new();
    hl_error err = {0};
    /* Added out of name order: the file is in name order. */
    ck_assert(hl_safetensors_writer_add(wr, "z.weight", w, HL_DTYPE_F32, &err) == HL_OK);
    ck_assert(hl_safetensors_writer_add(wr, "a.bias", b, HL_DTYPE_F64, &err) == HL_OK);
    ck_assert(hl_safetensors_writer_add(wr, "m.x", x, HL_DTYPE_F64, &err) == HL_OK);
    ck_assert(hl_safetensors_writer_set_metadata(wr, "step", "10", &err) == HL_OK);
    ck_assert(hl_safetensors_writer_set_metadata(wr, "note", "caf\xc3\xa9 \"quoted\"\n", &err) ==
              HL_OK);
    ck_assert(hl_safetensors_writer_set_metadata(wr, "step", "12", &err) == HL_OK); /* replaces */
    ck_assert_msg(!hl_error_failed(&err), "%s", err.message);
    /* The writer copied the data: later changes are not saved. */
    w->data[0] += 1;
    save_ok(wr, path);
    w->data[0] -= 1;
    hl_safetensors_writer_free(wr);

    hl_safetensors *f = read_ok(path);
    ck_assert_uint_eq(hl_safetensors_count(f), 3);
    const char *names[] = {"a.bias", "m.x", "z.weight"};
    for (size_t i = 0; i < 3; i++)
        ck_assert_str_eq(hl_safetensors_entry(f, i)->name, names[i]);
    ck_assert_ptr_null(hl_safetensors_entry(f, 3));
    /* Data in name order: each tensor starts where the previous one ends. */
    for (size_t i = 1; i < 3; i++) {
        const hl_safetensors_entry_info *prev = hl_safetensors_entry(f, i - 1);
        ck_assert_ptr_eq(hl_safetensors_entry(f, i)->data, prev->data + prev->nbytes);
    }

    const hl_safetensors_entry_info *e = hl_safetensors_find(f, "z.weight");
    ck_assert(e && e->dtype == HL_DTYPE_F32 && e->rank == 2 && e->nbytes == 60);
    ck_assert(e->shape[0] == 3 && e->shape[1] == 5);
    e = hl_safetensors_find(f, "m.x");
    ck_assert(e && e->dtype == HL_DTYPE_F64 && e->rank == 4 && e->nbytes == 96);
    ck_assert(e->shape[0] == 2 && e->shape[1] == 1 && e->shape[2] == 3 && e->shape[3] == 2);
    ck_assert_ptr_null(hl_safetensors_find(f, "missing"));
    ck_assert_str_eq(hl_safetensors_metadata(f, "step"), "12");
    ck_assert_str_eq(hl_safetensors_metadata(f, "note"), "caf\xc3\xa9 \"quoted\"\n");
    ck_assert_ptr_null(hl_safetensors_metadata(f, "missing"));

    hl_tensor *w2 = hl_safetensors_load(f, "z.weight", true, &err);
    hl_tensor *b2 = hl_safetensors_load(f, "a.bias", false, &err);
    hl_tensor *x2 = hl_tensor_new("x2", 4, (int[]){2, 1, 3, 2}, false);
    ck_assert(hl_safetensors_copy_to(f, "m.x", x2, &err) == HL_OK);
    ck_assert_msg(w2 && b2 && !hl_error_failed(&err), "%s", err.message);
    ck_assert_str_eq(w2->name, "z.weight");
    ck_assert(w2->requires_grad && w2->grad && !b2->requires_grad);
    ck_assert(hl_tensor_same_shape(w2, w) && hl_tensor_same_shape(b2, b));
    /* F32 rounds a double build's values once; F64 keeps every bit. */
    for (size_t i = 0; i < w->numel; i++)
        ck_assert(w2->data[i] == (hl_real)(float)w->data[i]);
    ck_assert(memcmp(b2->data, b->data, b->numel * sizeof(hl_real)) == 0);
    ck_assert(memcmp(x2->data, x->data, x->numel * sizeof(hl_real)) == 0);

    hl_safetensors_free(f);
    hl_tensor_free(w);
    hl_tensor_free(b);
    hl_tensor_free(x);
    hl_tensor_free(w2);
    hl_tensor_free(b2);
    hl_tensor_free(x2);
    ck_assert_int_eq(tmpdir_entries(), 1);
    remove_tmpdir();
}
END_TEST

/* The exact bytes, so the layout does not depend on reading our own files:
 * little-endian length, header padded to 8 with spaces, little-endian data. */
START_TEST(test_golden_bytes)
{
    make_tmpdir();
    char path[128];
    tmp_path("golden.safetensors", path, sizeof path);
    hl_tensor *t = hl_tensor_new("t", 1, (int[]){2}, false);
    t->data[0] = 1;
    t->data[1] = -2;
    hl_safetensors_writer *w = hl_safetensors_writer_new();
    hl_error err = {0};
    ck_assert(hl_safetensors_writer_add(w, "t", t, HL_DTYPE_F32, &err) == HL_OK);
    ck_assert(hl_safetensors_writer_add_raw(w, "i", HL_DTYPE_I32, 0, NULL, (int32_t[]){-2}, &err) ==
              HL_OK);
    ck_assert(hl_safetensors_writer_set_metadata(w, "k", "v", &err) == HL_OK);
    save_ok(w, path);
    hl_safetensors_writer_free(w);

    static const char header[] =
        "{\"i\":{\"dtype\":\"I32\",\"shape\":[],\"data_offsets\":[0,4]},"
        "\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]},"
        "\"__metadata__\":{\"k\":\"v\"}}";
    size_t n = sizeof header - 1, padded = (n + 7) / 8 * 8;
    static const unsigned char data[] = {0xfe, 0xff, 0xff, 0xff, 0x00, 0x00,
                                         0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0};
    size_t len;
    unsigned char *bytes = slurp(path, &len);
    ck_assert_uint_eq(len, 8 + padded + sizeof data);
    ck_assert_uint_eq(get_le64(bytes), padded);
    ck_assert_uint_eq(padded % 8, 0);
    ck_assert_msg(memcmp(bytes + 8, header, n) == 0, "header: %.*s", (int)padded, bytes + 8);
    for (size_t i = n; i < padded; i++)
        ck_assert_int_eq(bytes[8 + i], ' ');
    ck_assert(memcmp(bytes + 8 + padded, data, sizeof data) == 0);
    free(bytes);
    hl_tensor_free(t);
    remove_tmpdir();
}
END_TEST

START_TEST(test_roundtrip_raw)
{
    make_tmpdir();
    char path[128];
    tmp_path("masks.safetensors", path, sizeof path);
    const uint8_t mask[6] = {0, 1, 1, 0, 0, 1};
    const uint8_t bytes[5] = {0, 7, 255, 3, 128};
    const int32_t ints[3] = {-5, 0, 2147483647};
    const int64_t longs[2] = {-3, 1099511627776};
    hl_safetensors_writer *w = hl_safetensors_writer_new();
    hl_error err = {0};
    hl_safetensors_writer_add_raw(w, "mask", HL_DTYPE_BOOL, 2, (int64_t[]){2, 3}, mask, &err);
    hl_safetensors_writer_add_raw(w, "bytes", HL_DTYPE_U8, 1, (int64_t[]){5}, bytes, &err);
    hl_safetensors_writer_add_raw(w, "ints", HL_DTYPE_I32, 3, (int64_t[]){1, 3, 1}, ints, &err);
    hl_safetensors_writer_add_raw(w, "longs", HL_DTYPE_I64, 1, (int64_t[]){2}, longs, &err);
    hl_safetensors_writer_add_raw(w, "empty", HL_DTYPE_U8, 2, (int64_t[]){0, 4}, NULL, &err);
    ck_assert_msg(!hl_error_failed(&err), "%s", err.message);
    save_ok(w, path);
    hl_safetensors_writer_free(w);

    hl_safetensors *f = read_ok(path);
    ck_assert_uint_eq(hl_safetensors_count(f), 5);
    const hl_safetensors_entry_info *e = hl_safetensors_find(f, "mask");
    ck_assert(e && e->dtype == HL_DTYPE_BOOL && e->nbytes == 6);
    ck_assert(memcmp(e->data, mask, 6) == 0);
    e = hl_safetensors_find(f, "bytes");
    ck_assert(e && e->dtype == HL_DTYPE_U8 && memcmp(e->data, bytes, 5) == 0);
    e = hl_safetensors_find(f, "empty");
    ck_assert(e && e->rank == 2 && e->shape[0] == 0 && e->shape[1] == 4 && e->nbytes == 0);
    e = hl_safetensors_find(f, "longs");
    ck_assert(e && e->dtype == HL_DTYPE_I64 && e->nbytes == 16);
    /* -3 as little-endian two's complement. */
    ck_assert(e->data[0] == 0xfd && e->data[7] == 0xff);

    /* Conversion to hl_real, e.g. for masks. */
    hl_tensor *m = hl_safetensors_load(f, "mask", false, &err);
    hl_tensor *u = hl_safetensors_load(f, "bytes", false, &err);
    hl_tensor *i32 = hl_safetensors_load(f, "ints", false, &err);
    hl_tensor *i64 = hl_safetensors_load(f, "longs", false, &err);
    ck_assert_msg(m && u && i32 && i64, "%s", err.message);
    for (int i = 0; i < 6; i++)
        ck_assert(m->data[i] == mask[i]);
    for (int i = 0; i < 5; i++)
        ck_assert(u->data[i] == bytes[i]);
    ck_assert(i32->rank == 3 && i32->shape[1] == 3);
    ck_assert(i32->data[0] == -5 && i32->data[2] == (hl_real)2147483647);
    ck_assert(i64->data[0] == -3 && i64->data[1] == (hl_real)1099511627776.0);
    /* A zero dim cannot become a headlab tensor. */
    ck_assert_ptr_null(hl_safetensors_load(f, "empty", false, &err));
    ck_assert(err.status == HL_ERR_SHAPE && strstr(err.message, "(0,4)"));
    hl_tensor_free(m);
    hl_tensor_free(u);
    hl_tensor_free(i32);
    hl_tensor_free(i64);
    hl_safetensors_free(f);
    remove_tmpdir();
}
END_TEST

START_TEST(test_writer_errors)
{
    hl_safetensors_writer *w = hl_safetensors_writer_new();
    hl_tensor *t = hl_tensor_new("t", 1, (int[]){2}, false);
    hl_error err = {0};
    ck_assert(hl_safetensors_writer_add(w, "t", t, HL_DTYPE_F32, &err) == HL_OK);
    ck_assert(hl_safetensors_writer_add(w, "t", t, HL_DTYPE_F64, &err) == HL_ERR_ARG);
    ck_assert(strstr(err.message, "\"t\" added twice"));
    hl_error_clear(&err);
    ck_assert(hl_safetensors_writer_add(w, "__metadata__", t, HL_DTYPE_F32, &err) == HL_ERR_ARG);
    hl_error_clear(&err);
    ck_assert(hl_safetensors_writer_add(w, "bad\xff", t, HL_DTYPE_F32, &err) == HL_ERR_ARG);
    hl_error_clear(&err);
    ck_assert(hl_safetensors_writer_add(w, "u", t, HL_DTYPE_I32, &err) == HL_ERR_ARG);
    ck_assert(strstr(err.message, "I32"));
    hl_error_clear(&err);
    ck_assert(hl_safetensors_writer_add(w, "n", NULL, HL_DTYPE_F32, &err) == HL_ERR_ARG);
    hl_error_clear(&err);
    ck_assert(hl_safetensors_writer_add_raw(w, "b", HL_DTYPE_BOOL, 1, (int64_t[]){2},
                                            (uint8_t[]){1, 2}, &err) == HL_ERR_ARG);
    ck_assert(strstr(err.message, "BOOL byte 1 is 2"));
    hl_error_clear(&err);
    ck_assert(hl_safetensors_writer_add_raw(w, "neg", HL_DTYPE_U8, 1, (int64_t[]){-1}, "", &err) ==
              HL_ERR_SHAPE);
    hl_error_clear(&err);
    ck_assert(hl_safetensors_writer_add_raw(w, "r9", HL_DTYPE_U8, 9, (int64_t[9]){1}, "", &err) ==
              HL_ERR_SHAPE);
    hl_error_clear(&err);
    ck_assert(hl_safetensors_writer_add_raw(w, "nul", HL_DTYPE_U8, 1, (int64_t[]){3}, NULL, &err) ==
              HL_ERR_ARG);
    hl_error_clear(&err);
    ck_assert(hl_safetensors_writer_set_metadata(w, "k", "\xc3", &err) == HL_ERR_ARG);
    hl_tensor_free(t);
    hl_safetensors_writer_free(w);
}
END_TEST

START_TEST(test_save_atomic)
{
    make_tmpdir();
    char path[128], missing[160];
    tmp_path("ckpt.safetensors", path, sizeof path);
    snprintf(missing, sizeof missing, "%s/no_such_dir/ckpt.safetensors", tmpdir);
    hl_tensor *t = tu_random("t", 1, (int[]){4}, false, 7, -1, 1);
    hl_safetensors_writer *w = hl_safetensors_writer_new();
    hl_error err = {0};
    ck_assert(hl_safetensors_writer_add(w, "t", t, HL_DTYPE_F32, &err) == HL_OK);

    /* A directory that does not exist: an error and no file anywhere. */
    ck_assert(hl_safetensors_writer_save(w, missing, &err) == HL_ERR_IO);
    ck_assert_msg(strstr(err.message, missing), "%s", err.message);
    ck_assert_int_eq(tmpdir_entries(), 0);
    hl_error_clear(&err);

    /* Over an existing file: replaced, and no temporary file left. */
    FILE *fp = fopen(path, "wb");
    ck_assert(fp != NULL);
    fputs("old contents", fp);
    fclose(fp);
    save_ok(w, path);
    ck_assert_int_eq(tmpdir_entries(), 1);
    hl_safetensors *f = read_ok(path);
    ck_assert(hl_safetensors_find(f, "t") != NULL);
    hl_safetensors_free(f);

    /* A path that is a directory is refused (files/atomic.h) and left as it
     * was, no temporary file beside it. */
    char dir[128];
    tmp_path("a_directory", dir, sizeof dir);
    ck_assert(mkdir(dir, 0700) == 0);
    ck_assert(hl_safetensors_writer_save(w, dir, &err) == HL_ERR_IO);
    ck_assert_msg(strstr(err.message, "is a directory"), "%s", err.message);
    struct stat st;
    ck_assert(stat(dir, &st) == 0 && S_ISDIR(st.st_mode));
    ck_assert_int_eq(tmpdir_entries(), 2);

    hl_safetensors_writer_free(w);
    hl_tensor_free(t);
    remove_tmpdir();
}
END_TEST

START_TEST(test_read_file_errors)
{
    make_tmpdir();
    char path[128];
    hl_error err = {0};
    hl_safetensors *f = NULL;
    ck_assert(hl_safetensors_read(tmp_path("absent", path, sizeof path), &f, &err) == HL_ERR_IO);
    ck_assert(strstr(err.message, path) && f == NULL);
    hl_error_clear(&err);
    ck_assert(hl_safetensors_read(tmpdir, &f, &err) == HL_ERR_IO);
    hl_error_clear(&err);
    /* A file with trailing bytes: the message names the file. */
    size_t len;
    unsigned char *bytes = image("{}", 3, &len);
    FILE *fp = fopen(tmp_path("trailing.safetensors", path, sizeof path), "wb");
    ck_assert(fp && fwrite(bytes, 1, len, fp) == len);
    fclose(fp);
    free(bytes);
    ck_assert(hl_safetensors_read(path, &f, &err) == HL_ERR_FORMAT);
    ck_assert_msg(strstr(err.message, path) && strstr(err.message, "3 trailing bytes"), "%s",
                  err.message);
    remove_tmpdir();
}
END_TEST

/* hl_safetensors_read_header: the entries and metadata of a full read, no
 * values (copy_to and load refuse); the file's size still checked against
 * the entries (a cut-off or overlong file refused, naming it). */
START_TEST(test_read_header)
{
    make_tmpdir();
    char path[128];
    hl_error err = {0};
    hl_tensor *w = tu_random("w", 2, (int[]){3, 5}, false, 1, -2, 2);
    hl_tensor *b = tu_random("b", 1, (int[]){7}, false, 2, -1, 1);
    hl_safetensors_writer *wr = hl_safetensors_writer_new();
    ck_assert(hl_safetensors_writer_add(wr, "w", w, HL_DTYPE_F32, &err) == HL_OK);
    ck_assert(hl_safetensors_writer_add(wr, "b", b, HL_DTYPE_F64, &err) == HL_OK);
    ck_assert(hl_safetensors_writer_set_metadata(wr, "step", "12", &err) == HL_OK);
    save_ok(wr, tmp_path("model.safetensors", path, sizeof path));
    hl_safetensors_writer_free(wr);
    hl_safetensors *full = read_ok(path), *head = NULL;
    ck_assert_msg(hl_safetensors_read_header(path, &head, &err) == HL_OK, "%s", err.message);
    ck_assert_uint_eq(hl_safetensors_count(head), 2);
    for (size_t i = 0; i < 2; i++) {
        const hl_safetensors_entry_info *x = hl_safetensors_entry(full, i);
        const hl_safetensors_entry_info *y = hl_safetensors_entry(head, i);
        ck_assert(!strcmp(x->name, y->name) && x->dtype == y->dtype && x->rank == y->rank &&
                  !memcmp(x->shape, y->shape, sizeof x->shape) && x->nbytes == y->nbytes &&
                  x->offset == y->offset && x->data && !y->data);
    }
    ck_assert_str_eq(hl_safetensors_metadata(head, "step"), "12");
    ck_assert_int_eq(hl_safetensors_copy_to(head, "b", b, &err), HL_ERR_ARG);
    ck_assert_msg(strstr(err.message, "only the header was read"), "%s", err.message);
    hl_error_clear(&err);
    ck_assert_ptr_null(hl_safetensors_load(head, "w", false, &err));
    hl_safetensors_free(head);
    hl_safetensors_free(full);
    /* One byte short, then one too many. */
    size_t len;
    unsigned char *bytes = slurp(path, &len);
    for (int extra = -1; extra <= 1; extra += 2) {
        FILE *fp = fopen(path, "wb");
        ck_assert(fp && fwrite(bytes, 1, len - 1, fp) == len - 1);
        for (int k = 0; k < extra + 1; k++) /* the last byte, then one more */
            ck_assert(fputc(bytes[len - 1], fp) != EOF);
        fclose(fp);
        hl_error_clear(&err);
        ck_assert_int_eq(hl_safetensors_read_header(path, &head, &err), HL_ERR_FORMAT);
        ck_assert_msg(strstr(err.message, path) &&
                      strstr(err.message, extra < 0 ? "go past the end" : "trailing byte"),
                      "%s", err.message);
        ck_assert_ptr_null(head);
    }
    free(bytes);
    /* Shorter than its header. */
    FILE *fp = fopen(path, "wb");
    ck_assert(fp && fwrite("\x20\0\0\0\0\0\0\0{}", 1, 10, fp) == 10);
    fclose(fp);
    hl_error_clear(&err);
    ck_assert_int_eq(hl_safetensors_read_header(path, &head, &err), HL_ERR_FORMAT);
    ck_assert_msg(strstr(err.message, "header length 32 is more than the 2 bytes"), "%s",
                  err.message);
    hl_tensor_free(w);
    hl_tensor_free(b);
    remove_tmpdir();
}
END_TEST

/* Files the reader must accept: no tensors, padding, entries listed out of
 * data order, empty tensors, a scalar. */
START_TEST(test_reader_accepts)
{
    hl_safetensors *f = parse_ok("{}", 0);
    ck_assert_uint_eq(hl_safetensors_count(f), 0);
    ck_assert_ptr_null(hl_safetensors_find(f, "a"));
    hl_safetensors_free(f);

    f = parse_ok("{\"b\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[4,6]},"
                 "\"e\":{\"dtype\":\"F64\",\"shape\":[3,0],\"data_offsets\":[4,4]},"
                 "\"a\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]},"
                 "\"__metadata__\":{}}   \n\t ",
                 6);
    ck_assert_uint_eq(hl_safetensors_count(f), 3);
    const hl_safetensors_entry_info *b = hl_safetensors_find(f, "b");
    ck_assert(b && b->data[0] == 4 && b->data[1] == 5);
    hl_error err = {0};
    hl_tensor *a = hl_safetensors_load(f, "a", false, &err);
    ck_assert_msg(a && a->rank == 1 && a->shape[0] == 1, "%s", err.message);
    /* Bytes 0..3 of the data: 0x03020100 as a little-endian float. */
    uint32_t bits = 0x03020100u;
    float expect;
    memcpy(&expect, &bits, sizeof expect);
    ck_assert(a->data[0] == (hl_real)expect);
    hl_tensor_free(a);
    hl_safetensors_free(f);

    /* An error already recorded (the first one is kept) does not fail a
     * good file. */
    size_t len;
    unsigned char *bytes =
        image("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1, &len);
    hl_error_set(&err, HL_ERR_ARG, "earlier");
    ck_assert(hl_safetensors_parse(bytes, len, NULL, &f, &err) == HL_OK && f);
    ck_assert_str_eq(err.message, "earlier");
    hl_safetensors_free(f);
    free(bytes);
}
END_TEST

// ----------------------------------------------------------------------------
// one malformed file per reader rule

START_TEST(test_reject_short_file)
{
    unsigned char bytes[5] = {2, 0, 0, 0, 0};
    expect_parse_error(bytes, sizeof bytes, HL_ERR_FORMAT, "5 bytes", "8-byte header length",
                       (const char *)NULL);
    expect_parse_error(NULL, 0, HL_ERR_FORMAT, "0 bytes", (const char *)NULL);
}
END_TEST

START_TEST(test_reject_header_too_large)
{
    size_t len;
    unsigned char *bytes = image("{}", 0, &len);
    put_le64(bytes, 100000001);
    expect_parse_error(bytes, len, HL_ERR_FORMAT, "header length 100000001",
                       "over the limit of 100000000", (const char *)NULL);
    put_le64(bytes, UINT64_MAX);
    expect_parse_error(bytes, len, HL_ERR_FORMAT, "over the limit", (const char *)NULL);
    free(bytes);
}
END_TEST

START_TEST(test_reject_header_past_file)
{
    size_t len;
    unsigned char *bytes = image("{}", 0, &len);
    put_le64(bytes, 3);
    expect_parse_error(bytes, len, HL_ERR_FORMAT, "header length 3",
                       "more than the 2 bytes after it", (const char *)NULL);
    free(bytes);
}
END_TEST

START_TEST(test_reject_invalid_json)
{
    EXPECT_BAD("{\"a\": {", 0, "not valid JSON");
    EXPECT_BAD("{\"a\": 1,}", 0, "not valid JSON");
    EXPECT_BAD("{} {}", 0, "not valid JSON", "text after the value at byte 3");
    EXPECT_BAD("{\"a\x01\": 1}", 0, "control byte 0x01");
    EXPECT_BAD("{\"\xff\": 1}", 0, "not valid UTF-8");
    EXPECT_BAD("", 0, "not valid JSON");
}
END_TEST

/* cJSON keeps \u0000 inside a string, where the C string ends: "a\u0000b"
 * would be read as the tensor "a". An escaped backslash before "u0000" is no
 * NUL. */
START_TEST(test_reject_nul_in_strings)
{
    EXPECT_BAD("{\"a\\u0000b\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
               "header is not valid JSON (string \"a\\u0000b\" holds \\u0000 (byte 1");
    EXPECT_BAD("{\"a\":{\"dtype\":\"U8\\u0000x\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
               "\"U8\\u0000x\"");
    EXPECT_BAD("{\"__metadata__\":{\"k\":\"1\\u0000 2\"}}", 0, "\"1\\u0000 2\"");
    hl_safetensors *f =
        parse_ok("{\"a\\\\u0000\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1);
    ck_assert_ptr_nonnull(hl_safetensors_find(f, "a\\u0000"));
    hl_safetensors_free(f);
}
END_TEST

START_TEST(test_reject_not_object)
{
    EXPECT_BAD("[1, 2]", 0, "header is an array, not a JSON object");
    EXPECT_BAD("\"x\"  ", 0, "header is a string, not a JSON object");
    EXPECT_BAD("{\"a\": [1]}", 0, "tensor \"a\": entry is an array, not an object");
}
END_TEST

START_TEST(test_reject_unknown_dtype)
{
    EXPECT_BAD("{\"w\":{\"dtype\":\"F31\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
               "tensor \"w\"", "unknown dtype \"F31\"");
    EXPECT_BAD("{\"w\":{\"dtype\":\"f32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
               "unknown dtype \"f32\"");
    EXPECT_BAD("{\"w\":{\"dtype\":\"I8\",\"shape\":[4],\"data_offsets\":[0,4]}}", 4,
               "tensor \"w\"", "dtype I8 is not supported");
    EXPECT_BAD("{\"w\":{\"dtype\":4,\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
               "dtype is a number, not a string");
}
END_TEST

/* F16 and BF16 load exactly: normal, subnormal, signed zero, infinity, NaN. */
START_TEST(test_half_precision_values)
{
    static const char header[] =
        "{\"h\":{\"dtype\":\"F16\",\"shape\":[7],\"data_offsets\":[0,14]},"
        "\"b\":{\"dtype\":\"BF16\",\"shape\":[5],\"data_offsets\":[14,24]}}";
    /* F16: 1, -2.5, 65504 (largest), 2^-24 (smallest subnormal), -0, -inf, NaN;
     * BF16: 1, -3.140625 (0xc049), 2^-133 (the smallest subnormal), inf, NaN. */
    static const unsigned char data[] = {0x00, 0x3c, 0x00, 0xc1, 0xff, 0x7b, 0x01, 0x00,
                                         0x00, 0x80, 0x00, 0xfc, 0x01, 0x7e, 0x80, 0x3f,
                                         0x49, 0xc0, 0x01, 0x00, 0x80, 0x7f, 0xc1, 0x7f};
    size_t n = sizeof header - 1, len = 8 + n + sizeof data;
    unsigned char *bytes = calloc(1, len);
    ck_assert(bytes);
    put_le64(bytes, n);
    memcpy(bytes + 8, header, n);
    memcpy(bytes + 8 + n, data, sizeof data);
    hl_error err = {0};
    hl_safetensors *f = NULL;
    ck_assert_msg(hl_safetensors_parse(bytes, len, "half", &f, &err) == HL_OK, "%s", err.message);
    free(bytes);
    hl_tensor *h = hl_safetensors_load(f, "h", false, &err);
    hl_tensor *b = hl_safetensors_load(f, "b", false, &err);
    ck_assert_msg(h && b, "%s", err.message);
    const double want_h[5] = {1, -2.5, 65504, 0x1p-24, 0};
    for (int i = 0; i < 5; i++)
        ck_assert_msg((double)h->data[i] == want_h[i], "F16 %d: %g", i, (double)h->data[i]);
    ck_assert(signbit(h->data[4]) && isinf(h->data[5]) && h->data[5] < 0 && isnan(h->data[6]));
    ck_assert((double)b->data[0] == 1 && (double)b->data[1] == -3.140625);
    ck_assert((double)b->data[2] == 0x1p-133);
    ck_assert(isinf(b->data[3]) && b->data[3] > 0 && isnan(b->data[4]));
    hl_tensor_free(h);
    hl_tensor_free(b);
    hl_safetensors_free(f);
}
END_TEST

/* The first value a loader's rule refuses once converted: for weights an
 * infinity or NaN of any float dtype, an F64 beyond float's range in the
 * float build, an integer never; for second moments NaN or a negative value;
 * for additive masks NaN or +inf. None refused gives the number of values. */
START_TEST(test_first_refused)
{
    make_tmpdir();
    char path[128];
    hl_error err = {0};
    hl_safetensors_writer *w = hl_safetensors_writer_new();
    const double wide[3] = {-1e300, 1, NAN};
    const float narrow[3] = {1, FLT_MAX, 3};
    const uint16_t half[3] = {0x3c00, 0x7c00, 0xfc00}, brain[2] = {0x3f80, 0x7fc1};
    const int32_t ints[2] = {INT32_MIN, INT32_MAX};
    ck_assert(hl_safetensors_writer_add_raw(w, "f64", HL_DTYPE_F64, 1, (int64_t[]){3}, wide,
                                            &err) == HL_OK);
    ck_assert(hl_safetensors_writer_add_raw(w, "f32", HL_DTYPE_F32, 1, (int64_t[]){3}, narrow,
                                            &err) == HL_OK);
    ck_assert(hl_safetensors_writer_add_raw(w, "f16", HL_DTYPE_F16, 1, (int64_t[]){3}, half,
                                            &err) == HL_OK);
    ck_assert(hl_safetensors_writer_add_raw(w, "bf16", HL_DTYPE_BF16, 1, (int64_t[]){2}, brain,
                                            &err) == HL_OK);
    ck_assert(hl_safetensors_writer_add_raw(w, "i32", HL_DTYPE_I32, 1, (int64_t[]){2}, ints,
                                            &err) == HL_OK);
    save_ok(w, tmp_path("finite.safetensors", path, sizeof path));
    hl_safetensors_writer_free(w);
    hl_safetensors *f = read_ok(path);
    const hl_safetensors_entry_info *f64 = hl_safetensors_find(f, "f64");
#ifdef HL_REAL_DOUBLE
    ck_assert_uint_eq(hl_io_first_refused(f64, HL_IO_FINITE), 2);
    const char *want = "wide: tensor \"f64\" holds NaN at element 2 (values must be finite)";
#else
    ck_assert_uint_eq(hl_io_first_refused(f64, HL_IO_FINITE), 0);
    const char *want = "wide: tensor \"f64\" holds -1e+300, beyond float's range, at element 0 "
                       "(values must be finite)";
#endif
    ck_assert_int_eq(hl_io_check_values(f64, "wide", HL_IO_FINITE, &err), HL_ERR_FORMAT);
    ck_assert_msg(!strcmp(err.message, want), "%s", err.message);
    ck_assert_uint_eq(hl_io_first_refused(f64, HL_IO_SECOND_MOMENT), 0);
    ck_assert_uint_eq(hl_io_first_refused(f64, HL_IO_ADDITIVE_MASK), 2);
    for (int rule = 0; rule < 3; rule++)
        ck_assert_uint_eq(hl_io_first_refused(hl_safetensors_find(f, "f32"), rule), 3);
    const hl_safetensors_entry_info *f16 = hl_safetensors_find(f, "f16"); /* 1, inf, -inf */
    ck_assert_uint_eq(hl_io_first_refused(f16, HL_IO_FINITE), 1);
    ck_assert_uint_eq(hl_io_first_refused(f16, HL_IO_SECOND_MOMENT), 2);
    ck_assert_uint_eq(hl_io_first_refused(f16, HL_IO_ADDITIVE_MASK), 1);
    ck_assert_uint_eq(hl_io_first_refused(hl_safetensors_find(f, "bf16"), HL_IO_SECOND_MOMENT),
                      1);
    ck_assert_uint_eq(hl_io_first_refused(hl_safetensors_find(f, "i32"), HL_IO_FINITE), 2);
    ck_assert(hl_safetensors_value(f16, 1) == INFINITY);
    ck_assert(hl_safetensors_value(hl_safetensors_find(f, "i32"), 0) == INT32_MIN);
    hl_safetensors_free(f);
    remove_tmpdir();
}
END_TEST

START_TEST(test_reject_bad_shape)
{
    EXPECT_BAD("{\"w\":{\"dtype\":\"U8\",\"shape\":[-1],\"data_offsets\":[0,0]}}", 0,
               "tensor \"w\"", "shape[0] is -1, not an integer in 0..2^53");
    EXPECT_BAD("{\"w\":{\"dtype\":\"U8\",\"shape\":[2,2.5],\"data_offsets\":[0,5]}}", 5,
               "shape[1] is 2.5");
    EXPECT_BAD("{\"w\":{\"dtype\":\"U8\",\"shape\":[\"3\"],\"data_offsets\":[0,3]}}", 3,
               "shape[0] is a string");
    EXPECT_BAD("{\"w\":{\"dtype\":\"U8\",\"shape\":[1e300],\"data_offsets\":[0,3]}}", 3,
               "shape[0] is 1.0000000000000001e+300");
    EXPECT_BAD("{\"w\":{\"dtype\":\"U8\",\"shape\":3,\"data_offsets\":[0,3]}}", 3,
               "shape is a number, not an array");
    EXPECT_BAD("{\"w\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,1]}}",
               1, "shape has rank 9, more than 8");
}
END_TEST

START_TEST(test_reject_size_mismatch)
{
    EXPECT_BAD("{\"w\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8,
               "tensor \"w\"", "shape (3) of F32 needs 12 bytes but data_offsets [0, 8] hold 8");
    /* 2^32 * 2^32 elements overflow 64 bits before the byte count. */
    EXPECT_BAD("{\"w\":{\"dtype\":\"U8\",\"shape\":[4294967296,4294967296],"
               "\"data_offsets\":[0,0]}}",
               0, "overflows 64 bits");
    EXPECT_BAD("{\"w\":{\"dtype\":\"I64\",\"shape\":[4294967296,536870912],"
               "\"data_offsets\":[0,0]}}",
               0, "overflows 64 bits");
    /* An overflowing product times zero is zero: fine by the size rule. */
    hl_safetensors *f = parse_ok("{\"w\":{\"dtype\":\"U8\",\"shape\":[4294967296,4294967296,0],"
                                 "\"data_offsets\":[0,0]}}", 0);
    hl_safetensors_free(f);
}
END_TEST

START_TEST(test_reject_bad_offsets)
{
    EXPECT_BAD("{\"w\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[4,0]}}", 4,
               "data_offsets [4, 0] end before they begin");
    EXPECT_BAD("{\"w\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4,8]}}", 4,
               "data_offsets must be two integers in 0..2^53");
    EXPECT_BAD("{\"w\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[-4,0]}}", 4,
               "data_offsets must be two");
}
END_TEST

START_TEST(test_reject_out_of_bounds)
{
    EXPECT_BAD("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4,
               "tensor \"w\"", "data_offsets [0, 8] go past the end of the 4-byte data buffer");
}
END_TEST

START_TEST(test_reject_claims_beyond_the_file)
{
    /* A 4 TB tensor claimed by a 16-byte data buffer, in memory and on disk:
     * refused from the header, before anything of the claimed size is
     * allocated (under ASan such an allocation would abort the test). */
    const char *header = "{\"w\":{\"dtype\":\"F32\",\"shape\":[1000000,1000000],"
                         "\"data_offsets\":[0,4000000000000]}}";
    EXPECT_BAD(header, 16, "data_offsets [0, 4000000000000] go past the end of the 16-byte "
                           "data buffer");
    char dir[] = "/tmp/headlab-st-XXXXXX", path[64];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/big.safetensors", dir);
    size_t len;
    unsigned char *bytes = image(header, 16, &len);
    FILE *fp = fopen(path, "wb");
    ck_assert(fp && fwrite(bytes, 1, len, fp) == len && fclose(fp) == 0);
    free(bytes);
    hl_error err = {0};
    hl_safetensors *f = NULL;
    ck_assert_int_eq(hl_safetensors_read(path, &f, &err), HL_ERR_FORMAT);
    ck_assert_ptr_null(f);
    ck_assert_msg(strstr(err.message, "go past the end"), "%s", err.message);
    unlink(path);
    rmdir(dir);
}
END_TEST

START_TEST(test_reject_overlap)
{
    EXPECT_BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
               "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
               12, "tensor \"b\": data_offsets [4, 12] overlap tensor \"a\"");
    /* The same range twice. */
    EXPECT_BAD("{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
               "\"b\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
               4, "overlap");
}
END_TEST

START_TEST(test_reject_hole)
{
    EXPECT_BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
               "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
               12, "hole in the data buffer: bytes [4, 8) before tensor \"b\"");
    EXPECT_BAD("{\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8,
               "bytes [0, 4) before tensor \"b\"");
}
END_TEST

START_TEST(test_reject_trailing_bytes)
{
    EXPECT_BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 5,
               "1 trailing bytes after the last tensor");
    EXPECT_BAD("{}", 8, "8 trailing bytes");
}
END_TEST

START_TEST(test_reject_duplicate_name)
{
    EXPECT_BAD("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
               "\"b\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]},"
               "\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[2,3]}}",
               3, "the key \"a\" is given twice");
    EXPECT_BAD("{\"__metadata__\":{},\"__metadata__\":{}}", 0,
               "the key \"__metadata__\" is given twice");
    EXPECT_BAD("{\"__metadata__\":{\"k\":\"1\",\"j\":\"2\",\"k\":\"3\"}}", 0,
               "the key \"k\" is given twice");
}
END_TEST

START_TEST(test_reject_bad_metadata)
{
    EXPECT_BAD("{\"__metadata__\":{\"heads\":2}}", 0,
               "__metadata__ value of \"heads\" is a number, not a string");
    EXPECT_BAD("{\"__metadata__\":{\"a\":\"x\",\"b\":null}}", 0, "\"b\" is null");
    EXPECT_BAD("{\"__metadata__\":[\"x\"]}", 0, "__metadata__ is an array, not an object");
}
END_TEST

START_TEST(test_reject_missing_field)
{
    EXPECT_BAD("{\"w\":{\"dtype\":\"U8\",\"shape\":[1]}}", 1, "tensor \"w\"",
               "missing field \"data_offsets\"");
    EXPECT_BAD("{\"w\":{\"shape\":[1],\"data_offsets\":[0,1]}}", 1, "missing field \"dtype\"");
    EXPECT_BAD("{\"w\":{}}", 0, "missing field \"dtype\"");
}
END_TEST

START_TEST(test_reject_unknown_field)
{
    EXPECT_BAD("{\"w\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],\"strides\":[1]}}",
               1, "tensor \"w\"", "unknown field \"strides\"");
    /* Field names are case-sensitive (cJSON's lookups are not). */
    EXPECT_BAD("{\"w\":{\"DTYPE\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
               "unknown field \"DTYPE\"");
    EXPECT_BAD("{\"w\":{\"dtype\":\"U8\",\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}",
               1, "the key \"dtype\" is given twice");
}
END_TEST

// ----------------------------------------------------------------------------
// copy_to and load

START_TEST(test_copy_to_errors)
{
    hl_safetensors *f = parse_ok(
        "{\"m\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
        "\"r5\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,2],\"data_offsets\":[24,26]}}",
        26);
    hl_tensor *dst = hl_tensor_new("dst", 2, (int[]){3, 2}, false);
    hl_error err = {0};
    ck_assert(hl_safetensors_copy_to(f, "m", dst, &err) == HL_ERR_SHAPE);
    ck_assert_msg(strstr(err.message, "good.safetensors") && strstr(err.message, "\"m\"") &&
                  strstr(err.message, "(2,3)") && strstr(err.message, "(3,2)"),
                  "%s", err.message);
    for (size_t i = 0; i < dst->numel; i++)
        ck_assert(dst->data[i] == 0);
    hl_error_clear(&err);
    ck_assert(hl_safetensors_copy_to(f, "nope", dst, &err) == HL_ERR_ARG);
    ck_assert_msg(strstr(err.message, "no tensor named \"nope\""), "%s", err.message);
    hl_error_clear(&err);
    ck_assert(hl_safetensors_copy_to(f, "r5", dst, &err) == HL_ERR_SHAPE);
    ck_assert_msg(strstr(err.message, "(1,1,1,1,2)"), "%s", err.message);
    hl_error_clear(&err);

    ck_assert_ptr_null(hl_safetensors_load(f, "nope", false, &err));
    ck_assert(err.status == HL_ERR_ARG && strstr(err.message, "\"nope\""));
    hl_error_clear(&err);
    ck_assert_ptr_null(hl_safetensors_load(f, "r5", false, &err));
    ck_assert(err.status == HL_ERR_SHAPE && strstr(err.message, "rank <= 4"));
    hl_tensor_free(dst);
    hl_safetensors_free(f);
}
END_TEST

/* A file written by PyTorch's side (tests/make_mha_fixtures.py): read it,
 * write it again and compare the data buffers byte for byte. */
START_TEST(test_pytorch_file)
{
    const char *src = "tests/fixtures/mha/self_key_padding/inputs.safetensors";
    hl_safetensors *f = read_ok(src);
    ck_assert(hl_safetensors_count(f) >= 2);
    ck_assert(hl_safetensors_metadata(f, "heads") != NULL);
    const hl_safetensors_entry_info *mask = hl_safetensors_find(f, "key_padding_mask");
    ck_assert(mask && mask->dtype == HL_DTYPE_U8 && mask->rank == 2);

    make_tmpdir();
    char path[128];
    tmp_path("again.safetensors", path, sizeof path);
    hl_safetensors_writer *w = hl_safetensors_writer_new();
    hl_error err = {0};
    for (size_t i = 0; i < hl_safetensors_count(f); i++) {
        const hl_safetensors_entry_info *e = hl_safetensors_entry(f, i);
        if (e->dtype == HL_DTYPE_F32) {
            hl_tensor *t = hl_safetensors_load(f, e->name, false, &err);
            ck_assert_msg(t != NULL, "%s", err.message);
            hl_safetensors_writer_add(w, e->name, t, HL_DTYPE_F32, &err);
            hl_tensor_free(t);
        } else {
            hl_safetensors_writer_add_raw(w, e->name, e->dtype, e->rank, e->shape, e->data, &err);
        }
    }
    ck_assert_msg(!hl_error_failed(&err), "%s", err.message);
    save_ok(w, path);
    hl_safetensors_writer_free(w);

    size_t len_a, len_b;
    unsigned char *a = slurp(src, &len_a), *b = slurp(path, &len_b);
    size_t data_a = len_a - 8 - get_le64(a), data_b = len_b - 8 - get_le64(b);
    ck_assert_uint_eq(data_a, data_b);
    ck_assert(memcmp(a + len_a - data_a, b + len_b - data_b, data_a) == 0);
    free(a);
    free(b);
    hl_safetensors_free(f);
    remove_tmpdir();
}
END_TEST

Suite *safetensors_suite(void)
{
    Suite *s = suite_create("safetensors");
    TCase *tc = tcase_create("io");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_dtype_helpers);
    tcase_add_test(tc, test_roundtrip_real);
    tcase_add_test(tc, test_golden_bytes);
    tcase_add_test(tc, test_roundtrip_raw);
    tcase_add_test(tc, test_writer_errors);
    tcase_add_test(tc, test_save_atomic);
    tcase_add_test(tc, test_read_file_errors);
    tcase_add_test(tc, test_read_header);
    tcase_add_test(tc, test_pytorch_file);
    tcase_add_test(tc, test_first_refused);
    suite_add_tcase(s, tc);

    TCase *rules = tcase_create("reader_rules");
    tcase_set_timeout(rules, 120);
    tcase_add_test(rules, test_reader_accepts);
    tcase_add_test(rules, test_reject_short_file);
    tcase_add_test(rules, test_reject_header_too_large);
    tcase_add_test(rules, test_reject_header_past_file);
    tcase_add_test(rules, test_reject_invalid_json);
    tcase_add_test(rules, test_reject_not_object);
    tcase_add_test(rules, test_reject_nul_in_strings);
    tcase_add_test(rules, test_reject_unknown_dtype);
    tcase_add_test(rules, test_half_precision_values);
    tcase_add_test(rules, test_reject_bad_shape);
    tcase_add_test(rules, test_reject_size_mismatch);
    tcase_add_test(rules, test_reject_bad_offsets);
    tcase_add_test(rules, test_reject_out_of_bounds);
    tcase_add_test(rules, test_reject_claims_beyond_the_file);
    tcase_add_test(rules, test_reject_overlap);
    tcase_add_test(rules, test_reject_hole);
    tcase_add_test(rules, test_reject_trailing_bytes);
    tcase_add_test(rules, test_reject_duplicate_name);
    tcase_add_test(rules, test_reject_bad_metadata);
    tcase_add_test(rules, test_reject_missing_field);
    tcase_add_test(rules, test_reject_unknown_field);
    tcase_add_test(rules, test_copy_to_errors);
    suite_add_tcase(s, rules);
    return s;
}
