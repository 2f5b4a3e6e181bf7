/* Internal helpers shared by every subsystem (not part of the public contract).
 * Everything here returns LCX_E* codes on failure and never exits. */
#ifndef LCX_UTIL_H
#define LCX_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include "longctx/lcx_err.h"
#include "longctx/lcx_limits.h"

/* ---- errors (err.c): returns LCX_EIO (LCX_ENOSPC for ENOSPC/EDQUOT) after keeping errnum (the failed call's errno, 0 for
 * none) as this thread's lcx_last_errno (lcx_err.h). Capture errno before close()/free()
 * may change it: `int e = errno; close(fd); return lcx__eio(e);`. */
int lcx__eio(int errnum);

/* ---- CPU features (cpu.c). Detected once; LCX_NO_AVX512=1 in the environment forces
 * the AVX2 paths (valgrind 3.19 cannot execute AVX-512). */
typedef struct {
    bool avx2, fma, f16c;
    bool avx512f, avx512bw, avx512vl, avx512dq, avx512vnni;
} lcx_cpu_features;
const lcx_cpu_features *lcx__cpu(void);
/* true when the AVX-512 F+BW+VL+DQ kernels may run (hardware + OS + not disabled). */
bool lcx__cpu_has_avx512(void);
/* Asks the kernel for a short time slice for the calling thread (cpu.c): with every core
 * busy, it then runs as soon as it wakes or becomes runnable (same CPU share). For side
 * threads that the others wait for: an fsync, a publish. */
void lcx__thread_short_slice(void);

/* ---- time (time.c) */
uint64_t lcx__now_ns(void);              /* CLOCK_MONOTONIC */
double   lcx__now_ms(void);

/* ---- growable byte buffer with a hard cap (buf.c). cap 0 = unlimited.
 * Errors are sticky: the first failed write (LCX_ELIMIT over the cap, LCX_ENOMEM, a bad
 * printf format) is kept in err until lcx__buf_truncate/_free/_steal, so a writer of many
 * pieces may ignore the return codes of the pieces and check b->err once at the end (a
 * reply with err set must not be sent: some piece of it is missing). Later writes still
 * run and may succeed; only err tells whether the bytes are whole. */
typedef struct {
    char  *data;   /* always NUL-terminated when non-NULL */
    size_t len;
    size_t alloc;
    size_t cap;    /* LCX_ELIMIT when len would exceed it */
    int    err;    /* first LCX_E* error of a write since the last truncate/free, 0 = none */
} lcx_buf;
int  lcx__buf_append(lcx_buf *b, const void *p, size_t n);
int  lcx__buf_puts(lcx_buf *b, const char *s);
int  lcx__buf_printf(lcx_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends s as a JSON string literal (quotes included, control chars escaped). */
int  lcx__buf_json_str(lcx_buf *b, const char *s, size_t n);
/* Appends a number with the fewest digits that parse back to exactly v (integers
 * without a fraction), "null" for NaN/inf. _f32 does the same for a float (0.4f → 0.4). */
int  lcx__buf_json_num(lcx_buf *b, double v);
int  lcx__buf_json_f32(lcx_buf *b, float v);
/* Test hook: the printf/strtof reference implementation of lcx__buf_json_f32 (same bytes). */
int  lcx__buf_json_f32_ref(lcx_buf *b, float v);
/* Appends v in decimal, exactly as "%lld" (no printf). */
int  lcx__buf_int(lcx_buf *b, long long v);
/* Best-effort pre-size for extra more bytes (clamped to the cap): one allocation instead of
 * a series of doublings. A failure is not an error (the appends grow or fail themselves). */
void lcx__buf_grow(lcx_buf *b, size_t extra);
/* Cuts b back to len bytes (no-op when len >= b->len) and clears err: the writer has
 * rolled back to a point where the bytes are whole again. */
void lcx__buf_truncate(lcx_buf *b, size_t len);
/* Test hook: from the nth buffer allocation from now on (any thread), count allocations
 * fail with LCX_ENOMEM (count 1: one failure; LONG_MAX: every one after it); n 0 turns it
 * off. _pending: the allocations still to go before the first failure (0 = fired or off). */
void lcx__buf_fail_nth(long n, long count);
long lcx__buf_fail_pending(void);
void lcx__buf_free(lcx_buf *b);
/* Hands the bytes to the caller (free() them) and resets b. */
char *lcx__buf_steal(lcx_buf *b, size_t *len);

/* SWAR filter over 8 bytes for JSON strings (hot: every text byte of a request and a reply
 * passes here): non-zero when some byte may be '"', '\\', a control character (< 0x20) or,
 * with high, non-ASCII (>= 0x80). The "has zero byte" trick never misses a match (it may
 * flag a clean byte above a real match, which only sends that word to the byte loop). */
static inline uint64_t lcx__swar_load(const char *p)
{
    uint64_t x;
    __builtin_memcpy(&x, p, 8);
    return x;
}
static inline uint64_t lcx__swar_json_special(uint64_t x, bool high)
{
    const uint64_t ones = 0x0101010101010101ull, hi = 0x8080808080808080ull;
    uint64_t q = x ^ (ones * '"'), b = x ^ (ones * '\\');
    uint64_t m = ((q - ones) & ~q) | ((b - ones) & ~b) | ((x - ones * 0x20) & ~x);
    return (m | (high ? x : 0)) & hi;
}

/* ---- files (fsio.c) */
/* Reads a whole file (NUL-terminated). max = 0 means no limit; larger → LCX_ELIMIT. */
int lcx__read_file(const char *path, size_t max, char **out, size_t *out_len);
/* Crash-safe replace: write to PATH.tmp, fsync, rename over PATH, fsync the directory. */
int lcx__write_file_atomic(const char *path, const void *data, size_t len);
/* "dir/name", malloc'd (NULL on OOM). */
char *lcx__path_join(const char *dir, const char *name);
/* mkdir -p with mode 0700 for new directories. */
int lcx__mkdirs(const char *path);
/* fsync a directory (after create/rename inside it). */
int lcx__fsync_dir(const char *dir);
/* fdatasync(fd), timed: when an observer is set (longctx-svc's store fsync histogram,
 * process-wide) it gets the call's duration in ns. The store's durable commits use it. */
int lcx__fdatasync(int fd);
void lcx__fsync_set_observer(void (*fn)(uint64_t ns));
/* This boot's id (the kernel's random per-boot UUID, /proc/sys/kernel/random/boot_id) as
 * 16 bytes. Page-cache data written without fsync is on disk or still in the cache for as
 * long as the boot id is unchanged (losing it takes a crash, i.e. a reboot). LCX_EIO when
 * unavailable (callers then fall back to fsync). */
int lcx__boot_id(uint8_t id[16]);

/* ---- memory (mem.c) */
/* Big arrays in 2 MiB transparent huge pages. lcx__alloc_huge: n bytes (rounded up
 * to 2 MiB), 2 MiB aligned, advised MADV_HUGEPAGE; release with free(); NULL on failure.
 * lcx__advise_huge: advises the whole 2 MiB pages inside [p, p+n) when n ≥ LCX_HUGE_MIN
 * (smaller arrays would pay up to 2 MiB of RSS for little gain). Advice only, never fails. */
#define LCX_HUGE_PAGE (2u << 20)
#define LCX_HUGE_MIN (4u << 20)
void *lcx__alloc_huge(size_t n);
void  lcx__advise_huge(void *p, size_t n);
/* Growable big arrays: realloc below LCX_HUGE_MIN; from it on, a private anonymous mapping,
 * 2 MiB aligned and advised MADV_HUGEPAGE, grown with mremap (the pages move, nothing is
 * copied: doubling a 32 MiB row array was a 16 MiB copy plus faults on the ingest path).
 * lcx__big_realloc(p, old_n, n): old_n = the n p was last (re)allocated with (0 for NULL);
 * contents as realloc, and bytes [old_n, n) are zero (big blocks get them as fresh pages,
 * nothing is written there); NULL on failure with p untouched. Release with lcx__big_free(p, n),
 * n as last passed; NULL is a no-op. Never mix with malloc/free. */
void *lcx__big_realloc(void *p, size_t old_n, size_t n);
void  lcx__big_free(void *p, size_t n);

/* ---- checksums and hashes (hash.c) */
uint32_t lcx__crc32c(uint32_t crc, const void *p, size_t n);   /* Castagnoli; start with 0 */
uint64_t lcx__hash64(const void *p, size_t n, uint64_t seed);  /* fast non-crypto hash */
void     lcx__sha256(const void *p, size_t n, uint8_t out[32]);
/* First 2*nbytes lowercase hex chars of sha256(p) into out (NUL-terminated). */
void     lcx__sha256_hex(const void *p, size_t n, char *out, size_t nbytes);

/* ---- UTF-8 (utf8.c) */
/* true when [p, p+n) is well-formed UTF-8 (no overlongs, surrogates or > U+10FFFF). */
bool lcx__utf8_valid(const char *p, size_t n);
/* Number of Unicode characters (code points) in valid UTF-8. */
size_t lcx__utf8_chars(const char *s, size_t n);
/* Longest prefix of s[0..n) of at most cap bytes that does not split a character: the one
 * home of "cut text to a byte budget" (n itself when n <= cap). */
size_t lcx__utf8_cut(const char *s, size_t n, size_t cap);

/* ---- Tier-3 rescue rules (rescue_rules.c; SPEC §2), shared by liblongctx and libtriatt.
 * The rescue system message: LCX_RESCUE_HEADER, then one
 * "\n--- evicted span (tokens a..b, layer l) ---\ntext\n" block per span while the total
 * stays <= max_chars Unicode characters; it stops at the first block that would overflow
 * and is empty (nothing written) when no block fits. Build it with _begin, then _add per
 * span in rank order: 1 = written, 0 = did not fit (every later add returns 0 too),
 * negative LCX_E* = buffer error (out is rolled back to where _begin found it). t.n is the
 * number of blocks written. */
#define LCX_RESCUE_MAX_CHARS 8000   /* the default cap (SPEC §2) */
#define LCX_RESCUE_HEADER \
    "[Recovered context from earlier in this session (evicted from KV cache, restored via longctx)]:\n"
typedef struct {
    lcx_buf *out;
    size_t start, chars, max_chars;
    int n;
    bool full;
} lcx__rescue_text;
void lcx__rescue_text_begin(lcx__rescue_text *t, lcx_buf *out, size_t max_chars);
int lcx__rescue_text_add(lcx__rescue_text *t, const char *text, size_t len, int64_t tok_start, int64_t tok_end,
                         int32_t layer);
/* THE session-id rule (SPEC §2) of every route and of libtriatt's client:
 * 1..LCX_SESSION_ID_MAX bytes of UTF-8 without control characters. n is the length the
 * client sent (a NUL inside it, from %00 in a query string or a header, is a control
 * character and fails). */
bool lcx__session_id_ok(const char *id, size_t n);
/* The rescue query signal: [*off, *off + *qlen) of msg is what to search with (the text
 * after the last "question:" marker, else the last question sentence near the end, else the
 * last 512 bytes; rescue_rules.c says why). Public as lcx_rescue_query (lcx.h). */
void lcx__rescue_query(const char *msg, size_t len, size_t *off, size_t *qlen);

#define LCX_MIN(a, b) ((a) < (b) ? (a) : (b))
#define LCX_MAX(a, b) ((a) > (b) ? (a) : (b))
#define LCX_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#endif
