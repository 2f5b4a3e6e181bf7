/* The engine's tokenizers (src/engine tok_*.c) on any text: byte 0 picks the tokenizer and
 * the add_special / parse_special flags, the rest is the text. Tokenizers come from the
 * fixtures when $LCX_FIXTURES has them (SPM: stories260K, phi-3; byte-level BPE: gpt-2,
 * falcon, mpt; WordPiece: bert-bge) and otherwise from small synthetic vocabularies (SPM
 * with byte fallback, WordPiece), so the target runs in a clone without ../shared too.
 * Checked: every id inside the vocabulary, decoding never fails on the ids, and byte-level
 * BPE with all 256 byte symbols (gpt-2) round-trips any bytes exactly (without special-token
 * parsing). */
#define _GNU_SOURCE
#include "fuzz.h"

#include <string.h>
#include "engine/gguf.h"
#include "engine/tokenizer.h"
#include "longctx/lcx_err.h"

typedef struct { eng_tokenizer *t; bool byte_level; } tok_ent;
static tok_ent toks[8];
static int n_toks;

/* Byte-level BPE round-trips any bytes only when all 256 byte symbols are in the vocabulary
 * (a missing one is dropped, as Hugging Face's BPE does without an unknown token: falcon and
 * mpt lack some); checked once per tokenizer, one byte at a time. */
static bool all_bytes(const eng_tokenizer *t)
{
    for (int b = 0; b < 256; b++) {
        char in = (char)b, out[8];
        int32_t ids[8];
        int n = eng__tokenize(t, &in, 1, false, false, ids, 8);
        if (n <= 0 || eng__detokenize(t, ids, n, out, sizeof out) != 1 || out[0] != in) return false;
    }
    return true;
}

static void from_fixture(const char *rel, bool byte_level)
{
    const char *fx = fz_fixtures();
    if (!fx) return;
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", fx, rel);
    eng_gguf *g = NULL;
    if (eng__gguf_open(p, &g, NULL, 0) < 0) return;
    eng_tokenizer *t = NULL;
    if (eng__tokenizer_from_gguf(g, &t, NULL, 0) == 0) toks[n_toks++] = (tok_ent){t, byte_level && all_bytes(t)};
    eng__gguf_close(g);
}

static void from_spec(eng_tok_kind kind, const char *const *tk, const int32_t *types, const float *scores, int n)
{
    size_t lens[32];
    for (int i = 0; i < n; i++) lens[i] = strlen(tk[i]);
    eng_tok_spec s;
    eng__tok_spec_init(&s);
    s.kind = kind;
    s.n_tokens = n; s.tokens = tk; s.token_lens = lens; s.scores = scores; s.token_types = types;
    eng_tokenizer *t = NULL;
    if (eng__tokenizer_from_spec(&s, &t, NULL, 0) == 0) toks[n_toks++] = (tok_ent){t, false};
    else abort();   /* the synthetic vocabularies are valid */
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc; (void)argv;
    static const char *const spm[] = {"<unk>", "<s>", "</s>", "a", "b", "aa", "ab", "\xE2\x96\x81",
                                      "\xE2\x96\x81\x62", "<0x63>", "<|im_start|>", "<0xC3>", "<0xA9>"};
    static const float spm_s[] = {0, 0, 0, -1, -1, -2, -3, -1, -5, 0, 0, 0, 0};
    static const int32_t spm_t[] = {2, 3, 3, 1, 1, 1, 1, 1, 1, 6, 3, 6, 6};
    from_spec(ENG_TOK_SPM, spm, spm_t, spm_s, 13);
    static const char *const wpm[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "##a", "##b",
                                      "hello", "##lo", "world", ",", "!", "##s", "\xe4\xb8\xad"};
    static const int32_t wpm_t[] = {3, 2, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    from_spec(ENG_TOK_WPM, wpm, wpm_t, NULL, 16);
    from_fixture("gguf/stories260K.gguf", false);
    from_fixture("tokenizers/ggml-vocab-phi-3.gguf", false);
    from_fixture("tokenizers/ggml-vocab-gpt-2.gguf", true);
    from_fixture("tokenizers/ggml-vocab-falcon.gguf", true);
    from_fixture("tokenizers/ggml-vocab-mpt.gguf", true);
    from_fixture("tokenizers/ggml-vocab-bert-bge.gguf", false);
    atexit(fz_cleanup);   /* libFuzzer exits through exit(): no temp folders left */
    return 0;
}

void fz_cleanup(void)
{
    for (int i = 0; i < n_toks; i++) eng__tokenizer_free(toks[i].t);
    n_toks = 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || !n_toks) return 0;
    const tok_ent *e = &toks[(data[0] & 7) % n_toks];
    bool add_special = data[0] & 8, parse_special = data[0] & 16;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    int max = (int)(len * 4 + 8);
    int32_t *ids = malloc((size_t)max * sizeof *ids);
    if (!ids) return 0;
    int n = eng__tokenize(e->t, text, len, add_special, parse_special, ids, max);
    FZ_CHECK(n >= 0 || n == LCX_ENOMEM);
    int32_t nv = eng__tokenizer_n_vocab(e->t);
    for (int i = 0; i < n; i++) FZ_CHECK(ids[i] >= 0 && ids[i] < nv);
    if (n > 0) {
        int need = eng__detokenize(e->t, ids, n, NULL, 0);
        FZ_CHECK(need >= 0);
        char *out = malloc((size_t)need + 1);
        if (out) {
            FZ_CHECK(eng__detokenize(e->t, ids, n, out, (size_t)need + 1) == need);
            if (e->byte_level && !add_special && !parse_special)
                FZ_CHECK((size_t)need == len && !memcmp(out, text, len));
            char piece[64];
            for (int i = 0; i < n; i++) FZ_CHECK(eng__token_to_piece(e->t, ids[i], piece, sizeof piece) >= 0);
            (void)eng__utf8_stream_cut(out, (size_t)need);
            free(out);
        }
        /* too small an output array: LCX_ELIMIT with the first ids */
        if (n > 1) FZ_CHECK(eng__tokenize(e->t, text, len, add_special, parse_special, ids, n - 1) == LCX_ELIMIT);
    }
    if (n == 0 && e->byte_level && !add_special && !parse_special) FZ_CHECK(len == 0);   /* nothing lost */
    free(ids);
    return 0;
}
