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

Simple per-option limits live in the schema too, under the names JSON
Schema (and so the Collector's config schemas) give them: `minimum`,
`exclusive_minimum`, `maximum` (YAML text in the option's type: '0', 1s,
1MiB), `required: true` (a string must be non-empty, a list must have an
item), and `message`, the error text when one of them fails (default: "must
not be negative", "must be at least X", "must be between X and Y", "is
required" ...). They become a pl_cfg_rule the decoder checks before the
section's validate hook, which keeps only the rules that relate options.

With --header OUTPUT.h the script also writes the C structs the tables fill,
one per table (YAML order of the fields, types from the option types: string
-> char *, int and duration -> int64_t, size -> uint64_t, section -> the
struct of the nested table, or the option's `c_type` when that table lives
in another schema). A table whose struct is written by hand says where with
`declared_in` (the .inc then asserts at compile time that each member has
the type its option needs); members that are no option (state a validate
hook sets) are `extra_fields` ({field, c_type, help}). The C file includes the header where
the struct used to be, or a public header includes it.

Usage: gen_cfg_tables.py INPUT.yaml OUTPUT.inc [SHARED.yaml] [--header OUTPUT.h]
"""
import re
import sys

import yaml

TYPES = {'string', 'int', 'bool', 'double', 'duration', 'size', 'strlist', 'strmap', 'section',
         'list', 'ignored', 'address'}
OPTION_KEYS = {'name', 'type', 'default', 'field', 'help', 'subsection', 'c_type', 'minimum',
               'exclusive_minimum', 'maximum', 'required', 'message'}
TABLE_KEYS = {'name', 'struct', 'extern', 'section', 'options', 'declared_in', 'extra_fields'}
SECTION_KEYS = {'name', 'validate', 'size', 'extern'}
EXTRA_KEYS = {'field', 'c_type', 'help'}
# The C type of the field each option type fills (core/component.h).
C_TYPES = {'string': 'char *', 'address': 'char *', 'int': 'int64_t', 'duration': 'int64_t',
           'bool': 'bool', 'double': 'double', 'size': 'uint64_t', 'strlist': 'pl_strlist',
           'strmap': 'pl_strmap', 'list': 'pl_cfg_list'}
LIMITS = ('minimum', 'exclusive_minimum', 'maximum')
# What a limit may look like per option type; the decoder parses it with the
# option's own parser (so 1s and 1MiB work), this only catches typos early.
LIMIT_SYNTAX = {'int': r'-?[0-9]+', 'double': r'-?[0-9]+(\.[0-9]+)?',
                'duration': r'[0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h)?',
                'size': r'[0-9]+(\.[0-9]+)?([KMGT]i?B|[kKMGT]|B)?'}
REQUIRABLE = {'string', 'address', 'strlist', 'strmap', 'list'}


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


def limit_text(where, typ, name, v):
    """A limit as the YAML text the decoder parses with the option's parser."""
    if isinstance(v, bool) or not isinstance(v, (str, int, float)):
        fail(where, '%s must be a number or a quoted %s' % (name, typ))
    text = str(v)
    if not re.fullmatch(LIMIT_SYNTAX[typ], text):
        fail(where, '%s %r is not a %s' % (name, text, typ))
    return text


def default_message(rule):
    """The error text of a rule without `message`, the words the validate
    hooks used for the same checks."""
    if rule.get('required'):
        return 'is required'
    lo, ex, hi = rule.get('minimum'), rule.get('exclusive_minimum'), rule.get('maximum')
    if lo is not None and hi is not None:
        return 'must be between %s and %s' % (lo, hi)
    if ex is not None and hi is not None:
        return 'must be greater than %s and at most %s' % (ex, hi)
    if ex is not None:
        return 'must be greater than %s' % ex
    if lo is not None:
        return 'must not be negative' if lo == '0' else 'must be at least %s' % lo
    return 'must be at most %s' % hi


def option_rule(where, o, typ):
    """The option's pl_cfg_rule as a C compound literal, or NULL."""
    rule = {}
    for k in LIMITS:
        if k in o:
            if typ not in LIMIT_SYNTAX:
                fail(where, '%s goes with int, double, duration or size, not %s' % (k, typ))
            rule[k] = limit_text(where, typ, k, o[k])
    if 'minimum' in rule and 'exclusive_minimum' in rule:
        fail(where, 'minimum and exclusive_minimum exclude each other')
    if 'required' in o:
        if o['required'] is not True:
            fail(where, 'required is true or absent')
        if typ not in REQUIRABLE:
            fail(where, 'required goes with a string, address or list, not %s' % typ)
        if rule:
            fail(where, 'required and a limit do not go together')
        rule['required'] = True
    if 'message' in o:
        if not rule:
            fail(where, 'a message needs a limit or required')
        if not isinstance(o['message'], str) or not o['message']:
            fail(where, 'message must be text')
    if not rule:
        return 'NULL'
    parts = ['.%s = %s' % (k, c_string(rule[k])) for k in LIMITS if k in rule]
    if rule.get('required'):
        parts.append('.required = true')
    parts.append('.message = %s' % c_string(o.get('message') or default_message(rule)))
    return '&(const pl_cfg_rule){%s}' % ', '.join(parts)


def expand_options(where, t, groups):
    options = []
    for o in t.get('options') or []:
        if isinstance(o, dict) and set(o) == {'shared'}:
            if o['shared'] not in groups:
                fail(where, 'no shared option group %r' % o['shared'])
            options += groups[o['shared']]
        else:
            options.append(o)
    return options


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
    for o in expand_options(where, t, groups):
        check_keys(where, o, OPTION_KEYS)
        key = o.get('name')
        if not key or key in seen:
            fail(where, 'option without a name, or twice: %r' % key)
        if not isinstance(key, str):
            fail(where, 'option name %r is not text (quote it: YAML reads on/off/yes/no as '
                 'booleans)' % key)
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
        if 'c_type' in o and typ != 'section':
            fail('%s.%s' % (where, key), 'c_type is for a section option only')
        default = o.get('default')
        if default is not None and not isinstance(default, str):
            fail('%s.%s' % (where, key), 'write the default as a quoted string (YAML text)')
        row = [c_string(key), 'PL_CFG_' + typ.upper(), c_string(default), offset,
               c_string(o.get('help')), '&' + sub if sub else 'NULL']
        rule = option_rule('%s.%s' % (where, key), o, typ)
        if rule != 'NULL':
            row.append(rule)
        lines.append('    {%s},' % ', '.join(row))
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


def emit_struct(src, t, groups, struct_of, done, checks):
    """The typedef of the table's struct (a list of lines; empty when the
    struct is written by hand or was already emitted for an earlier table).
    For a hand-written struct, appends to `checks` the static assertions
    that its members have the types the options need."""
    struct = t.get('struct')
    where = '%s: %s' % (src, t.get('name'))
    declared = t.get('declared_in')
    if declared is not None and not (isinstance(declared, str) and declared):
        fail(where, 'declared_in names the file that declares the struct')
    if not struct:
        if declared is not None or t.get('extra_fields'):
            fail(where, 'declared_in and extra_fields need the table\'s struct')
        return []
    members = []  # (field, C type, comment)
    for o in expand_options(where, t, groups):
        field = o.get('field')
        if field is None:
            continue
        typ = o['type']
        if typ == 'section':
            known = struct_of.get(o['subsection'])
            ctype = o.get('c_type') or known
            if not ctype:
                fail('%s.%s' % (where, o['name']), 'subsection %s is in no schema given: give its '
                     'c_type' % o['subsection'])
            if known and ctype != known:
                fail('%s.%s' % (where, o['name']), 'c_type %s, but %s fills %s' %
                     (ctype, o['subsection'], known))
        else:
            ctype = C_TYPES[typ]
        if not re.fullmatch(r'[A-Za-z_][A-Za-z0-9_]*', field):
            fail('%s.%s' % (where, o['name']), 'field %r is not a C member name' % field)
        unit = {'duration': ', ns', 'size': ', bytes'}.get(typ, '')
        members.append((field, ctype, '%s: %s%s' % (o['name'], typ, unit)))
    for e in t.get('extra_fields') or []:
        check_keys(where + ' extra_fields', e, EXTRA_KEYS)
        if not e.get('field') or not e.get('c_type'):
            fail(where, 'an extra field needs field and c_type')
        members.append((e['field'], e['c_type'], e.get('help')))
    by_field = {}
    for f, c, _ in members:
        if by_field.setdefault(f, c) != c:
            fail(where, 'field %s has two types (%s, %s)' % (f, by_field[f], c))
    if declared is not None:
        if t.get('extra_fields'):
            fail(where, 'extra_fields go with a generated struct, not one in %s' % declared)
        # the hand-written struct must have the types the decoder writes
        checks.extend('_Static_assert(_Generic(((%s *)0)->%s, %s: 1, default: 0), '
                      '"%s.%s must be %s (%s)");' % (struct, f, c, struct, f, c, declared)
                      for f, c in by_field.items())
        return []
    if struct in done:
        for f, c in by_field.items():
            if done[struct].get(f) != c:
                fail(where, 'struct %s is generated for an earlier table without %s' % (struct, f))
        return []
    done[struct] = by_field
    lines = ['typedef struct %s {' % struct]
    emitted = set()
    for f, c, comment in members:
        if f in emitted:
            continue
        emitted.add(f)
        decl = '    %s%s%s;' % (c, '' if c.endswith('*') else ' ', f)
        lines.append(decl + (' /* %s */' % comment if comment else ''))
    if not emitted:
        lines.append('    char unused; /* no option keeps a value; C wants a member */')
    lines.append('} %s;' % struct)
    return lines


def main():
    args = sys.argv[1:]
    header = None
    if '--header' in args:
        i = args.index('--header')
        if i + 1 >= len(args):
            sys.exit('gen_cfg_tables: --header needs a file name')
        header = args[i + 1]
        del args[i:i + 2]
    if len(args) < 2:
        sys.exit('usage: gen_cfg_tables.py INPUT.yaml OUTPUT.inc [SHARED.yaml [SCHEMA.yaml...]] '
                 '[--header OUTPUT.h]')
    src, dst = args[0], args[1]
    groups = {}
    if len(args) >= 3:
        with open(args[2], encoding='utf-8') as f:
            shared = yaml.safe_load(f)
        check_keys(args[2], shared, {'groups'})
        groups = shared['groups']
    # the structs of sections other schemas declare (tls, auth, queue ...)
    struct_of = {}
    for other in args[3:]:
        with open(other, encoding='utf-8') as f:
            for t in (yaml.safe_load(f) or {}).get('tables') or []:
                if t.get('struct') and t.get('section'):
                    struct_of[t['section']['name']] = t['struct']
    with open(src, encoding='utf-8') as f:
        doc = yaml.safe_load(f)
    check_keys(src, doc, {'tables'})
    origin = '/'.join(src.split('/')[-2:])
    banner = '/* Generated by config/gen_cfg_tables.py from %s: edit the YAML, not this. */' % origin
    out = [banner]
    names = set()
    tables = doc.get('tables') or []
    for t in tables:
        if t.get('name') in names:
            fail(src, 'table %s twice' % t.get('name'))
        names.add(t.get('name'))
        out.append('')
        out += emit_table(src, t, groups)
    # the struct each section fills, for section options naming it
    for t in tables:
        if t.get('struct') and t.get('section'):
            struct_of[t['section']['name']] = t['struct']
    hdr = []
    done = {}
    checks = []
    for t in tables:
        lines = emit_struct(src, t, groups, struct_of, done, checks)
        if lines:
            hdr += [''] + lines
    if checks:
        out += [''] + checks
    with open(dst, 'w', encoding='utf-8') as f:
        f.write('\n'.join(out) + '\n')
    if header:
        guard = 'PL_CFG_GENERATED_' + re.sub(r'[^A-Za-z0-9]', '_', origin).upper()
        text = [banner, '#ifndef ' + guard, '#define ' + guard, '', '#include "core/component.h"'] + \
            hdr + ['', '#endif']
        with open(header, 'w', encoding='utf-8') as f:
            f.write('\n'.join(text) + '\n')


if __name__ == '__main__':
    main()
