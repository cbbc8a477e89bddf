/* admission.c — the engine's real-time admission limit (admission.h). */
#include "engine/admission.h"

#include <stdlib.h>

#include "gepard.h"

#define ADMISSION_SMOOTHING 0.25 /* weight of the newest cycle */
/* The service factor: weight of each size's first cycle in service, and its
 * bounds (one odd cycle does not halve or quadruple the rest). */
#define ADMISSION_FACTOR_SMOOTHING 0.5
#define ADMISSION_FACTOR_MIN 0.5
#define ADMISSION_FACTOR_MAX 4.0

int gp_admission_init(gp_admission *a, int max_streams, double margin, double frame_seconds) {
    a->max_streams = max_streams;
    a->budget_s = margin > 0 && frame_seconds > 0 ? margin * frame_seconds : 0;
    a->cycle_by_n = calloc((size_t)max_streams + 1, sizeof *a->cycle_by_n);
    a->measured_upto = calloc((size_t)max_streams + 1, sizeof *a->measured_upto);
    a->provisional = calloc((size_t)max_streams + 1, sizeof *a->provisional);
    a->service_factor = 1.0;
    return a->cycle_by_n && a->measured_upto && a->provisional ? 0 : GEPARD_ERR_NOMEM;
}

void gp_admission_free(gp_admission *a) {
    free(a->cycle_by_n);
    free(a->measured_upto);
    free(a->provisional);
    a->cycle_by_n = NULL;
    a->measured_upto = NULL;
    a->provisional = NULL;
}

/* The figure for k streams: a provisional one scaled by the service factor. */
static double figure(const gp_admission *a, int k) {
    const double c = a->cycle_by_n[k];
    return a->provisional[k] ? c * a->service_factor : c;
}

void gp_admission_begin_service(gp_admission *a) {
    for (int k = 1; k <= a->max_streams; k++) a->provisional[k] = a->cycle_by_n[k] > 0;
    a->service_factor = 1.0;
}

/* The largest measured batch at most k (0: none), by a scan down. */
static int measured_at_most(const gp_admission *a, int k) {
    for (; k >= 1; k--)
        if (a->cycle_by_n[k] > 0) return k;
    return 0;
}

/* The projection for m streams from `below`, the largest measured batch
 * under m, and `lower`, the largest measured batch at most below / 2 (else
 * under below; 0: none): the smaller of the measured cycle at m and below's
 * cycle extended along the secant. A figure at m measured long ago during a
 * burst of prefills does not block admission forever. */
static double project(const gp_admission *a, int m, int below, int lower) {
    double extended = 0;
    if (below) {
        const double at = figure(a, below);
        double slope = at / below; /* one measurement: proportional */
        if (lower) {
            slope = (at - figure(a, lower)) / (below - lower);
            if (slope < 0) slope = 0;
        }
        extended = at + slope * (m - below);
    }
    const double seen = figure(a, m);
    if (seen > 0 && (extended <= 0 || seen < extended)) return seen;
    return extended;
}

static int lower_of(const gp_admission *a, int below) {
    if (!below) return 0;
    const int half = measured_at_most(a, below / 2);
    return half ? half : measured_at_most(a, below - 1);
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
    if (a->provisional[n]) {
        /* the size's first cycle in service replaces the warm-up's figure and
         * teaches the factor for the sizes not yet seen in service */
        double ratio = seconds / *c;
        if (ratio < ADMISSION_FACTOR_MIN) ratio = ADMISSION_FACTOR_MIN;
        if (ratio > ADMISSION_FACTOR_MAX) ratio = ADMISSION_FACTOR_MAX;
        a->service_factor += ADMISSION_FACTOR_SMOOTHING * (ratio - a->service_factor);
        a->provisional[n] = false;
        *c = seconds;
        return;
    }
    *c = *c > 0 ? *c + ADMISSION_SMOOTHING * (seconds - *c) : seconds;
}

double gp_admission_projected(const gp_admission *a, int m) {
    if (m < 1) return 0;
    if (m > a->max_streams) m = a->max_streams;
    const int below = measured_at_most(a, m - 1);
    return project(a, m, below, lower_of(a, below));
}

int gp_admission_capacity(gp_admission *a, int active) {
    if (a->budget_s <= 0) return a->max_streams;
    int cap = active > 1 ? active : 1;
    if (cap >= a->max_streams) return a->max_streams;
    int *upto = a->measured_upto;
    upto[0] = 0;
    for (int k = 1; k <= a->max_streams; k++) upto[k] = a->cycle_by_n[k] > 0 ? k : upto[k - 1];
    /* Nothing measured yet: one stream at a time until a cycle is seen. */
    while (cap < a->max_streams) {
        const int m = cap + 1;
        const int below = upto[m - 1];
        if (!below || m > 2 * below) break;
        const int lower = upto[below / 2] ? upto[below / 2] : upto[below - 1];
        const double t = project(a, m, below, lower);
        if (t <= 0 || t > a->budget_s) break;
        cap = m;
    }
    return cap;
}

int gp_admission_admit_limit(gp_admission *a, int active) {
    const int cap = gp_admission_capacity(a, active);
    if (a->budget_s <= 0) return cap; /* no real-time limit: nothing to pace for */
    const int grow = active / 4 > GP_ADMISSION_GROW_MIN ? active / 4 : GP_ADMISSION_GROW_MIN;
    return cap - active > grow ? active + grow : cap;
}
