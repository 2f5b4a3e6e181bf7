/* Small end-to-end MRCR eval with a fixed seed: generated records → recipes → grades.
 * Asserts score floors for the Selector (det copy), recall floors for plain RAG and MultiQ,
 * that a deliberately wrong selector (off-by-one ordinal) scores LOW, that compaction fits
 * a 1M-character conversation into a small budget keeping the target reply, and (when the
 * longctx binary is built) that the CLI's --json/--responses output agrees. */
#include "testutil.h"
#include "eval/lcx_eval.h"
#include "longctx/lcx.h"
#include "longctx/lcx_recipes.h"
#include "util/util.h"
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define PER_BIN 3
#else
#define PER_BIN 8
#endif

static lcx_mrcr_gen *gen;
static lcx_embedder *emb;
static char hay[4096];

static int setup(void **st)
{
    const char *fx = getenv("LCX_FIXTURES");
    if (!fx) return 0;
    snprintf(hay, sizeof hay, "%s/haystack/paul_graham", fx);
    if (lcx__mrcr_gen_open(hay, &gen)) gen = NULL;
    if (lcx_embedder_hash_new(0, &emb)) return -1;
    return 0;
}

static int teardown(void **st)
{
    lcx__mrcr_gen_close(gen);
    lcx_embedder_free(emb);
    return 0;
}

typedef struct { double mean, recall; int fail_closed; size_t n; } agg_t;

static agg_t run_recipe(int recipe, int offset, int needles)
{
    agg_t a = {0};
    lcx_mrcr_eval_opts o = {.recipe = recipe, .top_k = 8, .emb = emb, .ordinal_offset = offset};
    for (int bin = 0; bin < 3; bin++)
        for (long i = 0; i < PER_BIN; i++) {
            lcx_mrcr_rec r;
            assert_int_equal(lcx__mrcr_gen_record(gen, 7, needles, bin, i, &r), 0);
            lcx_mrcr_outcome oc;
            assert_int_equal(lcx__mrcr_eval_one(&r, &o, &oc), 0);
            a.mean += oc.score;
            a.recall += oc.target_hit;
            a.fail_closed += oc.fail_closed;
            a.n++;
            lcx__mrcr_outcome_free(&oc);
            lcx__mrcr_rec_free(&r);
        }
    a.mean /= (double)a.n;
    a.recall /= (double)a.n;
    return a;
}

static void test_recipes(void **st)
{
    if (!gen) skip();
    const int needles[] = {2, 8};
    for (size_t k = 0; k < 2; k++) {
        agg_t sel = run_recipe(LCX_MRCR_RECIPE_SELECTOR, 0, needles[k]);
        agg_t bad = run_recipe(LCX_MRCR_RECIPE_SELECTOR, 1, needles[k]);
        agg_t plain = run_recipe(LCX_MRCR_RECIPE_PLAIN, 0, needles[k]);
        agg_t mq = run_recipe(LCX_MRCR_RECIPE_MULTIQ, 0, needles[k]);
        fprintf(stderr,
                "needles %d (n=%zu): selector %.4f (failc %d) | wrong selector %.4f | plain recall@8 %.3f score %.4f"
                " | multiq recall@8 %.3f score %.4f\n",
                needles[k], sel.n, sel.mean, sel.fail_closed, bad.mean, plain.recall, plain.mean, mq.recall,
                mq.mean);
        assert_true(sel.mean >= 0.99);
        assert_int_equal(sel.fail_closed, 0);
        assert_true(sel.recall >= 0.99);
        assert_true(bad.mean <= 0.75);          /* the grader notices a wrong pick */
        assert_true(bad.recall <= 0.01);
        assert_true(plain.recall >= 0.95);
        assert_true(mq.recall >= 0.95);
    }
    /* varied final questions (ordinal words, typos, last, 0-indexed, "Nth time I asked") */
    lcx__mrcr_gen_set_varied(gen, 1);
    agg_t v = run_recipe(LCX_MRCR_RECIPE_SELECTOR, 0, 8);
    agg_t vp = run_recipe(LCX_MRCR_RECIPE_PLAIN, 0, 8);
    lcx__mrcr_gen_set_varied(gen, 0);
    fprintf(stderr, "varied questions, 8 needles: selector %.4f (failc %d) | plain recall@8 %.3f\n", v.mean,
            v.fail_closed, vp.recall);
    assert_true(v.mean >= 0.99);
    assert_int_equal(v.fail_closed, 0);
    assert_true(vp.recall >= 0.9);
}

static cJSON *to_json(const lcx_mrcr_rec *r)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; i < r->n_msgs; i++) {
        cJSON *m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "role", r->msgs[i].role);
        cJSON_AddStringToObject(m, "content", r->msgs[i].content);
        cJSON_AddItemToArray(a, m);
    }
    return a;
}

static int contains_content(cJSON *a, const char *s)
{
    cJSON *m;
    cJSON_ArrayForEach(m, a) {
        cJSON *c = cJSON_GetObjectItemCaseSensitive(m, "content");
        if (cJSON_IsString(c) && !strcmp(c->valuestring, s)) return 1;
    }
    return 0;
}

static void test_compaction(void **st)
{
    if (!gen) skip();
    lcx_mrcr_rec r;
    int bin = 5;   /* 256K bin: 512K..1M characters */
#if defined(__SANITIZE_ADDRESS__)
    bin = 3;
#endif
    assert_int_equal(lcx__mrcr_gen_record(gen, 11, 8, bin, 0, &r), 0);
    /* ordinal request → the Selector's pick, verbatim */
    cJSON *a = to_json(&r);
    lcx_compact_opts o = lcx_compact_defaults();
    o.budget_tokens = 6000;
    o.keep_recent = 1;
    lcx_compact_report rep;
    assert_int_equal(lcx_compact_messages(a, emb, &o, &rep), 0);
    assert_true(rep.compacted);
    assert_true(rep.used_selector);
    assert_true(rep.tokens_before > 4 * o.budget_tokens);
    assert_true(rep.tokens_after <= o.budget_tokens);
    assert_true(contains_content(a, r.msgs[r.desired_msg_index + 1].content));
    assert_true(contains_content(a, r.msgs[r.desired_msg_index].content));
    cJSON *last = cJSON_GetArrayItem(a, cJSON_GetArraySize(a) - 1);
    assert_string_equal(cJSON_GetObjectItem(last, "content")->valuestring, r.msgs[r.n_msgs - 1].content);
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(a, 0), "content")->valuestring, r.msgs[0].content);
    cJSON_Delete(a);

    /* non-ordinal request → retrieval: turns about the topic come back, budget respected */
    a = to_json(&r);
    cJSON *q = cJSON_GetArrayItem(a, cJSON_GetArraySize(a) - 1);
    lcx_ordinal_req req;
    assert_int_equal(lcx_ordinal_parse(r.msgs[r.n_msgs - 1].content, r.msgs[r.n_msgs - 1].len, &req), 0);
    char nq[512];
    snprintf(nq, sizeof nq, "Summarise what you wrote in the %s about %s.", req.format, req.topic);
    cJSON_ReplaceItemInObject(q, "content", cJSON_CreateString(nq));
    assert_int_equal(lcx_compact_messages(a, emb, &o, &rep), 0);
    assert_true(rep.compacted);
    assert_false(rep.used_selector);
    assert_true(rep.n_retrieved >= 1);
    assert_true(rep.tokens_after <= o.budget_tokens);
    cJSON_Delete(a);

    /* under budget → untouched; not an array → EINVAL */
    cJSON *small = cJSON_Parse("[{\"role\":\"user\",\"content\":\"hi\"}]");
    assert_int_equal(lcx_compact_messages(small, emb, &o, &rep), 0);
    assert_false(rep.compacted);
    assert_int_equal(cJSON_GetArraySize(small), 1);
    cJSON_Delete(small);
    cJSON *obj = cJSON_Parse("{\"a\":1}");
    assert_int_equal(lcx_compact_messages(obj, emb, &o, &rep), LCX_EINVAL);
    cJSON_Delete(obj);
    lcx__mrcr_rec_free(&r);
}

/* message shapes the proxy sees: system messages, list content, budget trimming */
static void test_compaction_shapes(void **st)
{
    lcx_buf b = {0};
    lcx__buf_puts(&b, "[{\"role\":\"system\",\"content\":\"be brief\"}");
    const char *topics[] = {"owls", "tapirs", "bees", "rain"};
    for (int i = 0; i < 40; i++) {
        lcx__buf_printf(&b, ",{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"write a poem about %s\"}]}",
                       topics[i % 4]);
        lcx__buf_printf(&b, ",{\"role\":\"assistant\",\"content\":\"reply %d ", i);
        for (int k = 0; k < 200; k++) lcx__buf_puts(&b, "lorem ipsum ");
        lcx__buf_puts(&b, "\"}");
    }
    lcx__buf_puts(&b, ",{\"role\":\"system\",\"content\":\"mid-conversation system note\"}");
    lcx__buf_puts(&b, ",{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"the 3rd poem about bees\"}]}]");
    cJSON *a = cJSON_Parse(b.data);
    assert_non_null(a);
    lcx_compact_opts o = lcx_compact_defaults();
    o.budget_tokens = 2500;
    o.keep_recent = 1;
    lcx_compact_report rep;
    assert_int_equal(lcx_compact_messages(a, emb, &o, &rep), 0);
    assert_true(rep.compacted && rep.used_selector);
    /* 3rd bees request = message index 1 + 2*(2 + 4*2) → reply "reply 10" */
    int sys = 0, found = 0;
    cJSON *m;
    cJSON_ArrayForEach(m, a) {
        cJSON *c = cJSON_GetObjectItem(m, "content");
        if (!strcmp(cJSON_GetObjectItem(m, "role")->valuestring, "system")) sys++;
        if (cJSON_IsString(c) && !strncmp(c->valuestring, "reply 10 ", 9)) found = 1;
    }
    assert_int_equal(sys, 3);          /* both originals + the compaction note */
    assert_true(found);
    cJSON_Delete(a);

    /* retrieval path, with a budget that fits only some of the retrieved turns */
    a = cJSON_Parse(b.data);
    cJSON *last = cJSON_GetArrayItem(a, cJSON_GetArraySize(a) - 1);
    cJSON_ReplaceItemInObject(last, "content", cJSON_CreateString("what did the poems about bees say?"));
    o.top_k = 8;
    assert_int_equal(lcx_compact_messages(a, emb, &o, &rep), 0);
    assert_true(rep.compacted && !rep.used_selector);
    assert_true(rep.n_retrieved >= 1 && rep.n_retrieved < 8);
    assert_true(rep.tokens_after <= o.budget_tokens);
    cJSON_Delete(a);
    lcx__buf_free(&b);
}

static void test_cli(void **st)
{
    const char *bin = getenv("LCX_BIN");
    char exe[4096];
    snprintf(exe, sizeof exe, "%s/longctx", bin ? bin : ".");
    if (!gen || access(exe, X_OK)) { fprintf(stderr, "longctx binary not built: CLI check skipped\n"); skip(); }
    char *dir = tu_tmpdir();
    char cmd[32768], *out = NULL;
    snprintf(cmd, sizeof cmd,
             "'%s' eval mrcr-gen --needles 4 --bins 8k,16k --n 3 --seed 5 --out '%s/a.jsonl' --haystack '%s' && "
             "'%s' eval mrcr-gen --needles 4 --bins 8k,16k --n 3 --seed 5 --out '%s/b.jsonl' --haystack '%s' && "
             "cmp '%s/a.jsonl' '%s/b.jsonl' && "
             "'%s' eval mrcr '%s/a.jsonl' --recipe selector --json --responses '%s/r.jsonl'",
             exe, dir, hay, exe, dir, hay, dir, dir, exe, dir, dir);
    int rc = tu_run(cmd, &out);
    assert_int_equal(rc, 0);
    cJSON *j = cJSON_Parse(out);
    assert_true(cJSON_IsArray(j));
    assert_int_equal(cJSON_GetArraySize(j), 2);
    cJSON *b;
    cJSON_ArrayForEach(b, j) {
        assert_int_equal((int)cJSON_GetObjectItem(b, "n")->valuedouble, 3);
        assert_true(cJSON_GetObjectItem(b, "mean")->valuedouble >= 0.99);
        assert_non_null(cJSON_GetObjectItem(b, "ci95"));
        assert_non_null(cJSON_GetObjectItem(b, "recall_at_k"));
        assert_non_null(cJSON_GetObjectItem(b, "p50_ms"));
        assert_non_null(cJSON_GetObjectItem(b, "p95_ms"));
    }
    cJSON_Delete(j);
    free(out);
    char p[4200], *resp = NULL;
    size_t rl = 0;
    snprintf(p, sizeof p, "%s/r.jsonl", dir);
    assert_int_equal(lcx__read_file(p, 0, &resp, &rl), 0);
    int lines = 0;
    for (char *s = NULL, *l = strtok_r(resp, "\n", &s); l; l = strtok_r(NULL, "\n", &s), lines++) {
        cJSON *o = cJSON_Parse(l);
        assert_int_equal((int)cJSON_GetObjectItem(o, "index")->valuedouble, lines);
        assert_true(cJSON_IsString(cJSON_GetObjectItem(o, "response")));
        assert_true(cJSON_IsArray(cJSON_GetObjectItem(o, "retrieved_msg_indices")));
        cJSON_Delete(o);
    }
    assert_int_equal(lines, 6);
    free(resp);

    /* independent re-grade with CPython's difflib: the CLI's scores must match to 1e-12 */
    const char *py = getenv("LCX_PY") ? getenv("LCX_PY") : "/usr/bin/python3";
    const char *script =
        "import json, sys\n"
        "from difflib import SequenceMatcher\n"
        "def grade(resp, ans, h):\n"
        "    if not resp.startswith(h): return 0.0\n"
        "    return float(SequenceMatcher(None, resp.removeprefix(h), ans.removeprefix(h)).ratio())\n"
        "recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]\n"
        "for path in sys.argv[2:]:\n"
        "    out = [json.loads(l) for l in open(path) if l.strip()]\n"
        "    assert len(out) == len(recs)\n"
        "    for i, (r, o) in enumerate(zip(recs, out)):\n"
        "        assert o['index'] == i\n"
        "        g = grade(o['response'], r['answer'], r['random_string_to_prepend'])\n"
        "        assert abs(g - o['score']) <= 1e-12, (path, i, g, o['score'])\n"
        "print('ok')\n";
    snprintf(p, sizeof p, "%s/regrade.py", dir);
    assert_int_equal(tu_write(p, script, strlen(script)), 0);
    snprintf(cmd, sizeof cmd,
             "'%s' eval mrcr '%s/a.jsonl' --recipe plain --responses '%s/p.jsonl' >/dev/null && "
             "'%s' eval mrcr '%s/a.jsonl' --recipe selector --ordinal-offset 1 --responses '%s/w.jsonl' >/dev/null && "
             "'%s' '%s' '%s/a.jsonl' '%s/r.jsonl' '%s/p.jsonl' '%s/w.jsonl'",
             exe, dir, dir, exe, dir, dir, py, p, dir, dir, dir, dir);
    out = NULL;
    rc = tu_run(cmd, &out);
    if (rc) fprintf(stderr, "regrade: %s\n", out ? out : "");
    assert_int_equal(rc, 0);
    free(out);

    /* a record outside every bin is scored and reported in an "other" row, not dropped */
    const char *small =
        "{\"prompt\": [{\"role\": \"user\", \"content\": \"write a poem about owls\"}, "
        "{\"role\": \"assistant\", \"content\": \"Owls at night\"}, "
        "{\"role\": \"user\", \"content\": \"Prepend ab to the 1st (1 indexed) poem about owls.\"}], "
        "\"answer\": \"abOwls at night\", \"random_string_to_prepend\": \"ab\", \"n_needles\": 2, "
        "\"desired_msg_index\": 0, \"total_messages\": 3, \"n_chars\": 90}\n";
    snprintf(p, sizeof p, "%s/small.jsonl", dir);
    assert_int_equal(tu_write(p, small, strlen(small)), 0);
    snprintf(cmd, sizeof cmd, "'%s' eval mrcr '%s' --json", exe, p);
    out = NULL;
    assert_int_equal(tu_run(cmd, &out), 0);
    j = cJSON_Parse(out);
    free(out);
    assert_int_equal(cJSON_GetArraySize(j), 1);
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(j, 0), "bin")->valuestring, "other");
    assert_true(cJSON_GetObjectItem(cJSON_GetArrayItem(j, 0), "mean")->valuedouble == 1.0);
    cJSON_Delete(j);
    tu_rmrf(dir);
    free(dir);
}

/* --rerank-model: MultiQ's top turns go through the cross-encoder (reported per record);
 * a model that does not load stops the command with the loader's sentence */
static void test_cli_rerank(void **st)
{
    (void)st;
    const char *rr = tu_fixture("bert/tiny-bert-rerank-f32.gguf");
    const char *exe = tu_bin("longctx");
    char *dir = tu_tmpdir(), p[4200], cmd[16384], *out = NULL;
    const char *rec =
        "{\"prompt\": [{\"role\": \"user\", \"content\": \"write a poem about owls\"}, "
        "{\"role\": \"assistant\", \"content\": \"Owls at night\"}, "
        "{\"role\": \"user\", \"content\": \"write a poem about rivers\"}, "
        "{\"role\": \"assistant\", \"content\": \"Rivers run far\"}, "
        "{\"role\": \"user\", \"content\": \"Prepend ab to the 1st (1 indexed) poem about owls.\"}], "
        "\"answer\": \"abOwls at night\", \"random_string_to_prepend\": \"ab\", \"n_needles\": 2, "
        "\"desired_msg_index\": 0, \"total_messages\": 5, \"n_chars\": 150}\n";
    char two[4096];
    snprintf(two, sizeof two, "%s%s", rec, rec);
    snprintf(p, sizeof p, "%s/rr.jsonl", dir);
    assert_int_equal(tu_write(p, two, strlen(two)), 0);
    snprintf(cmd, sizeof cmd, "'%s' eval mrcr '%s' --recipe multiq --rerank-model '%s' --rerank-deadline-ms 60000 2>&1",
             exe, p, rr);
    assert_int_equal(tu_run(cmd, &out), 0);
    assert_non_null(strstr(out, "the cross-encoder reordered MultiQ's top turns in 2 of 2 records"));
    free(out);
    out = NULL;
    snprintf(cmd, sizeof cmd, "'%s' eval mrcr '%s' --recipe multiq 2>&1", exe, p);
    assert_int_equal(tu_run(cmd, &out), 0);
    assert_null(strstr(out, "cross-encoder"));
    free(out);
    out = NULL;
    snprintf(cmd, sizeof cmd, "'%s' eval mrcr '%s' --recipe multiq --rerank-model '%s/none.gguf' 2>&1", exe, p, dir);
    assert_int_equal(tu_run(cmd, &out), 1);
    assert_non_null(strstr(out, "--rerank-model"));
    free(out);
    tu_rmrf(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_recipes),
        cmocka_unit_test(test_compaction),
        cmocka_unit_test(test_compaction_shapes),
        cmocka_unit_test(test_cli),
        cmocka_unit_test(test_cli_rerank),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
