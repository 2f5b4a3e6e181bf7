/* Internal embedder and dense-kernel API (not part of the public contract).
 *
 * Dense vectors live in the index and on disk as IEEE binary16 (f16): half the memory
 * and bandwidth of f32 for a cosine error of ~1e-4 on L2-normalised 256-d vectors (each
 * component keeps 11 significant bits). Queries stay f32. All kernels exist as a scalar
 * reference, AVX2+F16C, and AVX-512 (dot_avx512.c, reached only by run-time dispatch). */
#ifndef LCX_EMBED_INTERNAL_H
#define LCX_EMBED_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include "longctx/lcx.h"

#define LCX_FP_MAX 127   /* fingerprint bytes (status struct holds 128 with the NUL) */
#define LCX_DIM_MAX 4096

struct lcx_embedder {
    lcx_embedder_ops ops;
    void *self;
    int dim;
    char fp[LCX_FP_MAX + 1];
};

/* f32 ↔ f16 conversion (round to nearest even). The scalar ones are the pure-C reference. */
uint16_t lcx__f32_to_f16_scalar(float f);
float lcx__f16_to_f32_scalar(uint16_t h);
void lcx__f32_to_f16(const float *in, uint16_t *out, size_t n);     /* F16C */

/* Inner products. a, b: n floats; v: n halfs. */
float lcx__dot_f32_scalar(const float *a, const float *b, size_t n);
float lcx__dot_f32_avx2(const float *a, const float *b, size_t n);
float lcx__dot_f32_avx512(const float *a, const float *b, size_t n);

/* Many rows at once: out[i] = q · rows[i] for i < n_rows.
 * q: (dim) f32; rows: (n_rows, dim) f16 row-major; out: (n_rows) f32. */
void lcx__dot_f16_rows_scalar(const float *q, const uint16_t *rows, size_t n_rows, size_t dim, float *out);
void lcx__dot_f16_rows_avx2(const float *q, const uint16_t *rows, size_t n_rows, size_t dim, float *out);
void lcx__dot_f16_rows_avx512(const float *q, const uint16_t *rows, size_t n_rows, size_t dim, float *out);
/* Dispatched (AVX-512 when lcx_cpu_has_avx512(), else AVX2). */
void lcx__dot_f16_rows(const float *q, const uint16_t *rows, size_t n_rows, size_t dim, float *out);

/* ---- 8-bit scan copies. The dense search first scans 8-bit rows (per-row scale) with an
 * 8-bit query (vpmaddubsw: 32 products per instruction, 4x less memory than f32), then
 * re-scores the best candidates exactly against their f16 rows: reported cosines are the
 * f16 ones, the 8-bit pass only decides which rows become candidates (its error, ~1% of
 * a score, can only reorder near-ties at the edge of the prefilter list).
 * Rows are stored offset-binary: u = v + 128 with v in [-127, 127]; queries are int8 in
 * [-63, 63] so that a vpmaddubsw pair (≤ 2·255·63 = 32130) never saturates int16. */
/* row: (dim) f16 → out: (dim) offset-binary u8 with value ≈ (out − 128)·scale. */
void lcx__quant_row_u8(const uint16_t *row, size_t dim, uint8_t *out, float *scale);
/* q: (dim) f32 → out: (dim) int8 in [-63, 63]; returns the scale (q ≈ out·scale). */
float lcx__quant_query_i8(const float *q, size_t dim, int8_t *out);
/* out[i] = Σ_d q[d]·(rows[i·dim + d] − 128)  (exact int32). rows: (n_rows, dim) u8. */
void lcx__dot_u8_rows_scalar(const int8_t *q, const uint8_t *rows, size_t n_rows, size_t dim, int32_t *out);
void lcx__dot_u8_rows_avx2(const int8_t *q, const uint8_t *rows, size_t n_rows, size_t dim, int32_t *out);
void lcx__dot_u8_rows_avx512(const int8_t *q, const uint8_t *rows, size_t n_rows, size_t dim, int32_t *out);
void lcx__dot_u8_rows(const int8_t *q, const uint8_t *rows, size_t n_rows, size_t dim, int32_t *out);

/* ---- token-level feed of the hash embedder, so that a caller that also needs the
 * tokens (BM25) tokenizes each text once. h = lcx_hash64(tok, n, 0). The caller skips
 * stopword WORD tokens (as the embedder does). */
typedef struct {
    float *acc;          /* (dim) accumulator, zeroed by the caller */
    uint32_t dim;
    uint64_t prev;       /* previous whole token's hash, 0 = none */
} lcx__hfeat;
int lcx__is_hash_embedder(const lcx_embedder *e);
void lcx__hfeat_token(lcx__hfeat *f, const char *t, size_t n, int kind, uint64_t h);
void lcx__l2_normalise(float *v, uint32_t dim);

#endif
