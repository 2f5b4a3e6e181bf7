/* AVX-512 (+VNNI) matmul kernels: reached only through eng_matmul_isa's run-time dispatch
 * (lcx_cpu_has_avx512()). Placeholder: no kernels yet, so everything falls back to AVX2. */
#include "engine/quant.h"

bool eng_matmul_avx512(eng_type wt, const void *W, size_t wrb, int64_t n_in, int64_t r0, int64_t r1,
                       const void *X, size_t xrb, int64_t n_tok, float *y, int64_t ldy)
{
    return false;
}
