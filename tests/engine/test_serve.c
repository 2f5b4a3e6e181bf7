/* longctx-engine serve (src/engine-server): the OpenAI-compatible server run in-process on
 * a free loopback port over a tiny random-weight model, driven with libcurl: /healthz,
 * /v1/models, chat completions (plain and streamed SSE, identical text under greedy), stop
 * strings, session reuse (the second turn prefills only its new tokens), a different
 * conversation under the same key (not taken for the held one), text content parts,
 * OpenAI-shaped errors (malformed JSON, bad sampling values, unknown model, unsupported
 * content parts, context overflow with how many tokens over), queue bound (429), client
 * disconnect, session bounds, V3 rounds in usage, and the binary with --enable-longctx
 * (sidecar up, dies, SIGTERM leaves none; a planted fact evicted in turn 1 comes back in
 * turn 2 through Tier 2/3 against the real longctx-svc it started, and serving goes on
 * after the sidecar is killed mid-run). */
#define _GNU_SOURCE
#include "testutil.h"
#include "eval/lcx_eval.h"
#include "longctx/engine.h"
#include "longctx/engine_server.h"

#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdatomic.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *g_dir;
static eng_model *g_m;
static eng_server *g_srv;
static eng_server *g_main;   /* g_srv is the server http() talks to */

typedef struct { char *p; size_t n; } sbuf;

static size_t on_data(char *d, size_t sz, size_t nm, void *ud)
{
    sbuf *b = ud;
    b->p = realloc(b->p, b->n + sz * nm + 1);
    memcpy(b->p + b->n, d, sz * nm);
    b->n += sz * nm;
    b->p[b->n] = 0;
    return sz * nm;
}

/* One request; returns the status, *out the body (malloc'd), *prefilled the debug header. */
static long http(const char *method, const char *path, const char *body, const char *hdr, char **out)
{
    CURL *c = curl_easy_init();
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", eng_server_port(g_srv), path);
    sbuf b = {calloc(1, 1), 0};
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    if (hdr) h = curl_slist_append(h, hdr);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    if (body) curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    long st = 0;
    if (curl_easy_perform(c) == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &st);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    *out = b.p;
    return st;
}

static cJSON *post_chat(const char *body, const char *hdr, long want_status)
{
    char *r;
    long st = http("POST", "/v1/chat/completions", body, hdr, &r);
    if (st != want_status) fprintf(stderr, "status %ld body %s\n", st, r);
    assert_int_equal(st, want_status);
    cJSON *j = cJSON_Parse(r);
    free(r);
    assert_non_null(j);
    return j;
}

static const char *content_of(const cJSON *j)
{
    const cJSON *m = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0), "message");
    return cJSON_GetObjectItem(m, "content")->valuestring;
}
static int usage_of(const cJSON *j, const char *k)
{
    const cJSON *u = cJSON_GetObjectItem(j, "usage");
    if (!strcmp(k, "cached_tokens")) u = cJSON_GetObjectItem(u, "prompt_tokens_details");
    return cJSON_GetObjectItem(u, k)->valueint;
}

static int setup(void **st)
{
    (void)st;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    g_dir = tu_tmpdir();
    char path[4200];
    snprintf(path, sizeof path, "%s/tiny.gguf", g_dir);
    lcx_ramp_shape sh;
    if (lcx__ramp_model_shape("tiny", &sh) < 0 || lcx__ramp_write_model(path, &sh, 7) < 0) return -1;
    char err[256];
    if (eng_model_load(path, &g_m, err, sizeof err) < 0) return -1;
    eng_server_opts o = eng_server_defaults();
    o.port = 0;
    o.model = g_m;
    o.model_id = "tiny";
    o.session.ctx.n_ctx = 512;
    o.session.max_tokens = 16;
    if (eng_server_start(&o, &g_srv, err, sizeof err) < 0) return -1;
    g_main = g_srv;
    return 0;
}

static int teardown(void **st)
{
    (void)st;
    eng_server_stop(g_srv);
    eng_model_free(g_m);
    tu_rmrf(g_dir);
    free(g_dir);
    curl_global_cleanup();
    return 0;
}

static void test_health_models(void **st)
{
    (void)st;
    char *r;
    assert_int_equal(http("GET", "/healthz", NULL, NULL, &r), 200);
    cJSON *j = cJSON_Parse(r);
    assert_string_equal(cJSON_GetObjectItem(j, "status")->valuestring, "ok");
    cJSON_Delete(j);
    free(r);
    assert_int_equal(http("GET", "/v1/models", NULL, NULL, &r), 200);
    j = cJSON_Parse(r);
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "data"), 0), "id")->valuestring, "tiny");
    cJSON_Delete(j);
    free(r);
    assert_int_equal(http("GET", "/v1/nope", NULL, NULL, &r), 404);
    free(r);
}

static const char *HELLO = "{\"model\":\"tiny\",\"temperature\":0,\"max_tokens\":12,"
                           "\"messages\":[{\"role\":\"user\",\"content\":\"the cat sat on the mat\"}]}";

static void test_chat_plain_and_stream(void **st)
{
    (void)st;
    cJSON *j = post_chat(HELLO, NULL, 200);
    assert_string_equal(cJSON_GetObjectItem(j, "object")->valuestring, "chat.completion");
    const int ct = usage_of(j, "completion_tokens");
    assert_true(ct >= 1 && ct <= 12);
    assert_true(usage_of(j, "prompt_tokens") > 6);
    assert_int_equal(usage_of(j, "cached_tokens"), 0);   /* unkeyed: a fresh session */
    char *plain = strdup(content_of(j));
    cJSON_Delete(j);
    /* streamed: the deltas join to the same text, then a usage chunk and [DONE] */
    char *body = strdup(HELLO);
    char *stream_body;
    assert_true(asprintf(&stream_body, "{\"stream\":true,%s", body + 1) > 0);
    char *r;
    assert_int_equal(http("POST", "/v1/chat/completions", stream_body, NULL, &r), 200);
    size_t cap = strlen(r) + 1;
    char *joined = calloc(1, cap);
    int n_events = 0, usage_ct = -1;
    bool done = false;
    for (char *line = strtok(r, "\n"); line; line = strtok(NULL, "\n")) {
        assert_true(!strncmp(line, "data: ", 6));
        if (!strcmp(line + 6, "[DONE]")) { done = true; continue; }
        assert_false(done);
        cJSON *e = cJSON_Parse(line + 6);
        assert_non_null(e);
        assert_string_equal(cJSON_GetObjectItem(e, "object")->valuestring, "chat.completion.chunk");
        const cJSON *d = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(e, "choices"), 0), "delta");
        const cJSON *ctn = cJSON_GetObjectItem(d, "content");
        if (ctn) strcat(joined, ctn->valuestring);
        if (cJSON_GetObjectItem(e, "usage")) usage_ct = usage_of(e, "completion_tokens");
        cJSON_Delete(e);
        n_events++;
    }
    assert_true(done);
    assert_true(n_events >= 2);
    assert_string_equal(joined, plain);
    assert_int_equal(usage_ct, ct);
    free(joined);
    free(r);
    free(stream_body);
    free(body);
    free(plain);
}

static void test_stop(void **st)
{
    (void)st;
    const char *b = "{\"temperature\":0,\"max_tokens\":16,\"messages\":[{\"role\":\"user\",\"content\":\"one two three\"}]}";
    cJSON *j = post_chat(b, NULL, 200);
    const char *full = content_of(j);
    const size_t fl = strlen(full);
    assert_true(fl >= 8);
    /* a stop string from the middle of the greedy reply: the reply ends before its first
     * occurrence, and generation ends early */
    char stop[4] = {full[fl / 2], full[fl / 2 + 1], full[fl / 2 + 2], 0};
    const size_t cut = (size_t)(strstr(full, stop) - full);
    cJSON *sj = cJSON_Parse(b);
    cJSON_AddStringToObject(sj, "stop", stop);
    char *sb = cJSON_PrintUnformatted(sj);
    cJSON *j2 = post_chat(sb, NULL, 200);
    assert_int_equal(strlen(content_of(j2)), cut);
    assert_memory_equal(content_of(j2), full, cut);
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j2, "choices"), 0), "finish_reason")->valuestring, "stop");
    assert_true(usage_of(j2, "completion_tokens") < usage_of(j, "completion_tokens"));
    cJSON_Delete(j2);
    free(sb);
    cJSON_Delete(sj);
    cJSON_Delete(j);
}

/* Two turns of one keyed session (each of the key sources): the second request resends the
 * history, and only its new tokens are prefilled. */
static void two_turns(const char *key_field, const char *hdr)
{
    char *b1;
    assert_true(asprintf(&b1, "{%s\"temperature\":0,\"max_tokens\":6,\"messages\":[{\"role\":\"user\",\"content\":\"red green blue\"}]}",
                         key_field) > 0);
    cJSON *j1 = post_chat(b1, hdr, 200);
    const int p1 = usage_of(j1, "prompt_tokens"), c1 = usage_of(j1, "completion_tokens");
    assert_int_equal(usage_of(j1, "cached_tokens"), 0);
    cJSON *req = cJSON_Parse(b1);
    cJSON *msgs = cJSON_GetObjectItem(req, "messages"), *a = cJSON_CreateObject(), *u = cJSON_CreateObject();
    cJSON_AddStringToObject(a, "role", "assistant");
    cJSON_AddStringToObject(a, "content", content_of(j1));
    cJSON_AddItemToArray(msgs, a);
    cJSON_AddStringToObject(u, "role", "user");
    cJSON_AddStringToObject(u, "content", "and yellow");
    cJSON_AddItemToArray(msgs, u);
    char *b2 = cJSON_PrintUnformatted(req);
    cJSON *j2 = post_chat(b2, hdr, 200);
    const int p2 = usage_of(j2, "prompt_tokens"), cached = usage_of(j2, "cached_tokens");
    /* turn 1's whole prompt is reused (its reply may re-tokenize differently under a
     * random-weight model, so those tokens can be prefilled again) */
    assert_true(cached >= p1);
    assert_true(cached < p2);
    assert_true(p2 - cached <= p2 - p1);
    assert_true(c1 >= 1);
    cJSON_Delete(j2);
    free(b2);
    cJSON_Delete(req);
    cJSON_Delete(j1);
    free(b1);
}

static void test_sessions(void **st)
{
    (void)st;
    two_turns("\"session_id\":\"s-body\",", NULL);
    two_turns("", "x-session-affinity: s-aff");
    two_turns("", "x-session-id: s-id");
    two_turns("\"user\":\"alice\",", NULL);
    assert_int_equal(eng_server_n_sessions(g_srv), 4);
}

static void expect_error(const char *body, long status, const char *code)
{
    cJSON *j = post_chat(body, NULL, status);
    const cJSON *e = cJSON_GetObjectItem(j, "error");
    assert_non_null(e);
    assert_string_equal(cJSON_GetObjectItem(e, "code")->valuestring, code);
    assert_true(cJSON_IsString(cJSON_GetObjectItem(e, "type")));
    assert_true(strlen(cJSON_GetObjectItem(e, "message")->valuestring) > 5);
    cJSON_Delete(j);
}

/* Text content parts are the joined string: the same prompt and the same greedy reply.
 * Other part types are refused with an OpenAI-shaped 400. */
static void test_content_parts(void **st)
{
    (void)st;
    cJSON *a = post_chat("{\"temperature\":0,\"max_tokens\":8,\"messages\":[{\"role\":\"user\",\"content\":\"the cat\\nsat on the mat\"}]}",
                         NULL, 200);
    cJSON *b = post_chat("{\"temperature\":0,\"max_tokens\":8,\"messages\":[{\"role\":\"user\",\"content\":["
                         "{\"type\":\"text\",\"text\":\"the cat\"},{\"type\":\"text\",\"text\":\"sat on the mat\"}]}]}",
                         NULL, 200);
    assert_int_equal(usage_of(a, "prompt_tokens"), usage_of(b, "prompt_tokens"));
    assert_string_equal(content_of(a), content_of(b));
    cJSON_Delete(a);
    cJSON_Delete(b);
    /* a single part in a system message */
    cJSON *c = post_chat("{\"max_tokens\":2,\"messages\":[{\"role\":\"system\",\"content\":[{\"type\":\"text\",\"text\":\"be brief\"}]},"
                         "{\"role\":\"user\",\"content\":\"hi\"}]}", NULL, 200);
    cJSON_Delete(c);
    const char *bad[] = {
        "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":{\"url\":\"http://x/y.png\"}}]}]}",
        "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"input_audio\"}]}]}",
        "{\"messages\":[{\"role\":\"user\",\"content\":[]}]}",
        "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\"}]}]}",
        "{\"messages\":[{\"role\":\"user\",\"content\":[{\"text\":\"a\"}]}]}",
        "{\"messages\":[{\"role\":\"user\",\"content\":[\"a\"]}]}",
        "{\"messages\":[{\"role\":\"user\",\"content\":7}]}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        cJSON *j = post_chat(bad[i], NULL, 400);
        const cJSON *e = cJSON_GetObjectItem(j, "error");
        assert_string_equal(cJSON_GetObjectItem(e, "code")->valuestring, "invalid_messages");
        assert_string_equal(cJSON_GetObjectItem(e, "type")->valuestring, "invalid_request_error");
        if (i < 2) assert_non_null(strstr(cJSON_GetObjectItem(e, "message")->valuestring, i ? "input_audio" : "image_url"));
        cJSON_Delete(j);
    }
}

static double health(const char *k);

/* A SentencePiece model (stories260K): the reply the server sends, plain and streamed, is
 * the text ChatSession returns for the same greedy turn (the streamed pieces keep their
 * spaces; only the reply's first piece drops the dummy-prefix space). */
static void test_spm_reply_text(void **st)
{
    (void)st;
    const char *path = tu_fixture("gguf/stories260K.gguf");
    eng_model *m;
    char err[256];
    assert_int_equal(eng_model_load(path, &m, err, sizeof err), 0);
    eng_session_params sp = eng_session_default_params();
    sp.ctx.n_ctx = 512;
    eng_session *ss;
    assert_int_equal(eng_session_init(m, &sp, &ss, err, sizeof err), 0);
    const eng_turn_opts to = {.max_tokens = 24};
    char *want = NULL;
    assert_true(eng_session_respond_ex(ss, "Once upon a time", &to, &want) > 0);
    eng_session_free(ss);
    assert_non_null(strchr(want, ' '));
    eng_server_opts o = eng_server_defaults();
    o.model = m;
    o.session = sp;
    assert_int_equal(eng_server_start(&o, &g_srv, err, sizeof err), 0);
    const char *b = "{\"max_tokens\":24,\"temperature\":0,\"messages\":[{\"role\":\"user\",\"content\":\"Once upon a time\"}]}";
    cJSON *j = post_chat(b, NULL, 200);
    assert_string_equal(content_of(j), want);
    cJSON_Delete(j);
    char *sb, *r;
    assert_true(asprintf(&sb, "{\"stream\":true,%s", b + 1) > 0);
    assert_int_equal(http("POST", "/v1/chat/completions", sb, NULL, &r), 200);
    char *joined = calloc(1, strlen(r) + 1);
    for (char *line = strtok(r, "\n"); line; line = strtok(NULL, "\n")) {
        if (strncmp(line, "data: {", 7)) continue;
        cJSON *e = cJSON_Parse(line + 6);
        const cJSON *c = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(e, "choices"), 0), "delta"), "content");
        if (c) strcat(joined, c->valuestring);
        cJSON_Delete(e);
    }
    assert_string_equal(joined, want);
    free(joined);
    free(r);
    free(sb);
    free(want);
    eng_server_stop(g_srv);
    g_srv = g_main;
    eng_model_free(m);
}

/* One key, two conversations of the same length: the second is not taken for the first
 * (its reply and prompt are those of a fresh session with the same messages). */
static void test_same_key_other_conversation(void **st)
{
    (void)st;
    const char *b1 = "{\"session_id\":\"conv\",\"temperature\":0,\"max_tokens\":6,\"messages\":[{\"role\":\"user\",\"content\":\"red green blue\"}]}";
    cJSON *j1 = post_chat(b1, NULL, 200);
    /* conversation B: three messages, as many as turn 2 of A would send */
    const char *bb = "\"temperature\":0,\"max_tokens\":6,\"messages\":[{\"role\":\"user\",\"content\":\"one two three four\"},"
                     "{\"role\":\"assistant\",\"content\":\"five six\"},{\"role\":\"user\",\"content\":\"seven\"}]}";
    char *keyed, *fresh;
    assert_true(asprintf(&keyed, "{\"session_id\":\"conv\",%s", bb) > 0);
    assert_true(asprintf(&fresh, "{%s", bb) > 0);
    const double resets0 = health("sessions_reset");
    cJSON *jk = post_chat(keyed, NULL, 200), *jf = post_chat(fresh, NULL, 200);
    assert_int_equal(usage_of(jk, "prompt_tokens"), usage_of(jf, "prompt_tokens"));
    assert_string_equal(content_of(jk), content_of(jf));
    assert_int_equal(usage_of(jk, "cached_tokens"), 0);
    assert_true(health("sessions_reset") == resets0 + 1);
    /* and B goes on as a held conversation: its next turn reuses B's prompt */
    cJSON *req = cJSON_Parse(keyed);
    cJSON *msgs = cJSON_GetObjectItem(req, "messages"), *a = cJSON_CreateObject(), *u = cJSON_CreateObject();
    cJSON_AddStringToObject(a, "role", "assistant");
    cJSON_AddStringToObject(a, "content", content_of(jk));
    cJSON_AddItemToArray(msgs, a);
    cJSON_AddStringToObject(u, "role", "user");
    cJSON_AddStringToObject(u, "content", "eight");
    cJSON_AddItemToArray(msgs, u);
    char *b3 = cJSON_PrintUnformatted(req);
    cJSON *j3 = post_chat(b3, NULL, 200);
    assert_true(usage_of(j3, "cached_tokens") >= usage_of(jk, "prompt_tokens"));
    cJSON_Delete(j3);
    free(b3);
    cJSON_Delete(req);
    cJSON_Delete(jk);
    cJSON_Delete(jf);
    cJSON_Delete(j1);
    free(keyed);
    free(fresh);
}

static void test_errors(void **st)
{
    (void)st;
    expect_error("{\"messages\":[", 400, "invalid_json");
    expect_error("[1,2]", 400, "invalid_json");
    expect_error("{\"messages\":[]}", 400, "invalid_messages");
    expect_error("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"temperature\":5}", 400, "invalid_value");
    expect_error("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"top_p\":0}", 400, "invalid_value");
    expect_error("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":0}", 400, "invalid_value");
    expect_error("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stop\":[1]}", 400, "invalid_value");
    expect_error("{\"model\":\"gpt-9\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", 404, "model_not_found");
    expect_error("{\"messages\":[{\"role\":\"assistant\",\"content\":\"x\"}]}", 400, "invalid_messages");
    /* a message far longer than the 512-token context */
    size_t n = 20000;
    char *big = malloc(n + 200);
    int k = sprintf(big, "{\"messages\":[{\"role\":\"user\",\"content\":\"");
    for (size_t i = 0; i < n / 4; i++) k += sprintf(big + k, "cat ");
    strcpy(big + k, "\"}]}");
    expect_error(big, 400, "context_length_exceeded");
    free(big);
    /* the message says how many tokens over: the prompt size a larger context reports,
     * minus this one's 512 (a prompt a little over, so the larger context's prefill is
     * cheap) */
    big = malloc(4000);
    k = sprintf(big, "{\"messages\":[{\"role\":\"user\",\"content\":\"");
    for (int i = 0; i < 300; i++) k += sprintf(big + k, "cat ");
    strcpy(big + k, "\"}]}");
    eng_server_opts o = eng_server_defaults();
    o.model = g_m;
    o.session.ctx.n_ctx = 1024;
    o.session.max_tokens = 1;
    char err[256];
    eng_server *wide;
    assert_int_equal(eng_server_start(&o, &wide, err, sizeof err), 0);
    g_srv = wide;
    cJSON *w = post_chat(big, NULL, 200);
    const int need = usage_of(w, "prompt_tokens");
    cJSON_Delete(w);
    eng_server_stop(wide);
    g_srv = g_main;
    assert_true(need > 512);
    cJSON *e = post_chat(big, NULL, 400);
    const char *msg = cJSON_GetObjectItem(cJSON_GetObjectItem(e, "error"), "message")->valuestring;
    char want[128];
    snprintf(want, sizeof want, "resulted in %d tokens: %d over", need, need - 512);
    if (!strstr(msg, want)) fprintf(stderr, "message: %s\nwant: %s\n", msg, want);
    assert_non_null(strstr(msg, want));
    assert_non_null(strstr(msg, "512"));
    cJSON_Delete(e);
    free(big);
    /* the server still serves */
    cJSON *j = post_chat(HELLO, NULL, 200);
    cJSON_Delete(j);
}

/* POST /v1/completions: raw prompt, choices[0].text, streamed the same; stop honoured. */
static void test_completions(void **st)
{
    (void)st;
    const char *b = "{\"prompt\":\"the cat sat on\",\"max_tokens\":12,\"temperature\":0}";
    char *r;
    assert_int_equal(http("POST", "/v1/completions", b, NULL, &r), 200);
    cJSON *j = cJSON_Parse(r);
    free(r);
    assert_string_equal(cJSON_GetObjectItem(j, "object")->valuestring, "text_completion");
    const char *full = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0), "text")->valuestring;
    assert_true(usage_of(j, "completion_tokens") >= 1);
    assert_true(usage_of(j, "prompt_tokens") >= 4);
    const char *sb = "{\"stream\":true,\"prompt\":\"the cat sat on\",\"max_tokens\":12,\"temperature\":0}";
    assert_int_equal(http("POST", "/v1/completions", sb, NULL, &r), 200);
    char *joined = calloc(1, strlen(r) + 1);
    for (char *line = strtok(r, "\n"); line; line = strtok(NULL, "\n")) {
        if (strncmp(line, "data: {", 7)) continue;
        cJSON *e = cJSON_Parse(line + 6);
        const cJSON *t = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(e, "choices"), 0), "text");
        if (t) strcat(joined, t->valuestring);
        cJSON_Delete(e);
    }
    assert_string_equal(joined, full);
    free(joined);
    free(r);
    cJSON_Delete(j);
    assert_int_equal(http("POST", "/v1/completions", "{\"prompt\":3}", NULL, &r), 400);
    assert_non_null(strstr(r, "invalid_prompt"));
    free(r);
}

/* ---- queue and disconnect: a second server whose prefill waits on a gate ---- */

static pthread_mutex_t g_gmu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_gcv = PTHREAD_COND_INITIALIZER;
static bool g_gate_open;
static atomic_int g_in_prefill;
static int g_prefill_total[8];

static void gate(void *ud, int done, int total)
{
    (void)ud; (void)done;
    const int k = atomic_fetch_add(&g_in_prefill, 1);
    if (k < 8) g_prefill_total[k] = total;   /* which request prefills when (by its length) */
    pthread_mutex_lock(&g_gmu);
    while (!g_gate_open) pthread_cond_wait(&g_gcv, &g_gmu);
    pthread_mutex_unlock(&g_gmu);
}

static void gate_set(bool open)
{
    pthread_mutex_lock(&g_gmu);
    g_gate_open = open;
    pthread_cond_broadcast(&g_gcv);
    pthread_mutex_unlock(&g_gmu);
}

static double health(const char *k)
{
    char *r;
    assert_int_equal(http("GET", "/healthz", NULL, NULL, &r), 200);
    cJSON *j = cJSON_Parse(r);
    double v = cJSON_GetObjectItem(j, k)->valuedouble;
    cJSON_Delete(j);
    free(r);
    return v;
}

static void wait_health(const char *k, double want)
{
    for (int i = 0; i < 3000 && health(k) != want; i++) usleep(1000);
    if (health(k) != want) fprintf(stderr, "%s = %g, want %g\n", k, health(k), want);
    assert_true(health(k) == want);
}

static atomic_int g_order;
typedef struct { const char *sid, *msg; long st; int order; } qreq;

static void *q_thread(void *arg)
{
    qreq *q = arg;
    char *b, *r;
    assert_true(asprintf(&b, "{\"session_id\":\"%s\",\"max_tokens\":2,\"messages\":[{\"role\":\"user\",\"content\":\"%s\"}]}", q->sid, q->msg) > 0);
    q->st = http("POST", "/v1/chat/completions", b, NULL, &r);
    q->order = atomic_fetch_add(&g_order, 1);
    free(r);
    free(b);
    return NULL;
}

static eng_server *gated_server(int max_queue)
{
    eng_server_opts o = eng_server_defaults();
    o.model = g_m;
    o.model_id = "tiny";
    o.session.ctx.n_ctx = 512;
    o.max_queue = max_queue;
    o.session.on_prefill = gate;
    eng_server *s;
    char err[256];
    assert_int_equal(eng_server_start(&o, &s, err, sizeof err), 0);
    return s;
}

/* One runs, one waits (max_queue 1), the third gets 429; the two are served in order. */
static void test_queue(void **st)
{
    (void)st;
    g_srv = gated_server(1);
    gate_set(false);
    atomic_store(&g_in_prefill, 0);
    qreq a = {"qa", "hi", 0, 0}, b = {"qb", "hello there my good old friend", 0, 0};
    pthread_t ta, tb;
    pthread_create(&ta, NULL, q_thread, &a);
    while (atomic_load(&g_in_prefill) == 0) usleep(1000);   /* a holds the turn */
    pthread_create(&tb, NULL, q_thread, &b);
    wait_health("queue", 2);
    cJSON *j = post_chat(HELLO, NULL, 429);
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "error"), "code")->valuestring, "queue_full");
    cJSON_Delete(j);
    gate_set(true);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    assert_int_equal(a.st, 200);
    assert_int_equal(b.st, 200);
    /* served in arrival order: a's (shorter) prompt was prefilled first, then b's */
    assert_int_equal(atomic_load(&g_in_prefill), 2);
    assert_true(g_prefill_total[0] < g_prefill_total[1]);
    assert_true(health("rejected") == 1);
    eng_server_stop(g_srv);
    g_srv = g_main;
}

/* When armed, the second token waits until the client has left (its first token's event
 * went out before), so generation cannot finish before the disconnect. */
/* Session bounds: beyond max_sessions the least recently used goes; idle ones are released
 * when the next request starts. */
static void keyed_hi(const char *key)
{
    char *b;
    assert_true(asprintf(&b, "{\"session_id\":\"%s\",\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", key) > 0);
    cJSON *j = post_chat(b, NULL, 200);
    cJSON_Delete(j);
    free(b);
}

static void test_session_limits(void **st)
{
    (void)st;
    eng_server_opts o = eng_server_defaults();
    o.model = g_m;
    o.session.ctx.n_ctx = 256;
    o.max_sessions = 2;
    o.idle_s = 1;
    char err[256];
    assert_int_equal(eng_server_start(&o, &g_srv, err, sizeof err), 0);
    keyed_hi("a");
    keyed_hi("b");
    assert_int_equal(eng_server_n_sessions(g_srv), 2);
    keyed_hi("c");                                   /* "a" (least recent) goes */
    assert_int_equal(eng_server_n_sessions(g_srv), 2);
    usleep(1100 * 1000);                             /* past idle_s: b and c are idle */
    cJSON *j = post_chat(HELLO + 0, NULL, 404);      /* model "tiny" unknown here: no turn */
    cJSON_Delete(j);
    assert_int_equal(eng_server_n_sessions(g_srv), 2);
    j = post_chat("{\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", NULL, 200);
    cJSON_Delete(j);
    assert_int_equal(eng_server_n_sessions(g_srv), 0);   /* released by the next turn */
    eng_server_stop(g_srv);
    g_srv = g_main;
}

/* V3 on (no endpoint): a long first turn evicts, and usage.longctx reports the rounds. */
static void test_v3_usage(void **st)
{
    (void)st;
    triatt_config tc;
    triatt_config_default(&tc);
    tc.enabled = true;
    tc.budget = 96;
    tc.warmup = 128;
    tc.window = 32;
    tc.prefix = 16;
    tc.endpoint[0] = 0;
    eng_server_opts o = eng_server_defaults();
    o.model = g_m;
    o.session.ctx.n_ctx = 2048;
    o.session.triatt = &tc;
    char err[256];
    assert_int_equal(eng_server_start(&o, &g_srv, err, sizeof err), 0);
    char *big = malloc(8000);
    int k = sprintf(big, "{\"max_tokens\":2,\"messages\":[{\"role\":\"user\",\"content\":\"");
    for (int i = 0; i < 300; i++) k += sprintf(big + k, "dog ");
    strcpy(big + k, "\"}]}");
    cJSON *j = post_chat(big, NULL, 200);
    const cJSON *l = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "usage"), "longctx");
    assert_non_null(l);
    assert_true(cJSON_GetObjectItem(l, "evict_rounds")->valuedouble > 0);
    assert_true(cJSON_GetObjectItem(l, "cells_evicted")->valuedouble > 0);
    cJSON_Delete(j);
    free(big);
    eng_server_stop(g_srv);
    g_srv = g_main;
}

static atomic_bool g_armed, g_gone;
static atomic_int g_tokens;
static void hold_token(void *ud)
{
    (void)ud;
    if (atomic_load(&g_armed) && atomic_fetch_add(&g_tokens, 1) == 1)
        while (!atomic_load(&g_gone)) usleep(1000);
}

static size_t abort_after_first(char *d, size_t sz, size_t nm, void *ud)
{
    (void)d; (void)sz; (void)nm;
    int *n = ud;
    (*n)++;
    return 0;    /* curl aborts the transfer and closes */
}

/* One request whose client leaves after the first token is generated: streamed, it aborts on
 * the first bytes; not streamed, it times out. The token hook holds generation until the
 * client is gone. Returns the tokens generated from then on, once the server counted the
 * request as cancelled (the n_cancelled-th) and the queue is empty. */
static double leave_early(const char *url, bool stream, double n_cancelled)
{
    const double gen0 = health("generated_tokens");
    atomic_store(&g_gone, false);
    atomic_store(&g_tokens, 0);
    atomic_store(&g_armed, true);
    CURL *c = curl_easy_init();
    int n = 0;
    curl_easy_setopt(c, CURLOPT_URL, url);
    if (stream) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, "{\"stream\":true,\"session_id\":\"dc\",\"max_tokens\":400,\"temperature\":0,"
                                                "\"messages\":[{\"role\":\"user\",\"content\":\"go\"}]}");
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, abort_after_first);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, &n);
        assert_int_equal(curl_easy_perform(c), CURLE_WRITE_ERROR);
    } else {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, "{\"max_tokens\":400,\"temperature\":0,"
                                                "\"messages\":[{\"role\":\"user\",\"content\":\"go\"}]}");
        curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 300L);
        assert_int_equal(curl_easy_perform(c), CURLE_OPERATION_TIMEDOUT);
    }
    curl_easy_cleanup(c);
    atomic_store(&g_gone, true);
    wait_health("cancelled", n_cancelled);
    wait_health("queue", 0);
    atomic_store(&g_armed, false);
    return health("generated_tokens") - gen0;
}

/* A client that goes away, streamed or not: generation stops (cancelled, far short of
 * max_tokens), and the server goes on serving. */
static void test_disconnect(void **st)
{
    (void)st;
    gate_set(true);
    eng_server_opts o = eng_server_defaults();
    o.model = g_m;
    o.model_id = "tiny";
    o.session.ctx.n_ctx = 512;
    o.on_token = hold_token;
    char err[256];
    assert_int_equal(eng_server_start(&o, &g_srv, err, sizeof err), 0);
    /* the same request, not cut: how long the greedy reply runs */
    cJSON *full = post_chat("{\"max_tokens\":400,\"temperature\":0,\"messages\":[{\"role\":\"user\",\"content\":\"go\"}]}", NULL, 200);
    const int n_full = usage_of(full, "completion_tokens");
    cJSON_Delete(full);
    assert_true(n_full > 100);
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/chat/completions", eng_server_port(g_srv));
    /* generation stopped soon after the client left */
    const double cut = leave_early(url, true, 1);
    fprintf(stderr, "disconnect: %d tokens uncut, %.0f after the client left\n", n_full, cut);
    assert_true(cut >= 1 && cut < n_full / 2);
    const double cut2 = leave_early(url, false, 2);
    fprintf(stderr, "disconnect (not streamed): %.0f tokens after the client left\n", cut2);
    assert_true(cut2 >= 1 && cut2 < n_full / 2);
    cJSON *j = post_chat(HELLO, NULL, 200);
    cJSON_Delete(j);
    eng_server_stop(g_srv);
    g_srv = g_main;
}

/* Children of pid (from /proc), up to cap. */
static int children(pid_t pid, pid_t *out, int cap)
{
    DIR *d = opendir("/proc");
    struct dirent *e;
    int n = 0;
    while (d && (e = readdir(d)) && n < cap) {
        char p[300], buf[512];
        snprintf(p, sizeof p, "/proc/%s/stat", e->d_name);
        FILE *f = fopen(p, "r");
        if (!f) continue;
        size_t k = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[k] = 0;
        char *rp = strrchr(buf, ')');
        int ppid = 0;
        if (rp && sscanf(rp + 2, "%*c %d", &ppid) == 1 && ppid == pid) out[n++] = (pid_t)atoi(e->d_name);
    }
    if (d) closedir(d);
    return n;
}

/* The binary: longctx-engine serve --enable-longctx starts longctx-svc, rescue is on in
 * /healthz, a chat is served, and SIGTERM stops both (no longctx-svc process left). */
static void test_cli_enable_longctx(void **st)
{
    (void)st;
    const char *eng = tu_bin("longctx-engine"), *svc = tu_bin("longctx-svc");
    if (access(eng, X_OK) || access(svc, X_OK)) skip();
    char model[4300], logp[4300], env_svc[4400], env_home[4400], env_xdg[4400], port_s[16];
    snprintf(model, sizeof model, "%s/tiny.gguf", g_dir);
    snprintf(logp, sizeof logp, "%s/serve.log", g_dir);
    snprintf(env_svc, sizeof env_svc, "LONGCTX_SVC=%s", svc);
    snprintf(env_home, sizeof env_home, "HOME=%s", g_dir);
    snprintf(env_xdg, sizeof env_xdg, "XDG_DATA_HOME=%s/data", g_dir);
    const int port = tu_free_port();
    snprintf(port_s, sizeof port_s, "%d", port);
    char *argv[] = {(char *)eng, "serve", "-m", model, "--port", port_s, "-c", "1024", "--model-id", "tiny",
                    "--enable-longctx", "--triatt-budget", "256", NULL};
    char *env[] = {env_svc, env_home, env_xdg, NULL};
    pid_t pid = tu_spawn(argv, env, logp);
    assert_true(pid > 0);
    assert_true(tu_wait_http(port, "/healthz", 60000));
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/healthz", port);
    tu_resp r;
    tu_http("GET", url, NULL, 0, NULL, &r);
    assert_non_null(strstr(r.body, "\"rescue\":true"));
    tu_resp_free(&r);
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/chat/completions", port);
    const char *b = "{\"model\":\"tiny\",\"max_tokens\":3,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";
    tu_http("POST", url, b, strlen(b), NULL, &r);
    assert_int_equal(r.status, 200);
    tu_resp_free(&r);
    pid_t kids[8];
    const int nk = children(pid, kids, 8);
    assert_int_equal(nk, 1);   /* the sidecar */
    /* the sidecar dies: /healthz says rescue is off, chats are still served */
    kill(kids[0], SIGKILL);
    snprintf(url, sizeof url, "http://127.0.0.1:%d/healthz", port);
    bool off = false;
    for (int i = 0; i < 200 && !off; i++) {
        tu_http("GET", url, NULL, 0, NULL, &r);
        off = r.body && strstr(r.body, "\"rescue\":false") && strstr(r.body, "\"rescue_lost\":1");
        tu_resp_free(&r);
        if (!off) usleep(50000);
    }
    assert_true(off);
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/chat/completions", port);
    const char *b2 = "{\"session_id\":\"k\",\"max_tokens\":3,\"messages\":[{\"role\":\"user\",\"content\":\"still there?\"}]}";
    tu_http("POST", url, b2, strlen(b2), NULL, &r);
    assert_int_equal(r.status, 200);
    tu_resp_free(&r);
    int ws = tu_kill_wait(pid, SIGTERM, 20000);
    assert_true(ws >= 0 && WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
    assert_int_equal(kill(kids[0], 0), -1);
    assert_int_equal(errno, ESRCH);
}

/* ---- rescue through the server: the binary, --enable-longctx, V3 with a small budget ---- */

typedef struct { int port; const char *body; long st; char *reply; } async_req;

static void *post_async(void *arg)
{
    async_req *a = arg;
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/chat/completions", a->port);
    tu_resp r;
    tu_http("POST", url, a->body, strlen(a->body), NULL, &r);
    a->st = r.status;
    a->reply = r.body ? strdup(r.body) : NULL;
    tu_resp_free(&r);
    return NULL;
}

static cJSON *chat_at(int port, const char *body)
{
    async_req a = {port, body, 0, NULL};
    post_async(&a);
    if (a.st != 200) fprintf(stderr, "status %ld: %s\n", a.st, a.reply ? a.reply : "");
    assert_int_equal(a.st, 200);
    cJSON *j = cJSON_Parse(a.reply);
    free(a.reply);
    assert_non_null(j);
    return j;
}

static const cJSON *longctx_of(const cJSON *j)
{
    const cJSON *l = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "usage"), "longctx");
    assert_non_null(l);
    return l;
}
static bool probe_of(const cJSON *j, const char *k)
{
    const cJSON *p = cJSON_GetObjectItem(longctx_of(j), "probe");
    assert_non_null(p);
    return cJSON_IsTrue(cJSON_GetObjectItem(p, k));
}

/* Turn 1 plants the fact in a long blob and V3 evicts it (it is in the conversation but
 * not in the cache); turn 2 asks for it and Tier 3 against the longctx-svc the server
 * started brings it back (the rescue message holds it: cache-level recall). Prepopulate is
 * off, so what comes back came from the Tier-2 spans of the rounds. Then the sidecar is
 * killed while a long turn runs: that turn and the next are served, /healthz says rescue
 * is off. */
static void test_cli_rescue_through_server(void **st)
{
    (void)st;
    const char *eng = tu_bin("longctx-engine"), *svc = tu_bin("longctx-svc");
    if (access(eng, X_OK) || access(svc, X_OK)) skip();
    char model[4300], logp[4300], data[4300], env_svc[4400], port_s[16];
    snprintf(model, sizeof model, "%s/tiny.gguf", g_dir);
    snprintf(logp, sizeof logp, "%s/serve-rescue.log", g_dir);
    snprintf(data, sizeof data, "%s/svc-rescue", g_dir);
    snprintf(env_svc, sizeof env_svc, "LONGCTX_SVC=%s", svc);
    const int port = tu_free_port();
    snprintf(port_s, sizeof port_s, "%d", port);
    char *argv[] = {(char *)eng, "serve", "-m", model, "--port", port_s, "-c", "1200", "-b", "64", "-n", "4",
                    "--model-id", "tiny", "--enable-longctx", "--longctx-data-dir", data, "--prepopulate", "0",
                    "--rescue", "two-turn", "--triatt-budget", "700", "--triatt-warmup", "128", "--triatt-window", "64",
                    "--triatt-prefix", "16", NULL};
    char *env[] = {env_svc, NULL};
    pid_t pid = tu_spawn(argv, env, logp);
    assert_true(pid > 0);
    assert_true(tu_wait_http(port, "/healthz", 60000));
    pid_t kids[8];
    assert_int_equal(children(pid, kids, 8), 1);

    cJSON *t1 = cJSON_CreateObject(), *msgs = cJSON_AddArrayToObject(t1, "messages"), *u1 = cJSON_CreateObject();
    cJSON_AddStringToObject(t1, "session_id", "rescue-e2e");
    cJSON_AddNumberToObject(t1, "temperature", 0);
    cJSON_AddStringToObject(t1, "longctx_probe", LCX_RAMP_FACT);
    char *blob = lcx__ramp_blob(80, 0.5, 1), *m1;
    assert_true(asprintf(&m1, "%s\n\n%s", blob, LCX_RAMP_TURN1_ASK) > 0);
    cJSON_AddStringToObject(u1, "role", "user");
    cJSON_AddStringToObject(u1, "content", m1);
    cJSON_AddItemToArray(msgs, u1);
    char *b1 = cJSON_PrintUnformatted(t1);
    cJSON *r1 = chat_at(port, b1);
    /* turn 1: rounds fired and took the fact's cells */
    assert_true(cJSON_GetObjectItem(longctx_of(r1), "evict_rounds")->valuedouble > 0);
    assert_true(probe_of(r1, "found"));
    assert_false(probe_of(r1, "in_cache"));
    assert_false(probe_of(r1, "recall"));

    /* turn 2: the history as the client has it, then the question */
    cJSON *a1 = cJSON_CreateObject(), *u2 = cJSON_CreateObject();
    cJSON_AddStringToObject(a1, "role", "assistant");
    cJSON_AddStringToObject(a1, "content", content_of(r1));
    cJSON_AddItemToArray(msgs, a1);
    cJSON_AddStringToObject(u2, "role", "user");
    cJSON_AddStringToObject(u2, "content", LCX_RAMP_QUESTION);
    cJSON_AddItemToArray(msgs, u2);
    char *b2 = cJSON_PrintUnformatted(t1);
    cJSON *r2 = chat_at(port, b2);
    const cJSON *l2 = longctx_of(r2);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(l2, "rescue_ran")));
    assert_true(cJSON_GetObjectItem(l2, "rescue_chunks")->valuedouble > 0);
    assert_true(probe_of(r2, "in_rescue"));
    assert_true(probe_of(r2, "recall"));
    assert_true(usage_of(r2, "cached_tokens") > usage_of(r1, "prompt_tokens") / 2);   /* turn 1 reused */

    /* the sidecar is killed while a long turn of another session runs */
    char *blob3 = lcx__ramp_blob(80, 0.3, 2), *b3;
    cJSON *t3 = cJSON_CreateObject(), *m3 = cJSON_AddArrayToObject(t3, "messages"), *u3 = cJSON_CreateObject();
    cJSON_AddStringToObject(t3, "session_id", "after-kill");
    cJSON_AddStringToObject(u3, "role", "user");
    cJSON_AddStringToObject(u3, "content", blob3);
    cJSON_AddItemToArray(m3, u3);
    b3 = cJSON_PrintUnformatted(t3);
    async_req a = {port, b3, 0, NULL};
    pthread_t th;
    pthread_create(&th, NULL, post_async, &a);
    usleep(20 * 1000);
    kill(kids[0], SIGKILL);
    pthread_join(th, NULL);
    if (a.st != 200) fprintf(stderr, "status %ld: %s\n", a.st, a.reply ? a.reply : "");
    assert_int_equal(a.st, 200);
    free(a.reply);
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/healthz", port);
    bool off = false;
    for (int i = 0; i < 200 && !off; i++) {
        tu_resp r;
        tu_http("GET", url, NULL, 0, NULL, &r);
        off = r.body && strstr(r.body, "\"rescue\":false") && strstr(r.body, "\"rescue_lost\":1");
        tu_resp_free(&r);
        if (!off) usleep(50000);
    }
    assert_true(off);
    /* the rescued session goes on without the service: Tier 3 fails, the turn does not */
    cJSON *a2 = cJSON_CreateObject(), *u4 = cJSON_CreateObject();
    cJSON_AddStringToObject(a2, "role", "assistant");
    cJSON_AddStringToObject(a2, "content", content_of(r2));
    cJSON_AddItemToArray(msgs, a2);
    cJSON_AddStringToObject(u4, "role", "user");
    cJSON_AddStringToObject(u4, "content", "And the project name?");
    cJSON_AddItemToArray(msgs, u4);
    char *b4 = cJSON_PrintUnformatted(t1);
    cJSON *r4 = chat_at(port, b4);
    assert_true(usage_of(r4, "completion_tokens") >= 1);
    assert_int_equal(cJSON_GetObjectItem(longctx_of(r4), "rescue_chunks")->valueint, 0);
    int ws = tu_kill_wait(pid, SIGTERM, 20000);
    assert_true(ws >= 0 && WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
    cJSON_Delete(r4);
    free(b4);
    free(b3);
    cJSON_Delete(t3);
    free(blob3);
    cJSON_Delete(r2);
    free(b2);
    cJSON_Delete(r1);
    free(b1);
    free(m1);
    free(blob);
    cJSON_Delete(t1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_health_models),
        cmocka_unit_test(test_chat_plain_and_stream),
        cmocka_unit_test(test_stop),
        cmocka_unit_test(test_sessions),
        cmocka_unit_test(test_spm_reply_text),
        cmocka_unit_test(test_content_parts),
        cmocka_unit_test(test_same_key_other_conversation),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_completions),
        cmocka_unit_test(test_session_limits),
        cmocka_unit_test(test_v3_usage),
        cmocka_unit_test(test_queue),
        cmocka_unit_test(test_disconnect),
        cmocka_unit_test(test_cli_enable_longctx),
        cmocka_unit_test(test_cli_rescue_through_server),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
