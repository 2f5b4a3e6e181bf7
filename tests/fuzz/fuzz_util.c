/* Helpers shared by the fuzz targets (fuzz.h). */
#define _GNU_SOURCE
#include "fuzz.h"

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

char *fz_tmpdir(const char *tag)
{
    const char *base = getenv("TMPDIR");
    if (!base || !*base) base = "/tmp";
    char *p = NULL;
    if (asprintf(&p, "%s/lcx-fuzz-%s-XXXXXX", base, tag) < 0) return NULL;
    if (!mkdtemp(p)) {
        free(p);
        return NULL;
    }
    return p;
}

static int rm1(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st; (void)flag; (void)ftw;
    remove(p);
    return 0;
}

void fz_rmrf(const char *path)
{
    if (path) nftw(path, rm1, 16, FTW_DEPTH | FTW_PHYS);
}

void fz_put(const char *dir, const char *rel, const char *text)
{
    char *p = NULL;
    if (asprintf(&p, "%s/%s", dir, rel) < 0) return;
    FILE *f = fopen(p, "w");
    free(p);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

char *fz_expand(const void *data, size_t n, const char *path, size_t *out_len)
{
    const char *s = data;
    size_t pl = strlen(path), cap = n + 1, k = 0;
    for (size_t i = 0; i + 1 < n; i++) cap += (s[i] == '@' && s[i + 1] == 'P') ? pl : 0;
    char *o = malloc(cap);
    if (!o) return NULL;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '@' && i + 1 < n && s[i + 1] == 'P') {
            memcpy(o + k, path, pl);
            k += pl;
            i++;
        } else {
            o[k++] = s[i];
        }
    }
    o[k] = 0;
    *out_len = k;
    return o;
}

const char *fz_fixtures(void)
{
    const char *f = getenv("LCX_FIXTURES");
    struct stat st;
    if (!f || !*f || stat(f, &st) != 0 || !S_ISDIR(st.st_mode)) return NULL;
    return f;
}
