/*
 * store_checkpoint.c: the writer's WAL checkpoints on a thread of their own.
 *
 * A checkpoint copies the pages changed since the last one from the WAL into
 * the database file and syncs both. Run by the writer (SQLite's automatic
 * checkpoint, inside the COMMIT that passed the threshold) it costs the writer
 * a tenth or more of its time and two fsync waits per round, while no other
 * transaction can start. Here a second connection in a thread of its own does
 * the copying, and the writer goes on writing:
 *
 *   1. A commit leaves the WAL at or past the threshold: the writer asks the
 *      thread for a pass and begins its next transaction at once.
 *   2. The thread copies every frame committed when the pass began (PASSIVE:
 *      it never waits for the writer or a reader; frames a reader's snapshot
 *      still needs stay for a later round).
 *   3. At the writer's next commit after the pass, the writer copies what was
 *      committed meanwhile (usually one transaction) itself, so the WAL is
 *      fully copied before its next transaction begins, and that transaction
 *      restarts the WAL from its start (SQLite restarts a WAL only for a
 *      writer whose transaction began on a fully copied one: with passes
 *      that only ever overlap the writer, the WAL would grow for ever).
 *
 * If the thread falls behind (a slow disk), a commit that leaves the WAL at
 * twice the threshold waits for the pass in progress, so the WAL stays
 * within about twice the threshold plus a transaction. All of it runs in
 * the WAL hook, which SQLite calls after each commit with the write lock
 * released, so a retention slice's commits take part like the writer's.
 */
#include "store/store_internal.h"

#include <pthread.h>
#include <uv.h>

struct pl_store_ckpt {
    sqlite3 *db; /* the thread's own connection */
    uv_thread_t thread;
    uv_mutex_t mu;
    uv_cond_t cv;
    uint64_t asked, done, passes; /* passes asked for, finished, run (under mu) */
    bool stop;                    /* under mu */
    int64_t threshold;            /* WAL frames that start a round */
    bool round;                   /* writer only: a pass was asked for, its tail not yet copied */
    uint64_t tails, waits;        /* writer only */
};

static void ckpt_main(void *arg)
{
    pl_store_ckpt *c = arg;
    /* named for top -H, perf and /proc/PID/task/TID/comm (15 bytes max) */
    pthread_setname_np(pthread_self(), "pl-sqlite-ckpt");
    uv_mutex_lock(&c->mu);
    for (;;) {
        while (!c->stop && c->done == c->asked)
            uv_cond_wait(&c->cv, &c->mu);
        if (c->stop)
            break;
        uint64_t pass = c->asked;
        uv_mutex_unlock(&c->mu);
        /* SQLITE_BUSY: another checkpoint holds the lock (a retention
         * slice's own); the writer's tail copy catches up either way. */
        sqlite3_wal_checkpoint_v2(c->db, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
        uv_mutex_lock(&c->mu);
        c->done = pass;
        c->passes++;
        uv_cond_broadcast(&c->cv);
    }
    uv_mutex_unlock(&c->mu);
}

/* SQLite's WAL hook on the writer's connection: after every commit, with
 * `frames` in the WAL. */
static int ckpt_hook(void *arg, sqlite3 *db, const char *schema, int frames)
{
    (void)schema;
    pl_store_ckpt *c = arg;
    if (!c->round && frames < c->threshold)
        return SQLITE_OK;
    uv_mutex_lock(&c->mu);
    if (!c->round) { /* 1: a pass, while the writer goes on */
        c->asked++;
        c->round = true;
        uv_cond_signal(&c->cv);
        uv_mutex_unlock(&c->mu);
        return SQLITE_OK;
    }
    if (c->done != c->asked && frames >= 2 * c->threshold) {
        c->waits++;
        while (c->done != c->asked)
            uv_cond_wait(&c->cv, &c->mu);
    }
    bool finished = c->done == c->asked;
    uv_mutex_unlock(&c->mu);
    if (finished) { /* 3: the tail, so the next transaction restarts the WAL */
        sqlite3_wal_checkpoint_v2(db, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
        c->round = false;
        c->tails++;
    }
    return SQLITE_OK;
}

int pl_store_ckpt_start(pl_store *s, int64_t threshold_frames)
{
    pl_store_ckpt *c = calloc(1, sizeof(*c));
    if (!c)
        return SQLITE_NOMEM;
    c->threshold = threshold_frames > 0 ? threshold_frames : 1000;
    int rc = sqlite3_open_v2(s->path, &c->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);
    /* the same durability as the writer's own checkpoints; a copy needs
     * one page at a time, not a cache */
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(c->db, "PRAGMA synchronous = NORMAL; PRAGMA cache_size = -256", NULL,
                          NULL, NULL);
    if (rc != SQLITE_OK)
        goto fail_db;
    rc = SQLITE_NOMEM;
    if (uv_mutex_init(&c->mu) != 0)
        goto fail_db;
    if (uv_cond_init(&c->cv) != 0)
        goto fail_mu;
    if (uv_thread_create(&c->thread, ckpt_main, c) != 0)
        goto fail_cv;
    /* replaces SQLite's automatic checkpoint on this connection */
    sqlite3_wal_hook(s->db, ckpt_hook, c);
    s->ckpt = c;
    return SQLITE_OK;

fail_cv:
    uv_cond_destroy(&c->cv);
fail_mu:
    uv_mutex_destroy(&c->mu);
fail_db:
    sqlite3_close_v2(c->db);
    free(c);
    return rc;
}

void pl_store_ckpt_stop(pl_store *s)
{
    pl_store_ckpt *c = s->ckpt;
    if (!c)
        return;
    sqlite3_wal_hook(s->db, NULL, NULL);
    uv_mutex_lock(&c->mu);
    c->stop = true;
    uv_cond_signal(&c->cv);
    uv_mutex_unlock(&c->mu);
    uv_thread_join(&c->thread); /* after a pass in progress */
    sqlite3_close_v2(c->db);
    uv_cond_destroy(&c->cv);
    uv_mutex_destroy(&c->mu);
    free(c);
    s->ckpt = NULL;
}

void pl_store_checkpoint_counts(pl_store *s, pl_store_checkpoint_stats *out)
{
    pl_store_ckpt *c = s->ckpt;
    *out = (pl_store_checkpoint_stats){0};
    if (!c)
        return;
    uv_mutex_lock(&c->mu);
    out->passes = c->passes;
    uv_mutex_unlock(&c->mu);
    out->tails = c->tails;
    out->waits = c->waits;
}
