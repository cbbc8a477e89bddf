/* timing.h — monotonic clock and peak-memory readings for progress and bench. */
#ifndef GP_BASE_TIMING_H
#define GP_BASE_TIMING_H

#include <stdint.h>

/* Nanoseconds from an arbitrary fixed point (CLOCK_MONOTONIC). */
uint64_t gp_now_ns(void);
/* Seconds as a double, same clock. */
double gp_now_s(void);
/* Peak resident set size of this process in bytes (0 if unknown). */
uint64_t gp_peak_rss_bytes(void);
/* Current resident set size in bytes (0 if unknown). */
uint64_t gp_current_rss_bytes(void);
/* User plus system CPU time this process has used, in seconds (0 if unknown). */
double gp_process_cpu_seconds(void);

#endif
