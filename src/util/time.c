#include "util/util.h"
#include <time.h>

uint64_t lcx__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

double lcx__now_ms(void) { return (double)lcx__now_ns() / 1e6; }
