/* admission.h — real-time admission for the engine (issue 12): how many
 * streams the step thread may hold at once so that every admitted stream
 * still gets its next frame within a frame's duration of audio.
 *
 * The engine measures each cycle (one batched step plus the delivery of its
 * audio) with the number of streams it stepped; a queued request is admitted
 * only while the projected cycle with it stays under `margin` × the frame
 * duration. Admitting more would slow every listener below real time — the
 * new request waits in the queue instead (its time to first audio grows; no
 * running stream stutters).
 *
 * A cycle costs a fixed part (launches, weight reads: nearly all of it for a
 * GPU's small batches) plus a part per stream. The projection for m streams
 * is the measured cycle at m when there is one, else the largest measured
 * batch n < m extended along the secant from a measured batch at most n / 2
 * (the marginal cost per stream; with n the only measurement, the cycle at n
 * scaled by m / n, i.e. no fixed part). Capacity never runs past twice the
 * largest batch measured: the batch doubles at most once per measurement, so
 * a cost that turns steeper than the secant says is seen before it can hurt
 * many listeners.
 *
 * A server's warm-up measures every batch size before anyone listens, but its
 * cycles are cheaper than service's (its audio goes nowhere, its contexts are
 * short), so a burst admitted on them all at once ran near the frame period.
 * After gp_admission_begin_service those figures are provisional: a size's
 * first cycle in service replaces its figure, the ratio of the two (smoothed)
 * scales the provisional figures still in use, and gp_admission_admit_limit
 * lets the active streams grow by at most a quarter (or
 * GP_ADMISSION_GROW_MIN) per cycle, so each size is measured in service
 * before the capacity moves past it. */
#ifndef GP_ENGINE_ADMISSION_H
#define GP_ENGINE_ADMISSION_H

#include <stdbool.h>

typedef struct gp_admission {
    int max_streams;
    double budget_s;       /* cycle time allowed; 0 = no real-time limit */
    double *cycle_by_n;    /* [max_streams + 1] smoothed cycle seconds with n streams; 0 = unseen */
    int *measured_upto;    /* [max_streams + 1] scratch: largest measured n ≤ k (0: none) */
    bool *provisional;     /* [max_streams + 1] figure from before the service began */
    double service_factor; /* service's cycles over the provisional figures (smoothed) */
} gp_admission;

/* The fewest new streams a cycle may admit (gp_admission_admit_limit). */
#define GP_ADMISSION_GROW_MIN 16

/* margin ≤ 0 turns the limit off (admit up to max_streams). 0 or an error
 * code from gepard.h (out of memory). */
int gp_admission_init(gp_admission *a, int max_streams, double margin, double frame_seconds);
void gp_admission_free(gp_admission *a);
/* One cycle that stepped n streams took `seconds`. */
void gp_admission_record(gp_admission *a, int n, double seconds);
/* Projected cycle seconds with m streams; 0 when nothing measured yet. */
double gp_admission_projected(const gp_admission *a, int m);
/* How many streams may be active now, `active` of them already: at least
 * `active` (running streams are never dropped) and at least 1. */
int gp_admission_capacity(gp_admission *a, int active);
/* The figures measured so far become provisional (after a warm-up). */
void gp_admission_begin_service(gp_admission *a);
/* The capacity, growing by at most max(GP_ADMISSION_GROW_MIN, active / 4)
 * streams over `active` in one cycle; without a real-time limit (budget 0)
 * the capacity itself, max_streams. */
int gp_admission_admit_limit(gp_admission *a, int active);

#endif
