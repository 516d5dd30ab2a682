/* bench.h: what every benchmark program times and reports with (header only: each
 * bench_*.c is a program of its own). */
#ifndef VITLENS_BENCH_H
#define VITLENS_BENCH_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* Milliseconds on `clock`: CLOCK_MONOTONIC for wall time, CLOCK_PROCESS_CPUTIME_ID for the CPU
 * time of all the process's threads (on a busy machine the wall time of a 1-thread run swells
 * with its waits, the CPU time does not). */
static inline double now_ms(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static inline int bench_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* v[0 .. n) in ascending order: v[0] the fastest run, v[n / 2] the median (the upper one for
 * an even n), v[n - 1] the slowest. */
static inline void bench_sort(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
}

/* One stage's line, as bench/compare.py and the scripts read it:
 * "stage NAME median_ms M min_ms M max_ms M iters N". Sorts ms [n]. */
static inline void report_stage(const char *stage, double *ms, int n) {
    bench_sort(ms, n);
    printf("stage %-10s median_ms %9.3f min_ms %9.3f max_ms %9.3f iters %d\n", stage, ms[n / 2],
           ms[0], ms[n - 1], n);
}

#endif
