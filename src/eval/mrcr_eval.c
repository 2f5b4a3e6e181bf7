/* Runs one MRCR record through a recipe and grades it (see lcx_eval.h). */
#include "eval/lcx_eval.h"
#include "longctx/lcx_recipes.h"
#include "util/util.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void lcx__mrcr_outcome_free(lcx_mrcr_outcome *o)
{
    if (!o) return;
    free(o->response);
    o->response = NULL;
}

static char *concat(const char *a, const char *b, size_t bl)
{
    size_t al = strlen(a);
    char *r = malloc(al + bl + 1);
    if (!r) return NULL;
    memcpy(r, a, al);
    memcpy(r + al, b, bl);
    r[al + bl] = 0;
    return r;
}

/* The deliberately wrong selector (tests only): re-render the question with ordinal + off,
 * wrapping inside 1..n_needles so it still names a real (but wrong) needle. */
static int shifted_question(const char *q, size_t ql, int off, int n_needles, char *out, size_t olen)
{
    lcx_ordinal_req r;
    if (lcx_ordinal_parse(q, ql, &r) || r.ordinal < 1 || !r.has_format || !r.has_topic) return -1;
    int o = r.ordinal + off;
    if (o > n_needles) o = r.ordinal - off;
    if (o < 1) o = 1;
    snprintf(out, olen, "Prepend %s to the %dth (1 indexed) %s about %s.", r.prefix, o, r.format, r.topic);
    return 0;
}

static int run(const lcx_mrcr_rec *rec, const lcx_mrcr_eval_opts *o, const char *given,
               lcx_mrcr_outcome *out)
{
    memset(out, 0, sizeof *out);
    if (!rec || !o || rec->n_msgs < 1) return LCX_EINVAL;
    double t0 = lcx__now_ms();
    int top_k = o->top_k > 0 ? (o->top_k > LCX_TOP_K_MAX ? LCX_TOP_K_MAX : o->top_k) : 8;
    lcx_msg *v = malloc(rec->n_msgs * sizeof *v);
    if (!v) return LCX_ENOMEM;
    for (size_t i = 0; i < rec->n_msgs; i++)
        v[i] = (lcx_msg){rec->msgs[i].role, rec->msgs[i].content, rec->msgs[i].len};
    /* the question: the last user message */
    size_t qi = rec->n_msgs - 1;
    while (qi > 0 && strcmp(v[qi].role, "user")) qi--;
    const char *q = v[qi].content;
    size_t ql = v[qi].len;
    int rc = 0;
    char *resp = NULL;
    int need_retrieval = o->recipe != LCX_MRCR_RECIPE_SELECTOR;

    if (o->recipe == LCX_MRCR_RECIPE_SELECTOR) {
        char alt[1024];
        const char *sq = q;
        size_t sql = ql;
        if (o->ordinal_offset && shifted_question(q, ql, o->ordinal_offset, rec->n_needles, alt, sizeof alt) == 0) {
            sq = alt;
            sql = strlen(alt);
        }
        lcx_select_result sr;
        rc = lcx_select(v, qi, sq, sql, &sr);
        if (rc) goto done;
        if (sr.status == LCX_SEL_OK) {
            out->retrieved[out->n_retrieved++] = sr.reply_index;
            resp = sr.response;
            sr.response = NULL;
        } else {
            out->fail_closed = 1;
            need_retrieval = o->emb != NULL;      /* fall back to MultiQ + copy of the top hit */
        }
        lcx_select_result_free(&sr);
    }
    if (need_retrieval && o->emb) {
        long idx[LCX_TOP_K_MAX];
        lcx_search_info info = {0};
        int k = o->recipe == LCX_MRCR_RECIPE_PLAIN
                    ? lcx_recipe_plain(o->emb, v, qi, q, ql, top_k, idx, NULL)
                    : lcx_recipe_multiq_nn(o->emb, o->nn, v, qi, q, ql, top_k, idx, NULL, &info);
        out->used_rerank = info.used_rerank;
        if (k < 0) { rc = k; goto done; }
        for (int i = 0; i < k && out->n_retrieved < (int)LCX_ARRAY_LEN(out->retrieved); i++) out->retrieved[out->n_retrieved++] = idx[i];
        if (!resp && k > 0 && idx[0] >= 0 && (size_t)idx[0] < rec->n_msgs) {
            lcx_ordinal_req r;   /* the prefix is kept even when the rest does not parse */
            int prc = lcx_ordinal_parse(q, ql, &r);
            if (prc == LCX_ENOMEM) { rc = prc; goto done; }
            resp = concat(r.prefix, v[idx[0]].content, v[idx[0]].len);
            if (!resp) { rc = LCX_ENOMEM; goto done; }
        }
    } else if (need_retrieval) {
        rc = LCX_EINVAL;                           /* plain/multiq need an embedder */
        goto done;
    }
    if (given) {
        free(resp);
        resp = strdup(given);
        if (!resp) { rc = LCX_ENOMEM; goto done; }
    }
    if (!resp) resp = strdup("");
    if (!resp) { rc = LCX_ENOMEM; goto done; }
    for (int i = 0; i < out->n_retrieved && i < top_k; i++)
        if (out->retrieved[i] == rec->desired_msg_index + 1) out->target_hit = 1;
    rc = lcx__mrcr_grade(resp, rec->answer, rec->hash, &out->score);
    if (rc) goto done;
    out->response = resp;
    resp = NULL;
    out->ms = lcx__now_ms() - t0;
done:
    free(resp);
    free(v);
    return rc;
}

int lcx__mrcr_eval_one(const lcx_mrcr_rec *rec, const lcx_mrcr_eval_opts *o, lcx_mrcr_outcome *out)
{
    return run(rec, o, NULL, out);
}

int lcx__mrcr_eval_with_response(const lcx_mrcr_rec *rec, const lcx_mrcr_eval_opts *o,
                                const char *response, lcx_mrcr_outcome *out)
{
    if (!response) return LCX_EINVAL;
    return run(rec, o, response, out);
}
