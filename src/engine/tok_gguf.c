/* GGUF metadata -> eng_tok_spec -> tokenizer. Every array is checked for type and length
 * against tokenizer.ggml.tokens before use. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"


/* Optional u32 id key: absent -> ENG_TOKEN_DEFAULT; present but not an integer -> error. */
static int get_id(const eng_gguf *g, const char *key, int32_t *out, char *err, size_t errlen) {
    uint32_t v;
    int32_t sv;
    int rc = eng__gguf_get_u32(g, key, &v);
    if (rc == LCX_ENOTFOUND) { *out = ENG_TOKEN_DEFAULT; return 0; }
    /* converters write "none" as 0xFFFFFFFF (u32) or -1 (i32) */
    if (rc == 0 && v == UINT32_MAX) { *out = ENG_TOKEN_NONE; return 0; }
    if (rc < 0 && eng__gguf_get_i32(g, key, &sv) == 0 && sv == -1) { *out = ENG_TOKEN_NONE; return 0; }
    if (rc < 0 || v > INT32_MAX) {
        eng__tok_err(err, errlen, "tokenizer: %s is not a valid token id", key);
        return LCX_ECORRUPT;
    }
    *out = (int32_t)v;
    return 0;
}

static int get_flag(const eng_gguf *g, const char *key, int *out, char *err, size_t errlen) {
    bool v;
    int rc = eng__gguf_get_bool(g, key, &v);
    if (rc == LCX_ENOTFOUND) { *out = -1; return 0; }
    if (rc < 0) { eng__tok_err(err, errlen, "tokenizer: %s is not a bool", key); return LCX_ECORRUPT; }
    *out = v ? 1 : 0;
    return 0;
}

static char *dupn(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (!d) return NULL;
    if (n) memcpy(d, s, n);
    d[n] = 0;
    return d;
}

int eng__tokenizer_from_gguf(const eng_gguf *g, eng_tokenizer **out, char *err, size_t errlen) {
    if (!out) return LCX_EINVAL;
    *out = NULL;
    if (!g) return LCX_EINVAL;
    eng_tok_spec s;
    eng__tok_spec_init(&s);
    int rc;
    char *pre = NULL, *name = NULL;
    const char **toks = NULL, **merges = NULL;
    size_t *tlens = NULL, *mlens = NULL;
    float *scores = NULL;
    int32_t *types = NULL;

    size_t ml;
    const char *model = eng__gguf_get_str(g, "tokenizer.ggml.model", &ml);
    if (!model) { eng__tok_err(err, errlen, "tokenizer: no tokenizer.ggml.model in the GGUF"); return LCX_ENOTFOUND; }
    if (ml == 5 && !memcmp(model, "llama", 5)) s.kind = ENG_TOK_SPM;
    else if (ml == 4 && !memcmp(model, "gpt2", 4)) s.kind = ENG_TOK_BPE;
    else if (ml == 4 && !memcmp(model, "bert", 4)) s.kind = ENG_TOK_WPM;
    else {
        eng__tok_err(err, errlen, "tokenizer: unsupported tokenizer.ggml.model '%.*s' (llama, gpt2, bert are)",
                (int)(ml > 64 ? 64 : ml), model);
        return LCX_ENOTSUP;
    }
    size_t pl, nl;
    const char *p = eng__gguf_get_str(g, "tokenizer.ggml.pre", &pl);
    if (p && !(pl = pl > 256 ? 256 : pl, pre = dupn(p, pl))) return LCX_ENOMEM;
    const char *nm = eng__gguf_get_str(g, "general.name", &nl);
    rc = LCX_ENOMEM;
    if (nm && !(nl = nl > 256 ? 256 : nl, name = dupn(nm, nl))) goto out;
    s.pre = pre;
    s.model_name = name;

    int et;
    uint64_t n;
    const void *data;
    if (eng__gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n, &data) < 0 || et != ENG_GGUF_STRING) {
        eng__tok_err(err, errlen, "tokenizer: tokenizer.ggml.tokens missing or not a string array");
        rc = LCX_ENOTFOUND;
        goto out;
    }
    if (n == 0 || n > ENG_TOK_MAX_VOCAB) {
        eng__tok_err(err, errlen, "tokenizer: %llu tokens (1..%d allowed)", (unsigned long long)n, ENG_TOK_MAX_VOCAB);
        rc = n ? LCX_ELIMIT : LCX_ECORRUPT;
        goto out;
    }
    s.n_tokens = (int32_t)n;
    rc = LCX_ENOMEM;
    toks = malloc(sizeof(char *) * n);
    tlens = malloc(sizeof(size_t) * n);
    if (!toks || !tlens) goto out;
    for (uint64_t i = 0; i < n; i++) {
        toks[i] = eng__gguf_get_arr_str(g, "tokenizer.ggml.tokens", i, &tlens[i]);
        if (!toks[i]) { eng__tok_err(err, errlen, "tokenizer: token %llu unreadable", (unsigned long long)i); rc = LCX_ECORRUPT; goto out; }
    }
    s.tokens = toks;
    s.token_lens = tlens;

    uint64_t m;
    if (eng__gguf_get_arr(g, "tokenizer.ggml.scores", &et, &m, &data) == 0) {
        if (et != ENG_GGUF_F32 || m != n) {
            eng__tok_err(err, errlen, "tokenizer: tokenizer.ggml.scores must be %llu f32 values", (unsigned long long)n);
            rc = LCX_ECORRUPT;
            goto out;
        }
        rc = LCX_ENOMEM;
        if (!(scores = malloc(sizeof(float) * n))) goto out;
        memcpy(scores, data, sizeof(float) * n);    /* possibly unaligned in the mapping */
        s.scores = scores;
    }
    if (eng__gguf_get_arr(g, "tokenizer.ggml.token_type", &et, &m, &data) == 0) {
        if ((et != ENG_GGUF_I32 && et != ENG_GGUF_U32) || m != n) {
            eng__tok_err(err, errlen, "tokenizer: tokenizer.ggml.token_type must be %llu int32 values", (unsigned long long)n);
            rc = LCX_ECORRUPT;
            goto out;
        }
        rc = LCX_ENOMEM;
        if (!(types = malloc(sizeof(int32_t) * n))) goto out;
        memcpy(types, data, sizeof(int32_t) * n);
        s.token_types = types;
    }
    if (s.kind == ENG_TOK_BPE) {
        if (eng__gguf_get_arr(g, "tokenizer.ggml.merges", &et, &m, &data) < 0 || et != ENG_GGUF_STRING) {
            eng__tok_err(err, errlen, "tokenizer: gpt2 tokenizer without tokenizer.ggml.merges");
            rc = LCX_ENOTFOUND;
            goto out;
        }
        if (m > ENG_TOK_MAX_VOCAB * 2ull) { eng__tok_err(err, errlen, "tokenizer: too many merges"); rc = LCX_ELIMIT; goto out; }
        rc = LCX_ENOMEM;
        merges = malloc(sizeof(char *) * (m ? m : 1));
        mlens = malloc(sizeof(size_t) * (m ? m : 1));
        if (!merges || !mlens) goto out;
        for (uint64_t i = 0; i < m; i++) {
            merges[i] = eng__gguf_get_arr_str(g, "tokenizer.ggml.merges", i, &mlens[i]);
            if (!merges[i]) { rc = LCX_ECORRUPT; eng__tok_err(err, errlen, "tokenizer: merge %llu unreadable", (unsigned long long)i); goto out; }
        }
        s.n_merges = (int32_t)m;
        s.merges = merges;
        s.merge_lens = mlens;
    }

    if ((rc = get_id(g, "tokenizer.ggml.bos_token_id", &s.bos, err, errlen)) < 0) goto out;
    if (s.kind == ENG_TOK_WPM && s.bos == ENG_TOKEN_DEFAULT &&
        (rc = get_id(g, "tokenizer.ggml.cls_token_id", &s.bos, err, errlen)) < 0) goto out;
    if ((rc = get_id(g, "tokenizer.ggml.eos_token_id", &s.eos, err, errlen)) < 0) goto out;
    if ((rc = get_id(g, "tokenizer.ggml.unknown_token_id", &s.unk, err, errlen)) < 0) goto out;
    if ((rc = get_id(g, "tokenizer.ggml.seperator_token_id", &s.sep, err, errlen)) < 0) goto out;
    if ((rc = get_id(g, "tokenizer.ggml.padding_token_id", &s.pad, err, errlen)) < 0) goto out;
    if ((rc = get_id(g, "tokenizer.ggml.eot_token_id", &s.eot, err, errlen)) < 0) goto out;
    if ((rc = get_id(g, "tokenizer.ggml.eom_token_id", &s.eom, err, errlen)) < 0) goto out;
    if ((rc = get_flag(g, "tokenizer.ggml.add_bos_token", &s.add_bos, err, errlen)) < 0) goto out;
    if ((rc = get_flag(g, "tokenizer.ggml.add_eos_token", &s.add_eos, err, errlen)) < 0) goto out;
    if ((rc = get_flag(g, "tokenizer.ggml.add_space_prefix", &s.add_space_prefix, err, errlen)) < 0) goto out;

    rc = eng__tokenizer_from_spec(&s, out, err, errlen);
out:
    if (rc == LCX_ENOMEM) eng__tok_err(err, errlen, "tokenizer: out of memory");
    free(pre); free(name); free(toks); free(tlens); free(merges); free(mlens); free(scores); free(types);
    return rc;
}
