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
        HL_OPTION_INT("steps", &p->steps, 0, 100),
        {.name = "lr", .kind = HL_OPT_REAL, .value = &p->lr, .min = 0, .max = 10,
         .given = &p->lr_given},
        {.name = "eps", .kind = HL_OPT_REAL, .value = &p->eps, .min = 0, .max = 1,
         .min_open = true},
        HL_OPTION_TEXT("out", &p->out),
        HL_OPTION_FLAG("quiet", &p->quiet),
        HL_OPTION_LIST("op", &p->ops),
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
    expect_bad("--steps 3 stray", "unexpected argument 'stray'");
    char many[512] = "";
    for (int i = 0; i <= HL_OPT_LIST_MAX; i++)
        strcat(many, "--op x ");
    expect_bad(many, "--op given more than");
}
END_TEST

Suite *cli_suite(void)
{
    Suite *s = suite_create("cli");
    TCase *tc = tcase_create("cli");
    tcase_add_test(tc, test_cli_values);
    tcase_add_test(tc, test_cli_bad_input);
    suite_add_tcase(s, tc);
    return s;
}
