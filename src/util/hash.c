/* Checksums and hashes. crc32c uses the SSE4.2 CRC32 instruction (part of the x86-64-v3
 * baseline); lcx__hash64 is a multiply-xorshift hash for hash tables and feature hashing
 * (stable across runs and machines: the weight-free embedder depends on it, so changing
 * it changes the embedder fingerprint); sha256 is FIPS 180-4, used for scope hashes. */
#include "util/util.h"
#include "util/hash_inl.h"
#include <nmmintrin.h>
#include <pthread.h>
#include <string.h>

/* The CRC32 instruction has a latency of 3 cycles and a throughput of 1: one stream runs
 * at a third of the instruction's speed. So long inputs go as 3 streams over 3 adjacent
 * blocks, whose states are joined afterwards: the state after A‖B is the state after A
 * advanced over |B| zero bytes, xor the state of B from 0 (the CRC is linear). Advancing
 * over a fixed block length is a 32×32 GF(2) matrix, applied through 4 tables of 256
 * (built once). Hot: every ingested text and log record (~2 MB per 1000 spans). */
#define CRC_BLK 256   /* bytes per stream and step (3 × 256 = 768: the texts are ~1 KB) */
#define CRC_POLY 0x82f63b78u   /* Castagnoli, reflected */
static uint32_t g_crc_adv[4][256];   /* the state advanced over CRC_BLK zero bytes, by byte of the state */
static pthread_once_t g_crc_once = PTHREAD_ONCE_INIT;

static uint32_t gf2_apply(const uint32_t *m, uint32_t v)   /* m: 32 columns */
{
    uint32_t r = 0;
    for (int i = 0; v; i++, v >>= 1)
        if (v & 1) r ^= m[i];
    return r;
}

static void crc_adv_init(void)
{
    uint32_t a[32], b[32];
    a[0] = CRC_POLY;   /* one zero bit: the state shifts right, the polynomial comes in on a 1 */
    for (int i = 1; i < 32; i++) a[i] = 1u << (i - 1);
    for (int k = 0; k < 11; k++) {   /* squared 11 times: 2^11 bits = CRC_BLK bytes */
        for (int i = 0; i < 32; i++) b[i] = gf2_apply(a, a[i]);
        memcpy(a, b, sizeof a);
    }
    for (int j = 0; j < 4; j++)
        for (uint32_t v = 0; v < 256; v++) g_crc_adv[j][v] = gf2_apply(a, v << (8 * j));
}

static inline uint32_t crc_adv(uint32_t c)
{
    return g_crc_adv[0][c & 0xff] ^ g_crc_adv[1][c >> 8 & 0xff] ^ g_crc_adv[2][c >> 16 & 0xff] ^ g_crc_adv[3][c >> 24];
}

uint32_t lcx__crc32c(uint32_t crc, const void *p, size_t n)
{
    const unsigned char *s = p;
    uint64_t c = ~crc;
    if (n >= 3 * CRC_BLK) {
        pthread_once(&g_crc_once, crc_adv_init);
        do {
            uint64_t c1 = 0, c2 = 0;
            for (size_t i = 0; i < CRC_BLK; i += 8) {
                uint64_t v0, v1, v2;
                memcpy(&v0, s + i, 8);
                memcpy(&v1, s + CRC_BLK + i, 8);
                memcpy(&v2, s + 2 * CRC_BLK + i, 8);
                c = _mm_crc32_u64(c, v0);
                c1 = _mm_crc32_u64(c1, v1);
                c2 = _mm_crc32_u64(c2, v2);
            }
            c = crc_adv(crc_adv((uint32_t)c) ^ (uint32_t)c1) ^ (uint32_t)c2;
            s += 3 * CRC_BLK;
            n -= 3 * CRC_BLK;
        } while (n >= 3 * CRC_BLK);
    }
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, s, 8);
        c = _mm_crc32_u64(c, v);
        s += 8;
        n -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (n--) c32 = _mm_crc32_u8(c32, *s++);
    return ~c32;
}

uint64_t lcx__hash64(const void *p, size_t n, uint64_t seed) { return lcx__hash64_inl(p, n, seed); }

/* ---- SHA-256 (FIPS 180-4) */
static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void sha_block(uint32_t h[8], const unsigned char *p)
{
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = hh + (ROR(e, 6) ^ ROR(e, 11) ^ ROR(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i];
        uint32_t t2 = (ROR(a, 2) ^ ROR(a, 13) ^ ROR(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        hh = g; g = f; f = e; e = d + t1; d = c; c = b; b = a; a = t1 + t2;
    }
    h[0] += a; h[1] += b; h[2] += c; h[3] += d; h[4] += e; h[5] += f; h[6] += g; h[7] += hh;
}

void lcx__sha256(const void *data, size_t n, uint8_t out[32])
{
    uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                     0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    const unsigned char *p = data;
    size_t left = n;
    while (left >= 64) { sha_block(h, p); p += 64; left -= 64; }
    unsigned char tail[128] = {0};
    memcpy(tail, p, left);
    tail[left] = 0x80;
    size_t tl = left < 56 ? 64 : 128;
    uint64_t bits = (uint64_t)n * 8;
    for (int i = 0; i < 8; i++) tail[tl - 1 - i] = (unsigned char)(bits >> (8 * i));
    sha_block(h, tail);
    if (tl == 128) sha_block(h, tail + 64);
    for (int i = 0; i < 8; i++) {
        out[4 * i] = h[i] >> 24; out[4 * i + 1] = h[i] >> 16;
        out[4 * i + 2] = h[i] >> 8; out[4 * i + 3] = h[i];
    }
}

void lcx__sha256_hex(const void *p, size_t n, char *out, size_t nbytes)
{
    uint8_t d[32];
    static const char hex[] = "0123456789abcdef";
    lcx__sha256(p, n, d);
    if (nbytes > 32) nbytes = 32;
    for (size_t i = 0; i < nbytes; i++) {
        out[2 * i] = hex[d[i] >> 4];
        out[2 * i + 1] = hex[d[i] & 15];
    }
    out[2 * nbytes] = 0;
}
