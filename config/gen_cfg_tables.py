#!/usr/bin/env python3
"""gen_cfg_tables.py: a component's config schema (YAML) -> its C tables.

Every component describes its config options in <stem>.config.yaml next to
its C file: a list of tables, each with the C struct its options fill and,
per option, the YAML key (name), its type (string, int, bool, double,
duration, size, strlist, strmap, section, list, ignored, address), the
default as YAML text, the struct field, a one-line help text and, for
section and list options, the subsection (a pl_cfg_section) describing the
nested mapping. An entry `- shared: NAME` stands for a group of options
several tables have in common (config/shared.config.yaml), filled from the
table's own struct. A table may carry its section: the pl_cfg_section's name,
its validate hook, and its size when that is not sizeof(struct).

At build time (meson custom_target, one per YAML) this script writes
<stem>.config.inc: the pl_cfg_field arrays (key == NULL terminated) and
their sections, in the YAML's order. The C file includes it once, after the
structs and validate hooks the tables name. The decoder, `proflink
components` and the man page read only these tables (config/decode.h), so
the YAML is the one place an option is declared.

Usage: gen_cfg_tables.py INPUT.yaml OUTPUT.inc [SHARED.yaml]
"""
import sys

import yaml

TYPES = {'string', 'int', 'bool', 'double', 'duration', 'size', 'strlist', 'strmap', 'section',
         'list', 'ignored', 'address'}
OPTION_KEYS = {'name', 'type', 'default', 'field', 'help', 'subsection'}
TABLE_KEYS = {'name', 'struct', 'extern', 'section', 'options'}
SECTION_KEYS = {'name', 'validate', 'size', 'extern'}


def fail(where, msg):
    sys.exit('gen_cfg_tables: %s: %s' % (where, msg))


def c_string(s):
    """A Python str (or None) as a C string literal (or NULL)."""
    if s is None:
        return 'NULL'
    if not isinstance(s, str):
        s = str(s)
    out = ''
    for ch in s:
        if ch in '"\\':
            out += '\\' + ch
        elif ch == '\n':
            out += '\\n'
        elif ch == '\t':
            out += '\\t'
        elif ord(ch) < 0x20:
            out += '\\%03o' % ord(ch)
        else:
            out += ch
    return '"' + out + '"'


def check_keys(where, d, allowed):
    if not isinstance(d, dict):
        fail(where, 'expected a mapping')
    extra = set(d) - allowed
    if extra:
        fail(where, 'unknown key(s) %s (known: %s)' % (', '.join(sorted(extra)),
                                                       ', '.join(sorted(allowed))))


def emit_table(src, t, groups):
    check_keys(src, t, TABLE_KEYS)
    name = t.get('name')
    if not name:
        fail(src, 'a table without a name')
    where = '%s: %s' % (src, name)
    struct = t.get('struct')
    lines = []
    storage = '' if t.get('extern') else 'static '
    lines.append('%sconst pl_cfg_field %s[] = {' % (storage, name))
    seen = set()
    options = []
    for o in t.get('options') or []:
        if isinstance(o, dict) and set(o) == {'shared'}:
            if o['shared'] not in groups:
                fail(where, 'no shared option group %r' % o['shared'])
            options += groups[o['shared']]
        else:
            options.append(o)
    for o in options:
        check_keys(where, o, OPTION_KEYS)
        key = o.get('name')
        if not key or key in seen:
            fail(where, 'option without a name, or twice: %r' % key)
        seen.add(key)
        typ = o.get('type')
        if typ not in TYPES:
            fail('%s.%s' % (where, key), 'type %r is none of %s' % (typ, ', '.join(sorted(TYPES))))
        field = o.get('field')
        if field is None:
            if typ != 'ignored':
                fail('%s.%s' % (where, key), 'needs a field (only type ignored has none)')
            offset = '0'
        else:
            if not struct:
                fail(where, 'options with a field need the table\'s struct')
            offset = 'offsetof(%s, %s)' % (struct, field)
        sub = o.get('subsection')
        if (sub is None) != (typ not in ('section', 'list')):
            fail('%s.%s' % (where, key), 'a subsection goes with type section or list, and only there')
        default = o.get('default')
        if default is not None and not isinstance(default, str):
            fail('%s.%s' % (where, key), 'write the default as a quoted string (YAML text)')
        lines.append('    {%s, PL_CFG_%s, %s, %s, %s, %s},' %
                     (c_string(key), typ.upper(), c_string(default), offset,
                      c_string(o.get('help')), '&' + sub if sub else 'NULL'))
    lines.append('    {NULL, 0, NULL, 0, NULL, NULL},')
    lines.append('};')
    sec = t.get('section')
    if sec is not None:
        check_keys(where + ' section', sec, SECTION_KEYS)
        if not sec.get('name'):
            fail(where, 'section without a name')
        size = sec.get('size')
        if size is None:
            if not struct:
                fail(where, 'a section needs the table\'s struct or a size')
            size = 'sizeof(%s)' % struct
        storage = '' if sec.get('extern') else 'static '
        lines.append('%sconst pl_cfg_section %s = {%s, %s, %s};' %
                     (storage, sec['name'], size, name, sec.get('validate') or 'NULL'))
    return lines


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit('usage: gen_cfg_tables.py INPUT.yaml OUTPUT.inc [SHARED.yaml]')
    src, dst = sys.argv[1], sys.argv[2]
    groups = {}
    if len(sys.argv) == 4:
        with open(sys.argv[3], encoding='utf-8') as f:
            shared = yaml.safe_load(f)
        check_keys(sys.argv[3], shared, {'groups'})
        groups = shared['groups']
    with open(src, encoding='utf-8') as f:
        doc = yaml.safe_load(f)
    check_keys(src, doc, {'tables'})
    out = ['/* Generated by config/gen_cfg_tables.py from %s: edit the YAML, not this. */' %
           '/'.join(src.split('/')[-2:])]
    names = set()
    for t in doc.get('tables') or []:
        if t.get('name') in names:
            fail(src, 'table %s twice' % t.get('name'))
        names.add(t.get('name'))
        out.append('')
        out += emit_table(src, t, groups)
    with open(dst, 'w', encoding='utf-8') as f:
        f.write('\n'.join(out) + '\n')


if __name__ == '__main__':
    main()
