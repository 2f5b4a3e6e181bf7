/* GGUF v2/v3 reader over mmap, with full validation before use, and a writer.
 *
 * File layout (little-endian), as read and written here:
 *   1. u32 magic "GGUF" (0x46554747), u32 version (2 or 3)
 *   2. u64 n_tensors, u64 n_kv
 *   3. n_kv times: string key, u32 value type, value
 *        string = u64 length + bytes (no NUL);  array = u32 elem type, u64 n, n elements
 *   4. n_tensors times: string name, u32 n_dims, u64 ne[n_dims], u32 ggml type, u64 offset
 *   5. padding to `general.alignment` (u32 KV, default 32), then the data section; every
 *      tensor offset is relative to it and a multiple of the alignment.
 *
 * Everything the accessors hand out has been bounds-checked here, so they never check again.
 * Why each cap exists: counts and lengths come from an untrusted file and would otherwise
 * drive allocations (n_kv, n_tensors, string-array indexes) or integer overflow (ne product). */
#define _GNU_SOURCE
#include "engine/gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/util.h"

#define GGUF_MAGIC 0x46554747u

/* ---- ggml type table (block elements, block bytes); independent of quant.h so the
 * reader can validate files with types we cannot compute with. */
static const struct { int16_t blk; int16_t bytes; } g_types[] = {
    [0] = {1, 4},      /* F32 */
    [1] = {1, 2},      /* F16 */
    [2] = {32, 18},    /* Q4_0 */
    [3] = {32, 20},    /* Q4_1 */
    [6] = {32, 22},    /* Q5_0 */
    [7] = {32, 24},    /* Q5_1 */
    [8] = {32, 34},    /* Q8_0 */
    [9] = {32, 36},    /* Q8_1 */
    [10] = {256, 84},  /* Q2_K */
    [11] = {256, 110}, /* Q3_K */
    [12] = {256, 144}, /* Q4_K */
    [13] = {256, 176}, /* Q5_K */
    [14] = {256, 210}, /* Q6_K */
    [15] = {256, 292}, /* Q8_K */
    [24] = {1, 1},     /* I8 */
    [25] = {1, 2},     /* I16 */
    [26] = {1, 4},     /* I32 */
    [27] = {1, 8},     /* I64 */
    [28] = {1, 8},     /* F64 */
    [30] = {1, 2},     /* BF16 */
};

/* Bytes of a tensor of this type and shape, 0 when the type is unknown or the row length is
 * not a multiple of the block size (used by both reader and writer). */
static size_t eng__gguf_tensor_nbytes(int type, int n_dims, const int64_t *ne)
{
    if (type < 0 || type >= (int)LCX_ARRAY_LEN(g_types) || !g_types[type].blk) return 0;
    if (n_dims < 1 || n_dims > ENG_GGUF_MAX_DIMS) return 0;
    int64_t blk = g_types[type].blk;
    if (ne[0] <= 0 || ne[0] % blk) return 0;
    /* (ne0/blk)*bytes * ne1 * ne2 * ne3 with overflow checks; cap at 2^62. */
    unsigned __int128 n = (unsigned __int128)(ne[0] / blk) * (uint64_t)g_types[type].bytes;
    for (int i = 1; i < n_dims; i++) {
        if (ne[i] <= 0) return 0;
        n *= (uint64_t)ne[i];
        if (n > ((unsigned __int128)1 << 62)) return 0;
    }
    if (n > ((unsigned __int128)1 << 62) || n > SIZE_MAX) return 0;
    return (size_t)n;
}

size_t eng__gguf_type_size(int t)
{
    switch (t) {
    case ENG_GGUF_U8: case ENG_GGUF_I8: case ENG_GGUF_BOOL: return 1;
    case ENG_GGUF_U16: case ENG_GGUF_I16: return 2;
    case ENG_GGUF_U32: case ENG_GGUF_I32: case ENG_GGUF_F32: return 4;
    case ENG_GGUF_U64: case ENG_GGUF_I64: case ENG_GGUF_F64: return 8;
    default: return 0;
    }
}

/* ---- handle */
typedef struct {
    char *key;            /* NUL-terminated copy (in g->names) */
    int type;
    size_t val_off;       /* file offset of the value (for arrays: of the elements) */
    int elem_type;        /* arrays */
    uint64_t n;           /* arrays */
    uint64_t *str_offs;   /* string arrays: file offset of each string's bytes (len at -8) */
} kv_entry;

struct eng_gguf {
    const uint8_t *base;
    size_t size;
    void *map;            /* non-NULL when we own an mmap */
    uint32_t version, alignment;
    int64_t n_kv, n_tensors;
    kv_entry *kv;
    eng_tensor *tensors;
    char *names;          /* all key and tensor-name copies, NUL-separated */
    int64_t *kv_hash;     /* open addressing, -1 empty; size hash_n */
    int64_t *t_hash;
    size_t kv_hash_n, t_hash_n;
    size_t data_off;
};

/* ---- cursor with error reporting */
typedef struct {
    const uint8_t *p;
    size_t size, off;
    char *err;
    size_t errlen;
} cur;

static int fail(cur *c, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(cur *c, int rc, const char *fmt, ...)
{
    if (c->err && c->errlen) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(c->err, c->errlen, fmt, ap);
        va_end(ap);
        if (n >= 0 && (size_t)n < c->errlen)
            snprintf(c->err + n, c->errlen - n, " (at byte %zu)", c->off);
    }
    return rc;
}

static int need(cur *c, size_t n, const char *what)
{
    if (c->size - c->off < n)
        return fail(c, LCX_ETRUNC, "gguf: file truncated while reading %s", what);
    return 0;
}
static int rd_u32(cur *c, uint32_t *v, const char *what)
{
    int rc = need(c, 4, what);
    if (rc) return rc;
    memcpy(v, c->p + c->off, 4);
    c->off += 4;
    return 0;
}
static int rd_u64(cur *c, uint64_t *v, const char *what)
{
    int rc = need(c, 8, what);
    if (rc) return rc;
    memcpy(v, c->p + c->off, 8);
    c->off += 8;
    return 0;
}
/* String: returns offset of bytes and length; checks cap and bounds. */
static int rd_str(cur *c, size_t *soff, uint64_t *slen, uint64_t cap, const char *what)
{
    uint64_t n;
    int rc = rd_u64(c, &n, what);
    if (rc) return rc;
    if (n > cap) return fail(c, LCX_ELIMIT, "gguf: %s length %llu over the cap %llu", what,
                             (unsigned long long)n, (unsigned long long)cap);
    if (c->size - c->off < n) return fail(c, LCX_ETRUNC, "gguf: file truncated inside %s", what);
    *soff = c->off;
    *slen = n;
    c->off += n;
    return 0;
}

static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;   /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return h;
}

static size_t pow2_at_least(size_t n)
{
    size_t s = 16;
    while (s < n * 2) s <<= 1;
    return s;
}

/* Inserts idx under name; returns 1 when the name was already present. */
static int hash_insert(int64_t *tab, size_t tn, const char *name, int64_t idx,
                       const char *(*name_of)(const eng_gguf *, int64_t), const eng_gguf *g)
{
    size_t m = tn - 1, h = hash_bytes(name, strlen(name)) & m;
    while (tab[h] >= 0) {
        if (!strcmp(name_of(g, tab[h]), name)) return 1;
        h = (h + 1) & m;
    }
    tab[h] = idx;
    return 0;
}
static int64_t hash_find(const int64_t *tab, size_t tn, const char *name,
                         const char *(*name_of)(const eng_gguf *, int64_t), const eng_gguf *g)
{
    if (!tab || !name) return -1;
    size_t m = tn - 1, h = hash_bytes(name, strlen(name)) & m;
    while (tab[h] >= 0) {
        if (!strcmp(name_of(g, tab[h]), name)) return tab[h];
        h = (h + 1) & m;
    }
    return -1;
}
static const char *kv_name(const eng_gguf *g, int64_t i) { return g->kv[i].key; }
static const char *t_name(const eng_gguf *g, int64_t i) { return g->tensors[i].name; }

void eng__gguf_close(eng_gguf *g)
{
    if (!g) return;
    if (g->kv)
        for (int64_t i = 0; i < g->n_kv; i++) free(g->kv[i].str_offs);
    free(g->kv);
    free(g->tensors);
    free(g->names);
    free(g->kv_hash);
    free(g->t_hash);
    if (g->map) munmap(g->map, g->size);
    free(g);
}

static int parse_value(eng_gguf *g, cur *c, kv_entry *e, const char *key)
{
    int rc;
    if (e->type == ENG_GGUF_STRING) {
        size_t so;
        uint64_t sl;
        e->val_off = c->off;
        return rd_str(c, &so, &sl, ENG_GGUF_MAX_STR, "string value");
    }
    if (e->type == ENG_GGUF_ARRAY) {
        uint32_t et;
        uint64_t n;
        if ((rc = rd_u32(c, &et, "array element type"))) return rc;
        if ((rc = rd_u64(c, &n, "array length"))) return rc;
        if (et >= ENG_GGUF_NTYPES)
            return fail(c, LCX_ECORRUPT, "gguf: key '%s': bad array element type %u", key, et);
        if (et == ENG_GGUF_ARRAY)
            return fail(c, LCX_ENOTSUP, "gguf: key '%s': nested arrays are not supported", key);
        if (n > ENG_GGUF_MAX_ARR)
            return fail(c, LCX_ELIMIT, "gguf: key '%s': array length %llu over the cap", key,
                        (unsigned long long)n);
        e->elem_type = (int)et;
        e->n = n;
        e->val_off = c->off;
        if (et == ENG_GGUF_STRING) {
            /* each string takes >= 8 bytes: bounds the index allocation by the file size */
            if (n > (c->size - c->off) / 8)
                return fail(c, LCX_ETRUNC, "gguf: key '%s': string array of %llu entries cannot fit",
                            key, (unsigned long long)n);
            e->str_offs = malloc((n ? n : 1) * sizeof *e->str_offs);
            if (!e->str_offs) return fail(c, LCX_ENOMEM, "gguf: out of memory");
            for (uint64_t i = 0; i < n; i++) {
                size_t so;
                uint64_t sl;
                if ((rc = rd_str(c, &so, &sl, ENG_GGUF_MAX_STR, "string array element"))) return rc;
                e->str_offs[i] = so;
            }
            return 0;
        }
        size_t es = eng__gguf_type_size((int)et);
        if (n > (c->size - c->off) / es)
            return fail(c, LCX_ETRUNC, "gguf: key '%s': array of %llu elements runs past the end",
                        key, (unsigned long long)n);
        if (et == ENG_GGUF_BOOL)
            for (uint64_t i = 0; i < n; i++)
                if (c->p[c->off + i] > 1)
                    return fail(c, LCX_ECORRUPT, "gguf: key '%s': bool array holds %u", key,
                                c->p[c->off + i]);
        c->off += n * es;
        return 0;
    }
    size_t es = eng__gguf_type_size(e->type);
    if ((rc = need(c, es, "scalar value"))) return rc;
    e->val_off = c->off;
    if (e->type == ENG_GGUF_BOOL && c->p[c->off] > 1)
        return fail(c, LCX_ECORRUPT, "gguf: key '%s': bool value %u", key, c->p[c->off]);
    c->off += es;
    (void)g;
    return 0;
}

static int cmp_off(const void *a, const void *b)
{
    const eng_tensor *x = *(const eng_tensor *const *)a, *y = *(const eng_tensor *const *)b;
    const uint8_t *px = x->data, *py = y->data;
    return px < py ? -1 : px > py;
}

/* Where each key's and tensor's name lies in the file (keys first, then tensors), and the
 * bytes their NUL-terminated copies need. */
typedef struct {
    size_t *off;
    uint64_t *len;
    size_t arena;
} name_refs;

/* Magic, version and counts; allocates the kv / tensor tables and their hashes. */
static int parse_header(eng_gguf *g, cur *cp, uint64_t *nt_out, uint64_t *nkv_out)
{
    uint32_t magic, ver;
    uint64_t nt, nkv;
    int rc;
    if ((rc = rd_u32(cp, &magic, "magic"))) return rc;
    if (magic != GGUF_MAGIC) return fail(cp, LCX_ECORRUPT, "gguf: bad magic (not a GGUF file)");
    if ((rc = rd_u32(cp, &ver, "version"))) return rc;
    if (ver != 2 && ver != 3)
        return fail(cp, LCX_ENOTSUP, "gguf: unsupported version %u (need 2 or 3)", ver);
    g->version = ver;
    if ((rc = rd_u64(cp, &nt, "tensor count"))) return rc;
    if ((rc = rd_u64(cp, &nkv, "metadata count"))) return rc;
    if (nt > ENG_GGUF_MAX_TENSORS)
        return fail(cp, LCX_ELIMIT, "gguf: tensor count %llu over the cap", (unsigned long long)nt);
    if (nkv > ENG_GGUF_MAX_KV)
        return fail(cp, LCX_ELIMIT, "gguf: metadata count %llu over the cap", (unsigned long long)nkv);
    /* every kv needs >= 8+4+1 bytes, every tensor info >= 8+4+8+4+8 */
    if (nkv > (g->size - cp->off) / 13 || nt > (g->size - cp->off) / 32)
        return fail(cp, LCX_ETRUNC, "gguf: %llu keys / %llu tensors cannot fit in the file",
                    (unsigned long long)nkv, (unsigned long long)nt);
    g->kv = calloc(nkv ? nkv : 1, sizeof *g->kv);
    g->tensors = calloc(nt ? nt : 1, sizeof *g->tensors);
    g->kv_hash_n = pow2_at_least(nkv);
    g->t_hash_n = pow2_at_least(nt);
    g->kv_hash = malloc(g->kv_hash_n * sizeof(int64_t));
    g->t_hash = malloc(g->t_hash_n * sizeof(int64_t));
    if (!g->kv || !g->tensors || !g->kv_hash || !g->t_hash)
        return fail(cp, LCX_ENOMEM, "gguf: out of memory");
    memset(g->kv_hash, 0xff, g->kv_hash_n * sizeof(int64_t));
    memset(g->t_hash, 0xff, g->t_hash_n * sizeof(int64_t));
    *nt_out = nt;
    *nkv_out = nkv;
    return 0;
}

/* general.alignment: a u32 power of two <= 65536. */
static int take_alignment(eng_gguf *g, cur *cp, const kv_entry *e)
{
    uint32_t a;
    if (e->type != ENG_GGUF_U32) return fail(cp, LCX_ECORRUPT, "gguf: general.alignment must be u32");
    memcpy(&a, g->base + e->val_off, 4);
    if (a == 0 || (a & (a - 1)) || a > (1u << 16))
        return fail(cp, LCX_ECORRUPT, "gguf: general.alignment %u is not a power of two <= 65536", a);
    g->alignment = a;
    return 0;
}

/* The metadata: nkv (key, type, value) entries. */
static int parse_kvs(eng_gguf *g, cur *cp, uint64_t nkv, name_refs *nr)
{
    int rc;
    for (uint64_t i = 0; i < nkv; i++) {
        uint32_t t;
        if ((rc = rd_str(cp, &nr->off[i], &nr->len[i], ENG_GGUF_MAX_KEY, "metadata key"))) return rc;
        if (nr->len[i] == 0 || memchr(g->base + nr->off[i], 0, nr->len[i]))
            return fail(cp, LCX_ECORRUPT, "gguf: metadata key %llu is empty or holds NUL", (unsigned long long)i);
        nr->arena += nr->len[i] + 1;
        char kbuf[96];
        snprintf(kbuf, sizeof kbuf, "%.*s", (int)LCX_MIN(nr->len[i], 80), (const char *)g->base + nr->off[i]);
        if ((rc = rd_u32(cp, &t, "metadata value type"))) return rc;
        if (t >= ENG_GGUF_NTYPES) return fail(cp, LCX_ECORRUPT, "gguf: key '%s': bad value type %u", kbuf, t);
        g->kv[i].type = (int)t;
        g->n_kv = (int64_t)i + 1;
        if ((rc = parse_value(g, cp, &g->kv[i], kbuf))) return rc;
        if (nr->len[i] == 17 && !memcmp(g->base + nr->off[i], "general.alignment", 17) &&
            (rc = take_alignment(g, cp, &g->kv[i])))
            return rc;
    }
    return 0;
}

/* One tensor info: name, dims, type, offset (kept relative to the data section in ->data). */
static int parse_tensor_info(eng_gguf *g, cur *cp, uint64_t i, size_t k, name_refs *nr)
{
    eng_tensor *t = &g->tensors[i];
    uint32_t nd, ty;
    uint64_t off;
    int rc;
    if ((rc = rd_str(cp, &nr->off[k], &nr->len[k], ENG_GGUF_MAX_KEY, "tensor name"))) return rc;
    if (nr->len[k] == 0 || memchr(g->base + nr->off[k], 0, nr->len[k]))
        return fail(cp, LCX_ECORRUPT, "gguf: tensor %llu name is empty or holds NUL", (unsigned long long)i);
    nr->arena += nr->len[k] + 1;
    if ((rc = rd_u32(cp, &nd, "tensor n_dims"))) return rc;
    if (nd < 1 || nd > ENG_GGUF_MAX_DIMS)
        return fail(cp, LCX_ECORRUPT, "gguf: tensor %llu has %u dims (1..4 allowed)", (unsigned long long)i, nd);
    t->n_dims = (int)nd;
    for (int d = 0; d < 4; d++) t->ne[d] = 1;
    for (uint32_t d = 0; d < nd; d++) {
        uint64_t v;
        if ((rc = rd_u64(cp, &v, "tensor dimension"))) return rc;
        if (v == 0 || v > ((uint64_t)1 << 40))
            return fail(cp, LCX_ECORRUPT, "gguf: tensor %llu dimension %u is %llu", (unsigned long long)i, d,
                        (unsigned long long)v);
        t->ne[d] = (int64_t)v;
    }
    if ((rc = rd_u32(cp, &ty, "tensor type"))) return rc;
    if (ty >= LCX_ARRAY_LEN(g_types) || !g_types[ty].blk)
        return fail(cp, LCX_ENOTSUP, "gguf: tensor %llu has unknown type %u", (unsigned long long)i, ty);
    t->type = (int)ty;
    t->nbytes = eng__gguf_tensor_nbytes(t->type, t->n_dims, t->ne);
    if (!t->nbytes)
        return fail(cp, LCX_ECORRUPT, "gguf: tensor %llu: shape [%lld,...] does not fit type %u (row not a multiple of %d, or too big)",
                    (unsigned long long)i, (long long)t->ne[0], ty, g_types[ty].blk);
    if ((rc = rd_u64(cp, &off, "tensor offset"))) return rc;
    if (off % g->alignment)
        return fail(cp, LCX_ECORRUPT, "gguf: tensor %llu offset %llu not aligned to %u", (unsigned long long)i,
                    (unsigned long long)off, g->alignment);
    t->data = (const void *)(uintptr_t)off;   /* relative for now */
    g->n_tensors = (int64_t)i + 1;
    return 0;
}

/* The data section starts at the next alignment boundary; every tensor must lie inside the
 * file. Turns the relative offsets into pointers. */
static int place_tensor_data(eng_gguf *g, cur *cp, uint64_t nt)
{
    size_t doff = cp->off;
    if (nt) {
        doff = (cp->off + g->alignment - 1) / g->alignment * g->alignment;
        if (doff > g->size) return fail(cp, LCX_ETRUNC, "gguf: file ends before the data section");
    }
    g->data_off = doff;
    for (int64_t i = 0; i < g->n_tensors; i++) {
        eng_tensor *t = &g->tensors[i];
        uint64_t off = (uint64_t)(uintptr_t)t->data;
        if (off > g->size - doff || t->nbytes > g->size - doff - off) {
            cp->off = doff;
            return fail(cp, LCX_ETRUNC, "gguf: tensor %lld data [%llu, +%zu) runs past the end of the file",
                        (long long)i, (unsigned long long)off, t->nbytes);
        }
        t->data = g->base + doff + off;
    }
    return 0;
}

/* NUL-terminated copies of the names in one arena, entered into the hashes (duplicates are
 * refused). */
static int index_names(eng_gguf *g, cur *cp, uint64_t nkv, uint64_t nt, const name_refs *nr)
{
    g->names = malloc(nr->arena ? nr->arena : 1);
    if (!g->names) return fail(cp, LCX_ENOMEM, "gguf: out of memory");
    char *p = g->names;
    for (uint64_t k = 0; k < nkv + nt; k++) {
        memcpy(p, g->base + nr->off[k], nr->len[k]);
        p[nr->len[k]] = 0;
        if (k < nkv) {
            g->kv[k].key = p;
            if (hash_insert(g->kv_hash, g->kv_hash_n, p, (int64_t)k, kv_name, g))
                return fail(cp, LCX_ECORRUPT, "gguf: duplicate metadata key '%.80s'", p);
        } else {
            g->tensors[k - nkv].name = p;
            if (hash_insert(g->t_hash, g->t_hash_n, p, (int64_t)(k - nkv), t_name, g))
                return fail(cp, LCX_ECORRUPT, "gguf: duplicate tensor name '%.80s'", p);
        }
        p += nr->len[k] + 1;
    }
    return 0;
}

/* No two tensors' data overlap (sorted by data pointer). */
static int check_overlap(eng_gguf *g, cur *cp, uint64_t nt)
{
    if (nt < 2) return 0;
    const eng_tensor **ord = malloc(nt * sizeof *ord);
    if (!ord) return fail(cp, LCX_ENOMEM, "gguf: out of memory");
    for (uint64_t i = 0; i < nt; i++) ord[i] = &g->tensors[i];
    qsort(ord, nt, sizeof *ord, cmp_off);
    int rc = 0;
    for (uint64_t i = 0; i + 1 < nt && !rc; i++) {
        const uint8_t *a = ord[i]->data, *b = ord[i + 1]->data;
        if (a + ord[i]->nbytes > b)
            rc = fail(cp, LCX_ECORRUPT, "gguf: tensors '%.80s' and '%.80s' overlap", ord[i]->name, ord[i + 1]->name);
    }
    free(ord);
    return rc;
}

static int parse(eng_gguf *g, char *err, size_t errlen)
{
    cur c = {g->base, g->size, 0, err, errlen};
    uint64_t nt = 0, nkv = 0;
    int rc = parse_header(g, &c, &nt, &nkv);
    if (rc) return rc;
    /* names are copied into one arena once every key and tensor is read; their places in the
     * file are kept until then (bounded by the file size) */
    name_refs nr = {malloc((nkv + nt + 1) * sizeof(size_t)), malloc((nkv + nt + 1) * sizeof(uint64_t)), 0};
    if (!nr.off || !nr.len) rc = fail(&c, LCX_ENOMEM, "gguf: out of memory");
    g->alignment = 32;
    if (!rc) rc = parse_kvs(g, &c, nkv, &nr);
    for (uint64_t i = 0; !rc && i < nt; i++) rc = parse_tensor_info(g, &c, i, nkv + i, &nr);
    if (!rc) rc = place_tensor_data(g, &c, nt);
    if (!rc) rc = index_names(g, &c, nkv, nt, &nr);
    if (!rc) rc = check_overlap(g, &c, nt);
    free(nr.off);
    free(nr.len);
    return rc;
}

int eng__gguf_open_mem(const void *buf, size_t len, eng_gguf **out, char *err, size_t errlen)
{
    *out = NULL;
    if (err && errlen) err[0] = 0;
    eng_gguf *g = calloc(1, sizeof *g);
    if (!g) return LCX_ENOMEM;
    g->base = buf;
    g->size = len;
    int rc = parse(g, err, errlen);
    if (rc) { eng__gguf_close(g); return rc; }
    *out = g;
    return 0;
}

int eng__gguf_open(const char *path, eng_gguf **out, char *err, size_t errlen)
{
    *out = NULL;
    if (err && errlen) err[0] = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (err) snprintf(err, errlen, "gguf: cannot open %s: %s", path, strerror(errno));
        return errno == ENOENT ? LCX_ENOTFOUND : LCX_EIO;
    }
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        if (err) snprintf(err, errlen, "gguf: %s is not a regular file", path);
        close(fd);
        return LCX_EIO;
    }
    size_t sz = (size_t)st.st_size;
    if (sz < 8) {
        if (err) snprintf(err, errlen, "gguf: %s: file truncated while reading magic/version (%zu bytes)", path, sz);
        close(fd);
        return LCX_ETRUNC;
    }
    void *m = mmap(NULL, sz, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED) {
        if (err) snprintf(err, errlen, "gguf: cannot mmap %s: %s", path, strerror(errno));
        return LCX_EIO;
    }
    eng_gguf *g = calloc(1, sizeof *g);
    if (!g) { munmap(m, sz); return LCX_ENOMEM; }
    g->base = m;
    g->size = sz;
    g->map = m;
    int rc = parse(g, err, errlen);
    if (rc) { eng__gguf_close(g); return rc; }
    *out = g;
    return 0;
}

uint32_t eng__gguf_version(const eng_gguf *g) { return g->version; }
uint32_t eng__gguf_alignment(const eng_gguf *g) { return g->alignment; }
int64_t eng__gguf_n_kv(const eng_gguf *g) { return g->n_kv; }
const char *eng__gguf_key_at(const eng_gguf *g, int64_t k)
{
    return (k >= 0 && k < g->n_kv) ? g->kv[k].key : NULL;
}
int64_t eng__gguf_find_key(const eng_gguf *g, const char *key)
{
    return hash_find(g->kv_hash, g->kv_hash_n, key, kv_name, g);
}
int eng__gguf_key_type(const eng_gguf *g, int64_t k)
{
    return (k >= 0 && k < g->n_kv) ? g->kv[k].type : -1;
}

/* Reads any integer/bool scalar as int64/uint64; returns 0 ok, 1 when signed negative. */
static int get_int(const eng_gguf *g, const char *key, int64_t *sv, uint64_t *uv, bool *neg)
{
    int64_t k = eng__gguf_find_key(g, key);
    if (k < 0) return LCX_ENOTFOUND;
    const kv_entry *e = &g->kv[k];
    const uint8_t *p = g->base + e->val_off;
    *neg = false;
    switch (e->type) {
    case ENG_GGUF_U8: case ENG_GGUF_BOOL: *uv = p[0]; break;
    case ENG_GGUF_I8: { int8_t v; memcpy(&v, p, 1); *sv = v; *neg = v < 0; *uv = (uint64_t)v; break; }
    case ENG_GGUF_U16: { uint16_t v; memcpy(&v, p, 2); *uv = v; break; }
    case ENG_GGUF_I16: { int16_t v; memcpy(&v, p, 2); *sv = v; *neg = v < 0; *uv = (uint64_t)v; break; }
    case ENG_GGUF_U32: { uint32_t v; memcpy(&v, p, 4); *uv = v; break; }
    case ENG_GGUF_I32: { int32_t v; memcpy(&v, p, 4); *sv = v; *neg = v < 0; *uv = (uint64_t)v; break; }
    case ENG_GGUF_U64: { uint64_t v; memcpy(&v, p, 8); *uv = v; break; }
    case ENG_GGUF_I64: { int64_t v; memcpy(&v, p, 8); *sv = v; *neg = v < 0; *uv = (uint64_t)v; break; }
    default: return LCX_EINVAL;
    }
    if (!*neg) *sv = (*uv > (uint64_t)INT64_MAX) ? INT64_MAX : (int64_t)*uv;
    return 0;
}

int eng__gguf_get_u32(const eng_gguf *g, const char *key, uint32_t *out)
{
    int64_t s; uint64_t u; bool neg;
    int rc = get_int(g, key, &s, &u, &neg);
    if (rc) return rc;
    if (neg || u > UINT32_MAX) return LCX_EINVAL;
    *out = (uint32_t)u;
    return 0;
}
int eng__gguf_get_u64(const eng_gguf *g, const char *key, uint64_t *out)
{
    int64_t s; uint64_t u; bool neg;
    int rc = get_int(g, key, &s, &u, &neg);
    if (rc) return rc;
    if (neg) return LCX_EINVAL;
    *out = u;
    return 0;
}
int eng__gguf_get_i32(const eng_gguf *g, const char *key, int32_t *out)
{
    int64_t s; uint64_t u; bool neg;
    int rc = get_int(g, key, &s, &u, &neg);
    if (rc) return rc;
    /* A u32 0xFFFFFFFF is the converters' "none" (-1): accept it as -1. */
    int64_t k = eng__gguf_find_key(g, key);
    if (g->kv[k].type == ENG_GGUF_U32 && u == 0xFFFFFFFFull) { *out = -1; return 0; }
    if (neg ? s < INT32_MIN : u > INT32_MAX) return LCX_EINVAL;
    *out = (int32_t)s;
    return 0;
}
int eng__gguf_get_f32(const eng_gguf *g, const char *key, float *out)
{
    int64_t k = eng__gguf_find_key(g, key);
    if (k < 0) return LCX_ENOTFOUND;
    const kv_entry *e = &g->kv[k];
    const uint8_t *p = g->base + e->val_off;
    if (e->type == ENG_GGUF_F32) { memcpy(out, p, 4); return 0; }
    if (e->type == ENG_GGUF_F64) { double d; memcpy(&d, p, 8); *out = (float)d; return 0; }
    int64_t s; uint64_t u; bool neg;
    int rc = get_int(g, key, &s, &u, &neg);
    if (rc) return rc;
    *out = neg ? (float)s : (float)u;
    return 0;
}
int eng__gguf_get_bool(const eng_gguf *g, const char *key, bool *out)
{
    int64_t s; uint64_t u; bool neg;
    int rc = get_int(g, key, &s, &u, &neg);
    if (rc) return rc;
    if (neg || u > 1) return LCX_EINVAL;
    *out = u != 0;
    return 0;
}
const char *eng__gguf_get_str(const eng_gguf *g, const char *key, size_t *len)
{
    int64_t k = eng__gguf_find_key(g, key);
    if (k < 0 || g->kv[k].type != ENG_GGUF_STRING) return NULL;
    uint64_t n;
    memcpy(&n, g->base + g->kv[k].val_off, 8);
    if (len) *len = (size_t)n;
    return (const char *)g->base + g->kv[k].val_off + 8;
}
int eng__gguf_get_arr(const eng_gguf *g, const char *key, int *elem_type, uint64_t *n,
                     const void **data)
{
    int64_t k = eng__gguf_find_key(g, key);
    if (k < 0) return LCX_ENOTFOUND;
    const kv_entry *e = &g->kv[k];
    if (e->type != ENG_GGUF_ARRAY) return LCX_EINVAL;
    if (elem_type) *elem_type = e->elem_type;
    if (n) *n = e->n;
    if (data) *data = e->elem_type == ENG_GGUF_STRING ? NULL : g->base + e->val_off;
    return 0;
}
const char *eng__gguf_get_arr_str(const eng_gguf *g, const char *key, uint64_t i, size_t *len)
{
    int64_t k = eng__gguf_find_key(g, key);
    if (k < 0) return NULL;
    const kv_entry *e = &g->kv[k];
    if (e->type != ENG_GGUF_ARRAY || e->elem_type != ENG_GGUF_STRING || i >= e->n) return NULL;
    uint64_t n;
    memcpy(&n, g->base + e->str_offs[i] - 8, 8);
    if (len) *len = (size_t)n;
    return (const char *)g->base + e->str_offs[i];
}
const eng_tensor *eng__gguf_tensor(const eng_gguf *g, const char *name)
{
    int64_t i = hash_find(g->t_hash, g->t_hash_n, name, t_name, g);
    return i < 0 ? NULL : &g->tensors[i];
}
int64_t eng__gguf_n_tensors(const eng_gguf *g) { return g->n_tensors; }
const eng_tensor *eng__gguf_tensor_at(const eng_gguf *g, int64_t i)
{
    return (i >= 0 && i < g->n_tensors) ? &g->tensors[i] : NULL;
}

/* ==== writer ============================================================================ */
typedef struct {
    char *name;
    int type, n_dims;
    int64_t ne[4];
    const void *data;
    size_t nbytes;
    uint64_t off;
} wtensor;

struct eng_gguf_writer {
    uint32_t alignment;
    uint64_t n_kv;
    lcx_buf kv;           /* serialized KV section */
    wtensor *t;
    int64_t nt, tcap;
    int err;              /* first error (sticky) */
};

eng_gguf_writer *eng__gguf_writer_new(uint32_t alignment)
{
    if (alignment == 0) alignment = 32;
    if (alignment & (alignment - 1)) return NULL;
    eng_gguf_writer *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->alignment = alignment;
    if (alignment != 32) eng__gguf_w_u32(w, "general.alignment", alignment);
    return w;
}
void eng__gguf_writer_free(eng_gguf_writer *w)
{
    if (!w) return;
    lcx__buf_free(&w->kv);
    for (int64_t i = 0; i < w->nt; i++) free(w->t[i].name);
    free(w->t);
    free(w);
}
static int w_bytes(eng_gguf_writer *w, const void *p, size_t n)
{
    int rc = lcx__buf_append(&w->kv, p, n);
    if (rc && !w->err) w->err = rc;
    return rc;
}
static int w_strv(eng_gguf_writer *w, const char *s, size_t n)
{
    uint64_t l = n;
    int rc = w_bytes(w, &l, 8);
    return rc ? rc : w_bytes(w, s, n);
}
static int w_head(eng_gguf_writer *w, const char *key, uint32_t type)
{
    if (w->err) return w->err;
    int rc = w_strv(w, key, strlen(key));
    if (!rc) rc = w_bytes(w, &type, 4);
    if (!rc) w->n_kv++;
    return rc;
}
int eng__gguf_w_u32(eng_gguf_writer *w, const char *key, uint32_t v)
{
    int rc = w_head(w, key, ENG_GGUF_U32);
    return rc ? rc : w_bytes(w, &v, 4);
}
int eng__gguf_w_i32(eng_gguf_writer *w, const char *key, int32_t v)
{
    int rc = w_head(w, key, ENG_GGUF_I32);
    return rc ? rc : w_bytes(w, &v, 4);
}
int eng__gguf_w_f32(eng_gguf_writer *w, const char *key, float v)
{
    int rc = w_head(w, key, ENG_GGUF_F32);
    return rc ? rc : w_bytes(w, &v, 4);
}
int eng__gguf_w_bool(eng_gguf_writer *w, const char *key, bool v)
{
    uint8_t b = v;
    int rc = w_head(w, key, ENG_GGUF_BOOL);
    return rc ? rc : w_bytes(w, &b, 1);
}
int eng__gguf_w_strn(eng_gguf_writer *w, const char *key, const char *s, size_t n)
{
    int rc = w_head(w, key, ENG_GGUF_STRING);
    return rc ? rc : w_strv(w, s, n);
}
int eng__gguf_w_str(eng_gguf_writer *w, const char *key, const char *s)
{
    return eng__gguf_w_strn(w, key, s, strlen(s));
}
int eng__gguf_w_arr(eng_gguf_writer *w, const char *key, int elem_type, const void *data, uint64_t n)
{
    size_t es = eng__gguf_type_size(elem_type);
    if (!es) return LCX_EINVAL;
    uint32_t et = (uint32_t)elem_type;
    int rc = w_head(w, key, ENG_GGUF_ARRAY);
    if (!rc) rc = w_bytes(w, &et, 4);
    if (!rc) rc = w_bytes(w, &n, 8);
    if (!rc) rc = w_bytes(w, data, es * n);
    return rc;
}
int eng__gguf_w_arr_str(eng_gguf_writer *w, const char *key, const char *const *strs,
                       const size_t *lens, uint64_t n)
{
    uint32_t et = ENG_GGUF_STRING;
    int rc = w_head(w, key, ENG_GGUF_ARRAY);
    if (!rc) rc = w_bytes(w, &et, 4);
    if (!rc) rc = w_bytes(w, &n, 8);
    for (uint64_t i = 0; !rc && i < n; i++) rc = w_strv(w, strs[i], lens ? lens[i] : strlen(strs[i]));
    return rc;
}
int eng__gguf_w_tensor(eng_gguf_writer *w, const char *name, int type, int n_dims,
                      const int64_t *ne, const void *data)
{
    if (w->err) return w->err;
    int64_t e4[4] = {1, 1, 1, 1};
    if (n_dims < 1 || n_dims > 4) return LCX_EINVAL;
    for (int i = 0; i < n_dims; i++) e4[i] = ne[i];
    size_t nb = eng__gguf_tensor_nbytes(type, n_dims, e4);
    if (!nb) return LCX_EINVAL;
    if (w->nt == w->tcap) {
        int64_t nc = w->tcap ? w->tcap * 2 : 64;
        wtensor *p = realloc(w->t, nc * sizeof *p);
        if (!p) return w->err = LCX_ENOMEM;
        w->t = p;
        w->tcap = nc;
    }
    wtensor *t = &w->t[w->nt];
    memset(t, 0, sizeof *t);
    t->name = strdup(name);
    if (!t->name) return w->err = LCX_ENOMEM;
    t->type = type;
    t->n_dims = n_dims;
    memcpy(t->ne, e4, sizeof e4);
    t->data = data;
    t->nbytes = nb;
    return (int)(w->nt++);
}

static int fwrite_all(FILE *f, const void *p, size_t n)
{
    return fwrite(p, 1, n, f) == n ? 0 : LCX_EIO;
}

int eng__gguf_writer_write(eng_gguf_writer *w, const char *path, eng_gguf_fill_fn fill, void *ctx)
{
    if (w->err) return w->err;
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 5);
    if (!tmp) return LCX_ENOMEM;
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".tmp", 5);
    FILE *f = fopen(tmp, "wb");
    if (!f) { free(tmp); return LCX_EIO; }
    int rc = 0;
    uint32_t magic = GGUF_MAGIC, ver = 3;
    uint64_t nt = (uint64_t)w->nt;
    uint64_t off = 0, hdr = 0;
    for (int64_t i = 0; i < w->nt; i++) {
        w->t[i].off = off;
        off += (w->t[i].nbytes + w->alignment - 1) / w->alignment * w->alignment;
    }
    rc |= fwrite_all(f, &magic, 4);
    rc |= fwrite_all(f, &ver, 4);
    rc |= fwrite_all(f, &nt, 8);
    rc |= fwrite_all(f, &w->n_kv, 8);
    rc |= fwrite_all(f, w->kv.data ? w->kv.data : "", w->kv.len);
    hdr = 24 + w->kv.len;
    for (int64_t i = 0; i < w->nt && !rc; i++) {
        wtensor *t = &w->t[i];
        uint64_t l = strlen(t->name);
        uint32_t nd = (uint32_t)t->n_dims, ty = (uint32_t)t->type;
        rc |= fwrite_all(f, &l, 8);
        rc |= fwrite_all(f, t->name, l);
        rc |= fwrite_all(f, &nd, 4);
        for (int d = 0; d < t->n_dims; d++) {
            uint64_t v = (uint64_t)t->ne[d];
            rc |= fwrite_all(f, &v, 8);
        }
        rc |= fwrite_all(f, &ty, 4);
        rc |= fwrite_all(f, &t->off, 8);
        hdr += 8 + l + 4 + 8 * (uint64_t)t->n_dims + 4 + 8;
    }
    static const uint8_t zeros[4096];
    if (w->nt) {
        uint64_t pad = (w->alignment - hdr % w->alignment) % w->alignment;
        rc |= fwrite_all(f, zeros, pad);
    }
    void *buf = NULL;
    size_t bufn = 0;
    for (int64_t i = 0; i < w->nt && !rc; i++) {
        wtensor *t = &w->t[i];
        const void *src = t->data;
        if (fill) {
            if (bufn < t->nbytes) {
                free(buf);
                buf = malloc(t->nbytes);
                bufn = buf ? t->nbytes : 0;
                if (!buf) { rc = LCX_ENOMEM; break; }
            }
            rc = fill(ctx, i, buf, t->nbytes);
            if (rc) break;
            src = buf;
        } else if (!src) {
            rc = LCX_EINVAL;
            break;
        }
        rc = fwrite_all(f, src, t->nbytes);
        /* pad between tensors, not after the last one (so the file ends with its data) */
        uint64_t pad = i + 1 < w->nt ? (w->alignment - t->nbytes % w->alignment) % w->alignment : 0;
        while (!rc && pad) {
            size_t k = LCX_MIN(pad, sizeof zeros);
            rc = fwrite_all(f, zeros, k);
            pad -= k;
        }
    }
    free(buf);
    if (fflush(f) != 0) rc = rc ? rc : LCX_EIO;
    if (fclose(f) != 0) rc = rc ? rc : LCX_EIO;
    if (!rc && rename(tmp, path) != 0) rc = LCX_EIO;
    if (rc) unlink(tmp);
    free(tmp);
    return rc < 0 ? rc : (rc ? LCX_EIO : 0);
}
