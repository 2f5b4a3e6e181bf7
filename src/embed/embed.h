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

#endif
