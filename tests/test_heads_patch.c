/* Tests for examples/heads/patch.c: `heads patch`, `paths` and `attrib` find
 * the induction circuit of a trained toy model, and bad input exits 2 with a
 * message and nothing written. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/testutil.h"

static char work[64];

#ifndef HL_REAL_DOUBLE
/* The value in column `col` (0-based) of the CSV row that starts with
 * `prefix`; NaN when there is none. */
static double csv_value(const char *path, const char *prefix, int col)
{
    FILE *f = fopen(path, "r");
    ck_assert_msg(f, "cannot open %s", path);
    char line[512];
    double v = NAN;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, prefix, strlen(prefix))) {
            char *p = line;
            for (int c = 0; c < col && p; c++)
                p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL;
            if (p)
                v = strtod(p, NULL);
            break;
        }
    fclose(f);
    return v;
}

/* The toy model of TOYTASK.md after 1,500 steps (seed 0) has a previous-token
 * head P in layer 0 (the best previous_token score of its scores.csv) and
 * induction heads in layer 1. On the built-in induction task (see
 * examples/heads/patch.c: only the previous-token labels of the answers are
 * corrupted), activation patching of z picks out P and the layer-1 heads,
 * patching the layer-1 keys alone restores as much as their outputs, path
 * patching finds the route P -> layer 1 through K and nothing through Q or
 * V, and attribution patching puts P on top as activation patching does. */
START_TEST(test_heads_patch_finds_the_induction_circuit)
{
    snprintf(work, sizeof work, "/tmp/hl_patch_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(work));
    char command[1024], path[256];
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/toy_heads --seed 0 --steps 1500 --eval-every 1500 --no-report "
             "--out %s/toy > /dev/null", work);
    tu_run_ok(command);
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/heads patch --model %s/toy/model.safetensors --act z,k --out %s/p "
             "> /dev/null && " HL_BUILD_DIR "/heads paths --model %s/toy/model.safetensors "
             "--out %s/p > /dev/null && " HL_BUILD_DIR "/heads attrib --model "
             "%s/toy/model.safetensors --out %s/p > /dev/null",
             work, work, work, work, work, work);
    tu_run_ok(command);
    int prev = 0;
    double best_prev = -1;
    snprintf(path, sizeof path, "%s/toy/scores.csv", work);
    for (int h = 0; h < 4; h++) {
        char row[16];
        snprintf(row, sizeof row, "0,%d,", h);
        const double v = csv_value(path, row, 2);
        prev = v > best_prev ? h : prev;
        best_prev = fmax(best_prev, v);
    }
    ck_assert_double_gt(best_prev, 0.9);
    snprintf(path, sizeof path, "%s/p/patch_z.csv", work);
    char prev_row[16];
    snprintf(prev_row, sizeof prev_row, "0,%d,", prev);
    ck_assert_double_gt(csv_value(path, prev_row, 2), 0.9);
    double layer1 = 0, z[4], k[4];
    for (int h = 0; h < 4; h++) {
        char row[16];
        snprintf(row, sizeof row, "1,%d,", h);
        z[h] = csv_value(path, row, 2);
        layer1 = fmax(layer1, z[h]);
        snprintf(row, sizeof row, "0,%d,", h);
        if (h != prev)
            ck_assert_double_lt(fabs(csv_value(path, row, 2)), 0.05);
    }
    ck_assert_double_gt(layer1, 0.4);
    snprintf(path, sizeof path, "%s/p/patch_k.csv", work);
    for (int h = 0; h < 4; h++) {
        char row[16];
        snprintf(row, sizeof row, "1,%d,", h);
        k[h] = csv_value(path, row, 2);
        ck_assert_msg(fabs(k[h] - z[h]) < 0.05, "L1H%d: k %.3f, z %.3f", h, k[h], z[h]);
    }
    double best_k = 0;
    for (int r = 0; r < 4; r++) {
        char row[32];
        snprintf(row, sizeof row, "L0H%d,L1H%d,", prev, r);
        snprintf(path, sizeof path, "%s/p/paths_k.csv", work);
        best_k = fmax(best_k, csv_value(path, row, 2));
        for (int kind = 0; kind < 2; kind++) {
            snprintf(path, sizeof path, "%s/p/paths_%s.csv", work, kind ? "v" : "q");
            ck_assert_double_lt(fabs(csv_value(path, row, 2)), 0.05);
        }
    }
    ck_assert_double_gt(best_k, 0.4);
    /* Attribution patching: the same head on top. */
    snprintf(path, sizeof path, "%s/p/attrib_z.csv", work);
    int top_act = 0, top_attr = 0;
    double va[8], vb[8];
    for (int i = 0; i < 8; i++) {
        char row[16];
        snprintf(row, sizeof row, "%d,%d,", i / 4, i % 4);
        va[i] = csv_value(path, row, 2);
        vb[i] = csv_value(path, row, 3);
        top_act = va[i] > va[top_act] ? i : top_act;
        top_attr = vb[i] > vb[top_attr] ? i : top_attr;
    }
    ck_assert_msg(top_act == prev && top_attr == prev, "the top head: activation L%dH%d, "
                  "attribution L%dH%d; the previous-token head is L0H%d", top_act / 4,
                  top_act % 4, top_attr / 4, top_attr % 4, prev);
    /* Two inputs as token numbers (a toy model), read at two positions. */
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/heads patch --model %s/toy/model.safetensors --clean \"16 3 7 1 3 7 "
             "1\" --corrupt \"16 5 7 1 3 7 1\" --positions 4,5 --out %s/two > /dev/null", work,
             work);
    tu_run_ok(command);
    snprintf(path, sizeof path, "%s/two/patch_z.csv", work);
    ck_assert(!isnan(csv_value(path, "1,0,", 2)));
    snprintf(command, sizeof command, "rm -rf %s", work);
    ck_assert_int_eq(system(command), 0);
}
END_TEST
#endif

/* Bad input exits 2 naming the problem and writes nothing. */
START_TEST(test_heads_patch_bad_input)
{
    snprintf(work, sizeof work, "/tmp/hl_patch_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(work));
    char command[1024], out[4096], model[128];
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/charlm --data README.md --steps 2 --ctx 16 --d-model 16 --heads 2 "
             "--layers 2 --batch 2 --eval-every 2 --sample 0 --no-report --out %s/char "
             "> /dev/null 2>&1", work);
    tu_run_ok(command);
    snprintf(model, sizeof model, "%s/char/model.safetensors", work);
    static const struct {
        const char *args, *message;
    } cases[] = {
        {"patch --clean abcd --corrupt abc", "--clean has 4 tokens and --corrupt 3"},
        {"patch --clean abcd --corrupt abce --positions 3", "position 3 is out of range"},
        {"patch --clean abcd --corrupt abce --positions x", "--positions wants numbers"},
        {"patch --metric accuracy", "unknown --metric accuracy"},
        {"patch --act w", "unknown activation \"w\""},
        {"paths --act z", "unknown activation \"z\""},
        {"patch --clean abcd", "--clean and --corrupt together"},
        {"logit-lens --act z", "drop --act"},
        {"ablate --act z", "--act belongs to patch"},
        {"patch --clean abcd --corrupt abcd", "score the same"},
        {"attrib --clean abca --corrupt abcb --metric logit-diff --positions 1",
         "both inputs continue with the same token"},
        {"patch --clean abcd --corrupt abc\xff\xfe", "--clean has 4 tokens and --corrupt 5"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(command, sizeof command, HL_BUILD_DIR "/heads %s --model %s --out %s/out 2>&1",
                 cases[i].args, model, work);
        ck_assert_msg(tu_run(command, out, sizeof out) == 2, "%s: %s", cases[i].args, out);
        ck_assert_msg(strstr(out, cases[i].message), "%s: %s", cases[i].args, out);
        snprintf(command, sizeof command, "%s/out", work);
        ck_assert_msg(access(command, F_OK) != 0, "%s wrote %s", cases[i].args, command);
    }
    snprintf(command, sizeof command, "rm -rf %s", work);
    ck_assert_int_eq(system(command), 0);
}
END_TEST

Suite *heads_patch_suite(void)
{
    Suite *s = suite_create("heads_patch");
    TCase *tc = tcase_create("heads_patch");
    tcase_set_timeout(tc, 0); /* a training run of fixed work: no time limit */
    tcase_add_test(tc, test_heads_patch_bad_input);
#ifndef HL_REAL_DOUBLE
    /* The float build's model; the double build's patching is tested on the
     * fixtures (test_patching.c). */
    tcase_add_test(tc, test_heads_patch_finds_the_induction_circuit);
#endif
    suite_add_tcase(s, tc);
    return s;
}
