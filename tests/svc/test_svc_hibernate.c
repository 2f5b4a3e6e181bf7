/* Integration: hibernation over HTTP — the idle janitor, LRU hibernation beyond
 * --max-sessions-in-ram, hibernate/resume across a restart, and resume refused when the
 * server's embedder fingerprint differs (--embed-dim). */
#include "svc_harness.h"

#include <curl/curl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static bool in_ram(sh_server *s, const char *sid)
{
    char p[256];
    snprintf(p, sizeof p, "/sessions/%s/hibernation-status", sid);
    cJSON *j;
    assert_int_equal(sh_get(s, p, &j), 200);
    bool r = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "in_ram"));
    assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "on_disk")) || r);
    cJSON_Delete(j);
    return r;
}

static void write_one(sh_server *s, const char *sid, const char *text)
{
    char body[1024];
    snprintf(body, sizeof body, "{\"session_id\":\"%s\",\"chunks\":[{\"text\":\"%s\",\"token_range\":[0,9],\"layer\":1,\"score\":0.5}]}",
             sid, text);
    assert_int_equal(sh_post(s, "/evict/write", body, NULL), 200);
}

static char *top_text(sh_server *s, const char *sid, const char *q, long *status)
{
    char body[1024];
    snprintf(body, sizeof body, "{\"session_id\":\"%s\",\"query\":\"%s\",\"top_k\":1}", sid, q);
    cJSON *j;
    *status = sh_post(s, "/evict/retrieve", body, &j);
    char *r = NULL;
    const cJSON *c0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "chunks"), 0);
    if (c0) r = strdup(cJSON_GetObjectItemCaseSensitive(c0, "text")->valuestring);
    cJSON_Delete(j);
    return r;
}

static void test_janitor_hibernates_idle(void **st)
{
    sh_server s;
    const char *extra[] = {"--idle-hibernate-s", "0.3", "--janitor-interval-s", "0.1", NULL};
    sh_start(&s, NULL, extra, NULL);
    write_one(&s, "idle", "the lighthouse keeper logs tide tables every morning");
    bool hibernated = false;
    for (int i = 0; i < 200 && !hibernated; i++) {   /* up to 10 s: the janitor must act */
        usleep(50000);
        hibernated = !in_ram(&s, "idle");
    }
    assert_true(hibernated);
    long stt;
    char *t = top_text(&s, "idle", "lighthouse tide tables", &stt);   /* resumed on demand */
    assert_int_equal(stt, 200);
    assert_non_null(t);
    assert_string_equal(t, "the lighthouse keeper logs tide tables every morning");
    free(t);
    int w = sh_stop(&s, SIGINT);                       /* SIGINT: clean shutdown too */
    assert_true(WIFEXITED(w) && WEXITSTATUS(w) == 0);
    sh_cleanup(&s);
}

static void test_lru_beyond_max_in_ram(void **st)
{
    sh_server s;
    const char *extra[] = {"--max-sessions-in-ram", "2", NULL};
    sh_start(&s, NULL, extra, NULL);
    write_one(&s, "s1", "first session text about glaciers");
    write_one(&s, "s2", "second session text about volcanoes");
    write_one(&s, "s3", "third session text about deserts");
    cJSON *j;
    assert_int_equal(sh_get(&s, "/longctx/status", &j), 200);
    int active = cJSON_GetObjectItemCaseSensitive(j, "sessions_active")->valueint;
    cJSON_Delete(j);
    assert_true(active <= 2);
    assert_false(in_ram(&s, "s1"));   /* least recently used */
    long stt;
    char *t = top_text(&s, "s1", "glaciers", &stt);
    assert_int_equal(stt, 200);
    assert_string_equal(t, "first session text about glaciers");
    free(t);
    sh_stop(&s, SIGTERM);
    sh_cleanup(&s);
}

/* --max-mem-mb: when the sessions in RAM need more, the least recently used is hibernated. */
static void write_many(sh_server *s, const char *sid, int n, const char *tag)
{
    size_t cap = (size_t)n * 1200 + 256;
    char *body = malloc(cap);
    size_t o = (size_t)snprintf(body, cap, "{\"session_id\":\"%s\",\"chunks\":[", sid);
    for (int i = 0; i < n; i++) {
        o += (size_t)snprintf(body + o, cap - o, "%s{\"text\":\"%s record %d", i ? "," : "", tag, i);
        for (int k = 0; k < 60; k++) o += (size_t)snprintf(body + o, cap - o, " w%d_%d", (i * 61 + k) % 5003, k);
        o += (size_t)snprintf(body + o, cap - o, "\",\"token_range\":[%d,%d]}", i * 100, i * 100 + 99);
    }
    snprintf(body + o, cap - o, "]}");
    assert_int_equal(sh_post(s, "/evict/write", body, NULL), 200);
    free(body);
}

static void test_lru_beyond_max_mem(void **st)
{
    sh_server s;
    const char *extra[] = {"--max-mem-mb", "1", NULL};
    sh_start(&s, NULL, extra, NULL);
    write_many(&s, "m1", 1500, "marmot");   /* each session alone is > 1 MB in RAM */
    write_many(&s, "m2", 1500, "pangolin");
    assert_false(in_ram(&s, "m1"));
    assert_true(in_ram(&s, "m2"));
    long stt;
    char *t = top_text(&s, "m1", "marmot record 77", &stt);
    assert_int_equal(stt, 200);
    assert_non_null(t);
    assert_non_null(strstr(t, "marmot record 77 "));
    free(t);
    assert_false(in_ram(&s, "m2"));           /* m1 came back, m2 made room */
    sh_stop(&s, SIGTERM);
    sh_cleanup(&s);
}

static void test_hibernate_restart_and_fingerprint(void **st)
{
    sh_server s;
    sh_start(&s, NULL, NULL, NULL);
    char *dir = strdup(s.data_dir);
    write_one(&s, "fp", "the orchard harvest yielded eleven crates of quince");
    cJSON *j;
    assert_int_equal(sh_post(&s, "/sessions/fp/hibernate", NULL, &j), 200);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "hibernated")));
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(j, "n_chunks")->valueint, 1);   /* counted before */
    cJSON_Delete(j);
    assert_int_equal(sh_post(&s, "/sessions/fp/hibernate", NULL, &j), 200);   /* already hibernated */
    assert_false(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "hibernated")));
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(j, "n_chunks")->valueint, 0);
    cJSON_Delete(j);
    assert_int_equal(sh_get(&s, "/sessions/fp/hibernation-status", &j), 200);
    char fp[256];
    snprintf(fp, sizeof fp, "%s", cJSON_GetObjectItemCaseSensitive(j, "embedder_fingerprint")->valuestring);
    cJSON_Delete(j);
    sh_stop(&s, SIGTERM);
    free(s.data_dir);
    s.data_dir = NULL;

    /* another embedder (dimension) → resume refused, data untouched */
    const char *other[] = {"--embed-dim", "64", NULL};
    sh_start(&s, dir, other, NULL);
    assert_int_equal(sh_post(&s, "/sessions/fp/resume", NULL, &j), 200);   /* the reference's reply */
    assert_false(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "resumed")));
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(j, "n_chunks")->valueint, 0);
    assert_int_equal(strncmp(cJSON_GetObjectItemCaseSensitive(j, "error")->valuestring, "EmbedderMismatch: ", 18), 0);
    cJSON_Delete(j);
    long stt;
    char *t = top_text(&s, "fp", "quince", &stt);
    assert_int_equal(stt, 409);                       /* never searched with the wrong embedder */
    free(t);
    sh_stop(&s, SIGTERM);
    free(s.data_dir);
    s.data_dir = NULL;

    /* the original embedder: resume works, same fingerprint, same data */
    sh_start(&s, dir, NULL, NULL);
    assert_int_equal(sh_post(&s, "/sessions/fp/resume", NULL, &j), 200);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "resumed")));
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(j, "n_chunks")->valueint, 1);
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(j, "error")));
    cJSON_Delete(j);
    assert_int_equal(sh_get(&s, "/sessions/fp/hibernation-status", &j), 200);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "in_ram")));
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(j, "embedder_fingerprint")->valuestring, fp);
    cJSON_Delete(j);
    t = top_text(&s, "fp", "quince", &stt);
    assert_int_equal(stt, 200);
    assert_string_equal(t, "the orchard harvest yielded eleven crates of quince");
    free(t);
    sh_stop(&s, SIGTERM);
    free(dir);
    sh_cleanup(&s);
}

/* Mixed concurrent traffic: writes, retrieves, hibernates, resumes and status reads on
 * the same sessions from 4 threads. Every call succeeds and every acknowledged chunk is
 * there at the end (catches races between hibernation and in-flight requests). */
typedef struct { sh_server *s; int id; int acked; int bad; } mix_args;

static void *mix_main(void *p)
{
    mix_args *a = p;
    for (int i = 0; i < 60; i++) {
        const char *sid = (i % 3 == 0) ? "mixA" : "mixB";
        char path[128], body[512];
        long st = 0;
        switch ((i + a->id) % 5) {
        case 0:
        case 1:
            snprintf(body, sizeof body, "{\"session_id\":\"%s\",\"chunks\":[{\"text\":\"thread %d op %d walrus\",\"token_range\":[%d,%d]}]}",
                     sid, a->id, i, i, i);
            st = sh_post(a->s, "/evict/write", body, NULL);
            if (st == 200 && !strcmp(sid, "mixA")) a->acked++;
            if (st == 200 && !strcmp(sid, "mixB")) a->acked += 1000;
            break;
        case 2:
            snprintf(body, sizeof body, "{\"session_id\":\"%s\",\"query\":\"walrus op %d\",\"top_k\":4}", sid, i);
            st = sh_post(a->s, "/evict/retrieve", body, NULL);
            break;
        case 3:
            snprintf(path, sizeof path, "/sessions/%s/%s", sid, (i & 1) ? "hibernate" : "resume");
            st = sh_post(a->s, path, NULL, NULL);
            if (st == 404) st = 200;    /* the session may not exist yet */
            break;
        default:
            snprintf(path, sizeof path, "/sessions/%s/hibernation-status", sid);
            st = sh_get(a->s, path, NULL);
            if (st == 404) st = 200;
            break;
        }
        if (st != 200) { fprintf(stderr, "thread %d op %d: HTTP %ld\n", a->id, i, st); a->bad++; }
    }
    return NULL;
}

static void test_concurrent_hibernation_traffic(void **st)
{
    sh_server s;
    const char *extra[] = {"--threads", "4", "--idle-hibernate-s", "0.05", "--janitor-interval-s", "0.05", NULL};
    sh_start(&s, NULL, extra, NULL);
    pthread_t th[4];
    mix_args a[4];
    for (int i = 0; i < 4; i++) {
        a[i] = (mix_args){&s, i, 0, 0};
        pthread_create(&th[i], NULL, mix_main, &a[i]);
    }
    int want_a = 0, want_b = 0;
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(a[i].bad, 0);
        want_a += a[i].acked % 1000;
        want_b += a[i].acked / 1000;
    }
    cJSON *j;
    assert_int_equal(sh_get(&s, "/evict/dump?session_id=mixA", &j), 200);
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(j, "session_total")->valueint, want_a);
    cJSON_Delete(j);
    assert_int_equal(sh_get(&s, "/evict/dump?session_id=mixB", &j), 200);
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(j, "session_total")->valueint, want_b);
    cJSON_Delete(j);
    int w = sh_stop(&s, SIGTERM);
    assert_true(WIFEXITED(w) && WEXITSTATUS(w) == 0);
    sh_cleanup(&s);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_ALL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_janitor_hibernates_idle),
        cmocka_unit_test(test_lru_beyond_max_in_ram),
        cmocka_unit_test(test_lru_beyond_max_mem),
        cmocka_unit_test(test_hibernate_restart_and_fingerprint),
        cmocka_unit_test(test_concurrent_hibernation_traffic),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
