/*
 * correlation_bus.c: samples read from a bus wait for their partition's
 * spans.
 *
 * Behind a bus (receivers/kafka.c) spans and profiles travel on different
 * topics and are read at different paces: after a gateway restart the
 * small profiles topic is read in seconds while the spans topic's backlog
 * takes minutes, and a partition paused by back-pressure on the traces
 * pipeline stops its spans while its profiles go on. A sample then comes
 * long before its span, and sample_window alone would let it go unlinked.
 *
 * The receiver says, on every traces and profiles batch, which partition it
 * came from and whether that partition's spans are still to come
 * (PL_META_BUS_PARTITION, PL_META_BUS_SPANS_LAG, core/model.h). A sample
 * batch that has to wait while its partition's spans lag is held longer:
 * until a later batch of the partition says its spans caught up (every span
 * of the partition known then has been consumed, linking what it could),
 * then until its own window's end; at most bus_lag_wait, and only while
 * the batches held that way take less than bus_lag_max_bytes. Nothing else
 * changes: linking, the other bounds and memory pressure work as for any
 * held sample batch.
 */
#include "correlation_int.h"

int pl_corr_bus_init(correlation *self)
{
    pl_stats *st = self->stats;
    self->c_bus_held = pl_stats_counter(
        st, "bus_lag_held_samples",
        "waiting samples held beyond sample_window because their bus partition's spans lagged");
    self->c_bus_caught_up =
        pl_stats_counter(st, "bus_lag_caught_up_samples",
                         "samples held for a lagging partition, let go once its spans caught up");
    self->c_bus_bound = pl_stats_counter(
        st, "bus_lag_bound_samples",
        "samples of a lagging partition let go at bus_lag_wait or another bound, or not held "
        "longer for want of room (bus_lag_max_bytes)");
    self->g_bus_held_bytes = pl_stats_gauge(st, "bus_lag_held_bytes",
                                            "memory of the sample batches held for lagging spans");
    return self->c_bus_held && self->c_bus_caught_up && self->c_bus_bound && self->g_bus_held_bytes
               ? 0
               : -1;
}

/* Reads the batch's bus partition and whether its spans lag. Anything but
 * a count of 0 ("unknown" before the receiver's first fetch, a positive
 * count, something unreadable) means they lag. */
void pl_corr_bus_note(correlation *self, const pl_batch *b)
{
    self->bus_cur = 0;
    self->bus_cur_lagging = false;
    pl_bytes part, lag;
    if (!b->metadata.n || !pl_batch_metadata_get(b, PL_META_BUS_PARTITION, &part) || !part.len ||
        !pl_batch_metadata_get(b, PL_META_BUS_SPANS_LAG, &lag))
        return;
    bool zero = lag.len > 0;
    for (uint32_t i = 0; i < lag.len; i++)
        zero = zero && lag.ptr[i] == '0';
    self->bus_cur = pl_hash_bytes(part.ptr, part.len) | 1; /* never 0 */
    self->bus_cur_lagging = !zero;
}

/* A sample batch was just held (record hi): it waits longer while its
 * partition's spans lag. */
void pl_corr_bus_hold(correlation *self, uint32_t hi)
{
    held_batch *h = &self->held[hi];
    h->bus = self->bus_cur;
    if (!h->bus || !self->bus_cur_lagging || self->cfg.bus_lag_wait <= 0 || !h->items)
        return;
    if (self->bus_held_bytes + h->bytes > self->cfg.bus_lag_max_bytes) {
        *self->c_bus_bound += h->n_refs;
        return;
    }
    uint64_t until = sat_add(now_ns(self), (uint64_t)self->cfg.bus_lag_wait);
    h->window_deadline = h->deadline;
    if (until > h->deadline)
        h->deadline = until;
    h->lag_held = true;
    self->bus_held_bytes += h->bytes;
    self->bus_held_batches++;
    *self->c_bus_held += h->n_refs;
    *self->g_bus_held_bytes = (int64_t)self->bus_held_bytes;
}

/* Ends h's hold for lag: its spans caught up, or it leaves for another
 * reason (bus_lag_wait, a bound, memory pressure, shutdown). */
void pl_corr_bus_unhold(correlation *self, held_batch *h, bool caught_up)
{
    if (!h->lag_held)
        return;
    h->lag_held = false;
    self->bus_held_bytes -= h->bytes;
    self->bus_held_batches--;
    *(caught_up ? self->c_bus_caught_up : self->c_bus_bound) += h->n_refs;
    *self->g_bus_held_bytes = (int64_t)self->bus_held_bytes;
}

/* After a batch was consumed: when it said its partition's spans caught
 * up, that partition's sample batches held for lag go back to their
 * window (leaving now when it has passed). The spans it speaks of came
 * before it, so the samples they had have linked already. */
void pl_corr_bus_progress(correlation *self)
{
    if (!self->bus_cur || self->bus_cur_lagging || !self->bus_held_batches)
        return;
    uint64_t now = now_ns(self);
    uint32_t left = self->bus_held_batches; /* stop after the last one held for lag */
    for (uint32_t i = self->head[SIDE_SAMPLES]; i && left;) {
        uint32_t next = self->held[i].next_held;
        held_batch *h = &self->held[i];
        left -= h->lag_held;
        if (h->lag_held && h->bus == self->bus_cur) {
            pl_corr_bus_unhold(self, h, true);
            h->deadline = h->window_deadline;
            if (h->deadline <= now && !self->n_retry)
                pl_corr_release(self, i, RELEASE_WINDOW);
        }
        i = next;
    }
}
