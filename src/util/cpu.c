/* CPU feature detection for run-time kernel dispatch. The build baseline is x86-64-v3;
 * AVX-512 kernels are used only when CPUID says the CPU has them, XGETBV says the OS
 * saves the ZMM state, and LCX_NO_AVX512 is not set (valgrind cannot run AVX-512).
 * Also a scheduling hint for threads whose latency matters (lcx__thread_short_slice). */
#include "util/util.h"
#include <cpuid.h>
#include <pthread.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

static lcx_cpu_features g_cpu;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static uint64_t xgetbv0(void)
{
    uint32_t eax, edx;
    __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
    return ((uint64_t)edx << 32) | eax;
}

static void detect(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return;
    bool osxsave = c & (1u << 27);
    g_cpu.fma = c & (1u << 12);
    g_cpu.f16c = c & (1u << 29);
    uint64_t xcr0 = osxsave ? xgetbv0() : 0;
    bool ymm = (xcr0 & 0x6) == 0x6, zmm = (xcr0 & 0xe6) == 0xe6;
    if (__get_cpuid_max(0, NULL) < 7) return;
    __cpuid_count(7, 0, a, b, c, d);
    g_cpu.avx2 = ymm && (b & (1u << 5));
    if (!g_cpu.avx2) g_cpu.fma = g_cpu.f16c = false;
    const char *off = getenv("LCX_NO_AVX512");
    if (!zmm || (off && *off && *off != '0')) return;
    g_cpu.avx512f = b & (1u << 16);
    g_cpu.avx512dq = b & (1u << 17);
    g_cpu.avx512bw = b & (1u << 30);
    g_cpu.avx512vl = b & (1u << 31);
    g_cpu.avx512vnni = c & (1u << 11);
}

const lcx_cpu_features *lcx__cpu(void)
{
    pthread_once(&g_once, detect);
    return &g_cpu;
}

bool lcx__cpu_has_avx512(void)
{
    const lcx_cpu_features *f = lcx__cpu();
    return f->avx512f && f->avx512bw && f->avx512vl && f->avx512dq;
}

/* Linux ≥ 6.12 (EEVDF) takes sched_runtime of a SCHED_OTHER thread as its time slice: a
 * short slice gives the thread an early deadline, so when it wakes it runs at once instead
 * of waiting for a busy thread's slice (~3 ms) to end. Unprivileged (nice is untouched).
 * Why: the ingest log thread sleeps in fdatasync while the embedding workers keep both
 * cores busy; each wake-up inside the fsync (pages written, inode, cache flush) waited for a
 * slice, and the fsync took ~9 ms instead of ~3 ms per 1 MB record. Older kernels ignore
 * the field for SCHED_OTHER. */
void lcx__thread_short_slice(void)
{
    struct {   /* the kernel's struct sched_attr (<linux/sched/types.h> clashes with glibc's sched.h) */
        uint32_t size, sched_policy;
        uint64_t sched_flags;
        int32_t sched_nice;
        uint32_t sched_priority;
        uint64_t sched_runtime, sched_deadline, sched_period;
        uint32_t sched_util_min, sched_util_max;
    } a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.sched_policy = 0;               /* SCHED_OTHER, at the thread's own nice value */
    errno = 0;
    int nice = getpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid));
    if (errno) return;
    a.sched_nice = nice;
    a.sched_runtime = 100 * 1000;     /* 0.1 ms: the kernel's minimum */
    (void)syscall(SYS_sched_setattr, 0, &a, 0);   /* a hint: failure changes nothing */
}
