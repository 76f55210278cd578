"""Largest difference between two `kinfer lod --json` outputs: every number, and ln L alone."""
import json
import sys

a = json.load(open(sys.argv[1]))
b = json.load(open(sys.argv[2]))
out = []


def walk(x, y, path):
    if isinstance(x, dict):
        for k in x:
            if 'second' in k or k in ('timings', 'time', 'wall'):
                continue
            if k in y:
                walk(x[k], y[k], path + '.' + k)
    elif isinstance(x, list):
        for i, (u, v) in enumerate(zip(x, y)):
            walk(u, v, f'{path}[{i}]')
    elif isinstance(x, float) and isinstance(y, (int, float)):
        out.append((abs(x - y), path))


walk(a, b, '')
out.sort(reverse=True)
lnl = [o for o in out if 'ln' in o[1].lower()]
print(len(out), 'numbers compared; max diff', out[0] if out else None,
      '; max ln diff', lnl[0] if lnl else None, len(lnl))
