/* Memory for big arrays in transparent huge pages. With 4 KiB pages, filling fresh memory
 * costs one page fault (fault entry, memcg charge, LRU insert, clear) per 4 KiB, and
 * streaming it costs a TLB walk per 4 KiB with the hardware prefetchers stopping at every
 * page boundary; a 2 MiB page removes both. The advice works when THP is in "always" or
 * "madvise" mode (Debian's default is madvise); otherwise it is plain memory. */
#define _GNU_SOURCE /* mremap */
#include "util/util.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

void *lcx__alloc_huge(size_t n)
{
    if (n > SIZE_MAX - LCX_HUGE_PAGE) return NULL;
    size_t tot = (n + LCX_HUGE_PAGE - 1) & ~(size_t)(LCX_HUGE_PAGE - 1);
    void *p = aligned_alloc(LCX_HUGE_PAGE, tot ? tot : LCX_HUGE_PAGE);
    if (p) (void)madvise(p, tot ? tot : LCX_HUGE_PAGE, MADV_HUGEPAGE);   /* advice only: failure is harmless */
    return p;
}

void lcx__advise_huge(void *p, size_t n)
{
    if (n < LCX_HUGE_MIN) return;
    uintptr_t a = ((uintptr_t)p + LCX_HUGE_PAGE - 1) & ~(uintptr_t)(LCX_HUGE_PAGE - 1);
    uintptr_t e = ((uintptr_t)p + n) & ~(uintptr_t)(LCX_HUGE_PAGE - 1);
    if (e > a) (void)madvise((void *)a, e - a, MADV_HUGEPAGE);   /* advice only */
}

static size_t huge_round(size_t n) { return (n + LCX_HUGE_PAGE - 1) & ~(size_t)(LCX_HUGE_PAGE - 1); }

/* tot bytes (a multiple of 2 MiB) of fresh zero memory at a 2 MiB boundary: one mapping of
 * tot + 2 MiB with the unaligned head and tail unmapped (THP maps only aligned 2 MiB). */
static void *map_aligned(size_t tot)
{
    char *m = mmap(NULL, tot + LCX_HUGE_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return NULL;
    char *a = (char *)(((uintptr_t)m + LCX_HUGE_PAGE - 1) & ~(uintptr_t)(LCX_HUGE_PAGE - 1));
    if (a > m) munmap(m, (size_t)(a - m));
    if (m + tot + LCX_HUGE_PAGE > a + tot) munmap(a + tot, (size_t)(m + tot + LCX_HUGE_PAGE - (a + tot)));
    (void)madvise(a, tot, MADV_HUGEPAGE);   /* advice only */
    return a;
}

void *lcx__big_realloc(void *p, size_t old_n, size_t n)
{
    if (!p) old_n = 0;
    if (n > SIZE_MAX / 2) return NULL;
    const int was_big = old_n >= LCX_HUGE_MIN, big = n >= LCX_HUGE_MIN;
    char *r;
    size_t fresh = n;   /* bytes [fresh, n) of r are pages nobody wrote: zero already */
    if (!was_big && !big) {
        if (!(r = realloc(p, n ? n : 1))) return NULL;
    } else if (was_big && big) {
        const size_t ot = huge_round(old_n), nt = huge_round(n);
        r = p;
        if (nt != ot) {
            /* the new place is reserved aligned first, then the old pages move onto it */
            void *q = map_aligned(nt);
            if (!q) return NULL;
            void *m = nt > ot ? mremap(p, ot, nt, MREMAP_MAYMOVE | MREMAP_FIXED, q) : MAP_FAILED;
            if (m != MAP_FAILED) {
                (void)madvise(m, nt, MADV_HUGEPAGE);
                r = m;
                fresh = ot;
            } else {   /* shrinking, or mremap refused: copy */
                memcpy(q, p, nt < ot ? nt : ot);
                munmap(p, ot);
                r = q;
                fresh = ot;
            }
        }
    } else {   /* crossing the threshold: copy once */
        if (!(r = big ? map_aligned(huge_round(n)) : malloc(n ? n : 1))) return NULL;
        if (p) memcpy(r, p, old_n < n ? old_n : n);
        lcx__big_free(p, old_n);
        if (big) fresh = old_n;
    }
    if (n > old_n) memset(r + old_n, 0, (fresh < n ? fresh : n) - old_n);
    return r;
}

void lcx__big_free(void *p, size_t n)
{
    if (!p) return;
    if (n >= LCX_HUGE_MIN) munmap(p, huge_round(n));
    else free(p);
}
