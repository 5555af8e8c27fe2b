/* Tests for train/dist.c. In a normal build: the single-process semantics. In
 * a `make MPI=1` build, also data-parallel training through mpirun: 2 ranks
 * with half the batch each give the weights of 1 rank with the whole batch,
 * the ranks stay bitwise identical, and mismatched or dying ranks end the job
 * with a message instead of hanging. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "train/dist.h"
#include "io/safetensors.h"
#include "tests/testutil.h"

#ifndef HL_BUILD_DIR
#define HL_BUILD_DIR "build"
#endif

START_TEST(test_single_process)
{
    ck_assert_int_eq(hl_dist_size(), 1);
    ck_assert_int_eq(hl_dist_rank(), 0);
    int begin, end;
    hl_dist_shard(32, &begin, &end);
    ck_assert(begin == 0 && end == 32);
    ck_assert(hl_dist_sum(2.5) == 2.5);
    hl_error err = {0};
    ck_assert_int_eq(hl_dist_check_same("anything", &err), HL_OK);
}
END_TEST

#ifdef HL_MPI

#define MPIRUN "timeout 120 mpirun --allow-run-as-root --oversubscribe "

/* Largest |a - b| over every tensor of two model files, leaving out the key
 * part of each in_proj_bias: its true gradient is 0 (a constant added to all
 * scores of a row does not change the softmax), so its computed gradient is
 * rounding noise, which AdamW's m/sqrt(v) turns into ±lr steps. *key_bias gets
 * the largest difference there, for the record. */
static double max_weight_difference(const char *path_a, const char *path_b, double *key_bias)
{
    hl_error err = {0};
    hl_safetensors *a = NULL, *b = NULL;
    ck_assert_msg(hl_safetensors_read(path_a, &a, &err) == HL_OK, "%s", err.message);
    ck_assert_msg(hl_safetensors_read(path_b, &b, &err) == HL_OK, "%s", err.message);
    ck_assert_uint_eq(hl_safetensors_count(a), hl_safetensors_count(b));
    double worst = 0;
    for (size_t i = 0; i < hl_safetensors_count(a); i++) {
        const char *name = hl_safetensors_entry(a, i)->name;
        hl_tensor *ta = hl_safetensors_load(a, name, false, &err);
        hl_tensor *tb = hl_safetensors_load(b, name, false, &err);
        ck_assert_msg(ta && tb, "%s", err.message);
        bool packed_bias = strstr(name, "in_proj_bias") != NULL;
        size_t E = ta->numel / 3;
        for (size_t k = 0; k < ta->numel; k++) {
            double d = fabs((double)ta->data[k] - (double)tb->data[k]);
            if (packed_bias && k >= E && k < 2 * E)
                *key_bias = fmax(*key_bias, d);
            else
                worst = fmax(worst, d);
        }
        hl_tensor_free(ta);
        hl_tensor_free(tb);
    }
    hl_safetensors_free(a);
    hl_safetensors_free(b);
    return worst;
}

START_TEST(test_two_ranks_equal_one)
{
    char dir[] = "/tmp/headlab-dist-XXXXXX", command[1024], out[8192];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    const char *args = "--steps 40 --eval-every 1000 --heldout 100 --threads 1";
    snprintf(command, sizeof command, MPIRUN "-np 1 " HL_BUILD_DIR "/toy_heads %s --out %s/one",
             args, dir);
    ck_assert_msg(tu_run(command, out, sizeof out) == 0, "%s", out);
    snprintf(command, sizeof command,
             MPIRUN "-np 2 " HL_BUILD_DIR "/toy_heads %s --check-sync --out %s/two", args, dir);
    ck_assert_msg(tu_run(command, out, sizeof out) == 0, "%s", out);
    ck_assert_ptr_nonnull(strstr(out, "over 2 rank(s)"));
    char a[256], b[256];
    snprintf(a, sizeof a, "%s/one/model.safetensors", dir);
    snprintf(b, sizeof b, "%s/two/model.safetensors", dir);
    double key_bias = 0, diff = max_weight_difference(a, b, &key_bias);
    /* Only float rounding differs (each rank sums its half of the batch, then
     * the halves are added): measured 4.6e-7 after 40 steps, on weights of
     * size ~1. */
    fprintf(stderr, "dist: 2 ranks vs 1 rank after 40 steps: max |weight difference| %.3g "
            "(key biases: %.3g)\n", diff, key_bias);
    ck_assert_msg(diff < 5e-6, "weights differ by %g", diff);
    ck_assert_msg(key_bias < 40 * 3e-3, "key biases differ by %g", key_bias);
    /* The same 2-rank run with every MPI call cut into chunks of at most 1000
     * elements (as buffers over INT_MAX elements are): the same bits. */
    snprintf(command, sizeof command,
             MPIRUN "-x HL_DIST_MAX_COUNT=1000 -np 2 " HL_BUILD_DIR
             "/toy_heads %s --check-sync --out %s/chunked", args, dir);
    ck_assert_msg(tu_run(command, out, sizeof out) == 0, "%s", out);
    snprintf(a, sizeof a, "%s/chunked/model.safetensors", dir);
    key_bias = 0;
    diff = max_weight_difference(a, b, &key_bias);
    ck_assert_msg(diff == 0 && key_bias == 0, "chunked transfers changed the weights by %g (%g)",
                  diff, key_bias);
    snprintf(command, sizeof command, "rm -rf %s", dir);
    ck_assert_int_eq(system(command), 0);
}
END_TEST

START_TEST(test_mismatched_or_dying_ranks_end_the_job)
{
    char dir[] = "/tmp/headlab-dist-XXXXXX", command[1024], out[8192];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    /* Different seeds on the two ranks: refused before training. */
    snprintf(command, sizeof command,
             MPIRUN "-np 1 " HL_BUILD_DIR "/toy_heads --steps 5 --seed 1 --out %s : "
             "-np 1 " HL_BUILD_DIR "/toy_heads --steps 5 --seed 2 --out %s", dir, dir);
    int rc = tu_run(command, out, sizeof out);
    ck_assert_msg(rc != 0 && rc != 124, "exit %d: %s", rc, out);
    ck_assert_msg(strstr(out, "different options"), "%s", out);
    /* Rank 1 dies at once (a bad flag) while rank 0 waits in a collective. */
    snprintf(command, sizeof command,
             MPIRUN "-np 1 " HL_BUILD_DIR "/toy_heads --steps 5 --out %s : "
             "-np 1 " HL_BUILD_DIR "/toy_heads --no-such-flag", dir);
    rc = tu_run(command, out, sizeof out);
    ck_assert_msg(rc != 0 && rc != 124, "exit %d (124 = hung until the timeout): %s", rc, out);
    snprintf(command, sizeof command, "rm -rf %s", dir);
    ck_assert_int_eq(system(command), 0);
}
END_TEST

/* A checkpoint does not depend on the number of ranks that wrote it: 2 ranks
 * to step 20 then 1 rank to 30, and 1 rank to 20 then 2 ranks to 30, both
 * end within float rounding of 1 rank straight to 30. */
START_TEST(test_checkpoint_across_rank_counts)
{
    char dir[] = "/tmp/headlab-dist-XXXXXX", command[1024], out[8192];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    const char *args = "--eval-every 10 --heldout 40 --threads 1";
    const struct {
        const char *name;
        int first_ranks, then_ranks;
    } runs[] = {{"straight", 1, 0}, {"two_then_one", 2, 1}, {"one_then_two", 1, 2}};
    for (int i = 0; i < 3; i++) {
        int steps = runs[i].then_ranks ? 20 : 30;
        snprintf(command, sizeof command, MPIRUN "-np %d " HL_BUILD_DIR
                 "/toy_heads %s --steps %d --out %s/%s", runs[i].first_ranks, args, steps, dir,
                 runs[i].name);
        ck_assert_msg(tu_run(command, out, sizeof out) == 0, "%s", out);
        if (!runs[i].then_ranks)
            continue;
        snprintf(command, sizeof command, MPIRUN "-np %d " HL_BUILD_DIR
                 "/toy_heads %s --steps 30 --out %s/%s --resume %s/%s/checkpoint.safetensors",
                 runs[i].then_ranks, args, dir, runs[i].name, dir, runs[i].name);
        ck_assert_msg(tu_run(command, out, sizeof out) == 0, "%s", out);
        ck_assert_msg(strstr(out, "resumed from") && strstr(out, "at step 20"), "%s", out);
    }
    char a[256], b[256];
    snprintf(a, sizeof a, "%s/straight/model.safetensors", dir);
    for (int i = 1; i < 3; i++) {
        snprintf(b, sizeof b, "%s/%s/model.safetensors", dir, runs[i].name);
        double key_bias = 0, diff = max_weight_difference(a, b, &key_bias);
        ck_assert_msg(diff < 5e-6, "%s: weights differ by %g", runs[i].name, diff);
    }
    snprintf(command, sizeof command, "rm -rf %s", dir);
    ck_assert_int_eq(system(command), 0);
}
END_TEST

/* Runs `mpirun -np ranks build/<program and args>`, failing the test unless
 * it exits 0; its output in out. */
__attribute__((format(printf, 4, 5))) static void mpirun_ok(char *out, size_t size, int ranks,
                                                            const char *fmt, ...)
{
    char args[1536], command[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(command, sizeof command, MPIRUN "-np %d " HL_BUILD_DIR "/%s", ranks, args);
    ck_assert_msg(tu_run(command, out, size) == 0, "%s: %s", command, out);
}

/* dir/text.txt: the BPE fixture's training text, copies times over. */
static void write_text(const char *dir, int copies)
{
    char command[256];
    snprintf(command, sizeof command, "for i in $(seq %d); do cat tests/fixtures/bpe/train.txt; "
             "done > %s/text.txt", copies, dir);
    ck_assert_int_eq(system(command), 0);
}

/* Two ranks train from the same memory-mapped token files, bitwise as from
 * the text itself (both read the same windows). */
START_TEST(test_ranks_share_token_files)
{
    char dir[] = "/tmp/headlab-dist-XXXXXX", command[256], out[8192];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    write_text(dir, 60);
    snprintf(command, sizeof command, HL_BUILD_DIR "/tokenize %s/text.txt --learn 400 "
             "--tokenizer bpe --out %s/tok", dir, dir);
    ck_assert_msg(tu_run(command, out, sizeof out) == 0, "%s", out);
    const char *args = "--steps 12 --eval-every 6 --ctx 16 --d-model 16 --heads 2 --layers 1 "
                       "--batch 4 --sample 0 --no-report --threads 1";
    mpirun_ok(out, sizeof out, 2, "charlm --tokens %s/tok %s --out %s/tokens", dir, args, dir);
    mpirun_ok(out, sizeof out, 2, "charlm --data %s/text.txt --tokenizer bpe --vocab 400 %s "
              "--out %s/text", dir, args, dir);
    char a[256], b[256];
    snprintf(a, sizeof a, "%s/tokens/model.safetensors", dir);
    snprintf(b, sizeof b, "%s/text/model.safetensors", dir);
    ck_assert_msg(tu_same_file(a, b), "2 ranks: --tokens and --data trained different models");
    snprintf(command, sizeof command, "rm -rf %s", dir);
    ck_assert_int_eq(system(command), 0);
}
END_TEST

/* A 2-rank charlm run with dropout, resumed on 2 ranks from its step-6
 * checkpoint, ends with bitwise the weights of the uninterrupted run: the
 * checkpoint keeps every rank's dropout stream (rank 1's used to be replaced
 * by rank 0's, so both ranks drew the same masks after a resume). A
 * one-process checkpoint resumes on 2 ranks, rank 1 splitting its stream
 * off rank 0's. */
START_TEST(test_dropout_resumes_bitwise_on_two_ranks)
{
    char dir[] = "/tmp/headlab-dist-XXXXXX", command[256], out[8192];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    write_text(dir, 20);
    const char *args = "--eval-every 6 --ctx 16 --d-model 16 --heads 2 --layers 1 --batch 4 "
                       "--dropout 0.2 --sample 0 --no-report --threads 1";
    mpirun_ok(out, sizeof out, 2, "charlm --data %s/text.txt %s --steps 12 --out %s/straight",
              dir, args, dir);
    mpirun_ok(out, sizeof out, 2, "charlm --data %s/text.txt %s --steps 6 --out %s/first", dir,
              args, dir);
    mpirun_ok(out, sizeof out, 2, "charlm --data %s/text.txt %s --steps 12 --out %s/first "
              "--resume %s/first/checkpoint.safetensors", dir, args, dir, dir);
    char a[256], b[256];
    snprintf(a, sizeof a, "%s/straight/model.safetensors", dir);
    snprintf(b, sizeof b, "%s/first/model.safetensors", dir);
    ck_assert_msg(tu_same_file(a, b), "2 ranks: the resumed dropout run differs");
    /* A checkpoint of one process has no stream for rank 1: it resumes. */
    mpirun_ok(out, sizeof out, 1, "charlm --data %s/text.txt %s --steps 6 --out %s/one", dir,
              args, dir);
    mpirun_ok(out, sizeof out, 2, "charlm --data %s/text.txt %s --steps 12 --out %s/one "
              "--resume %s/one/checkpoint.safetensors", dir, args, dir, dir);
    ck_assert_msg(strstr(out, "resumed from") && strstr(out, "at step 6"), "%s", out);
    snprintf(command, sizeof command, "rm -rf %s", dir);
    ck_assert_int_eq(system(command), 0);
}
END_TEST

static double seconds_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* SIGKILL to one rank of a running job: mpirun ends, non-zero, within seconds. */
START_TEST(test_killed_rank_ends_the_job)
{
    char dir[] = "/tmp/headlab-dist-XXXXXX", command[1024];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    /* mpirun itself (no timeout wrapper), so the ranks are its children. */
    snprintf(command, sizeof command, "exec mpirun --allow-run-as-root --oversubscribe -np 2 "
             HL_BUILD_DIR
             "/toy_heads --steps 1000000 --eval-every 1000000 --threads 1 --out %s/job "
             ">/dev/null 2>&1", dir);
    fflush(NULL);
    pid_t job = fork();
    ck_assert_int_ge(job, 0);
    if (job == 0) {
        execl("/bin/sh", "sh", "-c", command, (char *)NULL);
        _exit(127);
    }
    /* Wait until the ranks (mpirun's children) run, then kill the newest. */
    char find[128], line[64] = "";
    snprintf(find, sizeof find, "pgrep -n -x toy_heads -P %ld", (long)job);
    const struct timespec pause = {0, 200000000};
    for (int tries = 0; tries < 100 && !line[0]; tries++) {
        nanosleep(&pause, NULL);
        FILE *p = popen(find, "r");
        if (p && !fgets(line, sizeof line, p))
            line[0] = '\0';
        if (p)
            pclose(p);
    }
    ck_assert_msg(line[0], "the ranks did not start");
    sleep(2);
    pid_t rank = (pid_t)strtol(line, NULL, 10);
    double t0 = seconds_now();
    ck_assert_int_eq(kill(rank, SIGKILL), 0);
    int status;
    ck_assert_int_eq(waitpid(job, &status, 0), job);
    double waited = seconds_now() - t0;
    fprintf(stderr, "dist: mpirun ended %.2f s after a rank was killed (status %d)\n", waited,
            status);
    ck_assert_msg(!(WIFEXITED(status) && WEXITSTATUS(status) == 0), "the job exited 0");
    ck_assert_msg(!(WIFEXITED(status) && WEXITSTATUS(status) == 124), "the job hung");
    ck_assert_msg(waited < 10, "the job took %.1f s to end", waited);
    snprintf(command, sizeof command, "rm -rf %s", dir);
    ck_assert_int_eq(system(command), 0);
}
END_TEST

#endif

Suite *dist_suite(void)
{
    Suite *s = suite_create("dist");
    TCase *tc = tcase_create("dist");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_single_process);
#ifdef HL_MPI
    tcase_add_test(tc, test_two_ranks_equal_one);
    tcase_add_test(tc, test_mismatched_or_dying_ranks_end_the_job);
    tcase_add_test(tc, test_checkpoint_across_rank_counts);
    tcase_add_test(tc, test_ranks_share_token_files);
    tcase_add_test(tc, test_dropout_resumes_bitwise_on_two_ranks);
    tcase_add_test(tc, test_killed_rank_ends_the_job);
#endif
    suite_add_tcase(s, tc);
    return s;
}
