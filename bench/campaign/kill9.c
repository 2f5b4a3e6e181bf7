/* kill -9 campaign against the real longctx-svc (issue #24).
 *
 *   ./bench/bench_kill9 --bin bin/longctx-svc [--trials 100] [--seed 1] [--max-delay-ms 400]
 *
 * N trials on one data dir that keeps growing across them (as a real deployment's does).
 * Trial i runs workload phase i % 5 against the server, waits for the first acknowledged
 * request (replay: for /healthz), sleeps a random 0..max-delay ms and sends SIGKILL:
 *   ingest     two writers streaming /evict/write batches into one session;
 *   hibernate  --max-sessions-in-ram 2 with one writer rotating over six sessions (every
 *              request makes the LRU hibernate another one) and a thread posting
 *              /sessions/ID/hibernate and /resume;
 *   scope      a thread rewriting files of a 120-file project and re-indexing it
 *              (POST /index) while a writer streams into a session;
 *   snapshot   a session of ~20k chunks: a batch written, then /sessions/ID/hibernate
 *              (the whole index snapshot written), again and again;
 *   replay     a session of ~30k chunks, loaded from its log on first use after a start
 *              (no snapshot: the previous server was killed): the server is killed and
 *              restarted, two writers post into that session at once (their first request
 *              waits for the replay) and the kill lands 0..(1.25 × the last replay's time, at
 *              most max-delay) ms after /healthz, so most kills hit the replay itself
 *              (counted: kills before any acknowledgement).
 * After each kill, before the restart: every store directory under the data dir
 * (sessions/<hash>, scopes/<hash>/store) must pass lcx_store_validate (a torn tail of an
 * unacknowledged record is fine: it is cut at the next open). Then the server restarts on
 * the same dir and every chunk ever acknowledged (HTTP 200) must be in its session's dump;
 * in the scope phase POST /index must answer 200 with every file and /retrieve must find
 * each file's current content. Prints per-phase trials, losses and invalid stores; exits 1
 * when any is not 0. A short run is the campaign_kill9_smoke test. */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "longctx/lcx.h"
#include "testutil.h"

enum { PH_INGEST, PH_HIBERNATE, PH_SCOPE, PH_SNAPSHOT, PH_REPLAY, N_PHASES };
static const char *const phase_name[N_PHASES] = {"ingest", "hibernate", "scope", "snapshot", "replay"};

#define CHUNKS 8            /* chunks per write request */
#define N_HIB_SESSIONS 6
#define N_FILES 120
#define SNAP_SEED_CHUNKS 20000
#define REPLAY_SEED_CHUNKS 30000

/* ------------------------------------------------------------------ acknowledged chunks */
typedef struct { char sess[32]; long first; int n; } ack_t;
static ack_t *g_acks;
static size_t g_n_acks, g_cap_acks;
static pthread_mutex_t g_ack_mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_long g_next_id = 1000000;   /* token_range start = unique chunk id */
static atomic_llong g_first_ack_us;        /* monotonic time of a trial's first acknowledgement */

static long long mono_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000 + t.tv_nsec / 1000;
}

static void ack_add(const char *sess, long first, int n)
{
    pthread_mutex_lock(&g_ack_mu);
    if (g_n_acks == g_cap_acks) {
        g_cap_acks = g_cap_acks ? g_cap_acks * 2 : 4096;
        g_acks = realloc(g_acks, g_cap_acks * sizeof *g_acks);
        if (!g_acks) { fprintf(stderr, "out of memory\n"); exit(2); }
    }
    ack_t *a = &g_acks[g_n_acks++];
    snprintf(a->sess, sizeof a->sess, "%s", sess);
    a->first = first;
    a->n = n;
    pthread_mutex_unlock(&g_ack_mu);
}

/* ------------------------------------------------------------------ server */
typedef struct {
    const char *bin;
    char dir[4096], log[4200], base[64];
    int port;
    pid_t pid;
    bool small_ram;   /* --max-sessions-in-ram 2 (hibernate phase) */
} server;

static bool srv_start(server *s)
{
    s->port = tu_free_port();
    snprintf(s->base, sizeof s->base, "http://127.0.0.1:%d", s->port);
    char port[16];
    snprintf(port, sizeof port, "%d", s->port);
    char *argv[] = {(char *)s->bin, "serve", "--host", "127.0.0.1", "--port", port, "--data-dir", s->dir,
                    "--threads", "4", "--quiet", s->small_ram ? "--max-sessions-in-ram" : NULL, "2", NULL};
    s->pid = tu_spawn(argv, NULL, s->log);
    if (s->pid <= 0) return false;
    if (!tu_wait_http(s->port, "/healthz", 30000)) {
        tu_kill_wait(s->pid, SIGKILL, 2000);
        s->pid = 0;
        return false;
    }
    return true;
}

static long post(const server *s, const char *path, const char *body, char **out)
{
    char url[8192];
    snprintf(url, sizeof url, "%s%s", s->base, path);
    tu_resp r;
    const char *hdr[] = {"Content-Type: application/json", NULL};
    tu_http("POST", url, body, body ? strlen(body) : 0, body ? hdr : NULL, &r);
    long st = r.status;
    if (out) { *out = r.body; r.body = NULL; }
    tu_resp_free(&r);
    return st;
}

static long get(const server *s, const char *path, char **out)
{
    char url[8192];
    snprintf(url, sizeof url, "%s%s", s->base, path);
    tu_resp r;
    tu_http("GET", url, NULL, 0, NULL, &r);
    long st = r.status;
    if (out) { *out = r.body; r.body = NULL; }
    tu_resp_free(&r);
    return st;
}

/* One /evict/write of n chunks into sess; on 200 the chunks are recorded as acknowledged.
 * Returns the status (0: the connection failed, i.e. the server is gone). */
static long write_batch(const server *s, const char *sess, int n)
{
    long first = atomic_fetch_add(&g_next_id, n);
    size_t cap = (size_t)n * 200 + 128;
    char *body = malloc(cap);
    size_t o = (size_t)snprintf(body, cap, "{\"session_id\":\"%s\",\"chunks\":[", sess);
    for (int k = 0; k < n; k++) {
        long id = first + k;
        o += (size_t)snprintf(body + o, cap - o,
                              "%s{\"text\":\"campaign record %ld in %s: value %ld\",\"token_range\":[%ld,%ld],\"layer\":%d,\"score\":0.5}",
                              k ? "," : "", id, sess, id * 13, id, id, k & 3);
    }
    snprintf(body + o, cap - o, "]}");
    long st = post(s, "/evict/write", body, NULL);
    free(body);
    if (st == 200) ack_add(sess, first, n);
    return st;
}

/* ------------------------------------------------------------------ workloads */
typedef struct {
    server *s;
    int phase, role;
    char proj[4096];
    atomic_int *acks, *stop;
    unsigned seed;
} wk;

static void write_file_v(const char *proj, int f, long v)
{
    char p[4200], body[4096];
    snprintf(p, sizeof p, "%s/src/mod%03d.c", proj, f);
    int n = snprintf(body, sizeof body, "/* module %d, version %ld */\n", f, v);
    for (int i = 0; i < 20; i++)
        n += snprintf(body + n, sizeof body - (size_t)n,
                      "int mod%03d_fn%02d(int x) { return x * %d + %ld; /* ver%ldfile%03d */ }\n", f, i, i + 1, v, v, f);
    tu_write(p, body, (size_t)n);
}

static void *work(void *arg)
{
    wk *w = arg;
    server *s = w->s;
    char sess[32], path[4300];
    for (long it = 0; !atomic_load(w->stop); it++) {
        long st = 200;
        switch (w->phase) {
        case PH_INGEST:
            st = write_batch(s, "ingest", CHUNKS);
            break;
        case PH_HIBERNATE:
            snprintf(sess, sizeof sess, "hib-%ld", (it + (long)w->role * 3) % N_HIB_SESSIONS);
            if (w->role == 0) st = write_batch(s, sess, CHUNKS);
            else {
                snprintf(path, sizeof path, "/sessions/%s/%s", sess, (it & 1) ? "resume" : "hibernate");
                st = post(s, path, NULL, NULL);
            }
            break;
        case PH_SCOPE:
            if (w->role == 0) st = write_batch(s, "scope-side", CHUNKS);
            else {
                for (int k = 0; k < 5; k++) write_file_v(w->proj, (int)(rand_r(&w->seed) % N_FILES), it * 10 + k + 7);
                snprintf(path, sizeof path, "/index?scope=%s", w->proj);
                st = post(s, path, NULL, NULL);
            }
            break;
        case PH_REPLAY:
            st = write_batch(s, "replay", CHUNKS);
            break;
        case PH_SNAPSHOT:
            if (w->role == 0) {
                st = write_batch(s, "snap", 200);
                if (st == 200) st = post(s, "/sessions/snap/hibernate", NULL, NULL);
            } else {
                st = write_batch(s, "snap-side", CHUNKS);
            }
            break;
        }
        if (st == 0) break;   /* the server is gone */
        if (st == 200) {
            long long z = 0;
            atomic_compare_exchange_strong(&g_first_ack_us, &z, mono_us());
            atomic_fetch_add(w->acks, 1);
        }
        else if (st >= 500) fprintf(stderr, "kill9: %s role %d: HTTP %ld before the kill\n", phase_name[w->phase], w->role, st);
    }
    return NULL;
}

/* ------------------------------------------------------------------ checks */
static int validate_tree(const char *dir, int depth, int *n_stores)
{
    char p[4400];
    snprintf(p, sizeof p, "%s/chunks.log", dir);
    struct stat st;
    int bad = 0;
    if (stat(p, &st) == 0) {
        char msg[512];
        int rc = lcx_store_validate(dir, msg, sizeof msg);
        (*n_stores)++;
        if (rc < 0) {
            fprintf(stderr, "kill9: INVALID store %s: %s (%s)\n", dir, lcx_strerror(rc), msg);
            bad++;
        }
    }
    if (depth <= 0) return bad;
    DIR *d = opendir(dir);
    if (!d) return bad;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (stat(p, &st) == 0 && S_ISDIR(st.st_mode)) bad += validate_tree(p, depth - 1, n_stores);
    }
    closedir(d);
    return bad;
}

static int cmp_long(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;
    return x < y ? -1 : x > y;
}

/* Acknowledged chunks missing from the restarted server's dumps. */
static long count_lost(const server *s)
{
    long lost = 0;
    char done[64][32];
    int n_done = 0;
    for (size_t i = 0; i < g_n_acks; i++) {
        const char *sess = g_acks[i].sess;
        bool seen = false;
        for (int k = 0; k < n_done && !seen; k++) seen = !strcmp(done[k], sess);
        if (seen || n_done == 64) continue;
        snprintf(done[n_done++], 32, "%s", sess);
        char path[256], *body = NULL;
        snprintf(path, sizeof path, "/evict/dump?session_id=%s", sess);
        long st = get(s, path, &body);
        cJSON *j = st == 200 ? cJSON_Parse(body) : NULL;
        free(body);
        const cJSON *tr = cJSON_GetObjectItemCaseSensitive(j, "token_ranges"), *x;
        size_t n = 0, cap = (size_t)cJSON_GetArraySize(tr) + 1;
        long *have = malloc(cap * sizeof *have);
        cJSON_ArrayForEach(x, tr) have[n++] = (long)cJSON_GetArrayItem(x, 0)->valuedouble;
        qsort(have, n, sizeof *have, cmp_long);
        for (size_t a = i; a < g_n_acks; a++) {
            if (strcmp(g_acks[a].sess, sess)) continue;
            for (int k = 0; k < g_acks[a].n; k++) {
                long id = g_acks[a].first + k;
                if (!bsearch(&id, have, n, sizeof *have, cmp_long)) {
                    if (lost < 5) fprintf(stderr, "kill9: LOST chunk %ld of session %s (dump: HTTP %ld)\n", id, sess, st);
                    lost++;
                }
            }
        }
        free(have);
        cJSON_Delete(j);
    }
    return lost;
}

/* The scope after a restart: re-index answers 200 with every file, and each sampled
 * file's current content is found. Returns the number of failures. */
static int check_scope(const server *s, const char *proj)
{
    char path[4400], *body = NULL;
    snprintf(path, sizeof path, "/index?scope=%s", proj);
    long st = post(s, path, NULL, &body);
    cJSON *j = st == 200 ? cJSON_Parse(body) : NULL;
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(j, "files");
    int bad = 0;
    if (!cJSON_IsNumber(f) || (int)f->valuedouble != N_FILES) {
        fprintf(stderr, "kill9: scope re-index after restart: HTTP %ld %s\n", st, body ? body : "");
        bad++;
    }
    cJSON_Delete(j);
    free(body);
    for (int fi = 0; fi < N_FILES && !bad; fi += 17) {
        char fp[4200], *text = NULL;
        snprintf(fp, sizeof fp, "%s/src/mod%03d.c", proj, fi);
        size_t len = 0;
        FILE *fh = fopen(fp, "rb");
        if (fh) {
            text = malloc(8192);
            len = fread(text, 1, 8191, fh);
            text[len] = 0;
            fclose(fh);
        }
        long ver = -1;
        if (text) sscanf(text, "/* module %*d, version %ld", &ver);
        free(text);
        char tok[64];
        snprintf(tok, sizeof tok, "ver%ldfile%03d", ver, fi);
        snprintf(path, sizeof path, "/retrieve?scope=%s&query=mod%03d_fn03%%20%s&top_k=5", proj, fi, tok);
        st = post(s, path, NULL, &body);
        if (st != 200 || !body || !strstr(body, tok)) {
            fprintf(stderr, "kill9: scope file %d (%s) not found after restart: HTTP %ld\n", fi, tok, st);
            bad++;
        }
        free(body);
        body = NULL;
    }
    return bad;
}

/* Removes the snapshot of session id (found by its sessions/<hash>/id file), so that the
 * next load replays the whole log: a snapshot is a cache the store may always lack.
 * Returns true when one was removed. */
static bool drop_snapshot(const char *data_dir, const char *id)
{
    char p[4400];
    snprintf(p, sizeof p, "%s/sessions", data_dir);
    DIR *d = opendir(p);
    if (!d) return false;
    struct dirent *e;
    bool dropped = false;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char buf[64] = "";
        snprintf(p, sizeof p, "%s/sessions/%s/id", data_dir, e->d_name);
        FILE *f = fopen(p, "rb");
        if (!f) continue;
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = 0;
        if (strcmp(buf, id)) continue;
        snprintf(p, sizeof p, "%s/sessions/%s/index.snap", data_dir, e->d_name);
        dropped = unlink(p) == 0;
    }
    closedir(d);
    return dropped;
}

/* ------------------------------------------------------------------ main */
static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

int main(int argc, char **argv)
{
    const char *bin = NULL;
    int trials = 100, max_delay = 400;
    unsigned seed = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--bin") && i + 1 < argc) bin = argv[++i];
        else if (!strcmp(argv[i], "--trials") && i + 1 < argc) trials = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = (unsigned)strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--max-delay-ms") && i + 1 < argc) max_delay = atoi(argv[++i]);
        else { fprintf(stderr, "usage: %s --bin longctx-svc [--trials N] [--seed S] [--max-delay-ms D]\n", argv[0]); return 2; }
    }
    if (!bin || trials < 1 || max_delay < 0) { fprintf(stderr, "kill9: --bin is required\n"); return 2; }
    curl_global_init(CURL_GLOBAL_ALL);
    srand(seed);
    server s = {.bin = bin};
    char *d = tu_tmpdir();
    snprintf(s.dir, sizeof s.dir, "%s/data", d);
    snprintf(s.log, sizeof s.log, "%s/svc.log", d);
    char proj[4096];
    snprintf(proj, sizeof proj, "%s/project", d);
    char p[4200];
    snprintf(p, sizeof p, "%s/src", proj);
    mkdir(proj, 0700);
    mkdir(p, 0700);
    snprintf(p, sizeof p, "%s/.git", proj);
    mkdir(p, 0700);
    for (int f = 0; f < N_FILES; f++) write_file_v(proj, f, 0);

    int n_ph[N_PHASES] = {0}, lost_ph[N_PHASES] = {0}, inval_ph[N_PHASES] = {0}, scope_bad = 0, start_fail = 0;
    long acked_reqs[N_PHASES] = {0};
    double *restart_ms = calloc((size_t)trials, sizeof *restart_ms), *delay = calloc((size_t)trials, sizeof *delay);
    int stores_checked = 0, replay_kills_before_ack = 0;
    bool replay_seeded = false;
    int replay_est_ms = max_delay;
    bool scope_indexed = false;
    if (!srv_start(&s)) { fprintf(stderr, "kill9: server did not start (log %s)\n", s.log); return 1; }
    for (int t = 0; t < trials; t++) {
        int ph = t % N_PHASES;
        /* the hibernate phase needs its own flags: restart into them (and out again) */
        bool want_small = ph == PH_HIBERNATE;
        if (want_small != s.small_ram) {
            tu_kill_wait(s.pid, SIGTERM, 20000);
            s.small_ram = want_small;
            if (!srv_start(&s)) { start_fail++; break; }
        }
        if (ph == PH_SNAPSHOT && t < N_PHASES) {   /* seed the big session once */
            for (int k = 0; k < SNAP_SEED_CHUNKS / 500; k++)
                if (write_batch(&s, "snap", 500) != 200) break;
        }
        double t0 = 0;
        if (ph == PH_REPLAY) {
            if (!replay_seeded) {
                for (int k = 0; k < REPLAY_SEED_CHUNKS / 500; k++)
                    if (write_batch(&s, "replay", 500) != 200) { fprintf(stderr, "kill9: replay seed refused\n"); break; }
                replay_seeded = true;
            }
            /* a fresh start: the session is loaded (its log replayed) by the first request */
            kill(s.pid, SIGKILL);
            tu_kill_wait(s.pid, 0, 10000);
            drop_snapshot(s.dir, "replay");
            if (!srv_start(&s)) { fprintf(stderr, "kill9: trial %d: start failed (log %s)\n", t, s.log); start_fail++; break; }
            t0 = now_ms();
        }
        if (ph == PH_SCOPE && !scope_indexed) {
            snprintf(p, sizeof p, "/index?scope=%s", proj);
            scope_indexed = post(&s, p, NULL, NULL) == 200;
        }
        atomic_int acks = 0, stop = 0;
        atomic_store(&g_first_ack_us, 0);
        wk w[2];
        pthread_t th[2];
        for (int r = 0; r < 2; r++) {
            w[r] = (wk){.s = &s, .phase = ph, .role = r, .acks = &acks, .stop = &stop, .seed = seed * 7919u + (unsigned)t * 31u + (unsigned)r};
            snprintf(w[r].proj, sizeof w[r].proj, "%s", proj);
            pthread_create(&th[r], NULL, work, &w[r]);
        }
        if (ph != PH_REPLAY) {
            t0 = now_ms();
            while (atomic_load(&acks) < 1 && now_ms() - t0 < 20000) usleep(500);
        }
        /* the replay phase aims at the replay: 0..(last replay time × 1.25), at most max-delay */
        int dmax = ph == PH_REPLAY && replay_est_ms < max_delay ? replay_est_ms : max_delay;
        delay[t] = dmax ? (double)(rand() % (dmax + 1)) : 0;
        usleep((useconds_t)(delay[t] * 1000));
        kill(s.pid, SIGKILL);
        if (ph == PH_REPLAY && atomic_load(&acks) == 0) replay_kills_before_ack++;
        if (ph == PH_REPLAY && atomic_load(&acks)) {   /* how long the replay took */
            double first = (double)atomic_load(&g_first_ack_us) / 1e3 - t0;
            replay_est_ms = (int)(first * 1.25) + 1;
            if (getenv("KILL9_VERBOSE")) fprintf(stderr, "trial %3d replay: first acknowledgement %.0f ms after /healthz\n", t, first);
        }
        int wst = tu_kill_wait(s.pid, 0, 10000);
        s.pid = 0;
        atomic_store(&stop, 1);
        for (int r = 0; r < 2; r++) pthread_join(th[r], NULL);
        acked_reqs[ph] += atomic_load(&acks);
        n_ph[ph]++;
        if (!WIFSIGNALED(wst)) fprintf(stderr, "kill9: trial %d: server was not killed by the signal (status %d)\n", t, wst);
        /* every store as the crash left it */
        int ns = 0;
        inval_ph[ph] += validate_tree(s.dir, 3, &ns);
        stores_checked += ns;
        double r0 = now_ms();
        if (!srv_start(&s)) { fprintf(stderr, "kill9: trial %d: restart failed (log %s)\n", t, s.log); start_fail++; break; }
        restart_ms[t] = now_ms() - r0;
        long lost = count_lost(&s);
        lost_ph[ph] += (int)lost;
        if (ph == PH_SCOPE) scope_bad += check_scope(&s, proj);
        if (lost || getenv("KILL9_VERBOSE"))
            fprintf(stderr, "trial %3d %-9s kill after %5.0f ms: %d acks, %ld lost, restart %.0f ms\n", t, phase_name[ph],
                    delay[t], atomic_load(&acks), lost, restart_ms[t]);
    }
    int done = 0, total_lost = 0, total_inval = 0;
    printf("kill -9 campaign: %d trials, seed %u, kill 0..%d ms after the first acknowledged request\n", trials, seed, max_delay);
    printf("%-10s %7s %12s %6s %14s\n", "phase", "trials", "acked reqs", "lost", "invalid stores");
    for (int ph = 0; ph < N_PHASES; ph++) {
        printf("%-10s %7d %12ld %6d %14d\n", phase_name[ph], n_ph[ph], acked_reqs[ph], lost_ph[ph], inval_ph[ph]);
        done += n_ph[ph];
        total_lost += lost_ph[ph];
        total_inval += inval_ph[ph];
    }
    qsort(restart_ms, (size_t)done, sizeof *restart_ms, cmp_dbl);
    printf("total: %d trials, %zu acknowledged chunk batches, %d chunks lost, %d of %d store checks invalid, "
           "%d scope checks failed, %d failed starts; %d of %d replay kills before the first acknowledgement; "
           "restart median %.0f ms, p90 %.0f ms\n",
           done, g_n_acks, total_lost, total_inval, stores_checked, scope_bad, start_fail, replay_kills_before_ack,
           n_ph[PH_REPLAY],
           done ? restart_ms[done / 2] : 0.0, done ? restart_ms[(done * 9) / 10 < done ? (done * 9) / 10 : done - 1] : 0.0);
    if (s.pid > 0) tu_kill_wait(s.pid, SIGTERM, 20000);
    int bad = total_lost || total_inval || scope_bad || start_fail || done != trials;
    if (!bad && !getenv("KILL9_KEEP")) tu_rmrf(d);
    else fprintf(stderr, "kill9: data and log kept in %s\n", d);
    free(d);
    free(restart_ms);
    free(delay);
    free(g_acks);
    curl_global_cleanup();
    return bad ? 1 : 0;
}
