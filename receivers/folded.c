/*
 * folded.c: see folded.h. One pass over the text; the frames of a line are
 * collected into a reusable array (leaf first, so filled from the back) and
 * handed to the pprof writer.
 */
#include "folded.h"

#include <stdlib.h>
#include <string.h>

#include "proto/otlp_pb.h" /* pl_utf8_valid */

pl_status pl_folded_parse(const uint8_t *text, size_t len, bool lines_format, int64_t scale,
                          pl_pprof_writer *w, pl_err *err)
{
    pl_bytes *frames = malloc(PL_FOLDED_MAX_DEPTH * sizeof(pl_bytes));
    if (!frames)
        return pl_errf(err, PL_ERR_NOMEM, "folded: out of memory");
    pl_status st = PL_OK;
    const uint8_t *p = text, *end = text + len;
    size_t line_no = 0;
    while (p < end && st == PL_OK) {
        line_no++;
        const uint8_t *eol = memchr(p, '\n', (size_t)(end - p));
        const uint8_t *le = eol ? eol : end;
        const uint8_t *next = eol ? eol + 1 : end;
        if (le > p && le[-1] == '\r')
            le--;
        if (le == p) {
            p = next;
            continue;
        }
        const uint8_t *stack_end = le;
        int64_t count = 1;
        if (!lines_format) {
            const uint8_t *sp = le;
            while (sp > p && sp[-1] != ' ')
                sp--;
            if (sp == p || sp == le) {
                st = pl_errf(err, PL_ERR_INVALID,
                             "folded: line %zu: expected \"frame;frame;... <count>\"", line_no);
                break;
            }
            uint64_t v = 0;
            for (const uint8_t *d = sp; d < le; d++) {
                if (*d < '0' || *d > '9' || v > (UINT64_MAX - 9) / 10) {
                    v = UINT64_MAX;
                    break;
                }
                v = v * 10 + (uint64_t)(*d - '0');
            }
            if (v > (uint64_t)INT64_MAX) {
                st = pl_errf(err, PL_ERR_INVALID, "folded: line %zu: bad count \"%.*s\"", line_no,
                             (int)(le - sp > 32 ? 32 : le - sp), (const char *)sp);
                break;
            }
            count = (int64_t)v;
            /* One space separates the count, as in Pyroscope's reader: the
             * stack keeps any other, so a leaf frame that is a single space
             * ("main;work;  5") stays a frame of its own. */
            stack_end = sp - 1;
        }
        /* Frame names become pprof strings, which must be UTF-8 without
         * NUL (the pprof decoder refuses others, as Pyroscope does). */
        if (memchr(p, 0, (size_t)(stack_end - p)) || !pl_utf8_valid(p, (size_t)(stack_end - p))) {
            st = pl_errf(err, PL_ERR_INVALID, "folded: line %zu: not valid UTF-8 text", line_no);
            break;
        }
        /* Split at ';' root first; store leaf first. */
        size_t n = 0;
        for (const uint8_t *f = p; f <= stack_end;) {
            const uint8_t *semi = memchr(f, ';', (size_t)(stack_end - f));
            const uint8_t *fe = semi ? semi : stack_end;
            if (fe > f) {
                if (n == PL_FOLDED_MAX_DEPTH) {
                    st = pl_errf(err, PL_ERR_INVALID, "folded: line %zu: more than %d frames",
                                 line_no, PL_FOLDED_MAX_DEPTH);
                    break;
                }
                frames[n++] = (pl_bytes){f, (uint32_t)(fe - f)};
            }
            if (!semi)
                break;
            f = semi + 1;
        }
        if (st != PL_OK)
            break;
        for (size_t i = 0; i < n / 2; i++) {
            pl_bytes t = frames[i];
            frames[i] = frames[n - 1 - i];
            frames[n - 1 - i] = t;
        }
        int64_t value = count;
        if (scale > 1) {
            if (count > INT64_MAX / scale) {
                st = pl_errf(err, PL_ERR_INVALID, "folded: line %zu: count too large", line_no);
                break;
            }
            value = count * scale;
        }
        if (n && count && pl_pprof_writer_add(w, frames, n, value))
            st = pl_errf(err, PL_ERR_NOMEM, "folded: out of memory");
        p = next;
    }
    free(frames);
    return st;
}
