#!/usr/bin/env python3
"""Checks config/gen_cfg_tables.py: the C it writes for a schema (escapes,
shared groups, sections, extern tables, ignored options, the structs of
--header, the per-option rules) and the schemas it refuses, each with a
message naming the table and option.
Usage: test_gen_cfg_tables.py GENERATOR"""
import os
import subprocess
import sys
import tempfile

GEN = sys.argv[1]
failures = 0


def run(schema, shared=None, others=(), header=False):
    """Runs the generator; with header=True the text is (inc, h)."""
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, 'x.config.yaml')
        out = os.path.join(d, 'x.config.inc')
        hdr = os.path.join(d, 'x.config.h')
        with open(src, 'w') as f:
            f.write(schema)
        args = [sys.executable, GEN, src, out]
        if shared is not None:
            sh = os.path.join(d, 'shared.yaml')
            with open(sh, 'w') as f:
                f.write(shared)
            args.append(sh)
        for i, other in enumerate(others):
            o = os.path.join(d, 'other%d.config.yaml' % i)
            with open(o, 'w') as f:
                f.write(other)
            args.append(o)
        if header:
            args += ['--header', hdr]
        p = subprocess.run(args, capture_output=True, text=True)
        text = None
        if p.returncode == 0:
            text = open(out).read()
            if header:
                text = (text, open(hdr).read())
        return p.returncode, text, p.stderr


def expect(name, cond, detail=''):
    global failures
    if not cond:
        failures += 1
        print('FAIL %s %s' % (name, detail))
    else:
        print('ok %s' % name)


GOOD = r'''
tables:
- name: inner_fields
  struct: inner_cfg
  section: {name: inner_section}
  options:
  - {name: path, type: string, field: path, help: 'a "quoted" \ path'}
- name: outer_fields
  struct: outer_cfg
  extern: true
  section: {name: pl_outer_section, validate: outer_validate, size: '1', extern: true}
  options:
  - {name: n, type: int, default: '10', field: n, help: a count}
  - {name: inner, type: section, field: in, help: nested, subsection: inner_section}
  - {name: compat, type: ignored, help: no effect}
  - shared: cap
'''
SHARED = '''
groups:
  cap:
  - {name: cap, type: size, default: 1MiB, field: cap}
'''
rc, text, err = run(GOOD, SHARED)
expect('good schema generates', rc == 0, err)
if rc == 0:
    want = [
        'static const pl_cfg_field inner_fields[] = {',
        '    {"path", PL_CFG_STRING, NULL, offsetof(inner_cfg, path), '
        '"a \\"quoted\\" \\\\ path", NULL},',
        '    {NULL, 0, NULL, 0, NULL, NULL},',
        'static const pl_cfg_section inner_section = {sizeof(inner_cfg), inner_fields, NULL};',
        'const pl_cfg_field outer_fields[] = {',
        '    {"n", PL_CFG_INT, "10", offsetof(outer_cfg, n), "a count", NULL},',
        '    {"inner", PL_CFG_SECTION, NULL, offsetof(outer_cfg, in), "nested", &inner_section},',
        '    {"compat", PL_CFG_IGNORED, NULL, 0, "no effect", NULL},',
        '    {"cap", PL_CFG_SIZE, "1MiB", offsetof(outer_cfg, cap), NULL, NULL},',
        'const pl_cfg_section pl_outer_section = {1, outer_fields, outer_validate};',
    ]
    lines = text.splitlines()
    for w in want:
        expect('emits ' + w.strip()[:40], w in lines, '\n' + text)
    expect('tables in schema order',
           text.index('inner_fields[]') < text.index('inner_section =') <
           text.index('outer_fields[]'))

BAD = [
    ('unknown type', "tables:\n- {name: t, struct: s, options: [{name: a, type: text, field: a}]}\n",
     't.a'),
    ('unknown option key',
     "tables:\n- {name: t, struct: s, options: [{name: a, type: int, field: a, dflt: '1'}]}\n",
     'dflt'),
    ('field missing', "tables:\n- {name: t, struct: s, options: [{name: a, type: int}]}\n", 't.a'),
    ('subsection on an int',
     "tables:\n- {name: t, struct: s, options: [{name: a, type: int, field: a, subsection: x}]}\n",
     't.a'),
    ('section without subsection',
     "tables:\n- {name: t, struct: s, options: [{name: a, type: section, field: a}]}\n", 't.a'),
    ('duplicate option', "tables:\n- {name: t, struct: s, options: [{name: a, type: int, field: a},"
     " {name: a, type: int, field: b}]}\n", 'twice'),
    ('default not text', "tables:\n- {name: t, struct: s, options: [{name: a, type: int, field: a,"
     " default: 5}]}\n", 't.a'),
    ('unknown shared group', "tables:\n- {name: t, struct: s, options: [{shared: nope}]}\n", 'nope'),
    ('duplicate table', "tables:\n- {name: t, struct: s}\n- {name: t, struct: s}\n", 'twice'),
]
for name, schema, needle in BAD:
    rc, _, err = run(schema, SHARED)
    expect('refuses ' + name, rc != 0 and needle in err, 'rc=%d stderr=%r' % (rc, err))


# ---- the structs (--header) and the per-option rules ----------------------

OTHER = '''
tables:
- name: tls_fields
  struct: pl_tls_cfg
  section: {name: pl_tls_section, extern: true}
  options:
  - {name: cert_file, type: string, field: cert_file}
'''
STRUCTS = r'''
tables:
- name: inner_fields
  struct: inner_cfg
  section: {name: inner_section}
  options:
  - {name: path, type: string, field: path, required: true}
  - {name: names, type: strlist, field: names, required: true, message: 'at least one name'}
- name: outer_fields
  struct: outer_cfg
  section: {name: outer_section, validate: outer_validate}
  extra_fields:
  - {field: seen, c_type: bool, help: set by outer_validate}
  options:
  - {name: n, type: int, default: '10', field: n, minimum: 0}
  - {name: pct, type: int, field: pct, minimum: '1', maximum: '100', message: 'pct must be 1..100'}
  - {name: every, type: duration, default: 1s, field: every, exclusive_minimum: '0'}
  - {name: cap, type: size, field: cap, minimum: 1MiB}
  - {name: factor, type: double, field: factor, minimum: '0', maximum: '1'}
  - {name: ratio, type: double, field: ratio, exclusive_minimum: '0', maximum: '2047'}
  - {name: top, type: int, field: top, maximum: '5'}
  - {name: enabled, type: bool, field: on_}
  - {name: labels, type: strmap, field: labels}
  - {name: items, type: list, field: items, subsection: inner_section}
  - {name: inner, type: section, field: in, subsection: inner_section}
  - {name: tls, type: section, field: tls, subsection: pl_tls_section}
  - {name: raw, type: section, field: raw, subsection: hand_section, c_type: hand_cfg}
  - {name: addr, type: address, field: addr}
  - {name: compat, type: ignored}
- name: shared_fields
  struct: outer_cfg
  options:
  - {name: n, type: int, field: n}
- name: hand_fields
  struct: hand_cfg
  declared_in: somewhere/hand.h
  options:
  - {name: x, type: int, field: x}
'''
rc, text, err = run(STRUCTS, SHARED, [OTHER], header=True)
expect('schema with structs and rules generates', rc == 0, err)
if rc == 0:
    inc, hdr = text
    want_inc = [
        '    {"path", PL_CFG_STRING, NULL, offsetof(inner_cfg, path), NULL, NULL, '
        '&(const pl_cfg_rule){.required = true, .message = "is required"}},',
        '    {"names", PL_CFG_STRLIST, NULL, offsetof(inner_cfg, names), NULL, NULL, '
        '&(const pl_cfg_rule){.required = true, .message = "at least one name"}},',
        '    {"n", PL_CFG_INT, "10", offsetof(outer_cfg, n), NULL, NULL, '
        '&(const pl_cfg_rule){.minimum = "0", .message = "must not be negative"}},',
        '    {"pct", PL_CFG_INT, NULL, offsetof(outer_cfg, pct), NULL, NULL, &(const pl_cfg_rule)'
        '{.minimum = "1", .maximum = "100", .message = "pct must be 1..100"}},',
        '    {"every", PL_CFG_DURATION, "1s", offsetof(outer_cfg, every), NULL, NULL, '
        '&(const pl_cfg_rule){.exclusive_minimum = "0", .message = "must be greater than 0"}},',
        '    {"cap", PL_CFG_SIZE, NULL, offsetof(outer_cfg, cap), NULL, NULL, '
        '&(const pl_cfg_rule){.minimum = "1MiB", .message = "must be at least 1MiB"}},',
        '    {"factor", PL_CFG_DOUBLE, NULL, offsetof(outer_cfg, factor), NULL, NULL, '
        '&(const pl_cfg_rule){.minimum = "0", .maximum = "1", .message = "must be between 0 and 1"}},',
        '    {"ratio", PL_CFG_DOUBLE, NULL, offsetof(outer_cfg, ratio), NULL, NULL, '
        '&(const pl_cfg_rule){.exclusive_minimum = "0", .maximum = "2047", '
        '.message = "must be greater than 0 and at most 2047"}},',
        '    {"top", PL_CFG_INT, NULL, offsetof(outer_cfg, top), NULL, NULL, '
        '&(const pl_cfg_rule){.maximum = "5", .message = "must be at most 5"}},',
        '    {"enabled", PL_CFG_BOOL, NULL, offsetof(outer_cfg, on_), NULL, NULL},',
    ]
    lines = inc.splitlines()
    for w in want_inc:
        expect('emits rule ' + w.strip()[:40], w in lines, '\n' + inc)
    want_h = '''typedef struct inner_cfg {
    char *path; /* path: string */
    pl_strlist names; /* names: strlist */
} inner_cfg;

typedef struct outer_cfg {
    int64_t n; /* n: int */
    int64_t pct; /* pct: int */
    int64_t every; /* every: duration, ns */
    uint64_t cap; /* cap: size, bytes */
    double factor; /* factor: double */
    double ratio; /* ratio: double */
    int64_t top; /* top: int */
    bool on_; /* enabled: bool */
    pl_strmap labels; /* labels: strmap */
    pl_cfg_list items; /* items: list */
    inner_cfg in; /* inner: section */
    pl_tls_cfg tls; /* tls: section */
    hand_cfg raw; /* raw: section */
    char *addr; /* addr: address */
    bool seen; /* set by outer_validate */
} outer_cfg;
'''
    expect('emits the structs in schema order, once each', want_h in hdr, '\n' + hdr)
    expect('a declared_in struct is not emitted', 'hand_cfg {' not in hdr, '\n' + hdr)
    expect('a declared_in struct gets its member types asserted',
           '_Static_assert(_Generic(((hand_cfg *)0)->x, int64_t: 1, default: 0), '
           '"hand_cfg.x must be int64_t (somewhere/hand.h)");' in inc.splitlines(), '\n' + inc)
    expect('a generated struct needs no assertion', '((outer_cfg *)0)' not in inc, '\n' + inc)
    expect('the header has a guard and the types',
           '#ifndef PL_CFG_GENERATED_' in hdr and '#include "core/component.h"' in hdr, hdr)

rc, text, err = run("tables:\n- {name: t, struct: s, section: {name: t_section}}\n", header=True)
expect('an option-less struct gets a member', rc == 0 and 'char unused;' in text[1], err)

BAD_NEW = [
    ('minimum on a string', "tables:\n- {name: t, struct: s, options: [{name: a, type: string, "
     "field: a, minimum: '0'}]}\n", 't.a'),
    ('limit of the wrong type', "tables:\n- {name: t, struct: s, options: [{name: a, type: int, "
     "field: a, minimum: 1s}]}\n", 'not a int'),
    ('duration limit typo', "tables:\n- {name: t, struct: s, options: [{name: a, type: duration, "
     "field: a, maximum: 5 min}]}\n", 'not a duration'),
    ('a limit that is a bool', "tables:\n- {name: t, struct: s, options: [{name: a, type: int, "
     "field: a, maximum: true}]}\n", 'number'),
    ('minimum with exclusive_minimum', "tables:\n- {name: t, struct: s, options: [{name: a, "
     "type: int, field: a, minimum: '0', exclusive_minimum: '0'}]}\n", 'exclude'),
    ('required on an int', "tables:\n- {name: t, struct: s, options: [{name: a, type: int, "
     "field: a, required: true}]}\n", 'required goes with'),
    ('required not true', "tables:\n- {name: t, struct: s, options: [{name: a, type: string, "
     "field: a, required: 'yes'}]}\n", 'required is true'),
    ('message without a rule', "tables:\n- {name: t, struct: s, options: [{name: a, type: int, "
     "field: a, message: bad}]}\n", 'message needs'),
    ('c_type on an int', "tables:\n- {name: t, struct: s, options: [{name: a, type: int, "
     "field: a, c_type: int}]}\n", 'c_type is for a section'),
    ('unknown table key', "tables:\n- {name: t, struct: s, extra: 1}\n", 'extra'),
    ('an option name YAML reads as a bool', "tables:\n- {name: t, struct: s, options: [{name: on, "
     "type: bool, field: a}]}\n", 'not text'),
]
for name, schema, needle in BAD_NEW:
    rc, _, err = run(schema, SHARED, header=True)
    expect('refuses ' + name, rc != 0 and needle in err, 'rc=%d stderr=%r' % (rc, err))

BAD_STRUCTS = [
    ('a section of no known schema', "tables:\n- {name: t, struct: s, options: [{name: a, "
     "type: section, field: a, subsection: nowhere}]}\n", 'give its c_type'),
    ('a c_type other than the schema says', "tables:\n- {name: t, struct: s, options: [{name: a, "
     "type: section, field: a, subsection: pl_tls_section, c_type: other_cfg}]}\n",
     'pl_tls_section fills pl_tls_cfg'),
    ('extra_fields on a declared struct', "tables:\n- {name: t, struct: s, declared_in: a.h, "
     "extra_fields: [{field: x, c_type: int}]}\n", 'extra_fields go with'),
    ('an extra field without c_type', "tables:\n- {name: t, struct: s, extra_fields: "
     "[{field: x}]}\n", 'needs field and c_type'),
    ('a field that is no C name', "tables:\n- {name: t, struct: s, options: [{name: a, "
     "type: int, field: a.b}]}\n", 'not a C member'),
    ('one field with two types', "tables:\n- {name: t, struct: s, options: [{name: a, "
     "type: int, field: a}, {name: b, type: string, field: a}]}\n", 'two types'),
    ('a struct shared without the field', "tables:\n- {name: t, struct: s, options: [{name: a, "
     "type: int, field: a}]}\n- {name: u, struct: s, options: [{name: b, type: int, field: b}]}\n",
     'without b'),
]
for name, schema, needle in BAD_STRUCTS:
    rc, _, err = run(schema, SHARED, [OTHER], header=True)
    expect('refuses ' + name, rc != 0 and needle in err, 'rc=%d stderr=%r' % (rc, err))

sys.exit(1 if failures else 0)
