/* The libFuzzer entry point every target in tests/fuzz defines, and small helpers they share.
 * A target is one fuzz_<name>.c built twice: with -DLCX_FUZZ=ON (clang, -fsanitize=fuzzer)
 * as the libFuzzer binary fuzz_<name>, and in every ordinary build with replay_main.c as
 * the ctest fuzz_<name>, which runs the entry point on each file of tests/fuzz/regress/<name>/
 * (crashes found earlier) and tests/fuzz/corpus/<name>/ (the seeds). A target never
 * returns an error for bad input: it returns 0, and anything the code under test must not
 * do (crash, read out of bounds, leak, break an invariant the target checks) aborts. */
#ifndef LCX_FUZZ_H
#define LCX_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
/* Optional one-time set-up (libFuzzer calls it before the first input; so does the replay). */
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* Optional: undoes what LLVMFuzzerInitialize started (the replay calls it at the end). */
void fz_cleanup(void);

/* Seed debugging: with LCX_FUZZ_DEBUG set, targets say what each input reached. */
#define FZ_LOG(...)                                                                       \
    do {                                                                                  \
        if (getenv("LCX_FUZZ_DEBUG")) fprintf(stderr, __VA_ARGS__);                       \
    } while (0)

/* An invariant the target checks; failing it is a finding (abort, with the reason). */
#define FZ_CHECK(cond)                                                                    \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            fprintf(stderr, "fuzz invariant failed: %s (%s:%d)\n", #cond, __FILE__, __LINE__); \
            abort();                                                                      \
        }                                                                                 \
    } while (0)

/* A private temporary folder (mkdtemp under $TMPDIR or /tmp), malloc'd; NULL on failure. */
char *fz_tmpdir(const char *tag);
/* rm -rf path (best effort). */
void fz_rmrf(const char *path);
/* Writes text to dir/rel (best effort: a seed project for a target). */
void fz_put(const char *dir, const char *rel, const char *text);
/* data[0..n) with every "@P" replaced by path; NUL-terminated, malloc'd (NULL: no memory).
 * Lets seeds name the target's temp project without knowing where it is. */
char *fz_expand(const void *data, size_t n, const char *path, size_t *out_len);
/* The fixtures folder ($LCX_FIXTURES) or NULL when unset or missing. */
const char *fz_fixtures(void);

#endif
