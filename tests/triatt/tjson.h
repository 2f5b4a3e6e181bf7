/* Test helpers: load a fixture JSON and flatten nested numeric arrays (null → NaN). */
#ifndef TRIATT_TJSON_H
#define TRIATT_TJSON_H
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include "util/util.h"

static cJSON *tj_load(const char *path)
{
    char *d = NULL;
    size_t n = 0;
    if (lcx__read_file(path, 16u << 20, &d, &n) < 0) return NULL;
    cJSON *j = cJSON_ParseWithLength(d, n);
    free(d);
    return j;
}

static long tj_flat_(const cJSON *a, double *out, long cap, long n)
{
    if (cJSON_IsNumber(a)) { if (n < cap) out[n] = a->valuedouble; return n + 1; }
    if (cJSON_IsNull(a)) { if (n < cap) out[n] = NAN; return n + 1; }
    if (cJSON_IsBool(a)) { if (n < cap) out[n] = cJSON_IsTrue(a); return n + 1; }
    for (const cJSON *e = a ? a->child : NULL; e; e = e->next) n = tj_flat_(e, out, cap, n);
    return n;
}
/* malloc'd flat copy of the array at path a.b.c (dots), count in *n; NULL when missing */
static double *tj_arr(const cJSON *root, const char *path, long *n)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    const cJSON *cur = root;
    for (char *save = NULL, *tok = strtok_r(buf, ".", &save); tok && cur; tok = strtok_r(NULL, ".", &save))
        cur = cJSON_GetObjectItemCaseSensitive(cur, tok);
    if (!cur) return NULL;
    long k = tj_flat_(cur, NULL, 0, 0);
    double *out = malloc((size_t)(k ? k : 1) * sizeof(double));
    tj_flat_(cur, out, k, 0);
    if (n) *n = k;
    return out;
}
static double tj_num(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}
#endif
