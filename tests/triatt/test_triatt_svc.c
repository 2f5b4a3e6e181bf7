/* Integration: the rescue bridge against a REAL longctx-svc (started here on a free loopback
 * port), and the `longctx triatt` CLI. Each test skips (cmocka skip) only when its binary is
 * absent from LCX_BIN. */
#define _GNU_SOURCE
#include "testutil.h"
#include "tjson.h"
#include "longctx/triatt.h"
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* word-level "tokenizer": token id = index into words[] */
static const char *WORDS[] = {"the", "routine", "quarterly", "procedure", "required", "careful", "review", "of",
                              "documented", "operational", "records", "during", "assessment", "cycle.",
                              "IMPORTANT:", "Project", "NOVA", "was", "provisioned", "with", "access", "code",
                              "481729.", "All", "technicians", "must", "memorize", "this", "code", "prior", "to",
                              "deployment."};
#define NW ((int)(sizeof WORDS / sizeof WORDS[0]))

static int detok(void *ud, const int32_t *tok, int n, char *out, size_t cap)
{
    size_t len = 0;
    out[0] = 0;
    for (int i = 0; i < n; i++) {
        if (tok[i] < 0 || tok[i] >= NW) return -1;
        size_t k = strlen(WORDS[tok[i]]);
        if (len + k + 2 > cap) return -1;
        if (len) out[len++] = ' ';
        memcpy(out + len, WORDS[tok[i]], k);
        len += k;
        out[len] = 0;
    }
    return (int)len;
}

/* filler sentence tokens 0..13 repeated; the fact (tokens 14..31) planted at `at` */
static int make_doc(int32_t *tok, int n, int at)
{
    for (int i = 0; i < n; i++) tok[i] = i % 14;
    for (int i = 0; i < 18 && at + i < n; i++) tok[at + i] = 14 + i;
    return n;
}

typedef struct { pid_t pid; int port; char *dir; } svc;

static int svc_start(svc *s)
{
    const char *bin = tu_bin("longctx-svc");
    if (access(bin, X_OK) != 0) {
        fprintf(stderr, "longctx-svc not built (%s): skipping\n", bin);
        return -1;
    }
    s->dir = tu_tmpdir();
    s->port = tu_free_port();
    char port[16], log[600], data[600];
    snprintf(port, sizeof port, "%d", s->port);
    snprintf(log, sizeof log, "%s/svc.log", s->dir);
    snprintf(data, sizeof data, "%s/data", s->dir);
    char *argv[] = {(char *)bin, "serve", "--host", "127.0.0.1", "--port", port, "--data-dir", data, NULL};
    s->pid = tu_spawn(argv, NULL, log);
    assert_true(s->pid > 0);
    if (!tu_wait_http(s->port, "/healthz", 20000)) {
        char *out = NULL;
        char cmd[700];
        snprintf(cmd, sizeof cmd, "tail -20 %s", log);
        tu_run(cmd, &out);
        fail_msg("longctx-svc did not come up: %s", out ? out : "");
    }
    return 0;
}

static void svc_stop(svc *s)
{
    if (s->pid > 0) tu_kill_wait(s->pid, SIGTERM, 10000);
    s->pid = 0;
}

static void test_rescue_roundtrip(void **st)
{
    svc s = {0};
    if (svc_start(&s) < 0) skip();
    char ep[64], sess[64];
    snprintf(ep, sizeof ep, "http://127.0.0.1:%d", s.port);
    snprintf(sess, sizeof sess, "triatt-it-%d", (int)getpid());
    triatt_rescue_config c;
    triatt_rescue_config_default(&c);
    c.endpoint = ep; c.session_id = sess; c.detok = detok; c.timeout_ms = 10000;
    triatt_rescue *r = NULL;
    triatt_rescue_init(&c, &r);
    assert_non_null(r);
    enum { N = 4000 };
    int32_t tok[N];
    make_doc(tok, N, 2000);
    /* one round evicts three runs: [300,340), the fact region [1995, 2025), [3500,3510) */
    int32_t pos[200];
    float sc[200];
    int n = 0;
    for (int p = 300; p < 340; p++) pos[n++] = p;
    for (int p = 1995; p < 2025; p++) pos[n++] = p;
    for (int p = 3500; p < 3510; p++) pos[n++] = p;
    for (int i = 0; i < n; i++) sc[i] = 0.5f + i * 0.01f;
    assert_int_equal(triatt_rescue_write_round(r, pos, sc, n, tok, N, 0), 3);
    assert_int_equal(triatt_rescue_flush(r, 20000), 0);
    triatt_rescue_stats stt;
    triatt_rescue_get_stats(r, &stt);
    assert_int_equal(stt.rounds_sent, 1);
    assert_int_equal(stt.spans_sent, 3);
    /* the service holds exactly the widened ranges */
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/evict/dump?session_id=%s", s.port, sess);
    tu_resp resp;
    assert_int_equal(tu_http("GET", url, NULL, 0, NULL, &resp), 0);
    assert_int_equal(resp.status, 200);
    cJSON *j = cJSON_Parse(resp.body);
    assert_non_null(j);
    long nr;
    double *tr = tj_arr(j, "token_ranges", &nr);
    assert_int_equal(nr, 6);
    double want[6] = {268, 372, 1963, 2057, 3468, 3542};
    /* order of the dump is not specified: compare as a set of pairs */
    for (int i = 0; i < 3; i++) {
        int found = 0;
        for (int k = 0; k < 3; k++) found += tr[2 * k] == want[2 * i] && tr[2 * k + 1] == want[2 * i + 1];
        if (found != 1) fail_msg("range [%g,%g) not in the dump (%s)", want[2 * i], want[2 * i + 1], resp.body);
    }
    free(tr);
    cJSON_Delete(j);
    tu_resp_free(&resp);
    /* Tier 3: the question retrieves the planted fact */
    char *text = NULL;
    int k = triatt_rescue_rehydrate(r, "OK\nQuestion: What is the access code for Project NOVA? Answer with only the digits.", &text);
    if (k < 1 || !text || !strstr(text, "481729")) fail_msg("fact not rehydrated (k=%d): %s", k, text ? text : "(null)");
    assert_non_null(strstr(text, "[Recovered context from earlier in this session (evicted from KV cache, restored via longctx)]:\n"));
    assert_non_null(strstr(text, "--- evicted span (tokens 1963..2057, layer 0) ---"));
    assert_true(strlen(text) <= 8000);
    triatt_msg msgs[4] = {{"system", "be brief"}, {"user", "blob"}, {"assistant", "OK"}, {"user", "question"}};
    triatt_msg all[5];
    memcpy(all, msgs, sizeof msgs);
    assert_int_equal(triatt_msgs_insert_rescue(all, 4, 5, text), 5);
    assert_string_equal(all[3].role, "system");
    assert_string_equal(all[4].content, "question");
    free(text);
    /* the service goes away: calls still return, failures are counted */
    svc_stop(&s);
    assert_int_equal(triatt_rescue_write_round(r, pos, sc, 10, tok, N, 0), 1);
    assert_int_equal(triatt_rescue_flush(r, 20000), 0);
    assert_int_equal(triatt_rescue_rehydrate(r, "question: access code?", &text), LCX_ENET);
    triatt_rescue_get_stats(r, &stt);
    assert_int_equal(stt.rounds_failed, 1);
    assert_int_equal(stt.retrieve_failed, 1);
    assert_int_equal(stt.retrieve_ok, 1);
    triatt_rescue_free(r);
    tu_rmrf(s.dir);
    free(s.dir);
}

static void test_cli_replay(void **st)
{
    const char *bin = tu_bin("longctx");
    if (access(bin, X_OK) != 0) {
        fprintf(stderr, "longctx not built (%s): skipping\n", bin);
        skip();
    }
    const char *fx = tu_fixture("triattention/selection.json");
    char cmd[2048], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s triatt replay %s", bin, fx);
    assert_int_equal(tu_run(cmd, &out), 0);
    cJSON *got = cJSON_Parse(out), *want = tj_load(fx);
    assert_non_null(got);
    const cJSON *g = cJSON_GetObjectItem(got, "cases")->child;
    int n = 0;
    for (const cJSON *w = cJSON_GetObjectItem(want, "cases")->child; w; w = w->next, g = g->next, n++) {
        static const char *vn[3] = {"v1", "v2", "v3"};
        for (int v = 0; v < 3; v++) {
            char p[32];
            snprintf(p, sizeof p, "expected.%s", vn[v]);
            long a, b;
            double *x = tj_arr(g, vn[v], &a), *y = tj_arr(w, p, &b);
            assert_int_equal(a, b);
            for (long i = 0; i < a; i++) assert_true(x[i] == y[i]);
            free(x); free(y);
        }
    }
    assert_int_equal(n, 26);
    cJSON_Delete(got); cJSON_Delete(want);
    free(out);
    /* a bad file is a clean error */
    snprintf(cmd, sizeof cmd, "%s triatt replay /nonexistent.json 2>/dev/null", bin);
    out = NULL;
    assert_int_not_equal(tu_run(cmd, &out), 0);
    free(out);
    snprintf(cmd, sizeof cmd, "%s triatt simulate --seeds 3 --tokens 2048 --json", bin);
    out = NULL;
    assert_int_equal(tu_run(cmd, &out), 0);
    cJSON *sj = cJSON_Parse(out);
    assert_non_null(sj);
    assert_int_equal((int)tj_num(sj, "n_seeds"), 3);
    cJSON_Delete(sj);
    free(out);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest t[] = {
        cmocka_unit_test(test_rescue_roundtrip),
        cmocka_unit_test(test_cli_replay),
    };
    return cmocka_run_group_tests(t, NULL, NULL);
}
