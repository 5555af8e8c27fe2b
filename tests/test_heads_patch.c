/* Tests for examples/heads/patch.c: `heads patch`, `paths` and `attrib` find
 * the induction circuit of a trained toy model, a --pairs file scores what
 * its pairs score alone, combined, `paths` runs on a grouped-query model, and
 * bad input (a bad pairs file too) exits 2 with a message and nothing written. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/testutil.h"

/* A text every Debian system has, for the small charlm models. */
#define GPL_TEXT "/usr/share/common-licenses/GPL-3"

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

/* --pairs FILE against each of its pairs run alone (--clean, --corrupt,
 * --positions) on the toy model in work/toy: each pair's own metrics in
 * pairs.csv are the same, and the file's scores are the pairs' combined as
 * the mean over every scored position: patch_z.csv's normalised score at
 * Σ n_i s_i g_i / Σ n_i g_i (n_i positions, s_i the score alone, g_i the
 * clean-minus-corrupted gap), dla.csv's plain mean at Σ n_i d_i / Σ n_i. The
 * pairs have 7, 6 and 4 tokens. */
static void check_pairs_file(const char *dir)
{
    static const char *const pairs[][3] = {{"16 3 7 1 3 7 1", "16 5 7 1 3 7 1", "4,5"},
                                           {"16 2 9 4 2 9", "16 2 11 4 2 9", "3,4"},
                                           {"16 4 13 4", "16 6 13 4", NULL}};
    enum { P = 3 };
    char command[4096], path[256], file[256];
    snprintf(file, sizeof file, "%s/pairs.tsv", dir);
    FILE *f = fopen(file, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "# clean\tcorrupted\tpositions\n");
    for (int i = 0; i < P; i++)
        fprintf(f, "%s\t%s%s%s\n\n", pairs[i][0], pairs[i][1], pairs[i][2] ? "\t" : "",
                pairs[i][2] ? pairs[i][2] : "");
    fclose(f);
    for (int i = 0; i <= P; i++) {
        char task[512], out[64];
        if (i < P)
            snprintf(task, sizeof task, "--clean \"%s\" --corrupt \"%s\" %s%s", pairs[i][0],
                     pairs[i][1], pairs[i][2] ? "--positions " : "",
                     pairs[i][2] ? pairs[i][2] : "");
        else
            snprintf(task, sizeof task, "--pairs %s", file);
        snprintf(out, sizeof out, i < P ? "one%d" : "all", i);
        snprintf(command, sizeof command,
                 HL_BUILD_DIR "/heads patch --model %s/toy/model.safetensors %s --out %s/%s "
                 "> /dev/null && " HL_BUILD_DIR "/heads logit-lens --model "
                 "%s/toy/model.safetensors %s --out %s/%s > /dev/null",
                 dir, task, dir, out, dir, task, dir, out);
        tu_run_ok(command);
    }
    /* Texts that differ only in the scored answer: patching refuses (both
     * runs score the same), the logit lens, which reads the clean run with
     * the corrupted text's wrong token, does not (it refused before). */
    const char *same = "--clean \"16 3 5 3 7\" --corrupt \"16 3 5 3 8\" --positions 3 "
                       "--metric logit-diff";
    snprintf(command, sizeof command, HL_BUILD_DIR "/heads patch --model "
             "%s/toy/model.safetensors %s --out %s/same 2>&1", dir, same, dir);
    char out_text[4096];
    ck_assert_msg(tu_run(command, out_text, sizeof out_text) == 2 &&
                  strstr(out_text, "nothing to restore"), "%s", out_text);
    snprintf(command, sizeof command, HL_BUILD_DIR "/heads logit-lens --model "
             "%s/toy/model.safetensors %s --out %s/same > /dev/null", dir, same, dir);
    tu_run_ok(command);
    double gap[P], score[P][8], dla[P][8];
    int n[P];
    for (int i = 0; i < P; i++) {
        char row[16];
        snprintf(row, sizeof row, "%d,", i);
        snprintf(path, sizeof path, "%s/all/pairs.csv", dir);
        const double clean = csv_value(path, row, 4), corrupt = csv_value(path, row, 5);
        n[i] = (int)csv_value(path, row, 3);
        ck_assert_int_eq((int)csv_value(path, row, 1), 2 + 2 * i); /* the file's line */
        snprintf(path, sizeof path, "%s/one%d/pairs.csv", dir, i);
        ck_assert_int_eq(n[i], (int)csv_value(path, "0,", 3));
        ck_assert_msg(fabs(clean - csv_value(path, "0,", 4)) < 1e-5 &&
                      fabs(corrupt - csv_value(path, "0,", 5)) < 1e-5,
                      "pair %d: clean %.9g, corrupted %.9g in the file; alone %.9g, %.9g", i,
                      clean, corrupt, csv_value(path, "0,", 4), csv_value(path, "0,", 5));
        gap[i] = clean - corrupt;
        for (int k = 0; k < 8; k++) {
            snprintf(row, sizeof row, "%d,%d,", k / 4, k % 4);
            snprintf(path, sizeof path, "%s/one%d/patch_z.csv", dir, i);
            score[i][k] = csv_value(path, row, 2);
            snprintf(path, sizeof path, "%s/one%d/dla.csv", dir, i);
            dla[i][k] = csv_value(path, row, 2);
        }
    }
    for (int k = 0; k < 8; k++) {
        double num = 0, den = 0, sum = 0;
        for (int i = 0; i < P; i++) {
            num += n[i] * score[i][k] * gap[i];
            den += n[i] * gap[i];
            sum += n[i] * dla[i][k];
        }
        char row[16];
        snprintf(row, sizeof row, "%d,%d,", k / 4, k % 4);
        snprintf(path, sizeof path, "%s/all/patch_z.csv", dir);
        const double got = csv_value(path, row, 2);
        ck_assert_msg(fabs(got - num / den) < 2e-5, "L%dH%d: patch z over the file %.6f, "
                      "from the pairs alone %.6f", k / 4, k % 4, got, num / den);
        snprintf(path, sizeof path, "%s/all/dla.csv", dir);
        const double got_dla = csv_value(path, row, 2);
        ck_assert_msg(fabs(got_dla - sum / (n[0] + n[1] + n[2])) < 2e-5, "L%dH%d: direct logit "
                      "attribution over the file %.6f, from the pairs alone %.6f", k / 4, k % 4,
                      got_dla, sum / (n[0] + n[1] + n[2]));
    }
    /* A position scored before the texts first differ is named: it adds
     * nothing (the first pair is scored at 4 and 5, after they differ). */
    f = fopen(file, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "%s\t%s\t%s\n16 3 7 1 3 7 1\t16 3 7 1 3 7 5\t2,5\n", pairs[0][0], pairs[0][1],
            pairs[0][2]);
    fclose(f);
    char out[4096];
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/heads patch --model %s/toy/model.safetensors --pairs %s --out %s/b",
             dir, file, dir);
    ck_assert_int_eq(tu_run(command, out, sizeof out), 0);
    ck_assert_msg(strstr(out, "note: 2 scored positions (the first on line 2 of"), "%s", out);
}

/* The toy model of docs/toy-task.md after 1,500 steps (seed 0) has a previous-token
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
    check_pairs_file(work);
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
             HL_BUILD_DIR "/charlm --data " GPL_TEXT " --steps 2 --ctx 16 --d-model 16 --heads 2 "
             "--layers 2 --batch 2 --eval-every 2 --sample 0 --no-report --out %s/char "
             "> /dev/null 2>&1", work);
    tu_run_ok(command);
    snprintf(model, sizeof model, "%s/char/model.safetensors", work);
    /* A context of 3 holds no repeated span (exit 1 before, blaming the text). */
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/charlm --data " GPL_TEXT " --steps 1 --ctx 3 --d-model 8 --heads 2 "
             "--layers 1 --batch 1 --eval-every 1 --sample 0 --no-report --out %s/c3 > /dev/null "
             "2>&1 && " HL_BUILD_DIR "/heads ablate --model %s/c3/model.safetensors --data "
             GPL_TEXT " --repeat --out %s/c3/ab 2>&1", work, work, work);
    ck_assert_msg(tu_run(command, out, sizeof out) == 2 &&
                      strstr(out, "--repeat: the model's 3 positions hold no span"),
                  "%s", out);
    /* nor an induction task: said so (the sequences and tokens were blamed) */
    snprintf(command, sizeof command, HL_BUILD_DIR "/heads patch --model %s/c3/model.safetensors"
             " --out %s/c3/p 2>&1", work, work);
    ck_assert_msg(tu_run(command, out, sizeof out) == 2 &&
                      strstr(out, "context of 3 holds halves of 1 token; the task needs 3"),
                  "%s", out);
    static const struct {
        const char *args, *message;
    } cases[] = {
        {"patch --clean abcd --corrupt abc", "--clean has 4 tokens and --corrupt 3"},
        {"patch --clean abcd --corrupt abce --positions 3", "position 3 is out of range"},
        {"patch --clean abcd --corrupt abce --positions x", "--positions wants numbers"},
        {"patch --metric accuracy", "unknown --metric accuracy"},
        {"patch --act w", "unknown activation \"w\""},
        {"paths --act z", "unknown activation \"z\""},
        /* More names than the command has kinds overran its list. */
        {"paths --act q,q,q,q,q,q", "--act: \"q\" named twice"},
        {"patch --act z,resid,resid_pre", "--act: \"resid_pre\" named twice"},
        {"patch --clean abcd", "--clean and --corrupt together"},
        {"logit-lens --act z", "drop --act"},
        {"ablate --act z", "--act belongs to patch"},
        {"patch --clean abcd --corrupt abcd", "score the same"},
        {"attrib --clean abca --corrupt abcb --metric logit-diff --positions 1",
         "both inputs continue with the same token"},
        {"patch --clean abcd --corrupt abc\xff\xfe", "--clean has 4 tokens and --corrupt 5"},
        {"patch --pairs 20", "the induction task's size is --sequences N"},
        /* Checked before pairs.csv is written; senders in the last layer alone crashed. */
        {"paths --heads L9H9", "head L9H9 is out of range"},
        {"paths --heads 1.0,1.1", "a path needs a sender and a later receiver"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(command, sizeof command, HL_BUILD_DIR "/heads %s --model %s --out %s/out 2>&1",
                 cases[i].args, model, work);
        ck_assert_msg(tu_run(command, out, sizeof out) == 2, "%s: %s", cases[i].args, out);
        ck_assert_msg(strstr(out, cases[i].message), "%s: %s", cases[i].args, out);
        snprintf(command, sizeof command, "%s/out", work);
        ck_assert_msg(access(command, F_OK) != 0, "%s wrote %s", cases[i].args, command);
    }
    /* --pairs FILE: bad files, a missing one, and flags it does not go with. */
    static const struct {
        const char *file, *args, *message;
    } pair_cases[] = {
        {"abcd\tabc\n", "patch", "line 1: the clean input has 4 tokens and the corrupted 3"},
        {"# c\nab\\q\tabcd\n", "paths", "line 2: a backslash in the clean text must begin"},
        {"abcd\tabce\t7\n", "attrib", "line 1: position 7 is out of range"},
        {"abcd\tabce\tx\ty\n", "logit-lens", "line 1: more than 3 fields"},
        {"# nothing\n", "patch", "no pairs"},
        {"abcd\tabce\n", "patch --clean abcd --corrupt abce", "not both"},
        {"abcd\tabce\n", "patch --positions 1", "drop --positions"},
        {NULL, "patch", "cannot read --pairs"},
    };
    for (size_t i = 0; i < sizeof pair_cases / sizeof pair_cases[0]; i++) {
        char file[128];
        snprintf(file, sizeof file, "%s/%s", work, pair_cases[i].file ? "p.tsv" : "missing");
        if (pair_cases[i].file) {
            FILE *f = fopen(file, "w");
            ck_assert_ptr_nonnull(f);
            fputs(pair_cases[i].file, f);
            fclose(f);
        }
        snprintf(command, sizeof command,
                 HL_BUILD_DIR "/heads %s --pairs %s --model %s --out %s/out 2>&1",
                 pair_cases[i].args, file, model, work);
        ck_assert_msg(tu_run(command, out, sizeof out) == 2, "%s: %s", pair_cases[i].args, out);
        ck_assert_msg(strstr(out, pair_cases[i].message), "%s: %s", pair_cases[i].args, out);
        snprintf(command, sizeof command, "%s/out", work);
        ck_assert_msg(access(command, F_OK) != 0, "%s wrote %s", pair_cases[i].args, command);
    }
    /* A sender pruned away, named as trained. */
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/heads prune --model %s --data " GPL_TEXT " --heads 0.1 --out %s/pr "
             "> /dev/null 2>&1", model, work);
    tu_run_ok(command);
    snprintf(command, sizeof command, HL_BUILD_DIR "/heads paths --heads 0.1 --model "
             "%s/pr/pruned.safetensors --out %s/out 2>&1", work, work);
    ck_assert_msg(tu_run(command, out, sizeof out) == 2, "paths, pruned sender: %s", out);
    ck_assert_msg(strstr(out, "head L0H1 was pruned"), "paths, pruned sender: %s", out);
    snprintf(command, sizeof command, "%s/out", work);
    ck_assert_msg(access(command, F_OK) != 0, "paths with a pruned sender wrote %s", command);
    snprintf(command, sizeof command, "rm -rf %s", work);
    ck_assert_int_eq(system(command), 0);
}
END_TEST

/* Path patching through k and v of a grouped-query model (Llama's: 4 query
 * heads, 2 key/value heads), which failed: every path has a score. The
 * scores themselves are checked in test_patching.c. */
START_TEST(test_heads_paths_grouped_query)
{
    snprintf(work, sizeof work, "/tmp/hl_patch_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(work));
    char command[1024], out[4096], path[256];
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/heads paths --model tests/fixtures/hf/llama_tiny --act k,v "
             "--sequences 2 --threads 1 --out %s 2>&1", work);
    ck_assert_msg(tu_run(command, out, sizeof out) == 0, "%s", out);
    for (int kind = 0; kind < 2; kind++) {
        snprintf(path, sizeof path, "%s/paths_%s.csv", work, kind ? "v" : "k");
        FILE *f = fopen(path, "r");
        ck_assert_msg(f, "cannot open %s", path);
        char line[256];
        int rows = 0;
        while (fgets(line, sizeof line, f))
            rows++;
        fclose(f);
        ck_assert_msg(rows == 1 + 4 * 4, "%s: %d lines, not a header and 16 paths", path, rows);
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
    tcase_add_test(tc, test_heads_paths_grouped_query);
#ifndef HL_REAL_DOUBLE
    /* The float build's model; the double build's patching is tested on the
     * fixtures (test_patching.c). */
    tcase_add_test(tc, test_heads_patch_finds_the_induction_circuit);
#endif
    suite_add_tcase(s, tc);
    return s;
}
