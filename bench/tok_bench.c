/* tok_bench.c — hand-run tokenizer benchmark (`make bench-tools`, not part
 * of `make test`): load time of a tokenizer.json and encode speed on text
 * files.
 *
 *   build/release/bench/tok_bench TOKENIZER.json [--reps N] FILE...
 *
 * Loads the tokenizer N times (default 5) and prints the best and median load
 * time. For each file it encodes the whole text with a freshly loaded
 * tokenizer (cold: empty word cache) and then N more times (warm), and prints
 * the best time of each with MB/s and million tokens/s. The best of several
 * runs is what is compared before and after a change, since the machine may
 * be shared.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/timing.h"
#include "io/file.h"
#include "text/tokenizer.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int time_load(const char *path, int reps, gp_tokenizer **keep) {
    double *t = calloc((size_t)reps, sizeof *t);
    if (!t) return 1;
    gp_error err;
    for (int r = 0; r < reps; r++) {
        gp_tokenizer *tok;
        double t0 = gp_now_s();
        if (gp_tok_load(path, &tok, &err)) {
            fprintf(stderr, "tok_bench: %s\n", err.message);
            free(t);
            return 1;
        }
        t[r] = gp_now_s() - t0;
        if (r == 0)
            *keep = tok;
        else
            gp_tok_free(tok);
    }
    qsort(t, (size_t)reps, sizeof *t, cmp_double);
    printf("load %s: best %.3f s, median %.3f s (%d loads)\n", path, t[0], t[reps / 2], reps);
    free(t);
    return 0;
}

static int time_file(const char *tok_path, const char *file, int reps) {
    char *text;
    size_t len;
    gp_error err;
    if (gp_read_file(file, 0, &text, &len, &err)) {
        fprintf(stderr, "tok_bench: %s\n", err.message);
        return 1;
    }
    double cold = 1e30, warm = 1e30;
    size_t n = 0;
    int rc = 0;
    for (int r = 0; r < reps && !rc; r++) {
        gp_tokenizer *tok;
        if (gp_tok_load(tok_path, &tok, &err)) {
            rc = 1;
            break;
        }
        int32_t *ids;
        for (int pass = 0; pass < 2 && !rc; pass++) {
            double t0 = gp_now_s();
            if (gp_tok_encode(tok, text, len, &ids, &n, &err)) {
                rc = 1;
                break;
            }
            double dt = gp_now_s() - t0;
            free(ids);
            if (pass == 0 && dt < cold) cold = dt;
            if (pass == 1 && dt < warm) warm = dt;
        }
        gp_tok_free(tok);
    }
    if (rc)
        fprintf(stderr, "tok_bench: %s: %s\n", file, err.message);
    else
        printf("%s: %zu bytes -> %zu ids; cold %.3f s (%.1f MB/s, %.2f M tok/s), warm %.3f s "
               "(%.1f MB/s, %.2f M tok/s)\n",
               file, len, n, cold, len / cold / 1e6, n / cold / 1e6, warm, len / warm / 1e6,
               n / warm / 1e6);
    free(text);
    return rc;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: tok_bench TOKENIZER.json [--reps N] FILE...\n");
        return 2;
    }
    int reps = 5, first = 2;
    if (argc > 3 && strcmp(argv[2], "--reps") == 0) {
        reps = atoi(argv[3]);
        first = 4;
        if (reps < 1) reps = 1;
    }
    gp_tokenizer *tok = NULL;
    if (time_load(argv[1], reps, &tok)) return 1;
    gp_tok_free(tok);
    int rc = 0;
    for (int i = first; i < argc; i++) rc |= time_file(argv[1], argv[i], reps);
    return rc;
}
