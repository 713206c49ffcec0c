/*
 * file_stamp.h: has a file changed? The files proflink re-reads when they
 * change (htpasswd and token files of the auth extensions, TLS certificates
 * and keys) are compared by modification time and size, and the auth
 * extensions look at most once a second, from the request path.
 */
#ifndef PL_CORE_FILE_STAMP_H
#define PL_CORE_FILE_STAMP_H

#include <stdbool.h>
#include <stdint.h>

typedef struct pl_file_stamp {
    long long mtime_ns;
    long long size;
} pl_file_stamp;

/* The stamp of `path` now; false, with a zero stamp, when it cannot be
 * stat'ed (or path is NULL). */
bool pl_file_stamp_of(const char *path, pl_file_stamp *out);

/* A file looked at no more than once a second. `seen` is the stamp of the
 * content in use, which the owner sets when it reads the file. */
typedef struct pl_file_watch {
    pl_file_stamp seen;
    uint64_t checked_ns; /* monotonic time of the last look */
} pl_file_watch;

/* 1 when `path` differs from what was seen (the caller re-reads it), 0 when
 * it was looked at less than a second ago or has not changed, -1 when it
 * cannot be stat'ed. `now_ns` is monotonic. */
int pl_file_watch_poll(pl_file_watch *w, const char *path, uint64_t now_ns);

#endif
