#!/usr/bin/env python3
"""Computes what proflink's JFR reader must find in a recording, from the
JDK's own reading of it (`jfr print --json`, `jfr summary`), and writes it as
JSON next to the recording (tests/test_jfr.c compares against it).

usage: make_expected.py RECORDING.jfr OUT.json   (needs the JDK's `jfr` tool)

For each event type proflink turns into a profile: the number of events
(checked against `jfr summary` too), and per leaf frame ("package.Class.method:line",
the innermost frame of the event's stack trace) the number of events and the
sum of the value the profile's second column carries (tlabSize,
allocationSize, weight, or the duration in nanoseconds).
"""
import json
import re
import subprocess
import sys
from decimal import Decimal

KINDS = {
    # event type: (proflink profile kind, value field or None)
    'jdk.ExecutionSample': ('cpu', None),
    'jdk.NativeMethodSample': ('wall', None),
    'jdk.ObjectAllocationInNewTLAB': ('alloc_in_new_tlab', 'tlabSize'),
    'jdk.ObjectAllocationOutsideTLAB': ('alloc_outside_tlab', 'allocationSize'),
    'jdk.ObjectAllocationSample': ('alloc_sample', 'weight'),
    'jdk.JavaMonitorEnter': ('lock', 'duration'),
    'jdk.ThreadPark': ('park', 'duration'),
    'jdk.OldObjectSample': ('live', None),
}

DURATION = re.compile(r'^PT(?:(\d+)H)?(?:(\d+)M)?(?:(-?[\d.]+)S)?$')


def duration_ns(text):
    m = DURATION.match(text)
    if not m:
        raise ValueError('duration ' + text)
    h, mi, s = m.groups()
    total = Decimal(h or 0) * 3600 + Decimal(mi or 0) * 60 + Decimal(s or 0)
    return int(total * 1000000000)


def leaf(stack):
    if not stack or not stack.get('frames'):
        return None
    f = stack['frames'][0]
    name = f['method']['type']['name'].replace('/', '.') + '.' + f['method']['name']
    line = f.get('lineNumber', 0)
    return '%s:%d' % (name, line if line > 0 else 0)


def main():
    rec, out = sys.argv[1], sys.argv[2]
    summary = subprocess.run(['jfr', 'summary', rec], check=True, capture_output=True,
                             text=True).stdout
    counts = {}
    for line in summary.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] in KINDS:
            counts[parts[0]] = int(parts[1])
    chunks = int(re.search(r'Chunks:\s*(\d+)', summary).group(1))
    result = {'chunks': chunks, 'kinds': {}}
    for event, (kind, field) in KINDS.items():
        doc = json.loads(subprocess.run(['jfr', 'print', '--json', '--events', event, rec],
                                        check=True, capture_output=True, text=True).stdout)
        events = doc['recording']['events']
        assert len(events) == counts.get(event, 0), (event, len(events), counts.get(event))
        leaves = {}
        for e in events:
            v = e['values']
            key = leaf(v.get('stackTrace'))
            if key is None:
                continue
            value = 0
            if field == 'duration':
                value = duration_ns(v['duration'])
            elif field:
                value = int(v[field])
            entry = leaves.setdefault(key, [0, 0])
            entry[0] += 1
            entry[1] += value
        result['kinds'][kind] = {'event': event, 'events': len(events), 'leaves': leaves}
    with open(out, 'w') as f:
        json.dump(result, f, indent=1, sort_keys=True)
        f.write('\n')


if __name__ == '__main__':
    main()
