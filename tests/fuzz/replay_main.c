/* The regression replay of one fuzz target (ctest fuzz_<name>, every ordinary build, no
 * clang needed): the target's entry point runs on every file in tests/fuzz/regress/<name>/
 * (inputs that once crashed it; each was fixed) and tests/fuzz/corpus/<name>/ (its seeds).
 * A crash, a sanitizer report (ASan tier) or an invariant the target checks fails the test;
 * so does an empty seed folder (the target would then be replaying nothing). */
#define _GNU_SOURCE
#include "testutil.h"
#include "fuzz.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef LCX_FUZZ_NAME
#error "LCX_FUZZ_NAME (the target's folder name) must be defined"
#endif

__attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc; (void)argv;
    return 0;
}

/* Optional: a target that started something (a server, a temp folder) undoes it here. */
__attribute__((weak)) void fz_cleanup(void) {}

static int cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Runs every regular file of dir (sorted, for a stable order); returns how many. */
static int replay_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return 0;
    char **names = NULL;
    int n = 0, cap = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            names = realloc(names, (size_t)cap * sizeof *names);
            assert_non_null(names);
        }
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp);
    int ran = 0;
    for (int i = 0; i < n; i++) {
        char *path = NULL;
        assert_true(asprintf(&path, "%s/%s", dir, names[i]) > 0);
        char *data = NULL;
        size_t len = 0;
        FILE *f = fopen(path, "rb");
        if (f) {
            fseek(f, 0, SEEK_END);
            long sz = ftell(f);
            fseek(f, 0, SEEK_SET);
            if (sz >= 0) {
                data = malloc((size_t)sz + 1);
                assert_non_null(data);
                len = fread(data, 1, (size_t)sz, f);
            }
            fclose(f);
        }
        if (data) {
            /* an exact-size copy, so reading one byte past the input is an ASan report */
            uint8_t *exact = malloc(len ? len : 1);
            assert_non_null(exact);
            memcpy(exact, data, len);
            LLVMFuzzerTestOneInput(exact, len);
            free(exact);
            ran++;
        }
        free(data);
        free(path);
        free(names[i]);
    }
    free(names);
    return ran;
}

static void test_replay(void **st)
{
    (void)st;
    const char *src = getenv("LCX_SRC");
    assert_non_null(src);
    int argc = 1;
    char *args[] = {(char *)"replay", NULL};
    char **argv = args;
    LLVMFuzzerInitialize(&argc, &argv);
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/tests/fuzz/regress/%s", src, LCX_FUZZ_NAME);
    int regress = replay_dir(dir);
    snprintf(dir, sizeof dir, "%s/tests/fuzz/corpus/%s", src, LCX_FUZZ_NAME);
    int seeds = replay_dir(dir);
    fz_cleanup();
    print_message("%s: %d regression inputs, %d seeds replayed\n", LCX_FUZZ_NAME, regress, seeds);
    assert_true(seeds > 0);
}

int main(void)
{
    const struct CMUnitTest t[] = {cmocka_unit_test(test_replay)};
    return cmocka_run_group_tests(t, NULL, NULL);
}
