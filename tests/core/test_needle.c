/* Needle test (SPEC §6 rescue ramp): 20,000 filler spans (SPEC filler sentence variations,
 * Paul Graham essay windows, and hard distractors that mention Project NOVA or other
 * access codes) plus one fact span. The rescue question must rank the fact first through
 * lcx_store_search with default options, also after a reopen from the snapshot. */
#include "testutil.h"
#include "longctx/lcx.h"
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_SPANS 20000
#define FACT_AT 13337

static const char *FACT =
    "IMPORTANT: Project NOVA was provisioned with access code 481729. All technicians must memorize this code "
    "prior to deployment.";
static const char *QUESTION = "What is the access code for Project NOVA? Answer with only the digits.";

static int cmpstr(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* All essay words, sorted by file name (deterministic haystack). */
static char *load_essays(size_t *len)
{
    const char *root = tu_fixture("haystack/paul_graham");
    DIR *d = opendir(root);
    assert_non_null(d);
    char *names[128];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 128)
        if (strstr(e->d_name, ".txt")) names[n++] = strdup(e->d_name);
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmpstr);
    size_t cap = 1 << 20, used = 0;
    char *all = malloc(cap);
    for (int i = 0; i < n; i++) {
        char p[4200];
        snprintf(p, sizeof p, "%s/%s", root, names[i]);
        FILE *f = fopen(p, "rb");
        assert_non_null(f);
        size_t r;
        char buf[65536];
        while ((r = fread(buf, 1, sizeof buf, f)) > 0) {
            if (used + r + 2 > cap) all = realloc(all, cap *= 2);
            memcpy(all + used, buf, r);
            used += r;
        }
        all[used++] = ' ';
        fclose(f);
        free(names[i]);
    }
    all[used] = 0;
    *len = used;
    return all;
}

static const char *V1[] = {"routine", "regular", "standard", "scheduled"};
static const char *V2[] = {"quarterly", "annual", "monthly", "weekly"};
static const char *V3[] = {"procedure", "process", "protocol", "review"};
static const char *V4[] = {"records", "logs", "files", "reports"};
static const char *V5[] = {"assessment", "audit", "evaluation", "inspection"};
static const char *DISTRACT[] = {
    "The access code for the supply room is posted at the front desk and changes every month.",
    "Project NOVA status meeting was moved to Thursday; technicians should bring their deployment checklists.",
    "Project ORION was provisioned with access badge 77 for the east wing technicians.",
    "Remember to rotate the access codes of every project before the annual audit of operational records.",
    "The NOVA team asked whether the deployment code review could wait until after the holidays.",
    "Answer the survey with only the digits of your employee number, not your name.",
};

static void make_span(char *out, size_t cap, uint32_t i, const char *essay, size_t elen)
{
    if (i == FACT_AT) {
        snprintf(out, cap, "%s", FACT);
        return;
    }
    if (i % 97 == 5) {
        snprintf(out, cap, "%s", DISTRACT[(i / 97) % (sizeof DISTRACT / sizeof *DISTRACT)]);
        return;
    }
    if (i % 3 == 0) {   /* an essay window of ~60 words */
        size_t start = (size_t)((uint64_t)i * 2654435761u % (elen - 2000));
        while (start < elen && essay[start] != ' ') start++;
        size_t end = start + 1, words = 0;
        while (end < elen && words < 60) {
            if (essay[end] == ' ') words++;
            end++;
        }
        size_t n = end - start - 1;
        if (n >= cap) n = cap - 1;
        memcpy(out, essay + start + 1, n);
        out[n] = 0;
        return;
    }
    /* SPEC filler sentence, with variations, a few times */
    size_t u = 0;
    for (int k = 0; k < 4; k++) {
        uint32_t h = i * 31u + (uint32_t)k * 7u;
        u += (size_t)snprintf(out + u, cap - u,
                              "the %s %s %s required careful review of the documented operational %s during the %s "
                              "cycle. ",
                              V1[h % 4], V2[(h / 4) % 4], V3[(h / 16) % 4], V4[(h / 64) % 4], V5[(h / 3) % 4]);
    }
}

static void test_needle(void **st)
{
    (void)st;
    size_t elen;
    char *essay = load_essays(&elen);
    assert_true(elen > 100000);
    lcx_embedder *emb;
    assert_int_equal(lcx_embedder_hash_new(0, &emb), 0);
    char *dir = tu_tmpdir();
    lcx_store *s;
    assert_int_equal(lcx_store_open(dir, emb, NULL, &s), 0);
    enum { B = 1000 };
    static char texts[B][1024];
    lcx_chunk c[B];
    for (uint32_t base = 0; base < N_SPANS; base += B) {
        for (uint32_t j = 0; j < B; j++) {
            make_span(texts[j], sizeof texts[j], base + j, essay, elen);
            c[j] = lcx_chunk_init();
            c[j].text = texts[j];
            c[j].text_len = (uint32_t)strlen(texts[j]);
            c[j].tok_start = (int64_t)(base + j) * 256;
            c[j].tok_end = c[j].tok_start + 255;
        }
        assert_int_equal(lcx_store_append(s, c, B, NULL), 0);
    }
    assert_int_equal(lcx_store_count(s), N_SPANS);
    lcx_search_opts o = lcx_search_defaults();
    lcx_hit h[8];
    int n = lcx_store_search(s, QUESTION, strlen(QUESTION), &o, h, 8);
    assert_true(n >= 1);
    for (int i = 0; i < n && i < 3; i++)
        fprintf(stderr, "rank %d: id %u score %.3f dense %.3f bm25 %.2f\n", i + 1, h[i].id, h[i].score, h[i].dense,
                h[i].bm25);
    assert_int_equal(h[0].id, FACT_AT);
    assert_true(h[0].score >= 0.2f);   /* clears the rescue score_floor */
    /* also with RRF fusion and without rerank */
    o.fusion = LCX_FUSE_RRF;
    n = lcx_store_search(s, QUESTION, strlen(QUESTION), &o, h, 8);
    assert_true(n >= 1);
    assert_int_equal(h[0].id, FACT_AT);
    o = lcx_search_defaults();
    o.use_rerank = false;
    n = lcx_store_search(s, QUESTION, strlen(QUESTION), &o, h, 8);
    assert_int_equal(h[0].id, FACT_AT);
    lcx_store_close(s);   /* writes the snapshot */
    assert_int_equal(lcx_store_open(dir, emb, NULL, &s), 0);
    o = lcx_search_defaults();
    n = lcx_store_search(s, QUESTION, strlen(QUESTION), &o, h, 8);
    assert_true(n >= 1);
    assert_int_equal(h[0].id, FACT_AT);
    lcx_chunk got;
    assert_int_equal(lcx_store_get(s, h[0].id, &got), 0);
    assert_memory_equal(got.text, FACT, strlen(FACT));
    /* the rescue query signal of a long user message picks the question */
    char msg[4096];
    snprintf(msg, sizeof msg, "%s\n\nPlease respond. Question: %s", texts[3], QUESTION);
    size_t qo, ql;
    lcx_rescue_query(msg, strlen(msg), &qo, &ql);
    assert_int_equal(ql, strlen(QUESTION));
    n = lcx_store_search(s, msg + qo, ql, &o, h, 8);
    assert_int_equal(h[0].id, FACT_AT);
    lcx_store_close(s);
    lcx_embedder_free(emb);
    tu_rmrf(dir);
    free(dir);
    free(essay);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_needle)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
