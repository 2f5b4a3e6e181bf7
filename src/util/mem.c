/* Memory for big arrays in transparent huge pages. With 4 KiB pages, filling fresh memory
 * costs one page fault (fault entry, memcg charge, LRU insert, clear) per 4 KiB, and
 * streaming it costs a TLB walk per 4 KiB with the hardware prefetchers stopping at every
 * page boundary; a 2 MiB page removes both. The advice works when THP is in "always" or
 * "madvise" mode (Debian's default is madvise); otherwise it is plain memory. */
#include "util/util.h"
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

void *lcx_alloc_huge(size_t n)
{
    if (n > SIZE_MAX - LCX_HUGE_PAGE) return NULL;
    size_t tot = (n + LCX_HUGE_PAGE - 1) & ~(size_t)(LCX_HUGE_PAGE - 1);
    void *p = aligned_alloc(LCX_HUGE_PAGE, tot ? tot : LCX_HUGE_PAGE);
    if (p) (void)madvise(p, tot ? tot : LCX_HUGE_PAGE, MADV_HUGEPAGE);   /* advice only: failure is harmless */
    return p;
}

void lcx_advise_huge(void *p, size_t n)
{
    if (n < LCX_HUGE_MIN) return;
    uintptr_t a = ((uintptr_t)p + LCX_HUGE_PAGE - 1) & ~(uintptr_t)(LCX_HUGE_PAGE - 1);
    uintptr_t e = ((uintptr_t)p + n) & ~(uintptr_t)(LCX_HUGE_PAGE - 1);
    if (e > a) (void)madvise((void *)a, e - a, MADV_HUGEPAGE);   /* advice only */
}
