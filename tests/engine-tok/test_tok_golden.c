#define _GNU_SOURCE
/* Tokenizer golden tests: llama.cpp's vocab-only GGUFs with Hugging Face reference ids
 * (.inp/.out, 46 cases each, both directions), BERT vocab.txt against the same ids, and
 * llama2.c's tok512.bin against run.c's encode() output and generations (expected.json). */
#include "testutil.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/tokenizer.h"
#include "util/util.h"

#define MAXIDS 4096

typedef struct {
    char *inp_data;
    char *cases[64];
    size_t case_len[64];
    int n;
    int32_t *ids[64];
    int nids[64];
} golden;

static void golden_load(const char *gguf_rel, golden *gd) {
    memset(gd, 0, sizeof *gd);
    char rel[512];
    snprintf(rel, sizeof rel, "%s.inp", gguf_rel);
    size_t len;
    assert_int_equal(lcx__read_file(tu_fixture(rel), 1 << 20, &gd->inp_data, &len), 0);
    const char *sep = "\n__ggml_vocab_test__\n";
    char *p = gd->inp_data, *end = gd->inp_data + len;
    while (p < end) {
        char *q = memmem(p, (size_t)(end - p), sep, strlen(sep));
        if (!q) break;
        assert_true(gd->n < 64);
        gd->cases[gd->n] = p;
        gd->case_len[gd->n] = (size_t)(q - p);
        gd->n++;
        p = q + strlen(sep);
    }
    snprintf(rel, sizeof rel, "%s.out", gguf_rel);
    char *out;
    assert_int_equal(lcx__read_file(tu_fixture(rel), 1 << 20, &out, &len), 0);
    char *line = out;
    for (int i = 0; i < gd->n; i++) {
        char *nl = strchr(line, '\n');
        assert_non_null(nl);
        *nl = 0;
        gd->ids[i] = malloc(sizeof(int32_t) * MAXIDS);
        int k = 0;
        char *s = line, *e;
        for (;;) {
            long v = strtol(s, &e, 10);
            if (e == s) break;
            gd->ids[i][k++] = (int32_t)v;
            s = e;
        }
        gd->nids[i] = k;
        line = nl + 1;
    }
    free(out);
    assert_int_equal(gd->n, 46);
}

static void golden_free(golden *gd) {
    free(gd->inp_data);
    for (int i = 0; i < gd->n; i++) free(gd->ids[i]);
}

static void print_ids(const char *what, const int32_t *ids, int n) {
    fprintf(stderr, "  %s:", what);
    for (int i = 0; i < n && i < 64; i++) fprintf(stderr, " %d", ids[i]);
    fprintf(stderr, "%s\n", n > 64 ? " ..." : "");
}

/* Encodes every case (no specials, as the reference) and decodes every reference line;
 * returns the number of failures after printing each one. */
static int check_golden(const eng_tokenizer *t, const golden *gd, bool check_decode) {
    int fails = 0;
    int32_t *ids = malloc(sizeof(int32_t) * MAXIDS);
    char *text = malloc(1 << 16);
    for (int i = 0; i < gd->n; i++) {
        int n = eng__tokenize(t, gd->cases[i], gd->case_len[i], false, false, ids, MAXIDS);
        if (n != gd->nids[i] || memcmp(ids, gd->ids[i], sizeof(int32_t) * (size_t)(n > 0 ? n : 0)) != 0) {
            fprintf(stderr, "encode case %d '%.*s' differs\n", i, (int)(gd->case_len[i] > 60 ? 60 : gd->case_len[i]), gd->cases[i]);
            print_ids("got     ", ids, n);
            print_ids("expected", gd->ids[i], gd->nids[i]);
            fails++;
        }
        if (!check_decode) continue;
        int l = eng__detokenize(t, gd->ids[i], gd->nids[i], text, 1 << 16);
        if (l != (int)gd->case_len[i] || memcmp(text, gd->cases[i], (size_t)l) != 0) {
            fprintf(stderr, "decode case %d differs: got '%.*s'\n", i, l > 80 ? 80 : l, text);
            fails++;
        }
    }
    free(ids);
    free(text);
    return fails;
}

static eng_tokenizer *load_gguf(const char *rel, eng_gguf **gout) {
    eng_gguf *g = NULL;
    char err[256] = "";
    int rc = eng__gguf_open(tu_fixture(rel), &g, err, sizeof err);
    if (rc < 0) fprintf(stderr, "gguf open %s: %s\n", rel, err);
    assert_int_equal(rc, 0);
    eng_tokenizer *t = NULL;
    rc = eng__tokenizer_from_gguf(g, &t, err, sizeof err);
    if (rc < 0) fprintf(stderr, "tokenizer %s: %s\n", rel, err);
    assert_int_equal(rc, 0);
    if (gout) *gout = g;
    else eng__gguf_close(g);
    return t;
}

static void run_vocab(const char *rel, bool decode) {
    golden gd;
    golden_load(rel, &gd);
    eng_tokenizer *t = load_gguf(rel, NULL);
    int fails = check_golden(t, &gd, decode);
    fprintf(stderr, "%s: %d/%d cases pass\n", rel, gd.n * (decode ? 2 : 1) - fails, gd.n * (decode ? 2 : 1));
    eng__tokenizer_free(t);
    golden_free(&gd);
    assert_int_equal(fails, 0);
}

static void test_phi3(void **st) { (void)st; run_vocab("tokenizers/ggml-vocab-phi-3.gguf", true); }
static void test_gpt2(void **st) { (void)st; run_vocab("tokenizers/ggml-vocab-gpt-2.gguf", true); }
static void test_falcon(void **st) { (void)st; run_vocab("tokenizers/ggml-vocab-falcon.gguf", true); }
static void test_mpt(void **st) { (void)st; run_vocab("tokenizers/ggml-vocab-mpt.gguf", true); }
static void test_bert(void **st) { (void)st; run_vocab("tokenizers/ggml-vocab-bert-bge.gguf", false); }

/* WordPiece decode is lossy (lowercase, accents, spacing): check known renderings and that
 * decoding then re-encoding every reference line is stable. */
static void test_bert_decode(void **st) {
    (void)st;
    golden gd;
    golden_load("tokenizers/ggml-vocab-bert-bge.gguf", &gd);
    eng_tokenizer *t = load_gguf("tokenizers/ggml-vocab-bert-bge.gguf", NULL);
    char text[8192];
    int32_t ids[MAXIDS];
    static const struct { int i; const char *s; } known[] = {
        {1, "fuhrer"}, {16, "hello , world !"}, {43, "cua viet"}, {44, "discards"},
        {37, "3333"}, {0, "ied 4 \xC2\xBD months"},
    };
    for (size_t k = 0; k < LCX_ARRAY_LEN(known); k++) {
        int l = eng__detokenize(t, gd.ids[known[k].i], gd.nids[known[k].i], text, sizeof text);
        assert_true(l >= 0);
        assert_string_equal(text, known[k].s);
    }
    for (int i = 0; i < gd.n; i++) {
        bool has_unk = false;
        for (int j = 0; j < gd.nids[i]; j++) has_unk |= gd.ids[i][j] == eng__token_unk(t);
        if (has_unk) continue;
        int l = eng__detokenize(t, gd.ids[i], gd.nids[i], text, sizeof text);
        int n = eng__tokenize(t, text, (size_t)l, false, false, ids, MAXIDS);
        assert_int_equal(n, gd.nids[i]);
        assert_memory_equal(ids, gd.ids[i], sizeof(int32_t) * (size_t)n);
    }
    eng__tokenizer_free(t);
    golden_free(&gd);
}

/* vocab.txt -> same tokenizer as the GGUF: identical token list, identical ids. */
static void test_bert_vocab_txt(void **st) {
    (void)st;
    eng_tokenizer *tv = NULL;
    char err[256] = "";
    int rc = eng__tokenizer_from_vocab_txt(tu_fixture("tokenizers/bert-base-uncased-vocab.txt"), &tv, err, sizeof err);
    if (rc < 0) fprintf(stderr, "%s\n", err);
    assert_int_equal(rc, 0);
    eng_tokenizer *tg = load_gguf("tokenizers/ggml-vocab-bert-bge.gguf", NULL);
    assert_int_equal(eng__tokenizer_n_vocab(tv), 30522);
    assert_int_equal(eng__tokenizer_n_vocab(tv), eng__tokenizer_n_vocab(tg));
    int diff = 0;
    for (int32_t i = 0; i < eng__tokenizer_n_vocab(tv); i++) {
        size_t a, b;
        const char *x = eng__token_text(tv, i, &a), *y = eng__token_text(tg, i, &b);
        if (a != b || memcmp(x, y, a) != 0) diff++;
    }
    assert_int_equal(diff, 0);
    assert_int_equal(eng__token_bos(tv), 101);
    assert_int_equal(eng__token_sep(tv), 102);
    assert_int_equal(eng__token_unk(tv), 100);
    golden gd;
    golden_load("tokenizers/ggml-vocab-bert-bge.gguf", &gd);
    assert_int_equal(check_golden(tv, &gd, false), 0);
    golden_free(&gd);
    eng__tokenizer_free(tv);
    eng__tokenizer_free(tg);
}

/* model2vec's tokenizer.json describes the same vocabulary and the normaliser we implement. */
static void test_bert_tokenizer_json(void **st) {
    (void)st;
    char *data;
    size_t len;
    assert_int_equal(lcx__read_file(tu_fixture("tokenizers/model2vec-bert-base-uncased/tokenizer.json"), 8 << 20, &data, &len), 0);
    cJSON *j = cJSON_Parse(data);
    free(data);
    assert_non_null(j);
    cJSON *norm = cJSON_GetObjectItem(j, "normalizer");
    assert_string_equal(cJSON_GetObjectItem(norm, "type")->valuestring, "BertNormalizer");
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(norm, "lowercase")));
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(norm, "clean_text")));
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(norm, "handle_chinese_chars")));
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(norm, "strip_accents")));   /* = lowercase */
    cJSON *model = cJSON_GetObjectItem(j, "model");
    assert_string_equal(cJSON_GetObjectItem(model, "continuing_subword_prefix")->valuestring, "##");
    assert_int_equal(cJSON_GetObjectItem(model, "max_input_chars_per_word")->valueint, 100);
    cJSON *vocab = cJSON_GetObjectItem(model, "vocab");
    eng_tokenizer *tv = NULL;
    assert_int_equal(eng__tokenizer_from_vocab_txt(tu_fixture("tokenizers/bert-base-uncased-vocab.txt"), &tv, NULL, 0), 0);
    int n = 0, bad = 0;
    for (cJSON *e = vocab->child; e; e = e->next, n++) {
        const char *w = e->string;
        char conv[512];
        size_t l = strlen(w);
        if (l >= 2 && w[0] == '#' && w[1] == '#') snprintf(conv, sizeof conv, "%s", w + 2);
        else if (w[0] == '[' && w[l - 1] == ']') snprintf(conv, sizeof conv, "%s", w);
        else snprintf(conv, sizeof conv, "\xE2\x96\x81%s", w);
        if (eng__token_lookup(tv, conv, strlen(conv)) != e->valueint) bad++;
    }
    assert_int_equal(n, 30522);
    assert_int_equal(bad, 0);
    eng__tokenizer_free(tv);
    cJSON_Delete(j);
}

/* ---- llama2.c tok512.bin ------------------------------------------------------------ */

/* Loads tok512.bin as a GGUF "llama" vocabulary would hold it. raw_spaces keeps llama2.c's
 * ' ' (and "\n<s>\n"); otherwise spaces become U+2581 and BOS/EOS "<s>"/"</s>". */
static eng_tokenizer *load_tok512(bool raw_spaces) {
    char *data;
    size_t len;
    assert_int_equal(lcx__read_file(tu_fixture("llama2c/tok512.bin"), 1 << 20, &data, &len), 0);
    enum { N = 512 };
    char *toks[N];
    size_t lens[N];
    float scores[N];
    int32_t types[N];
    size_t p = 4;
    for (int i = 0; i < N; i++) {
        int32_t l;
        assert_true(p + 8 <= len);
        memcpy(&scores[i], data + p, 4);
        memcpy(&l, data + p + 4, 4);
        p += 8;
        assert_true(l >= 0 && p + (size_t)l <= len);
        toks[i] = malloc((size_t)l * 3 + 8);
        size_t o = 0;
        for (int k = 0; k < l; k++) {
            if (!raw_spaces && data[p + k] == ' ') { memcpy(toks[i] + o, "\xE2\x96\x81", 3); o += 3; }
            else toks[i][o++] = data[p + k];
        }
        lens[i] = o;
        p += (size_t)l;
        types[i] = i == 0 ? ENG_TOKT_UNKNOWN : i <= 2 ? ENG_TOKT_CONTROL : i <= 258 ? ENG_TOKT_BYTE : ENG_TOKT_NORMAL;
        if (!raw_spaces && i == 1) { strcpy(toks[i], "<s>"); lens[i] = 3; }
        if (!raw_spaces && i == 2) { strcpy(toks[i], "</s>"); lens[i] = 4; }
    }
    assert_int_equal(p, len);
    free(data);
    eng_tok_spec s;
    eng__tok_spec_init(&s);
    s.kind = ENG_TOK_SPM;
    s.n_tokens = N;
    s.tokens = (const char *const *)toks;
    s.token_lens = lens;
    s.scores = scores;
    s.token_types = types;
    eng_tokenizer *t = NULL;
    char err[256] = "";
    int rc = eng__tokenizer_from_spec(&s, &t, err, sizeof err);
    if (rc < 0) fprintf(stderr, "%s\n", err);
    assert_int_equal(rc, 0);
    for (int i = 0; i < N; i++) free(toks[i]);
    return t;
}

static cJSON *load_expected(void) {
    char *data;
    size_t len;
    assert_int_equal(lcx__read_file(tu_fixture("llama2c/expected.json"), 1 << 20, &data, &len), 0);
    cJSON *j = cJSON_Parse(data);
    free(data);
    assert_non_null(j);
    return j;
}

static void tok512_cases(bool raw) {
    eng_tokenizer *t = load_tok512(raw);
    cJSON *j = load_expected();
    cJSON *cases = cJSON_GetObjectItem(j, "encode_cases");
    assert_int_equal(cJSON_GetArraySize(cases), 13);
    int32_t ids[1024];
    char text[4096];
    int fails = 0;
    for (cJSON *c = cases->child; c; c = c->next) {
        const char *s = cJSON_GetObjectItem(c, "text")->valuestring;
        cJSON *exp = cJSON_GetObjectItem(c, "ids");
        int n = eng__tokenize(t, s, strlen(s), true, false, ids, 1024);
        bool ok = n == cJSON_GetArraySize(exp);
        int k = 0;
        for (cJSON *e = exp->child; e && ok; e = e->next, k++) ok = ids[k] == e->valueint;
        if (!ok) {
            fprintf(stderr, "tok512 encode '%s' differs\n", s);
            print_ids("got", ids, n);
            fails++;
        }
        int l = eng__detokenize(t, ids, n, text, sizeof text);
        if (l != (int)strlen(s) || strcmp(text, s) != 0) {
            fprintf(stderr, "tok512 decode '%s' gave '%s'\n", s, text);
            fails++;
        }
    }
    /* run.c's stdout = prompt echo + generated text + '\n' */
    cJSON *gen = cJSON_GetObjectItem(j, "cases");
    for (cJSON *c = gen->child; c; c = c->next) {
        int n = 0;
        cJSON *a;
        cJSON_ArrayForEach(a, cJSON_GetObjectItem(c, "prompt_ids")) ids[n++] = a->valueint;
        cJSON_ArrayForEach(a, cJSON_GetObjectItem(c, "generated_ids")) ids[n++] = a->valueint;
        if (n > 1 && ids[n - 1] == 1) n--;      /* a sampled BOS stops run.c unprinted */
        int l = eng__detokenize(t, ids, n, text, sizeof text - 1);
        assert_true(l >= 0 && l < (int)sizeof text - 1);
        text[l] = '\n';
        text[l + 1] = 0;
        const char *want = cJSON_GetObjectItem(c, "stdout")->valuestring;
        if (strcmp(text, want) != 0) {
            fprintf(stderr, "tok512 generation decode differs:\n got  %s\n want %s\n", text, want);
            fails++;
        }
    }
    cJSON_Delete(j);
    eng__tokenizer_free(t);
    assert_int_equal(fails, 0);
}

static void test_tok512_escaped(void **st) { (void)st; tok512_cases(false); }
static void test_tok512_raw(void **st) { (void)st; tok512_cases(true); }

/* The tiny model GGUFs carry llama.cpp llama_tokenize() goldens (fixtures/gguf README):
 * the tok512 SPM vocab as llama.cpp converted it, and a truncated GPT-2 vocab with the
 * qwen2 pre-tokenizer and ChatML control tokens. */
static void gguf_tokenize_goldens(const char *rel) {
    char jrel[256];
    snprintf(jrel, sizeof jrel, "%s.golden.json", rel);
    char *data;
    size_t len;
    assert_int_equal(lcx__read_file(tu_fixture(jrel), 64 << 20, &data, &len), 0);
    cJSON *j = cJSON_Parse(data);
    free(data);
    assert_non_null(j);
    eng_tokenizer *t = load_gguf(rel, NULL);
    cJSON *cases = cJSON_GetObjectItem(j, "tokenize"), *c;
    assert_int_equal(cJSON_GetArraySize(cases), 8);
    int fails = 0;
    int32_t ids[512];
    char text[1024];
    cJSON_ArrayForEach(c, cases) {
        const char *s = cJSON_GetObjectItem(c, "text")->valuestring;
        bool as = cJSON_IsTrue(cJSON_GetObjectItem(c, "add_special"));
        bool ps = cJSON_IsTrue(cJSON_GetObjectItem(c, "parse_special"));
        int n = eng__tokenize(t, s, strlen(s), as, ps, ids, 512);
        cJSON *exp = cJSON_GetObjectItem(c, "tokens"), *e;
        bool ok = n == cJSON_GetArraySize(exp);
        int k = 0;
        cJSON_ArrayForEach(e, exp) { if (ok && ids[k] != e->valueint) ok = false; k++; }
        if (!ok) {
            fprintf(stderr, "%s: tokenize '%s' (add_special %d, parse_special %d) differs\n", rel, s, as, ps);
            print_ids("got", ids, n);
            fails++;
        }
        /* plain text round-trips (control tokens print as nothing, so skip those) */
        if (!ps) {
            int l = eng__detokenize(t, ids, n, text, sizeof text);
            if (l != (int)strlen(s) || strcmp(text, s) != 0) {
                fprintf(stderr, "%s: detokenize gave '%s' for '%s'\n", rel, text, s);
                fails++;
            }
        }
    }
    /* EOG set as llama.cpp reports it */
    if (eng__tokenizer_kind(t) == ENG_TOK_BPE) {
        assert_true(eng__token_is_eog(t, 509));
        assert_true(eng__token_is_eog(t, 511));
        assert_false(eng__token_is_eog(t, 510));
    } else {
        assert_true(eng__token_is_eog(t, 2));
        assert_false(eng__token_is_eog(t, 1));
        assert_int_equal(eng__token_sep(t), ENG_TOKEN_NONE);     /* 0xFFFFFFFF in the file */
    }
    eng__tokenizer_free(t);
    cJSON_Delete(j);
    assert_int_equal(fails, 0);
}

static void test_gguf_stories(void **st) { (void)st; gguf_tokenize_goldens("gguf/stories260K.gguf"); }
static void test_gguf_tiny_llama(void **st) { (void)st; gguf_tokenize_goldens("gguf/tiny-llama-f32.gguf"); }
static void test_gguf_tiny_qwen2(void **st) { (void)st; gguf_tokenize_goldens("gguf/tiny-qwen2-f32.gguf"); }

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tok512_escaped),
        cmocka_unit_test(test_tok512_raw),
        cmocka_unit_test(test_phi3),
        cmocka_unit_test(test_gpt2),
        cmocka_unit_test(test_falcon),
        cmocka_unit_test(test_mpt),
        cmocka_unit_test(test_bert),
        cmocka_unit_test(test_bert_decode),
        cmocka_unit_test(test_bert_vocab_txt),
        cmocka_unit_test(test_bert_tokenizer_json),
        cmocka_unit_test(test_gguf_stories),
        cmocka_unit_test(test_gguf_tiny_llama),
        cmocka_unit_test(test_gguf_tiny_qwen2),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
