/* Internal embedder and dense-kernel API (not part of the public contract).
 * Stored vectors are 8-bit (see below); queries stay f32. Kernels exist as a scalar
 * reference, AVX2, and (the scan kernels) AVX-512 (dot_avx512.c, run-time dispatch only). */
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

/* Inner products. a, b: n floats. */
float lcx__dot_f32_scalar(const float *a, const float *b, size_t n);
float lcx__dot_f32_avx2(const float *a, const float *b, size_t n);
float lcx__dot_f32_avx512(const float *a, const float *b, size_t n);

/* ---- 8-bit vectors: how the index and the store keep embeddings.
 * Each stored row is dim bytes in offset binary, u = round(v·127/max|v|) + 128 (so
 * u − 128 ∈ [−127, 127]), plus one f32 scale = max|v|/127: value ≈ (u − 128)·scale. For
 * L2-normalised 256-d hashed vectors the cosine error is ≤ ~0.002 (test_dense_kernels),
 * far below the gaps that matter for ranking, for a quarter of the bytes of f32 (and half
 * of f16) in RAM, in the log and in snapshots.
 * Search is two-stage: (1) every row is scanned with an int8 query in [−63, 63] using
 * vpmaddubsw (32 products per instruction; a pair sum ≤ 2·255·63 = 32130 never saturates
 * int16); (2) the best `prefilter` rows are re-scored exactly against the f32 query
 * (lcx__dot_f32_u8). Stage 1 only decides which rows become candidates. */
/* row: (dim) f32 → out: (dim) offset-binary u8; *scale as above (0 for a zero row). */
void lcx__quant_row_u8(const float *row, size_t dim, uint8_t *out, float *scale);
/* q: (dim) f32 → out: (dim) int8 in [-63, 63]; returns the scale (q ≈ out·scale). */
float lcx__quant_query_i8(const float *q, size_t dim, int8_t *out);
/* out[i] = Σ_d q[d]·(rows[i·dim + d] − 128)  (exact int32). rows: (n_rows, dim) u8. */
void lcx__dot_u8_rows_scalar(const int8_t *q, const uint8_t *rows, size_t n_rows, size_t dim, int32_t *out);
void lcx__dot_u8_rows_avx2(const int8_t *q, const uint8_t *rows, size_t n_rows, size_t dim, int32_t *out);
void lcx__dot_u8_rows_avx512(const int8_t *q, const uint8_t *rows, size_t n_rows, size_t dim, int32_t *out);
void lcx__dot_u8_rows(const int8_t *q, const uint8_t *rows, size_t n_rows, size_t dim, int32_t *out);
/* Σ_d q[d]·(row[d] − 128) in float (multiply by the row's scale for the cosine). */
float lcx__dot_f32_u8_scalar(const float *q, const uint8_t *row, size_t dim);
float lcx__dot_f32_u8_avx2(const float *q, const uint8_t *row, size_t dim);
float lcx__dot_f32_u8(const float *q, const uint8_t *row, size_t dim);

/* ---- token-level feed of the hash embedder, so that a caller that also needs the
 * tokens (BM25) tokenizes each text once (hfeat.h, lcx__hfeat_token_inl). h =
 * lcx__hash64(tok, n, 0). The caller skips
 * stopword WORD tokens (as the embedder does). */
typedef struct {
    float *acc;          /* (dim) accumulator, zeroed by the caller */
    uint32_t dim;
    uint64_t prev;       /* previous whole token's hash, 0 = none */
} lcx__hfeat;
int lcx__is_hash_embedder(const lcx_embedder *e);
void lcx__l2_normalise(float *v, uint32_t dim);
void lcx__l2_normalise_ref(float *v, uint32_t dim);   /* scalar reference (tests) */

#endif
