/*
 * file_stamp.c: see file_stamp.h.
 */
#include "file_stamp.h"

#include <string.h>
#include <sys/stat.h>

bool pl_file_stamp_of(const char *path, pl_file_stamp *out)
{
    struct stat st;
    memset(out, 0, sizeof(*out));
    if (!path || stat(path, &st) != 0)
        return false;
    out->mtime_ns = (long long)st.st_mtim.tv_sec * 1000000000ll + st.st_mtim.tv_nsec;
    out->size = (long long)st.st_size;
    return true;
}

int pl_file_watch_poll(pl_file_watch *w, const char *path, uint64_t now_ns)
{
    if (now_ns - w->checked_ns < 1000000000ull)
        return 0;
    w->checked_ns = now_ns;
    pl_file_stamp now;
    if (!pl_file_stamp_of(path, &now))
        return -1;
    return now.mtime_ns != w->seen.mtime_ns || now.size != w->seen.size;
}
