/* Retrieval quality: longctx's default ranking vs plain BM25 on real code and real prose
 * (qset.h). Run from the build directory:
 *   ./bench/bench_quality [--code-only | --prose-only] [--heldout] [-v] [--max-q N] [--trials N] [--dump DIR]
 * Prints recall@1, recall@10 (prose: @8) and MRR@10 per set, side by side, and the
 * default/BM25 MRR ratio. Needs LCX_FIXTURES (or ../shared/fixtures) for the prose set.
 * Nothing here asserts (tests/core/test_quality.c is the CI smoke set). */
#include "qset.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const C_ROOTS[] = {
    "/usr/include/microhttpd.h", "/usr/include/cmocka.h", "/usr/include/utf8proc.h", "/usr/include/pcre2.h",
    "/usr/include/cjson", "/usr/include/x86_64-linux-gnu/curl", "/usr/include/libxml2", "/usr/include/freetype2",
    "/usr/include/yaml.h", "/usr/include/lzma", "/usr/include/llvm-c-14", "/usr/include/xmlsec1", NULL};
static const char *const JS_ROOTS[] = {"/usr/lib/node_modules/npm/node_modules", "/usr/share/nodejs", NULL};
/* Perl: the modules of the packages a Debian 12 build host has anyway, named by package so
 * that installing other Perl packages does not change the set (qset.c dpkg_files) */
static const char *const PERL_ROOTS[] = {
    "dpkg:debconf/usr/share/perl5", "dpkg:libdpkg-perl/usr/share/perl5", "dpkg:git/usr/share/perl5",
    "dpkg:libjson-perl/usr/share/perl5", "dpkg:liberror-perl/usr/share/perl5", "dpkg:libalgorithm-diff-perl/usr/share/perl5",
    "dpkg:libalgorithm-merge-perl/usr/share/perl5", "dpkg:adduser/usr/share/perl5", "dpkg:xml-core/usr/share/perl5",
    "dpkg:postgresql-client-common/usr/share/perl5", NULL};
/* held out (--heldout): never used to choose a ranking rule; Perl's own core modules */
static const char *const PERL_CORE_ROOTS[] = {"dpkg:perl-modules-5.36/usr/share/perl/5.36.0", NULL};

static void row(const char *set, const char *who, const qs_score *s)
{
    printf("  %-6s %-28s n=%4d  R@1 %.3f  R@10 %.3f  MRR@10 %.3f\n", set, who, s->n, s->r1, s->r10, s->mrr);
}

int main(int argc, char **argv)
{
    int code = 1, prose = 1, verbose = 0, max_q = 400, trials = 12, heldout = 0;
    const char *dump = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--code-only")) prose = 0;
        else if (!strcmp(argv[i], "--prose-only")) code = 0;
        else if (!strcmp(argv[i], "-v")) verbose++;
        else if (!strcmp(argv[i], "--heldout")) heldout = 1;
        else if (!strcmp(argv[i], "--max-q") && i + 1 < argc) max_q = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--trials") && i + 1 < argc) trials = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--dump") && i + 1 < argc) dump = argv[++i];
        else { fprintf(stderr, "usage: %s [--code-only|--prose-only] [--heldout] [-v] [--max-q N] [--trials N] [--dump DIR]\n", argv[0]); return 2; }
    }
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    if (code) {
        struct { const char *name; const char *const *roots; int max_files; } sets[] = {
            {"C", C_ROOTS, 600}, {"JS", JS_ROOTS, 600}, {"Perl", PERL_ROOTS, 600}};
        qs_score tot_d = {0}, tot_b = {0}, tot_c = {0}, tot_l = {0}, hd[2] = {{0}}, hb[2] = {{0}};
        double pool[3] = {0};
        int pool_n = 0;
        printf("code (questions = first sentence of a doc comment; comments removed from the index)\n");
        for (int s = 0; s < 3; s++) {
            qs_code_cfg cfg = {sets[s].name, sets[s].roots, sets[s].max_files, max_q, 21, dump};
            qs_code_result r;
            int rc = qs_code_run(&cfg, tmp, verbose, &r);
            if (rc < 0) { printf("  %-6s skipped (rc %d)\n", sets[s].name, rc); continue; }
            printf("  %-6s %d files, %d chunks, %d questions (%d more whose file the scope skips), symbol pulls on %d\n",
                   sets[s].name, r.files, r.chunks, r.questions, r.unindexed, r.sym_pulls);
            row(sets[s].name, "longctx default (retrieve)", &r.deflt);
            row(sets[s].name, "longctx core search", &r.core);
            row(sets[s].name, "plain BM25", &r.bm25);
            row(sets[s].name, "BM25, longctx tokens", &r.bm25_lcx);
            printf("  %-6s core search R@32 %.3f  R@64 %.3f  R@128 %.3f (ceiling of any reranker)\n", sets[s].name,
                   r.pool_r[0], r.pool_r[1], r.pool_r[2]);
            for (int z = 0; z < 3; z++) pool[z] += r.pool_r[z] * r.questions;
            pool_n += r.questions;
            printf("  %-6s MRR ratio default/BM25 %.3f\n", sets[s].name, r.bm25.mrr > 0 ? r.deflt.mrr / r.bm25.mrr : 0);
            qs_score *src[8] = {&r.deflt, &r.bm25, &r.core, &r.bm25_lcx, &r.half_d[0], &r.half_d[1], &r.half_b[0], &r.half_b[1]};
            qs_score *dst[8] = {&tot_d, &tot_b, &tot_c, &tot_l, &hd[0], &hd[1], &hb[0], &hb[1]};
            for (int k = 0; k < 8; k++) {
                dst[k]->r1 += src[k]->r1 * src[k]->n;
                dst[k]->r10 += src[k]->r10 * src[k]->n;
                dst[k]->mrr += src[k]->mrr * src[k]->n;
                dst[k]->n += src[k]->n;
            }
        }
        qs_score_done(&tot_d); qs_score_done(&tot_b); qs_score_done(&tot_c); qs_score_done(&tot_l);
        for (int z = 0; z < 2; z++) { qs_score_done(&hd[z]); qs_score_done(&hb[z]); }
        row("all", "longctx default (retrieve)", &tot_d);
        row("all", "longctx core search", &tot_c);
        row("all", "plain BM25", &tot_b);
        row("all", "BM25, longctx tokens", &tot_l);
        if (pool_n)
            printf("  all    core search R@32 %.3f  R@64 %.3f  R@128 %.3f (ceiling of any reranker)\n", pool[0] / pool_n,
                   pool[1] / pool_n, pool[2] / pool_n);
        printf("  all    MRR ratio default/(BM25, longctx tokens) %.3f\n", tot_l.mrr > 0 ? tot_d.mrr / tot_l.mrr : 0);
        printf("  all    MRR ratio default/BM25 %.3f\n", tot_b.mrr > 0 ? tot_d.mrr / tot_b.mrr : 0);
        row("tune", "longctx default (retrieve)", &hd[0]);
        row("held", "longctx default (retrieve)", &hd[1]);
        row("tune", "plain BM25", &hb[0]);
        row("held", "plain BM25", &hb[1]);
        if (heldout) {
            /* a set no ranking rule was chosen on: Perl's core modules */
            qs_code_cfg cfg = {"PerlCore", PERL_CORE_ROOTS, 600, max_q, 21, dump};
            qs_code_result r;
            int rc = qs_code_run(&cfg, tmp, verbose, &r);
            if (rc < 0) printf("  held-out PerlCore skipped (rc %d)\n", rc);
            else {
                printf("  held-out PerlCore: %d files, %d chunks, %d questions\n", r.files, r.chunks, r.questions);
                row("PerlC", "longctx default (retrieve)", &r.deflt);
                row("PerlC", "plain BM25", &r.bm25);
                row("PerlC", "BM25, longctx tokens", &r.bm25_lcx);
            }
        }
    }
    if (prose) {
        const char *fx = getenv("LCX_FIXTURES") ? getenv("LCX_FIXTURES") : "../shared/fixtures";
        char hay[4096];
        snprintf(hay, sizeof hay, "%s/haystack/paul_graham", fx);
        static const int toks[] = {8000, 32000, 128000, 1000000, 0};
        qs_prose_cfg cfg = {hay, toks, trials, 3, 21};
        qs_prose_result r;
        int rc = qs_prose_run(&cfg, verbose, &r);
        if (rc < 0) { printf("prose skipped (rc %d: no %s)\n", rc, hay); return 0; }
        printf("prose (rescue path; %d sessions of 8K-1M tokens, 1 target + 3 near-duplicate keys)\n", r.sessions);
        static const char *const shape[] = {"default, Question: marker", "default, no marker", "default, plain question"};
        for (int s = 0; s < QS_NSHAPES; s++)
            printf("  %-30s R@1 %.3f  R@8 %.3f  MRR %.3f\n", shape[s], r.deflt[s].r1, r.deflt[s].r10, r.deflt[s].mrr);
        printf("  %-30s R@1 %.3f  R@8 %.3f  MRR %.3f\n", "plain BM25 (question only)", r.bm25.r1, r.bm25.r10, r.bm25.mrr);
    }
    return 0;
}
