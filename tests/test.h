/* test.h — the project's small test framework.
 *
 * TEST(name) { ... } registers a test; the runner (test_main.c) forks one
 * child per test so a crash or sanitizer report fails that test only, prints
 * "ok"/"FAIL" per test and ends with the line "N passed, N failed". Checks
 * never abort the test: CHECK records a failure and continues, REQUIRE
 * records and returns. Helpers run the `gepard` command ($GEPARD_BIN), find
 * the shared fixtures and make temporary directories.
 */
#ifndef GEPARD_TEST_H
#define GEPARD_TEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef void (*test_fn)(void);

void test_register(const char *name, const char *file, test_fn fn);
void test_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Print an informational line into the test output (measured errors etc.). */
void test_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int test_failures(void);
/* End the current test as skipped, saying why ("no CUDA device"). */
void test_skip(const char *why) __attribute__((noreturn));

#define TEST(name)                                                                                 \
    static void test_##name(void);                                                                 \
    __attribute__((constructor)) static void register_##name(void) {                               \
        test_register(#name, __FILE__, test_##name);                                               \
    }                                                                                              \
    static void test_##name(void)

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) test_fail(__FILE__, __LINE__, "check failed: %s", #cond);                     \
    } while (0)

#define CHECK_MSG(cond, ...)                                                                       \
    do {                                                                                           \
        if (!(cond)) test_fail(__FILE__, __LINE__, __VA_ARGS__);                                   \
    } while (0)

#define REQUIRE(cond)                                                                              \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            test_fail(__FILE__, __LINE__, "requirement failed: %s", #cond);                        \
            return;                                                                                \
        }                                                                                          \
    } while (0)

#define REQUIRE_MSG(cond, ...)                                                                     \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            test_fail(__FILE__, __LINE__, __VA_ARGS__);                                            \
            return;                                                                                \
        }                                                                                          \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                                         \
    do {                                                                                           \
        long long a_ = (long long)(a), b_ = (long long)(b);                                        \
        if (a_ != b_) test_fail(__FILE__, __LINE__, "%s == %s: %lld != %lld", #a, #b, a_, b_);     \
    } while (0)

/* Expect a gepard status of 0; print the error message otherwise. */
#define REQUIRE_OK(expr, errp)                                                                     \
    do {                                                                                           \
        int rc_ = (expr);                                                                          \
        if (rc_ != 0) {                                                                            \
            test_fail(__FILE__, __LINE__, "%s failed (%d): %s", #expr, rc_, (errp)->message);      \
            return;                                                                                \
        }                                                                                          \
    } while (0)

/* Expect failure whose message contains `needle`. */
#define CHECK_ERR_CONTAINS(expr, errp, needle)                                                     \
    do {                                                                                           \
        int rc_ = (expr);                                                                          \
        if (rc_ == 0)                                                                              \
            test_fail(__FILE__, __LINE__, "%s succeeded, expected an error mentioning \"%s\"",     \
                      #expr, needle);                                                              \
        else if (!strstr((errp)->message, needle))                                                 \
            test_fail(__FILE__, __LINE__, "%s: message \"%s\" lacks \"%s\"", #expr,                \
                      (errp)->message, needle);                                                    \
    } while (0)

/* Path of a file under the shared fixtures (static buffer rotation: valid
 * for a few calls). $GEPARD_FIXTURES overrides ../shared/fixtures. */
const char *test_fixture(const char *relative);
/* A fresh temporary directory for this test (removed by the runner). */
const char *test_tmpdir(void);
/* Path inside the test's temporary directory (rotating static buffers). */
const char *test_tmp(const char *name);
/* Path inside a directory every test of this run shares (removed at the end
 * of the run): for expensive inputs that tests only read, such as the
 * synthetic real-size checkpoint. Tests run one at a time. */
const char *test_shared_tmp(const char *name);
/* Write bytes to a file; returns 0 on success. */
int test_write_file(const char *path, const void *data, size_t len);

typedef struct test_cmd_result {
    int status; /* exit code, or 128+signal */
    char *out;  /* captured stdout (NUL-terminated, may contain NULs) */
    size_t out_len;
    char *err; /* captured stderr */
    size_t err_len;
} test_cmd_result;

/* Run $GEPARD_BIN with the NULL-terminated argv (argv[0] excluded), feeding
 * `input` (may be NULL) on stdin. Times out after `timeout_s` seconds. */
int test_run_gepard(test_cmd_result *res, const char *input, size_t input_len, int timeout_s,
                    const char *const *args);
/* Run an arbitrary program (argv[0] is the path or name in PATH). */
int test_run_program(test_cmd_result *res, const char *input, size_t input_len, int timeout_s,
                     const char *const *argv);
void test_cmd_result_free(test_cmd_result *res);

/* max |a-b| / max |b| over n values (relative to the reference b). */
double test_rel_error(const float *a, const float *b, size_t n);
double test_max_abs_diff(const float *a, const float *b, size_t n);

#endif
