/* GGUF v2/v3 reader (over mmap) and writer — engine-internal.
 *
 *   eng_gguf *g; char err[256];
 *   if (eng__gguf_open("m.gguf", &g, err, sizeof err) < 0) { fprintf(stderr, "%s\n", err); ... }
 *   uint32_t n_layer;  eng__gguf_get_u32(g, "llama.block_count", &n_layer);
 *   const eng_tensor *t = eng__gguf_tensor(g, "token_embd.weight");   // t->data points into the mmap
 *   eng__gguf_close(g);
 *
 * Validation happens entirely inside eng__gguf_open: magic, version (2 or 3), counts (capped),
 * string lengths (capped, inside the file), key types, array element types, duplicate keys and
 * tensor names, tensor dims/shapes vs block size of the type, offsets aligned to
 * general.alignment (a power of two), every tensor's bytes inside the file, and no two tensors
 * overlapping. After a successful open every pointer handed out is valid until close and no
 * accessor can read outside the mapping. Strings handed out are NOT NUL-terminated (use len).
 * Keys and tensor names are looked up through hash indexes built at open (O(1)).
 *
 * Ownership: the eng_gguf owns the mapping; everything returned points into it or into the
 * handle and dies with eng__gguf_close (close(NULL) is a no-op).
 * Errors: LCX_EIO (open/stat/mmap), LCX_ETRUNC (file ends inside a field), LCX_ECORRUPT
 * (bad magic, bad value, overlap, misaligned), LCX_ELIMIT (count/length over a cap),
 * LCX_ENOTSUP (version or tensor type we do not know), LCX_ENOMEM. `err` gets a sentence that
 * names the field and the byte offset. */
#ifndef ENG_GGUF_H
#define ENG_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "longctx/lcx_err.h"

typedef struct eng_gguf eng_gguf;

/* Metadata value types, GGUF numbering. */
typedef enum {
    ENG_GGUF_U8 = 0, ENG_GGUF_I8 = 1, ENG_GGUF_U16 = 2, ENG_GGUF_I16 = 3,
    ENG_GGUF_U32 = 4, ENG_GGUF_I32 = 5, ENG_GGUF_F32 = 6, ENG_GGUF_BOOL = 7,
    ENG_GGUF_STRING = 8, ENG_GGUF_ARRAY = 9, ENG_GGUF_U64 = 10, ENG_GGUF_I64 = 11,
    ENG_GGUF_F64 = 12, ENG_GGUF_NTYPES = 13
} eng_gguf_type;

/* Hard caps (hostile files). */
#define ENG_GGUF_MAX_KV       (1u << 20)      /* metadata keys */
#define ENG_GGUF_MAX_TENSORS  (1u << 20)
#define ENG_GGUF_MAX_STR      (1u << 26)      /* one string, bytes (64 MiB) */
#define ENG_GGUF_MAX_KEY      65535u          /* key / tensor name bytes */
#define ENG_GGUF_MAX_ARR      (1ull << 32)    /* array elements */
#define ENG_GGUF_MAX_DIMS     4

typedef struct {
    const char *name;     /* NOT NUL-terminated; name_len bytes (a NUL-terminated copy is name) */
    int type;             /* GGML type number (see quant.h eng_type) */
    int n_dims;
    int64_t ne[4];        /* ggml order: ne[0] = row length (fastest); unused dims = 1 */
    const void *data;     /* inside the mapping, aligned to general.alignment */
    size_t nbytes;
} eng_tensor;

/* Opens and validates path. On failure *out = NULL, err (if non-NULL) gets a message. */
int  eng__gguf_open(const char *path, eng_gguf **out, char *err, size_t errlen);
/* Same, over a caller-owned buffer (tests, fuzzing); buf must outlive the handle. */
int  eng__gguf_open_mem(const void *buf, size_t len, eng_gguf **out, char *err, size_t errlen);
void eng__gguf_close(eng_gguf *g);

uint32_t eng__gguf_version(const eng_gguf *g);
uint32_t eng__gguf_alignment(const eng_gguf *g);
int64_t  eng__gguf_n_kv(const eng_gguf *g);
/* Key of the k-th metadata entry (NUL-terminated copy owned by g). */
const char *eng__gguf_key_at(const eng_gguf *g, int64_t k);
int64_t  eng__gguf_find_key(const eng_gguf *g, const char *key);   /* -1 when absent */
int      eng__gguf_key_type(const eng_gguf *g, int64_t k);         /* eng_gguf_type, -1 bad k */

/* Scalar getters: LCX_ENOTFOUND when the key is absent, LCX_EINVAL when its type cannot be
 * converted without loss (integers of any width are accepted when the value is in range;
 * get_f32 also accepts F64 and integers; get_bool accepts BOOL and integers 0/1). */
int eng__gguf_get_u32(const eng_gguf *g, const char *key, uint32_t *out);
int eng__gguf_get_i32(const eng_gguf *g, const char *key, int32_t *out);
int eng__gguf_get_u64(const eng_gguf *g, const char *key, uint64_t *out);
int eng__gguf_get_f32(const eng_gguf *g, const char *key, float *out);
int eng__gguf_get_bool(const eng_gguf *g, const char *key, bool *out);
/* String value (not NUL-terminated; *len bytes). NULL when absent or not a string. */
const char *eng__gguf_get_str(const eng_gguf *g, const char *key, size_t *len);
/* Array value: *elem_type, *n; *data points into the mapping for numeric arrays (element
 * size per type, little-endian, possibly unaligned — memcpy when reading). For string
 * arrays *data is NULL: use eng__gguf_get_arr_str. LCX_ENOTFOUND / LCX_EINVAL (not an array). */
int eng__gguf_get_arr(const eng_gguf *g, const char *key, int *elem_type, uint64_t *n,
                     const void **data);
/* i-th string of a string array (O(1): offsets indexed at open). NULL when absent / wrong
 * type / i out of range. */
const char *eng__gguf_get_arr_str(const eng_gguf *g, const char *key, uint64_t i, size_t *len);

const eng_tensor *eng__gguf_tensor(const eng_gguf *g, const char *name);   /* NULL when absent */
int64_t eng__gguf_n_tensors(const eng_gguf *g);
const eng_tensor *eng__gguf_tensor_at(const eng_gguf *g, int64_t i);

/* Size in bytes of one element of a scalar metadata type (0 for STRING/ARRAY/bad). */
size_t eng__gguf_type_size(int t);

/* ---- writer ------------------------------------------------------------------------
 * Builds the header in memory, then streams tensor data: add all KVs and tensor infos first,
 * then eng__gguf_writer_write(w, path, cb) which lays out offsets (aligned), writes the header,
 * and calls fill() once per tensor in order to produce its bytes (or copies `data` when
 * fill is NULL and data was given at add time). Writes to path.tmp then renames.
 *
 *   eng_gguf_writer *w = eng__gguf_writer_new(32);
 *   eng__gguf_w_str(w, "general.architecture", "llama");
 *   eng__gguf_w_u32(w, "llama.block_count", 5);
 *   eng__gguf_w_tensor(w, "token_embd.weight", ENG_T_F32, 2, (int64_t[]){64, 512}, ptr);
 *   rc = eng__gguf_writer_write(w, "out.gguf", NULL, NULL);
 *   eng__gguf_writer_free(w);
 *
 * Data pointers given to eng__gguf_w_tensor (and string/array payloads) are copied for
 * metadata but NOT for tensor data: tensor data must stay alive until write returns. */
typedef struct eng_gguf_writer eng_gguf_writer;
/* fill(ctx, tensor_index, dst, nbytes): produce the tensor's bytes into dst; return 0 or LCX_E*. */
typedef int (*eng_gguf_fill_fn)(void *ctx, int64_t ti, void *dst, size_t nbytes);

eng_gguf_writer *eng__gguf_writer_new(uint32_t alignment);   /* NULL on OOM; 0 = 32 */
void eng__gguf_writer_free(eng_gguf_writer *w);
int eng__gguf_w_u32(eng_gguf_writer *w, const char *key, uint32_t v);
int eng__gguf_w_i32(eng_gguf_writer *w, const char *key, int32_t v);
int eng__gguf_w_f32(eng_gguf_writer *w, const char *key, float v);
int eng__gguf_w_bool(eng_gguf_writer *w, const char *key, bool v);
int eng__gguf_w_str(eng_gguf_writer *w, const char *key, const char *s);
int eng__gguf_w_strn(eng_gguf_writer *w, const char *key, const char *s, size_t n);
/* Numeric array of n elements of elem_type (copied). */
int eng__gguf_w_arr(eng_gguf_writer *w, const char *key, int elem_type, const void *data, uint64_t n);
/* String array: strs[i] with lens[i] bytes (copied). */
int eng__gguf_w_arr_str(eng_gguf_writer *w, const char *key, const char *const *strs,
                       const size_t *lens, uint64_t n);
/* Tensor with ggml type and dims (ne[0] fastest). data may be NULL when a fill callback is
 * used at write time. Returns the tensor index (>= 0) or LCX_E*. */
int eng__gguf_w_tensor(eng_gguf_writer *w, const char *name, int type, int n_dims,
                      const int64_t *ne, const void *data);
int eng__gguf_writer_write(eng_gguf_writer *w, const char *path, eng_gguf_fill_fn fill, void *ctx);


#endif
