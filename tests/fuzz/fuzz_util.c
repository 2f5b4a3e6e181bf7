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

const char *fz_fixtures(void)
{
    const char *f = getenv("LCX_FIXTURES");
    struct stat st;
    if (!f || !*f || stat(f, &st) != 0 || !S_ISDIR(st.st_mode)) return NULL;
    return f;
}
