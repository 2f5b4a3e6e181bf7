/* CPU feature detection for run-time kernel dispatch. The build baseline is x86-64-v3;
 * AVX-512 kernels are used only when CPUID says the CPU has them, XGETBV says the OS
 * saves the ZMM state, and LCX_NO_AVX512 is not set (valgrind cannot run AVX-512). */
#include "util/util.h"
#include <cpuid.h>
#include <pthread.h>
#include <stdlib.h>

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

const lcx_cpu_features *lcx_cpu(void)
{
    pthread_once(&g_once, detect);
    return &g_cpu;
}

bool lcx_cpu_has_avx512(void)
{
    const lcx_cpu_features *f = lcx_cpu();
    return f->avx512f && f->avx512bw && f->avx512vl && f->avx512dq;
}
