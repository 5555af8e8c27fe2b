/* Fault tests of the training programs (toy_heads, charlm): a run killed with
 * SIGKILL at random moments always leaves a checkpoint that loads, and
 * resuming from it reaches bitwise the weights of an uninterrupted run and
 * the same rows in its CSV logs; a
 * write past a file-size limit fails with a message naming the file, exit
 * status 2, the previous file intact and no temporary file left. */
#include <dirent.h>
#include <float.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/testutil.h"

/* Kill rounds: at least MIN_ROUNDS, then until MIN_KILLED runs were really
 * cut short and MIN_RESUMED resumed from a checkpoint, at most MAX_ROUNDS.
 * Each round costs about two uninterrupted runs, so the test's time follows
 * the machine's speed (a sanitizer build, a slow or loaded machine) and it
 * has no time limit of its own. */
#define MIN_ROUNDS 8
#define MAX_ROUNDS 20
#define MIN_KILLED 5
#define MIN_RESUMED 2

static char work[TU_DIR_MAX];

/* Starts `command` under sh, kills its process group with SIGKILL after
 * `delay` seconds unless it ended first; true when it was killed. */
static bool run_and_kill(const char *command, double delay)
{
    fflush(NULL);
    pid_t child = fork();
    ck_assert_int_ge(child, 0);
    if (child == 0) {
        setpgid(0, 0);
        char exec_command[1100];
        snprintf(exec_command, sizeof exec_command, "exec %s", command);
        execl("/bin/sh", "sh", "-c", exec_command, (char *)NULL);
        _exit(127);
    }
    setpgid(child, child);
    struct timespec pause = {(time_t)delay, (long)((delay - (time_t)delay) * 1e9)};
    nanosleep(&pause, NULL);
    bool killed = kill(-child, SIGKILL) == 0;
    int status;
    ck_assert_int_eq(waitpid(child, &status, 0), child);
    return killed && WIFSIGNALED(status);
}

/* No "*.tmp.*" file in dir. */
static void expect_no_temporaries(const char *dir)
{
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    for (struct dirent *e; (e = readdir(d));)
        ck_assert_msg(!strstr(e->d_name, ".tmp."), "%s/%s left behind", dir, e->d_name);
    closedir(d);
}

/* The checkpoint in dir loads (weights, optimizer state, step), or there is
 * none yet; true when there is one. */
static bool checkpoint_loads(const char *dir)
{
    char path[256];
    snprintf(path, sizeof path, "%s/checkpoint.safetensors", dir);
    if (access(path, F_OK) != 0)
        return false;
    hl_error err = {0};
    hl_gpt *m = hl_gpt_load(path, &err);
    ck_assert_msg(m, "a killed run left %s unloadable: %s", path, err.message);
    const hl_optim_config adamw = {.kind = HL_OPTIM_ADAMW, .lr = 1e-3, .beta1 = 0.9,
                                   .beta2 = 0.99, .eps = 1e-8};
    hl_optim *opt = hl_optim_new(m->params, &adamw, &err);
    ck_assert_msg(opt, "%s", err.message);
    int64_t step = -1;
    ck_assert_msg(hl_checkpoint_load(path, m->params, opt, &step, NULL, 0, &err) == HL_OK, "%s",
                  err.message);
    ck_assert_int_gt(step, 0);
    hl_optim_free(opt);
    hl_gpt_free(m);
    return true;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* A CSV log of a run and whether its last column is a timing (which differs
 * from run to run and is left out of the comparison). */
typedef struct {
    const char *name;
    bool timed;
} csv_log;

/* The text of path, with each line's last column dropped when `timed`. */
static char *log_text(const char *path, bool timed)
{
    size_t n;
    char *text = (char *)hl_fs_read_file(path, &n);
    ck_assert_msg(text, "cannot read %s", path);
    char *out = malloc(n + 1);
    size_t kept = 0;
    for (size_t at = 0; at < n;) {
        char *newline = memchr(text + at, '\n', n - at);
        size_t len = newline ? (size_t)(newline - (text + at)) : n - at;
        size_t keep = len;
        if (timed)
            while (keep > 0 && text[at + keep - 1] != ',')
                keep--;
        memcpy(out + kept, text + at, keep);
        kept += keep;
        out[kept++] = '\n';
        at += len + 1;
    }
    out[kept] = '\0';
    free(text);
    return out;
}

/* The run in dir logged the same rows as the uninterrupted one (no row
 * missing, repeated, or left from after the checkpoint). */
static void expect_same_log(const char *want_dir, const char *dir, const csv_log *log, int round)
{
    char want_path[256], got_path[256];
    snprintf(want_path, sizeof want_path, "%s/%s", want_dir, log->name);
    snprintf(got_path, sizeof got_path, "%s/%s", dir, log->name);
    char *want = log_text(want_path, log->timed), *got = log_text(got_path, log->timed);
    ck_assert_msg(!strcmp(want, got), "run %d: %s differs from %s%s:\n%s\nwanted:\n%s", round,
                  got_path, want_path, log->timed ? " (timing column aside)" : "", got, want);
    free(want);
    free(got);
}

/* Kills `base` (a program and its flags, without --out/--resume) at seeded
 * random moments within an uninterrupted run's time, in rounds as above,
 * resumes each run to the end and compares `result` (a file of the finished
 * run) and the n_logs CSV logs with the uninterrupted run's. */
static void kill_and_resume(const char *base, const char *result, const csv_log *logs,
                            int n_logs, unsigned seed)
{
    char command[1024], dir[128], want[192], got[192];
    snprintf(command, sizeof command, "%s --out %s/straight >/dev/null 2>&1", base, work);
    double t0 = now();
    tu_run_ok(command);
    const double seconds = now() - t0;
    snprintf(want, sizeof want, "%s/straight/%s", work, result);
    int killed = 0, resumed = 0;
    srand(seed);
    for (int k = 0; k < MAX_ROUNDS; k++) {
        if (k >= MIN_ROUNDS && killed >= MIN_KILLED && resumed >= MIN_RESUMED)
            break;
        snprintf(dir, sizeof dir, "%s/run%d", work, k);
        snprintf(command, sizeof command, "%s --out %s >/dev/null 2>&1", base, dir);
        /* Within the first 80% of the time an uninterrupted run takes: later
         * moments often miss a run that happens to go faster. */
        killed += run_and_kill(command, 0.8 * seconds * rand() / RAND_MAX);
        bool has_checkpoint = checkpoint_loads(dir);
        if (has_checkpoint)
            snprintf(command, sizeof command,
                     "%s --out %s --resume %s/checkpoint.safetensors >/dev/null 2>&1", base, dir,
                     dir);
        int rc = system(command);
        /* A kill after the final checkpoint leaves nothing to train: exit 2. */
        ck_assert_msg(WIFEXITED(rc) && (WEXITSTATUS(rc) == 0 || WEXITSTATUS(rc) == 2),
                      "run %d: %s exited %d", k, command, rc);
        if (WEXITSTATUS(rc) == 2)
            continue;
        resumed += has_checkpoint;
        snprintf(got, sizeof got, "%s/%s", dir, result);
        ck_assert_msg(tu_same_file(want, got), "run %d (killed, then %s): %s differs from %s", k,
                      has_checkpoint ? "resumed" : "restarted", got, want);
        char straight[160];
        snprintf(straight, sizeof straight, "%s/straight", work);
        for (int i = 0; i < n_logs; i++)
            expect_same_log(straight, dir, &logs[i], k);
        expect_no_temporaries(dir);
    }
    /* The test means something only if runs were really cut short and resumed. */
    ck_assert_msg(killed >= MIN_KILLED && resumed >= MIN_RESUMED, "%d killed, %d resumed",
                  killed, resumed);
}

START_TEST(test_toy_heads_killed)
{
    tu_make_dir(work, "faults");
    kill_and_resume(HL_BUILD_DIR "/toy_heads --steps 40 --eval-every 5 --heldout 20 --threads 1 "
                                 "--no-report",
                    "model.safetensors", (csv_log[]){{"train.csv", true}}, 1, 1);
    tu_remove_dir(work);
}
END_TEST

/* work/text.txt: `lines` lines of `sentence` followed by the line number
 * modulo `period` (a text with structure for charlm to learn). */
static void write_text(char *path, size_t size, const char *sentence, int lines, int period)
{
    snprintf(path, size, "%s/text.txt", work);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    for (int i = 0; i < lines; i++)
        fprintf(f, "%s %d.\n", sentence, i % period);
    fclose(f);
}

START_TEST(test_charlm_killed)
{
    tu_make_dir(work, "faults");
    char text[128], base[512];
    write_text(text, sizeof text, "a killed run resumes where it stopped", 300, 7);
    snprintf(base, sizeof base,
             HL_BUILD_DIR "/charlm --data %s --ctx 16 --d-model 16 --heads 2 --layers 1 "
                          "--batch 4 --steps 60 --eval-every 5 --sample 0 --threads 1 "
                          "--no-report",
             text);
    const csv_log logs[] = {{"train.csv", true}, {"heads.csv", false}};
    kill_and_resume(base, "checkpoint.safetensors", logs, 2, 2);
    tu_remove_dir(work);
}
END_TEST

#ifndef HL_MPI /* see faults_suite */
/* With a file-size limit of `blocks` 512-byte blocks the run fails with exit
 * status 2 and a message naming a file in dir; no temporary file is left and
 * the model written before is intact. */
static void expect_write_failure(const char *program_and_flags, const char *dir, int blocks)
{
    char command[1024], out[8192], model[192], saved[192];
    snprintf(model, sizeof model, "%s/model.safetensors", dir);
    snprintf(saved, sizeof saved, "%s/saved.safetensors", work);
    snprintf(command, sizeof command, "cp %s %s", model, saved);
    ck_assert_int_eq(system(command), 0);
    snprintf(command, sizeof command, "ulimit -f %d; %s --out %s", blocks, program_and_flags,
             dir);
    int rc = tu_run(command, out, sizeof out);
    ck_assert_msg(rc == 2, "%s: exit %d: %s", command, rc, out);
    ck_assert_msg(strstr(out, "cannot write") && strstr(out, dir), "%s: %s", command, out);
    expect_no_temporaries(dir);
    ck_assert_msg(tu_same_file(model, saved), "%s changed", model);
}

START_TEST(test_toy_heads_file_size_limit)
{
    tu_make_dir(work, "faults");
    char command[512], dir[128];
    snprintf(dir, sizeof dir, "%s/toy", work);
    snprintf(command, sizeof command,
             HL_BUILD_DIR "/toy_heads --steps 10 --eval-every 5 --heldout 40 --no-report --out %s "
                          ">/dev/null",
             dir);
    tu_run_ok(command);
    /* 64 KiB: train.csv and the PNGs fit, a checkpoint (~450 KB) does not. */
    expect_write_failure(HL_BUILD_DIR "/toy_heads --steps 10 --eval-every 5 --heldout 40 "
                                      "--no-report",
                         dir, 128);
    tu_remove_dir(work);
}
END_TEST
#endif

/* Numbers that overflow stop training: a charlm checkpoint with one row of a
 * weight matrix at the largest finite value (it loads: a NaN would be refused
 * at load) overflows in the row's product at the first step. Resuming stops
 * there with exit 1, a message naming the step and the first op whose output
 * is not finite, and the checkpoint (the last good state) left as it was.
 * Poisoned: an MLP weight; the attention's input projection with ctx 16 (the
 * composed ops) and with ctx 80 (two tiles: the fused hl_attention, which once
 * turned NaN rows into zeros and reported a finite loss). */
START_TEST(test_charlm_non_finite_weight)
{
    static const struct {
        int ctx;
        bool attention; /* poison in_proj_weight, else fc_w */
    } cases[] = {{16, false}, {16, true}, {80, true}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        tu_make_dir(work, "faults");
        char text[128], ckpt[128], copy[128], command[1024], out[8192];
        write_text(text, sizeof text, "non-finite weights stop the run", 200, 5);
        snprintf(command, sizeof command,
                 HL_BUILD_DIR "/charlm --data %s --ctx %d --d-model 16 --heads 2 --layers 1 "
                              "--batch 4 --steps 10 --eval-every 5 --sample 0 --out %s >/dev/null",
                 text, cases[c].ctx, work);
        tu_run_ok(command);
        /* Poison one weight of the checkpoint, keeping everything else. */
        snprintf(ckpt, sizeof ckpt, "%s/checkpoint.safetensors", work);
        hl_error err = {0};
        hl_gpt *m = hl_gpt_load(ckpt, &err);
        ck_assert_msg(m, "%s", err.message);
        const hl_optim_config adamw = {.kind = HL_OPTIM_ADAMW, .lr = 1e-3, .beta1 = 0.9,
                                       .beta2 = 0.99, .eps = 1e-8};
        hl_optim *opt = hl_optim_new(m->params, &adamw, &err);
        ck_assert_msg(opt, "%s", err.message);
        hl_rng data, dropout;
        hl_checkpoint_rng rngs[] = {{"data", &data, NULL}, {"dropout", &dropout, NULL}};
        int64_t step;
        ck_assert_int_eq(hl_checkpoint_load(ckpt, m->params, opt, &step, rngs, 2, &err), HL_OK);
        hl_tensor *w = cases[c].attention ? m->blocks[0].attn.in_proj_weight
                                          : m->blocks[0].fc_w;
        for (int k = 0; k < w->shape[1]; k++)
            w->data[k] = FLT_MAX; /* charlm and this test are the float build */
        char config[512];
        hl_gpt_config_format(&m->cfg, config, sizeof config);
        hl_checkpoint_meta meta[] = {{"config", config}, {"task", "charlm"}};
        ck_assert_int_eq(hl_checkpoint_save(ckpt, m->params, opt, step, rngs, 2, meta, 2, &err),
                         HL_OK);
        snprintf(copy, sizeof copy, "%s/poisoned.safetensors", work);
        snprintf(command, sizeof command, "cp %s %s", ckpt, copy);
        ck_assert_int_eq(system(command), 0);
        snprintf(command, sizeof command,
                 HL_BUILD_DIR "/charlm --data %s --steps 20 --eval-every 5 --sample 0 --out %s "
                              "--resume %s",
                 text, work, ckpt);
        int rc = tu_run(command, out, sizeof out);
        ck_assert_msg(rc == 1, "ctx %d: exit %d: %s", cases[c].ctx, rc, out);
        ck_assert_msg(strstr(out, "step 10: the loss is ") &&
                      strstr(out, "the first op whose output is not finite is linear"),
                      "ctx %d, %s poisoned: %s", cases[c].ctx,
                      cases[c].attention ? "in_proj_weight" : "fc_w", out);
        /* It says that no checkpoint came of this run (it named "the last
         * checkpoint" as if one had). */
        ck_assert_msg(strstr(out, "no checkpoint was written (the first comes at the first "
                                  "evaluation after step 10); the one resumed from is as it "
                                  "was"), "%s", out);
        ck_assert_msg(tu_same_file(ckpt, copy), "the checkpoint was overwritten");
        hl_optim_free(opt);
        hl_gpt_free(m);
        tu_remove_dir(work);
    }
}
END_TEST

/* The programs run with --threads 1 and their files do not depend on the
 * build's precision, so these tests run once per `make test`: in the float
 * build's pass with OMP_NUM_THREADS=1 (and in any run where that is unset). */
static bool fault_tests_wanted(void)
{
#ifdef HL_REAL_DOUBLE
    return false;
#else
    const char *threads = getenv("OMP_NUM_THREADS");
    return !threads || !strcmp(threads, "1");
#endif
}

Suite *faults_suite(void)
{
    Suite *s = suite_create("faults");
    TCase *tc = tcase_create("faults");
    /* No time limit: the work scales with the machine (see MIN_ROUNDS). */
    tcase_set_timeout(tc, 0);
    if (!fault_tests_wanted()) {
        suite_add_tcase(s, tc);
        return s;
    }
    tcase_add_test(tc, test_toy_heads_killed);
    tcase_add_test(tc, test_charlm_killed);
#ifndef HL_MPI
    /* In the MPI build the programs call MPI_Init, whose shared-memory
     * segments `ulimit -f` forbids: the run ends in MPI_Init, not at the
     * write under test. The plain build's pass runs the same writer. */
    tcase_add_test(tc, test_toy_heads_file_size_limit);
#endif
    tcase_add_test(tc, test_charlm_non_finite_weight);
    suite_add_tcase(s, tc);
    return s;
}
