/* Hugging Face / sentence-transformers folder loader:
 *   config.json                BertModel / BertForSequenceClassification hyper-parameters
 *   model.safetensors          weights (F32 / F16 / BF16), names with or without "bert."
 *   vocab.txt                  WordPiece vocabulary, one entry per line
 *   tokenizer_config.json      do_lower_case, strip_accents, tokenize_chinese_chars,
 *                              model_max_length, special token strings (optional)
 *   sentence_bert_config.json  max_seq_length, do_lower_case (optional)
 *   modules.json, 1_Pooling/config.json   pooling mode, Normalize module (optional)
 *
 * safetensors: u64 little-endian header length N, N bytes of JSON
 * {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}, then the
 * data; offsets are relative to the data start. Checked before any weight is read: N inside
 * the file and under a cap, the JSON, every entry's dtype, shape (dims >= 0, product without
 * overflow), offsets (integers, begin <= end <= data size, end - begin = bytes of the shape),
 * and no two tensors overlapping. Entries of other dtypes (an I64 position_ids buffer in
 * older checkpoints) are validated the same way and ignored. */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "neural/nn_internal.h"
#include "util/util.h"

#define ST_MAX_HEADER (100u << 20)     /* safetensors JSON header cap (hostile length field) */
#define ST_MAX_TENSORS 100000
#define CFG_MAX (4u << 20)             /* a config JSON */
#define VOCAB_MAX (64u << 20)

void lcx__nn_unmap(void *p, size_t n) { munmap(p, n); }

typedef struct {
    char *name;
    int type;                   /* eng_type, -1 = a dtype we do not compute with */
    int n_dims;
    int64_t shape[8];
    const uint8_t *data;
    uint64_t begin, end;
} st_entry;

typedef struct {
    st_entry *e;
    int n;
    const char *prefix;         /* "bert." when the checkpoint has it */
} st_file;

static int cmp_begin(const void *a, const void *b)
{
    const st_entry *x = *(st_entry *const *)a, *y = *(st_entry *const *)b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

static bool json_u64(const cJSON *j, uint64_t *out)
{
    if (!cJSON_IsNumber(j)) return false;
    double d = j->valuedouble;
    if (!(d >= 0 && d <= 9007199254740992.0) || d != floor(d)) return false;
    *out = (uint64_t)d;
    return true;
}

static int st_parse(lcx_nn_model *m, const char *path, st_file *sf, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        lcx__nn_err(err, errlen, "%s: cannot open (%s)", path, strerror(errno));
        return errno == ENOENT ? LCX_ENOTFOUND : LCX_EIO;
    }
    struct stat st;
    if (fstat(fd, &st) < 0) { close(fd); return LCX_EIO; }
    size_t size = (size_t)st.st_size;
    if (size < 8) {
        close(fd);
        lcx__nn_err(err, errlen, "%s: %zu bytes, shorter than the 8-byte header length", path, size);
        return LCX_ETRUNC;
    }
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) {
        lcx__nn_err(err, errlen, "%s: mmap failed (%s)", path, strerror(errno));
        return LCX_EIO;
    }
    m->map = map;
    m->map_len = size;
    const uint8_t *b = map;
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--) hl = hl << 8 | b[i];
    if (hl > ST_MAX_HEADER) {
        lcx__nn_err(err, errlen, "%s: header length %llu at offset 0 is over the %u-byte cap", path,
                    (unsigned long long)hl, ST_MAX_HEADER);
        return LCX_ELIMIT;
    }
    if (hl > size - 8) {
        lcx__nn_err(err, errlen, "%s: header length %llu at offset 0 runs past the end of the file (%zu bytes)", path,
                    (unsigned long long)hl, size);
        return LCX_ETRUNC;
    }
    char *js = malloc(hl + 1);
    if (!js) return LCX_ENOMEM;
    memcpy(js, b + 8, hl);
    js[hl] = 0;
    const char *ep = NULL;
    cJSON *root = cJSON_ParseWithOpts(js, &ep, 0);
    int rc = 0;
    if (!root || !cJSON_IsObject(root)) {
        lcx__nn_err(err, errlen, "%s: header JSON is malformed near byte %zu", path,
                    (size_t)(ep && ep >= js ? (size_t)(ep - js) + 8 : 8));
        rc = LCX_ECORRUPT;
        goto out;
    }
    const uint8_t *data = b + 8 + hl;
    uint64_t data_len = size - 8 - hl;
    int n = cJSON_GetArraySize(root);
    if (n > ST_MAX_TENSORS) { rc = LCX_ELIMIT; lcx__nn_err(err, errlen, "%s: %d header entries", path, n); goto out; }
    sf->e = lcx__nn_own(m, calloc((size_t)n + 1, sizeof *sf->e));
    st_entry **byb = calloc((size_t)n + 1, sizeof *byb);
    if (!sf->e || !byb) { free(byb); rc = LCX_ENOMEM; goto out; }
    const cJSON *it;
    cJSON_ArrayForEach(it, root) {
        if (!strcmp(it->string, "__metadata__")) continue;
        st_entry *e = &sf->e[sf->n];
        const cJSON *dt = cJSON_GetObjectItemCaseSensitive(it, "dtype");
        const cJSON *sh = cJSON_GetObjectItemCaseSensitive(it, "shape");
        const cJSON *of = cJSON_GetObjectItemCaseSensitive(it, "data_offsets");
        const char *why = NULL;
        size_t es = 0;
        if (!cJSON_IsObject(it)) why = "is not an object";
        else if (!cJSON_IsString(dt)) why = "has no dtype";
        else if (!cJSON_IsArray(sh) || cJSON_GetArraySize(sh) > 8) why = "has no valid shape";
        else if (!cJSON_IsArray(of) || cJSON_GetArraySize(of) != 2) why = "has no valid data_offsets";
        if (!why) {
            const char *d = dt->valuestring;
            e->type = -1;
            if (!strcmp(d, "F32")) e->type = ENG_T_F32, es = 4;
            else if (!strcmp(d, "F16")) e->type = ENG_T_F16, es = 2;
            else if (!strcmp(d, "BF16")) e->type = ENG_T_BF16, es = 2;
            else if (!strcmp(d, "F64") || !strcmp(d, "I64") || !strcmp(d, "U64")) es = 8;
            else if (!strcmp(d, "I32") || !strcmp(d, "U32")) es = 4;
            else if (!strcmp(d, "I16") || !strcmp(d, "U16")) es = 2;
            else if (!strcmp(d, "I8") || !strcmp(d, "U8") || !strcmp(d, "BOOL") || !strcmp(d, "F8_E4M3") ||
                     !strcmp(d, "F8_E5M2")) es = 1;
            else why = "has an unknown dtype";
        }
        uint64_t count = 1;
        if (!why) {
            e->n_dims = cJSON_GetArraySize(sh);
            for (int k = 0; k < e->n_dims && !why; k++) {
                uint64_t v;
                if (!json_u64(cJSON_GetArrayItem(sh, k), &v) || v > (1ull << 40)) why = "has a bad dimension";
                else if (v && count > UINT64_MAX / v / 8) why = "has a shape whose size overflows";
                else { e->shape[k] = (int64_t)v; count *= v; }
            }
        }
        if (!why) {
            if (!json_u64(cJSON_GetArrayItem(of, 0), &e->begin) || !json_u64(cJSON_GetArrayItem(of, 1), &e->end))
                why = "has non-integer data_offsets";
            else if (e->begin > e->end || e->end > data_len) why = "has data_offsets outside the data section";
            else if (e->end - e->begin != count * es) why = "has data_offsets that disagree with dtype x shape";
        }
        if (why) {
            lcx__nn_err(err, errlen, "%s: tensor '%.100s' %s", path, it->string ? it->string : "?", why);
            rc = LCX_ECORRUPT;
            free(byb);
            goto out;
        }
        e->data = data + e->begin;
        if (!(e->name = lcx__nn_own(m, strdup(it->string)))) { free(byb); rc = LCX_ENOMEM; goto out; }
        byb[sf->n] = e;
        sf->n++;
    }
    qsort(byb, (size_t)sf->n, sizeof *byb, cmp_begin);
    for (int i = 1; i < sf->n; i++)
        if (byb[i]->begin < byb[i - 1]->end && byb[i]->begin != byb[i]->end) {
            lcx__nn_err(err, errlen, "%s: tensors '%.100s' and '%.100s' overlap", path, byb[i - 1]->name, byb[i]->name);
            rc = LCX_ECORRUPT;
            break;
        }
    free(byb);
out:
    cJSON_Delete(root);
    free(js);
    return rc;
}

static const st_entry *st_find(const st_file *sf, const char *name)
{
    const char *pfx[] = {"", "bert.", "model."};
    for (int p = 0; p < 3; p++) {
        size_t pl = strlen(pfx[p]);
        for (int i = 0; i < sf->n; i++)
            if (!strncmp(sf->e[i].name, pfx[p], pl) && !strcmp(sf->e[i].name + pl, name)) return &sf->e[i];
    }
    return NULL;
}

static int st_get(const st_file *sf, const char *name, int64_t d0, int64_t d1, const st_entry **out,
                  const char *path, char *err, size_t errlen)
{
    const st_entry *e = st_find(sf, name);
    if (!e) {
        lcx__nn_err(err, errlen, "%s: tensor %s is missing", path, name);
        return LCX_ENOTFOUND;
    }
    bool ok = d1 ? e->n_dims == 2 && e->shape[0] == d0 && e->shape[1] == d1 : e->n_dims == 1 && e->shape[0] == d0;
    if (!ok) {
        lcx__nn_err(err, errlen, "%s: tensor %s has shape [%lld%s%lld], expected [%lld%s%lld]", path, e->name,
                    (long long)e->shape[0], e->n_dims > 1 ? ", " : "", e->n_dims > 1 ? (long long)e->shape[1] : 0LL,
                    (long long)d0, d1 ? ", " : "", (long long)d1);
        return LCX_ECORRUPT;
    }
    if (e->type < 0) {
        lcx__nn_err(err, errlen, "%s: tensor %s has a dtype this loader does not compute with (F32, F16, BF16 are)", path, e->name);
        return LCX_ENOTSUP;
    }
    *out = e;
    return 0;
}

/* The tensor's bytes at an address aligned for its elements: safetensors does not align the
 * data section (8 + header length bytes in), so a misaligned tensor is copied (owned by m). */
static const void *st_aligned(lcx_nn_model *m, const st_entry *e, size_t bytes)
{
    size_t al = e->type == ENG_T_F32 ? 4 : 2;
    if ((uintptr_t)e->data % al == 0) return e->data;
    void *c = lcx__nn_own(m, malloc(bytes ? bytes : 1));
    if (c) memcpy(c, e->data, bytes);
    return c;
}

/* PyTorch Linear weight [out, in] = engine rows of n_in */
static int st_mat(lcx_nn_model *m, const st_file *sf, const char *name, int64_t n_out, int64_t n_in, lcx__nn_mat *w,
                  const char *path, char *err, size_t errlen)
{
    const st_entry *e;
    int rc = st_get(sf, name, n_out, n_in, &e, path, err, errlen);
    if (rc < 0) return rc;
    w->type = e->type;
    w->n_in = n_in;
    w->n_out = n_out;
    w->row_bytes = eng__row_bytes((eng_type)e->type, n_in);
    w->data = st_aligned(m, e, (size_t)n_out * w->row_bytes);
    return w->data ? 0 : LCX_ENOMEM;
}

static int st_vec(lcx_nn_model *m, const st_file *sf, const char *name, int64_t n, float **out, const char *path,
                  char *err, size_t errlen)
{
    const st_entry *e;
    int rc = st_get(sf, name, n, 0, &e, path, err, errlen);
    if (rc < 0) return rc;
    const void *d = st_aligned(m, e, (size_t)n * (e->type == ENG_T_F32 ? 4 : 2));
    return d && (*out = lcx__nn_vec_f32(m, e->type, d, n)) ? 0 : LCX_ENOMEM;
}

/* A JSON config file; NULL with *rc = 0 when absent and optional. */
static cJSON *read_json(lcx_nn_model *m, const char *dir, const char *name, bool required, int *rc, char *err,
                        size_t errlen)
{
    char *p = lcx__path_join(dir, name);
    *rc = 0;
    if (!p) { *rc = LCX_ENOMEM; return NULL; }
    char *s = NULL;
    size_t n = 0;
    int r = lcx__read_file(p, CFG_MAX, &s, &n);
    if (r < 0) {
        if (required || access(p, F_OK) == 0) {
            lcx__nn_err(err, errlen, "%s: %s", p, r == LCX_ELIMIT ? "config over 4 MiB" : "cannot be read");
            *rc = r == LCX_ELIMIT ? LCX_ELIMIT : access(p, F_OK) ? LCX_ENOTFOUND : LCX_EIO;
        }
        free(p);
        return NULL;
    }
    cJSON *j = cJSON_ParseWithLength(s, n);
    free(s);
    if (!j || !cJSON_IsObject(j)) {
        lcx__nn_err(err, errlen, "%s: not a JSON object", p);
        cJSON_Delete(j);
        free(p);
        *rc = LCX_ECORRUPT;
        return NULL;
    }
    if (!lcx__nn_own(m, p)) { cJSON_Delete(j); *rc = LCX_ENOMEM; return NULL; }
    if (m->n_files < (int)LCX_ARRAY_LEN(m->files)) m->files[m->n_files++] = p;
    return j;
}

static int j_int(const cJSON *o, const char *k, int dflt, bool *present)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (present) *present = cJSON_IsNumber(v);
    if (!cJSON_IsNumber(v) || !(v->valuedouble > -1e9 && v->valuedouble < 1e9)) return dflt;
    return (int)v->valuedouble;
}

/* tri-state bool: 1 true, 0 false, -1 null/absent */
static int j_bool(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsTrue(v) ? 1 : cJSON_IsFalse(v) ? 0 : -1;
}

/* special token string: "[CLS]" or {"content": "[CLS]", ...} */
static const char *j_tok(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (cJSON_IsString(v)) return v->valuestring;
    if (cJSON_IsObject(v)) {
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(v, "content");
        if (cJSON_IsString(c)) return c->valuestring;
    }
    return NULL;
}

static int load_vocab(lcx_nn_model *m, const char *dir, char *err, size_t errlen)
{
    char *p = lcx__nn_own(m, lcx__path_join(dir, "vocab.txt"));
    if (!p) return LCX_ENOMEM;
    char *s = NULL;
    size_t n = 0;
    int rc = lcx__read_file(p, VOCAB_MAX, &s, &n);
    if (rc < 0) {
        lcx__nn_err(err, errlen, "%s: %s", p, rc == LCX_ELIMIT ? "over 64 MiB" : "cannot be read");
        return rc == LCX_ELIMIT ? rc : LCX_ENOTFOUND;
    }
    if (m->n_files < (int)LCX_ARRAY_LEN(m->files)) m->files[m->n_files++] = p;
    size_t cnt = 0;
    for (size_t i = 0; i < n; i++) cnt += s[i] == '\n';
    cnt += n && s[n - 1] != '\n';
    const char **tok = malloc((cnt + 1) * sizeof *tok);
    size_t *len = malloc((cnt + 1) * sizeof *len);
    if (!tok || !len) { free(tok); free(len); free(s); return LCX_ENOMEM; }
    int32_t k = 0;
    for (size_t i = 0; i < n && (size_t)k < cnt;) {
        size_t j = i;
        while (j < n && s[j] != '\n') j++;
        size_t l = j - i;
        if (l && s[i + l - 1] == '\r') l--;
        tok[k] = s + i;
        len[k] = l;
        k++;
        i = j + 1;
    }
    rc = 0;
    if (k < 5 || k > LCX_NN_MAX_VOCAB) {
        lcx__nn_err(err, errlen, "%s: %d entries", p, k);
        rc = LCX_ECORRUPT;
    } else {
        rc = lcx__nn_vocab_build(&m->vocab, k, tok, len);
    }
    free(tok);
    free(len);
    free(s);
    return rc;
}

static int32_t special_id(const lcx_nn_model *m, const cJSON *tc, const char *key, const char *dflt)
{
    const char *s = tc ? j_tok(tc, key) : NULL;
    if (!s) s = dflt;
    return lcx__nn_vocab_get(&m->vocab, s, strlen(s));
}

int lcx__nn_load_hf(lcx_nn_model *m, const char *dir, char *err, size_t errlen)
{
    lcx_nn_info *inf = &m->info;
    int rc;
    cJSON *cfg = NULL, *tc = NULL, *sb = NULL, *pl = NULL;
    snprintf(inf->format, sizeof inf->format, "safetensors");
    {
        size_t dl = strlen(dir);
        while (dl > 1 && dir[dl - 1] == '/') dl--;
        size_t b = dl;
        while (b > 0 && dir[b - 1] != '/') b--;
        snprintf(inf->name, sizeof inf->name, "%.*s", (int)LCX_MIN(dl - b, sizeof inf->name - 1), dir + b);
    }
    if (!(cfg = read_json(m, dir, "config.json", true, &rc, err, errlen))) goto out;
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(cfg, "model_type");
    if (!cJSON_IsString(mt) || strcmp(mt->valuestring, "bert")) {
        lcx__nn_err(err, errlen, "%s/config.json: model_type '%s' is not supported (bert is)", dir,
                    cJSON_IsString(mt) ? mt->valuestring : "(missing)");
        rc = LCX_ENOTSUP;
        goto out;
    }
    const cJSON *pe = cJSON_GetObjectItemCaseSensitive(cfg, "position_embedding_type");
    if (cJSON_IsString(pe) && strcmp(pe->valuestring, "absolute")) {
        lcx__nn_err(err, errlen, "%s/config.json: position_embedding_type '%s' is not supported (absolute is)", dir, pe->valuestring);
        rc = LCX_ENOTSUP;
        goto out;
    }
    inf->n_layer = j_int(cfg, "num_hidden_layers", 0, NULL);
    inf->dim = j_int(cfg, "hidden_size", 0, NULL);
    inf->n_head = j_int(cfg, "num_attention_heads", 0, NULL);
    inf->n_ff = j_int(cfg, "intermediate_size", 0, NULL);
    inf->n_vocab = j_int(cfg, "vocab_size", 0, NULL);
    inf->n_pos = j_int(cfg, "max_position_embeddings", 512, NULL);
    inf->n_type = j_int(cfg, "type_vocab_size", 2, NULL);
    const cJSON *eps = cJSON_GetObjectItemCaseSensitive(cfg, "layer_norm_eps");
    inf->eps = cJSON_IsNumber(eps) ? (float)eps->valuedouble : 1e-12f;
    const cJSON *act = cJSON_GetObjectItemCaseSensitive(cfg, "hidden_act");
    const char *a = cJSON_IsString(act) ? act->valuestring : "gelu";
    if (!strcmp(a, "gelu")) inf->gelu = LCX_NN_GELU_ERF;
    else if (!strcmp(a, "gelu_new") || !strcmp(a, "gelu_pytorch_tanh") || !strcmp(a, "gelu_fast")) inf->gelu = LCX_NN_GELU_TANH;
    else {
        lcx__nn_err(err, errlen, "%s/config.json: hidden_act '%s' is not supported (gelu, gelu_new, gelu_pytorch_tanh are)", dir, a);
        rc = LCX_ENOTSUP;
        goto out;
    }
    if ((rc = lcx__nn_check_info(inf, "config.json", err, errlen)) < 0) goto out;
    const cJSON *arch = cJSON_GetObjectItemCaseSensitive(cfg, "architectures");
    const cJSON *ai;
    cJSON_ArrayForEach(ai, arch) if (cJSON_IsString(ai) && strstr(ai->valuestring, "ForSequenceClassification")) inf->is_reranker = true;

    /* tokenizer and sentence-transformers settings (all optional) */
    if (!(tc = read_json(m, dir, "tokenizer_config.json", false, &rc, err, errlen)) && rc < 0) goto out;
    if (!(sb = read_json(m, dir, "sentence_bert_config.json", false, &rc, err, errlen)) && rc < 0) goto out;
    int lower = tc ? j_bool(tc, "do_lower_case") : -1;
    if (lower < 0) lower = 1;                           /* BertTokenizer's default */
    if (sb && j_bool(sb, "do_lower_case") == 1) lower = 1;   /* sentence-transformers lower-cases first */
    int strip = tc ? j_bool(tc, "strip_accents") : -1;
    inf->lowercase = lower == 1;
    inf->strip_accents = strip < 0 ? inf->lowercase : strip == 1;   /* HF: null follows lowercase */
    inf->cjk_split = !tc || j_bool(tc, "tokenize_chinese_chars") != 0;
    bool have = false;
    int msl = sb ? j_int(sb, "max_seq_length", 0, &have) : 0;
    if (!have && tc) {
        msl = j_int(tc, "model_max_length", 0, &have);
        if (!have || msl <= 0) msl = 0;
    }
    inf->max_seq_len = msl > 0 ? msl : inf->n_pos;

    /* pooling: 1_Pooling/config.json (sentence-transformers), else mean; Normalize per modules.json */
    inf->pool = inf->is_reranker ? LCX_NN_POOL_RANK : LCX_NN_POOL_MEAN;
    if (!inf->is_reranker) {
        if (!(pl = read_json(m, dir, "1_Pooling/config.json", false, &rc, err, errlen)) && rc < 0) goto out;
        if (pl) {
            if (j_bool(pl, "pooling_mode_cls_token") == 1) inf->pool = LCX_NN_POOL_CLS;
            else if (j_bool(pl, "pooling_mode_mean_tokens") == 1) inf->pool = LCX_NN_POOL_MEAN;
            else {
                lcx__nn_err(err, errlen, "%s/1_Pooling/config.json: only mean or cls pooling is supported", dir);
                rc = LCX_ENOTSUP;
                goto out;
            }
        }
        /* no modules.json: a bare BertModel; retrieval vectors are compared by cosine, so
         * normalise; with modules.json: only when it lists Normalize */
        inf->normalize = true;
        char *mp = lcx__path_join(dir, "modules.json");
        char *ms = NULL;
        size_t mn = 0;
        if (mp && lcx__read_file(mp, CFG_MAX, &ms, &mn) == 0) {
            inf->normalize = strstr(ms, "sentence_transformers.models.Normalize") != NULL;
            if (m->n_files < (int)LCX_ARRAY_LEN(m->files) && lcx__nn_own(m, mp)) m->files[m->n_files++] = mp, mp = NULL;
        }
        free(ms);
        free(mp);
    }

    if ((rc = load_vocab(m, dir, err, errlen)) < 0) goto out;
    inf->cls_id = special_id(m, tc, "cls_token", "[CLS]");
    inf->sep_id = special_id(m, tc, "sep_token", "[SEP]");
    inf->unk_id = special_id(m, tc, "unk_token", "[UNK]");
    inf->pad_id = special_id(m, tc, "pad_token", "[PAD]");
    if (inf->pad_id < 0) inf->pad_id = j_int(cfg, "pad_token_id", 0, NULL);

    char *sp = lcx__nn_own(m, lcx__path_join(dir, "model.safetensors"));
    if (!sp) { rc = LCX_ENOMEM; goto out; }
    st_file sf = {0};
    if ((rc = st_parse(m, sp, &sf, err, errlen)) < 0) goto out;
    if (m->n_files < (int)LCX_ARRAY_LEN(m->files)) m->files[m->n_files++] = sp;
    int64_t D = inf->dim, F = inf->n_ff;
    if ((rc = st_mat(m, &sf, "embeddings.word_embeddings.weight", inf->n_vocab, D, &m->tok_emb, sp, err, errlen)) < 0 ||
        (rc = st_mat(m, &sf, "embeddings.position_embeddings.weight", inf->n_pos, D, &m->pos_emb, sp, err, errlen)) < 0 ||
        (rc = st_mat(m, &sf, "embeddings.token_type_embeddings.weight", inf->n_type, D, &m->type_emb, sp, err, errlen)) < 0 ||
        (rc = st_vec(m, &sf, "embeddings.LayerNorm.weight", D, &m->emb_ln_w, sp, err, errlen)) < 0 ||
        (rc = st_vec(m, &sf, "embeddings.LayerNorm.bias", D, &m->emb_ln_b, sp, err, errlen)) < 0)
        goto out;
    m->layers = lcx__nn_own(m, calloc((size_t)inf->n_layer, sizeof *m->layers));
    if (!m->layers) { rc = LCX_ENOMEM; goto out; }
    for (int l = 0; l < inf->n_layer; l++) {
        lcx__nn_layer *L = &m->layers[l];
        char n[128];
#define SM(suf, out_, in_, dst) (snprintf(n, sizeof n, "encoder.layer.%d." suf, l), st_mat(m, &sf, n, out_, in_, dst, sp, err, errlen))
#define SV(suf, len, dst) (snprintf(n, sizeof n, "encoder.layer.%d." suf, l), st_vec(m, &sf, n, len, dst, sp, err, errlen))
        if ((rc = SM("attention.self.query.weight", D, D, &L->q)) < 0 || (rc = SV("attention.self.query.bias", D, &L->bq)) < 0 ||
            (rc = SM("attention.self.key.weight", D, D, &L->k)) < 0 || (rc = SV("attention.self.key.bias", D, &L->bk)) < 0 ||
            (rc = SM("attention.self.value.weight", D, D, &L->v)) < 0 || (rc = SV("attention.self.value.bias", D, &L->bv)) < 0 ||
            (rc = SM("attention.output.dense.weight", D, D, &L->o)) < 0 || (rc = SV("attention.output.dense.bias", D, &L->bo)) < 0 ||
            (rc = SV("attention.output.LayerNorm.weight", D, &L->ln1_w)) < 0 ||
            (rc = SV("attention.output.LayerNorm.bias", D, &L->ln1_b)) < 0 ||
            (rc = SM("intermediate.dense.weight", F, D, &L->up)) < 0 || (rc = SV("intermediate.dense.bias", F, &L->bup)) < 0 ||
            (rc = SM("output.dense.weight", D, F, &L->down)) < 0 || (rc = SV("output.dense.bias", D, &L->bdown)) < 0 ||
            (rc = SV("output.LayerNorm.weight", D, &L->ln2_w)) < 0 || (rc = SV("output.LayerNorm.bias", D, &L->ln2_b)) < 0)
            goto out;
#undef SM
#undef SV
    }
    if (inf->is_reranker) {
        const st_entry *cw = st_find(&sf, "classifier.weight");
        int64_t nlab = cw && cw->n_dims == 2 ? cw->shape[0] : 1;
        if (nlab < 1 || nlab > 64) nlab = 1;
        if ((rc = st_mat(m, &sf, "pooler.dense.weight", D, D, &m->pool_w, sp, err, errlen)) < 0 ||
            (rc = st_vec(m, &sf, "pooler.dense.bias", D, &m->pool_b, sp, err, errlen)) < 0 ||
            (rc = st_mat(m, &sf, "classifier.weight", nlab, D, &m->cls_w, sp, err, errlen)) < 0 ||
            (rc = st_vec(m, &sf, "classifier.bias", nlab, &m->cls_b, sp, err, errlen)) < 0)
            goto out;
        inf->n_labels = (int)nlab;
    }
    rc = 0;
out:
    cJSON_Delete(cfg);
    cJSON_Delete(tc);
    cJSON_Delete(sb);
    cJSON_Delete(pl);
    return rc;
}
