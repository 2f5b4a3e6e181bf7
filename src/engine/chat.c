/* Chat templates: ChatML, Llama-3 and Mistral, picked by markers in the GGUF's Jinja
 * tokenizer.chat_template. We do not run Jinja: the three formats cover the models the
 * engine targets, and anything else falls back to ChatML with a flag for the caller. */
#define _GNU_SOURCE /* memmem, qsort_r */
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"
#include "util/util.h"

static bool has(const char *s, size_t n, const char *needle) {
    return s && memmem(s, n, needle, strlen(needle)) != NULL;
}

eng_chat_tmpl eng__chat_detect(const char *tmpl, size_t len, bool *fell_back) {
    eng_chat_tmpl k = ENG_CHAT_CHATML;
    bool fb = false;
    if (has(tmpl, len, "<|im_start|>")) k = ENG_CHAT_CHATML;
    else if (has(tmpl, len, "<|start_header_id|>")) k = ENG_CHAT_LLAMA3;
    else if (has(tmpl, len, "[INST]")) k = ENG_CHAT_MISTRAL;
    else fb = true;
    if (fell_back) *fell_back = fb;
    return k;
}

const char *eng__chat_tmpl_name(eng_chat_tmpl k) {
    switch (k) {
    case ENG_CHAT_CHATML: return "chatml";
    case ENG_CHAT_LLAMA3: return "llama3";
    case ENG_CHAT_MISTRAL: return "mistral";
    }
    return "unknown";
}

int eng__chat_tmpl_from_name(const char *name) {
    if (!name) return LCX_EINVAL;
    for (int k = ENG_CHAT_CHATML; k <= ENG_CHAT_MISTRAL; k++)
        if (!strcmp(name, eng__chat_tmpl_name((eng_chat_tmpl)k))) return k;
    return LCX_ENOTFOUND;
}

static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

int eng__chat_format(eng_chat_tmpl k, const char *eos_text, const eng_chat_msg *m, int n,
                    bool add_assistant_prompt, char **out) {
    if (!out || n < 0 || (!m && n)) return LCX_EINVAL;
    *out = NULL;
    if (k != ENG_CHAT_CHATML && k != ENG_CHAT_LLAMA3 && k != ENG_CHAT_MISTRAL) return LCX_EINVAL;
    for (int i = 0; i < n; i++)
        if (!m[i].role || !m[i].content) return LCX_EINVAL;
    if (!eos_text) eos_text = "</s>";
    lcx_buf b = {.cap = ENG_CHAT_MAX_OUT};
    int rc = 0;
    const char *pending_sys = NULL;    /* Mistral: system text waiting for the next user turn */
#define P(s) do { if ((rc = lcx__buf_puts(&b, (s))) < 0) goto fail; } while (0)
#define A(s, l) do { if ((rc = lcx__buf_append(&b, (s), (l))) < 0) goto fail; } while (0)
    for (int i = 0; i < n; i++) {
        const char *role = m[i].role, *c = m[i].content;
        switch (k) {
        case ENG_CHAT_CHATML:
            P("<|im_start|>"); P(role); P("\n"); P(c); P("<|im_end|>\n");
            break;
        case ENG_CHAT_LLAMA3: {
            /* Meta's template trims the content */
            size_t s0 = 0, s1 = strlen(c);
            while (s0 < s1 && is_space(c[s0])) s0++;
            while (s1 > s0 && is_space(c[s1 - 1])) s1--;
            P("<|start_header_id|>"); P(role); P("<|end_header_id|>\n\n");
            A(c + s0, s1 - s0);
            P("<|eot_id|>");
            break;
        }
        case ENG_CHAT_MISTRAL:
            if (!strcmp(role, "system")) { pending_sys = c; break; }
            if (!strcmp(role, "user")) {
                P("[INST] ");
                if (pending_sys) { P(pending_sys); P("\n\n"); pending_sys = NULL; }
                P(c); P(" [/INST]");
            } else {
                P(c); P(eos_text);
            }
            break;
        }
    }
    if (add_assistant_prompt) {
        if (k == ENG_CHAT_CHATML) P("<|im_start|>assistant\n");
        else if (k == ENG_CHAT_LLAMA3) P("<|start_header_id|>assistant<|end_header_id|>\n\n");
        /* Mistral: "[/INST]" already hands the turn to the assistant */
    }
#undef P
#undef A
    if (!b.data && (rc = lcx__buf_append(&b, "", 0)) < 0) goto fail;
    size_t len = b.len;
    *out = lcx__buf_steal(&b, NULL);
    if (!*out) return LCX_ENOMEM;
    return (int)len;
fail:
    lcx__buf_free(&b);
    return rc;
}

int eng__chat_apply(const eng_gguf *g, const eng_chat_msg *m, int n, bool add_assistant_prompt,
                   char **out, bool *fell_back) {
    if (!g || !out) return LCX_EINVAL;
    size_t tl = 0;
    const char *tmpl = eng__gguf_get_str(g, "tokenizer.chat_template", &tl);
    eng_chat_tmpl k = eng__chat_detect(tmpl, tmpl ? tl : 0, fell_back);
    char eos[ENG_TOK_MAX_TOKEN + 1];
    const char *eos_text = NULL;
    uint32_t eid;
    if (k == ENG_CHAT_MISTRAL && eng__gguf_get_u32(g, "tokenizer.ggml.eos_token_id", &eid) == 0) {
        size_t l;
        const char *s = eng__gguf_get_arr_str(g, "tokenizer.ggml.tokens", eid, &l);
        if (s && l <= ENG_TOK_MAX_TOKEN) { memcpy(eos, s, l); eos[l] = 0; eos_text = eos; }
    }
    return eng__chat_format(k, eos_text, m, n, add_assistant_prompt, out);
}
