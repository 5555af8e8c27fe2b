/*
 * tokenize: text files into the token files charlm --tokens trains from
 * (data/token_file.h, docs/token-files.md).
 *
 *     build/tokenize TEXT... [--vocab-from MODEL | --pretrained DIR |
 *                    --learn N --tokenizer words|bpe] [--val-fraction F] --out DIR
 *     build/tokenize --pretrained DIR --print FILE
 *
 * The files are read as one text, in order. Its last F of the bytes
 * (charlm's split: the last size/10 bytes for 0.1) go to DIR/val.tok, the
 * rest to DIR/train.tok. The files keep the documents of the text
 * (hl_token_file_docs): each input file ends one, and so does each line
 * holding only a form feed ("\f\n" or "\f\r\n"), which stays the last line
 * of the document it ends (data/documents.h). Each document is encoded on its own
 * (no token spans two). The text is streamed in blocks of BLOCK bytes, each
 * encoded in parallel chunks (data/tokenize.h), so memory does not grow with
 * the corpus and the files are the same for any thread count. A learnt
 * vocabulary comes from the first LEARN_SAMPLE bytes of the training part
 * (all of it when shorter, which is what charlm --data learns from). A
 * pretrained vocabulary is a released model's tokenizer, imported from its
 * folder (hl_vocab_load_pretrained, docs/tokenizers.md); --print writes the
 * ids of one file's text to stdout instead of token files.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "headlab.h"

#define BLOCK ((size_t)16 << 20)        /* bytes read and encoded at a time */
#define BLOCK_MAX ((size_t)1 << 30)     /* a block grows to this when it has no place to cut */
#define LEARN_SAMPLE ((size_t)64 << 20) /* a learnt vocabulary's sample: the first 64 MiB */

static const char *program = "tokenize";

typedef struct {
    const char *vocab_from, *pretrained, *print, *tokenizer, *out;
    int learn, threads;
    double val_fraction;
} options;

static const hl_usage usage = {
    "usage: tokenize TEXT... [options] --out DIR\n"
    "       tokenize --pretrained DIR --print FILE\n"
    "Encodes text files (read as one text, in order) into DIR/train.tok and\n"
    "DIR/val.tok, the token files charlm --tokens DIR trains from.\n",
    "Exit status: 0 done, 1 out of memory, 2 bad input or a file that cannot be read\n"
    "or written (nothing is left half-written).\n",
};
/* ---- the files as one text ---- */

typedef struct {
    char **paths;
    int n, at;          /* files, the one being read */
    FILE *f;
    uint64_t size;      /* bytes in all of them */
} stream;

/* Up to n bytes of the current file into buf, fewer at its end, where
 * *file_end is set (and the next read starts the next file). */
static size_t stream_read_file(stream *s, unsigned char *buf, size_t n, bool *file_end)
{
    *file_end = false;
    if (s->at >= s->n)
        return 0;
    if (!s->f && !(s->f = fopen(s->paths[s->at], "rb")))
        hl_cli_bad_input(program, "cannot read %s: %s", s->paths[s->at], strerror(errno));
    const size_t got = fread(buf, 1, n, s->f);
    if (got < n) {
        if (ferror(s->f))
            hl_cli_bad_input(program, "cannot read %s", s->paths[s->at]);
        fclose(s->f);
        s->f = NULL;
        s->at++;
        *file_end = true;
    }
    return got;
}

/* Whether the file at path starts as a token file does (data/token_file.h):
 * its header and ids must not be read as text, nor as a model. */
static bool is_token_file(const char *path)
{
    unsigned char head[8];
    FILE *f = fopen(path, "rb");
    const bool magic = f && fread(head, 1, sizeof head, f) == sizeof head &&
                       hl_token_magic(head, sizeof head);
    if (f)
        fclose(f);
    return magic;
}

static void stream_open(stream *s, char **paths, int n)
{
    *s = (stream){.paths = paths, .n = n};
    for (int i = 0; i < n; i++) {
        struct stat st;
        if (stat(paths[i], &st) != 0)
            hl_cli_bad_input(program, "cannot read %s: %s", paths[i], strerror(errno));
        if (!S_ISREG(st.st_mode))
            hl_cli_bad_input(program, "%s is not a regular file", paths[i]);
        if (is_token_file(paths[i]))
            hl_cli_bad_input(program, "%s is a token file of tokenize, not text", paths[i]);
        s->size += (uint64_t)st.st_size;
    }
}

/* Up to n bytes of the text into buf; fewer only at its end. */
static size_t stream_read(stream *s, unsigned char *buf, size_t n)
{
    size_t got = 0;
    bool file_end;
    while (got < n && s->at < s->n)
        got += stream_read_file(s, buf + got, n - got, &file_end);
    return got;
}

static void stream_rewind(stream *s)
{
    if (s->f)
        fclose(s->f);
    s->f = NULL;
    s->at = 0;
}

/* ---- progress on a terminal ---- */

typedef struct {
    bool tty;
    uint64_t total;
    double start, last;
} progress;

static void progress_show(progress *p, uint64_t done, bool final)
{
    const double now = hl_seconds();
    if (!p->tty || (!final && now - p->last < 0.2))
        return;
    p->last = now;
    const double mb_s = (double)done / 1e6 / (now - p->start + 1e-9);
    const double eta = mb_s > 0 ? (double)(p->total - done) / 1e6 / mb_s : 0;
    const int width = 30, filled = p->total ? (int)(width * (double)done / (double)p->total) : 0;
    char bar[32];
    for (int i = 0; i < width; i++)
        bar[i] = i < filled ? '#' : '.';
    bar[width] = 0;
    fprintf(stderr, "\r[%s] %.0f/%.0f MB  %.1f MB/s  ETA %.0f s ", bar, (double)done / 1e6,
            (double)p->total / 1e6, mb_s, eta);
    if (final)
        fputc('\n', stderr);
}

/* ---- encoding ---- */

/* A failed part: the reason printed, its writer gone; the exit status. */
static int part_failed(hl_token_writer *w, const char *message, int status)
{
    hl_token_writer_abort(w);
    fprintf(stderr, "%s: %s\n", program, message);
    return status;
}

/* The next bytes of the text, a part of `bytes` bytes, into DIR/name,
 * finished but not yet in place (*out); else the exit status, with nothing
 * left of the part. */
static int write_part(stream *s, uint64_t bytes, const hl_vocab *v, const char *dir,
                      const char *name, progress *p, uint64_t *done, hl_token_writer **out)
{
    char path[4200], message[4400];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    hl_error err = {0};
    hl_token_writer *w = hl_token_writer_begin(path, v, &err);
    size_t cap = BLOCK, have = 0;
    unsigned char *buf = malloc(cap);
    if (!w || !buf) {
        free(buf);
        return part_failed(w, err.message[0] ? err.message : "out of memory",
                           err.status == HL_ERR_IO ? 2 : 1);
    }
    uint64_t left = bytes;
    /* buf[start..have) is read and not yet encoded. file_end: it ends where a
     * file does; line_start: buf[start] starts a line; more: it holds no
     * whole document, so read on. The documents a read brings are encoded
     * one after another where they lie, and what is left of the last moved
     * to the front once, before the next read. */
    size_t start = 0;
    bool file_end = false, line_start = true, more = true;
    int status = 0;
    while (!status && (left > 0 || have > start)) {
        if (more && !file_end && left > 0) {
            memmove(buf, buf + start, have - start);
            have -= start;
            start = 0;
            const size_t want = cap - have < left ? cap - have : (size_t)left;
            const size_t got = stream_read_file(s, buf + have, want, &file_end);
            if (got < want && !file_end) {
                status = part_failed(w, "the input files shrank while being read", 2);
                break;
            }
            have += got;
            left -= got;
            more = false;
        }
        const size_t avail = have - start;
        if (file_end && avail == 0) { /* an empty file, or one whose text is all written */
            file_end = false;
            more = true;
            continue;
        }
        /* A document ends at a form-feed line, at a file's end and at the
         * part's: it is encoded to its end, alone. */
        const unsigned char *text = buf + start;
        size_t safe;
        size_t doc = hl_docs_form_feed_end(text, avail, line_start, &safe);
        if (!doc && (file_end || left == 0))
            doc = avail, safe = avail;
        const size_t n = doc ? doc : safe;
        size_t used = 0;
        if ((n && hl_tokenize_block(v, text, n, HL_TOKENIZE_CHUNK, doc != 0, w, &used, &err) !=
                      HL_OK) ||
            (doc && hl_token_writer_end_document(w, &err) != HL_OK)) {
            status = part_failed(w, err.message, err.status == HL_ERR_NOMEM ? 1 : 2);
            break;
        }
        *done += used;
        progress_show(p, *done, false);
        line_start = doc ? true : used ? text[used - 1] == '\n' : line_start;
        start += used;
        more = !doc;
        if (used == 0 && !doc && avail == cap) {
            /* No place to cut in a whole block (hl_vocab_cut: no whitespace
             * after a non-space, or a pretrained regex's narrower places):
             * a longer block. */
            unsigned char *grown = cap < BLOCK_MAX ? realloc(buf, cap * 2) : NULL;
            if (!grown) {
                snprintf(message, sizeof message, "%s: no place to cut the text in %zu MiB (no "
                         "whitespace after a non-space; with a pretrained tokenizer, no line "
                         "break between two non-spaces, no space before a word)", path,
                         cap >> 20);
                status = part_failed(w, message, 2);
                break;
            }
            buf = grown;
            cap *= 2;
        }
    }
    free(buf);
    if (status)
        return status;
    if (hl_token_writer_finish(w, &err) != HL_OK)
        return part_failed(w, err.message, 2);
    *out = w;
    return 0;
}

/* The vocabulary: a model's, learnt from the start of the training part, or
 * the bytes. */
static hl_vocab *make_vocab(const options *o, stream *s, uint64_t n_train)
{
    hl_error err = {0};
    if (o->pretrained) {
        hl_vocab *v = hl_vocab_load_pretrained(o->pretrained, &err);
        if (!v && err.status != HL_ERR_NOMEM)
            hl_cli_bad_input(program, "%s", err.message);
        return v;
    }
    if (o->vocab_from) {
        hl_vocab *v;
        if (is_token_file(o->vocab_from))
            hl_cli_bad_input(program, "--vocab-from %s is a token file; it takes a model (a "
                             "charlm model or checkpoint, or a Hugging Face folder)",
                             o->vocab_from);
        if (hl_gpt_load_vocab(o->vocab_from, &v, &err) != HL_OK)
            hl_cli_bad_input(program, "%s", err.message);
        if (!v)
            hl_cli_bad_input(program, "%s is not a text model (no vocabulary)", o->vocab_from);
        return v;
    }
    if (!o->learn)
        return hl_vocab_bytes();
    const size_t n = n_train < LEARN_SAMPLE ? (size_t)n_train : LEARN_SAMPLE;
    unsigned char *sample = malloc(n ? n : 1);
    if (!sample)
        return NULL;
    if (stream_read(s, sample, n) < n)
        hl_cli_bad_input(program, "the input files shrank while being read");
    stream_rewind(s);
    hl_vocab *v = !strcmp(o->tokenizer, "bpe") ? hl_vocab_learn_bpe(sample, n, o->learn, &err)
                                               : hl_vocab_learn(sample, n, o->learn, &err);
    free(sample);
    if (!v && err.status != HL_ERR_NOMEM)
        hl_cli_bad_input(program, "%s", err.message);
    return v;
}

static options parse_options(int argc, char **argv, int first)
{
    options o = {.val_fraction = 0.1};
    const hl_opt opts[] = {
        HL_OPTION_TEXT("out", &o.out, "DIR", "where train.tok and val.tok go",
                       .dflt = "required"),
        HL_OPTION_TEXT("vocab-from", &o.vocab_from, "MODEL",
                       "the vocabulary of a charlm model or checkpoint, or of a Hugging Face "
                       "model folder (its header or config.json and tokenizer only)"),
        HL_OPTION_TEXT("pretrained", &o.pretrained, "DIR",
                       "a released model's tokenizer: DIR/tokenizer.json, or vocab.json + "
                       "merges.txt, or encoder.json + vocab.bpe (GPT-2, Pythia, Llama 3, Qwen2; "
                       "docs/tokenizers.md)"),
        HL_OPTION_TEXT("print", &o.print, "FILE",
                       "print the token ids of FILE's text on one line instead of writing token "
                       "files"),
        HL_OPTION_INT("learn", &o.learn, HL_VOCAB_BYTES + 1, HL_VOCAB_MAX, "N",
                      "learn a vocabulary of N tokens (N > 256) from the first 64 MiB of the "
                      "training part (all of it when shorter)", .dflt = ""),
        HL_OPTION_TEXT("tokenizer", &o.tokenizer, "NAME",
                       "bytes, words or bpe, as charlm's --tokenizer",
                       .dflt = "bytes, or words with --learn"),
        HL_OPTION_REAL("val-fraction", &o.val_fraction, 0, 0.99, "F",
                       "the last F of the bytes are the validation text (as charlm --data: the "
                       "last size/10 bytes)"),
        HL_OPTION_INT("threads", &o.threads, 1, HL_CLI_MAX_THREADS, "N",
                      "OpenMP threads; the files do not depend on it", .dflt = "OMP_NUM_THREADS"),
        {0},
    };
    /* The text files come before the flags, so --help is looked for anywhere. */
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            hl_cli_usage(stdout, &usage, opts);
            exit(0);
        }
    /* Never HL_CLI_HELP: --help was found above. A word after the flags is
     * most likely a text file put after them: say where the files go. */
    char *said = NULL;
    size_t said_len = 0;
    FILE *errors = open_memstream(&said, &said_len);
    const bool parsed = hl_cli_parse(program, opts, first, argc, argv, errors ? errors : stderr) ==
                        HL_CLI_OK;
    if (errors && fclose(errors) == 0 && said_len)
        fputs(said, stderr);
    if (!parsed && said && strstr(said, "unexpected argument"))
        fprintf(stderr, "%s: the text files come first, before every flag (tokenize TEXT... "
                "[options] --out DIR)\n", program);
    free(said);
    if (!parsed)
        exit(2);
    if (o.print && (first > 1 || o.out || o.learn))
        hl_cli_bad_input(program, "--print FILE encodes that one file: no TEXT files, --out or "
                         "--learn");
    if (!o.print && first == 1)
        hl_cli_bad_input(program, "no text files (usage: tokenize TEXT... --out DIR)");
    if (!o.print && !o.out)
        hl_cli_bad_input(program, "--out DIR is required (see --help)");
    if (o.vocab_from && o.pretrained)
        hl_cli_bad_input(program, "--vocab-from and --pretrained: one vocabulary, not two");
    if ((o.vocab_from || o.pretrained) && (o.learn || o.tokenizer))
        hl_cli_bad_input(program, "--%s takes that vocabulary as it is: no --learn or "
                         "--tokenizer", o.vocab_from ? "vocab-from" : "pretrained");
    if (!o.tokenizer)
        o.tokenizer = o.learn ? "words" : "bytes";
    if (strcmp(o.tokenizer, "bytes") && strcmp(o.tokenizer, "words") && strcmp(o.tokenizer, "bpe"))
        hl_cli_bad_input(program, "unknown --tokenizer %s (bytes, words or bpe)", o.tokenizer);
    if (!strcmp(o.tokenizer, "bytes") && o.learn)
        hl_cli_bad_input(program, "--tokenizer bytes with --learn %d: the bytes are 256 tokens",
                         o.learn);
    if (strcmp(o.tokenizer, "bytes") && !o.learn)
        hl_cli_bad_input(program, "--tokenizer %s needs --learn N, N > %d", o.tokenizer,
                         HL_VOCAB_BYTES);
    return o;
}

/* --print: the ids of one file's text on one line, separated by spaces. */
static int print_ids(const options *o)
{
    size_t n;
    unsigned char *text = hl_fs_read_file(o->print, &n);
    if (!text)
        hl_cli_bad_input(program, "cannot read %s: %s", o->print, strerror(errno));
    if (hl_token_magic(text, n))
        hl_cli_bad_input(program, "%s is a token file of tokenize, not text", o->print);
    hl_vocab *v = make_vocab(o, NULL, 0);
    int32_t *tokens = NULL;
    size_t n_tokens = 0;
    hl_error err = {0};
    if (!v || hl_vocab_encode(v, text, n, &tokens, &n_tokens, &err) != HL_OK) {
        fprintf(stderr, "%s: %s\n", program, err.message[0] ? err.message : "out of memory");
        return err.status == HL_ERR_ARG ? 2 : 1;
    }
    for (size_t i = 0; i < n_tokens; i++)
        printf(i ? " %ld" : "%ld", (long)tokens[i]);
    putchar('\n');
    free(tokens);
    free(text);
    hl_vocab_free(v);
    return fflush(stdout) == 0 ? 0 : 2;
}

int main(int argc, char **argv)
{
    hl_cli_init();
    int first = 1; /* the text files come first */
    while (first < argc && argv[first][0] != '-')
        first++;
    options o = parse_options(argc, argv, first);
    hl_cli_set_threads(o.threads);
    if (o.print)
        return print_ids(&o);
    stream s;
    stream_open(&s, argv + 1, first - 1);
    /* As charlm: the validation text is the last size·F bytes, rounded down. */
    const uint64_t n_val = hl_tokenize_val_bytes(s.size, o.val_fraction);
    const uint64_t n_train = s.size - n_val;
    if (n_train == 0)
        hl_cli_bad_input(program, "the text is empty");
    if (hl_fs_make_dirs(o.out))
        hl_cli_bad_input(program, "cannot create %s: %s", o.out, strerror(errno));
    const double t0 = hl_seconds();
    hl_vocab *v = make_vocab(&o, &s, n_train);
    if (!v) {
        fprintf(stderr, "%s: out of memory\n", program);
        return 1;
    }
    const double learnt = hl_seconds();
    progress p = {.tty = isatty(STDERR_FILENO), .total = s.size, .start = learnt,
                  .last = learnt};
    uint64_t done = 0;
    /* Both files complete on disk before either replaces an older one: a
     * failure leaves the old pair as it was, but for a failed rename of
     * val.tok after train.tok's, which is said. */
    hl_token_writer *train_w = NULL, *val_w = NULL;
    int status = write_part(&s, n_train, v, o.out, "train.tok", &p, &done, &train_w);
    if (!status && (status = write_part(&s, n_val, v, o.out, "val.tok", &p, &done, &val_w)))
        hl_token_writer_abort(train_w);
    if (status) {
        hl_vocab_free(v);
        return status;
    }
    const uint64_t train = hl_token_writer_count(train_w), val = hl_token_writer_count(val_w);
    hl_error err = {0};
    const int vocab_size = hl_vocab_size(v);
    const char *vocab_kind = hl_vocab_kind(v); /* a string literal */
    hl_vocab_free(v);
    if (hl_token_writer_commit(train_w, &err) != HL_OK) {
        hl_token_writer_abort(val_w);
        fprintf(stderr, "%s: %s\n", program, err.message);
        return 2;
    }
    if (hl_token_writer_commit(val_w, &err) != HL_OK) {
        fprintf(stderr, "%s: %s; %s/train.tok is already the new text's, so the two files no "
                "longer match: run tokenize again\n", program, err.message, o.out);
        return 2;
    }
    progress_show(&p, done, true);
    const double seconds = hl_seconds() - learnt;
    printf("tokenize: %llu bytes in %d file(s) -> %s/train.tok (%llu tokens) and %s/val.tok "
           "(%llu tokens); %d tokens (%s); %.1f s to learn, %.1f s to encode (%.1f MB/s)\n",
           (unsigned long long)s.size, s.n, o.out, (unsigned long long)train, o.out,
           (unsigned long long)val, vocab_size, vocab_kind, learnt - t0, seconds,
           (double)s.size / 1e6 / (seconds > 0 ? seconds : 1e-9));
    stream_rewind(&s);
    return 0;
}
