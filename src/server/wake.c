/* wake.c — connections that wait without a thread.
 *
 * libmicrohttpd runs a small pool of threads over epoll; a handler or
 * content reader must never block on one of them, or every connection of
 * that thread stalls. So a speech response with no audio ready yet, or a
 * "stream": false / batch request whose synthesis is still running,
 * suspends its connection (MHD_suspend_connection, from its own thread)
 * and returns; whoever has something for it — the engine's audio and done
 * callbacks — calls gp_wake_signal, which resumes it, and libmicrohttpd
 * calls the reader or handler again.
 *
 * A signal that comes while the connection is running (not suspended) is
 * remembered, so the next gp_wake_suspend does not suspend and the caller
 * looks again: no wake-up is lost between "nothing ready" and "suspend".
 *
 * libmicrohttpd does not watch a suspended connection's socket, so the
 * ticker calls gp_wake_check every 100 ms: a suspended connection whose
 * client hung up, or whose deadline passed, is resumed, and the reader or
 * handler notices (gp_job_pump) and ends it. A connection suspended for a
 * second is also resumed once to look again (its reader or handler then
 * suspends anew): a "stream": false request right after a streamed one was
 * seen to stay suspended until the client gave up (about one run in four of
 * tests/test_server_openai_client.c with one stream slot; 0 in 6 with this
 * look). Where the wake-up got lost is not established; the look bounds any
 * lost wake-up to a second. At shutdown
 * every suspended connection is resumed (stopping the daemon with suspended
 * connections is not allowed).
 *
 * One mutex (the server's wake_lock) guards every gp_wake; it is taken by
 * the engine's step thread, the ticker and the connection threads, and only
 * libmicrohttpd's own lock is taken under it.
 */
#include "base/timing.h"
#include "server/server_internal.h"

void gp_wake_init(gp_wake *w, struct MHD_Connection *connection, int fd, double deadline) {
    w->connection = connection;
    w->fd = fd;
    w->deadline = deadline;
    w->suspended = w->signaled = false;
    w->since = 0;
    w->prev = w->next = NULL;
}

static void unlist_locked(gp_server *s, gp_wake *w) {
    if (w->prev)
        w->prev->next = w->next;
    else
        s->suspended = w->next;
    if (w->next) w->next->prev = w->prev;
    w->prev = w->next = NULL;
    w->suspended = false;
    s->n_suspended--;
}

bool gp_wake_suspend(gp_server *s, gp_wake *w) {
    pthread_mutex_lock(&s->wake_lock);
    if (w->signaled) {
        w->signaled = false;
        pthread_mutex_unlock(&s->wake_lock);
        return false;
    }
    w->suspended = true;
    w->since = gp_now_s();
    w->next = s->suspended;
    w->prev = NULL;
    if (s->suspended) s->suspended->prev = w;
    s->suspended = w;
    s->n_suspended++;
    MHD_suspend_connection(w->connection);
    pthread_mutex_unlock(&s->wake_lock);
    return true;
}

static void signal_locked(gp_server *s, gp_wake *w) {
    if (w->suspended) {
        unlist_locked(s, w);
        MHD_resume_connection(w->connection);
    } else {
        w->signaled = true;
    }
}

void gp_wake_signal(gp_server *s, gp_wake *w) {
    pthread_mutex_lock(&s->wake_lock);
    signal_locked(s, w);
    pthread_mutex_unlock(&s->wake_lock);
}

void gp_wake_signal_via(gp_server *s, gp_wake *const *wp) {
    pthread_mutex_lock(&s->wake_lock);
    signal_locked(s, *wp);
    pthread_mutex_unlock(&s->wake_lock);
}

void gp_wake_retarget(gp_server *s, gp_wake **wp, gp_wake *to) {
    pthread_mutex_lock(&s->wake_lock);
    *wp = to;
    pthread_mutex_unlock(&s->wake_lock);
}

void gp_wake_forget(gp_server *s, gp_wake *w) {
    pthread_mutex_lock(&s->wake_lock);
    if (w->suspended) unlist_locked(s, w);
    w->signaled = false;
    pthread_mutex_unlock(&s->wake_lock);
}

void gp_wake_check(gp_server *s, double now) {
    pthread_mutex_lock(&s->wake_lock);
    gp_wake *w = s->suspended;
    while (w) {
        gp_wake *next = w->next;
        if (now >= w->deadline || now - w->since >= 1.0 || gp_http_peer_gone(w->fd))
            signal_locked(s, w);
        w = next;
    }
    pthread_mutex_unlock(&s->wake_lock);
}

int gp_wake_resume_all(gp_server *s) {
    pthread_mutex_lock(&s->wake_lock);
    int n = s->n_suspended;
    while (s->suspended) signal_locked(s, s->suspended);
    pthread_mutex_unlock(&s->wake_lock);
    return n;
}
