/* longctx-svc: GET /metrics in the Prometheus text exposition format (0.0.4).
 *
 * The request path only does relaxed atomic adds into fixed arrays allocated at start
 * (one row per route of lcx__svc_routes plus one for requests no route took): no lock,
 * no allocation, no branch on the metrics being read. Readers see each counter exactly,
 * but not a consistent snapshot across counters (a histogram's _count may trail its
 * buckets by the requests finishing during the scrape), which Prometheus tolerates.
 *
 * Statuses are counted per exact code for the codes the service answers (STATUSES);
 * anything else lands in status="other". Latency runs from the request head to the
 * reply being queued (upload time included; streaming proxy replies count until their
 * head is queued). */
#include "svc/svc.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const int STATUSES[] = {200, 201, 204, 400, 401, 403, 404, 405, 409, 413, 414, 415, 422, 429, 431,
                               500, 501, 502, 503, 504, 507};
#define N_STATUS ((int)LCX_ARRAY_LEN(STATUSES) + 1)   /* + "other" */
/* Histogram upper bounds in seconds (+Inf implicit). */
static const double BUCKETS_S[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
#define N_BUCKET ((int)LCX_ARRAY_LEN(BUCKETS_S) + 1)  /* + +Inf */

struct lcx_svc_metrics {
    int n_rows;               /* routes + 1 ("other": no route) */
    uint64_t *req;            /* [row][N_STATUS] */
    uint64_t *hist;           /* [row][N_BUCKET], per bucket (made cumulative when written) */
    uint64_t *sum_us;         /* [row] */
    uint64_t spans, rescue_queries, rescue_hits, evict_rounds;
};

/* Store fsync latency: every lcx__fdatasync of the process (the stores' durable commits),
 * so one histogram per process, not per service instance (util.h has one observer). */
static const double FSYNC_BUCKETS_S[] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5};
#define N_FSYNC ((int)LCX_ARRAY_LEN(FSYNC_BUCKETS_S) + 1)
static uint64_t fsync_hist[N_FSYNC], fsync_sum_ns;

static void fsync_observe(uint64_t ns)
{
    double s = (double)ns / 1e9;
    int b = 0;
    while (b < N_FSYNC - 1 && s > FSYNC_BUCKETS_S[b]) b++;
    __atomic_add_fetch(&fsync_hist[b], 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&fsync_sum_ns, ns, __ATOMIC_RELAXED);
}

int lcx__svc_metrics_new(struct lcx_svc_metrics **out)
{
    *out = NULL;
    int nr = 0;
    while (lcx__svc_routes[nr].method) nr++;
    struct lcx_svc_metrics *m = calloc(1, sizeof *m);
    if (!m) return LCX_ENOMEM;
    m->n_rows = nr + 1;
    m->req = calloc((size_t)m->n_rows * N_STATUS, sizeof *m->req);
    m->hist = calloc((size_t)m->n_rows * N_BUCKET, sizeof *m->hist);
    m->sum_us = calloc((size_t)m->n_rows, sizeof *m->sum_us);
    if (!m->req || !m->hist || !m->sum_us) { lcx__svc_metrics_free(m); return LCX_ENOMEM; }
    lcx__fsync_set_observer(fsync_observe);
    *out = m;
    return 0;
}

void lcx__svc_metrics_free(struct lcx_svc_metrics *m)
{
    if (!m) return;
    free(m->req);
    free(m->hist);
    free(m->sum_us);
    free(m);
}

static int status_slot(int status)
{
    for (int i = 0; i < (int)LCX_ARRAY_LEN(STATUSES); i++)
        if (STATUSES[i] == status) return i;
    return N_STATUS - 1;
}

void lcx__svc_metrics_request(lcx_svc *svc, int route, int status, double ms)
{
    struct lcx_svc_metrics *m = svc->metrics;
    if (!m) return;
    int row = route >= 0 && route < m->n_rows - 1 ? route : m->n_rows - 1;
    __atomic_add_fetch(&m->req[(size_t)row * N_STATUS + (size_t)status_slot(status)], 1, __ATOMIC_RELAXED);
    double s = ms / 1000.0;
    int b = 0;
    while (b < N_BUCKET - 1 && s > BUCKETS_S[b]) b++;
    __atomic_add_fetch(&m->hist[(size_t)row * N_BUCKET + (size_t)b], 1, __ATOMIC_RELAXED);
    uint64_t us = ms > 0 ? (uint64_t)(ms * 1000.0 + 0.5) : 0;
    __atomic_add_fetch(&m->sum_us[row], us, __ATOMIC_RELAXED);
}

void lcx__svc_metrics_spans(lcx_svc *svc, int n)
{
    if (svc->metrics && n > 0) __atomic_add_fetch(&svc->metrics->spans, (uint64_t)n, __ATOMIC_RELAXED);
}

void lcx__svc_metrics_write(lcx_svc *svc, const lcx_chunk *cs, int n)
{
    lcx__svc_metrics_spans(svc, n);
    if (!svc->metrics) return;
    /* An engine posts one eviction round's spans per call (maybe split over calls, which
     * then count once each); a batch carrying several rounds counts each run. */
    uint64_t rounds = 0;
    for (int i = 0; i < n; i++)
        if (cs[i].round >= 0 && (i == 0 || cs[i].round != cs[i - 1].round)) rounds++;
    if (rounds) __atomic_add_fetch(&svc->metrics->evict_rounds, rounds, __ATOMIC_RELAXED);
}

void lcx__svc_metrics_rescue(lcx_svc *svc, int hits)
{
    if (!svc->metrics) return;
    __atomic_add_fetch(&svc->metrics->rescue_queries, 1, __ATOMIC_RELAXED);
    if (hits > 0) __atomic_add_fetch(&svc->metrics->rescue_hits, (uint64_t)hits, __ATOMIC_RELAXED);
}

static uint64_t ld(const uint64_t *p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }

static const char *row_route(const struct lcx_svc_metrics *m, int row)
{
    return row < m->n_rows - 1 ? lcx__svc_routes[row].pattern : "other";
}
static const char *row_method(const struct lcx_svc_metrics *m, int row)
{
    return row < m->n_rows - 1 ? lcx__svc_routes[row].method : "";
}

void lcx__svc_metric_head(lcx_buf *b, const char *name, const char *type, const char *help)
{
    lcx__buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* One histogram's bucket/sum/count lines. counts[k] is the number of observations in
 * bucket k (not cumulative); the last bucket is +Inf. labels: "" or `a="x",b="y"`. */
static void histogram(lcx_buf *b, const char *name, const char *labels, const double *bounds, const uint64_t *counts,
                      int n, double sum)
{
    const char *sep = *labels ? "," : "";
    uint64_t cum = 0;
    for (int k = 0; k < n; k++) {
        cum += counts[k];
        if (k < n - 1) lcx__buf_printf(b, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, labels, sep, bounds[k], (unsigned long long)cum);
        else lcx__buf_printf(b, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, labels, sep, (unsigned long long)cum);
    }
    if (*labels) {
        lcx__buf_printf(b, "%s_sum{%s} %.9f\n", name, labels, sum);
        lcx__buf_printf(b, "%s_count{%s} %llu\n", name, labels, (unsigned long long)cum);
    } else {
        lcx__buf_printf(b, "%s_sum %.9f\n%s_count %llu\n", name, sum, name, (unsigned long long)cum);
    }
}

/* Code scopes: loaded (RAM) and persisted (DATA_DIR/scopes/<hash>/, one readdir). */
static void scopes(lcx_svc *svc, lcx_buf *t)
{
    uint32_t disk = 0;
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/scopes", svc->cfg.data_dir);
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)))
            if (e->d_name[0] != '.' && (e->d_type == DT_DIR || e->d_type == DT_UNKNOWN)) disk++;
        closedir(d);
    }
    lcx__svc_metric_head(t, "longctx_scopes_in_ram", "gauge", "Code scopes loaded in RAM.");
    lcx__buf_printf(t, "longctx_scopes_in_ram %u\n", svc->code ? lcx_scopes_loaded(svc->code) : 0);
    lcx__svc_metric_head(t, "longctx_scopes_on_disk", "gauge", "Code scopes persisted in the data dir (loaded or not).");
    lcx__buf_printf(t, "longctx_scopes_on_disk %u\n", disk);
    lcx__svc_metric_head(t, "longctx_scope_memory_bytes", "gauge", "RAM held by the loaded code scopes.");
    lcx__buf_printf(t, "longctx_scope_memory_bytes %llu\n",
                   (unsigned long long)(svc->code ? lcx_scopes_mem_bytes(svc->code) : 0));
}

int lcx__svc_h_metrics(lcx_svc *svc, lcx_req *req, lcx_resp *resp)
{
    struct lcx_svc_metrics *m = svc->metrics;
    if (!m) return LCX_ESTATE;
    lcx_buf t = {0};
    lcx__svc_metric_head(&t, "longctx_build_info", "gauge", "Version of this longctx-svc.");
    lcx__buf_printf(&t, "longctx_build_info{version=\"%s\"} 1\n", LCX_VERSION);

    lcx__svc_metric_head(&t, "longctx_http_requests_total", "counter", "HTTP requests answered, by route and status.");
    for (int r = 0; r < m->n_rows; r++)
        for (int s = 0; s < N_STATUS; s++) {
            uint64_t v = ld(&m->req[(size_t)r * N_STATUS + (size_t)s]);
            if (!v) continue;
            char st[16];
            if (s < N_STATUS - 1) snprintf(st, sizeof st, "%d", STATUSES[s]);
            else snprintf(st, sizeof st, "other");
            lcx__buf_printf(&t, "longctx_http_requests_total{method=\"%s\",route=\"%s\",status=\"%s\"} %llu\n",
                           row_method(m, r), row_route(m, r), st, (unsigned long long)v);
        }
    lcx__svc_metric_head(&t, "longctx_http_errors_total", "counter", "HTTP requests answered with status >= 400, by route and status.");
    for (int r = 0; r < m->n_rows; r++)
        for (int s = 0; s < N_STATUS; s++) {
            if (s < N_STATUS - 1 && STATUSES[s] < 400) continue;
            uint64_t v = ld(&m->req[(size_t)r * N_STATUS + (size_t)s]);
            if (!v) continue;
            char st[16];
            if (s < N_STATUS - 1) snprintf(st, sizeof st, "%d", STATUSES[s]);
            else snprintf(st, sizeof st, "other");
            lcx__buf_printf(&t, "longctx_http_errors_total{method=\"%s\",route=\"%s\",status=\"%s\"} %llu\n",
                           row_method(m, r), row_route(m, r), st, (unsigned long long)v);
        }
    lcx__svc_metric_head(&t, "longctx_http_request_duration_seconds", "histogram",
         "Time from the request head to the reply being queued, by route.");
    for (int r = 0; r < m->n_rows; r++) {
        uint64_t c[N_BUCKET];
        for (int k = 0; k < N_BUCKET; k++) c[k] = ld(&m->hist[(size_t)r * N_BUCKET + (size_t)k]);
        uint64_t total = 0;
        for (int k = 0; k < N_BUCKET; k++) total += c[k];
        if (!total) continue;
        char lab[160];
        snprintf(lab, sizeof lab, "method=\"%s\",route=\"%s\"", row_method(m, r), row_route(m, r));
        histogram(&t, "longctx_http_request_duration_seconds", lab, BUCKETS_S, c, N_BUCKET,
                  (double)ld(&m->sum_us[r]) / 1e6);
    }

    pthread_mutex_lock(&svc->mu);
    uint32_t known = svc->n_sessions_known;
    pthread_mutex_unlock(&svc->mu);
    lcx__svc_metric_head(&t, "longctx_sessions_in_ram", "gauge", "Sessions loaded in RAM.");
    lcx__buf_printf(&t, "longctx_sessions_in_ram %u\n", lcx_sessions_active(svc->sessions));
    lcx__svc_metric_head(&t, "longctx_sessions_on_disk", "gauge", "Sessions known to the service (each has a directory on disk).");
    lcx__buf_printf(&t, "longctx_sessions_on_disk %u\n", known);
    lcx__svc_metric_head(&t, "longctx_session_memory_bytes", "gauge", "RAM held by the loaded sessions.");
    lcx__buf_printf(&t, "longctx_session_memory_bytes %llu\n", (unsigned long long)lcx_sessions_mem_bytes(svc->sessions));
    lcx__svc_metric_head(&t, "longctx_spans_stored_total", "counter", "Spans (chunks) made durable by /evict/write since start.");
    lcx__buf_printf(&t, "longctx_spans_stored_total %llu\n", (unsigned long long)ld(&m->spans));
    lcx__svc_metric_head(&t, "longctx_rescue_retrievals_total", "counter", "Answered /evict/retrieve calls on existing sessions.");
    lcx__buf_printf(&t, "longctx_rescue_retrievals_total %llu\n", (unsigned long long)ld(&m->rescue_queries));
    lcx__svc_metric_head(&t, "longctx_rescue_hits_total", "counter", "Chunks returned by /evict/retrieve.");
    lcx__buf_printf(&t, "longctx_rescue_hits_total %llu\n", (unsigned long long)ld(&m->rescue_hits));
    lcx__svc_metric_head(&t, "longctx_evict_rounds_total", "counter",
         "Eviction rounds reported by /evict/write (runs of one round value >= 0 within a batch).");
    lcx__buf_printf(&t, "longctx_evict_rounds_total %llu\n", (unsigned long long)ld(&m->evict_rounds));
    lcx__svc_metric_head(&t, "longctx_store_fsync_duration_seconds", "histogram",
         "fdatasync of the stores' durable commits (the whole process).");
    {
        uint64_t c[N_FSYNC];
        for (int k = 0; k < N_FSYNC; k++) c[k] = ld(&fsync_hist[k]);
        histogram(&t, "longctx_store_fsync_duration_seconds", "", FSYNC_BUCKETS_S, c, N_FSYNC,
                  (double)ld(&fsync_sum_ns) / 1e9);
    }
    scopes(svc, &t);
    lcx_svc_limits_stats ls;
    lcx__svc_limits_stats(svc->limits, &ls);
    lcx__svc_metric_head(&t, "longctx_client_limited_total", "counter", "Requests refused with 429 by a per-client limit, by limit.");
    lcx__buf_printf(&t, "longctx_client_limited_total{limit=\"rate\"} %llu\n", (unsigned long long)ls.refused_rate);
    lcx__buf_printf(&t, "longctx_client_limited_total{limit=\"connections\"} %llu\n", (unsigned long long)ls.refused_conns);
    lcx__svc_metric_head(&t, "longctx_clients_tracked", "gauge", "Client addresses the per-client limits hold state for.");
    lcx__buf_printf(&t, "longctx_clients_tracked %u\n", ls.clients);
    lcx__svc_metric_head(&t, "longctx_clients_untracked_total", "counter",
         "Connections from addresses not tracked (table full or out of memory): not limited.");
    lcx__buf_printf(&t, "longctx_clients_untracked_total %llu\n", (unsigned long long)ls.untracked);
    lcx__svc_metric_head(&t, "longctx_log_lines_dropped_total", "counter", "Log lines that could not be written (--log-file).");
    lcx__buf_printf(&t, "longctx_log_lines_dropped_total %llu\n", (unsigned long long)lcx__svc_log_dropped(svc->log));
    lcx__svc_nn_metrics(svc, &t);   /* neural backlog / rerank counters (nn_svc.c) */
    lcx__svc_metric_head(&t, "longctx_open_connections", "gauge", "Open HTTP connections (including the scraper's).");
    lcx__buf_printf(&t, "longctx_open_connections %llu\n",
                   (unsigned long long)__atomic_load_n(&svc->n_connections, __ATOMIC_RELAXED));
    lcx__svc_metric_head(&t, "longctx_uptime_seconds", "gauge", "Seconds since the service started.");
    lcx__buf_printf(&t, "longctx_uptime_seconds %.3f\n", (lcx__now_ms() - svc->started_ms) / 1000.0);
    lcx__svc_metric_head(&t, "longctx_resident_memory_bytes", "gauge", "Resident set size of the process.");
    lcx__buf_printf(&t, "longctx_resident_memory_bytes %llu\n", (unsigned long long)lcx__svc_rss_bytes());
    if (t.err) { int e = t.err; lcx__buf_free(&t); return e; }
    lcx__resp_text(resp, 200, "text/plain; version=0.0.4; charset=utf-8", t.data ? t.data : "", t.len);
    lcx__buf_free(&t);
    return 0;
}
