/* Long-history compaction for a small-window upstream (beyond the reference system).
 *
 * Idea: a 1M-token chat cannot be sent to an 8K model, but the final request usually needs
 * only a handful of earlier turns. Keep what is always needed (system messages, the first
 * message(s) which carry instructions or few-shot examples, the most recent turns, which
 * hold the request) and replace the middle with the turns that matter: the Selector's pick
 * when the request is an ordinal one it can resolve (exact, no retrieval error), otherwise
 * the top-K turns MultiQ finds. Turns stay whole user/assistant pairs in document order, so
 * the upstream sees a coherent (shorter) conversation; a system note says what was omitted.
 * When the retrieved turns still overflow, the least relevant are dropped first.
 * Token counts are estimates (bytes / chars_per_token + 4 per message): the budget should
 * leave headroom for the model's own chat template. */
#include "longctx/lcx_recipes.h"
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

lcx_compact_opts lcx_compact_defaults(void)
{
    lcx_compact_opts o = {.budget_tokens = 8192, .keep_first = 1, .keep_recent = 4, .top_k = 8,
                          .chars_per_token = 4.0, .use_selector = true};
    return o;
}

/* content as text: a string, or the concatenated "text" parts of a list (malloc'd copy
 * in *own when concatenated) */
static int msg_text(const cJSON *m, const char **p, size_t *n, char **own)
{
    *own = NULL;
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(m, "content");
    if (cJSON_IsString(c)) { *p = c->valuestring; *n = strlen(c->valuestring); return 0; }
    if (cJSON_IsNull(c) || !c) { *p = ""; *n = 0; return 0; }
    if (!cJSON_IsArray(c)) return LCX_EINVAL;
    size_t tot = 0;
    const cJSON *part;
    cJSON_ArrayForEach(part, c) {
        const cJSON *tx = cJSON_GetObjectItemCaseSensitive(part, "text");
        if (cJSON_IsString(tx)) tot += strlen(tx->valuestring) + 1;
    }
    char *b = malloc(tot + 1);
    if (!b) return LCX_ENOMEM;
    size_t k = 0;
    cJSON_ArrayForEach(part, c) {
        const cJSON *tx = cJSON_GetObjectItemCaseSensitive(part, "text");
        if (!cJSON_IsString(tx)) continue;
        size_t l = strlen(tx->valuestring);
        if (k) b[k++] = '\n';
        memcpy(b + k, tx->valuestring, l);
        k += l;
    }
    b[k] = 0;
    *own = b;
    *p = b;
    *n = k;
    return 0;
}

static size_t est_tokens(size_t bytes, double cpt) { return (size_t)((double)bytes / cpt) + 4; }

int lcx_compact_messages(void *msgs_v, const lcx_embedder *emb, const lcx_compact_opts *opts,
                         lcx_compact_report *rep)
{
    cJSON *msgs = msgs_v;
    lcx_compact_opts o = opts ? *opts : lcx_compact_defaults();
    if (o.chars_per_token <= 0) o.chars_per_token = 4.0;
    if (o.top_k < 1) o.top_k = 1;
    if (o.top_k > LCX_TOP_K_MAX) o.top_k = LCX_TOP_K_MAX;
    lcx_compact_report r = {0};
    if (!cJSON_IsArray(msgs)) return LCX_EINVAL;
    size_t n = (size_t)cJSON_GetArraySize(msgs);
    r.msgs_before = r.msgs_after = n;
    if (n == 0) { if (rep) *rep = r; return 0; }

    lcx_msg *v = calloc(n, sizeof *v);
    char **own = calloc(n, sizeof *own);
    cJSON **item = calloc(n, sizeof *item);
    size_t *tok = calloc(n, sizeof *tok);
    char *keep = calloc(n, 1);
    int rc = 0;
    if (!v || !own || !item || !tok || !keep) { rc = LCX_ENOMEM; goto out; }
    size_t i = 0, total = 0;
    cJSON *m;
    cJSON_ArrayForEach(m, msgs) {
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        if (!cJSON_IsObject(m) || !cJSON_IsString(role)) { rc = LCX_EINVAL; goto out; }
        item[i] = m;
        v[i].role = role->valuestring;
        if ((rc = msg_text(m, &v[i].content, &v[i].len, &own[i]))) goto out;
        tok[i] = est_tokens(v[i].len, o.chars_per_token);
        total += tok[i];
        i++;
    }
    r.tokens_before = r.tokens_after = total;
    if (total <= o.budget_tokens) goto done;

    /* the request: the last user message */
    long qi = -1;
    for (size_t k = n; k-- > 0;)
        if (!strcmp(v[k].role, "user")) { qi = (long)k; break; }
    size_t kr = o.keep_recent < n ? o.keep_recent : n;
    for (size_t k = 0; k < n; k++)
        if (k < o.keep_first || k >= n - kr || !strcmp(v[k].role, "system") ||
            !strcmp(v[k].role, "developer"))
            keep[k] = 1;
    if (qi >= 0) keep[qi] = 1;
    /* nothing in the middle: cannot compact further */
    size_t mid = 0;
    for (size_t k = 0; k < n; k++) mid += !keep[k];
    if (!mid || qi < 0) goto done;

    /* pick turns: Selector first, then MultiQ */
    long pick[64];
    int np = 0;
    if (o.use_selector) {
        lcx_select_result sr;
        rc = lcx_select(v, (size_t)qi + 1, v[qi].content, v[qi].len, &sr);
        if (rc) goto out;
        if (sr.status == LCX_SEL_OK) {
            r.used_selector = true;
            pick[np++] = sr.reply_index;
        }
        lcx_select_result_free(&sr);
    }
    if (!np && emb) {
        lcx_search_info si;
        int k = lcx_recipe_multiq_nn(emb, o.nn, v, (size_t)qi + 1, v[qi].content, v[qi].len, o.top_k, pick, NULL,
                                     &si);
        if (k < 0) { rc = k; goto out; }
        r.used_rerank = si.used_rerank;
        np = k;
    }
    /* mark each picked reply and its request (the user message right before it) */
    char *add = calloc(n, 1);
    if (!add) { rc = LCX_ENOMEM; goto out; }
    size_t base = 0;
    for (size_t k = 0; k < n; k++) if (keep[k]) base += tok[k];
    base += 64;   /* the system note */
    size_t used = base;
    int taken = 0;
    for (int p = 0; p < np; p++) {        /* best first: stop when the budget is spent */
        long a = pick[p];
        if (a < 0 || (size_t)a >= n) continue;
        long u = a - 1;
        while (u >= 0 && strcmp(v[u].role, "user") && strcmp(v[u].role, "assistant")) u--;
        if (u >= 0 && strcmp(v[u].role, "user")) u = -1;
        size_t cost = (keep[a] || add[a] ? 0 : tok[a]) + (u >= 0 && !keep[u] && !add[u] ? tok[u] : 0);
        if (used + cost > o.budget_tokens && taken > 0) continue;
        add[a] = 1;
        if (u >= 0) add[u] = 1;
        used += cost;
        taken++;
    }
    r.n_retrieved = taken;

    /* rebuild: kept + added, in document order; the note goes after the leading kept block */
    cJSON *out = cJSON_CreateArray();
    if (!out) { free(add); rc = LCX_ENOMEM; goto out; }
    size_t omitted = 0;
    for (size_t k = 0; k < n; k++) omitted += !keep[k] && !add[k];
    int note_done = 0;
    for (size_t k = 0; k < n && !rc; k++) {
        if (!note_done && !keep[k]) {
            char note[512];
            snprintf(note, sizeof note,
                     "[longctx] %zu earlier messages were omitted to fit the context window. "
                     "%s", omitted,
                     r.used_selector ? "The earlier turn that the final request refers to is included below, verbatim."
                                     : "The earlier turns most relevant to the final request are included below, verbatim, in their original order.");
            cJSON *nm = cJSON_CreateObject();
            if (!nm || !cJSON_AddStringToObject(nm, "role", "system") ||
                !cJSON_AddStringToObject(nm, "content", note)) {
                cJSON_Delete(nm);
                rc = LCX_ENOMEM;
                break;
            }
            cJSON_AddItemToArray(out, nm);
            note_done = 1;
        }
        if (!keep[k] && !add[k]) continue;
        cJSON *dup = cJSON_Duplicate(item[k], 1);
        if (!dup) { rc = LCX_ENOMEM; break; }
        cJSON_AddItemToArray(out, dup);
    }
    free(add);
    if (rc) { cJSON_Delete(out); goto out; }
    /* swap contents: detach all old items, move the new ones in */
    while (cJSON_GetArraySize(msgs) > 0) cJSON_DeleteItemFromArray(msgs, 0);
    while (cJSON_GetArraySize(out) > 0) cJSON_AddItemToArray(msgs, cJSON_DetachItemFromArray(out, 0));
    cJSON_Delete(out);
    r.compacted = true;
    r.msgs_after = (size_t)cJSON_GetArraySize(msgs);
    r.tokens_after = used;
done:
    if (rep) *rep = r;
out:
    if (own) for (size_t k = 0; k < n; k++) free(own[k]);
    free(v); free(own); free(item); free(tok); free(keep);
    return rc;
}
