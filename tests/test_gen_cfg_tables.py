#!/usr/bin/env python3
"""Checks config/gen_cfg_tables.py: the C it writes for a schema (escapes,
shared groups, sections, extern tables, ignored options) and the schemas it
refuses, each with a message naming the table and option.
Usage: test_gen_cfg_tables.py GENERATOR"""
import os
import subprocess
import sys
import tempfile

GEN = sys.argv[1]
failures = 0


def run(schema, shared=None):
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, 'x.config.yaml')
        out = os.path.join(d, 'x.config.inc')
        with open(src, 'w') as f:
            f.write(schema)
        args = [sys.executable, GEN, src, out]
        if shared is not None:
            sh = os.path.join(d, 'shared.yaml')
            with open(sh, 'w') as f:
                f.write(shared)
            args.append(sh)
        p = subprocess.run(args, capture_output=True, text=True)
        text = open(out).read() if p.returncode == 0 else None
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

sys.exit(1 if failures else 0)
