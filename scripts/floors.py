#!/usr/bin/env python3
"""Draw proflink's folder graph from the code itself and check the floors.

An arrow A -> B means a file of folder A includes a header of folder B, or an
object built from folder A calls a symbol that an object of folder B defines
(read with `nm` from a build directory). The floors (docs/DESIGN.md):

    1 core/                       the component SDK
    2 proto/ net/ config/          codecs and transports
    3 receivers/ processors/ exporters/ extensions/ store/   components
    4 pipeline/                    graph, service, main

An arrow may only run down a floor or stay on one; no circle between folders;
no header names a symbol that only a higher floor defines; and no function
that proto/ offers returns an int error code (docs/DESIGN.md, "Errors");
no file-scope mutable state beyond the list docs/DESIGN.md gives reasons for.
Usage: scripts/floors.py [BUILD_DIR]   (default: build). Exit 1 on a breach.
"""
import os
import re
import subprocess
import sys
from collections import defaultdict

FLOORS = {'core': 1, 'proto': 2, 'net': 2, 'config': 2, 'receivers': 3, 'processors': 3,
          'exporters': 3, 'extensions': 3, 'store': 3, 'pipeline': 4}
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def folder_of(path):
    top = path.split('/', 1)[0]
    return top if top in FLOORS else None


def include_arrows(arrows):
    for top in FLOORS:
        for dirpath, _, files in os.walk(os.path.join(ROOT, top)):
            for name in files:
                if not name.endswith(('.c', '.h')) or name.endswith(('.pb.c', '.pb.h')):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, ROOT)
                with open(path, encoding='utf-8', errors='replace') as f:
                    text = f.read()
                for inc in INCLUDE.findall(text):
                    # "dir/x.h" from the root (generated headers too), else
                    # next to the including file
                    local = os.path.normpath(os.path.join(os.path.dirname(rel), inc))
                    target = inc if folder_of(inc) else local
                    if not folder_of(inc) and not os.path.exists(os.path.join(ROOT, local)):
                        # the build's other include folder, and nanopb's output
                        if inc.endswith('.pb.h') or os.path.exists(os.path.join(ROOT, 'proto', inc)):
                            target = os.path.join('proto', inc)
                    b = folder_of(target)
                    if b and b != top:
                        arrows[(top, b)].add(f'{rel} includes {inc}')


def call_arrows(arrows, build):
    objs = []
    for d in ('libproflink.a.p', 'proflink.p'):
        objdir = os.path.join(build, d)
        if os.path.isdir(objdir):
            objs += [os.path.join(objdir, n) for n in sorted(os.listdir(objdir))
                     if n.endswith('.c.o') and '.pb.c' not in n and n.split('_', 1)[0] in FLOORS]
    if not objs:
        sys.exit(f'floors: no objects under {build}: build first')
    out = subprocess.run(['nm', '-A'] + objs, capture_output=True, text=True, check=True).stdout
    defined, wanted = {}, []
    for line in out.splitlines():
        path, _, rest = line.partition('.c.o:')
        path += '.c.o'
        name = os.path.basename(path)[:-4]
        top = name.split('_', 1)[0]
        parts = rest.split()
        if len(parts) == 2 and parts[0] == 'U':
            wanted.append((top, name, parts[1]))
        elif len(parts) == 3 and parts[1] in 'TDBRC':
            defined[parts[2]] = top
    for top, obj, sym in wanted:
        b = defined.get(sym)
        if b and b != top:
            arrows[(top, b)].add(f'{obj} calls {sym}')
    return defined


COMMENT = re.compile(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"', re.S)
IDENT = re.compile(r'\b[A-Za-z_]\w*\b')


def declared_below(defined):
    """Names a header declares (or otherwise names, comments and strings
    aside) that an object of a higher floor defines: a lower floor would
    promise what only a higher one keeps."""
    found = []
    for top in FLOORS:
        for dirpath, _, files in os.walk(os.path.join(ROOT, top)):
            for name in sorted(files):
                if not name.endswith('.h') or name.endswith('.pb.h'):
                    continue
                path = os.path.join(dirpath, name)
                with open(path, encoding='utf-8', errors='replace') as f:
                    text = COMMENT.sub(' ', f.read())
                for ident in sorted(set(IDENT.findall(text))):
                    b = defined.get(ident)
                    if b and FLOORS[b] > FLOORS[top]:
                        found.append(f'{os.path.relpath(path, ROOT)} names {ident}, defined in {b}/')
    return found


def circles(nodes, edges):
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for a, b in edges:
            if a != v:
                continue
            if b not in index:
                visit(b)
                low[v] = min(low[v], low[b])
            elif b in on:
                low[v] = min(low[v], index[b])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in nodes:
        if v not in index:
            visit(v)
    return out


# The codec layer's error convention (docs/DESIGN.md, "Errors"): what proto/
# offers other folders returns pl_status (with a pl_err), bool, a pointer or
# a value, never an int error code. int 0 / -1 is for the steps a decoder is
# built from, whose caller turns -1 into its pl_status: the headers below.
CODEC_STEPS = ('pb_wire.h', 'json_reader.h', 'errpath.h')
# Known deviations, with docs/DESIGN.md's list: they go with the pprof
# builder's rewrite.
CODEC_INT_KNOWN = {'pl_gzip', 'pl_pprof_builder_name_last', 'pl_pprof_writer_add',
                   'pl_pprof_writer_finish'}
INT_DECL = re.compile(r'^(?:static\s+inline\s+)?(?:int|long|int32_t|int64_t|ssize_t)\s+(pl_\w+)\s*\(',
                      re.M)


def codec_int_returns():
    found = []
    for dirpath, _, files in os.walk(os.path.join(ROOT, 'proto')):
        for name in sorted(files):
            if (not name.endswith('.h') or name.endswith(('.pb.h', '_internal.h'))
                    or name in CODEC_STEPS):
                continue
            path = os.path.join(dirpath, name)
            with open(path, encoding='utf-8', errors='replace') as f:
                text = COMMENT.sub(' ', f.read())
            for fn in INT_DECL.findall(text):
                if fn not in CODEC_INT_KNOWN:
                    found.append(f'{os.path.relpath(path, ROOT)}: {fn} returns an int')
    return found


# File-scope mutable state (docs/DESIGN.md, "What is still file-scope and
# mutable, and why"): each object's variables in .data / .bss / .tdata /
# .tbss, by name (a static local's function or counter suffix dropped). A
# new one fails until it has a stated reason there and a line here.
MUTABLE_KNOWN = {
    'core_hash': {'pl_hash_k0_', 'pl_hash_k1_', 'key', 'key_once'},
    'core_host': {'memory_state', 'worker_host', 'pipeline_borrowed'},
    'core_log': {'current_level', 'current_encoding', 'fields_buf', 'current_fields'},
    'core_stats': {'registered_head', 'stats_lock', 'sink'},
    'exporters_queue': {'enc_mu', 'enc_cv'},
    'receivers_pprof_scrape': {'decode_mu', 'decode_cv'},
    'extensions_auth': {'no_host_registry'},
    'extensions_basicauth': {'cd'},
    'net_tls': {'live', 'list_mu', 'ctx_mu'},
    'net_http_client': {'curl_once', 'curl_init_code'},
    'exporters_lb_dns': {'lib_ready'},
    'processors_correlation_spill': {'process_token', 'process_seq', 'msg'},
    'proto_otlp_tables': {'*_ix'},
    'pipeline_telemetry_metrics': {'process_start_ns'},
    'pipeline_workers': {'this_worker'},
    'pipeline_main': {'def'},
}
SYMTAB = re.compile(r'^[0-9a-f]+ (.{7}) (\S+)\t[0-9a-f]+ (.*)$')
MUTABLE_SECTION = re.compile(r'^\.(bss|data|tbss|tdata)(\.|$)')


def mutable_state(build):
    found = []
    for d in ('libproflink.a.p', 'proflink.p'):
        objdir = os.path.join(build, d)
        if not os.path.isdir(objdir):
            continue
        for n in sorted(os.listdir(objdir)):
            stem = n[:-4] if n.endswith('.c.o') else None
            if not stem or '.pb.c' in n or stem.split('_', 1)[0] not in FLOORS:
                continue
            out = subprocess.run(['objdump', '-t', os.path.join(objdir, n)], capture_output=True,
                                 text=True, check=True).stdout
            for line in out.splitlines():
                m = SYMTAB.match(line)
                if not m:
                    continue
                flags, section, name = m.groups()
                if ('d' in flags[5:] or 'f' in flags[5:] or section.startswith('.data.rel.ro')
                        or not (MUTABLE_SECTION.match(section) or section == '*COM*')
                        or name.startswith(('.', '__'))):
                    continue
                # gcc names a static local var.N, clang function.var
                parts = [p for p in name.split('.') if p and not p.isdigit()]
                base = parts[-1] if parts else name
                known = MUTABLE_KNOWN.get(stem, set())
                if base in known or ('*_ix' in known and base.endswith('_ix')):
                    continue
                found.append(f'{stem}.c: {name} ({section})')
    return found


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, 'build')
    arrows = defaultdict(set)
    include_arrows(arrows)
    defined = call_arrows(arrows, build)
    below = declared_below(defined)
    up = {k: v for k, v in arrows.items() if FLOORS[k[0]] < FLOORS[k[1]]}
    loops = circles(sorted(FLOORS), list(arrows))
    print(f'{len(arrows)} arrows between folders, {len(up)} run up a floor, '
          f'{len(loops)} circles')
    for (a, b) in sorted(arrows, key=lambda k: (-FLOORS[k[0]], k)):
        mark = '  UP' if (a, b) in up else ''
        print(f'  {a:<11} -> {b}{mark}')
    for (a, b), why in sorted(up.items()):
        print(f'up: {a} -> {b}')
        for w in sorted(why)[:8]:
            print(f'    {w}')
    for loop in loops:
        print('circle: ' + ', '.join(loop))
        for a in loop:
            for b in loop:
                if (a, b) in arrows and FLOORS[a] == FLOORS[b]:
                    print(f'  {a} -> {b}: ' + '; '.join(sorted(arrows[(a, b)])[:4]))
    for line in below:
        print('declared below its definition: ' + line)
    ints = codec_int_returns()
    for line in ints:
        print('codec error convention: ' + line + ' (pl_status, bool, or a *_internal.h step)')
    state = mutable_state(build)
    for line in state:
        print('file-scope mutable state without a stated reason: ' + line)
    return 1 if up or loops or below or ints or state else 0


if __name__ == '__main__':
    sys.exit(main())
