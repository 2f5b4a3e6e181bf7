/* AVX2 matmul kernels (x86-64-v3 baseline: AVX2 + FMA + F16C) and the AVX2 activation
 * quantizers.
 *
 * Structure: eng__matmul_avx2 walks the output in tiles of R weight rows x T tokens. Inside a
 * tile each weight block is loaded and unpacked once and reused for all T activation rows,
 * each activation block once for all R weight rows.
 *   prompts (n_tok > 1): Q8_0 family and K-quants 1 row x 8 tokens, floats 2 rows x 4
 *     tokens; rows in chunks (Q8_0 family: unpacked once per chunk into the caller's
 *     workspace, up to 448 KiB; K-quants 384 KiB; floats 128 KiB; L2-resident) while every
 *     token tile sweeps over the chunk (the activations, at most a few MB, stream from L2/L3;
 *     Q8_0 family: re-laid per token tile and K step of 32 blocks into an aligned L1 tile).
 *   generation (n_tok = 1): quantized types in 4 far-apart row streams (see VEC_S: one row
 *     from each quarter of the rows per step, ~1.2x faster from DRAM than one sequential
 *     stream, which was ~1.6x faster than 4 adjacent rows), software prefetch per stream;
 *     floats 4 adjacent rows per pass.
 *
 * Integer products (all exact, no saturation):
 *   Q8_0 weights: sign trick as ggml: maddubs(|w|, sign(x, w)) -> pairs of products
 *     (|.| <= 2*128*127 < 2^15), madd with ones -> 8 x int32, one float fma with d_w*d_x.
 *     Prompts (all three types) instead: signed quants split into even/odd int16, two madd
 *     and an add give the same 8 int32 lane sums (see split_evod).
 *   Q4_0/Q5_0 weights: the stored unsigned quants (0..15 / 0..31) go straight into maddubs
 *     (|pair| <= 2*31*127); the zero point 8/16 is removed with the activation block sums
 *     (see load_dx_q8_0). Q5_0 generation instead: maddubs(4-bit lo, x) - maddubs(16, x
 *     where the 5th bit is clear), the same pair sums (see q80fam_vec).
 *   K family: unsigned 4/5/6-bit quants straight into maddubs against the Q8_K row, madd
 *     with the sub-block scales, int32 accumulation over the 256-element super-block; the
 *     Q4_K/Q5_K mins and the Q6_K offset of 32 come from the Q8_K bsums.
 * Only float summation order differs from the scalar reference in quant.c. */
#include <immintrin.h>
#include "util/simd.h"
#include <math.h>
#include <string.h>

#include "engine/quant.h"

#define AI static inline __attribute__((always_inline))

AI float ldh(const void *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

/* 32 bits -> 32 bytes, byte i = 0xFF when bit i is set (ggml bytes_from_bits_32). */
AI __m256i bits_to_bytes(const uint8_t *p)
{
    uint32_t x32;
    memcpy(&x32, p, 4);
    const __m256i shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
    __m256i b = _mm256_shuffle_epi8(_mm256_set1_epi32((int)x32), shuf);
    b = _mm256_or_si256(b, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe));
    return _mm256_cmpeq_epi8(b, _mm256_set1_epi64x(-1));
}

/* ------------------------------------------------------------------ Q8_0 family */

/* The 16 bytes of 4-bit pairs -> 32 bytes in element order (low nibbles = elements 0..15,
 * high nibbles = 16..31): broadcast to both 128-bit lanes, shift the upper lane's 64-bit
 * words right by 4, mask. Two ALU ops (the broadcast is a load). */
AI __m256i nibbles32(const uint8_t *p16)
{
    __m256i q = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)p16));
    q = _mm256_srlv_epi64(q, _mm256_set_epi64x(4, 4, 0, 0));
    return _mm256_and_si256(q, _mm256_set1_epi8(0xF));
}

/* Signed int8 quants of one Q4_0 / Q5_0 / Q8_0 block, in element order. */
AI __m256i q80fam_unpack(eng_type wt, const uint8_t *blk)
{
    if (wt == ENG_T_Q8_0) return _mm256_loadu_si256((const __m256i *)(blk + 2));
    if (wt == ENG_T_Q4_0) return _mm256_sub_epi8(nibbles32(blk + 2), _mm256_set1_epi8(8));
    /* Q5_0: q | 0xF0 where the 5th bit is clear == q - 16 as int8 */
    __m256i hb = _mm256_andnot_si256(bits_to_bytes(blk + 2), _mm256_set1_epi8((char)0xF0));
    return _mm256_or_si256(nibbles32(blk + 6), hb);
}

/* Q4_0 / Q5_0 quants as stored, unsigned (0..15 / 0..31): the zero point (8 / 16) is taken
 * out afterwards through the activation block sums, which saves the abs/sign steps. */
AI __m256i q80fam_unpack_u(eng_type wt, const uint8_t *blk)
{
    if (wt == ENG_T_Q4_0) return nibbles32(blk + 2);
    return _mm256_or_si256(nibbles32(blk + 6), _mm256_and_si256(bits_to_bytes(blk + 2), _mm256_set1_epi8(0x10)));
}

AI size_t q80fam_bytes(eng_type wt)
{
    return wt == ENG_T_Q4_0 ? sizeof(eng_block_q4_0) : wt == ENG_T_Q5_0 ? sizeof(eng_block_q5_0) : sizeof(eng_block_q8_0);
}

#ifndef PF_DIST
#define PF_DIST 4096
#endif
#define PP_T 8      /* token tile for prompt processing (Q8_0 family) */
#define ENG_SEG 512 /* blocks per column segment of Q8_0 rows (16384 elements): bounds the generation x table */
/* column segment for Q4_0/Q5_0 (generation and, for identical float steps, prompts): rows up
 * to 5120 elements are one segment */
#define PP_SEG 160
/* K step of the prompt tile: blocks of the activation tile built at a time, 24 KiB at
 * PP_T * 96 bytes per block, so the tile stays in L1 (32 KiB) while every row of a chunk
 * sweeps it (a whole 4864-wide tile, 39-78 KiB, was read from L2 for every row: ~15-20%
 * slower per block product than the 896-wide ones) */
#define PP_KS 32
/* most rows of a chunk when a segment has several K steps: the per-row accumulators are
 * kept between K steps (PP_T vectors per row, 16 KiB) */
#define PP_ROWS 64

/* int8 x int8 block products in int16 lanes, laid out so that the int32 lanes are those of
 * ggml's maddubs/madd form: for 32 signed bytes v (as 16 int16 words), ev = the even bytes
 * (sign-extended), od = the odd bytes; madd(ev_w, ev_x) + madd(od_w, od_x) has in lane j
 * elements 4j, 4j+2 and 4j+1, 4j+3, i.e. the same exact int32 lane sums as
 * madd(maddubs(|w|, sign(x, w)), 1) (lane j = elements 4j..4j+3). So the float steps after
 * it, and the results, are identical to the generation kernel's (bit-identity test). */
AI void split_evod(__m256i v, __m256i *ev, __m256i *od)
{
    *ev = _mm256_srai_epi16(_mm256_slli_epi16(v, 8), 8);
    *od = _mm256_srai_epi16(v, 8);
}

/* Prompt activation tile (Q8_0 family): tokens [0,T) x blocks [0,nb) of the Q8_0 rows,
 * re-laid block-major and widened, so the tile kernel reads one aligned, sequential stream
 * of XT_V vectors per block b (at xt + XT_V*b):
 *   [2t] / [2t+1]  even / odd quants of token t as int16 (the Q8_0 rows have 34-byte
 *                  blocks: half of the direct 32-byte loads split a line)
 *   [2*PP_T]       the scales d_x of tokens 0..3, twice (lanes 0-3 and 4-7)
 *   [2*PP_T + 1]   those of tokens 4..7, twice (tokens >= T: 0)
 * The tile forms d_w*d_x for 4 tokens with one mul and takes token t's product with an
 * in-lane vpermilps (both 128-bit halves hold the same 4 values, so that is a broadcast):
 * 2 loads per block product instead of 3 (the former tile kept d_x pre-broadcast per token,
 * a third 32-byte load and a mul per product) and a 16.6 KiB tile instead of 24.
 * Built once per (row chunk, token tile, K step) and reused by every row of the chunk. */
#define XT_V (2 * PP_T + 2)
AI void load_xt_q8_0(const uint8_t *X, size_t xrb, int T, int64_t nb, __m256i *xt)
{
    for (int64_t b = 0; b < nb; b++) {
        float dx[PP_T] = {0};
        __m256i *o = xt + XT_V * b;
        for (int t = 0; t < T; t++) {
            const uint8_t *blk = X + t * xrb + b * sizeof(eng_block_q8_0);
            split_evod(_mm256_loadu_si256((const __m256i *)(blk + 2)), &o[2 * t], &o[2 * t + 1]);
            dx[t] = ldh(blk);
        }
        const __m128 lo = _mm_loadu_ps(dx), hi = _mm_loadu_ps(dx + 4);
        o[2 * PP_T] = _mm256_castps_si256(_mm256_set_m128(lo, lo));
        o[2 * PP_T + 1] = _mm256_castps_si256(_mm256_set_m128(hi, hi));
    }
}

/* Prompt weight rows, pre-unpacked once per row chunk (every token tile of the prompt then
 * reuses them from L2): wq[2b] / wq[2b+1] = even / odd quants of block b as int16 (signed:
 * Q4_0 q-8, Q5_0 q-16, Q8_0 q; split_evod), wd[b] = d_w as float. Unpacking inside the tile
 * instead cost, per block and row, ~12 ops for Q5_0 (5th-bit expansion, nibbles, split) and
 * 3 for Q8_0, spent again for every token tile (64 per pp512). */
/* Block k (0..3) of a Q5_0X4 group (layout: quant.h) as unsigned quants 0..31 in element
 * order: the two blocks' nibble byte vector, masked (k even) or shifted down (k odd), or'ed
 * with the 5th bits: H (nibbles32 of qh) has block k's bit at bit k of byte i; and with
 * 1 << k, shift up to bit 4 (16-bit shift: the single kept bit cannot cross a byte). */
AI __m256i q5x4_u(const __m256i q2, const __m256i H, const int k)
{
    const __m256i m4 = _mm256_set1_epi8(0xF);
    const __m256i lo = (k & 1) ? _mm256_and_si256(_mm256_srli_epi16(q2, 4), m4) : _mm256_and_si256(q2, m4);
    return _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(H, _mm256_set1_epi8((char)(1 << k))), 4 - k));
}

AI void q80fam_unpack_rows(eng_type wt, const uint8_t *W, size_t wrb, int64_t nrows, int64_t nb, __m256i *wq, float *wd)
{
    if (wt == ENG_T_Q5_0X4) { /* same signed quants and scales as the Q5_0 blocks it came from */
        for (int64_t k0 = 0; k0 < nb; k0 += PP_KS) {
            const int64_t kn = nb - k0 < PP_KS ? nb - k0 : PP_KS;
            for (int64_t r = 0; r < nrows; r++) {
                const int64_t i0 = nrows * k0 + r * kn;
                for (int64_t b = 0; b < kn; b++) {
                    const uint8_t *g = W + r * wrb + (k0 + b) / 4 * sizeof(eng_block_q5_0x4);
                    const int k = (int)((k0 + b) % 4);
                    const __m256i q2 = _mm256_loadu_si256((const __m256i *)(g + 24 + 32 * (k >> 1))), H = nibbles32(g + 8);
                    __m256i u;
                    switch (k) {
                    case 0: u = q5x4_u(q2, H, 0); break;
                    case 1: u = q5x4_u(q2, H, 1); break;
                    case 2: u = q5x4_u(q2, H, 2); break;
                    default: u = q5x4_u(q2, H, 3); break;
                    }
                    wd[i0 + b] = ldh(g + 2 * k);
                    split_evod(_mm256_sub_epi8(u, _mm256_set1_epi8(16)), &wq[2 * (i0 + b)], &wq[2 * (i0 + b) + 1]);
                }
            }
        }
        return;
    }
    const size_t bs = q80fam_bytes(wt);
    /* K-step-major: block b of row r, in K step k0 (kn blocks), at index nrows*k0 + r*kn +
     * (b - k0) (q80_ws_at), so the rows of one K step are one contiguous run */
    for (int64_t k0 = 0; k0 < nb; k0 += PP_KS) {
        const int64_t kn = nb - k0 < PP_KS ? nb - k0 : PP_KS;
        for (int64_t r = 0; r < nrows; r++) {
            const int64_t i0 = nrows * k0 + r * kn;
            for (int64_t b = 0; b < kn; b++) {
                const uint8_t *blk = W + r * wrb + (k0 + b) * bs;
                wd[i0 + b] = ldh(blk);
                split_evod(q80fam_unpack(wt, blk), &wq[2 * (i0 + b)], &wq[2 * (i0 + b) + 1]);
            }
        }
    }
}
#define DEF_Q80_UNPACK(NAME, WT)                                                                         \
    static void NAME(const uint8_t *W, size_t wrb, int64_t nrows, int64_t nb, __m256i *wq, float *wd)   \
    {                                                                                                    \
        q80fam_unpack_rows(WT, W, wrb, nrows, nb, wq, wd);                                               \
    }
DEF_Q80_UNPACK(q80_unpack_q8_0, ENG_T_Q8_0)
DEF_Q80_UNPACK(q80_unpack_q4_0, ENG_T_Q4_0)
DEF_Q80_UNPACK(q80_unpack_q5_0, ENG_T_Q5_0)
DEF_Q80_UNPACK(q80_unpack_q5_0x4, ENG_T_Q5_0X4)
typedef void (*q80_unpack_fn)(const uint8_t *W, size_t wrb, int64_t nrows, int64_t nb, __m256i *wq, float *wd);

/* hot: prompts, one pre-unpacked weight row (wq, wd) x T tokens over the nb blocks of one K
 * step. acc[t] (8 float lanes per token) carries the sums across K steps (first: start at
 * 0; last: reduce into y[t*ldy], (+)= when add). Per block product: 2 madd, add, cvt, the
 * scale d_w*d_x (one mul, d_x a memory operand), fma (the maddubs form needs a sign op per
 * product on top: ~10% slower per product in L1, and vpsignb competes with the FMAs for
 * ports). Q4_0/Q5_0 get the same int32 lane sums as their zero-point form in the generation
 * kernel (exact integers either way), and d_w*d_x is the same float product, so results
 * equal the generation kernel's. (A per-row pre-pass that stored the 8 scales of each block
 * for scalar broadcasts cost ~20% with 16-block K steps: per-call overhead; scale products
 * formed and stored inside the block loop waited on store-to-load forwarding.) */
/* Lane k (0-3) of each 128-bit half of x, broadcast within the half (vpermilps). A switch
 * rather than (k * 0x55) as the immediate: once the token loop is unrolled k is a constant
 * and this folds to one vpermilps, and without optimisation (the Debug/ASan build) the
 * immediate is still a literal. */
AI __m256 lane_bcast(__m256 x, int k)
{
    switch (k & 3) {
    case 0: return _mm256_permute_ps(x, 0x00);
    case 1: return _mm256_permute_ps(x, 0x55);
    case 2: return _mm256_permute_ps(x, 0xAA);
    default: return _mm256_permute_ps(x, 0xFF);
    }
}

AI void q80_tile(const int T, const __m256i *wq, const float *wd, const __m256i *xt, int64_t nb, __m256 *st, bool first,
                 bool last, bool add, float *y, int64_t ldy)
{
    __m256 acc[PP_T];
#pragma GCC unroll 8
    for (int t = 0; t < T; t++) acc[t] = first ? _mm256_setzero_ps() : st[t];
    for (int64_t b = 0; b < nb; b++) {
        const __m256i we = wq[2 * b], wo = wq[2 * b + 1];
        const __m256 dw = _mm256_broadcast_ss(wd + b);
        const __m256i *xb = xt + XT_V * b;
        /* d_w*d_x for tokens 0-3 / 4-7, each half of the vector holding the 4 products */
        const __m256 d03 = _mm256_mul_ps(dw, _mm256_castsi256_ps(xb[2 * PP_T]));
        const __m256 d47 = T > 4 ? _mm256_mul_ps(dw, _mm256_castsi256_ps(xb[2 * PP_T + 1])) : d03;
#pragma GCC unroll 8
        for (int t = 0; t < T; t++) {
            const __m256i p = _mm256_add_epi32(_mm256_madd_epi16(we, xb[2 * t]), _mm256_madd_epi16(wo, xb[2 * t + 1]));
            const __m256 d = lane_bcast(t < 4 ? d03 : d47, t);
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), d, acc[t]);
        }
    }
    if (!last) {
#pragma GCC unroll 8
        for (int t = 0; t < T; t++) st[t] = acc[t];
        return;
    }
#pragma GCC unroll 8
    for (int t = 0; t < T; t++) {
        const float v = lcx_hsum8(acc[t]);
        if (add) y[t * ldy] += v;
        else y[t * ldy] = v;
    }
}

static void q80_tile_t(int T, const __m256i *wq, const float *wd, const __m256i *xt, int64_t nb, __m256 *st, bool first,
                       bool last, bool add, float *y, int64_t ldy)
{
    switch (T) {
    case 8: q80_tile(8, wq, wd, xt, nb, st, first, last, add, y, ldy); break;
    case 7: q80_tile(7, wq, wd, xt, nb, st, first, last, add, y, ldy); break;
    case 6: q80_tile(6, wq, wd, xt, nb, st, first, last, add, y, ldy); break;
    case 5: q80_tile(5, wq, wd, xt, nb, st, first, last, add, y, ldy); break;
    case 4: q80_tile(4, wq, wd, xt, nb, st, first, last, add, y, ldy); break;
    case 3: q80_tile(3, wq, wd, xt, nb, st, first, last, add, y, ldy); break;
    case 2: q80_tile(2, wq, wd, xt, nb, st, first, last, add, y, ldy); break;
    default: q80_tile(1, wq, wd, xt, nb, st, first, last, add, y, ldy); break;
    }
}

/* Generation: per activation block b (shared by every weight row of the call, so computed
 * once): xv[b].d = d_x broadcast to 8 lanes (a memory operand for the mul instead of a
 * broadcast per row and block) and, for Q4_0/Q5_0, xv[b].z = zoff * (x_2i + x_2i+1) as 16
 * int16 (|.| <= 16*254): subtracting it from maddubs(u, x) gives exactly the pair sums of
 * (u - zoff) * x (|.| <= 2*16*128, no overflow), which replaces the float zero-point
 * table, its broadcast and a float subtraction. With zoff = 0 (Q8_0, and Q5_0, whose matvec
 * takes its zero point from the weight bits) xv[b].z = the block's 32 quants instead: an
 * aligned copy, so the matvec's x loads never split a cache line (34-byte Q8_0 blocks). */
typedef struct { __m256 d; __m256i z; } q80_xv;

AI void load_xv_q8_0(const uint8_t *X, int64_t nb, int zoff, q80_xv *xv)
{
    const __m256i z8 = _mm256_set1_epi8((char)zoff);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = X + b * sizeof(eng_block_q8_0);
        xv[b].d = _mm256_set1_ps(ldh(blk));
        const __m256i x = _mm256_loadu_si256((const __m256i *)(blk + 2));
        xv[b].z = zoff ? _mm256_maddubs_epi16(z8, x) : x;
    }
}

/* Generation matvecs read VEC_S far-apart row streams at once: rows [0, nrows) are cut into
 * VEC_S contiguous ranges ("quarters" of q = nrows / VEC_S rows; the nrows % VEC_S rows
 * left over run alone at the end) and step i handles row i of every range, block
 * by block, with one accumulator per row. Why: from DRAM one sequential stream falls short
 * of a plain read loop, and 4 far-apart streams with a software prefetch each keep more
 * misses in flight (2, 8 or no prefetch were slower; adjacent rows are one stream, not
 * several; figures in docs/benchmarks/engine.md "Kernel choices"). Every row still sums
 * its blocks in order into its own accumulator with the same float steps, so results are
 * bit-identical to the one-row kernel (tested). */
#define VEC_S 4

/* The first PF_DIST bytes of each of a call's streams (a call is one chunk of a threaded
 * matvec; the in-loop prefetch runs PF_DIST ahead and never covers a stream's start). */
AI void vec_prefetch_start(const uint8_t *W, size_t wrb, int64_t nrows)
{
    const int64_t q = nrows / VEC_S;
    const int ns = q ? VEC_S : 1;
    const size_t len = q ? (size_t)q * wrb : (size_t)nrows * wrb;
    const size_t pfn = len < PF_DIST ? len : PF_DIST;
    for (int s = 0; s < ns; s++)
        for (size_t o = 0; o < pfn; o += 64) _mm_prefetch((const char *)W + (size_t)s * q * wrb + o, _MM_HINT_T0);
}

/* One Q8_0-family weight block x activation block b into acc (generation): int8 products
 * summed exactly in int32 lanes, then one fma with d_w*d_x: the same float steps as
 * q80_tile's token lane, so generation and prompt logits are bit-identical.
 *   Q8_0: ggml's sign trick, maddubs(|w|, sign(x, w)).
 *   Q4_0: unsigned quants, maddubs(u, x) - xv.z (xv.z = 8*(x_2i + x_2i+1)).
 *   Q5_0: Σ (u - 16)*x = Σ lo*x - 16*Σ_{5th bit clear} x, per pair exactly in int16
 *     (|maddubs(lo, x)| <= 2*15*128, |16*pair| <= 16*2*128): the clear-bit mask (shuffle,
 *     and, cmpeq with 0) selects x, maddubs(16, .) scales. This drops the and-0x10/or that
 *     merged the 5th bit into u and the zero-point table load (faster in cache than the
 *     merged-u loop: docs/benchmarks/engine.md "Kernel choices"). */
AI __m256 q80fam_blk(eng_type wt, const uint8_t *blk, const uint8_t *xblk, const q80_xv *xb, __m256 acc)
{
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i p;
    if (wt == ENG_T_Q8_0) {
        const __m256i w = _mm256_loadu_si256((const __m256i *)(blk + 2)), x = xb->z; /* x: aligned copy */
        p = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
    } else if (wt == ENG_T_Q5_0) {
        const __m256i shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
        const __m256i bitm = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
        const __m256i x = xb->z; /* the block's quants, aligned (see load_xv_q8_0) */
        uint32_t qh;
        memcpy(&qh, blk + 2, 4);
        __m256i clr = _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh), shuf); /* byte i: qh byte i/8 */
        clr = _mm256_cmpeq_epi8(_mm256_and_si256(clr, bitm), _mm256_setzero_si256());
        p = _mm256_sub_epi16(_mm256_maddubs_epi16(nibbles32(blk + 6), x),
                             _mm256_maddubs_epi16(_mm256_set1_epi8(16), _mm256_and_si256(clr, x)));
    } else {
        const __m256i x = _mm256_loadu_si256((const __m256i *)(xblk + 2));
        p = _mm256_sub_epi16(_mm256_maddubs_epi16(q80fam_unpack_u(wt, blk), x), xb->z);
    }
    const __m256 pf = _mm256_cvtepi32_ps(_mm256_madd_epi16(p, ones));
    uint16_t h;
    memcpy(&h, blk, 2);
    const __m256 d = _mm256_mul_ps(_mm256_cvtph_ps(_mm_set1_epi16((short)h)), xb->d);
    return _mm256_fmadd_ps(pf, d, acc);
}

AI void vec_store(float *y, bool add, float v)
{
    if (add) *y += v;
    else *y = v;
}

/* hot: generation (n_tok = 1) for the Q8_0 family: rows [0, nrows) of W in VEC_S streams
 * (see VEC_S), one accumulator per row (two accumulators per row were ~10% faster in cache,
 * but the matvec is DRAM-bound). One software prefetch PF_DIST ahead per stream and pair
 * of blocks (68 bytes for Q8_0: about one per cache line). */
AI void q80fam_vec_s(eng_type wt, const int S, const uint8_t *W, size_t wrb, int64_t nrows, const uint8_t *X,
                     int64_t nb, const q80_xv *xv, bool add, float *y)
{
    const size_t bs = q80fam_bytes(wt);
    const int64_t q = nrows / S;
    for (int64_t i = 0; i < q; i++) {
        const uint8_t *rw[VEC_S]; /* S <= VEC_S */
        __m256 acc[VEC_S];
#pragma GCC unroll 4
        for (int s = 0; s < S; s++) {
            rw[s] = W + (s * q + i) * wrb;
            acc[s] = _mm256_setzero_ps();
        }
        int64_t b = 0;
        for (; b + 2 <= nb; b += 2) {
            const uint8_t *xb = X + b * sizeof(eng_block_q8_0);
#pragma GCC unroll 4
            for (int s = 0; s < S; s++) {
                const uint8_t *blk = rw[s] + b * bs;
                _mm_prefetch((const char *)blk + PF_DIST, _MM_HINT_T0);
                acc[s] = q80fam_blk(wt, blk, xb, &xv[b], acc[s]);
                acc[s] = q80fam_blk(wt, blk + bs, xb + sizeof(eng_block_q8_0), &xv[b + 1], acc[s]);
            }
        }
        if (b < nb)
#pragma GCC unroll 4
            for (int s = 0; s < S; s++)
                acc[s] = q80fam_blk(wt, rw[s] + b * bs, X + b * sizeof(eng_block_q8_0), &xv[b], acc[s]);
#pragma GCC unroll 4
        for (int s = 0; s < S; s++) vec_store(y + s * q + i, add, lcx_hsum8(acc[s]));
    }
    for (int64_t r = S * q; r < nrows; r++) { /* the nrows % S rows left: one stream */
        const uint8_t *row = W + r * wrb;
        __m256 acc = _mm256_setzero_ps();
        for (int64_t b = 0; b < nb; b++) {
            _mm_prefetch((const char *)row + b * bs + PF_DIST, _MM_HINT_T0);
            acc = q80fam_blk(wt, row + b * bs, X + b * sizeof(eng_block_q8_0), &xv[b], acc);
        }
        vec_store(y + r, add, lcx_hsum8(acc));
    }
}

AI void q80fam_vec(eng_type wt, const uint8_t *W, size_t wrb, int64_t nrows, const uint8_t *X, int64_t nb,
                   const q80_xv *xv, bool add, float *y)
{
    q80fam_vec_s(wt, VEC_S, W, wrb, nrows, X, nb, xv, add, y);
}

static void q80_vec_q8_0(const uint8_t *W, size_t wrb, int64_t nrows, const uint8_t *X, int64_t nb,
                         const q80_xv *xv, bool add, float *y)
{
    q80fam_vec(ENG_T_Q8_0, W, wrb, nrows, X, nb, xv, add, y);
}
static void q80_vec_q4_0(const uint8_t *W, size_t wrb, int64_t nrows, const uint8_t *X, int64_t nb,
                         const q80_xv *xv, bool add, float *y)
{
    q80fam_vec(ENG_T_Q4_0, W, wrb, nrows, X, nb, xv, add, y);
}
static void q80_vec_q5_0(const uint8_t *W, size_t wrb, int64_t nrows, const uint8_t *X, int64_t nb,
                         const q80_xv *xv, bool add, float *y)
{
    q80fam_vec(ENG_T_Q5_0, W, wrb, nrows, X, nb, xv, add, y);
}


typedef void (*q80_vec_fn)(const uint8_t *W, size_t wrb, int64_t nrows, const uint8_t *X, int64_t nb,
                           const q80_xv *xv, bool add, float *y);

/* Generation activation table for Q5_0X4, per group of 4 blocks: the quants (aligned
 * copy), zx = 16 * (x_2i + x_2i+1) as int16 (maddubs(16, x)) and the 4 scales d_x. */
typedef struct { __m256i x[4], zx[4]; __m128 d4; } q5x4_xv;

AI void load_xv_q5_0x4(const uint8_t *X, int64_t ng, q5x4_xv *xv)
{
    const __m256i c16 = _mm256_set1_epi8(16);
    for (int64_t g = 0; g < ng; g++) {
        float d[4];
        for (int k = 0; k < 4; k++) {
            const uint8_t *blk = X + (4 * g + k) * sizeof(eng_block_q8_0);
            const __m256i x = _mm256_loadu_si256((const __m256i *)(blk + 2));
            xv[g].x[k] = x;
            xv[g].zx[k] = _mm256_maddubs_epi16(c16, x);
            d[k] = ldh(blk);
        }
        xv[g].d4 = _mm_loadu_ps(d);
    }
}

/* One Q5_0X4 group (4 blocks) x the activation group into acc (see q80_vec_q5_0x4). */
AI __m256 q5x4_grp(const uint8_t *G, const q5x4_xv *xg, __m256 acc)
{
    const __m256i ones = _mm256_set1_epi16(1);
    const __m128 d4 = _mm_mul_ps(_mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)G)), xg->d4);
    const __m256 d8 = _mm256_set_m128(d4, d4);
    const __m256i H = nibbles32(G + 8);
    const __m256i q01 = _mm256_loadu_si256((const __m256i *)(G + 24));
    const __m256i q23 = _mm256_loadu_si256((const __m256i *)(G + 56));
#define Q5X4_BLOCK(K, Q2)                                                                                  \
    do {                                                                                                   \
        const __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(q5x4_u(Q2, H, K), xg->x[K]), xg->zx[K]);   \
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(p, ones)), _mm256_permute_ps(d8, (K) * 0x55), acc); \
    } while (0)
    Q5X4_BLOCK(0, q01);
    Q5X4_BLOCK(1, q01);
    Q5X4_BLOCK(2, q23);
    Q5X4_BLOCK(3, q23);
#undef Q5X4_BLOCK
    return acc;
}

/* hot: generation for Q5_0X4 rows (ng groups of 4 blocks each), VEC_S row streams (see
 * VEC_S). Per block: the unsigned quants from the shared nibble vector and 5th-bit vector
 * (q5x4_u: 3-4 ops), maddubs(u, x) - zx = the exact pair sums of (u - 16) * x (|.| <=
 * 2*31*128), madd, cvt, and one fma with d_w*d_x, which comes from one 4-lane multiply per
 * group (d_w: one vcvtph2ps of the group's 4 scales) and an in-lane vpermilps per block. The
 * same int32 lane sums, the same float product d_w*d_x and the same fma chain as the Q5_0
 * matvec and the prompt tile, so results are bit-identical to Q5_0's; ~12 vector ops per
 * block instead of ~17 (5th-bit shuffle/compare/select, scale broadcast and conversion per
 * block). 88-byte groups: prefetches at G and G + 64 per stream leave no line out. */
AI void q80_vec_q5_0x4_s(const int S, const uint8_t *W, size_t wrb, int64_t nrows, int64_t ng, const q5x4_xv *xv,
                        bool add, float *y)
{
    const int64_t q = nrows / S;
    for (int64_t i = 0; i < q; i++) {
        const uint8_t *rw[VEC_S]; /* S <= VEC_S */
        __m256 acc[VEC_S];
#pragma GCC unroll 4
        for (int s = 0; s < S; s++) {
            rw[s] = W + (s * q + i) * wrb;
            acc[s] = _mm256_setzero_ps();
        }
        for (int64_t g = 0; g < ng; g++)
#pragma GCC unroll 4
            for (int s = 0; s < S; s++) {
                const uint8_t *G = rw[s] + g * sizeof(eng_block_q5_0x4);
                _mm_prefetch((const char *)G + PF_DIST, _MM_HINT_T0);
                _mm_prefetch((const char *)G + PF_DIST + 64, _MM_HINT_T0);
                acc[s] = q5x4_grp(G, &xv[g], acc[s]);
            }
#pragma GCC unroll 4
        for (int s = 0; s < S; s++) vec_store(y + s * q + i, add, lcx_hsum8(acc[s]));
    }
    for (int64_t r = S * q; r < nrows; r++) {
        const uint8_t *row = W + r * wrb;
        __m256 acc = _mm256_setzero_ps();
        for (int64_t g = 0; g < ng; g++) {
            const uint8_t *G = row + g * sizeof(eng_block_q5_0x4);
            _mm_prefetch((const char *)G + PF_DIST, _MM_HINT_T0);
            _mm_prefetch((const char *)G + PF_DIST + 64, _MM_HINT_T0);
            acc = q5x4_grp(G, &xv[g], acc);
        }
        vec_store(y + r, add, lcx_hsum8(acc));
    }
}

static void q80_vec_q5_0x4(const uint8_t *W, size_t wrb, int64_t nrows, int64_t ng, const q5x4_xv *xv, bool add,
                           float *y)
{
    q80_vec_q5_0x4_s(VEC_S, W, wrb, nrows, ng, xv, add, y);
}

/* Q4_0/Q5_0/Q8_0 x Q8_0 driver: column segments (the x tables on the stack), generation
 * in VEC_S row streams over all rows, prompts in row chunks that stay in L2 while every token
 * tile of PP_T sweeps over them (one weight row per tile: the weight block is unpacked
 * once for PP_T tokens). */
static void q80fam_matmul(q80_unpack_fn ufn, q80_vec_fn vfn, size_t bs, const uint8_t *W, size_t wrb, int64_t n_in,
                          int64_t r0, int64_t r1, const uint8_t *X, size_t xrb, int64_t n_tok, float *y, int64_t ldy,
                          void *ws, size_t ws_bytes)
{
    const int zoff = bs == sizeof(eng_block_q4_0) ? 8 : bs == sizeof(eng_block_q5_0) ? 16 : 0;
    const int64_t nb_all = n_in / 32, seg = zoff ? PP_SEG : ENG_SEG;
    /* generation x table, or (prompts) the fallback unpack buffer: 34 KiB */
    union {
        q80_xv xv[ENG_SEG];
        q5x4_xv x4[PP_SEG / 4];
        __m256i small[(ENG_SEG * (2 * sizeof(__m256i) + sizeof(float)) + 31) / 32];
    } u;
    if (n_tok == 1 && !vfn) { /* Q5_0X4 (PP_SEG is a multiple of its 4-block groups) */
        for (int64_t s0 = 0; s0 < nb_all; s0 += seg) {
            const int64_t nb = nb_all - s0 < seg ? nb_all - s0 : seg;
            const uint8_t *Ws = W + s0 * bs, *Xs = X + s0 * sizeof(eng_block_q8_0);
            load_xv_q5_0x4(Xs, nb / 4, u.x4);
            vec_prefetch_start(Ws + r0 * wrb, wrb, r1 - r0);
            q80_vec_q5_0x4(Ws + r0 * wrb, wrb, r1 - r0, nb / 4, u.x4, s0 > 0, y + r0);
        }
        return;
    }
    if (n_tok == 1) {
        q80_xv *xv = u.xv;
        for (int64_t s0 = 0; s0 < nb_all; s0 += seg) {
            const int64_t nb = nb_all - s0 < seg ? nb_all - s0 : seg;
            const uint8_t *Ws = W + s0 * bs, *Xs = X + s0 * sizeof(eng_block_q8_0);
            /* the Q5_0 matvec takes its zero point from the weights' bit mask, not xv.z */
            load_xv_q8_0(Xs, nb, bs == sizeof(eng_block_q5_0) ? 0 : zoff, xv);
            /* VEC_S far-apart row streams (see VEC_S): adjacent rows per pass share the x
             * block but stream slower from DRAM than one row (docs/benchmarks/engine.md
             * "Kernel choices"). */
            vec_prefetch_start(Ws + r0 * wrb, wrb, r1 - r0);
            vfn(Ws + r0 * wrb, wrb, r1 - r0, Xs, nb, xv, s0 > 0, y + r0);
        }
        return;
    }
    /* Prompts: per row chunk the weights are unpacked into wq/wd (the caller's workspace,
     * ENG_MATMUL_WS_BYTES: ~6.6K blocks, L2), then every token tile sweeps them; per (chunk,
     * token tile, K step) the activation tile is built once (24 KiB, L1) and every row of the
     * chunk runs over it. Column segments as for generation (y (+)= per segment: identical
     * float steps). Without a workspace, a 34 KiB stack buffer (one row of the longest
     * segment) does the same in smaller chunks (the activation tiles are rebuilt per chunk:
     * 5-20% slower per matrix). */
    __m256i xt[XT_V * PP_KS];                          /* 18 KiB */
    __m256 st[PP_ROWS * PP_T];                         /* 16 KiB: per-row accumulators between K steps */
    const size_t per_blk = 2 * sizeof(__m256i) + sizeof(float);
    __m256i *buf = u.small;
    size_t cap = sizeof u.small;
    if (ws && ws_bytes >= ENG_MATMUL_WS_BYTES) {
        buf = (__m256i *)(((uintptr_t)ws + 31) & ~(uintptr_t)31);
        cap = ws_bytes - (size_t)((uint8_t *)buf - (uint8_t *)ws);
    }
    for (int64_t s0 = 0; s0 < nb_all; s0 += seg) {
        const int64_t nb = nb_all - s0 < seg ? nb_all - s0 : seg;
        const bool add = s0 > 0;
        int64_t ch = (int64_t)(cap / (per_blk * nb));
        if (nb > PP_KS && ch > PP_ROWS) ch = PP_ROWS;
        if (ch < 1) ch = 1; /* cap holds one row of a whole segment */
        const uint8_t *Ws = W + s0 * bs, *Xs = X + s0 * sizeof(eng_block_q8_0);
        __m256i *wq = buf;
        float *wd = (float *)(buf + 2 * ch * nb);
        for (int64_t c0 = r0; c0 < r1; c0 += ch) {
            const int64_t c1 = c0 + ch < r1 ? c0 + ch : r1;
            ufn(Ws + c0 * wrb, wrb, c1 - c0, nb, wq, wd);
            for (int64_t t = 0; t < n_tok; t += PP_T) {
                const int T = n_tok - t < PP_T ? (int)(n_tok - t) : PP_T;
                for (int64_t k0 = 0; k0 < nb; k0 += PP_KS) {
                    const int64_t kn = nb - k0 < PP_KS ? nb - k0 : PP_KS;
                    load_xt_q8_0(Xs + t * xrb + k0 * sizeof(eng_block_q8_0), xrb, T, kn, xt);
                    const int64_t nr = c1 - c0;
                    for (int64_t r = 0; r < nr; r++)
                        q80_tile_t(T, wq + 2 * (nr * k0 + r * kn), wd + nr * k0 + r * kn, xt, kn,
                                   nb > PP_KS ? st + r * PP_T : NULL, k0 == 0, k0 + kn == nb, add, y + t * ldy + c0 + r, ldy);
                }
            }
        }
    }
}

/* ------------------------------------------------------------------ K family */

/* Q4_K/Q5_K: 8 scales and 8 mins (6 bit) from the packed 12 bytes (ggml's utmp shuffle). */
AI void k4_scales(const uint8_t *s12, uint8_t sc[8], uint8_t mn[8])
{
    uint32_t u[4];
    const uint32_t km1 = 0x3f3f3f3f, km2 = 0x0f0f0f0f, km3 = 0x03030303;
    memcpy(u, s12, 12);
    u[3] = ((u[2] >> 4) & km2) | (((u[1] >> 6) & km3) << 4);
    const uint32_t ua = u[1] & km1;
    u[1] = (u[2] & km2) | (((u[0] >> 6) & km3) << 4);
    u[2] = ua;
    u[0] &= km1;
    memcpy(sc, &u[0], 8);
    memcpy(mn, &u[2], 8);
}

/* hot: Q4_K / Q5_K x Q8_K, R rows x T tokens. */
AI void k45_tile(eng_type wt, const int R, const int T, const uint8_t *W, size_t wrb, const uint8_t *X,
                 size_t xrb, int64_t nb, float *y, int64_t ldy, int64_t ys)
{
    const size_t bs = wt == ENG_T_Q4_K ? sizeof(eng_block_q4_K) : sizeof(eng_block_q5_K);
    const __m256i m4 = _mm256_set1_epi8(0xF);
    float acc[4][8] = {{0}};
    for (int64_t i = 0; i < nb; i++) {
        __m256i isum[4][8], msum[4][8];
        float dw[4], dmw[4];
        const uint8_t *xbs[8];
#pragma GCC unroll 8
        for (int t = 0; t < T; t++) xbs[t] = X + t * xrb + i * sizeof(eng_block_q8_K);
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            const uint8_t *blk = W + r * wrb + i * bs;
            if (T == 1) /* generation: stream ahead (144/176-byte super-blocks) */
                for (int o = 0; o < (int)bs; o += 64) _mm_prefetch((const char *)blk + PF_DIST + o, _MM_HINT_T0);
            uint8_t sc[8], mn[8];
            k4_scales(blk + 4, sc, mn);
            dw[r] = ldh(blk);
            dmw[r] = ldh(blk + 2);
            /* mins duplicated per 16-group: bsums are per 16 quants, mins per 32 */
            const __m256i mins16 = _mm256_cvtepu8_epi16(
                _mm_unpacklo_epi8(_mm_loadl_epi64((const __m128i *)mn), _mm_loadl_epi64((const __m128i *)mn)));
#pragma GCC unroll 8
            for (int t = 0; t < T; t++) {
                const eng_block_q8_K *xb = (const eng_block_q8_K *)xbs[t];
                msum[r][t] = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)xb->bsums), mins16);
                isum[r][t] = _mm256_setzero_si256();
            }
            /* the 8 sub-block scales as int16 in both 128-bit lanes; sub-block j's scale
             * broadcast by one byte shuffle (was a scalar load + vmovd + vpbroadcastw each) */
            const __m256i sc16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)sc)));
            const uint8_t *qs = blk + (wt == ENG_T_Q4_K ? 16 : 48);
            __m256i qh = _mm256_setzero_si256();
            if (wt == ENG_T_Q5_K) qh = _mm256_loadu_si256((const __m256i *)(blk + 16));
#pragma GCC unroll 8
            for (int j = 0; j < 4; j++) {
                const __m256i q = _mm256_loadu_si256((const __m256i *)(qs + 32 * j));
                __m256i lo = _mm256_and_si256(q, m4);
                __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
                if (wt == ENG_T_Q5_K) {
                    const __m256i one = _mm256_set1_epi8(1);
                    lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * j), one), 4));
                    hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * j + 1), one), 4));
                }
                const __m256i s0 = _mm256_shuffle_epi8(sc16, _mm256_set1_epi16((short)(0x0100 + 0x0202 * (2 * j)))),
                              s1 = _mm256_shuffle_epi8(sc16, _mm256_set1_epi16((short)(0x0100 + 0x0202 * (2 * j + 1))));
#pragma GCC unroll 8
                for (int t = 0; t < T; t++) {
                    const int8_t *xq = ((const eng_block_q8_K *)xbs[t])->qs + 64 * j;
                    __m256i p0 = _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)xq));
                    __m256i p1 = _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(xq + 32)));
                    p0 = _mm256_add_epi32(_mm256_madd_epi16(p0, s0), _mm256_madd_epi16(p1, s1));
                    isum[r][t] = _mm256_add_epi32(isum[r][t], p0);
                }
            }
        }
        /* per super-block: d_w*d_x*Σ sc*q*x - dmin_w*d_x*Σ m*bsum, ints reduced exactly */
#pragma GCC unroll 8
        for (int r = 0; r < R; r++)
#pragma GCC unroll 8
            for (int t = 0; t < T; t++) {
                const float dx = ((const eng_block_q8_K *)xbs[t])->d;
                __m256i v = isum[r][t], m = msum[r][t];
                __m256i h = _mm256_hadd_epi32(v, m);
                __m128i s = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
                s = _mm_hadd_epi32(s, s);
                const int32_t iv = _mm_cvtsi128_si32(s), im = _mm_extract_epi32(s, 1);
                /* the float steps of kq_sb's lane t, in the same order, so generation and
                 * prompts give bit-identical results per token */
                acc[r][t] = fmaf(-(float)im, dmw[r] * dx, acc[r][t]);
                acc[r][t] = fmaf((float)iv, dw[r] * dx, acc[r][t]);
            }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 8
        for (int t = 0; t < T; t++) y[t * ldy + r * ys] = acc[r][t];
}

/* hot: Q6_K x Q8_K, R rows x T tokens. Quants are used unsigned (0..63); the -32 offset
 * is Σ_j sc_j * 32 * bsum_j, subtracted once per super-block. */
AI void q6k_tile(const int R, const int T, const uint8_t *W, size_t wrb, const uint8_t *X, size_t xrb,
                 int64_t nb, float *y, int64_t ldy, int64_t ys)
{
    const __m256i m4 = _mm256_set1_epi8(0xF), m3 = _mm256_set1_epi8(3);
    float acc[4][8] = {{0}};
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *xbs[8];
#pragma GCC unroll 8
        for (int t = 0; t < T; t++) xbs[t] = X + t * xrb + i * sizeof(eng_block_q8_K);
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            const eng_block_q6_K *b = (const eng_block_q6_K *)(W + r * wrb + i * sizeof(eng_block_q6_K));
            if (T == 1)
                for (int o = 0; o < (int)sizeof(eng_block_q6_K); o += 64)
                    _mm_prefetch((const char *)b + PF_DIST + o, _MM_HINT_T0);
            const __m128i sc8 = _mm_loadu_si128((const __m128i *)b->scales);
            const __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
            __m256i isum[8];
#pragma GCC unroll 8
            for (int t = 0; t < T; t++) {
                const eng_block_q8_K *xb = (const eng_block_q8_K *)xbs[t];
                /* -32 * Σ sc_j * bsum_j */
                isum[t] = _mm256_slli_epi32(_mm256_madd_epi16(sc16, _mm256_loadu_si256((const __m256i *)xb->bsums)), 5);
                isum[t] = _mm256_sub_epi32(_mm256_setzero_si256(), isum[t]);
            }
#pragma GCC unroll 2
            for (int n = 0; n < 2; n++) {
                const __m256i ql0 = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * n));
                const __m256i ql1 = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * n + 32));
                const __m256i qh = _mm256_loadu_si256((const __m256i *)(b->qh + 32 * n));
                __m256i q[4];
                q[0] = _mm256_or_si256(_mm256_and_si256(ql0, m4), _mm256_slli_epi16(_mm256_and_si256(qh, m3), 4));
                q[1] = _mm256_or_si256(_mm256_and_si256(ql1, m4),
                                       _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), m3), 4));
                q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4),
                                       _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), m3), 4));
                q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
                                       _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), m3), 4));
                /* scales 8n..8n+7 as int16 in both 128-bit lanes: scv below is one byte shuffle
                 * (was two scalar loads, two broadcasts and an insert per group) */
                const __m256i scn = _mm256_broadcastsi128_si256(n ? _mm256_extracti128_si256(sc16, 1) : _mm256_castsi256_si128(sc16));
#pragma GCC unroll 8
                for (int g = 0; g < 4; g++) {
                    /* low lane: scale 8n+2g (elements [128n+32g, +16)), high lane: 8n+2g+1 */
                    const __m256i scv = _mm256_shuffle_epi8(scn, _mm256_set_m128i(_mm_set1_epi16((short)(0x0100 + 0x0202 * (2 * g + 1))),
                                                                                  _mm_set1_epi16((short)(0x0100 + 0x0202 * (2 * g)))));
#pragma GCC unroll 8
                    for (int t = 0; t < T; t++) {
                        const int8_t *xq = ((const eng_block_q8_K *)xbs[t])->qs + 128 * n + 32 * g;
                        __m256i p = _mm256_maddubs_epi16(q[g], _mm256_loadu_si256((const __m256i *)xq));
                        isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(p, scv));
                    }
                }
            }
            const float d = ldh(&b->d);
#pragma GCC unroll 8
            for (int t = 0; t < T; t++) {
                __m128i s = _mm_add_epi32(_mm256_castsi256_si128(isum[t]), _mm256_extracti128_si256(isum[t], 1));
                s = _mm_hadd_epi32(s, s);
                s = _mm_hadd_epi32(s, s);
                acc[r][t] = fmaf(d * ((const eng_block_q8_K *)xbs[t])->d, (float)_mm_cvtsi128_si32(s), acc[r][t]);
            }
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 8
        for (int t = 0; t < T; t++) y[t * ldy + r * ys] = acc[r][t];
}

/* ---- K family, prompts: super-block outer, rows inner, lane = token accumulators.
 * For a token tile of T <= 8, the T Q8_K blocks of super-block i are copied into one
 * contiguous buffer (fixed offsets from one base register instead of T pointers), then
 * every row of the chunk (L2-resident) runs kq_sb on its super-block i. Within a
 * super-block the products go into T int32 vectors (maddubs, madd with the 6/8-bit
 * scales, add: 3 ops per 32 multiply-adds); at its end the T vectors are reduced into one
 * vector with lane t = token t (hadd tree) and scaled with one fma per row. This replaced
 * a 1 row x 8 token tile that kept per-row state in registers (spills; a horizontal sum
 * per token and super-block): llvm-mca znver3 ~150 -> ~75 cycles per super-block x 8. */

/* An empty asm that "modifies" v: keeps each accumulator a sequential chain of adds.
 * Without it GCC reassociates the integer sums of the unrolled loops into trees, computes
 * all 64 products of a super-block first and spills them (~100 stack moves per
 * super-block, 2x the cycles in llvm-mca). */
#define KEEP_CHAIN(v) __asm__("" : "+x"(v))

/* lane t = Σ lanes of v[t] (t < 8) */
AI __m256i reduce8_epi32(const __m256i v[8])
{
    const __m256i a = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
    const __m256i b = _mm256_hadd_epi32(_mm256_hadd_epi32(v[4], v[5]), _mm256_hadd_epi32(v[6], v[7]));
    return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20), _mm256_permute2x128_si256(a, b, 0x31));
}

/* hot: one weight super-block (Q4_K/Q5_K/Q6_K) x T tokens (xb[0..T), contiguous);
 * *acc (lane t) += its dot with token t. dx8: the tokens' Q8_K scales (0 beyond T). */
AI void kq_sb(eng_type wt, const int T, const uint8_t *blk, const eng_block_q8_K *xb, __m256 dx8, __m256 *acc)
{
    const __m256i m4 = _mm256_set1_epi8(0xF);
    __m256i isum[8], msum[8];
#pragma GCC unroll 8
    for (int t = 0; t < 8; t++) isum[t] = msum[t] = _mm256_setzero_si256();
    if (wt == ENG_T_Q6_K) {
        const eng_block_q6_K *b = (const eng_block_q6_K *)blk;
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)b->scales));
        const __m256i m3 = _mm256_set1_epi8(3);
#pragma GCC unroll 8
        for (int t = 0; t < T; t++) /* the -32 offset of the quants: -32 * Σ sc_j * bsum_j */
            isum[t] = _mm256_sub_epi32(_mm256_setzero_si256(),
                                       _mm256_slli_epi32(_mm256_madd_epi16(sc16, _mm256_loadu_si256((const __m256i *)xb[t].bsums)), 5));
        /* scale vectors [s x8 | s+1 x8] (int16) by a byte shuffle of the 16 scales; operands
         * are re-loaded per 32-quant group to keep T accumulators + temporaries within the
         * 16 ymm registers (spills doubled the cycle count) */
        int16_t scs[32];
        _mm256_storeu_si256((__m256i *)scs, _mm256_permute4x64_epi64(sc16, 0x44));
        _mm256_storeu_si256((__m256i *)(scs + 16), _mm256_permute4x64_epi64(sc16, 0xEE));
#pragma GCC unroll 8
        for (int k = 0; k < 8; k++) {
            const int n = k / 4, g = k % 4;
            const __m256i ql = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * n + 32 * (g & 1)));
            const __m256i qh = _mm256_loadu_si256((const __m256i *)(b->qh + 32 * n));
            const __m256i lo = g < 2 ? _mm256_and_si256(ql, m4) : _mm256_and_si256(_mm256_srli_epi16(ql, 4), m4);
            const __m256i hi = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * g), m3), 4);
            const __m256i q = _mm256_or_si256(lo, hi);
            const __m256i ctl = _mm256_set_m128i(_mm_set1_epi16((short)((4 * g + 2) | ((4 * g + 3) << 8))),
                                                 _mm_set1_epi16((short)((4 * g) | ((4 * g + 1) << 8))));
            const __m256i scv = _mm256_shuffle_epi8(_mm256_loadu_si256((const __m256i *)(scs + 16 * n)), ctl);
#pragma GCC unroll 8
            for (int t = 0; t < T; t++) {
                const __m256i x = _mm256_loadu_si256((const __m256i *)(xb[t].qs + 128 * n + 32 * g));
                isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(_mm256_maddubs_epi16(q, x), scv));
                KEEP_CHAIN(isum[t]);
            }
        }
        const __m256 d = _mm256_mul_ps(_mm256_set1_ps(ldh(&b->d)), dx8);
        *acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(reduce8_epi32(isum)), d, *acc);
        return;
    }
    /* Q4_K / Q5_K */
    uint8_t sc[8], mn[8];
    k4_scales(blk + 4, sc, mn);
    const __m256i mins16 = _mm256_cvtepu8_epi16(
        _mm_unpacklo_epi8(_mm_loadl_epi64((const __m128i *)mn), _mm_loadl_epi64((const __m128i *)mn)));
#pragma GCC unroll 8
    for (int t = 0; t < T; t++) msum[t] = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)xb[t].bsums), mins16);
    const __m256 dmin = _mm256_mul_ps(_mm256_set1_ps(ldh(blk + 2)), dx8);
    *acc = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(reduce8_epi32(msum)), dmin, *acc);
    int16_t scs[16]; /* 8 int16 scales in both lanes, for the byte shuffles */
    const __m128i sc8 = _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)sc));
    _mm256_storeu_si256((__m256i *)scs, _mm256_set_m128i(sc8, sc8));
    const uint8_t *qs = blk + (wt == ENG_T_Q4_K ? 16 : 48);
    /* 8 groups of 32 quants: k even = low nibbles of qs[32*(k/2)..], k odd = high nibbles;
     * one at a time so the T accumulators stay in registers */
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++) {
        const __m256i q = _mm256_loadu_si256((const __m256i *)(qs + 32 * (k / 2)));
        __m256i u = (k & 1) ? _mm256_and_si256(_mm256_srli_epi16(q, 4), m4) : _mm256_and_si256(q, m4);
        if (wt == ENG_T_Q5_K) {
            const __m256i qh = _mm256_loadu_si256((const __m256i *)(blk + 16));
            u = _mm256_or_si256(u, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, k), _mm256_set1_epi8(1)), 4));
        }
        const __m256i sk = _mm256_shuffle_epi8(_mm256_loadu_si256((const __m256i *)scs),
                                               _mm256_set1_epi16((short)((2 * k) | ((2 * k + 1) << 8))));
#pragma GCC unroll 8
        for (int t = 0; t < T; t++) {
            const __m256i x = _mm256_loadu_si256((const __m256i *)(xb[t].qs + 32 * k));
            isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(_mm256_maddubs_epi16(u, x), sk));
            KEEP_CHAIN(isum[t]);
        }
    }
    const __m256 d = _mm256_mul_ps(_mm256_set1_ps(ldh(blk)), dx8);
    *acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(reduce8_epi32(isum)), d, *acc);
}

/* rows [0, nrows) of W (rows of wrb bytes) x super-block i for one token tile; acc[r] lane t.
 * The super-blocks are wrb apart (L2): prefetch the one KQ_PF_ROWS rows ahead. */
#define KQ_PF_ROWS 2
#define KQ_PF(r)                                                                                       \
    do {                                                                                               \
        const char *pf_ = (const char *)W + ((r) + KQ_PF_ROWS) * wrb;                                  \
        for (int o_ = 0; o_ < 256; o_ += 64) _mm_prefetch(pf_ + o_, _MM_HINT_T0);                      \
    } while (0)
#define DEF_KQ_ROWS(NAME, WT)                                                                          \
    static void NAME(int T, const uint8_t *W, size_t wrb, int64_t nrows, const eng_block_q8_K *xb, __m256 dx8, \
                     __m256 *acc)                                                                      \
    {                                                                                                  \
        switch (T) {                                                                                   \
        case 8: for (int64_t r = 0; r < nrows; r++) { KQ_PF(r); kq_sb(WT, 8, W + r * wrb, xb, dx8, acc + r); } break; \
        case 7: for (int64_t r = 0; r < nrows; r++) { KQ_PF(r); kq_sb(WT, 7, W + r * wrb, xb, dx8, acc + r); } break; \
        case 6: for (int64_t r = 0; r < nrows; r++) { KQ_PF(r); kq_sb(WT, 6, W + r * wrb, xb, dx8, acc + r); } break; \
        case 5: for (int64_t r = 0; r < nrows; r++) { KQ_PF(r); kq_sb(WT, 5, W + r * wrb, xb, dx8, acc + r); } break; \
        case 4: for (int64_t r = 0; r < nrows; r++) { KQ_PF(r); kq_sb(WT, 4, W + r * wrb, xb, dx8, acc + r); } break; \
        case 3: for (int64_t r = 0; r < nrows; r++) { KQ_PF(r); kq_sb(WT, 3, W + r * wrb, xb, dx8, acc + r); } break; \
        case 2: for (int64_t r = 0; r < nrows; r++) { KQ_PF(r); kq_sb(WT, 2, W + r * wrb, xb, dx8, acc + r); } break; \
        default: for (int64_t r = 0; r < nrows; r++) { KQ_PF(r); kq_sb(WT, 1, W + r * wrb, xb, dx8, acc + r); } break; \
        }                                                                                              \
    }
DEF_KQ_ROWS(kq_rows_q4_K, ENG_T_Q4_K)
DEF_KQ_ROWS(kq_rows_q5_K, ENG_T_Q5_K)
DEF_KQ_ROWS(kq_rows_q6_K, ENG_T_Q6_K)

typedef void (*kq_rows_fn)(int T, const uint8_t *W, size_t wrb, int64_t nrows, const eng_block_q8_K *xb, __m256 dx8,
                           __m256 *acc);

#define KQ_CHUNK 256 /* max rows per chunk: acc table of 8 KiB on the stack */

static void kq_matmul_pp(kq_rows_fn fn, size_t bs, const uint8_t *W, size_t wrb, int64_t n_in, int64_t r0, int64_t r1,
                         const uint8_t *X, size_t xrb, int64_t n_tok, float *y, int64_t ldy)
{
    eng_block_q8_K xb[PP_T]; /* super-block i of the tile's tokens, contiguous (2.3 KiB) */
    __m256 acc[KQ_CHUNK];    /* acc[r - c0] lane t: row r, token t0 + t */
    const int64_t nb = n_in / ENG_QK_K;
    /* rows per chunk: ~384 KiB of weights (of the 512 KiB L2), re-read from L2 by every token
     * tile; smaller chunks were slower, larger ones no better (docs/benchmarks/engine.md
     * "Kernel choices"). */
    int64_t chunk = (int64_t)((384 * 1024) / (wrb ? wrb : 1));
    chunk = chunk < 1 ? 1 : chunk > KQ_CHUNK ? KQ_CHUNK : chunk;
    for (int64_t c0 = r0; c0 < r1; c0 += chunk) {
        const int64_t c1 = c0 + chunk < r1 ? c0 + chunk : r1;
        for (int64_t t0 = 0; t0 < n_tok; t0 += PP_T) {
            const int T = n_tok - t0 < PP_T ? (int)(n_tok - t0) : PP_T;
            for (int64_t r = c0; r < c1; r++) acc[r - c0] = _mm256_setzero_ps();
            for (int64_t i = 0; i < nb; i++) {
                float dx[PP_T] = {0};
                for (int t = 0; t < T; t++) {
                    memcpy(&xb[t], X + (t0 + t) * xrb + i * sizeof(eng_block_q8_K), sizeof(eng_block_q8_K));
                    dx[t] = xb[t].d;
                }
                fn(T, W + c0 * wrb + i * bs, wrb, c1 - c0, xb, _mm256_loadu_ps(dx), acc);
            }
            for (int64_t r = c0; r < c1; r++) {
                float v[PP_T];
                _mm256_storeu_ps(v, acc[r - c0]);
                for (int t = 0; t < T; t++) y[(t0 + t) * ldy + r] = v[t];
            }
        }
    }
}

/* ------------------------------------------------------------------ float family */

AI __m256 fl_load(eng_type wt, const uint8_t *row, int64_t k)
{
    if (wt == ENG_T_F32) return _mm256_loadu_ps((const float *)row + k);
    if (wt == ENG_T_F16) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)row + k)));
    __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)((const uint16_t *)row + k)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

/* hot: F32/F16/BF16 (activations in the same type), R rows x T tokens, n % 8 handled. */
AI void fl_tile(eng_type wt, const int R, const int T, const uint8_t *W, size_t wrb, const uint8_t *X, size_t xrb,
                int64_t n, float *y, int64_t ldy, int64_t ys)
{
    __m256 acc[4][8];
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 8
        for (int t = 0; t < T; t++) acc[r][t] = _mm256_setzero_ps();
    int64_t k = 0;
    for (; k + 8 <= n; k += 8) {
        __m256 w[4];
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) w[r] = fl_load(wt, W + r * wrb, k);
#pragma GCC unroll 8
        for (int t = 0; t < T; t++) {
            const __m256 x = fl_load(wt, X + t * xrb, k);
#pragma GCC unroll 8
            for (int r = 0; r < R; r++) acc[r][t] = _mm256_fmadd_ps(w[r], x, acc[r][t]);
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 8
        for (int t = 0; t < T; t++) {
            float s = lcx_hsum8(acc[r][t]);
            for (int64_t j = k; j < n; j++) {
                float a, b;
                if (wt == ENG_T_F32) {
                    a = ((const float *)(W + r * wrb))[j];
                    b = ((const float *)(X + t * xrb))[j];
                } else if (wt == ENG_T_F16) {
                    a = eng__fp16_to_fp32(((const uint16_t *)(W + r * wrb))[j]);
                    b = eng__fp16_to_fp32(((const uint16_t *)(X + t * xrb))[j]);
                } else {
                    a = eng__bf16_to_fp32(((const uint16_t *)(W + r * wrb))[j]);
                    b = eng__bf16_to_fp32(((const uint16_t *)(X + t * xrb))[j]);
                }
                s += a * b;
            }
            y[t * ldy + r * ys] = s;
        }
}

/* ------------------------------------------------------------------ tiling driver */

/* One tile, (R, T) picked from a fixed menu so every kernel above is instantiated with
 * compile-time sizes (fully unrolled, accumulators in registers). */
#define TILE_SWITCH(CALL)                                                     \
    switch (R * 16 + T) {                                                     \
    case 4 * 16 + 1: CALL(4, 1); break;                                        \
    case 2 * 16 + 4: CALL(2, 4); break;                                        \
    case 2 * 16 + 3: CALL(2, 3); break;                                        \
    case 2 * 16 + 2: CALL(2, 2); break;                                        \
    case 2 * 16 + 1: CALL(2, 1); break;                                        \
    case 1 * 16 + 8: CALL(1, 8); break;                                        \
    case 1 * 16 + 7: CALL(1, 7); break;                                        \
    case 1 * 16 + 6: CALL(1, 6); break;                                        \
    case 1 * 16 + 5: CALL(1, 5); break;                                        \
    case 1 * 16 + 4: CALL(1, 4); break;                                        \
    case 1 * 16 + 3: CALL(1, 3); break;                                        \
    case 1 * 16 + 2: CALL(1, 2); break;                                        \
    default: CALL(1, 1); break;                                               \
    }

#define DEF_TILE_FN(NAME, BODY)                                                                      \
    static void NAME(int R, int T, const uint8_t *W, size_t wrb, const uint8_t *X, size_t xrb, int64_t n, \
                     float *y, int64_t ldy, int64_t ys)                                              \
    {                                                                                                \
        TILE_SWITCH(BODY)                                                                            \
    }

#define C_Q4K(r, t) k45_tile(ENG_T_Q4_K, r, t, W, wrb, X, xrb, n / ENG_QK_K, y, ldy, ys)
#define C_Q5K(r, t) k45_tile(ENG_T_Q5_K, r, t, W, wrb, X, xrb, n / ENG_QK_K, y, ldy, ys)
#define C_Q6K(r, t) q6k_tile(r, t, W, wrb, X, xrb, n / ENG_QK_K, y, ldy, ys)
#define C_F32(r, t) fl_tile(ENG_T_F32, r, t, W, wrb, X, xrb, n, y, ldy, ys)
#define C_F16(r, t) fl_tile(ENG_T_F16, r, t, W, wrb, X, xrb, n, y, ldy, ys)
#define C_BF16(r, t) fl_tile(ENG_T_BF16, r, t, W, wrb, X, xrb, n, y, ldy, ys)

DEF_TILE_FN(tile_q4_K, C_Q4K)
DEF_TILE_FN(tile_q5_K, C_Q5K)
DEF_TILE_FN(tile_q6_K, C_Q6K)
DEF_TILE_FN(tile_f32, C_F32)
DEF_TILE_FN(tile_f16, C_F16)
DEF_TILE_FN(tile_bf16, C_BF16)

typedef void (*tile_fn)(int R, int T, const uint8_t *W, size_t wrb, const uint8_t *X, size_t xrb, int64_t n,
                        float *y, int64_t ldy, int64_t ys);

bool eng__matmul_avx2(eng_type wt, const void *W, size_t wrb, int64_t n_in, int64_t r0, int64_t r1,
                     const void *X, size_t xrb, int64_t n_tok, float *y, int64_t ldy, void *ws, size_t ws_bytes)
{
    tile_fn fn;
    switch (wt) {
    case ENG_T_Q8_0:
        q80fam_matmul(q80_unpack_q8_0, q80_vec_q8_0, sizeof(eng_block_q8_0), W, wrb, n_in, r0, r1, X, xrb, n_tok, y, ldy, ws, ws_bytes);
        return true;
    case ENG_T_Q4_0:
        q80fam_matmul(q80_unpack_q4_0, q80_vec_q4_0, sizeof(eng_block_q4_0), W, wrb, n_in, r0, r1, X, xrb, n_tok, y, ldy, ws, ws_bytes);
        return true;
    case ENG_T_Q5_0:
        q80fam_matmul(q80_unpack_q5_0, q80_vec_q5_0, sizeof(eng_block_q5_0), W, wrb, n_in, r0, r1, X, xrb, n_tok, y, ldy, ws, ws_bytes);
        return true;
    case ENG_T_Q5_0X4: /* 22 bytes per block, as Q5_0: same segments and zero point */
        q80fam_matmul(q80_unpack_q5_0x4, NULL, sizeof(eng_block_q5_0), W, wrb, n_in, r0, r1, X, xrb, n_tok, y, ldy, ws, ws_bytes);
        return true;
    case ENG_T_Q4_K: fn = tile_q4_K; break;
    case ENG_T_Q5_K: fn = tile_q5_K; break;
    case ENG_T_Q6_K: fn = tile_q6_K; break;
    case ENG_T_F32: fn = tile_f32; break;
    case ENG_T_F16: fn = tile_f16; break;
    case ENG_T_BF16: fn = tile_bf16; break;
    default: return false;
    }
    const uint8_t *w8 = W, *x8 = X;
    if (n_tok == 1) {
        /* generation: a matvec, memory bound. K-quants: VEC_S row streams (see VEC_S): the
         * tile's R rows are the rows i, i+q, i+2q, i+3q (row stride q*wrb, output stride q),
         * each with its own accumulator and the float steps of a one-row tile; the rows left
         * over one at a time. Floats: 4 adjacent rows per pass. Software prefetch (in the
         * tiles) keeps each stream ahead. */
        vec_prefetch_start(w8 + r0 * wrb, wrb, r1 - r0);
        if (wt == ENG_T_Q4_K || wt == ENG_T_Q5_K || wt == ENG_T_Q6_K) {
            const int64_t q = (r1 - r0) / VEC_S;
            for (int64_t i = 0; i < q; i++)
                fn(VEC_S, 1, w8 + (r0 + i) * wrb, (size_t)q * wrb, x8, xrb, n_in, y + r0 + i, ldy, q);
            for (int64_t r = r0 + VEC_S * q; r < r1; r++) fn(1, 1, w8 + r * wrb, wrb, x8, xrb, n_in, y + r, ldy, 1);
            return true;
        }
        int64_t r = r0;
        for (; r + 4 <= r1; r += 4) fn(4, 1, w8 + r * wrb, wrb, x8, xrb, n_in, y + r, ldy, 1);
        for (; r < r1; r++) fn(1, 1, w8 + r * wrb, wrb, x8, xrb, n_in, y + r, ldy, 1);
        return true;
    }
    /* prompt: K-quants see kq_matmul_pp; floats: chunks of rows that stay in L2 while every
     * token tile passes over them, 2 rows x 4 tokens (each F16/BF16 load is a conversion,
     * so share both ways). */
    if (wt == ENG_T_Q4_K || wt == ENG_T_Q5_K || wt == ENG_T_Q6_K) {
        kq_matmul_pp(wt == ENG_T_Q4_K ? kq_rows_q4_K : wt == ENG_T_Q5_K ? kq_rows_q5_K : kq_rows_q6_K,
                     eng__type_block_bytes(wt), w8, wrb, n_in, r0, r1, x8, xrb, n_tok, y, ldy);
        return true;
    }
    const int TT = 4, RR = 2;
    int64_t chunk = (int64_t)((128 * 1024) / (wrb ? wrb : 1));
    chunk = chunk < 4 ? 4 : chunk & ~(int64_t)1;
    for (int64_t c0 = r0; c0 < r1; c0 += chunk) {
        const int64_t c1 = c0 + chunk < r1 ? c0 + chunk : r1;
        for (int64_t t = 0; t < n_tok; t += TT) {
            const int T = n_tok - t < TT ? (int)(n_tok - t) : TT;
            int64_t r = c0;
            if (RR == 2)
                for (; r + 2 <= c1; r += 2) fn(2, T, w8 + r * wrb, wrb, x8 + t * xrb, xrb, n_in, y + t * ldy + r, ldy, 1);
            for (; r < c1; r++) fn(1, T, w8 + r * wrb, wrb, x8 + t * xrb, xrb, n_in, y + t * ldy + r, ldy, 1);
        }
    }
    return true;
}

/* Q8_0 activation quantizer, as ggml's AVX2 quantize_row_q8_0 (bit-identical to the
 * scalar one in quant.c: max|x|, d = amax/127 -> fp16, q = round_half_even(x*127/amax)). */
void eng__quantize_row_q8_0_avx2(const float *x, void *dst, int64_t n)
{
    eng_block_q8_0 *y = dst;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        __m256 v0 = _mm256_loadu_ps(x), v1 = _mm256_loadu_ps(x + 8), v2 = _mm256_loadu_ps(x + 16),
               v3 = _mm256_loadu_ps(x + 24);
        __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v0), _mm256_andnot_ps(sign, v1)),
                                 _mm256_max_ps(_mm256_andnot_ps(sign, v2), _mm256_andnot_ps(sign, v3)));
        __m128 m4 = _mm_max_ps(_mm256_extractf128_ps(m, 1), _mm256_castps256_ps128(m));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        const float amax = _mm_cvtss_f32(m4);
        y[i].d = _cvtss_sh(amax / 127.f, _MM_FROUND_TO_NEAREST_INT);
        const __m256 id = _mm256_set1_ps(amax != 0.f ? 127.f / amax : 0.f);
        __m256i i0 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v0, id), _MM_FROUND_TO_NEAREST_INT));
        __m256i i1 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v1, id), _MM_FROUND_TO_NEAREST_INT));
        __m256i i2 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v2, id), _MM_FROUND_TO_NEAREST_INT));
        __m256i i3 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v3, id), _MM_FROUND_TO_NEAREST_INT));
        i0 = _mm256_packs_epi32(i0, i1);
        i2 = _mm256_packs_epi32(i2, i3);
        i0 = _mm256_packs_epi16(i0, i2);
        /* packs interleave the 128-bit lanes; restore element order */
        i0 = _mm256_permutevar8x32_epi32(i0, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256((__m256i *)y[i].qs, i0);
    }
}

/* Q8_K activation quantizer, bit-identical to quantize_row_q8_K_ref (quant.c): the signed
 * value of largest magnitude (first on ties) found from a vector max|x| plus a scan, then
 * q = min(127, round_half_even(-127/max * x)) in 8-lane steps; bsums scalar. */
void eng__quantize_row_q8_K_avx2(const float *x, void *dst, int64_t n)
{
    eng_block_q8_K *y = dst;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t i = 0; i < n / ENG_QK_K; i++, x += ENG_QK_K) {
        __m256 m = _mm256_setzero_ps();
        for (int j = 0; j < ENG_QK_K; j += 8) m = _mm256_max_ps(m, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + j)));
        __m128 m4 = _mm_max_ps(_mm256_extractf128_ps(m, 1), _mm256_castps256_ps128(m));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        const float amax = _mm_cvtss_f32(m4);
        if (!(amax > 0.f)) { /* all zero (or NaN input): as the scalar version, a zero block */
            if (amax == 0.f) {
                memset(&y[i], 0, sizeof y[i]);
                continue;
            }
            eng__quantize_row_q8_K_ref(x, &y[i], ENG_QK_K);
            continue;
        }
        float max = 0.f;
        for (int j = 0; j < ENG_QK_K; j++)
            if (fabsf(x[j]) == amax) {
                max = x[j];
                break;
            }
        const float iscale = -127.f / max;
        const __m256 is = _mm256_set1_ps(iscale);
        const __m256i lim = _mm256_set1_epi32(127);
        for (int j = 0; j < ENG_QK_K; j += 32) {
            __m256i q[4];
            for (int k = 0; k < 4; k++) {
                __m256 v = _mm256_round_ps(_mm256_mul_ps(is, _mm256_loadu_ps(x + j + 8 * k)), _MM_FROUND_TO_NEAREST_INT);
                q[k] = _mm256_min_epi32(_mm256_cvtps_epi32(v), lim);
            }
            __m256i a = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
            a = _mm256_permutevar8x32_epi32(a, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
            _mm256_storeu_si256((__m256i *)(y[i].qs + j), a);
        }
        for (int j = 0; j < ENG_QK_K / 16; j++) {
            int s16 = 0;
            for (int l = 0; l < 16; l++) s16 += y[i].qs[16 * j + l];
            y[i].bsums[j] = (int16_t)s16;
        }
        y[i].d = 1.f / iscale;
    }
}
