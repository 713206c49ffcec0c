#!/usr/bin/env python3
"""Generates C tables describing protobuf messages from .proto files, for
proflink's table-driven OTLP/JSON -> protobuf transcoder (otlp_transcode.c).

Reads the proto3 subset the files in proto/ use (package, import, message,
nested message, enum, oneof, reserved, option, service), resolves field types
like protoc does (innermost scope first), and writes, for every message
reachable from the given roots, one row per field: JSON name (lowerCamelCase),
field number, scalar type or sub-message, repeated flag, and enum names.

Each FILE.proto is read from the first proto root (-I DIR, as protoc takes
them) that has it: the build's proto/ directory holds the signal files with
their OTLP envelope stamped in (otlp_envelope.py), the source's the rest.

usage: gen_schema.py OUT_C OUT_H -I DIR [-I DIR...] ROOT_MESSAGE... -- FILE.proto...
"""
import os
import re
import sys

SCALARS = {
    'double': 'PL_PB_DOUBLE', 'float': 'PL_PB_FLOAT', 'int32': 'PL_PB_INT32',
    'int64': 'PL_PB_INT64', 'uint32': 'PL_PB_UINT32', 'uint64': 'PL_PB_UINT64',
    'sint32': 'PL_PB_SINT32', 'sint64': 'PL_PB_SINT64', 'fixed32': 'PL_PB_FIXED32',
    'fixed64': 'PL_PB_FIXED64', 'sfixed32': 'PL_PB_SFIXED32', 'sfixed64': 'PL_PB_SFIXED64',
    'bool': 'PL_PB_BOOL', 'string': 'PL_PB_STRING', 'bytes': 'PL_PB_BYTES',
}
# OTLP/JSON writes these bytes fields as hex, every other one as base64.
HEX_IDS = {'trace_id', 'span_id', 'parent_span_id', 'profile_id'}


def tokens(text):
    text = re.sub(r'//[^\n]*', '', text)
    text = re.sub(r'/\*.*?\*/', '', text, flags=re.S)
    return re.findall(r'"[^"]*"|[A-Za-z_][\w.]*|\d+|[{}=;<>,\[\]()]|-', text)


class Parser:
    def __init__(self, toks):
        self.t = toks
        self.i = 0

    def peek(self):
        return self.t[self.i] if self.i < len(self.t) else None

    def take(self, want=None):
        tok = self.t[self.i]
        if want is not None and tok != want:
            raise SystemExit('gen_schema: expected %r, got %r' % (want, tok))
        self.i += 1
        return tok

    def skip_statement(self):
        depth = 0
        while True:
            tok = self.take()
            if tok == '{':
                depth += 1
            elif tok == '}':
                depth -= 1
                if depth == 0:
                    return
            elif tok == ';' and depth == 0:
                return


def parse_file(path, messages, enums):
    p = Parser(tokens(open(path).read()))
    package = ''
    while p.peek() is not None:
        tok = p.peek()
        if tok == 'package':
            p.take()
            package = p.take()
            p.take(';')
        elif tok == 'message':
            parse_message(p, package, messages, enums)
        elif tok == 'enum':
            parse_enum(p, package, enums)
        else:
            p.skip_statement()


def parse_enum(p, scope, enums):
    p.take('enum')
    name = scope + '.' + p.take()
    p.take('{')
    values = []
    while p.peek() != '}':
        if p.peek() in ('option', 'reserved'):
            p.skip_statement()
            continue
        vname = p.take()
        p.take('=')
        neg = p.peek() == '-'
        if neg:
            p.take()
        num = int(p.take()) * (-1 if neg else 1)
        while p.take() != ';':
            pass
        values.append((vname, num))
    p.take('}')
    enums[name] = values


def parse_message(p, scope, messages, enums):
    p.take('message')
    name = scope + '.' + p.take()
    p.take('{')
    fields = []
    messages[name] = fields
    parse_body(p, name, fields, messages, enums)
    p.take('}')


def parse_body(p, name, fields, messages, enums):
    while p.peek() != '}':
        tok = p.peek()
        if tok == 'message':
            parse_message(p, name, messages, enums)
        elif tok == 'enum':
            parse_enum(p, name, enums)
        elif tok in ('reserved', 'option', 'extensions'):
            p.skip_statement()
        elif tok == 'oneof':
            p.take()
            p.take()
            p.take('{')
            parse_body(p, name, fields, messages, enums)
            p.take('}')
        else:
            label = None
            if tok in ('repeated', 'optional'):
                label = p.take()
            ftype = p.take()
            fname = p.take()
            p.take('=')
            num = int(p.take())
            while p.take() != ';':
                pass
            fields.append({'type': ftype, 'name': fname, 'num': num,
                           'repeated': label == 'repeated', 'scope': name})


def resolve(ref, scope, known):
    if ref.startswith('.'):
        return ref[1:] if ref[1:] in known else None
    parts = scope.split('.')
    while parts:
        cand = '.'.join(parts) + '.' + ref
        if cand in known:
            return cand
        parts.pop()
    return ref if ref in known else None


def camel(name):
    head, *rest = name.split('_')
    return head + ''.join(w[:1].upper() + w[1:] for w in rest)


def cname(full):
    return 'pb_' + full.replace('.', '_')


def main():
    out_c, out_h = sys.argv[1:3]
    args = sys.argv[3:]
    dirs = []
    while args[0] == '-I':
        dirs.append(args[1])
        args = args[2:]
    sep = args.index('--')
    roots = args[:sep]
    files = args[sep + 1:]
    messages, enums = {}, {}
    for f in files:
        found = [os.path.join(d, f) for d in dirs if os.path.exists(os.path.join(d, f))]
        if not found:
            raise SystemExit('gen_schema: %s is in none of %s' % (f, dirs))
        parse_file(found[0], messages, enums)
    # Messages reachable from the roots, in a stable order.
    order, seen = [], set()
    stack = list(roots)
    while stack:
        m = stack.pop(0)
        if m in seen:
            continue
        if m not in messages:
            raise SystemExit('gen_schema: unknown message ' + m)
        seen.add(m)
        order.append(m)
        for f in messages[m]:
            if f['type'] not in SCALARS:
                t = resolve(f['type'], f['scope'], messages)
                if t:
                    stack.append(t)
    used_enums = []
    out = ['/* Generated by proto/gen_schema.py from the .proto files; do not edit. */',
           '#include "otlp_schema.h"', '']
    for m in order:
        out.append('static const pl_pbmsg %s;' % cname(m))
    out.append('')
    for m in order:
        for f in messages[m]:
            if f['type'] in SCALARS or resolve(f['type'], f['scope'], messages):
                continue
            e = resolve(f['type'], f['scope'], enums)
            if not e:
                raise SystemExit('gen_schema: unknown type %s in %s' % (f['type'], m))
            if e not in used_enums:
                used_enums.append(e)
    for e in used_enums:
        vals = enums[e]
        out.append('static const char *const %s_names[] = {%s};' %
                   (cname(e), ', '.join('"%s"' % v for v, _ in vals)))
        out.append('static const int32_t %s_values[] = {%s};' %
                   (cname(e), ', '.join(str(n) for _, n in vals)))
        out.append('static const pl_pbenum %s = {%s_names, %s_values, %d};' %
                   (cname(e), cname(e), cname(e), len(vals)))
    out.append('')
    for m in order:
        rows = []
        for f in sorted(messages[m], key=lambda f: f['num']):
            sub = 'NULL'
            en = 'NULL'
            if f['type'] in SCALARS:
                t = SCALARS[f['type']]
            elif resolve(f['type'], f['scope'], messages):
                t = 'PL_PB_MESSAGE'
                sub = '&' + cname(resolve(f['type'], f['scope'], messages))
            else:
                t = 'PL_PB_ENUM'
                en = '&' + cname(resolve(f['type'], f['scope'], enums))
            json = camel(f['name'])
            hexid = 1 if (f['type'] == 'bytes' and f['name'] in HEX_IDS) else 0
            rows.append('    {"%s", %d, %s, %d, %d, %d, %s, %s},' %
                        (json, len(json), t, 1 if f['repeated'] else 0, hexid, f['num'], sub, en))
        out.append('static const pl_pbfield %s_fields[] = {' % cname(m))
        out.extend(rows or ['    {"", 0, 0, 0, 0, 0, NULL, NULL},'])
        out.append('};')
        out.append('static const pl_pbmsg %s = {"%s", %s_fields, %d};' %
                   (cname(m), m.split('.')[-1], cname(m), len(rows)))
        out.append('')
    header = ['/* Generated by proto/gen_schema.py from the .proto files; do not edit. */',
              '#ifndef PL_OTLP_SCHEMA_GEN_H', '#define PL_OTLP_SCHEMA_GEN_H', '']
    for r in roots:
        short = r.split('.')[-1]
        out.append('const pl_pbmsg *const pl_pb_%s = &%s;' % (short, cname(r)))
        header.append('extern const pl_pbmsg *const pl_pb_%s;' % short)
    header += ['', '#endif', '']
    with open(out_c + '.tmp', 'w') as fh:
        fh.write('\n'.join(out) + '\n')
    os.replace(out_c + '.tmp', out_c)
    with open(out_h + '.tmp', 'w') as fh:
        fh.write('\n'.join(header))
    os.replace(out_h + '.tmp', out_h)


if __name__ == '__main__':
    main()
