/* inotify watcher: keeps loaded scopes fresh without re-walking them.
 *
 * One inotify instance per loaded scope (so two scopes that share directories — a
 * monorepo and one of its packages — never fight over a watch descriptor, and unloading
 * a scope releases all its watches with one close()). Every directory the walker enters
 * is watched. One thread polls all instances plus a wake pipe.
 *
 * Events are reduced to "this scope-relative path changed" and queued per scope
 * (deduplicated). A queue is applied once the scope has been quiet for debounce_ms
 * (default 100 ms), or 1 s after its first event at the latest, so an editor's
 * write-rename-chmod burst costs one re-index. Applying a path = stat it: a covered,
 * non-ignored regular file is re-indexed if its size/mtime/hash changed; a missing or now
 * ignored one is dropped (with everything below it when it was a directory); a new
 * directory is walked (and watched). IN_Q_OVERFLOW, more than LCX_MAX_PENDING queued
 * paths, or a changed .gitignore fall back to a full rescan of the scope (which only
 * re-reads files whose size/mtime changed). */
#define _GNU_SOURCE 1   /* pipe2 */
#include "scope/scopes_int.h"
#include "util/util.h"
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#define WATCH_MASK (IN_CREATE | IN_DELETE | IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | \
                    IN_DELETE_SELF | IN_MOVE_SELF | IN_ATTRIB | IN_ONLYDIR | IN_DONT_FOLLOW | IN_EXCL_UNLINK)
#define MAX_BURST_MS 1000.0

void lcx__scope_watch_dir(lcx_scopes *m, lcx_scope *s, const char *rel)
{
    if (!m->o.watch) return;
    if (s->inotify_fd < 0) {
        s->inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
        if (s->inotify_fd < 0) return;   /* out of instances: the scope is simply not watched */
    }
    char abs[PATH_MAX * 2];
    snprintf(abs, sizeof abs, "%s%s%s", s->root, *rel ? "/" : "", rel);
    int wd = inotify_add_watch(s->inotify_fd, abs, WATCH_MASK);
    if (wd < 0) return;                  /* ENOSPC (max_user_watches) or gone: not fatal */
    for (int i = 0; i < s->n_wd; i++) {
        if (s->wd[i] == wd) {
            char *r = strdup(rel);
            if (r) { free(s->wd_rel[i]); s->wd_rel[i] = r; }
            return;
        }
    }
    if (s->n_wd == s->cap_wd) {
        int nc = s->cap_wd ? s->cap_wd * 2 : 64;
        int *nw = realloc(s->wd, (size_t)nc * sizeof *nw);
        if (!nw) return;
        s->wd = nw;
        char **nr = realloc(s->wd_rel, (size_t)nc * sizeof *nr);
        if (!nr) return;
        s->wd_rel = nr;
        s->cap_wd = nc;
    }
    char *r = strdup(rel);
    if (!r) { inotify_rm_watch(s->inotify_fd, wd); return; }
    s->wd[s->n_wd] = wd;
    s->wd_rel[s->n_wd] = r;
    s->n_wd++;
}

void lcx__scope_unwatch(lcx_scopes *m, lcx_scope *s)
{
    (void)m;
    if (s->inotify_fd >= 0) close(s->inotify_fd);   /* releases every watch of the scope */
    s->inotify_fd = -1;
    for (int i = 0; i < s->n_wd; i++) free(s->wd_rel[i]);
    free(s->wd);
    free(s->wd_rel);
    s->wd = NULL;
    s->wd_rel = NULL;
    s->n_wd = s->cap_wd = 0;
}

void lcx__scope_pending_free(lcx_scope *s)
{
    for (int i = 0; i < s->n_pending; i++) free(s->pending[i]);
    free(s->pending);
    s->pending = NULL;
    s->n_pending = 0;
}

static void queue(lcx_scope *s, const char *rel)
{
    double now = lcx__now_ms();
    if (!s->n_pending && !s->pending_rescan) s->first_event_ms = now;
    s->last_event_ms = now;
    if (s->pending_rescan) return;
    for (int i = 0; i < s->n_pending; i++)
        if (!strcmp(s->pending[i], rel)) return;
    if (s->n_pending >= LCX_MAX_PENDING) {
        s->pending_rescan = true;
        lcx__scope_pending_free(s);
        return;
    }
    if (!s->pending) {
        s->pending = calloc(LCX_MAX_PENDING, sizeof *s->pending);
        if (!s->pending) { s->pending_rescan = true; return; }
    }
    char *r = strdup(rel);
    if (!r) { s->pending_rescan = true; return; }
    s->pending[s->n_pending++] = r;
}

/* Reads all queued inotify events of s (non-blocking). s->mu held. */
static void drain(lcx_scope *s)
{
    if (s->inotify_fd < 0) return;
    char buf[65536] __attribute__((aligned(__alignof__(struct inotify_event))));
    for (;;) {
        ssize_t n = read(s->inotify_fd, buf, sizeof buf);
        if (n <= 0) return;
        for (char *p = buf; p < buf + n;) {
            struct inotify_event *ev = (struct inotify_event *)p;
            p += sizeof *ev + ev->len;
            if (ev->mask & IN_Q_OVERFLOW) {
                s->pending_rescan = true;
                queue(s, "");
                continue;
            }
            int k;
            for (k = 0; k < s->n_wd; k++)
                if (s->wd[k] == ev->wd) break;
            if (k == s->n_wd) continue;
            const char *dir = s->wd_rel[k];
            if (ev->mask & IN_IGNORED) {   /* watch gone (directory deleted/moved) */
                free(s->wd_rel[k]);
                s->wd[k] = s->wd[s->n_wd - 1];
                s->wd_rel[k] = s->wd_rel[s->n_wd - 1];
                s->n_wd--;
                continue;
            }
            if (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF)) {
                if (*dir) queue(s, dir);
                else s->pending_rescan = true, queue(s, "");
                continue;
            }
            if (!ev->len || !ev->name[0]) continue;
            char rel[PATH_MAX];
            int w = snprintf(rel, sizeof rel, "%s%s%s", dir, *dir ? "/" : "", ev->name);
            if (w < 0 || (size_t)w >= sizeof rel) continue;
            if (!strcmp(ev->name, ".gitignore")) {
                s->pending_rescan = true;
                queue(s, "");
                continue;
            }
            queue(s, rel);
        }
    }
}

/* Applies the queue of s. s->mu held. */
static void apply(lcx_scopes *m, lcx_scope *s)
{
    if (!s->ready || s->promoting) return;   /* after the promotion: its build may have the table */
    int rc = 0;
    if (s->pending_rescan) {
        s->pending_rescan = false;
        lcx__scope_pending_free(s);
        rc = lcx__scope_rescan(m, s);
    } else {
        char **p = s->pending;
        int n = s->n_pending;
        s->pending = NULL;
        s->n_pending = 0;
        for (int i = 0; i < n; i++) {
            int r = lcx__scope_apply_path(m, s, p[i]);
            if (r < 0 && !rc) rc = r;
            free(p[i]);
        }
        free(p);
        int r = lcx__scope_save(s);
        if (r < 0 && !rc) rc = r;
    }
    if (rc < 0) fprintf(stderr, "longctx: watcher: scope %s: %s\n", s->root, lcx_strerror(rc));
}

static bool due(const lcx_scopes *m, const lcx_scope *s, double now)
{
    if (!s->n_pending && !s->pending_rescan) return false;
    return now - s->last_event_ms >= m->o.debounce_ms || now - s->first_event_ms >= MAX_BURST_MS;
}

int lcx_scopes_sync(lcx_scopes *m)
{
    lcx_scope *v[256];
    int n = 0;
    pthread_mutex_lock(&m->mu);
    for (lcx_scope *s = m->head; s && n < 256; s = s->next) {
        s->refs++;
        v[n++] = s;
    }
    pthread_mutex_unlock(&m->mu);
    for (int i = 0; i < n; i++) {
        pthread_mutex_lock(&v[i]->mu);
        drain(v[i]);
        apply(m, v[i]);
        pthread_mutex_unlock(&v[i]->mu);
        lcx__scopes_release(m, v[i]);
    }
    return 0;
}

static void *watcher_main(void *arg)
{
    lcx_scopes *m = arg;
    for (;;) {
        lcx_scope *v[256];
        struct pollfd pf[257];
        int n = 0;
        pthread_mutex_lock(&m->mu);
        if (m->stopping) { pthread_mutex_unlock(&m->mu); break; }
        for (lcx_scope *s = m->head; s && n < 256; s = s->next) {
            s->refs++;
            v[n++] = s;
        }
        pthread_mutex_unlock(&m->mu);
        int timeout = 1000;
        double now = lcx__now_ms();
        pf[0] = (struct pollfd){.fd = m->wake[0], .events = POLLIN};
        int np = 1;
        for (int i = 0; i < n; i++) {
            pthread_mutex_lock(&v[i]->mu);
            int fd = v[i]->inotify_fd;
            if ((v[i]->n_pending || v[i]->pending_rescan) && !v[i]->promoting) {   /* applied after it (kicked) */
                double left = LCX_MIN(v[i]->last_event_ms + m->o.debounce_ms, v[i]->first_event_ms + MAX_BURST_MS) - now;
                int t = left <= 0 ? 0 : (int)left + 1;
                if (t < timeout) timeout = t;
            }
            pthread_mutex_unlock(&v[i]->mu);
            pf[np++] = (struct pollfd){.fd = fd, .events = fd >= 0 ? POLLIN : 0};
        }
        int r = poll(pf, (nfds_t)np, timeout);
        if (r > 0 && (pf[0].revents & POLLIN)) {
            char junk[64];
            while (read(m->wake[0], junk, sizeof junk) > 0) {}
        }
        now = lcx__now_ms();
        for (int i = 0; i < n; i++) {
            lcx_scope *s = v[i];
            pthread_mutex_lock(&s->mu);
            if (pf[i + 1].revents & POLLIN) drain(s);
            if (due(m, s, lcx__now_ms())) apply(m, s);
            pthread_mutex_unlock(&s->mu);
            lcx__scopes_release(m, s);
        }
    }
    return NULL;
}

int lcx__scope_watcher_start(lcx_scopes *m)
{
    if (pipe2(m->wake, O_NONBLOCK | O_CLOEXEC) < 0) return LCX_EIO;
    if (pthread_create(&m->wth, NULL, watcher_main, m) != 0) {
        close(m->wake[0]);
        close(m->wake[1]);
        return LCX_ENOMEM;
    }
    m->wth_running = true;
    return 0;
}

void lcx__scope_watcher_kick(lcx_scopes *m)
{
    if (m->wth_running) {
        ssize_t w = write(m->wake[1], "k", 1);
        (void)w;
    }
}

void lcx__scope_watcher_stop(lcx_scopes *m)
{
    if (!m->wth_running) return;
    pthread_mutex_lock(&m->mu);
    m->stopping = true;
    pthread_mutex_unlock(&m->mu);
    lcx__scope_watcher_kick(m);
    pthread_join(m->wth, NULL);
    close(m->wake[0]);
    close(m->wake[1]);
    m->wth_running = false;
}
