/* timing.c — monotonic clock and RSS readings (see timing.h). */
#include "base/timing.h"

#include <stdio.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

uint64_t gp_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

double gp_now_s(void) { return (double)gp_now_ns() * 1e-9; }

uint64_t gp_peak_rss_bytes(void) {
    struct rusage usage;
    if (getrusage(RUSAGE_SELF, &usage) != 0) return 0;
    return (uint64_t)usage.ru_maxrss * 1024ull; /* Linux reports KiB */
}

double gp_process_cpu_seconds(void) {
    struct rusage u;
    if (getrusage(RUSAGE_SELF, &u) != 0) return 0;
    return (double)u.ru_utime.tv_sec + u.ru_utime.tv_usec / 1e6 + (double)u.ru_stime.tv_sec +
           u.ru_stime.tv_usec / 1e6;
}

uint64_t gp_current_rss_bytes(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return 0;
    unsigned long pages_total = 0, pages_resident = 0;
    int n = fscanf(f, "%lu %lu", &pages_total, &pages_resident);
    fclose(f);
    if (n != 2) return 0;
    return (uint64_t)pages_resident * (uint64_t)sysconf(_SC_PAGESIZE);
}
