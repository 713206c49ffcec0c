/*
 * correlation_spill.c: held span batches spilled to the `storage` directory
 * when held memory reaches max_bytes.
 *
 * A spilled batch is encoded as an OTLP ExportTraceServiceRequest into its
 * own file (<storage>/<id>-<token>-<seq>.spill, mode 0600) and freed. Its record
 * stays in the FIFO of held span batches with its deadline and covers, so
 * it leaves exactly when it would have in memory. Its spans' index entries
 * stay too, as ENTRY_SPILLED: the span's summary (trace id, times, name,
 * local root, service, span_attributes values) was put in the late store
 * when the batch spilled, so a sample arriving meanwhile matches the summary
 * with the usual join rule, is enriched from it, and adds to the entry's
 * statistics. When the batch leaves (deadline, coverage, flush), the file is
 * read back, decoded, its spans enriched from those statistics like any held
 * span, and passed on; the file is deleted once handed on.
 *
 * Files found at start (a crash) are passed on unenriched with the first
 * traces batch (the processor learns its next consumer from it).
 *
 * hold_compression (zstd, the default) spills in memory: every indexed held
 * span batch is encoded, compressed with zstd and freed right after it is
 * indexed, exactly as if it spilled, but its bytes stay with its record
 * (`packed`). A decoded OTLP span with attributes takes 3-5 times its wire
 * size; compressed, a batch of similar spans takes a fraction of it. When
 * max_bytes is reached with storage, the packed bytes are what is written;
 * spill files are compressed too (read back by their zstd frame magic).
 */
#include "correlation_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <zstd.h>

#include "proto/otlp_pb.h"

/* Fast: packing runs for every held batch. Level 1 compresses OTLP spans
 * 4-8x at several hundred MB/s. */
#define PACK_LEVEL 1
/* Bound on a packed batch's decoded size (a file of an earlier run is read
 * back by its frame header). */
#define PACK_MAX_DECODED ((size_t)1 << 31)

/* Files are named <id>-<process token>-<seq>.spill. The token is random per
 * process: at start, files of another token are an earlier run's (a crash)
 * while files of this process belong to a live instance (during a reload
 * the replaced processor still holds its own until it flushes them). The
 * sequence is shared by every instance of the process. */
static char process_token[17];
static uint64_t process_seq;

static void init_token(void)
{
    if (process_token[0])
        return;
    uint64_t r = 0;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        if (read(fd, &r, sizeof(r)) != (ssize_t)sizeof(r))
            r = 0;
        close(fd);
    }
    if (!r)
        r = pl_hash_u64((uint64_t)getpid() ^ (uint64_t)time(NULL));
    snprintf(process_token, sizeof(process_token), "%016llx", (unsigned long long)r);
}

static char *spill_path(correlation *self, uint64_t seq)
{
    size_t n = strlen(self->spill_dir) + strlen(self->spill_prefix) + 64;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s-%s-%llu.spill", self->spill_dir, self->spill_prefix, process_token,
                 (unsigned long long)seq);
    return p;
}

/* True when name is <prefix>-<16 hex>-<digits>.spill of another process. */
static bool leftover_name(const char *name, const char *prefix)
{
    size_t plen = strlen(prefix), nlen = strlen(name);
    if (nlen < plen + 1 + 16 + 2 + 6 || strncmp(name, prefix, plen) != 0 || name[plen] != '-')
        return false;
    const char *tok = name + plen + 1;
    for (int i = 0; i < 16; i++)
        if (!((tok[i] >= '0' && tok[i] <= '9') || (tok[i] >= 'a' && tok[i] <= 'f')))
            return false;
    if (tok[16] != '-' || strcmp(name + nlen - 6, ".spill") != 0)
        return false;
    for (const char *d = tok + 17; d < name + nlen - 6; d++)
        if (*d < '0' || *d > '9')
            return false;
    if (tok + 17 == name + nlen - 6)
        return false;
    return strncmp(tok, process_token, 16) != 0;
}

static int mkdir_parents(const char *path)
{
    char *copy = strdup(path);
    if (!copy)
        return -1;
    for (char *q = copy + 1;; q++) {
        if (*q == '/' || !*q) {
            char c = *q;
            *q = 0;
            if (mkdir(copy, 0700) != 0 && errno != EEXIST) {
                free(copy);
                return -1;
            }
            *q = c;
            if (!c)
                break;
        }
    }
    free(copy);
    return 0;
}

int pl_corr_spill_init(correlation *self, pl_err *err)
{
    self->c_spilled_batches =
        pl_stats_counter(self->stats, "spilled_batches", "held span batches written to storage");
    self->c_spilled_bytes =
        pl_stats_counter(self->stats, "spilled_bytes", "encoded bytes of the spilled batches");
    self->c_spill_failures = pl_stats_counter(
        self->stats, "spill_failures", "spills or read-backs of held span batches that failed");
    if (!self->c_spilled_batches || !self->c_spilled_bytes || !self->c_spill_failures)
        return pl_errf(err, PL_ERR_NOMEM, "correlation: out of memory");
    if (!self->spill_dir)
        return PL_OK;
    size_t len = strlen(self->spill_dir);
    while (len > 1 && self->spill_dir[len - 1] == '/')
        self->spill_dir[--len] = 0;
    struct stat st;
    if (mkdir_parents(self->spill_dir) != 0 || stat(self->spill_dir, &st) != 0 ||
        !S_ISDIR(st.st_mode) || access(self->spill_dir, R_OK | W_OK | X_OK) != 0)
        return pl_errf(err, PL_ERR_INVALID, "%s: storage %s: not a writable directory (%s)",
                       self->id, self->spill_dir, strerror(errno ? errno : ENOTDIR));
    /* The id names the files: keep letters, digits, '-', '_' and '.'. */
    self->spill_prefix = strdup(self->id);
    if (!self->spill_prefix)
        return pl_errf(err, PL_ERR_NOMEM, "correlation: out of memory");
    for (char *c = self->spill_prefix; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
              *c == '-' || *c == '_' || *c == '.'))
            *c = '_';
    /* Files of an earlier run: replayed, and new ones numbered after them. */
    DIR *d = opendir(self->spill_dir);
    if (!d)
        return pl_errf(err, PL_ERR_INVALID, "%s: storage %s: %s", self->id, self->spill_dir,
                       strerror(errno));
    init_token();
    struct dirent *de;
    while ((de = readdir(d))) {
        const char *name = de->d_name;
        size_t nlen = strlen(name);
        if (!leftover_name(name, self->spill_prefix))
            continue;
        char **l = realloc(self->leftovers, (self->n_leftovers + 1) * sizeof(char *));
        if (!l)
            break;
        self->leftovers = l;
        size_t n = len + nlen + 2;
        char *path = malloc(n);
        if (!path)
            break;
        snprintf(path, n, "%s/%s", self->spill_dir, name);
        self->leftovers[self->n_leftovers++] = path;
    }
    closedir(d);
    if (self->n_leftovers)
        pl_info(COMPONENT, "%s: %u spill files of an earlier run found in %s; passed on unenriched",
                self->id, self->n_leftovers, self->spill_dir);
    return PL_OK;
}

void pl_corr_spill_free(correlation *self)
{
    ZSTD_freeCCtx(self->zcctx);
    ZSTD_freeDCtx(self->zdctx);
    self->zcctx = self->zdctx = NULL;
    for (uint32_t i = 0; i < self->n_leftovers; i++)
        free(self->leftovers[i]);
    free(self->leftovers);
    self->leftovers = NULL;
    self->n_leftovers = 0;
    free(self->spill_dir);
    free(self->spill_prefix);
}

static bool is_zstd(const uint8_t *d, size_t len)
{
    return len >= 4 && d[0] == 0x28 && d[1] == 0xb5 && d[2] == 0x2f && d[3] == 0xfd;
}

/* Encodes the spans of b, compressed when hold_compression is on; a new
 * buffer of *len bytes (NULL: out of memory). */
static uint8_t *pack_batch(correlation *self, const pl_batch *b, size_t *len)
{
    pl_buf out;
    pl_buf_init(&out);
    if (!pl_otlp_encode_traces(&b->data.traces, &out) || !pl_buf_ok(&out)) {
        pl_buf_free(&out);
        return NULL;
    }
    if (!self->pack)
        return pl_buf_steal(&out, len);
    if (!self->zcctx)
        self->zcctx = ZSTD_createCCtx();
    size_t cap = ZSTD_compressBound(out.len);
    uint8_t *z = self->zcctx ? malloc(cap) : NULL;
    size_t n = z ? ZSTD_compressCCtx(self->zcctx, z, cap, out.data, out.len, PACK_LEVEL) : 0;
    pl_buf_free(&out);
    if (!z || ZSTD_isError(n)) {
        free(z);
        return NULL;
    }
    uint8_t *fit = realloc(z, n); /* n > 0: a frame has a header */
    *len = n;
    return fit ? fit : z;
}

/* Decodes an encoded (or zstd-compressed) batch; takes buf. NULL with *why
 * set on failure. */
static pl_batch *unpack_batch(correlation *self, uint8_t *buf, size_t len, const char **why)
{
    if (is_zstd(buf, len)) {
        unsigned long long n = ZSTD_getFrameContentSize(buf, len);
        if (n == ZSTD_CONTENTSIZE_UNKNOWN || n == ZSTD_CONTENTSIZE_ERROR || n > PACK_MAX_DECODED) {
            free(buf);
            *why = "bad zstd frame";
            return NULL;
        }
        if (!self->zdctx)
            self->zdctx = ZSTD_createDCtx();
        uint8_t *raw = self->zdctx ? malloc(n ? (size_t)n : 1) : NULL;
        size_t got = raw ? ZSTD_decompressDCtx(self->zdctx, raw, (size_t)n, buf, len) : 0;
        free(buf);
        if (!raw || ZSTD_isError(got) || got != n) {
            *why = !raw ? "out of memory" : ZSTD_isError(got) ? ZSTD_getErrorName(got) : "short";
            free(raw);
            return NULL;
        }
        buf = raw;
        len = (size_t)n;
    }
    pl_batch *b = pl_batch_new(PL_SIGNAL_TRACES);
    if (!b || pl_batch_adopt(b, buf, len) != 0) {
        *why = "out of memory";
        free(buf);
        if (b)
            pl_batch_free(b);
        return NULL;
    }
    pl_err err;
    /* Our own encoding of a batch that was in memory: no request budget. */
    if (pl_otlp_decode_ex(b, buf, len, SIZE_MAX / 2, &err) != PL_OK) {
        static __thread char msg[sizeof(err.msg)];
        memcpy(msg, err.msg, sizeof(msg));
        *why = msg;
        pl_batch_free(b);
        return NULL;
    }
    return b;
}

/* Reads and decodes one spill file; NULL (logged) on failure. */
static pl_batch *load_file(correlation *self, const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    uint8_t *buf = NULL;
    pl_batch *b = NULL;
    const char *why = NULL;
    if (fd < 0 || fstat(fd, &st) != 0) {
        why = strerror(errno);
        goto fail;
    }
    size_t len = (size_t)st.st_size;
    buf = malloc(len ? len : 1);
    if (!buf) {
        why = "out of memory";
        goto fail;
    }
    for (size_t got = 0; got < len;) {
        ssize_t r = read(fd, buf + got, len - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            why = r < 0 ? strerror(errno) : "truncated";
            goto fail;
        }
        got += (size_t)r;
    }
    close(fd);
    fd = -1;
    b = unpack_batch(self, buf, len, &why);
    buf = NULL; /* taken */
    if (!b)
        goto fail;
    return b;
fail:
    pl_error(COMPONENT, "%s: cannot read spill file %s: %s", self->id, path, why);
    if (fd >= 0)
        close(fd);
    free(buf);
    if (b)
        pl_batch_free(b);
    return NULL;
}

static bool write_file(const char *path, const uint8_t *data, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return false;
    for (size_t put = 0; put < len;) {
        ssize_t w = write(fd, data + put, len - put);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            close(fd);
            unlink(path);
            return false;
        }
        put += (size_t)w;
    }
    if (close(fd) != 0) {
        unlink(path);
        return false;
    }
    return true;
}

/* The index entry of span `sp` of held batch hi (NULL: not indexed). */
static span_entry *entry_in(correlation *self, const pl_span *sp)
{
    SPAN_EACH(&self->spans, id_key(sp->span_id), i)
    {
        if (self->spans.slots[i].state == ENTRY_HELD && self->spans.slots[i].span == sp)
            return &self->spans.slots[i];
    }
    return NULL;
}

/* An entry with span id `key` came besides others, or a summary with it
 * was added for a span not in the table: the entries with that id are no
 * longer alone, and a spilled one's own summary may no longer be the one a
 * lookup finds first (see corr_ref_exact). */
void pl_corr_not_alone(correlation *self, uint64_t key)
{
    SPAN_EACH(&self->spans, key, i)
    {
        self->spans.slots[i].alone = false;
    }
}

/* Held span batch hi leaves memory (to disk or packed): its spans'
 * summaries go to the late store, its entries become ENTRY_SPILLED (with
 * their parents kept), and the decoded batch is freed. */
static void spill_entries(correlation *self, uint32_t hi)
{
    held_batch *h = &self->held[hi];
    /* Room for these summaries first, so they push out no late ones. */
    pl_corr_late_room_for(self, self->spilled_spans + h->items);
    /* Parent ids stay (8 bytes a span) so totals still roll up through it. */
    free(h->parents);
    h->parents = calloc(h->items ? h->items : 1, sizeof(uint64_t));
    h->n_parents = 0;
    h->n_spilled = 0;
    /* Summaries first (they walk ancestors inside the batch), then the
     * entries let go of the spans and keep their summaries' references
     * (parked in parents[] meanwhile, in the same order). */
    uint64_t now = now_ns(self);
    uint32_t n_refs = 0;
    pl_traces *t = &h->batch->data.traces;
    for (int pass = 0; pass < 2; pass++) {
        for (uint32_t r = 0; r < t->n_resources; r++) {
            pl_resource_spans *rs = &t->resources[r];
            for (uint32_t sc = 0; sc < rs->n_scopes; sc++) {
                pl_scope_spans *ss = &rs->scopes[sc];
                for (uint32_t k = 0; k < ss->n_spans; k++) {
                    pl_span *sp = &ss->spans[k];
                    if (!span_id_valid(sp->span_id, sp->span_id_len))
                        continue;
                    span_entry *e = entry_in(self, sp);
                    if (!e)
                        continue;
                    if (pass == 0) {
                        bool only;
                        uint64_t ref = pl_corr_late_add(self, e, now, &only);
                        if (!only)
                            e->alone = false; /* an older namesake's summary is found first */
                        if (h->parents && n_refs < h->items)
                            h->parents[n_refs++] = ref;
                        if (e->stats && trace_id_valid(sp->trace_id, sp->trace_id_len)) {
                            /* Told apart from a same-id span of another trace. */
                            span_stats *st = &self->stats_arr[e->stats];
                            memcpy(st->trace_id, sp->trace_id, 16);
                            st->has_trace = true;
                        }
                    } else {
                        uint64_t ref = 0;
                        if (h->parents && h->n_parents < n_refs) {
                            ref = h->parents[h->n_parents];
                            h->parents[h->n_parents] =
                                span_id_valid(sp->parent_span_id, sp->parent_span_id_len)
                                    ? id_key(sp->parent_span_id)
                                    : 0;
                            /* No parent: nothing to read at roll-ups. */
                            e->expiry_ms = h->parents[h->n_parents] ? h->n_parents : UINT32_MAX;
                            h->n_parents++;
                        } else {
                            e->expiry_ms = UINT32_MAX; /* no parent known */
                        }
                        e->late_ref = ref;
                        e->state = ENTRY_SPILLED;
                        self->spilled_spans++;
                        h->n_spilled++;
                    }
                }
            }
        }
    }
    h->wal = h->batch->wal; /* travel with the record until read back */
    h->batch->wal = NULL;
    pl_batch_free(h->batch);
    h->batch = NULL;
    h->spilled = true;
    self->held_bytes -= h->bytes;
    h->bytes = 0;
}

/* hold_compression: packs indexed held span batch hi in memory (see the
 * header comment). False (nothing changed) when packing is off, the batch
 * cannot be packed, or encoding fails: it then stays decoded. */
bool pl_corr_pack(correlation *self, uint32_t hi)
{
    held_batch *h = &self->held[hi];
    if (!self->pack || h->side != SIDE_SPANS || h->spilled || !h->indexed || !self->late ||
        !h->batch)
        return false;
    size_t len = 0;
    uint8_t *p = pack_batch(self, h->batch, &len);
    if (!p)
        return false; /* out of memory: kept decoded */
    spill_entries(self, hi);
    h->packed = p;
    h->packed_len = len;
    h->bytes = len + (size_t)h->items * sizeof(uint64_t);
    self->held_bytes += h->bytes;
    self->packed_spans += h->items;
    self->packed_entries += h->n_spilled;
    self->packed_bytes += len;
    return true;
}

/* hold_compression: packs held span batch hi that is not indexed (no
 * profiles lately): its bytes only, nothing refers into it. It is unpacked
 * when it is indexed or leaves (pl_corr_unpack). */
bool pl_corr_pack_unindexed(correlation *self, uint32_t hi)
{
    held_batch *h = &self->held[hi];
    if (!self->pack || h->side != SIDE_SPANS || h->indexed || h->packed || !h->batch)
        return false;
    size_t len = 0;
    uint8_t *p = pack_batch(self, h->batch, &len);
    if (!p)
        return false;
    h->wal = h->batch->wal;
    h->batch->wal = NULL;
    pl_batch_free(h->batch);
    h->batch = NULL;
    h->packed = p;
    h->packed_len = len;
    self->held_bytes -= h->bytes;
    h->bytes = len;
    self->held_bytes += len;
    self->packed_spans += h->items;
    self->packed_bytes += len;
    return true;
}

/* Unpacks held span batch hi packed by pl_corr_pack_unindexed. False when it
 * cannot be decoded (logged and counted; the caller drops its spans). */
bool pl_corr_unpack(correlation *self, uint32_t hi)
{
    held_batch *h = &self->held[hi];
    const char *why = NULL;
    self->packed_spans -= h->items;
    self->packed_bytes -= h->packed_len;
    pl_batch *b = unpack_batch(self, h->packed, h->packed_len, &why);
    h->packed = NULL;
    h->packed_len = 0;
    if (!b) {
        /* Its spans are lost: the record goes (the write-ahead entries stay
         * for a replay). */
        pl_error(COMPONENT, "%s: cannot unpack a held span batch: %s", self->id, why);
        (*self->c_spill_failures)++;
        pl_corr_spill_drop(self, hi);
        pl_stats_add(self->stats, PL_SIGNAL_TRACES, PL_STAT_DROPPED, h->items);
        *self->c_unlinked_spans += h->items;
        self->held_spans -= h->items;
        self->held_bytes -= h->bytes;
        self->unindexed_batches--;
        pl_corr_held_unlink_and_free(self, hi);
        pl_corr_update_gauges(self);
        return false;
    }
    b->wal = h->wal;
    h->wal = NULL;
    h->batch = b;
    self->held_bytes -= h->bytes;
    h->bytes = pl_batch_memory(b);
    self->held_bytes += h->bytes;
    return true;
}

/* Packs every indexed held span batch still decoded (after profiles came
 * back and indexed the batches held meanwhile). */
void pl_corr_pack_indexed(correlation *self)
{
    if (!self->pack)
        return;
    for (uint32_t i = self->head[SIDE_SPANS]; i; i = self->held[i].next_held)
        if (self->held[i].indexed && !self->held[i].spilled)
            pl_corr_pack(self, i);
}

/* Writes held span batch hi to storage and frees it (a packed one: its
 * packed bytes). False (nothing changed) when there is no storage, the disk
 * bound is reached or writing fails: the caller then releases it early. */
bool pl_corr_spill(correlation *self, uint32_t hi)
{
    held_batch *h = &self->held[hi];
    if (!self->spill_dir || h->side != SIDE_SPANS || (h->spilled && !h->packed) || !h->indexed ||
        !self->late)
        return false;
    size_t len = h->packed_len;
    uint8_t *data = h->packed;
    if (!data) {
        data = pack_batch(self, h->batch, &len);
        if (!data) {
            (*self->c_spill_failures)++;
            return false;
        }
    }
    if (self->spill_disk + len > self->cfg.max_spill_bytes) {
        if (data != h->packed)
            free(data);
        return false; /* over the disk bound: early release, as without storage */
    }
    uint64_t seq = process_seq + 1;
    char *path = spill_path(self, seq);
    if (!path || !write_file(path, data, len)) {
        if (path) {
            pl_error(COMPONENT, "%s: cannot write spill file %s: %s", self->id, path,
                     strerror(errno));
        }
        free(path);
        if (data != h->packed)
            free(data);
        (*self->c_spill_failures)++;
        return false;
    }
    free(path);
    process_seq = seq;
    if (h->packed) {
        self->packed_spans -= h->items;
        self->packed_entries -= h->n_spilled;
        self->packed_bytes -= h->packed_len;
        self->held_bytes -= h->bytes;
        h->bytes = 0;
        h->packed = NULL;
        h->packed_len = 0;
    } else {
        spill_entries(self, hi);
    }
    free(data);
    h->spill_seq = seq;
    h->spill_bytes = len;
    self->spill_disk += len;
    (*self->c_spilled_batches)++;
    *self->c_spilled_bytes += len;
    return true;
}

/* Reads spilled batch hi back (from memory or disk; its write-ahead entries
 * restored); NULL when it cannot be read (counted; its spans are lost). */
pl_batch *pl_corr_spill_load(correlation *self, uint32_t hi)
{
    held_batch *h = &self->held[hi];
    pl_batch *b;
    if (h->packed) {
        const char *why = NULL;
        self->packed_spans -= h->items;
        self->packed_entries -= h->n_spilled;
        self->packed_bytes -= h->packed_len;
        b = unpack_batch(self, h->packed, h->packed_len, &why);
        h->packed = NULL;
        h->packed_len = 0;
        if (!b)
            pl_error(COMPONENT, "%s: cannot unpack a held span batch: %s", self->id, why);
    } else {
        char *path = spill_path(self, h->spill_seq);
        b = path ? load_file(self, path) : NULL;
        free(path);
    }
    if (!b) {
        (*self->c_spill_failures)++;
        return NULL;
    }
    b->wal = h->wal;
    h->wal = NULL;
    return b;
}

/* Deletes the file of a spilled batch (read back and handed on, or lost);
 * seq 0: it was packed in memory, no file. */
void pl_corr_spill_remove(correlation *self, uint64_t seq, size_t bytes)
{
    if (!seq)
        return;
    char *path = spill_path(self, seq);
    if (path && unlink(path) != 0 && errno != ENOENT)
        pl_warn(COMPONENT, "%s: cannot delete spill file %s: %s", self->id, path, strerror(errno));
    free(path);
    self->spill_disk -= bytes;
}

/* Destroyed without shutdown: the file stays for the next start (a packed
 * batch is lost, like a decoded one); the write-ahead entries are kept for
 * replay too. */
void pl_corr_spill_drop(correlation *self, uint32_t hi)
{
    held_batch *h = &self->held[hi];
    if (h->wal) {
        pl_batch *carrier = pl_batch_new(PL_SIGNAL_TRACES);
        if (carrier) {
            carrier->wal = h->wal;
            pl_batch_wal_refused(carrier);
            pl_batch_free(carrier);
        }
        h->wal = NULL;
    }
    if (h->packed) {
        self->packed_spans -= h->items;
        self->packed_entries -= h->n_spilled;
        self->packed_bytes -= h->packed_len;
        free(h->packed);
        h->packed = NULL;
        h->packed_len = 0;
    }
    self->spill_disk -= h->spill_bytes;
    h->spill_bytes = 0;
    h->spilled = false;
}

/* Passes on the files an earlier run left (unenriched: their index is gone). */
void pl_corr_spill_replay(correlation *self, pl_consumer *next)
{
    uint32_t n = self->n_leftovers;
    char **paths = self->leftovers;
    self->leftovers = NULL;
    self->n_leftovers = 0;
    for (uint32_t i = 0; i < n; i++) {
        pl_batch *b = load_file(self, paths[i]);
        if (!b) {
            (*self->c_spill_failures)++;
            free(paths[i]);
            continue; /* left in place for a look */
        }
        size_t items = pl_batch_items(b);
        pl_status st = pl_consumer_consume(next, b);
        if (st == PL_OK)
            unlink(paths[i]);
        else
            pl_warn(COMPONENT, "%s: %zu spans of spill file %s refused (%s); kept for next start",
                    self->id, items, paths[i], pl_status_name(st));
        free(paths[i]);
    }
    free(paths);
}

/* The spilled entry a summary stands for: the one whose own summary it is
 * (NULL: its span is not spilled, it left). Not merely one with its span id:
 * two spans may share one, in different traces. */
span_entry *pl_corr_spilled_entry(correlation *self, const late_span *ls)
{
    if (!self->spilled_spans)
        return NULL;
    SPAN_EACH(&self->spans, ls->key, i)
    {
        span_entry *e = &self->spans.slots[i];
        if (e->state == ENTRY_SPILLED && pl_corr_late_ref_summary(self, e) == ls)
            return e;
    }
    return NULL;
}

/* Whether spilled entry e may be the span of `trace` (NULL: unknown): the
 * trace its statistics or its summary know, when known. */
bool pl_corr_spilled_in_trace(const correlation *self, const span_entry *e, const uint8_t *trace)
{
    if (!trace)
        return true;
    const span_stats *st = e->stats ? &self->stats_arr[e->stats] : NULL;
    if (st && st->has_trace)
        return memcmp(st->trace_id, trace, 16) == 0;
    const late_span *s = pl_corr_late_ref_summary(self, e);
    return !s || !s->has_trace || memcmp(s->trace_id, trace, 16) == 0;
}

/* Keeps spilled entry e's trace id (from its summary) in its statistics st,
 * where pl_corr_spilled_in_trace looks first: the ancestor of many samples is
 * then told apart without its summary's line. */
void pl_corr_spilled_keep_trace(const correlation *self, const span_entry *e, span_stats *st)
{
    const late_span *s = pl_corr_late_ref_summary(self, e);
    if (s && s->has_trace) {
        memcpy(st->trace_id, s->trace_id, 16);
        st->has_trace = true;
    }
}

/* The latest deadline of a spilled batch holding a span with this id (0:
 * none): a sample that found no summary for it waits until then, and links
 * when the batch is read back. */
uint64_t pl_corr_spilled_deadline(correlation *self, uint64_t key)
{
    uint64_t d = 0;
    SPAN_EACH(&self->spans, key, i)
    {
        const span_entry *e = &self->spans.slots[i];
        if (e->state == ENTRY_SPILLED && self->held[e->held].deadline > d)
            d = self->held[e->held].deadline;
    }
    return d;
}
