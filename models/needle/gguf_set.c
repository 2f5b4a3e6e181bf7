/* needle-gguf-set: copies a GGUF file with some metadata keys set, through the engine's own
 * reader and writer (src/engine/gguf.h). The needle model needs it because a llama2.c header
 * has no room for the RoPE keys: convert-llama2c writes freq_base 10000 and full rotary, the
 * model was trained with partial rotary (rope.dimension_count) and a longer context.
 *
 *   needle-gguf-set IN.gguf OUT.gguf [--u32 KEY=V] [--f32 KEY=V] [--str KEY=V] ...
 *
 * Keys already in IN keep their place and get the new value; new keys are appended. Tensors
 * are copied byte for byte. */
#include "engine/gguf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SET 32

typedef struct { const char *type, *key, *val; } kv_set;

static int put(eng_gguf_writer *w, const kv_set *s)
{
    if (!strcmp(s->type, "u32")) return eng__gguf_w_u32(w, s->key, (uint32_t)strtoul(s->val, NULL, 10));
    if (!strcmp(s->type, "f32")) return eng__gguf_w_f32(w, s->key, strtof(s->val, NULL));
    return eng__gguf_w_str(w, s->key, s->val);
}

static int copy_kv(eng_gguf_writer *w, const eng_gguf *g, int64_t k)
{
    const char *key = eng__gguf_key_at(g, k);
    switch (eng__gguf_key_type(g, k)) {
    case ENG_GGUF_U32: { uint32_t v; eng__gguf_get_u32(g, key, &v); return eng__gguf_w_u32(w, key, v); }
    case ENG_GGUF_I32: { int32_t v; eng__gguf_get_i32(g, key, &v); return eng__gguf_w_i32(w, key, v); }
    case ENG_GGUF_F32: { float v; eng__gguf_get_f32(g, key, &v); return eng__gguf_w_f32(w, key, v); }
    case ENG_GGUF_BOOL: { bool v; eng__gguf_get_bool(g, key, &v); return eng__gguf_w_bool(w, key, v); }
    case ENG_GGUF_STRING: {
        size_t n;
        const char *s = eng__gguf_get_str(g, key, &n);
        return eng__gguf_w_strn(w, key, s, n);
    }
    case ENG_GGUF_ARRAY: {
        int et;
        uint64_t n;
        const void *d;
        int rc = eng__gguf_get_arr(g, key, &et, &n, &d);
        if (rc < 0) return rc;
        if (et != ENG_GGUF_STRING) return eng__gguf_w_arr(w, key, et, d, n);
        const char **ss = malloc((n ? n : 1) * sizeof *ss);
        size_t *ls = malloc((n ? n : 1) * sizeof *ls);
        if (!ss || !ls) { free(ss); free(ls); return LCX_ENOMEM; }
        for (uint64_t i = 0; i < n; i++) ss[i] = eng__gguf_get_arr_str(g, key, i, &ls[i]);
        rc = eng__gguf_w_arr_str(w, key, ss, ls, n);
        free(ss);
        free(ls);
        return rc;
    }
    default:
        fprintf(stderr, "needle-gguf-set: key %s has a type this tool does not copy\n", key);
        return LCX_ENOTSUP;
    }
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: needle-gguf-set IN.gguf OUT.gguf [--u32|--f32|--str KEY=VALUE]...\n");
        return 2;
    }
    kv_set sets[MAX_SET];
    int ns = 0;
    for (int i = 3; i < argc; i += 2) {   /* pairs: --u32|--f32|--str KEY=VALUE */
        const char *t = argv[i];
        char *eq = i + 1 < argc ? strchr(argv[i + 1], '=') : NULL;
        if (ns == MAX_SET || !eq || (strcmp(t, "--u32") && strcmp(t, "--f32") && strcmp(t, "--str"))) {
            fprintf(stderr, "needle-gguf-set: bad argument '%s'\n", t);
            return 2;
        }
        *eq = 0;
        sets[ns++] = (kv_set){t + 2, argv[i + 1], eq + 1};
    }
    char err[256];
    eng_gguf *g = NULL;
    if (eng__gguf_open(argv[1], &g, err, sizeof err) < 0) {
        fprintf(stderr, "needle-gguf-set: %s\n", err);
        return 1;
    }
    eng_gguf_writer *w = eng__gguf_writer_new(eng__gguf_alignment(g));
    int rc = w ? 0 : LCX_ENOMEM;
    bool used[MAX_SET] = {0};
    for (int64_t k = 0; rc >= 0 && k < eng__gguf_n_kv(g); k++) {
        const char *key = eng__gguf_key_at(g, k);
        int s = -1;
        for (int j = 0; j < ns; j++)
            if (!strcmp(sets[j].key, key)) s = j;
        if (s >= 0) { rc = put(w, &sets[s]); used[s] = true; }
        else rc = copy_kv(w, g, k);
    }
    for (int j = 0; rc >= 0 && j < ns; j++)
        if (!used[j]) rc = put(w, &sets[j]);
    for (int64_t i = 0; rc >= 0 && i < eng__gguf_n_tensors(g); i++) {
        const eng_tensor *t = eng__gguf_tensor_at(g, i);
        rc = eng__gguf_w_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data);
    }
    if (rc >= 0) rc = eng__gguf_writer_write(w, argv[2], NULL, NULL);
    if (rc < 0) fprintf(stderr, "needle-gguf-set: %s\n", lcx_strerror(rc));
    eng__gguf_writer_free(w);
    eng__gguf_close(g);
    return rc < 0 ? 1 : 0;
}
