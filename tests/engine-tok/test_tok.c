#define _GNU_SOURCE
/* Tokenizer unit tests: special tokens and BOS/EOS rules, pre-tokenizer regexes without
 * fixtures (Llama-3, Qwen2) by hand cases, BPE merge order, byte round trips, long inputs,
 * chat templates (exact strings), and malformed metadata. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/tok_internal.h"
#include "engine/tokenizer.h"
#include "util/util.h"

static eng_tokenizer *load_gguf(const char *rel) {
    eng_gguf *g = NULL;
    char err[256] = "";
    int rc = eng__gguf_open(tu_fixture(rel), &g, err, sizeof err);
    if (rc < 0) fprintf(stderr, "%s\n", err);
    assert_int_equal(rc, 0);
    eng_tokenizer *t = NULL;
    rc = eng__tokenizer_from_gguf(g, &t, err, sizeof err);
    if (rc < 0) fprintf(stderr, "%s\n", err);
    assert_int_equal(rc, 0);
    eng__gguf_close(g);
    return t;
}

static int32_t id_of(const eng_tokenizer *t, const char *s) {
    int32_t id = eng__token_lookup(t, s, strlen(s));
    assert_true(id >= 0);
    return id;
}

/* A byte-level BPE vocabulary: the 256 byte stand-ins, then extra tokens (types given),
 * then merges. */
static eng_tokenizer *synth_bpe(const char *pre, const char *const *extra, const int32_t *extra_types,
                                int n_extra, const char *const *merges, int n_merges) {
    int n = 256 + n_extra;
    char **toks = calloc((size_t)n, sizeof(char *));
    size_t *lens = calloc((size_t)n, sizeof(size_t));
    int32_t *types = calloc((size_t)n, sizeof(int32_t));
    for (int b = 0; b < 256; b++) {
        toks[b] = malloc(4);
        lens[b] = (size_t)eng__utf8_encode(eng__bpe_byte_to_cp((uint8_t)b), toks[b]);
        types[b] = ENG_TOKT_NORMAL;
    }
    for (int i = 0; i < n_extra; i++) {
        toks[256 + i] = strdup(extra[i]);
        lens[256 + i] = strlen(extra[i]);
        types[256 + i] = extra_types ? extra_types[i] : ENG_TOKT_NORMAL;
    }
    size_t *mlens = calloc((size_t)(n_merges + 1), sizeof(size_t));
    for (int i = 0; i < n_merges; i++) mlens[i] = strlen(merges[i]);
    eng_tok_spec s;
    eng__tok_spec_init(&s);
    s.kind = ENG_TOK_BPE;
    s.pre = pre;
    s.n_tokens = n;
    s.tokens = (const char *const *)toks;
    s.token_lens = lens;
    s.token_types = types;
    s.n_merges = n_merges;
    s.merges = merges;
    s.merge_lens = mlens;
    eng_tokenizer *t = NULL;
    char err[256] = "";
    int rc = eng__tokenizer_from_spec(&s, &t, err, sizeof err);
    if (rc < 0) fprintf(stderr, "%s\n", err);
    assert_int_equal(rc, 0);
    for (int i = 0; i < n; i++) free(toks[i]);
    free(toks); free(lens); free(types); free(mlens);
    return t;
}

/* Splits text with t's pre-tokenizer and compares with the '|'-separated expectation. */
static void expect_split(const eng_tokenizer *t, const char *text, const char *const *want, int nwant) {
    size_t *sp, n;
    assert_int_equal(eng__bpe_split(t, text, strlen(text), &sp, &n), 0);
    bool ok = (int)n == nwant;
    for (size_t i = 0; ok && i < n; i++)
        ok = sp[2 * i + 1] == strlen(want[i]) && memcmp(text + sp[2 * i], want[i], sp[2 * i + 1]) == 0;
    if (!ok) {
        fprintf(stderr, "split of '%s':", text);
        for (size_t i = 0; i < n; i++) fprintf(stderr, " [%.*s]", (int)sp[2 * i + 1], text + sp[2 * i]);
        fprintf(stderr, "\n");
    }
    free(sp);
    assert_true(ok);
}
#define SPLIT(t, text, ...) do { \
    static const char *const w_[] = {__VA_ARGS__}; \
    expect_split(t, text, w_, (int)LCX_ARRAY_LEN(w_)); } while (0)

static void test_regex_llama3(void **st) {
    (void)st;
    eng_tokenizer *t = synth_bpe("llama3", NULL, NULL, 0, NULL, 0);
    SPLIT(t, "Hello world", "Hello", " world");
    SPLIT(t, "12345", "123", "45");
    SPLIT(t, "I'M here", "I", "'M", " here");            /* contractions case-insensitive */
    SPLIT(t, "don't", "don", "'t");
    SPLIT(t, "a  b", "a", " ", " b");
    SPLIT(t, "hi!!\n\nyo", "hi", "!!\n\n", "yo");
    SPLIT(t, "x\n\n  y", "x", "\n\n", " ", " y");
    SPLIT(t, "$100 ok", "$", "100", " ok");
    SPLIT(t, "\xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82 \xD0\xBC\xD0\xB8\xD1\x80",
          "\xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82", " \xD0\xBC\xD0\xB8\xD1\x80");
    SPLIT(t, "  x", " ", " x");
    SPLIT(t, "(hello)", "(hello", ")");
    assert_true(eng__tokenizer_add_bos(t));                   /* llama3 adds BOS by default */
    /* long runs: 100 KB of spaces before a letter split like short ones (no regex limits) */
    {
        size_t n = 100000;
        char *big = malloc(n + 2);
        memset(big, ' ', n);
        big[n] = 'x';
        big[n + 1] = 0;
        size_t *sp, ns;
        assert_int_equal(eng__bpe_split(t, big, n + 1, &sp, &ns), 0);
        assert_int_equal(ns, 2);
        assert_int_equal(sp[1], n - 1);
        assert_int_equal(sp[3], 2);
        free(sp);
        big[n] = '\n';
        memset(big + n / 2, '\n', 1);
        assert_int_equal(eng__bpe_split(t, big, n + 1, &sp, &ns), 0);
        /* \s*[\r\n]+ runs to the last newline: one chunk */
        assert_int_equal(ns, 1);
        assert_int_equal(sp[1], n + 1);
        free(sp);
        free(big);
    }
    eng__tokenizer_free(t);
}

static void test_regex_qwen2_gpt2(void **st) {
    (void)st;
    eng_tokenizer *q = synth_bpe("qwen2", NULL, NULL, 0, NULL, 0);
    SPLIT(q, "12345", "1", "2", "3", "4", "5");            /* single digits */
    SPLIT(q, "I'M here", "I", "'M", " here");
    SPLIT(q, "hi!!\n\nyo", "hi", "!!\n\n", "yo");
    assert_false(eng__tokenizer_add_bos(q));
    eng__tokenizer_free(q);
    eng_tokenizer *g = synth_bpe("gpt-2", NULL, NULL, 0, NULL, 0);
    SPLIT(g, "I'M here", "I", "'", "M", " here");           /* case-sensitive contractions */
    SPLIT(g, "12345 x", "12345", " x");
    SPLIT(g, "a\tb", "a", "\t", "b");
    eng__tokenizer_free(g);
    eng_tokenizer *k = synth_bpe("tekken", NULL, NULL, 0, NULL, 0);
    SPLIT(k, "HelloWorld helloWORLD ABCdef", "Hello", "World", " hello", "WORLD", " ABCdef");
    SPLIT(k, "x12 a/b\n", "x", "1", "2", " a", "/b", "\n");
    assert_true(eng__tokenizer_add_bos(k));
    eng__tokenizer_free(k);
    eng_tokenizer *f = synth_bpe("falcon", NULL, NULL, 0, NULL, 0);
    SPLIT(f, "1234567", "123", "456", "7");                 /* 3-digit groups */
    SPLIT(f, "a+=b", "a", "+=", "b");                       /* punctuation runs split first */
    eng__tokenizer_free(f);
}

/* Merge order: lowest rank first, leftmost on ties; merged ids come from the vocabulary. */
static void test_bpe_merges(void **st) {
    (void)st;
    static const char *const extra[] = {"ab", "bc", "abc", "aa"};
    static const char *const m1[] = {"b c", "a b", "a bc", "a a"};
    eng_tokenizer *t = synth_bpe("gpt-2", extra, NULL, 4, m1, 4);
    int32_t ids[16];
    assert_int_equal(eng__tokenize(t, "abc", 3, false, false, ids, 16), 1);
    assert_int_equal(ids[0], id_of(t, "abc"));              /* b+c first, then a+bc */
    assert_int_equal(eng__tokenize(t, "aaa", 3, false, false, ids, 16), 2);
    assert_int_equal(ids[0], id_of(t, "aa"));               /* leftmost pair wins the tie */
    assert_int_equal(ids[1], id_of(t, "a"));
    eng__tokenizer_free(t);
    static const char *const m2[] = {"a b", "b c"};
    t = synth_bpe("gpt-2", extra, NULL, 4, m2, 2);
    assert_int_equal(eng__tokenize(t, "abc", 3, false, false, ids, 16), 2);
    assert_int_equal(ids[0], id_of(t, "ab"));               /* a+b has the lower rank */
    assert_int_equal(ids[1], id_of(t, "c"));
    eng__tokenizer_free(t);
}

/* SPM: highest score first, leftmost on equal scores, byte fallback, UNK without bytes. */
static void test_spm_synthetic(void **st) {
    (void)st;
    static const char *const toks[] = {"<unk>", "<s>", "</s>", "a", "b", "aa", "ab", "\xE2\x96\x81", ("\xE2\x96\x81" "b"), "<0x63>"};
    static const float scores[] = {0, 0, 0, -1, -1, -2, -3, -1, -5, 0};
    static const int32_t types[] = {2, 3, 3, 1, 1, 1, 1, 1, 1, 6};
    size_t lens[10];
    for (int i = 0; i < 10; i++) lens[i] = strlen(toks[i]);
    eng_tok_spec s;
    eng__tok_spec_init(&s);
    s.kind = ENG_TOK_SPM;
    s.n_tokens = 10; s.tokens = toks; s.token_lens = lens; s.scores = scores; s.token_types = types;
    eng_tokenizer *t = NULL;
    assert_int_equal(eng__tokenizer_from_spec(&s, &t, NULL, 0), 0);
    int32_t ids[16];
    /* "▁aaa": aa+aa tie -> leftmost "a a" merges first */
    assert_int_equal(eng__tokenize(t, "aaa", 3, false, false, ids, 16), 3);
    assert_int_equal(ids[0], 7); assert_int_equal(ids[1], 5); assert_int_equal(ids[2], 3);
    /* "▁aab": aa (-2) beats ab (-3) */
    assert_int_equal(eng__tokenize(t, "aab", 3, true, false, ids, 16), 4);
    assert_int_equal(ids[0], 1); assert_int_equal(ids[1], 7); assert_int_equal(ids[2], 5); assert_int_equal(ids[3], 4);
    /* "▁b" is a token; 'c' falls back to <0x63>; 'd' has no byte token -> <unk> */
    assert_int_equal(eng__tokenize(t, "bcd", 3, false, false, ids, 16), 3);
    assert_int_equal(ids[0], 8); assert_int_equal(ids[1], 9); assert_int_equal(ids[2], 0);
    char out[16];
    assert_int_equal(eng__detokenize(t, ids, 3, out, sizeof out), 2);    /* <unk> prints nothing */
    assert_string_equal(out, "bc");
    eng__tokenizer_free(t);
}

/* Any byte string survives encode -> decode with a byte-level vocabulary, invalid UTF-8
 * included. */
static void test_bpe_bytes_roundtrip(void **st) {
    (void)st;
    eng_tokenizer *t = load_gguf("tokenizers/ggml-vocab-gpt-2.gguf");
    eng_tokenizer *p = load_gguf("tokenizers/ggml-vocab-phi-3.gguf");
    eng_tokenizer *bert = load_gguf("tokenizers/ggml-vocab-bert-bge.gguf");
    uint64_t x = 0x9E3779B97F4A7C15ull;
    char in[300], out[600];
    int32_t ids[1024];
    for (int iter = 0; iter < 300; iter++) {
        size_t n = (size_t)(iter % 257) + 1;
        for (size_t i = 0; i < n; i++) {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            /* mostly ASCII with some high bytes and spaces */
            in[i] = (x & 3) == 0 ? (char)(x >> 8) : (x & 7) == 1 ? ' ' : (char)('a' + (x >> 16) % 26);
        }
        int k = eng__tokenize(t, in, n, false, false, ids, 1024);
        assert_true(k > 0);
        int l = eng__detokenize(t, ids, k, out, sizeof out);
        assert_int_equal(l, (int)n);
        assert_memory_equal(in, out, n);
        /* SPM with byte fallback round-trips too (the dummy space is dropped again); NULs
         * and control-token text aside */
        int32_t junk[1024];
        assert_true(eng__tokenize(bert, in, n, true, true, junk, 1024) >= 2);
        assert_true(eng__tokenize(t, in, n, true, true, junk, 1024) > 0);
        bool has_nul = memchr(in, 0, n) != NULL;
        if (has_nul) continue;
        k = eng__tokenize(p, in, n, false, false, ids, 1024);
        assert_true(k > 0);
        l = eng__detokenize(p, ids, k, out, sizeof out);
        assert_int_equal(l, (int)n);
        assert_memory_equal(in, out, n);
    }
    eng__tokenizer_free(t);
    eng__tokenizer_free(p);
    eng__tokenizer_free(bert);
}

static void test_specials_phi3(void **st) {
    (void)st;
    eng_tokenizer *t = load_gguf("tokenizers/ggml-vocab-phi-3.gguf");
    assert_int_equal(eng__token_bos(t), 1);
    assert_int_equal(eng__token_eos(t), 32000);
    assert_true(eng__tokenizer_add_bos(t));
    assert_false(eng__tokenizer_add_eos(t));
    int32_t user = id_of(t, "<|user|>"), end = id_of(t, "<|end|>"), asst = id_of(t, "<|assistant|>");
    assert_true(eng__token_is_eog(t, 32000));
    assert_true(eng__token_is_eog(t, end));
    assert_false(eng__token_is_eog(t, user));
    assert_false(eng__token_is_eog(t, 1));
    assert_false(eng__token_is_eog(t, -1));
    const char *chat = "<|user|>\nHi<|end|>\n<|assistant|>\n";
    int32_t ids[64], plain[64];
    int n = eng__tokenize(t, chat, strlen(chat), true, true, ids, 64);
    /* BOS, <|user|> (its trailing "\n" stripped: Phi-3 specials rstrip), "▁Hi" (dummy
     * prefix after a special), <|end|>, <|assistant|> */
    assert_int_equal(n, 5);
    assert_int_equal(ids[0], 1);
    assert_int_equal(ids[1], user);
    assert_int_equal(ids[2], id_of(t, "\xE2\x96\x81Hi"));
    assert_int_equal(ids[3], end);
    assert_int_equal(ids[4], asst);
    /* without parse_special the markers are plain text */
    int m = eng__tokenize(t, chat, strlen(chat), true, false, plain, 64);
    assert_true(m > 8);
    for (int i = 1; i < m; i++) assert_true(plain[i] != user && plain[i] != end);
    char text[256];
    /* control tokens print as nothing */
    assert_int_equal(eng__token_to_piece(t, user, text, sizeof text), 0);
    assert_int_equal(eng__token_to_piece(t, id_of(t, "\xE2\x96\x81Hi"), text, sizeof text), 3);
    assert_memory_equal(text, " Hi", 3);
    assert_int_equal(eng__token_to_piece(t, id_of(t, "<0x0A>"), text, sizeof text), 1);
    assert_int_equal(text[0], '\n');
    /* piece longer than the buffer: full length returned, prefix written */
    assert_int_equal(eng__token_to_piece(t, id_of(t, "\xE2\x96\x81Hi"), text, 1), 3);
    /* empty text: BOS only with add_special, nothing without */
    assert_int_equal(eng__tokenize(t, "", 0, true, false, ids, 64), 1);
    assert_int_equal(eng__tokenize(t, "", 0, false, false, ids, 64), 0);
    /* max too small */
    assert_int_equal(eng__tokenize(t, "Hello world", 11, true, false, ids, 2), LCX_ELIMIT);
    assert_int_equal(ids[0], 1);
    assert_int_equal(eng__tokenize(t, "Hello world", 11, true, false, NULL, 0), LCX_ELIMIT);
    assert_int_equal(eng__tokenize(t, "Hello world", 11, true, false, ids, 64), 3);
    assert_int_equal(eng__tokenize(NULL, "x", 1, true, false, ids, 64), LCX_EINVAL);
    assert_int_equal(eng__token_to_piece(t, 99999, text, sizeof text), LCX_EINVAL);
    /* detokenize: BOS prints nothing, dummy space dropped; truncation reports full length */
    assert_int_equal(eng__detokenize(t, ids, 3, text, sizeof text), 11);
    assert_string_equal(text, "Hello world");
    assert_int_equal(eng__detokenize(t, ids, 3, text, 6), 11);
    assert_string_equal(text, "Hello");
    eng__tokenizer_free(t);
}

static void test_specials_gpt2_bert(void **st) {
    (void)st;
    eng_tokenizer *t = load_gguf("tokenizers/ggml-vocab-gpt-2.gguf");
    int32_t ids[64];
    const char *s = "a<|endoftext|>b";
    assert_int_equal(eng__tokenize(t, s, strlen(s), true, true, ids, 64), 3);   /* gpt2: no BOS added */
    assert_int_equal(ids[1], 50256);
    int n = eng__tokenize(t, s, strlen(s), false, false, ids, 64);
    assert_true(n > 3);
    for (int i = 0; i < n; i++) assert_true(ids[i] != 50256);
    assert_true(eng__token_is_eog(t, 50256));
    assert_int_equal(eng__token_bos(t), 50256);
    assert_false(eng__tokenizer_add_bos(t));
    eng__tokenizer_free(t);

    t = load_gguf("tokenizers/ggml-vocab-bert-bge.gguf");
    s = "Hello [SEP] world";
    n = eng__tokenize(t, s, strlen(s), true, true, ids, 64);
    assert_int_equal(n, 5);
    assert_int_equal(ids[0], 101);     /* [CLS] */
    assert_int_equal(ids[2], 102);     /* parsed [SEP] */
    assert_int_equal(ids[4], 102);     /* closing [SEP] */
    n = eng__tokenize(t, s, strlen(s), false, false, ids, 64);
    assert_int_equal(n, 5);            /* hello [ sep ] world */
    assert_int_equal(ids[1], id_of(t, "\xE2\x96\x81["));
    /* long words become one [UNK] (HF max_input_chars_per_word = 100) */
    char longw[202];
    memset(longw, 'a', 201);
    longw[201] = 0;
    assert_int_equal(eng__tokenize(t, longw, 201, false, false, ids, 64), 1);
    assert_int_equal(ids[0], 100);
    /* accents stripped, lowercase, CJK split, control chars dropped */
    s = "CAF\xC3\x89\x01 \xE5\xA4\xA9\xE5\xA4\xA9";
    n = eng__tokenize(t, s, strlen(s), false, false, ids, 64);
    assert_int_equal(n, 3);
    assert_int_equal(ids[0], id_of(t, "\xE2\x96\x81" "cafe"));
    assert_int_equal(ids[1], id_of(t, "\xE2\x96\x81\xE5\xA4\xA9"));
    assert_int_equal(ids[2], ids[1]);
    eng__tokenizer_free(t);
}

/* mpt: runs of spaces are user-defined tokens, matched even without parse_special. */
static void test_user_defined_mpt(void **st) {
    (void)st;
    eng_tokenizer *t = load_gguf("tokenizers/ggml-vocab-mpt.gguf");
    int32_t ids[64];
    const char *s = "a    b";
    int n = eng__tokenize(t, s, strlen(s), false, false, ids, 64);
    assert_int_equal(n, 3);
    /* the whole run is the longest user-defined match, as in HF's added-token split */
    assert_int_equal(ids[1], id_of(t, "    "));
    assert_int_equal(ids[2], id_of(t, "b"));
    assert_int_equal(eng__token_type(t, ids[1]), ENG_TOKT_USER_DEFINED);
    char text[64];
    assert_int_equal(eng__detokenize(t, ids, n, text, sizeof text), 6);
    assert_string_equal(text, s);
    eng__tokenizer_free(t);
}

/* ~100 KB of essays through every model, plus degenerate long words: must finish quickly
 * (merges are heap-driven) and round-trip. Times are printed, not asserted. */
static void test_long_inputs(void **st) {
    (void)st;
    static const char *const essays[] = {"worked.txt", "popular.txt"};
    lcx_buf b = {0};
    for (size_t i = 0; i < LCX_ARRAY_LEN(essays); i++) {
        char rel[128], *d;
        size_t l;
        snprintf(rel, sizeof rel, "haystack/paul_graham/%s", essays[i]);
        assert_int_equal(lcx__read_file(tu_fixture(rel), 1 << 20, &d, &l), 0);
        assert_int_equal(lcx__buf_append(&b, d, l), 0);
        free(d);
    }
    size_t n = b.len > 100000 ? 100000 : b.len;
    while (n > 0 && ((unsigned char)b.data[n] & 0xC0) == 0x80) n--;   /* UTF-8 boundary */
    static const char *const vocabs[] = {
        "tokenizers/ggml-vocab-gpt-2.gguf", "tokenizers/ggml-vocab-falcon.gguf",
        "tokenizers/ggml-vocab-mpt.gguf", "tokenizers/ggml-vocab-phi-3.gguf",
        "tokenizers/ggml-vocab-bert-bge.gguf"};
    int32_t *ids = malloc(sizeof(int32_t) * 200000);
    char *out = malloc(400000);
    char *deg = malloc(100001);
    for (size_t v = 0; v < LCX_ARRAY_LEN(vocabs); v++) {
        eng_tokenizer *t = load_gguf(vocabs[v]);
        bool wpm = eng__tokenizer_kind(t) == ENG_TOK_WPM;
        double t0 = lcx__now_ms();
        int k = eng__tokenize(t, b.data, n, false, false, ids, 200000);
        double t1 = lcx__now_ms();
        assert_true(k > (int)(n / 8) && k < (int)n);
        if (!wpm) {
            int l = eng__detokenize(t, ids, k, out, 400000);
            assert_int_equal(l, (int)n);
            assert_memory_equal(out, b.data, n);
        }
        fprintf(stderr, "%-40s %zu bytes -> %d tokens in %.1f ms\n", vocabs[v], n, k, t1 - t0);
        /* degenerate: one 100 KB word, 100 KB of spaces, 100 KB of one emoji */
        static const char *const fill[] = {"a", " ", "\xF0\x9F\xA6\x99"};
        for (int f = 0; f < 3; f++) {
            size_t fl = strlen(fill[f]), m = 0;
            while (m + fl <= 100000) { memcpy(deg + m, fill[f], fl); m += fl; }
            t0 = lcx__now_ms();
            k = eng__tokenize(t, deg, m, false, false, ids, 200000);
            t1 = lcx__now_ms();
            assert_true(k >= 0);
            if (!wpm) {
                int l = eng__detokenize(t, ids, k, out, 400000);
                assert_int_equal(l, (int)m);
                assert_memory_equal(out, deg, m);
            }
            fprintf(stderr, "%-40s degenerate '%s' x%zu -> %d tokens in %.1f ms\n", vocabs[v],
                    f == 1 ? "space" : fill[f], m / fl, k, t1 - t0);
        }
        eng__tokenizer_free(t);
    }
    free(ids); free(out); free(deg);
    lcx__buf_free(&b);
}

/* Streaming: emitting token pieces with eng__utf8_stream_cut never splits a character. */
static void test_utf8_stream(void **st) {
    (void)st;
    assert_int_equal(eng__utf8_stream_cut("abc", 3), 3);
    assert_int_equal(eng__utf8_stream_cut("a\xC3", 2), 1);
    assert_int_equal(eng__utf8_stream_cut("a\xC3\xA9", 3), 3);
    assert_int_equal(eng__utf8_stream_cut("\xF0\x9F\xA6", 3), 0);
    assert_int_equal(eng__utf8_stream_cut("\xF0\x9F\xA6\x99", 4), 4);
    assert_int_equal(eng__utf8_stream_cut("x\xE0\x80", 3), 3);     /* overlong prefix: not held */
    assert_int_equal(eng__utf8_stream_cut("x\xFF", 2), 2);          /* malformed: emitted */
    assert_int_equal(eng__utf8_stream_cut("\x80\x80", 2), 2);
    /* phi-3 encodes CJK/emoji as byte tokens: stream them piece by piece */
    eng_tokenizer *t = load_gguf("tokenizers/ggml-vocab-phi-3.gguf");
    const char *s = "caf\xC3\xA9 \xF0\x9F\xA6\x99 \xE1\x9E\x80\xE1\x9E\xB6 done";
    int32_t ids[64];
    int n = eng__tokenize(t, s, strlen(s), false, false, ids, 64);
    assert_true(n > 0);
    char hold[8192], out[256];
    size_t hl = 0, ol = 0;
    for (int i = 0; i < n; i++) {
        int pl = eng__token_to_piece(t, ids[i], hold + hl, sizeof hold - hl);
        assert_true(pl >= 0);
        hl += (size_t)pl;
        size_t cut = eng__utf8_stream_cut(hold, hl);
        assert_true(lcx__utf8_valid(hold, cut));
        memcpy(out + ol, hold, cut);
        ol += cut;
        memmove(hold, hold + cut, hl - cut);
        hl -= cut;
    }
    assert_int_equal(hl, 0);
    out[ol] = 0;
    assert_string_equal(out + 1, s);           /* the dummy-prefix space comes first */
    eng__tokenizer_free(t);
}

/* ---- chat templates -------------------------------------------------------------------- */

static const eng_chat_msg conv[] = {
    {"system", "You are helpful."}, {"user", "Hi"}, {"assistant", "Hello!"}, {"user", " How are you? \n"},
};

static void test_chat_format(void **st) {
    (void)st;
    char *o = NULL;
    int n = eng__chat_format(ENG_CHAT_CHATML, NULL, conv, 4, true, &o);
    const char *want_chatml =
        "<|im_start|>system\nYou are helpful.<|im_end|>\n"
        "<|im_start|>user\nHi<|im_end|>\n"
        "<|im_start|>assistant\nHello!<|im_end|>\n"
        "<|im_start|>user\n How are you? \n<|im_end|>\n"
        "<|im_start|>assistant\n";
    assert_string_equal(o, want_chatml);
    assert_int_equal(n, (int)strlen(want_chatml));
    free(o);
    n = eng__chat_format(ENG_CHAT_LLAMA3, NULL, conv, 4, true, &o);
    assert_string_equal(o,
        "<|start_header_id|>system<|end_header_id|>\n\nYou are helpful.<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nHow are you?<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n");
    free(o);
    n = eng__chat_format(ENG_CHAT_MISTRAL, NULL, conv, 4, true, &o);
    assert_string_equal(o, "[INST] You are helpful.\n\nHi [/INST]Hello!</s>[INST]  How are you? \n [/INST]");
    free(o);
    n = eng__chat_format(ENG_CHAT_CHATML, NULL, conv + 1, 1, false, &o);
    assert_string_equal(o, "<|im_start|>user\nHi<|im_end|>\n");
    free(o);
    n = eng__chat_format(ENG_CHAT_LLAMA3, NULL, NULL, 0, false, &o);
    assert_int_equal(n, 0);
    assert_string_equal(o, "");
    free(o);
    eng_chat_msg bad = {"user", NULL};
    assert_int_equal(eng__chat_format(ENG_CHAT_CHATML, NULL, &bad, 1, true, &o), LCX_EINVAL);
    assert_int_equal(eng__chat_format((eng_chat_tmpl)7, NULL, conv, 1, true, &o), LCX_EINVAL);

    bool fb = true;
    assert_int_equal(eng__chat_detect("{% for m in messages %}<|im_start|>{{m.role}}", 44, &fb), ENG_CHAT_CHATML);
    assert_false(fb);
    const char *l3 = "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' }}";
    assert_int_equal(eng__chat_detect(l3, strlen(l3), &fb), ENG_CHAT_LLAMA3);
    assert_false(fb);
    const char *mi = "{{ bos_token }}{% for message in messages %}{{ '[INST] ' + message['content'] + ' [/INST]' }}";
    assert_int_equal(eng__chat_detect(mi, strlen(mi), &fb), ENG_CHAT_MISTRAL);
    assert_false(fb);
    assert_int_equal(eng__chat_detect("{{ weird }}", 11, &fb), ENG_CHAT_CHATML);
    assert_true(fb);
    fb = false;
    assert_int_equal(eng__chat_detect(NULL, 0, &fb), ENG_CHAT_CHATML);
    assert_true(fb);
    assert_string_equal(eng__chat_tmpl_name(ENG_CHAT_MISTRAL), "mistral");
    assert_int_equal(eng__chat_tmpl_from_name("llama3"), ENG_CHAT_LLAMA3);
    assert_int_equal(eng__chat_tmpl_from_name("chatml"), ENG_CHAT_CHATML);
    assert_int_equal(eng__chat_tmpl_from_name("jinja"), LCX_ENOTFOUND);
}

/* Writes a vocab-only GGUF (tokens as given, model gpt2-free "llama") with a template. */
static char *write_chat_gguf(const char *dir, const char *name, const char *tmpl) {
    char *path = malloc(512);
    snprintf(path, 512, "%s/%s.gguf", dir, name);
    eng_gguf_writer *w = eng__gguf_writer_new(0);
    assert_non_null(w);
    static const char *const toks[] = {"<unk>", "<s>", "<EOS!>", "a"};
    size_t lens[4];
    for (int i = 0; i < 4; i++) lens[i] = strlen(toks[i]);
    assert_int_equal(eng__gguf_w_str(w, "tokenizer.ggml.model", "llama"), 0);
    assert_int_equal(eng__gguf_w_arr_str(w, "tokenizer.ggml.tokens", toks, lens, 4), 0);
    assert_int_equal(eng__gguf_w_u32(w, "tokenizer.ggml.eos_token_id", 2), 0);
    if (tmpl) assert_int_equal(eng__gguf_w_str(w, "tokenizer.chat_template", tmpl), 0);
    assert_int_equal(eng__gguf_writer_write(w, path, NULL, NULL), 0);
    eng__gguf_writer_free(w);
    return path;
}

static void test_chat_apply(void **st) {
    (void)st;
    /* Phi-3's template is none of the three: ChatML with the fallback flag */
    eng_gguf *g = NULL;
    assert_int_equal(eng__gguf_open(tu_fixture("tokenizers/ggml-vocab-phi-3.gguf"), &g, NULL, 0), 0);
    char *o = NULL;
    bool fb = false;
    int n = eng__chat_apply(g, conv + 1, 1, true, &o, &fb);
    assert_true(fb);
    assert_string_equal(o, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    assert_int_equal(n, (int)strlen(o));
    free(o);
    eng__gguf_close(g);

    char *dir = tu_tmpdir();
    char *p = write_chat_gguf(dir, "mistral", "{{ bos_token }}{% for m in messages %}[INST] {{ m.content }} [/INST]{% endfor %}");
    assert_int_equal(eng__gguf_open(p, &g, NULL, 0), 0);
    n = eng__chat_apply(g, conv + 1, 3, true, &o, &fb);
    assert_false(fb);
    assert_string_equal(o, "[INST] Hi [/INST]Hello!<EOS!>[INST]  How are you? \n [/INST]");   /* eos text from the vocab */
    free(o);
    eng__gguf_close(g);
    free(p);
    p = write_chat_gguf(dir, "none", NULL);
    assert_int_equal(eng__gguf_open(p, &g, NULL, 0), 0);
    fb = false;
    n = eng__chat_apply(g, conv + 1, 1, false, &o, &fb);
    assert_true(fb);
    assert_string_equal(o, "<|im_start|>user\nHi<|im_end|>\n");
    free(o);
    eng__gguf_close(g);
    free(p);
    tu_rmrf(dir);
    free(dir);
}

/* ChatML text tokenizes with its markers as single control tokens. */
static void test_chat_tokenize(void **st) {
    (void)st;
    static const char *const extra[] = {"<|im_start|>", "<|im_end|>", "<|endoftext|>"};
    static const int32_t types[] = {ENG_TOKT_CONTROL, ENG_TOKT_CONTROL, ENG_TOKT_CONTROL};
    eng_tokenizer *t = synth_bpe("qwen2", extra, types, 3, NULL, 0);
    int32_t im_start = id_of(t, "<|im_start|>"), im_end = id_of(t, "<|im_end|>");
    assert_true(eng__token_is_eog(t, im_end));
    assert_int_equal(eng__token_eot(t), im_end);
    char *o = NULL;
    assert_true(eng__chat_format(ENG_CHAT_CHATML, NULL, conv + 1, 1, true, &o) > 0);
    int32_t ids[128];
    int n = eng__tokenize(t, o, strlen(o), true, true, ids, 128);
    /* <|im_start|> u s e r \n H i <|im_end|> \n <|im_start|> a s s i s t a n t \n */
    assert_int_equal(n, 1 + 5 + 2 + 1 + 1 + 1 + 9 + 1);
    assert_int_equal(ids[0], im_start);
    assert_int_equal(ids[8], im_end);
    assert_int_equal(ids[10], im_start);
    char text[256];
    assert_int_equal(eng__detokenize(t, ids, n, text, sizeof text), (int)strlen("user\nHi\nassistant\n"));
    assert_string_equal(text, "user\nHi\nassistant\n");                /* control tokens print nothing */
    free(o);
    eng__tokenizer_free(t);
}

/* ---- malformed metadata ----------------------------------------------------------------- */

typedef enum { BAD_SCORES_LEN, BAD_TYPE_KIND, BAD_BOS, NO_MERGES, BAD_MODEL, BAD_PRE, TOKENS_NOT_ARRAY, NO_MODEL } bad_kind;

static int try_bad(const char *dir, bad_kind k) {
    char path[512];
    snprintf(path, sizeof path, "%s/bad%d.gguf", dir, (int)k);
    eng_gguf_writer *w = eng__gguf_writer_new(0);
    static const char *const toks[] = {"a", "b", "ab"};
    static const size_t lens[] = {1, 1, 2};
    static const char *const merges[] = {"a b"};
    static const size_t mlens[] = {3};
    float scores[4] = {0};
    float ftypes[3] = {1, 1, 1};
    const char *model = k == NO_MERGES || k == BAD_PRE ? "gpt2" : k == BAD_MODEL ? "t5" : "llama";
    if (k != NO_MODEL) eng__gguf_w_str(w, "tokenizer.ggml.model", model);
    if (k == BAD_PRE) { eng__gguf_w_str(w, "tokenizer.ggml.pre", "no-such-pre"); eng__gguf_w_arr_str(w, "tokenizer.ggml.merges", merges, mlens, 1); }
    if (k == TOKENS_NOT_ARRAY) eng__gguf_w_str(w, "tokenizer.ggml.tokens", "a b ab");
    else eng__gguf_w_arr_str(w, "tokenizer.ggml.tokens", toks, lens, 3);
    if (k == BAD_SCORES_LEN) eng__gguf_w_arr(w, "tokenizer.ggml.scores", ENG_GGUF_F32, scores, 4);
    if (k == BAD_TYPE_KIND) eng__gguf_w_arr(w, "tokenizer.ggml.token_type", ENG_GGUF_F32, ftypes, 3);
    if (k == BAD_BOS) eng__gguf_w_u32(w, "tokenizer.ggml.bos_token_id", 3);
    assert_int_equal(eng__gguf_writer_write(w, path, NULL, NULL), 0);
    eng__gguf_writer_free(w);
    eng_gguf *g = NULL;
    assert_int_equal(eng__gguf_open(path, &g, NULL, 0), 0);
    eng_tokenizer *t = (eng_tokenizer *)(uintptr_t)1;
    char err[256] = "";
    int rc = eng__tokenizer_from_gguf(g, &t, err, sizeof err);
    assert_null(t);
    assert_true(rc < 0 && err[0]);
    fprintf(stderr, "bad case %d -> %s: %s\n", (int)k, lcx_strerror(rc), err);
    eng__gguf_close(g);
    return rc;
}

static void test_bad_metadata(void **st) {
    (void)st;
    char *dir = tu_tmpdir();
    assert_int_equal(try_bad(dir, BAD_SCORES_LEN), LCX_ECORRUPT);
    assert_int_equal(try_bad(dir, BAD_TYPE_KIND), LCX_ECORRUPT);
    assert_int_equal(try_bad(dir, BAD_BOS), LCX_ECORRUPT);
    assert_int_equal(try_bad(dir, NO_MERGES), LCX_ENOTFOUND);
    assert_int_equal(try_bad(dir, BAD_MODEL), LCX_ENOTSUP);
    assert_int_equal(try_bad(dir, BAD_PRE), LCX_ENOTSUP);
    assert_int_equal(try_bad(dir, TOKENS_NOT_ARRAY), LCX_ENOTFOUND);
    assert_int_equal(try_bad(dir, NO_MODEL), LCX_ENOTFOUND);
    tu_rmrf(dir);
    free(dir);
    /* spec-level checks */
    eng_tok_spec s;
    eng__tok_spec_init(&s);
    eng_tokenizer *t = NULL;
    assert_int_equal(eng__tokenizer_from_spec(&s, &t, NULL, 0), LCX_EINVAL);   /* empty */
    const char *tk[] = {"x"};
    size_t tl[] = {ENG_TOK_MAX_TOKEN + 1};
    s.n_tokens = 1; s.tokens = tk; s.token_lens = tl;
    assert_int_equal(eng__tokenizer_from_spec(&s, &t, NULL, 0), LCX_ELIMIT);
    assert_null(t);
    eng__tokenizer_free(NULL);
    assert_true(eng__tokenizer_from_vocab_txt("/nonexistent/vocab.txt", &t, NULL, 0) < 0);
    assert_null(t);
}

/* Corrupted metadata: random byte flips in the key/value region of real files. Whatever the
 * GGUF reader accepts, the tokenizer either refuses cleanly or builds something that can
 * tokenize and detokenize without touching memory it does not own (run under ASan). */
static void test_mutated_gguf(void **st) {
    (void)st;
    static const struct { const char *rel; size_t span; } files[] = {
        {"gguf/stories260K.gguf", 8000}, {"gguf/tiny-qwen2-f32.gguf", 12000},
        {"tokenizers/ggml-vocab-bert-bge.gguf", 627000},
    };
    uint64_t x = 0x243F6A8885A308D3ull;
    int built = 0, refused = 0;
    for (size_t f = 0; f < LCX_ARRAY_LEN(files); f++) {
        char *orig;
        size_t len;
        assert_int_equal(lcx__read_file(tu_fixture(files[f].rel), 8 << 20, &orig, &len), 0);
        char *buf = malloc(len);
        for (int it = 0; it < 100; it++) {
            memcpy(buf, orig, len);
            for (int k = 0; k < 1 + it % 2; k++) {
                x ^= x << 13; x ^= x >> 7; x ^= x << 17;
                size_t off = 24 + (size_t)(x % (files[f].span < len - 24 ? files[f].span : len - 24));
                buf[off] = (char)(x >> 40);
            }
            eng_gguf *g = NULL;
            if (eng__gguf_open_mem(buf, len, &g, NULL, 0) < 0) continue;
            eng_tokenizer *t = NULL;
            char err[256];
            if (eng__tokenizer_from_gguf(g, &t, err, sizeof err) < 0) { refused++; eng__gguf_close(g); continue; }
            built++;
            static const char *const s = "Hello world <s> [CLS] <|im_start|>\xC3\xA9 12345\n\t \xF0\x9F\xA6\x99";
            int32_t ids[256];
            for (int ps = 0; ps < 2; ps++) {
                int n = eng__tokenize(t, s, strlen(s), true, ps, ids, 256);
                if (n > 256) n = 256;
                if (n > 0) {
                    char out[4096];
                    (void)eng__detokenize(t, ids, n, out, sizeof out);
                }
            }
            for (int32_t id = 0; id < eng__tokenizer_n_vocab(t); id += 97) {
                char piece[64];
                assert_true(eng__token_to_piece(t, id, piece, sizeof piece) >= 0);
            }
            eng__tokenizer_free(t);
            eng__gguf_close(g);
        }
        free(buf);
        free(orig);
    }
    fprintf(stderr, "mutated GGUFs: %d tokenizers built, %d refused\n", built, refused);
    assert_true(built > 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_regex_llama3),
        cmocka_unit_test(test_regex_qwen2_gpt2),
        cmocka_unit_test(test_bpe_merges),
        cmocka_unit_test(test_spm_synthetic),
        cmocka_unit_test(test_bpe_bytes_roundtrip),
        cmocka_unit_test(test_specials_phi3),
        cmocka_unit_test(test_specials_gpt2_bert),
        cmocka_unit_test(test_user_defined_mpt),
        cmocka_unit_test(test_long_inputs),
        cmocka_unit_test(test_utf8_stream),
        cmocka_unit_test(test_chat_format),
        cmocka_unit_test(test_chat_apply),
        cmocka_unit_test(test_chat_tokenize),
        cmocka_unit_test(test_bad_metadata),
        cmocka_unit_test(test_mutated_gguf),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
