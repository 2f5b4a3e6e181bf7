/* MRCR records as JSONL (openai/mrcr field names), bins by n_chars, and small statistics.
 * Every line is validated (types, ranges, caps) before a record is accepted. */
#include "eval/lcx_eval.h"
#include "util/util.h"
#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static void set_err(char *err, size_t n, const char *fmt, ...)
{
    if (!err || !n) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, n, fmt, ap);
    va_end(ap);
}

void lcx__mrcr_rec_free(lcx_mrcr_rec *r)
{
    if (!r) return;
    for (size_t i = 0; i < r->n_msgs; i++) { free(r->msgs[i].role); free(r->msgs[i].content); }
    free(r->msgs);
    free(r->answer);
    free(r->hash);
    memset(r, 0, sizeof *r);
}

void lcx__mrcr_set_free(lcx_mrcr_set *s)
{
    if (!s) return;
    for (size_t i = 0; i < s->n; i++) lcx__mrcr_rec_free(&s->recs[i]);
    free(s->recs);
    memset(s, 0, sizeof *s);
}

/* Takes ownership of *rec's contents (rec is zeroed). */
static int lcx__mrcr_set_push(lcx_mrcr_set *s, lcx_mrcr_rec *r)
{
    if (s->n >= LCX_MRCR_MAX_RECORDS) return LCX_ELIMIT;
    if (s->n == s->alloc) {
        size_t na = s->alloc ? s->alloc * 2 : 16;
        lcx_mrcr_rec *nr = realloc(s->recs, na * sizeof *nr);
        if (!nr) return LCX_ENOMEM;
        s->recs = nr;
        s->alloc = na;
    }
    s->recs[s->n++] = *r;
    memset(r, 0, sizeof *r);
    return LCX_OK;
}

static int get_long(const cJSON *o, const char *k, long *v, char *err, size_t el)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!cJSON_IsNumber(x) || x->valuedouble != floor(x->valuedouble) || fabs(x->valuedouble) > 1e15) {
        set_err(err, el, "field '%s' missing or not an integer", k);
        return LCX_EINVAL;
    }
    *v = (long)x->valuedouble;
    return LCX_OK;
}

static int get_str(const cJSON *o, const char *k, char **v, char *err, size_t el)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!cJSON_IsString(x) || !x->valuestring) {
        set_err(err, el, "field '%s' missing or not a string", k);
        return LCX_EINVAL;
    }
    *v = strdup(x->valuestring);
    return *v ? LCX_OK : LCX_ENOMEM;
}

int lcx__mrcr_parse_line(const char *line, size_t len, lcx_mrcr_rec *rec, char *err, size_t el)
{
    if (!line || !rec) return LCX_EINVAL;
    memset(rec, 0, sizeof *rec);
    if (len > LCX_MRCR_MAX_LINE) { set_err(err, el, "record longer than %zu bytes", LCX_MRCR_MAX_LINE); return LCX_ELIMIT; }
    cJSON *o = cJSON_ParseWithLength(line, len), *plist = NULL;
    int rc = LCX_EINVAL;
    if (!cJSON_IsObject(o)) { set_err(err, el, "not a JSON object"); goto fail; }
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(o, "prompt");
    const cJSON *list = p;
    if (cJSON_IsString(p)) {
        plist = cJSON_Parse(p->valuestring);
        list = plist;
    }
    if (!cJSON_IsArray(list)) { set_err(err, el, "'prompt' is not a message list (or a JSON string of one)"); goto fail; }
    int n = cJSON_GetArraySize(list);
    if (n < 1 || n > LCX_MRCR_MAX_MESSAGES) { set_err(err, el, "prompt has %d messages", n); goto fail; }
    rec->msgs = calloc((size_t)n, sizeof *rec->msgs);
    if (!rec->msgs) { rc = LCX_ENOMEM; goto fail; }
    const cJSON *m;
    cJSON_ArrayForEach(m, list) {
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content");
        if (!cJSON_IsString(role) || !cJSON_IsString(content)) {
            set_err(err, el, "message %zu lacks string role/content", rec->n_msgs);
            goto fail;
        }
        lcx_mrcr_msg *mm = &rec->msgs[rec->n_msgs++];
        mm->role = strdup(role->valuestring);
        mm->content = strdup(content->valuestring);
        if (!mm->role || !mm->content) { rc = LCX_ENOMEM; goto fail; }
        mm->len = strlen(mm->content);
    }
    long nn = 0;
    if ((rc = get_str(o, "answer", &rec->answer, err, el)) ||
        (rc = get_str(o, "random_string_to_prepend", &rec->hash, err, el)) ||
        (rc = get_long(o, "n_needles", &nn, err, el)) ||
        (rc = get_long(o, "desired_msg_index", &rec->desired_msg_index, err, el)) ||
        (rc = get_long(o, "total_messages", &rec->total_messages, err, el)) ||
        (rc = get_long(o, "n_chars", &rec->n_chars, err, el)))
        goto fail;
    rc = LCX_EINVAL;
    if (nn < 1 || nn > 64) { set_err(err, el, "n_needles %ld out of range", nn); goto fail; }
    rec->n_needles = (int)nn;
    if (rec->n_chars < 0) { set_err(err, el, "n_chars negative"); goto fail; }
    /* openai/mrcr: desired_msg_index names the user request, the target is the reply after it */
    long d = rec->desired_msg_index;
    if (d < 0 || (size_t)d + 1 >= rec->n_msgs || strcmp(rec->msgs[d].role, "user") ||
        strcmp(rec->msgs[d + 1].role, "assistant")) {
        set_err(err, el, "desired_msg_index %ld is not a user request followed by an assistant reply", d);
        goto fail;
    }
    cJSON_Delete(plist);
    cJSON_Delete(o);
    return LCX_OK;
fail:
    cJSON_Delete(plist);
    cJSON_Delete(o);
    lcx__mrcr_rec_free(rec);
    return rc;
}

int lcx__mrcr_next_line(FILE *f, lcx_buf *line)
{
    if (!f || !line) return LCX_EINVAL;
    line->len = 0;
    if (line->data) line->data[0] = 0;
    char chunk[65536];
    int any = 0, over = 0;
    while (fgets(chunk, sizeof chunk, f)) {
        any = 1;
        size_t n = strlen(chunk);
        int end = n && chunk[n - 1] == '\n';
        if (!over) {
            if (line->len + n > LCX_MRCR_MAX_LINE) over = 1;     /* keep reading to the newline */
            else {
                int rc = lcx__buf_append(line, chunk, n);
                if (rc) return rc;
            }
        }
        if (end) break;
    }
    if (ferror(f)) return LCX_EIO;
    if (over) return LCX_ELIMIT;
    if (!any) return 0;
    while (line->len && (line->data[line->len - 1] == '\n' || line->data[line->len - 1] == '\r'))
        line->data[--line->len] = 0;
    if (!line->data && lcx__buf_append(line, "", 0)) return LCX_ENOMEM;
    return 1;
}

int lcx__mrcr_read_jsonl(const char *path, lcx_mrcr_set *set, char *err, size_t el)
{
    if (!path || !set) return LCX_EINVAL;
    FILE *f = fopen(path, "rb");
    if (!f) { set_err(err, el, "cannot open %s", path); return LCX_EIO; }
    lcx_buf lb = {0};
    long lineno = 0;
    int rc = LCX_OK, got;
    size_t n0 = set->n;   /* a failed read adds nothing: no partial set */
    while ((got = lcx__mrcr_next_line(f, &lb)) > 0) {
        lineno++;
        const char *line = lb.data;
        size_t len = lb.len;
        size_t k = 0;
        while (k < len && (line[k] == ' ' || line[k] == '\t')) k++;
        if (k == len) continue;
        lcx_mrcr_rec r;
        char e2[256] = "";
        rc = lcx__mrcr_parse_line(line, len, &r, e2, sizeof e2);
        if (rc) { set_err(err, el, "%s:%ld: %s", path, lineno, e2); break; }
        rc = lcx__mrcr_set_push(set, &r);
        if (rc) { lcx__mrcr_rec_free(&r); set_err(err, el, "%s:%ld: too many records", path, lineno); break; }
    }
    if (got < 0 && !rc) {
        rc = got;
        set_err(err, el, "%s:%ld: %s", path, lineno + 1,
                got == LCX_ELIMIT ? "record longer than the 64 MiB cap" : "read error");
    }
    lcx__buf_free(&lb);
    fclose(f);
    if (rc)
        while (set->n > n0) lcx__mrcr_rec_free(&set->recs[--set->n]);
    return rc;
}

int lcx__mrcr_write_line(FILE *f, const lcx_mrcr_rec *r)
{
    if (!f || !r) return LCX_EINVAL;
    lcx_buf p = {0}, l = {0};
    int rc = lcx__buf_puts(&p, "[");
    for (size_t i = 0; !rc && i < r->n_msgs; i++) {
        rc = lcx__buf_puts(&p, i ? ", {\"role\": " : "{\"role\": ");
        if (!rc) rc = lcx__buf_json_str(&p, r->msgs[i].role, strlen(r->msgs[i].role));
        if (!rc) rc = lcx__buf_puts(&p, ", \"content\": ");
        if (!rc) rc = lcx__buf_json_str(&p, r->msgs[i].content, r->msgs[i].len);
        if (!rc) rc = lcx__buf_puts(&p, "}");
    }
    if (!rc) rc = lcx__buf_puts(&p, "]");
    if (!rc) rc = lcx__buf_puts(&l, "{\"prompt\": ");
    if (!rc) rc = lcx__buf_json_str(&l, p.data, p.len);
    if (!rc) rc = lcx__buf_puts(&l, ", \"answer\": ");
    if (!rc) rc = lcx__buf_json_str(&l, r->answer, strlen(r->answer));
    if (!rc) rc = lcx__buf_puts(&l, ", \"random_string_to_prepend\": ");
    if (!rc) rc = lcx__buf_json_str(&l, r->hash, strlen(r->hash));
    if (!rc)
        rc = lcx__buf_printf(&l, ", \"n_needles\": %d, \"desired_msg_index\": %ld, \"total_messages\": %ld, \"n_chars\": %ld}\n",
                            r->n_needles, r->desired_msg_index, r->total_messages, r->n_chars);
    if (!rc && fwrite(l.data, 1, l.len, f) != l.len) rc = LCX_EIO;
    lcx__buf_free(&p);
    lcx__buf_free(&l);
    return rc;
}

/* ---- bins */
static const char *bin_names[] = {"8k", "16k", "32k", "64k", "128k", "256k", "512k", "1m", "other"};

void lcx__mrcr_bin_range(int bin, long *lo, long *hi)
{
    if (bin < 0 || bin >= LCX_MRCR_NBINS) { *lo = *hi = 0; return; }
    *lo = 16384L << bin;                                   /* 2^14 .. 2^21 */
    *hi = bin == LCX_MRCR_NBINS - 1 ? 5L * 1048576 : *lo * 2;
}

int lcx__mrcr_bin_of(long n_chars)
{
    for (int b = 0; b < LCX_MRCR_NBINS; b++) {
        long lo, hi;
        lcx__mrcr_bin_range(b, &lo, &hi);
        if (n_chars >= lo && n_chars < hi) return b;
    }
    return LCX_MRCR_BIN_OTHER;
}

const char *lcx__mrcr_bin_name(int bin)
{
    return bin >= 0 && bin <= LCX_MRCR_BIN_OTHER ? bin_names[bin] : "?";
}

int lcx__mrcr_bin_parse(const char *s)
{
    for (int b = 0; b < LCX_MRCR_NBINS; b++)
        if (!strcasecmp(s, bin_names[b])) return b;
    return LCX_EINVAL;
}

/* ---- statistics */
void lcx__eval_mean_ci(const double *x, size_t n, double *mean, double *ci95)
{
    double m = 0, ss = 0;
    for (size_t i = 0; i < n; i++) m += x[i];
    m = n ? m / (double)n : 0;
    for (size_t i = 0; i < n; i++) ss += (x[i] - m) * (x[i] - m);
    *mean = m;
    *ci95 = n > 1 ? 1.96 * sqrt(ss / (double)(n - 1)) / sqrt((double)n) : 0;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double lcx__eval_percentile(const double *x, size_t n, double q)
{
    if (!n) return 0;
    double *c = malloc(n * sizeof *c);
    if (!c) return 0;
    memcpy(c, x, n * sizeof *c);
    qsort(c, n, sizeof *c, cmp_d);
    size_t r = (size_t)ceil(q * (double)n);
    if (r < 1) r = 1;
    if (r > n) r = n;
    double v = c[r - 1];
    free(c);
    return v;
}
