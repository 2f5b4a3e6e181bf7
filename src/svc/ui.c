/* longctx-svc: the built-in dashboard (GET /ui; docs/svc.md "Dashboard") and the ring of
 * recent retrievals it shows (GET /longctx/recent).
 *
 * The page and its script are constants of this file: no external asset, no CDN, nothing
 * fetched but this service's own routes. /ui and /ui/app.js are the same bytes for every
 * caller and hold no data, so they are served without the token (a browser navigating to
 * /ui cannot send an Authorization header); everything the page shows comes from the
 * authenticated routes /longctx/status (sessions, scopes, store sizes), /metrics (request
 * rates and latency histograms) and /longctx/recent, fetched with the token the user gives:
 * /ui#token=TOKEN (the fragment never reaches the server or its log; the script moves it
 * to sessionStorage and drops it from the address bar) or the form a 401 brings up.
 * Content-Security-Policy keeps the page to its own origin (no inline script, no framing).
 *
 * The ring holds the last RECENT_N answered retrievals (query prefix, session, hit
 * scores) in RAM only; it is what an operator sees, and it is behind the token like the
 * stores it summarises. */
#include "svc/svc.h"
#include "util/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RECENT_N 64
#define RECENT_HITS 8
#define RECENT_QUERY 200      /* bytes of the query kept (cut at a UTF-8 boundary) */
#define RECENT_LABEL 120

struct recent_entry {
    double ts;                /* Unix time, seconds */
    char kind[8];
    char session[LCX_SESSION_ID_MAX + 1];
    char query[RECENT_QUERY + 1];
    int n;                    /* hits returned */
    float score[RECENT_HITS];
    char label[RECENT_HITS][RECENT_LABEL + 1];
};

struct lcx_svc_recent {
    pthread_mutex_t mu;
    uint64_t total;           /* entries ever noted; slot = total % RECENT_N */
    struct recent_entry e[RECENT_N];
};

int lcx__svc_recent_new(struct lcx_svc_recent **out)
{
    *out = calloc(1, sizeof **out);
    if (!*out) return LCX_ENOMEM;
    pthread_mutex_init(&(*out)->mu, NULL);
    return 0;
}

void lcx__svc_recent_free(struct lcx_svc_recent *r)
{
    if (!r) return;
    pthread_mutex_destroy(&r->mu);
    free(r);
}

/* Copies the cut prefix; text that is not valid UTF-8 (a file name, a query no route
 * checked) is replaced, so /longctx/recent stays valid JSON. */
static void copy_cut(char *dst, size_t cap, const char *src, size_t n)
{
    size_t k = src ? lcx__utf8_cut(src, n, cap) : 0;
    if (k && !lcx__utf8_valid(src, k)) src = "(not UTF-8)", k = strlen(src);
    if (k) memcpy(dst, src, k);
    dst[k] = 0;
}

/* One answered /evict/retrieve (kind "rescue") or /retrieve ("code"): session may be NULL,
 * scores[n] the hits' scores (best first), label[n] optional per-hit labels (file paths). */
static void lcx__svc_recent_note(lcx_svc *svc, const char *kind, const char *session, const char *query, size_t qlen,
                          const float *scores, const char *const *labels, int n)
{
    struct lcx_svc_recent *r = svc->recent;
    if (!r) return;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    pthread_mutex_lock(&r->mu);
    struct recent_entry *e = &r->e[r->total % RECENT_N];
    r->total++;
    e->ts = (double)ts.tv_sec + ts.tv_nsec / 1e9;
    snprintf(e->kind, sizeof e->kind, "%s", kind);
    copy_cut(e->session, LCX_SESSION_ID_MAX, session, session ? strlen(session) : 0);
    copy_cut(e->query, RECENT_QUERY, query, qlen);
    e->n = n < 0 ? 0 : n;
    for (int i = 0; i < RECENT_HITS; i++) {   /* scores/labels hold min(n, RECENT_HITS) entries */
        e->score[i] = i < n && scores ? scores[i] : 0;
        const char *l = i < n && labels ? labels[i] : NULL;
        copy_cut(e->label[i], RECENT_LABEL, l, l ? strlen(l) : 0);
    }
    pthread_mutex_unlock(&r->mu);
}

void lcx__svc_recent_rescue(lcx_svc *svc, const char *session, const char *query, size_t qlen, const lcx_hit *hits,
                            int n)
{
    float sc[RECENT_HITS];
    int k = n < RECENT_HITS ? n : RECENT_HITS;
    for (int i = 0; i < k; i++) sc[i] = hits[i].score;
    lcx__svc_recent_note(svc, "rescue", session, query, qlen, sc, NULL, n);
}

void lcx__svc_recent_code(lcx_svc *svc, const char *session, const char *query, size_t qlen, const lcx_code_result *res)
{
    float sc[RECENT_HITS];
    const char *lb[RECENT_HITS];
    int k = res->n_hits < RECENT_HITS ? res->n_hits : RECENT_HITS;
    for (int i = 0; i < k; i++) sc[i] = res->hits[i].score, lb[i] = res->hits[i].file_path;
    lcx__svc_recent_note(svc, "code", session, query, qlen, sc, lb, res->n_hits);
}

/* GET /longctx/recent: {"total":N,"recent":[{ts,kind,session_id,query,hits,top:[{score,label}]}…]}
 * newest first. Query text and session ids are what callers sent (valid UTF-8: both were
 * checked before the retrieval ran; the cut keeps whole characters). */
int lcx__svc_h_recent(lcx_svc *svc, lcx_req *req, lcx_resp *resp)
{
    struct lcx_svc_recent *r = svc->recent;
    if (!r) return LCX_ESTATE;
    struct recent_entry *copy = malloc(sizeof r->e);
    if (!copy) return LCX_ENOMEM;
    pthread_mutex_lock(&r->mu);
    uint64_t total = r->total;
    memcpy(copy, r->e, sizeof r->e);
    pthread_mutex_unlock(&r->mu);
    lcx_buf *b = lcx__resp_json_buf(resp, 200);
    lcx__buf_printf(b, "{\"total\":%llu,\"recent\":[", (unsigned long long)total);
    uint64_t n = total < RECENT_N ? total : RECENT_N;
    for (uint64_t i = 0; i < n; i++) {
        const struct recent_entry *e = &copy[(total - 1 - i) % RECENT_N];
        if (i) lcx__buf_puts(b, ",");
        lcx__buf_puts(b, "{\"ts\":");
        lcx__buf_json_num(b, (double)(long long)(e->ts * 1000) / 1000);
        lcx__buf_puts(b, ",\"kind\":");
        lcx__buf_json_str(b, e->kind, strlen(e->kind));
        lcx__buf_puts(b, ",\"session_id\":");
        if (e->session[0]) lcx__buf_json_str(b, e->session, strlen(e->session));
        else lcx__buf_puts(b, "null");
        lcx__buf_puts(b, ",\"query\":");
        lcx__buf_json_str(b, e->query, strlen(e->query));
        lcx__buf_printf(b, ",\"hits\":%d,\"top\":[", e->n);
        for (int k = 0; k < e->n && k < RECENT_HITS; k++) {
            lcx__buf_puts(b, k ? ",{\"score\":" : "{\"score\":");
            lcx__buf_json_f32(b, e->score[k]);
            if (e->label[k][0]) {
                lcx__buf_puts(b, ",\"label\":");
                lcx__buf_json_str(b, e->label[k], strlen(e->label[k]));
            }
            lcx__buf_puts(b, "}");
        }
        lcx__buf_puts(b, "]}");
    }
    lcx__buf_puts(b, "]}");
    free(copy);
    return 0;
}

/* ------------------------------------------------------------------ the page */

static const char UI_HTML[] =
    "<!doctype html>\n"
    "<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
    "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
    "<title>longctx-svc</title>\n"
    "<style>\n"
    "body{font:14px/1.4 system-ui,sans-serif;margin:0;background:#f6f7f9;color:#1c1e21}\n"
    "header{background:#20232a;color:#fff;padding:10px 18px;display:flex;gap:18px;align-items:baseline}\n"
    "header h1{font-size:18px;margin:0}header span{opacity:.75}\n"
    "main{padding:12px 18px;display:grid;grid-template-columns:repeat(auto-fit,minmax(420px,1fr));gap:12px}\n"
    "section{background:#fff;border:1px solid #dde;border-radius:6px;padding:8px 12px;overflow:auto}\n"
    "h2{font-size:15px;margin:4px 0 8px}table{border-collapse:collapse;width:100%}\n"
    "td,th{text-align:left;padding:2px 6px;border-bottom:1px solid #eee;font-variant-numeric:tabular-nums}\n"
    "th{font-weight:600;color:#555}td.n{text-align:right}.kv td:first-child{color:#555}\n"
    ".bar{display:inline-block;height:8px;background:#4a8;margin-right:4px;vertical-align:middle}\n"
    "#login{display:none;padding:18px}#login.show{display:block}#err{color:#b00;padding:0 18px}\n"
    ".q{max-width:340px;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}\n"
    "</style></head>\n"
    "<body data-state=\"loading\">\n"
    "<header><h1>longctx-svc</h1><span id=\"version\"></span><span id=\"uptime\"></span><span id=\"updated\"></span></header>\n"
    "<form id=\"login\"><p>This service needs its token (<code>--auth-token</code>).</p>\n"
    "<input id=\"token\" type=\"password\" autocomplete=\"off\" placeholder=\"token\" size=\"40\"> <button>Use token</button>\n"
    "<p><small>Kept in this tab's sessionStorage only. You can also open <code>/ui#token=&hellip;</code>.</small></p></form>\n"
    "<div id=\"err\"></div>\n"
    "<main>\n"
    "<section><h2>Requests</h2><table class=\"kv\" id=\"overview\"></table></section>\n"
    "<section><h2>Sessions and stores</h2><table class=\"kv\" id=\"sessions\"></table></section>\n"
    "<section><h2>Routes (rate and latency over the last interval)</h2><table id=\"routes\"><thead><tr><th>route</th>"
    "<th>req/s</th><th>total</th><th>errors</th><th>p50 ms</th><th>p95 ms</th><th>p99 ms</th></tr></thead><tbody></tbody></table></section>\n"
    "<section><h2>Scopes</h2><table id=\"scopes\"><thead><tr><th>scope</th><th>status</th><th>files</th><th>chunks</th>"
    "<th>MB</th></tr></thead><tbody></tbody></table></section>\n"
    "<section style=\"grid-column:1/-1\"><h2>Recent retrievals</h2><table id=\"recent\"><thead><tr><th>time</th><th>kind</th>"
    "<th>session</th><th>query</th><th>hits</th><th>scores</th></tr></thead><tbody></tbody></table></section>\n"
    "</main>\n"
    "<script src=\"/ui/app.js\"></script>\n"
    "</body></html>\n";

/* Reads the Prometheus text of /metrics; percentiles are histogram_quantile over the
 * bucket deltas between two polls (all-time buckets on the first poll). */
static const char UI_JS[] =
    "'use strict';\n"
    "const KEY = 'longctx-token', POLL_MS = 2000;\n"
    "(function takeFragment() {\n"
    "  const m = /(?:^#|&)token=([^&]*)/.exec(location.hash);\n"
    "  if (m) { sessionStorage.setItem(KEY, decodeURIComponent(m[1])); history.replaceState(null, '', location.pathname); }\n"
    "})();\n"
    "const $ = (id) => document.getElementById(id);\n"
    "function el(tag, text, cls) { const e = document.createElement(tag); if (text !== undefined) e.textContent = text; if (cls) e.className = cls; return e; }\n"
    "class Unauthorized extends Error {}\n"
    "async function get(path, asText) {\n"
    "  const h = {}, t = sessionStorage.getItem(KEY);\n"
    "  if (t) h.Authorization = 'Bearer ' + t;\n"
    "  if (!asText) h.Accept = 'application/json';\n"
    "  const r = await fetch(path, {headers: h, cache: 'no-store'});\n"
    "  if (r.status === 401) throw new Unauthorized();\n"
    "  if (!r.ok) throw new Error(path + ': HTTP ' + r.status);\n"
    "  return asText ? r.text() : r.json();\n"
    "}\n"
    "function parseProm(text) {\n"
    "  const out = {};\n"
    "  for (const line of text.split('\\n')) {\n"
    "    if (!line || line[0] === '#') continue;\n"
    "    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\\{(.*)\\})? (\\S+)$/.exec(line);\n"
    "    if (!m) continue;\n"
    "    const labels = {};\n"
    "    if (m[2]) for (const p of m[2].matchAll(/([a-zA-Z_]+)=\"((?:[^\"\\\\]|\\\\.)*)\"/g)) labels[p[1]] = p[2];\n"
    "    (out[m[1]] = out[m[1]] || []).push({labels, value: parseFloat(m[3])});\n"
    "  }\n"
    "  return out;\n"
    "}\n"
    "function quantile(bk, q) {\n"
    "  const total = bk.length ? bk[bk.length - 1].c : 0;\n"
    "  if (!total) return NaN;\n"
    "  const rank = q * total;\n"
    "  let prevLe = 0, prevC = 0;\n"
    "  for (const b of bk) {\n"
    "    if (b.c >= rank) {\n"
    "      if (!isFinite(b.le)) return prevLe;\n"
    "      return prevLe + (b.le - prevLe) * (b.c - prevC ? (rank - prevC) / (b.c - prevC) : 1);\n"
    "    }\n"
    "    prevLe = b.le; prevC = b.c;\n"
    "  }\n"
    "  return prevLe;\n"
    "}\n"
    "function routes(m) {\n"
    "  const r = {};\n"
    "  const key = (l) => (l.method ? l.method + ' ' : '') + l.route;\n"
    "  for (const s of m.longctx_http_requests_total || []) { const k = key(s.labels); (r[k] = r[k] || {n: 0, err: 0, bk: {}}).n += s.value;\n"
    "    if (s.labels.status === 'other' || +s.labels.status >= 400) r[k].err += s.value; }\n"
    "  for (const s of m.longctx_http_request_duration_seconds_bucket || []) { const k = key(s.labels); (r[k] = r[k] || {n: 0, err: 0, bk: {}}).bk[s.labels.le] = s.value; }\n"
    "  return r;\n"
    "}\n"
    "function one(m, name) { const s = m[name]; return s && s.length ? s[0].value : 0; }\n"
    "function fmt(v, d) { return isFinite(v) ? v.toFixed(d === undefined ? 2 : d) : '\\u2014'; }\n"
    "function mb(bytes) { return (bytes / 1048576).toFixed(1) + ' MB'; }\n"
    "function kv(table, rows) { table.replaceChildren(...rows.map(([k, v]) => { const tr = el('tr'); tr.append(el('td', k), el('td', String(v))); return tr; })); }\n"
    "let prev = null, polls = 0;\n"
    "async function poll() {\n"
    "  let st, text, rec;\n"
    "  try { [st, text, rec] = await Promise.all([get('/longctx/status'), get('/metrics', true), get('/longctx/recent')]); }\n"
    "  catch (e) {\n"
    "    if (e instanceof Unauthorized) { $('login').classList.add('show'); document.body.dataset.state = 'login'; return; }\n"
    "    $('err').textContent = String(e.message || e); document.body.dataset.state = 'error'; return;\n"
    "  }\n"
    "  $('login').classList.remove('show'); $('err').textContent = '';\n"
    "  const m = parseProm(text), now = performance.now(), cur = routes(m);\n"
    "  const dt = prev ? (now - prev.t) / 1000 : 0;\n"
    "  $('version').textContent = 'v' + st.version + ' \\u00b7 ' + st.mode;\n"
    "  $('uptime').textContent = 'up ' + st.uptime_s + ' s';\n"
    "  $('updated').textContent = 'updated ' + new Date().toLocaleTimeString();\n"
    "  let tot = 0, totPrev = 0;\n"
    "  for (const k in cur) { tot += cur[k].n; if (prev && prev.r[k]) totPrev += prev.r[k].n; }\n"
    "  kv($('overview'), [\n"
    "    ['requests/s (last interval)', dt ? fmt((tot - totPrev) / dt, 1) : '\\u2014'],\n"
    "    ['requests since start', st.requests], ['errors since start', st.errors],\n"
    "    ['open connections', one(m, 'longctx_open_connections')],\n"
    "    ['refused by per-client limits', one(m, 'longctx_client_limited_total')],\n"
    "    ['background backlog', one(m, 'longctx_neural_backlog')],\n"
    "    ['resident memory', mb(one(m, 'longctx_resident_memory_bytes'))]]);\n"
    "  kv($('sessions'), [\n"
    "    ['sessions in RAM', st.sessions_active], ['sessions on disk', st.sessions_known],\n"
    "    ['session memory', st.memory_mb + ' MB'], ['last session', st.last_session_id || '\\u2014'],\n"
    "    ['spans stored since start', one(m, 'longctx_spans_stored_total')],\n"
    "    ['eviction rounds seen', one(m, 'longctx_evict_rounds_total')],\n"
    "    ['rescue retrievals / hits', one(m, 'longctx_rescue_retrievals_total') + ' / ' + one(m, 'longctx_rescue_hits_total')],\n"
    "    ['scopes in RAM / on disk', one(m, 'longctx_scopes_in_ram') + ' / ' + one(m, 'longctx_scopes_on_disk')],\n"
    "    ['scope cache on disk', st.disk_cache ? st.disk_cache.mb + ' MB' : '\\u2014']]);\n"
    "  const rb = $('routes').tBodies[0], rows = [];\n"
    "  for (const k of Object.keys(cur).sort()) {\n"
    "    const c = cur[k], p = prev && prev.r[k];\n"
    "    const les = Object.keys(c.bk).map((le) => ({le: le === '+Inf' ? Infinity : +le, c: c.bk[le] - (p && p.bk[le] || 0)})).sort((a, b) => a.le - b.le);\n"
    "    const use = les.length && les[les.length - 1].c > 0 ? les : Object.keys(c.bk).map((le) => ({le: le === '+Inf' ? Infinity : +le, c: c.bk[le]})).sort((a, b) => a.le - b.le);\n"
    "    const tr = el('tr');\n"
    "    tr.dataset.route = k;\n"
    "    tr.append(el('td', k), el('td', dt ? fmt((c.n - (p ? p.n : 0)) / dt, 1) : '\\u2014', 'n'), el('td', String(c.n), 'n'), el('td', String(c.err), 'n'));\n"
    "    for (const q of [0.5, 0.95, 0.99]) tr.append(el('td', fmt(quantile(use, q) * 1000), 'n'));\n"
    "    rows.push(tr);\n"
    "  }\n"
    "  rb.replaceChildren(...rows);\n"
    "  const sb = $('scopes').tBodies[0];\n"
    "  sb.replaceChildren(...(st.scopes || []).map((s) => { const tr = el('tr');\n"
    "    tr.append(el('td', s.scope_path, 'q'), el('td', s.status), el('td', String(s.files), 'n'), el('td', String(s.chunks), 'n'), el('td', String(s.memory_mb), 'n'));\n"
    "    return tr; }));\n"
    "  const qb = $('recent').tBodies[0];\n"
    "  qb.replaceChildren(...rec.recent.map((r) => { const tr = el('tr'); tr.className = 'retrieval';\n"
    "    const sc = el('td');\n"
    "    for (const h of r.top) { const s = el('span', h.score.toFixed(3) + ' ', 'score'); if (h.label) s.title = h.label;\n"
    "      const bar = el('span', undefined, 'bar'); bar.style.width = Math.max(2, Math.round(40 * Math.min(1, Math.abs(h.score)))) + 'px'; sc.append(bar, s); }\n"
    "    tr.append(el('td', new Date(r.ts * 1000).toLocaleTimeString()), el('td', r.kind), el('td', r.session_id || '\\u2014', 'q'),\n"
    "              el('td', r.query, 'q'), el('td', String(r.hits), 'n'), sc);\n"
    "    return tr; }));\n"
    "  prev = {t: now, r: cur};\n"
    "  document.body.dataset.polls = String(++polls);\n"
    "  document.body.dataset.state = 'ready';\n"
    "}\n"
    "$('login').addEventListener('submit', (ev) => { ev.preventDefault(); sessionStorage.setItem(KEY, $('token').value); $('token').value = ''; poll(); });\n"
    "poll();\n"
    "setInterval(poll, POLL_MS);\n";

static void static_headers(lcx_resp *resp)
{
    lcx__resp_header(resp, "Content-Security-Policy",
                     "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'unsafe-inline'; "
                     "img-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'");
    lcx__resp_header(resp, "X-Content-Type-Options", "nosniff");
    lcx__resp_header(resp, "Referrer-Policy", "no-referrer");
    lcx__resp_header(resp, "Cache-Control", "no-cache");
}

int lcx__svc_h_ui(lcx_svc *svc, lcx_req *req, lcx_resp *resp)
{
    lcx__resp_text(resp, 200, "text/html; charset=utf-8", UI_HTML, sizeof UI_HTML - 1);
    static_headers(resp);
    return 0;
}

int lcx__svc_h_ui_js(lcx_svc *svc, lcx_req *req, lcx_resp *resp)
{
    lcx__resp_text(resp, 200, "text/javascript; charset=utf-8", UI_JS, sizeof UI_JS - 1);
    static_headers(resp);
    return 0;
}
