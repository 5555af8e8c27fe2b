/* Tests for cli/cli.c: the programs' option parser. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "tests/testutil.h"

typedef struct {
    int steps;
    double lr, eps;
    const char *out;
    bool quiet, lr_given;
    hl_opt_list ops;
} parsed;

/* Parses the words of `line` (at most 79); messages land in errors. */
static hl_cli_status parse(const char *line, parsed *p, char *errors, size_t size)
{
    *p = (parsed){.steps = 7, .lr = 0.5, .eps = 0.1, .out = "default"};
    const hl_opt opts[] = {
        HL_OPTION_INT("steps", &p->steps, 0, 100, "N", "steps"),
        HL_OPTION_REAL("lr", &p->lr, 0, 10, "X", "rate", .given = &p->lr_given),
        HL_OPTION_REAL("eps", &p->eps, 0, 1, "E", "step", .min_open = true),
        HL_OPTION_TEXT("out", &p->out, "DIR", "where"),
        HL_OPTION_FLAG("quiet", &p->quiet, "print nothing"),
        HL_OPTION_LIST("op", &p->ops, "NAME", "ops"),
        {0},
    };
    static char words[1024];
    char *argv[80] = {"prog"};
    int argc = 1;
    snprintf(words, sizeof words, "%s", line);
    for (char *w = strtok(words, " "); w && argc < 80; w = strtok(NULL, " "))
        argv[argc++] = w;
    FILE *f = fmemopen(errors, size, "w");
    ck_assert_ptr_nonnull(f);
    hl_cli_status s = hl_cli_parse("prog", opts, 1, argc, argv, f);
    fclose(f);
    return s;
}

START_TEST(test_cli_values)
{
    parsed p;
    char errors[256] = "";
    ck_assert_int_eq(parse("--steps 100 --lr 2.5e-1 --out dir --quiet --op a --op b", &p,
                           errors, sizeof errors),
                     HL_CLI_OK);
    ck_assert_int_eq(p.steps, 100);
    ck_assert(p.lr == 0.25 && p.lr_given && p.quiet);
    ck_assert_str_eq(p.out, "dir");
    ck_assert_int_eq(p.ops.n, 2);
    ck_assert_str_eq(p.ops.item[1], "b");
    ck_assert_int_eq(parse("--steps=0", &p, errors, sizeof errors), HL_CLI_OK);
    ck_assert_int_eq(p.steps, 0);
    /* Nothing given: the defaults stay. */
    ck_assert_int_eq(parse("", &p, errors, sizeof errors), HL_CLI_OK);
    ck_assert(p.steps == 7 && p.lr == 0.5 && !p.lr_given && !p.quiet);
    ck_assert_int_eq(parse("--help", &p, errors, sizeof errors), HL_CLI_HELP);
    ck_assert_int_eq(parse("-h", &p, errors, sizeof errors), HL_CLI_HELP);
}
END_TEST

/* Fails unless `line` is refused with a message holding `fragment`. */
static void expect_bad(const char *line, const char *fragment)
{
    parsed p;
    char errors[256] = "";
    ck_assert_msg(parse(line, &p, errors, sizeof errors) == HL_CLI_BAD, "%s was accepted", line);
    ck_assert_msg(strstr(errors, fragment), "%s: \"%s\" lacks \"%s\"", line, errors, fragment);
    ck_assert_msg(!strncmp(errors, "prog: ", 6), "%s: \"%s\"", line, errors);
}

START_TEST(test_cli_bad_input)
{
    expect_bad("--steps 101", "--steps needs an integer in 0..100, got '101'");
    expect_bad("--steps -1", "0..100");
    expect_bad("--steps 3x", "got '3x'");
    expect_bad("--steps 99999999999999999999", "--steps");
    expect_bad("--steps", "--steps needs a value");
    expect_bad("--lr nan", "--lr needs a number in 0..10, got 'nan'");
    expect_bad("--lr inf", "--lr");
    expect_bad("--lr 11", "0..10");
    expect_bad("--eps 0", "--eps needs a number above 0 and at most 1");
    expect_bad("--bogus", "unknown option --bogus");
    /* A prefix of one flag is that flag; of several, refused naming them
     * (it was "unknown option"). */
    parsed p;
    char errors[256] = "";
    ck_assert_int_eq(parse("--qu --ste 5", &p, errors, sizeof errors), HL_CLI_OK);
    ck_assert(p.quiet && p.steps == 5);
    expect_bad("--o x", "prog: --o is the start of several flags: --out --op\n");
    expect_bad("--o=x", "prog: --o is the start of several flags: --out --op\n");
    expect_bad("--steps 3 stray", "unexpected argument 'stray'");
    char many[512] = "";
    for (int i = 0; i <= HL_OPT_LIST_MAX; i++)
        strcat(many, "--op x ");
    expect_bad(many, "--op given more than");
}
END_TEST

/* The usage as hl_cli_usage prints it, into buf. */
static void usage_of(const hl_opt *opts, char *buf, size_t size)
{
    FILE *f = fmemopen(buf, size, "w");
    ck_assert_ptr_nonnull(f);
    hl_cli_usage(f, &(hl_usage){"usage: prog\n", "bye\n"}, opts);
    fclose(f);
}

START_TEST(test_cli_usage)
{
    int steps = 300, width = 0;
    double lr = 2.5e-4;
    const char *out = "out/x", *name = NULL;
    bool quiet = false;
    const hl_opt opts[] = {
        HL_OPTION_INT("steps", &steps, 0, 1e8, "N", "training steps"),
        HL_OPTION_REAL("lr", &lr, 0, 1, "X", "the learning rate"),
        HL_OPTION_TEXT("out", &out, "DIR", "where the files go"),
        HL_OPTION_TEXT("name", &name, "NAME", "a name"),
        HL_OPTION_INT("width", &width, 0, 9, "N", "the width", .dflt = "ctx/4"),
        HL_OPTION_FLAG("quiet", &quiet, "print nothing", .group = "Output:"),
        HL_OPTION_TEXT("a-very-long-flag-name", &name, "VALUE",
                       "words that go on and on past the seventy-ninth column of the terminal "
                       "so that they wrap onto the next line under the help column", .dflt = ""),
        {0},
    };
    char buf[2048] = "";
    usage_of(opts, buf, sizeof buf);
    /* Defaults from the variables, in their own format; none for a NULL text,
     * a flag or an empty .dflt. */
    ck_assert_str_eq(buf, "usage: prog\n"
                          "  --steps N             training steps (default: 300)\n"
                          "  --lr X                the learning rate (default: 0.00025)\n"
                          "  --out DIR             where the files go (default: out/x)\n"
                          "  --name NAME           a name\n"
                          "  --width N             the width (default: ctx/4)\n"
                          "Output:\n"
                          "  --quiet               print nothing\n"
                          "  --a-very-long-flag-name VALUE\n"
                          "                        words that go on and on past the seventy-ninth column\n"
                          "                        of the terminal so that they wrap onto the next line\n"
                          "                        under the help column\n"
                          "bye\n");
    /* A changed variable changes the usage: the default has one source. */
    steps = 7;
    usage_of(opts, buf, sizeof buf);
    ck_assert_ptr_nonnull(strstr(buf, "training steps (default: 7)\n"));
    for (const char *line = buf; *line; line = strchr(line, '\n') + 1)
        ck_assert_int_le((int)(strchr(line, '\n') - line), 79);
}
END_TEST

Suite *cli_suite(void)
{
    Suite *s = suite_create("cli");
    TCase *tc = tcase_create("cli");
    tcase_add_test(tc, test_cli_values);
    tcase_add_test(tc, test_cli_bad_input);
    tcase_add_test(tc, test_cli_usage);
    suite_add_tcase(s, tc);
    return s;
}
