/* Selection policies V1 / V2 / V3 and the trigger rule (SPEC §5), transcribed from the
 * published llama.cpp engine (TheTom, src/llama-triattention.cpp, selection block of
 * evict()) and checked against fixtures/triattention/selection.json.
 *
 * Arithmetic is deliberately float32 where the C++ used float (seg_width, the bucket index,
 * target_frac, bucket_target): a port computing them in double evicts different cells on
 * some inputs (the f64_trap / f32_bucket_rounding goldens), and these goldens are what
 * integrators check their wiring against.
 *
 * Direction: evict_high runs the code as written; keep_high runs it on negated scores.
 * Ties (std::sort is not deterministic): among equal adjusted scores the larger position is
 * evicted first, then the larger cell index. */
#include "triatt/internal.h"
#include <math.h>
#include <stdlib.h>

typedef struct { float a; int32_t pos; int32_t cell; } cand;

/* descending adjusted score, then descending position, then descending cell */
static int cmp_desc(const void *x, const void *y)
{
    const cand *p = x, *q = y;
    if (p->a != q->a) return p->a > q->a ? -1 : 1;
    if (p->pos != q->pos) return p->pos > q->pos ? -1 : 1;
    return p->cell > q->cell ? -1 : (p->cell < q->cell);
}

bool triatt_should_evict(int n_used, int budget, int window, int divide_length)
{
    int64_t floor_ = LCX_MAX((int64_t)budget, (int64_t)window + 1);
    return (int64_t)n_used > floor_ + (int64_t)divide_length;
}

static float adjusted(const triatt_select_params *p, float s)
{
    if (isnan(s)) return -INFINITY;
    return p->direction == TRIATT_KEEP_HIGH ? -s : s;
}

int triatt_select(const triatt_select_params *p, const int32_t *positions, const float *scores,
                  int n_cells, int n_to_evict, int32_t *out_cells)
{
    if (!p || n_cells < 0 || (n_cells && (!positions || !scores || !out_cells))) return LCX_EINVAL;
    if (p->window < 0 || p->prefix_protect < 0 || (unsigned)p->version > TRIATT_V3 ||
        (unsigned)p->direction > TRIATT_KEEP_HIGH)
        return LCX_EINVAL;
    if (n_to_evict <= 0 || n_cells == 0) return 0;
    int32_t max_pos = 0;
    for (int c = 0; c < n_cells; c++) max_pos = LCX_MAX(max_pos, positions[c]);
    const int64_t win_thr = (int64_t)max_pos - p->window + 1;
    cand *cs = malloc((size_t)n_cells * sizeof *cs);
    if (!cs) return LCX_ENOMEM;
    int n_out = 0;

    if (p->version == TRIATT_V1) {
        int n = 0;
        for (int c = 0; c < n_cells; c++)
            if (positions[c] < win_thr) cs[n++] = (cand){adjusted(p, scores[c]), positions[c], c};
        qsort(cs, n, sizeof *cs, cmp_desc);
        for (int i = 0; i < n && n_out < n_to_evict; i++) out_cells[n_out++] = cs[i].cell;
        free(cs);
        return n_out;
    }

    const int64_t prefix_lo = p->version == TRIATT_V2 ? 0 : p->prefix_protect;
    const int k = LCX_MAX(1, p->n_segments);
    const int64_t pos_hi = LCX_MAX(win_thr, prefix_lo + 1);
    const float seg_width = (float)(pos_hi - prefix_lo) / (float)k;
    int *bstart = calloc((size_t)k + 1, sizeof(int));
    int *seg = malloc((size_t)n_cells * sizeof(int));
    unsigned char *gone = calloc((size_t)n_cells, 1);
    if (!bstart || !seg || !gone) { free(cs); free(bstart); free(seg); free(gone); return LCX_ENOMEM; }
    int total = 0;
    for (int c = 0; c < n_cells; c++) {
        seg[c] = -1;
        if (positions[c] < prefix_lo || positions[c] >= win_thr) continue;
        int s = (int)((float)(positions[c] - prefix_lo) / seg_width);
        s = s < 0 ? 0 : s > k - 1 ? k - 1 : s;
        seg[c] = s;
        bstart[s + 1]++;
        total++;
    }
    if (total > 0) {
        for (int s = 0; s < k; s++) bstart[s + 1] += bstart[s];
        /* bucket the eligible cells (counting sort by segment, slot order kept) */
        int *fill = malloc((size_t)k * sizeof(int));
        if (!fill) { free(cs); free(bstart); free(seg); free(gone); return LCX_ENOMEM; }
        for (int s = 0; s < k; s++) fill[s] = bstart[s];
        for (int c = 0; c < n_cells; c++)
            if (seg[c] >= 0) cs[fill[seg[c]]++] = (cand){adjusted(p, scores[c]), positions[c], c};
        free(fill);
        const float target_frac = (float)n_to_evict / (float)total;
        for (int s = 0; s < k && n_out < n_to_evict; s++) {
            int size = bstart[s + 1] - bstart[s];
            if (!size) continue;
            int bt = (int)((float)size * target_frac);
            bt = LCX_MIN(bt, size);
            qsort(cs + bstart[s], size, sizeof *cs, cmp_desc);
            for (int i = 0; i < bt && n_out < n_to_evict; i++) {
                int cell = cs[bstart[s] + i].cell;
                out_cells[n_out++] = cell;
                gone[cell] = 1;
            }
        }
        /* cleanup: the rounding deficit, globally by score among the remaining eligible */
        if (n_out < n_to_evict) {
            int n = 0;
            for (int i = 0; i < total; i++)
                if (!gone[cs[i].cell]) cs[n++] = cs[i];
            qsort(cs, n, sizeof *cs, cmp_desc);
            for (int i = 0; i < n && n_out < n_to_evict; i++) out_cells[n_out++] = cs[i].cell;
        }
    }
    free(cs); free(bstart); free(seg); free(gone);
    return n_out;
}
