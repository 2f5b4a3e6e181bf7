/* Integration: the SPEC §6 needle over HTTP — 20,000 filler spans + one fact span in one
 * session; the SPEC §6 question (bare, and as the tail of a long user turn) ranks the
 * fact first, and the rescue system message carries it. */
#include "svc_harness.h"

#include <curl/curl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FACT "IMPORTANT: Project NOVA was provisioned with access code 481729. All technicians must memorize this code prior to deployment."
#define FILLER "the routine quarterly procedure required careful review of the documented operational records during the assessment cycle. "
#define QUESTION "What is the access code for Project NOVA? Answer with only the digits."
#define N_FILLER 20000
#define PER_REQ 1000
#define FACT_AT 12345    /* span index of the fact */

static void test_needle(void **st)
{
    sh_server s;
    sh_start(&s, NULL, NULL, NULL);
    size_t cap = (size_t)PER_REQ * (4 * sizeof FILLER + 300) + 1024;
    char *body = malloc(cap);
    int span = 0;
    while (span <= N_FILLER) {
        size_t o = (size_t)snprintf(body, cap, "{\"session_id\":\"needle\",\"chunks\":[");
        for (int k = 0; k < PER_REQ && span <= N_FILLER; k++, span++) {
            /* a fact span is a filler span with the fact inside, as an evicted run would be */
            const char *mid = span == FACT_AT ? FACT " " : "";
            long a = (long)span * 128;
            o += (size_t)snprintf(body + o, cap - o, "%s{\"text\":\"%s%s%s%s\",\"token_range\":[%ld,%ld],\"layer\":0,\"score\":0.1}",
                                  k ? "," : "", FILLER FILLER, mid, FILLER, FILLER, a, a + 127);
        }
        snprintf(body + o, cap - o, "]}");
        cJSON *j;
        assert_int_equal(sh_post(&s, "/evict/write", body, &j), 200);
        cJSON_Delete(j);
    }
    free(body);

    const char *queries[2];
    char longq[8192];
    snprintf(longq, sizeof longq, "%s%s%s%s\\n\\nQuestion: %s", FILLER, FILLER, FILLER, FILLER, QUESTION);
    queries[0] = QUESTION;
    queries[1] = longq;
    for (int qi = 0; qi < 2; qi++) {
        char req[9000];
        snprintf(req, sizeof req, "{\"session_id\":\"needle\",\"query\":\"%s\",\"top_k\":8,\"score_floor\":0.2}", queries[qi]);
        cJSON *j;
        assert_int_equal(sh_post(&s, "/evict/retrieve", req, &j), 200);
        assert_int_equal(cJSON_GetObjectItemCaseSensitive(j, "session_total")->valueint, N_FILLER + 1);
        const cJSON *c0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "chunks"), 0);
        assert_non_null(c0);
        const char *t = cJSON_GetObjectItemCaseSensitive(c0, "text")->valuestring;
        if (!strstr(t, "481729")) fprintf(stderr, "query %d: rank 1 is: %.120s\n", qi, t);
        assert_non_null(strstr(t, "481729"));
        const cJSON *tr = cJSON_GetObjectItemCaseSensitive(c0, "token_range");
        assert_int_equal(cJSON_GetArrayItem(tr, 0)->valueint, FACT_AT * 128);
        const char *sm = cJSON_GetObjectItemCaseSensitive(j, "system_message")->valuestring;
        assert_non_null(strstr(sm, "access code 481729"));
        assert_true(strlen(sm) <= 8000);
        cJSON_Delete(j);
    }
    sh_stop(&s, SIGTERM);
    sh_cleanup(&s);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_ALL);
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_needle)};
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
