#!/usr/bin/env python3
"""Runs protoc with the nanopb plugin on one .proto file and writes the
generated NAME.pb.c / NAME.pb.h flat into an output directory.

Meson custom targets cannot declare outputs in sub-directories, while protoc
writes them under the .proto file's package path (opentelemetry/proto/...).
So generation happens in a scratch directory, and the #include lines that
point at other generated headers are rewritten to their base names (every
.proto in proto/ has a distinct base name, which meson.build relies on).

The proto roots are given as protoc takes them (-I DIR, first match wins):
the build's proto/ directory, where the signal files with their OTLP
envelope stamped in are (see otlp_envelope.py), before the source's proto/.

usage: nanopb_flat.py PROTOC PLUGIN OUTDIR REL_PROTO_PATH -I ROOT [-I ROOT...]
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile


def main():
    protoc, plugin, outdir, rel = sys.argv[1:5]
    roots = sys.argv[5:]
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([protoc, '--plugin=protoc-gen-nanopb=' + plugin] + roots +
                       ['--nanopb_out=--strip-path:' + tmp, rel], check=True)
        base = os.path.splitext(rel)[0]
        include = re.compile(r'^#include "([^"]+\.pb\.h)"', re.M)
        for ext in ('.pb.c', '.pb.h'):
            with open(os.path.join(tmp, base + ext)) as f:
                text = f.read()
            text = include.sub(lambda m: '#include "%s"' % os.path.basename(m.group(1)), text)
            dst = os.path.join(outdir, os.path.basename(base) + ext)
            with open(dst + '.tmp', 'w') as f:
                f.write(text)
            os.replace(dst + '.tmp', dst)


if __name__ == '__main__':
    main()
