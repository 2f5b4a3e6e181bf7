/* Integration: longctx-svc on a full disk. The data dir is a 2 MiB tmpfs (skipped where
 * mount(2) is not permitted); a filler file takes the rest of its space. Then:
 *   - /evict/write (existing and new session), /sessions/ID/hibernate and POST /index
 *     answer 507 {"error":{"code":"insufficient_storage","message"}} with no server path in
 *     the message, both when the disk is completely full and when a record fits only in
 *     part (the partial write is cut back);
 *   - what was acknowledged before stays readable, and no refused chunk appears later;
 *   - once the filler is removed, the same requests answer 200;
 *   - after a restart every acknowledged chunk is there, exactly once, and every session
 *     directory passes lcx_store_validate (no half-made session is left behind). */
#define _GNU_SOURCE
#include "svc_harness.h"

#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "longctx/lcx.h"
#include "util/util.h"   /* lcx__eio */

#define CHUNKS 8

static char g_mnt[4096];     /* the tmpfs mount point (the data dir) */
static char g_proj[4096];    /* a small project outside the tmpfs */

static int setup(void **st)
{
    (void)st;
    char *d = tu_tmpdir();
    snprintf(g_mnt, sizeof g_mnt, "%s", d);
    free(d);
    if (mount("tmpfs", g_mnt, "tmpfs", 0, "size=2m,mode=0700") != 0) {
        fprintf(stderr, "mount tmpfs: %s (not permitted here: skipping)\n", strerror(errno));
        tu_rmrf(g_mnt);
        g_mnt[0] = 0;
        return 0;
    }
    d = tu_tmpdir();
    snprintf(g_proj, sizeof g_proj, "%s", d);
    free(d);
    char p[4200];
    snprintf(p, sizeof p, "%s/.git", g_proj);
    mkdir(p, 0700);
    for (int i = 0; i < 6; i++) {
        char body[2048];
        int n = snprintf(body, sizeof body, "/* module %d */\nint diskfull_fn_%d(int x)\n{\n    return x * %d + 17;\n}\n",
                         i, i, i + 3);
        snprintf(p, sizeof p, "%s/m%d.c", g_proj, i);
        tu_write(p, body, (size_t)n);
    }
    return 0;
}

static int teardown(void **st)
{
    (void)st;
    if (g_mnt[0]) {
        umount2(g_mnt, MNT_DETACH);
        tu_rmrf(g_mnt);
    }
    if (g_proj[0]) tu_rmrf(g_proj);
    return 0;
}

/* Fills the tmpfs with FILL until a write fails with ENOSPC, then gives back `leave`
 * bytes (rounded to pages by tmpfs). Returns the file's size. */
static off_t fill_disk(const char *path, off_t leave)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    static char blk[65536];
    memset(blk, 'x', sizeof blk);
    off_t size = 0;
    for (;;) {
        ssize_t w = write(fd, blk, sizeof blk);
        if (w > 0) { size += w; continue; }
        assert_true(w < 0 && errno == ENOSPC);
        break;
    }
    if (leave) {
        size = size > leave ? size - leave : 0;
        assert_int_equal(ftruncate(fd, size), 0);
    }
    close(fd);
    return size;
}

static long item(int req, int k) { return 5000000L + (long)req * CHUNKS + k; }

/* One /evict/write of CHUNKS chunks of ~text_bytes each, ids item(req, k). */
static long write_req(sh_server *s, const char *sid, int req, size_t text_bytes, cJSON **j)
{
    size_t cap = CHUNKS * (text_bytes + 256) + 256;
    char *body = malloc(cap);
    size_t o = (size_t)snprintf(body, cap, "{\"session_id\":\"%s\",\"chunks\":[", sid);
    for (int k = 0; k < CHUNKS; k++) {
        long id = item(req, k);
        o += (size_t)snprintf(body + o, cap - o, "%s{\"text\":\"diskfull record %ld ", k ? "," : "", id);
        for (size_t b = 0; b + 40 < text_bytes; b += 8) o += (size_t)snprintf(body + o, cap - o, "pad%04zu ", (b / 8) % 10000);
        o += (size_t)snprintf(body + o, cap - o, "\",\"token_range\":[%ld,%ld],\"layer\":0,\"score\":0.5}", id, id);
    }
    snprintf(body + o, cap - o, "]}");
    long st = sh_post(s, "/evict/write", body, j);
    free(body);
    return st;
}

/* 507 with the insufficient_storage body and no path of the server in the message. */
static void assert_507(long st, cJSON *j, const char *what)
{
    char *txt = j ? cJSON_PrintUnformatted(j) : NULL;
    if (st != 507 || !txt) fprintf(stderr, "%s: %ld %s\n", what, st, txt ? txt : "(no JSON)");
    assert_int_equal(st, 507);
    sh_assert_error(j, "insufficient_storage");
    const char *m = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "error"), "message")->valuestring;
    if (strstr(m, g_mnt) || strstr(m, "/sessions") || strstr(m, "/scopes") || strstr(m, "chunks.log"))
        fail_msg("%s: the message names a server path: %s", what, m);
    free(txt);
    cJSON_Delete(j);
}

/* Token-range starts of the session's stored chunks → seen[id - 5000000] counts. */
static int dump_counts(sh_server *s, const char *sid, unsigned char *seen, size_t n_seen)
{
    char path[256];
    snprintf(path, sizeof path, "/evict/dump?session_id=%s", sid);
    cJSON *j;
    assert_int_equal(sh_get(s, path, &j), 200);
    const cJSON *tr = cJSON_GetObjectItemCaseSensitive(j, "token_ranges"), *x;
    int n = 0;
    cJSON_ArrayForEach(x, tr) {
        long a = (long)cJSON_GetArrayItem(x, 0)->valuedouble;
        if (a >= 5000000 && (size_t)(a - 5000000) < n_seen) seen[a - 5000000]++;
        n++;
    }
    cJSON_Delete(j);
    return n;
}

static int count_dirs(const char *data_dir)
{
    char p[4300];
    snprintf(p, sizeof p, "%s/sessions", data_dir);
    DIR *d = opendir(p);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}


static void test_disk_full(void **st)
{
    (void)st;
    if (!g_mnt[0]) skip();
    sh_server s;
    sh_start(&s, g_mnt, NULL, NULL);
    char filler[4300], q[4400];
    snprintf(filler, sizeof filler, "%s/filler", g_mnt);
    enum { MAXREQ = 64 };
    int acked[MAXREQ] = {0}, refused[MAXREQ] = {0}, req = 0;
    cJSON *j;

    /* 1. room: some acknowledged writes */
    for (; req < 10; req++) {
        assert_int_equal(write_req(&s, "full", req, 200, &j), 200);
        cJSON_Delete(j);
        acked[req] = 1;
    }
    /* 2. two pages left, a 16 KB record: written in part, then refused and cut back */
    fill_disk(filler, 8192);
    long r = write_req(&s, "full", req, 2000, &j);
    assert_507(r, j, "partial write");
    refused[req++] = 1;
    /* 3. completely full: existing session, new session, hibernate, index */
    fill_disk(filler, 0);
    r = write_req(&s, "full", req, 200, &j);
    assert_507(r, j, "write, disk full");
    refused[req++] = 1;
    r = write_req(&s, "fresh", req, 200, &j);
    assert_507(r, j, "new session, disk full");
    refused[req++] = 1;
    r = sh_post(&s, "/sessions/full/hibernate", NULL, &j);
    assert_507(r, j, "hibernate, disk full");
    snprintf(q, sizeof q, "/index?scope=%s", g_proj);
    r = sh_post(&s, q, NULL, &j);
    assert_507(r, j, "index, disk full");
    /* what was acknowledged is still served meanwhile */
    assert_int_equal(sh_post(&s, "/evict/retrieve", "{\"session_id\":\"full\",\"query\":\"diskfull record 5000003\",\"top_k\":3}", &j), 200);
    assert_true(sh_count(j, "chunks") > 0);
    cJSON_Delete(j);
    /* no half-made session (directory) for the refused new one */
    assert_int_equal(sh_get(&s, "/sessions/fresh/hibernation-status", &j), 200);
    assert_false(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "in_ram")));
    assert_false(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "on_disk")));
    cJSON_Delete(j);
    assert_int_equal(count_dirs(g_mnt), 1);

    /* 4. space returns: the same requests succeed */
    assert_int_equal(unlink(filler), 0);
    for (int i = 0; i < 3; i++, req++) {
        assert_int_equal(write_req(&s, i == 1 ? "fresh" : "full", req, 200, &j), 200);
        cJSON_Delete(j);
        acked[req] = i == 1 ? 2 : 1;
    }
    assert_int_equal(sh_post(&s, "/sessions/full/hibernate", NULL, &j), 200);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "hibernated")));
    cJSON_Delete(j);
    assert_int_equal(sh_post(&s, q, NULL, &j), 200);
    assert_true(cJSON_GetObjectItemCaseSensitive(j, "files")->valuedouble >= 6);
    cJSON_Delete(j);

    /* 5. restart: every acknowledged chunk exactly once, nothing refused, stores valid */
    int w = sh_stop(&s, SIGTERM);
    assert_true(WIFEXITED(w) && WEXITSTATUS(w) == 0);
    assert_int_equal(sh_validate_sessions(g_mnt), 2);
    free(s.data_dir);
    sh_start(&s, g_mnt, NULL, NULL);
    static unsigned char seen[MAXREQ * CHUNKS];
    memset(seen, 0, sizeof seen);
    int n = dump_counts(&s, "full", seen, sizeof seen);
    n += dump_counts(&s, "fresh", seen, sizeof seen);
    int need = 0;
    for (int q2 = 0; q2 < req; q2++)
        for (int k = 0; k < CHUNKS; k++) {
            unsigned c = seen[item(q2, k) - 5000000];
            if (acked[q2]) { need++; assert_int_equal(c, 1); }
            if (refused[q2]) assert_int_equal(c, 0);
        }
    assert_int_equal(n, need);
    w = sh_stop(&s, SIGTERM);
    assert_true(WIFEXITED(w) && WEXITSTATUS(w) == 0);
    assert_int_equal(sh_validate_sessions(g_mnt), 2);
    unlink(s.log);
    free(s.data_dir);
}

/* The one mapping (src/util/err.c): ENOSPC and EDQUOT are LCX_ENOSPC, other errnos
 * LCX_EIO; the errno is kept for lcx_strerror_detail either way. */
static void test_errno_mapping(void **st)
{
    (void)st;
    assert_int_equal(lcx__eio(ENOSPC), LCX_ENOSPC);
    assert_int_equal(lcx_last_errno(), ENOSPC);
    char buf[160];
    assert_non_null(strstr(lcx_strerror_detail(LCX_ENOSPC, buf, sizeof buf), "No space left"));
    assert_int_equal(lcx__eio(EDQUOT), LCX_ENOSPC);
    assert_int_equal(lcx__eio(EIO), LCX_EIO);
    assert_int_equal(lcx__eio(0), LCX_EIO);
    assert_string_equal(lcx_strerror(LCX_ENOSPC), "no space left (disk or quota full)");
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_ALL);
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_errno_mapping), cmocka_unit_test(test_disk_full)};
    int rc = cmocka_run_group_tests(tests, setup, teardown);
    curl_global_cleanup();
    return rc;
}
