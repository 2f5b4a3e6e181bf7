/* `longctx eval mrcr --upstream`: a fake OpenAI-compatible server (libmicrohttpd, in this
 * process) records what the CLI sends. Checks: the conversation arrives compacted under the
 * budget with the target turn in it (Selector recipe), the model's answer is what gets
 * graded and written to --responses, and a failing upstream is graded 0, not dropped. */
#include "testutil.h"
#include "eval/lcx_eval.h"
#include "util/util.h"
#include <cjson/cJSON.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct { lcx_buf body; } conn_t;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static char *bodies[16];
static int n_bodies;
static int fail_mode;

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                               const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
    conn_t *cc = *con_cls;
    if (!cc) {
        cc = calloc(1, sizeof *cc);
        cc->body.cap = (size_t)256 << 20;
        *con_cls = cc;
        return MHD_YES;
    }
    if (*upload_size) {
        lcx__buf_append(&cc->body, upload, *upload_size);
        *upload_size = 0;
        return MHD_YES;
    }
    pthread_mutex_lock(&mu);
    if (n_bodies < 16) bodies[n_bodies++] = cc->body.data ? strdup(cc->body.data) : strdup("");
    pthread_mutex_unlock(&mu);
    const char *ok = "{\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"MODEL-ANSWER\"}}]}";
    const char *bad = "{\"error\":{\"message\":\"boom\"}}";
    int f = fail_mode || strcmp(url, "/v1/chat/completions") || strcmp(method, "POST");
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(f ? bad : ok), (void *)(f ? bad : ok),
                                                             MHD_RESPMEM_MUST_COPY);
    enum MHD_Result ret = MHD_queue_response(c, f ? 500 : 200, r);
    MHD_destroy_response(r);
    return ret;
}

static void done_cb(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode t)
{
    conn_t *cc = *con_cls;
    if (cc) { lcx__buf_free(&cc->body); free(cc); }
    *con_cls = NULL;
}

static void test_upstream(void **st)
{
    const char *bin = getenv("LCX_BIN");
    char exe[4096], hay[4096];
    snprintf(exe, sizeof exe, "%s/longctx", bin ? bin : ".");
    if (access(exe, X_OK)) { fprintf(stderr, "longctx binary missing: skipped\n"); skip(); }
    snprintf(hay, sizeof hay, "%s", tu_fixture("haystack/paul_graham"));
    int port = tu_free_port();
    struct MHD_Daemon *d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD, (uint16_t)port, NULL, NULL, handler,
                                            NULL, MHD_OPTION_NOTIFY_COMPLETED, done_cb, NULL, MHD_OPTION_END);
    assert_non_null(d);
    char *dir = tu_tmpdir();
    char cmd[16384], *out = NULL;
    snprintf(cmd, sizeof cmd,
             "'%s' eval mrcr-gen --needles 8 --bins 64k --n 2 --seed 9 --out '%s/a.jsonl' --haystack '%s' && "
             "'%s' eval mrcr '%s/a.jsonl' --recipe selector --upstream http://127.0.0.1:%d --model m1 "
             "--budget 4000 --json --responses '%s/r.jsonl'",
             exe, dir, hay, exe, dir, port, dir);
    assert_int_equal(tu_run(cmd, &out), 0);
    cJSON *j = cJSON_Parse(out);
    free(out);
    assert_int_equal(cJSON_GetArraySize(j), 1);
    /* "MODEL-ANSWER" lacks the hash: graded 0, but retrieval still found the target */
    assert_true(cJSON_GetObjectItem(cJSON_GetArrayItem(j, 0), "mean")->valuedouble == 0.0);
    assert_true(cJSON_GetObjectItem(cJSON_GetArrayItem(j, 0), "recall_at_k")->valuedouble == 1.0);
    cJSON_Delete(j);
    assert_int_equal(n_bodies, 2);

    char p[4200];
    snprintf(p, sizeof p, "%s/a.jsonl", dir);
    lcx_mrcr_set set = {0};
    char err[256];
    assert_int_equal(lcx__mrcr_read_jsonl(p, &set, err, sizeof err), 0);
    for (int i = 0; i < 2; i++) {
        cJSON *req = cJSON_Parse(bodies[i]);
        assert_non_null(req);
        assert_string_equal(cJSON_GetObjectItem(req, "model")->valuestring, "m1");
        cJSON *msgs = cJSON_GetObjectItem(req, "messages");
        size_t bytes = 0;
        int has_target = 0;
        cJSON *m;
        const lcx_mrcr_rec *r = &set.recs[i];
        cJSON_ArrayForEach(m, msgs) {
            const char *c = cJSON_GetObjectItem(m, "content")->valuestring;
            bytes += strlen(c);
            if (!strcmp(c, r->msgs[r->desired_msg_index + 1].content)) has_target = 1;
        }
        assert_true(has_target);
        assert_true(bytes / 4 <= 4000);                       /* within the budget estimate */
        assert_true(cJSON_GetArraySize(msgs) < (int)r->n_msgs);
        cJSON *last = cJSON_GetArrayItem(msgs, cJSON_GetArraySize(msgs) - 1);
        assert_string_equal(cJSON_GetObjectItem(last, "content")->valuestring, r->msgs[r->n_msgs - 1].content);
        cJSON_Delete(req);
    }
    lcx__mrcr_set_free(&set);
    char *resp = NULL;
    size_t rl;
    snprintf(p, sizeof p, "%s/r.jsonl", dir);
    assert_int_equal(lcx__read_file(p, 0, &resp, &rl), 0);
    assert_non_null(strstr(resp, "\"response\": \"MODEL-ANSWER\""));
    free(resp);

    /* upstream errors: every record still scored (0) and counted */
    fail_mode = 1;
    snprintf(cmd, sizeof cmd, "'%s' eval mrcr '%s/a.jsonl' --upstream http://127.0.0.1:%d --json 2>/dev/null",
             exe, dir, port);
    out = NULL;
    assert_int_equal(tu_run(cmd, &out), 0);
    j = cJSON_Parse(out);
    free(out);
    assert_int_equal((int)cJSON_GetObjectItem(cJSON_GetArrayItem(j, 0), "n")->valuedouble, 2);
    assert_true(cJSON_GetObjectItem(cJSON_GetArrayItem(j, 0), "mean")->valuedouble == 0.0);
    cJSON_Delete(j);
    MHD_stop_daemon(d);
    for (int i = 0; i < n_bodies; i++) free(bodies[i]);
    tu_rmrf(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_upstream)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
