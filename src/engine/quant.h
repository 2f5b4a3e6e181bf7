/* Engine tensor types: GGUF/ggml block layouts, dequantisation, activation quantisation and
 * the integer dot-product / matmul kernels (scalar reference, AVX2; AVX-512 for float weights).
 *
 *   // W: n_out rows of n_in weights in type wt (each row eng__row_bytes(wt, n_in) bytes)
 *   eng_type vt = eng__vec_dot_type(wt);
 *   size_t xrb = eng__row_bytes(vt, n_in);
 *   for (t = 0; t < n_tok; t++) eng__quantize_row(vt, x + t*n_in, xq + t*xrb, n_in);
 *   eng__matmul(wt, W, eng__row_bytes(wt, n_in), n_in, r0, r1, xq, xrb, n_tok, y, n_out);
 *
 * Arithmetic follows llama.cpp (x86, early 2025) so logits agree with its reference outputs:
 * activations for Q4_0/Q5_0/Q8_0 weights are quantized to Q8_0 (blocks of 32, round half to
 * even with the unrounded inverse scale, as ggml's AVX2 quantize_row_q8_0), for
 * Q4_K/Q5_K/Q6_K weights to Q8_K (blocks of 256, quantize_row_q8_K_ref), F16 weights see
 * activations rounded to F16, BF16 weights see BF16, F32 weights F32. Block products are
 * summed in integers and scaled once per block (per super-block for K-quants).
 *
 * Ownership: no function allocates or keeps pointers; all buffers belong to the caller.
 * Failure: these are kernels on already validated data. Callers (the GGUF reader) must
 * check eng__type_supported() and that n is a multiple of eng__type_block_elems() before
 * calling; on violation the functions assert (debug) and otherwise touch nothing beyond
 * floor(n / block) blocks. Thread-safety: every function is reentrant; there is no mutable
 * global state (CPU features come from lcx__cpu(), detected once). */
#ifndef ENG_QUANT_H
#define ENG_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* GGML type numbering (as stored in GGUF tensor infos). */
typedef enum {
    ENG_T_F32 = 0,
    ENG_T_F16 = 1,
    ENG_T_Q4_0 = 2,
    ENG_T_Q5_0 = 6,
    ENG_T_Q8_0 = 8,
    ENG_T_Q4_K = 12,
    ENG_T_Q5_K = 13,
    ENG_T_Q6_K = 14,
    ENG_T_Q8_K = 15,
    ENG_T_BF16 = 30,
    /* internal, never read from a file (eng__type_internal): Q5_0 re-laid by groups of 4
     * blocks at model load (eng__q5_0x4_from_q5_0) for a cheaper generation kernel */
    ENG_T_Q5_0X4 = 1006
} eng_type;

#define ENG_QK4_0 32
#define ENG_QK5_0 32
#define ENG_QK8_0 32
#define ENG_QK_K 256
#define ENG_K_SCALE_SIZE 12

/* ---- block layouts, byte-for-byte as ggml (little-endian, packed, fp16 stored as bits) */
typedef struct { uint16_t d; uint8_t qs[ENG_QK4_0 / 2]; } eng_block_q4_0;          /* 18 B  */
typedef struct { uint16_t d; uint8_t qh[4]; uint8_t qs[ENG_QK5_0 / 2]; } eng_block_q5_0; /* 22 B */
typedef struct { uint16_t d; int8_t qs[ENG_QK8_0]; } eng_block_q8_0;               /* 34 B  */
/* Q5_0X4: 4 consecutive Q5_0 blocks (128 elements) with the same bits, re-laid (88 B = 4 x 22):
 *   d[k]       block k's scale
 *   qh[i]      bit k = 5th bit of element i of block k, bit 4+k = of element i+16 (i < 16)
 *   qs[32p+i]  low nibble = low 4 bits of element i of block 2p, high nibble = of block 2p+1
 * so one 16-byte load gives every block's 5th bits and one 32-byte load two blocks' nibbles
 * in element order; the 4 scales convert with one vcvtph2ps (see quant_avx2.c). */
typedef struct { uint16_t d[4]; uint8_t qh[16]; uint8_t qs[64]; } eng_block_q5_0x4; /* 88 B */
typedef struct {                                                                     /* 144 B */
    uint16_t d, dmin;                      /* super-block scale for scales / mins */
    uint8_t scales[ENG_K_SCALE_SIZE];      /* 8 x (6-bit scale, 6-bit min), packed */
    uint8_t qs[ENG_QK_K / 2];              /* 4-bit quants */
} eng_block_q4_K;
typedef struct {                                                                     /* 176 B */
    uint16_t d, dmin;
    uint8_t scales[ENG_K_SCALE_SIZE];
    uint8_t qh[ENG_QK_K / 8];              /* 5th bit */
    uint8_t qs[ENG_QK_K / 2];              /* low 4 bits */
} eng_block_q5_K;
typedef struct {                                                                     /* 210 B */
    uint8_t ql[ENG_QK_K / 2];              /* low 4 bits */
    uint8_t qh[ENG_QK_K / 4];              /* high 2 bits */
    int8_t scales[ENG_QK_K / 16];          /* 16 x 8-bit scales */
    uint16_t d;
} eng_block_q6_K;
typedef struct {                                                                     /* 292 B */
    float d;                               /* f32 scale (negative: see quantize_row_q8_K_ref) */
    int8_t qs[ENG_QK_K];
    int16_t bsums[ENG_QK_K / 16];          /* sums of each 16 quants */
} eng_block_q8_K;

/* ---- type info */
bool        eng__type_supported(int t);          /* one of the eng_type values above */
bool        eng__type_internal(int t);           /* a type files must not carry (ENG_T_Q5_0X4) */
int64_t     eng__type_block_elems(eng_type t);   /* elements per block (1 for F32/F16/BF16); 0 if unsupported */
size_t      eng__type_block_bytes(eng_type t);   /* bytes per block; 0 if unsupported */
const char *eng__type_name(eng_type t);          /* "q4_K", ...; "?" if unsupported */
/* Bytes of a row of n elements (n must be a multiple of the block size). */
size_t      eng__row_bytes(eng_type t, int64_t n);
/* Weight row type -> the activation row type the kernels expect (llama.cpp vec_dot_type):
 * F32->F32, F16->F16, BF16->BF16, Q4_0/Q5_0/Q8_0->Q8_0, Q4_K/Q5_K/Q6_K->Q8_K. */
eng_type    eng__vec_dot_type(eng_type w);

/* ---- scalar conversions (round to nearest even; F16C hardware on the x86-64-v3 baseline) */
float    eng__fp16_to_fp32(uint16_t h);
uint16_t eng__fp32_to_fp16(float f);
float    eng__bf16_to_fp32(uint16_t h);
uint16_t eng__fp32_to_bf16(float f);             /* as ggml: RNE, NaN kept quiet */

/* ---- rows */
/* dst[0..n) = src row of type t, dequantized. */
void eng__dequant_row(eng_type t, const void *src, float *dst, int64_t n);
/* Quantize/convert n floats into a row of type vt (any supported type, incl. F32 copy,
 * F16/BF16 conversion). Q8_0 and Q8_K match llama.cpp's activation quantizers exactly;
 * Q4_0/Q5_0 match ggml's reference weight quantizers; Q4_K/Q5_K/Q6_K are simpler
 * (min-max / max-abs per sub-block) than llama-quantize's search, so not bit-identical. */
void eng__quantize_row(eng_type vt, const float *x, void *dst, int64_t n);

/* Re-lays a Q5_0 row of n elements (n a multiple of 128) as Q5_0X4; src == dst allowed
 * (each 88-byte group is read before it is written). Same values, same dot products (bit
 * for bit: the kernels take the same integer and float steps as for Q5_0). */
void eng__q5_0x4_from_q5_0(const void *src, void *dst, int64_t n);

/* ---- kernels */
/* One dot product: W row (type wt) . X row (type eng__vec_dot_type(wt)), n elements. */
float eng__vec_dot(eng_type wt, int64_t n, const void *w, const void *x);

/* y[t*ldy + r] = dot(W row r, X row t) for r in [r0,r1), t in [0,n_tok).
 * W row r starts at (char*)W + r*w_row_bytes; X row t at (char*)X + t*x_row_bytes and is
 * already in eng__vec_dot_type(wt). Single-threaded; the caller splits [r0,r1) across
 * threads. Hot: tiles several weight rows x several tokens so each loaded weight block is
 * reused (prompt processing) and streams weights once for n_tok = 1 (generation). */
void eng__matmul(eng_type wt, const void *W, size_t w_row_bytes, int64_t n_in, int64_t r0, int64_t r1,
                const void *X, size_t x_row_bytes, int64_t n_tok, float *y, int64_t ldy);

/* As eng__matmul, with a caller-owned workspace for the prompt kernels (n_tok > 1): given
 * ws_bytes >= ENG_MATMUL_WS_BYTES (any alignment), the AVX2 Q4_0/Q5_0/Q8_0 prompt kernels
 * unpack the weights of larger row chunks into it (measured 5-20% faster per matrix than
 * with their 34 KiB stack buffer). ws = NULL / smaller: the stack buffer, same results
 * (bit-identical). The workspace is scratch only (no state kept between calls); one per
 * concurrent caller. Generation (n_tok = 1) and the other kernels ignore it. */
#define ENG_MATMUL_WS_BYTES ((size_t)448 * 1024 + 32)
void eng__matmul_ws(eng_type wt, const void *W, size_t w_row_bytes, int64_t n_in, int64_t r0, int64_t r1,
                   const void *X, size_t x_row_bytes, int64_t n_tok, float *y, int64_t ldy, void *ws, size_t ws_bytes);

/* ---- explicit kernel selection (tests, benchmarks). eng__matmul/eng__vec_dot use
 * eng__isa_best(). */
typedef enum { ENG_ISA_SCALAR = 0, ENG_ISA_AVX2 = 1, ENG_ISA_AVX512 = 2 } eng_isa;
bool        eng__isa_available(eng_isa isa);     /* CPU (and OS) can run it */
eng_isa     eng__isa_best(void);
const char *eng__isa_name(eng_isa isa);
/* As eng__matmul with a given kernel set; an unavailable isa falls back to the best one
 * available below it. */
void eng__matmul_isa(eng_isa isa, eng_type wt, const void *W, size_t w_row_bytes, int64_t n_in,
                    int64_t r0, int64_t r1, const void *X, size_t x_row_bytes, int64_t n_tok,
                    float *y, int64_t ldy);
/* eng__matmul_isa with a workspace (see eng__matmul_ws). */
void eng__matmul_isa_ws(eng_isa isa, eng_type wt, const void *W, size_t w_row_bytes, int64_t n_in,
                       int64_t r0, int64_t r1, const void *X, size_t x_row_bytes, int64_t n_tok,
                       float *y, int64_t ldy, void *ws, size_t ws_bytes);

/* ---- internal: per-ISA kernel sets (quant_avx2.c, quant_avx512.c). Each returns false
 * when it has no kernel for wt (the caller then falls back to the next ISA down). Only
 * call the AVX-512 one when lcx__cpu_has_avx512(). */
bool eng__matmul_avx2(eng_type wt, const void *W, size_t w_row_bytes, int64_t n_in, int64_t r0,
                     int64_t r1, const void *X, size_t x_row_bytes, int64_t n_tok, float *y,
                     int64_t ldy, void *ws, size_t ws_bytes);
bool eng__matmul_avx512(eng_type wt, const void *W, size_t w_row_bytes, int64_t n_in, int64_t r0,
                       int64_t r1, const void *X, size_t x_row_bytes, int64_t n_tok, float *y,
                       int64_t ldy);
/* Scalar reference (quant.c). */
float eng__vec_dot_ref(eng_type wt, int64_t n, const void *w, const void *x);
/* AVX2 activation quantizers (same results as the scalar ones, checked by tests). */
void eng__quantize_row_q8_0_avx2(const float *x, void *dst, int64_t n);
void eng__quantize_row_q8_K_avx2(const float *x, void *dst, int64_t n);
/* Scalar reference quantizers (quant.c), for the tests that compare the AVX2 ones. */
void eng__quantize_row_q8_0_ref(const float *x, void *dst, int64_t n);
void eng__quantize_row_q8_K_ref(const float *x, void *dst, int64_t n);

#endif
