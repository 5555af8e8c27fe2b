/* Runs every Check suite, or only those named on the command line:
 *     build/test_headlab            all suites
 *     build/test_headlab softmax    one suite
 *     build/test_headlab --other-kernel-sets
 *                                   prints the kernel sets this CPU has besides
 *                                   the best (for `make test`'s extra passes)
 *     build/test_headlab --peak-rss COMMAND
 *                                   runs COMMAND with sh and prints its peak
 *                                   resident memory in KiB (see peak_rss)
 * The suites run on the kernel set HL_ISA names, else the best.
 * Exit status 0 only when every test passed. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "core/real.h"
#include "ops/isa.h"

/* The suites, X(name) for each tests/test_<name>.c: the Makefile lists them
 * (HL_TEST_SUITES), so a new suite file is found without registering it;
 * tools/devtest.sh lists only some. */
#ifndef HL_TEST_SUITES
#error "HL_TEST_SUITES(X) lists the suites: build with make"
#endif

#define DECLARE(name) Suite *name##_suite(void);
HL_TEST_SUITES(DECLARE)

typedef struct {
    const char *name;
    Suite *(*make)(void);
} suite_entry;

#define ENTRY(name) {#name, name##_suite},
static const suite_entry suites[] = {HL_TEST_SUITES(ENTRY)};

static int wanted(const char *name, int argc, char **argv)
{
    if (argc < 2)
        return 1;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], name) == 0)
            return 1;
    return 0;
}

/* A command's peak resident memory, measured from this freshly started, small
 * process. Measured from a test instead, it would start at the test process's
 * own peak: exec keeps the high-water mark of the memory it replaces, and a
 * suite that runs unforked under AddressSanitizer grows to hundreds of MiB.
 * Prints the peak in KiB; exits 2 when the command failed. */
static int peak_rss(const char *command)
{
    int status = system(command);
    struct rusage use;
    if (getrusage(RUSAGE_CHILDREN, &use) != 0)
        return 2;
    printf("%ld\n", use.ru_maxrss);
    return status == 0 ? EXIT_SUCCESS : 2;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--peak-rss") == 0)
        return peak_rss(argv[2]);
    if (argc == 2 && strcmp(argv[1], "--other-kernel-sets") == 0) {
        for (int i = HL_ISA_COUNT - 1; i >= 0; i--)
            if (i != (int)hl_isa_best() && hl_isa_supported((hl_isa)i))
                printf("%s\n", hl_isa_name((hl_isa)i));
        return EXIT_SUCCESS;
    }
    hl_error err = {0};
    if (hl_isa_init_from_env(&err) != HL_OK) {
        fprintf(stderr, "test_headlab: %s\n", err.message);
        return 2;
    }
    SRunner *runner = NULL;
    for (size_t i = 0; i < sizeof suites / sizeof suites[0]; i++) {
        if (!wanted(suites[i].name, argc, argv))
            continue;
        if (!runner)
            runner = srunner_create(suites[i].make());
        else
            srunner_add_suite(runner, suites[i].make());
    }
    if (!runner) {
        fprintf(stderr, "test_headlab: no suite matches the names given\n");
        return 2;
    }
    const char *threads = getenv("OMP_NUM_THREADS");
    printf("headlab tests: %s build, %s kernels, OMP_NUM_THREADS=%s\n", HL_REAL_NAME,
           hl_isa_name(hl_isa_active()), threads ? threads : "(unset)");
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
