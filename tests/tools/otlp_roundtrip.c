/*
 * otlp_roundtrip: reads an OTLP export request on stdin, decodes it with
 * proflink's codec and writes it encoded again on stdout. Used by
 * tests/protoc_decode_test.sh to check the codec against protoc.
 *
 *   otlp_roundtrip traces|profiles [--from-json] [--to-json]
 *
 * Exit status 0 on success, 1 on a decode error (message on stderr), 2 on
 * bad usage or I/O errors.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/model.h"
#include "proto/otlp_json.h"
#include "proto/otlp_pb.h"

int main(int argc, char **argv)
{
    if (argc < 2 || (strcmp(argv[1], "traces") && strcmp(argv[1], "profiles"))) {
        fprintf(stderr, "usage: %s traces|profiles [--from-json] [--to-json]\n", argv[0]);
        return 2;
    }
    bool profiles = strcmp(argv[1], "profiles") == 0, from_json = false, to_json = false;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--from-json") == 0)
            from_json = true;
        else if (strcmp(argv[i], "--to-json") == 0)
            to_json = true;
        else
            return 2;
    }
    pl_buf in;
    pl_buf_init(&in);
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, stdin)) > 0)
        pl_buf_append(&in, chunk, n);
    if (!pl_buf_ok(&in) || ferror(stdin))
        return 2;
    pl_batch *b = pl_batch_new(profiles ? PL_SIGNAL_PROFILES : PL_SIGNAL_TRACES);
    pl_err err = {{0}};
    pl_status st;
    if (from_json)
        st = profiles ? pl_otlp_json_decode_profiles(b, in.data, in.len, &err)
                      : pl_otlp_json_decode_traces(b, in.data, in.len, &err);
    else
        st = profiles ? pl_otlp_decode_profiles(b, in.data, in.len, &err)
                      : pl_otlp_decode_traces(b, in.data, in.len, &err);
    if (st != PL_OK) {
        fprintf(stderr, "decode failed (%s): %s\n", pl_status_name(st), err.msg);
        pl_batch_free(b);
        pl_buf_free(&in);
        return 1;
    }
    pl_buf out;
    pl_buf_init(&out);
    bool ok;
    if (to_json)
        ok = profiles ? pl_otlp_json_encode_profiles(&b->data.profiles, &out)
                      : pl_otlp_json_encode_traces(&b->data.traces, &out);
    else
        ok = profiles ? pl_otlp_encode_profiles(&b->data.profiles, &out)
                      : pl_otlp_encode_traces(&b->data.traces, &out);
    int rc = 0;
    if (!ok || (out.len && fwrite(out.data, 1, out.len, stdout) != out.len))
        rc = 2;
    pl_buf_free(&out);
    pl_batch_free(b);
    pl_buf_free(&in);
    return rc;
}
