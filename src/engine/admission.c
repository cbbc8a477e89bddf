/* admission.c — the engine's real-time admission limit (admission.h). */
#include "engine/admission.h"

#include <stdlib.h>

#include "gepard.h"

#define ADMISSION_SMOOTHING 0.25 /* weight of the newest cycle */

int gp_admission_init(gp_admission *a, int max_streams, double margin, double frame_seconds) {
    a->max_streams = max_streams;
    a->budget_s = margin > 0 && frame_seconds > 0 ? margin * frame_seconds : 0;
    a->cycle_by_n = calloc((size_t)max_streams + 1, sizeof *a->cycle_by_n);
    return a->cycle_by_n ? 0 : GEPARD_ERR_NOMEM;
}

void gp_admission_free(gp_admission *a) {
    free(a->cycle_by_n);
    a->cycle_by_n = NULL;
}

void gp_admission_record(gp_admission *a, int n, double seconds) {
    if (n < 1 || n > a->max_streams || !(seconds > 0)) return;
    /* A cycle more than twice the projection counts as twice it: the first
     * cycle at a new batch size can carry one-off work (a GPU captures the
     * size's CUDA graph, 100 ms and more) that would otherwise stall
     * admission until the average forgets it; a machine that really got
     * slower still doubles the estimate every cycle. */
    const double projected = gp_admission_projected(a, n);
    if (projected > 0 && seconds > 2 * projected) seconds = 2 * projected;
    double *c = &a->cycle_by_n[n];
    *c = *c > 0 ? *c + ADMISSION_SMOOTHING * (seconds - *c) : seconds;
}

/* The projection for m streams given the largest measured n < m ("below",
 * 0 if none): the smaller of the measured cycle at m and the one at n scaled
 * by m / n. The scaled figure over-estimates (a batch costs less than
 * proportionally), so the minimum stays safe, and a figure at m measured long
 * ago during a burst of prefills does not block admission forever. */
static double project(const gp_admission *a, int m, int below) {
    const double scaled = below ? a->cycle_by_n[below] * m / below : 0;
    const double seen = a->cycle_by_n[m];
    if (seen > 0 && (scaled <= 0 || seen < scaled)) return seen;
    return scaled;
}

double gp_admission_projected(const gp_admission *a, int m) {
    if (m < 1) return 0;
    if (m > a->max_streams) m = a->max_streams;
    int below = 0;
    for (int n = m - 1; n >= 1 && !below; n--)
        if (a->cycle_by_n[n] > 0) below = n;
    return project(a, m, below);
}

int gp_admission_capacity(const gp_admission *a, int active) {
    if (a->budget_s <= 0) return a->max_streams;
    int cap = active > 1 ? active : 1;
    if (cap >= a->max_streams) return a->max_streams;
    int below = 0;
    for (int n = 1; n <= cap; n++)
        if (a->cycle_by_n[n] > 0) below = n;
    /* Nothing measured yet: one stream at a time until a cycle is seen. */
    while (cap < a->max_streams) {
        const int m = cap + 1;
        const double t = project(a, m, below);
        if (a->cycle_by_n[m] > 0) below = m;
        if (t <= 0 || t > a->budget_s) break;
        cap = m;
    }
    return cap;
}
