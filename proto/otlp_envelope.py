#!/usr/bin/env python3
"""Stamps the OTLP envelope (otlp_envelope.proto.in) into a signal's .proto.

Every OTLP signal wraps its items in the same three messages (XData ->
ResourceX -> ScopeX -> items). The signal's .proto in the source tree says
which names its envelope has with one comment line

    // @otlp_envelope TracesData Spans Span spans
    // @otlp_envelope ProfilesData Profiles Profile profiles + ProfilesDictionary dictionary = 2

(DATA, X, ITEM, ITEMS, and optionally one more field of DATA after ` + `),
and this script writes the file again with the template's body after that
line (and an empty one, so that protoc does not take the comments before it
for the first message's documentation). The result goes to the build tree at the same relative path, a
proto root that is searched before proto/ (protoc, nanopb, gen_schema.py,
the interop tests): see proto/meson.build.

usage: otlp_envelope.py TEMPLATE IN.proto OUT.proto
"""
import os
import re
import sys

DIRECTIVE = re.compile(r'^// @otlp_envelope (\w+) (\w+) ([\w.]+) (\w+)(?: \+ ([^;\n]+))?\n', re.M)


def stamp(template, m):
    data, x, item, items, extra = m.groups()
    subst = {
        '@DATA@': data, '@X@': x, '@x@': x.lower(), '@ITEM@': item, '@ITEMS@': items,
        '@EXTRA@': '  %s;\n' % extra.strip() if extra else '',
    }
    return re.sub('|'.join(map(re.escape, subst)), lambda t: subst[t.group(0)], template)


def main():
    template_path, src, dst = sys.argv[1:4]
    with open(template_path) as f:
        # The template's own description ends at its first empty line.
        template = f.read().split('\n\n', 1)[1]
    with open(src) as f:
        text = f.read()
    found = DIRECTIVE.findall(text)
    if len(found) != 1:
        raise SystemExit('%s: expected one "// @otlp_envelope DATA X ITEM ITEMS" line, found %d'
                         % (src, len(found)))
    text = DIRECTIVE.sub(lambda m: m.group(0) + '\n' + stamp(template, m), text)
    with open(dst + '.tmp', 'w') as f:
        f.write(text)
    os.replace(dst + '.tmp', dst)


if __name__ == '__main__':
    main()
