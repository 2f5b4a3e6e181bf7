/* Sessions and scopes: the session → scopes binding table, the per-session path-cluster
 * tracker (lcx__scopes_cluster_turn), and background jobs: index builds
 * (lcx__scopes_index_async) and Hot → Package promotions (lcx__scopes_promote_async).
 * Locks: the binding table, clusters, job slots and the promotion hold are guarded by
 * m->mu (jobs signal m->cv on exit); a background job takes s->mu only after releasing
 * m->mu (scopes.c has the lock order). */
#include "scope/scope_int.h"
#include "scope/scopes_int.h"
#include "util/util.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- sessions */

#define MAX_BINDINGS 4096

void lcx__binding_clear(lcx_binding *b)
{
    free(b->session);
    for (int i = 0; i < b->n_cl; i++) free(b->cl[i].dir);
    b->session = NULL;
    b->n_cl = 0;
}

/* The session's binding, created when absent (m->mu held); NULL on OOM. */
static lcx_binding *binding_get_locked(lcx_scopes *m, const char *session)
{
    m->tick++;
    lcx_binding *b = NULL;
    for (int i = 0; i < m->n_bind; i++)
        if (!strcmp(m->bind[i].session, session)) { b = &m->bind[i]; break; }
    if (!b) {
        if (m->n_bind == m->cap_bind && m->cap_bind < MAX_BINDINGS) {
            int nc = m->cap_bind ? m->cap_bind * 2 : 16;
            lcx_binding *nb = realloc(m->bind, (size_t)nc * sizeof *nb);
            if (nb) { m->bind = nb; m->cap_bind = nc; }
        }
        if (m->n_bind < m->cap_bind) {
            b = &m->bind[m->n_bind++];
        } else {   /* full: reuse the least recently used binding */
            b = &m->bind[0];
            for (int i = 1; i < m->n_bind; i++)
                if (m->bind[i].used < b->used) b = &m->bind[i];
            lcx__binding_clear(b);
        }
        memset(b, 0, sizeof *b);
        b->session = strdup(session);
        if (!b->session) {   /* drop the slot: move the last binding into it */
            m->n_bind--;
            if (b != &m->bind[m->n_bind]) memcpy(b, &m->bind[m->n_bind], sizeof *b);
            return NULL;
        }
    }
    b->used = m->tick;
    return b;
}

void lcx__scopes_bind(lcx_scopes *m, const char *session, const char *root)
{
    if (!session || !*session) return;
    pthread_mutex_lock(&m->mu);
    lcx_binding *b = binding_get_locked(m, session);
    if (!b) { pthread_mutex_unlock(&m->mu); return; }
    int k;
    for (k = 0; k < b->n; k++)
        if (!strcmp(b->roots[k], root)) break;
    if (k == b->n) {
        if (b->n < LCX_MAX_BOUND) b->n++;
        k = b->n - 1;   /* the oldest binding falls off when full */
    }
    /* move to front */
    for (int j = k; j > 0; j--) memcpy(b->roots[j], b->roots[j - 1], sizeof b->roots[0]);
    snprintf(b->roots[0], sizeof b->roots[0], "%s", root);
    pthread_mutex_unlock(&m->mu);
}

static int path_depth(const char *p)
{
    int d = 0;
    for (const char *c = p; *c; c++)
        if (*c == '/' && c[1] && c[1] != '/') d++;
    return d;
}

void lcx__scopes_cluster_turn(lcx_scopes *m, const char *session, char *const *paths, int n_paths,
                              char *active, size_t cap, char (*spec)[LCX_SCOPE_PATH_MAX], int *n_spec)
{
    if (active && cap) active[0] = 0;
    *n_spec = 0;
    if (!session || !*session) return;
    pthread_mutex_lock(&m->mu);
    lcx_binding *b = binding_get_locked(m, session);
    if (!b) { pthread_mutex_unlock(&m->mu); return; }
    uint32_t turn = ++b->turn;
    int before[LCX_MAX_CLUSTERS];
    for (int i = 0; i < b->n_cl; i++) before[i] = b->cl[i].state;
    for (int p = 0; p < n_paths; p++) {
        const char *path = paths[p];
        const char *sl = strrchr(path, '/');
        if (!sl || sl == path || path[0] != '/') continue;
        size_t dl = (size_t)(sl - path);
        lcx_cluster *c = NULL;
        for (int i = 0; i < b->n_cl && !c; i++)
            if (strlen(b->cl[i].dir) == dl && !strncmp(b->cl[i].dir, path, dl)) c = &b->cl[i];
        if (!c) {
            char *d = strndup(path, dl);
            if (!d) continue;
            if (b->n_cl < LCX_MAX_CLUSTERS) {
                before[b->n_cl] = LCX_CL_NONE;
                c = &b->cl[b->n_cl++];
            } else {   /* full: the least recently fed directory makes room */
                int v = 0;
                for (int i = 1; i < b->n_cl; i++)
                    if (b->cl[i].last_turn < b->cl[v].last_turn) v = i;
                c = &b->cl[v];
                free(c->dir);
                before[v] = LCX_CL_NONE;
            }
            memset(c, 0, sizeof *c);
            c->dir = d;
        }
        uint64_t h = lcx__hash64(path, strlen(path), 0xc1u);
        bool seen = false;
        for (int i = 0; i < c->n_files && !seen; i++) seen = c->files[i] == h;
        if (seen) continue;
        if (c->n_files < LCX_CLUSTER_FILES) c->files[c->n_files++] = h;
        c->last_turn = turn;   /* a fresh mention */
    }
    int best = -1;
    for (int i = 0; i < b->n_cl; i++) {
        lcx_cluster *c = &b->cl[i];
        bool fresh = c->last_turn == turn;
        if (!fresh && turn - c->last_turn >= LCX_CLUSTER_IDLE_TURNS) {   /* demoted: forgotten */
            free(c->dir);
            b->cl[i] = b->cl[b->n_cl - 1];
            before[i] = before[b->n_cl - 1];
            b->n_cl--;
            i--;
            continue;
        }
        if (fresh) {
            if (c->n_files >= LCX_CLUSTER_ACTIVE_FILES || (before[i] == LCX_CL_SPECULATIVE && c->n_files >= LCX_CLUSTER_SPEC_FILES))
                c->state = LCX_CL_ACTIVE;
            else if (c->n_files >= LCX_CLUSTER_SPEC_FILES && c->state == LCX_CL_NONE)
                c->state = LCX_CL_SPECULATIVE;
            if (c->state == LCX_CL_SPECULATIVE && before[i] == LCX_CL_NONE && *n_spec < LCX_CLUSTER_SPECULATE)
                snprintf(spec[(*n_spec)++], LCX_SCOPE_PATH_MAX, "%s", c->dir);
        }
        if (c->state == LCX_CL_ACTIVE && path_depth(c->dir) >= LCX_CLUSTER_MIN_DEPTH &&
            (best < 0 || c->n_files > b->cl[best].n_files ||
             (c->n_files == b->cl[best].n_files && c->last_turn > b->cl[best].last_turn)))
            best = i;
    }
    if (best >= 0 && active && strlen(b->cl[best].dir) < cap) strcpy(active, b->cl[best].dir);
    pthread_mutex_unlock(&m->mu);
}

bool lcx__scopes_ready(lcx_scopes *m, const char *root)
{
    pthread_mutex_lock(&m->mu);
    lcx_scope *s = m->head;
    while (s && strcmp(s->root, root)) s = s->next;
    bool ready = s && __atomic_load_n(&s->ready, __ATOMIC_ACQUIRE);
    pthread_mutex_unlock(&m->mu);
    return ready;
}

typedef struct {
    lcx_scopes *m;
    int slot;
    char **mentions;
    int n_mentions;
    char tag[24];
    lcx_scope *promote;      /* a promotion of this scope (referenced by the job) */
} index_job;

static int job_progress(uint64_t done, uint64_t found, uint64_t bytes, void *ud)
{
    (void)done, (void)found, (void)bytes;
    return __atomic_load_n(&((lcx_scopes *)ud)->closing, __ATOMIC_ACQUIRE) ? 1 : 0;
}

/* Frees the job's slot (wakes lcx_scopes_close and lcx__scopes_wait_jobs) and the job. */
static void job_end(index_job *j)
{
    lcx_scopes *m = j->m;
    for (int i = 0; i < j->n_mentions; i++) free(j->mentions[i]);
    free(j->mentions);
    pthread_mutex_lock(&m->mu);
    free(m->jobs[j->slot]);
    m->jobs[j->slot] = NULL;
    m->n_jobs--;
    pthread_cond_broadcast(&m->cv);
    pthread_mutex_unlock(&m->mu);
    free(j);
}

static void *promote_main(void *arg)
{
    index_job *j = arg;
    lcx_scopes *m = j->m;
    lcx_scope *s = j->promote;
    pthread_mutex_lock(&m->mu);
    while (m->promote_hold && !m->closing) pthread_cond_wait(&m->cv, &m->mu);
    pthread_mutex_unlock(&m->mu);
    pthread_mutex_lock(&s->mu);
    int rc = lcx__scope_promote(m, s, job_progress, m);
    pthread_mutex_unlock(&s->mu);
    if (rc) fprintf(stderr, "longctx: scope %s: Hot → Package promotion failed (%s); the Hot index serves\n",
                    lcx__scope_root(s), lcx_strerror(rc));
    lcx__scope_watcher_kick(m);   /* changes queued meanwhile can be applied now */
    lcx__scopes_release(m, s);
    job_end(j);
    return NULL;
}

static void *job_main(void *arg)
{
    index_job *j = arg;
    lcx_scopes *m = j->m;
    lcx_scope *s = NULL;
    int rc = lcx__scopes_acquire(m, m->jobs[j->slot], (const char *const *)j->mentions, j->n_mentions, false,
                                 job_progress, m, &s);
    if (rc == 0) {
        pthread_mutex_lock(&s->mu);
        if (j->tag[0] && !s->sentinel[0]) snprintf(s->sentinel, sizeof s->sentinel, "%s", j->tag);
        pthread_mutex_unlock(&s->mu);
        lcx__scopes_release(m, s);
    }
    job_end(j);
    return NULL;
}

/* Starts j on a slot (m->mu taken here): 0 started, 1 already running (index builds) or
 * closing, LCX_ELIMIT / LCX_ENOMEM. A promotion job takes a reference to its scope. */
static int job_start(lcx_scopes *m, index_job *j, const char *root)
{
    int rc = 0;
    pthread_mutex_lock(&m->mu);
    int slot = -1;
    bool running = false;
    for (int i = 0; i < LCX_MAX_JOBS; i++) {
        if (m->jobs[i] && !strcmp(m->jobs[i], root)) running = true;
        if (!m->jobs[i] && slot < 0) slot = i;
    }
    /* a promotion is deduplicated by s->promoting; it may run beside a job that loaded
     * the same root and is finishing */
    if ((running && !j->promote) || m->closing) rc = 1;
    else if (slot < 0) rc = LCX_ELIMIT;
    else if (!(m->jobs[slot] = strdup(root))) rc = LCX_ENOMEM;
    if (rc == 0) {
        j->slot = slot;
        pthread_attr_t a;
        pthread_attr_init(&a);
        pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
        pthread_t t;
        if (j->promote) j->promote->refs++;
        if (pthread_create(&t, &a, j->promote ? promote_main : job_main, j) != 0) {
            if (j->promote) j->promote->refs--;   /* the caller's reference remains */
            free(m->jobs[slot]);
            m->jobs[slot] = NULL;
            rc = LCX_ELIMIT;
        } else {
            m->n_jobs++;
        }
        pthread_attr_destroy(&a);
    }
    pthread_mutex_unlock(&m->mu);
    return rc;
}

void lcx__scopes_promote_async(lcx_scopes *m, lcx_scope *s)
{
    index_job *j = calloc(1, sizeof *j);
    int rc = LCX_ENOMEM;
    if (j) {
        j->m = m;
        j->promote = s;
        rc = job_start(m, j, s->root);
    }
    if (rc == 0) return;
    free(j);
    /* no job (too many, out of memory, closing): promote on this thread, as before */
    pthread_mutex_lock(&s->mu);
    lcx__scope_promote(m, s, NULL, NULL);
    pthread_mutex_unlock(&s->mu);
}

void lcx__scopes_hold_promotions(lcx_scopes *m, bool hold)
{
    pthread_mutex_lock(&m->mu);
    m->promote_hold = hold;
    pthread_cond_broadcast(&m->cv);
    pthread_mutex_unlock(&m->mu);
}

void lcx__scopes_wait_jobs(lcx_scopes *m)
{
    pthread_mutex_lock(&m->mu);
    while (m->n_jobs > 0) pthread_cond_wait(&m->cv, &m->mu);
    pthread_mutex_unlock(&m->mu);
}

int lcx__scopes_index_async(lcx_scopes *m, const char *root, const char *const *mentions, int n_mentions,
                            const char *sentinel_tag)
{
    index_job *j = calloc(1, sizeof *j);
    if (!j) return LCX_ENOMEM;
    j->m = m;
    if (sentinel_tag) snprintf(j->tag, sizeof j->tag, "%s", sentinel_tag);
    if (n_mentions > 0 && !(j->mentions = calloc((size_t)n_mentions, sizeof *j->mentions))) { free(j); return LCX_ENOMEM; }
    for (int i = 0; i < n_mentions; i++)
        if ((j->mentions[j->n_mentions] = strdup(mentions[i]))) j->n_mentions++;
    int rc = job_start(m, j, root);
    if (rc == 0) return 0;
    for (int i = 0; i < j->n_mentions; i++) free(j->mentions[i]);
    free(j->mentions);
    free(j);
    return rc == 1 ? 0 : rc;
}

int lcx__scopes_bound_loaded(lcx_scopes *m, const char *session, char (*out)[LCX_SCOPE_PATH_MAX], int max)
{
    if (!session || !*session) return 0;
    int n = 0;
    pthread_mutex_lock(&m->mu);
    for (int i = 0; i < m->n_bind; i++) {
        if (strcmp(m->bind[i].session, session)) continue;
        for (int k = 0; k < m->bind[i].n && n < max; k++) {
            lcx_scope *s = m->head;
            while (s && strcmp(s->root, m->bind[i].roots[k])) s = s->next;
            if (s && __atomic_load_n(&s->ready, __ATOMIC_ACQUIRE)) snprintf(out[n++], LCX_SCOPE_PATH_MAX, "%s", s->root);
        }
        break;
    }
    pthread_mutex_unlock(&m->mu);
    return n;
}

int lcx_scopes_session(lcx_scopes *m, const char *session_id, char (*out)[LCX_SCOPE_PATH_MAX], int max)
{
    if (!session_id) return 0;
    int n = 0;
    pthread_mutex_lock(&m->mu);
    for (int i = 0; i < m->n_bind; i++) {
        if (strcmp(m->bind[i].session, session_id)) continue;
        for (int k = 0; k < m->bind[i].n && n < max; k++) snprintf(out[n++], LCX_SCOPE_PATH_MAX, "%s", m->bind[i].roots[k]);
        break;
    }
    pthread_mutex_unlock(&m->mu);
    return n;
}

