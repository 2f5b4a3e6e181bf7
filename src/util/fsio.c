#include "util/util.h"
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int lcx__read_file(const char *path, size_t max, char **out, size_t *out_len)
{
    *out = NULL;
    if (out_len) *out_len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return errno == ENOENT ? LCX_ENOTFOUND : lcx__eio(errno);
    struct stat st;
    if (fstat(fd, &st) < 0) { int e = errno; close(fd); return lcx__eio(e); }
    if (max && (size_t)st.st_size > max) { close(fd); return LCX_ELIMIT; }
    size_t n = (size_t)st.st_size;
    char *p = malloc(n + 1);
    if (!p) { close(fd); return LCX_ENOMEM; }
    size_t got = 0;
    int e = 0;
    while (got < n) {
        ssize_t r = read(fd, p + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) e = errno;
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fd);
    if (got != n) { free(p); return lcx__eio(e); }   /* e = 0: the file shrank meanwhile */
    p[n] = 0;
    *out = p;
    if (out_len) *out_len = n;
    return LCX_OK;
}

char *lcx__path_join(const char *dir, const char *name)
{
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (!p) return NULL;
    memcpy(p, dir, a);
    p[a] = '/';
    memcpy(p + a + 1, name, b + 1);
    return p;
}

static void (*fsync_observer)(uint64_t ns);

void lcx__fsync_set_observer(void (*fn)(uint64_t ns)) { __atomic_store_n(&fsync_observer, fn, __ATOMIC_RELEASE); }

int lcx__fdatasync(int fd)
{
    void (*obs)(uint64_t) = __atomic_load_n(&fsync_observer, __ATOMIC_ACQUIRE);
    uint64_t t0 = obs ? lcx__now_ns() : 0;
    int r = fdatasync(fd);
    if (obs) obs(lcx__now_ns() - t0);
    return r;
}

int lcx__fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return lcx__eio(errno);
    int rc = fsync(fd) < 0 ? lcx__eio(errno) : LCX_OK;
    close(fd);
    return rc;
}

int lcx__boot_id(uint8_t id[16])
{
    char t[64];
    int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return lcx__eio(errno);
    ssize_t n = read(fd, t, sizeof t - 1);
    int e = n < 0 ? errno : 0;
    close(fd);
    if (n < 32) return lcx__eio(e);
    int k = 0;   /* "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx\n": 32 hex digits, dashes skipped */
    for (ssize_t i = 0; i < n && k < 32; i++) {
        int c = t[i], v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (v < 0) {
            if (c == '-') continue;
            return lcx__eio(0);
        }
        if (k % 2 == 0) id[k / 2] = (uint8_t)(v << 4);
        else id[k / 2] |= (uint8_t)v;
        k++;
    }
    return k == 32 ? LCX_OK : lcx__eio(0);
}

int lcx__write_file_atomic(const char *path, const void *data, size_t len)
{
    size_t pl = strlen(path);
    char *tmp = malloc(pl + 5), *dcopy = strdup(path);
    if (!tmp || !dcopy) { free(tmp); free(dcopy); return LCX_ENOMEM; }
    memcpy(tmp, path, pl);
    memcpy(tmp + pl, ".tmp", 5);
    int rc = LCX_EIO, e = 0;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) e = errno;
    if (fd >= 0) {
        const char *p = data;
        size_t left = len;
        while (left) {
            ssize_t w = write(fd, p, left);
            if (w < 0 && errno == EINTR) continue;
            if (w < 0) e = errno;
            if (w <= 0) break;
            p += w;
            left -= (size_t)w;
        }
        if (left) rc = lcx__eio(e);
        else if (fsync(fd) < 0) rc = lcx__eio(errno);
        else {
            int c = close(fd);
            fd = -1;
            if (c < 0) rc = lcx__eio(errno);
            else rc = rename(tmp, path) == 0 ? lcx__fsync_dir(dirname(dcopy)) : lcx__eio(errno);
        }
        if (fd >= 0) close(fd);
        if (rc) unlink(tmp);
    } else {
        rc = lcx__eio(e);
    }
    free(tmp);
    free(dcopy);
    return rc;
}

int lcx__mkdirs(const char *path)
{
    char *p = strdup(path);
    if (!p) return LCX_ENOMEM;
    size_t n = strlen(p);
    for (size_t i = 1; i <= n; i++) {
        if (p[i] != '/' && p[i] != 0) continue;
        char c = p[i];
        p[i] = 0;
        if (mkdir(p, 0700) < 0 && errno != EEXIST) { int e = errno; free(p); return lcx__eio(e); }
        p[i] = c;
    }
    struct stat st;
    int rc = stat(path, &st) < 0 ? lcx__eio(errno) : S_ISDIR(st.st_mode) ? LCX_OK : lcx__eio(ENOTDIR);
    free(p);
    return rc;
}
