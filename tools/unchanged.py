#!/usr/bin/env python
"""Run a command and fail if it changed, added or removed any file under a folder.

    python tools/unchanged.py DIR [--hint TEXT] -- COMMAND [ARGS...]

This is the nbdev CI check "`nbdev_clean` (or `nbdev_export`), then no diff", done by
comparing the folder before and after rather than against git: it means the same thing in a
fresh clone (where the folder is HEAD) and in a working tree with uncommitted notebooks
(where `git diff` would report the author's own edits, not the tool's).
"""
import argparse, difflib, hashlib, subprocess, sys
from pathlib import Path

SKIP = {'__pycache__', '.ipynb_checkpoints'}

def snapshot(d: Path) -> dict:
    "Relative path -> bytes, for every file under `d` (caches skipped)"
    return {p.relative_to(d).as_posix(): p.read_bytes() for p in sorted(d.rglob('*'))
            if p.is_file() and not SKIP & set(p.relative_to(d).parts)}

def _diff(name, a: bytes, b: bytes, n=40) -> str:
    try: lines = list(difflib.unified_diff(a.decode().splitlines(), b.decode().splitlines(),
                                           f'{name} (before)', f'{name} (after)', lineterm='', n=1))
    except UnicodeDecodeError:
        return f'  (binary: {hashlib.sha1(a).hexdigest()[:8]} -> {hashlib.sha1(b).hexdigest()[:8]})'
    more = f'\n  ... {len(lines)-n} more diff lines' if len(lines) > n else ''
    return '\n'.join('  '+l for l in lines[:n]) + more

def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('dir', type=Path)
    p.add_argument('--hint', default='', help='what to do when something changed')
    argv = sys.argv[1:]
    if '--' not in argv: p.error('no command given: put it after `--`')
    i = argv.index('--')
    a, cmd = p.parse_args(argv[:i]), argv[i+1:]
    if not cmd: p.error('no command given: put it after `--`')
    a.dir.mkdir(parents=True, exist_ok=True)
    before = snapshot(a.dir)
    rc = subprocess.call(cmd)
    if rc: sys.exit(f'FAILED: `{" ".join(cmd)}` exited with {rc}')
    after = snapshot(a.dir)
    added = sorted(after.keys() - before.keys())
    removed = sorted(before.keys() - after.keys())
    changed = sorted(k for k in before.keys() & after.keys() if before[k] != after[k])
    if not (added or removed or changed):
        print(f'ok: `{" ".join(cmd)}` left {a.dir}/ unchanged ({len(after)} files)')
        return
    msg = [f'FAILED: `{" ".join(cmd)}` changed {a.dir}/:']
    msg += [f'  new file: {a.dir}/{k}' for k in added]
    msg += [f'  removed:  {a.dir}/{k}' for k in removed]
    for k in changed: msg += [f'  changed:  {a.dir}/{k}', _diff(k, before[k], after[k])]
    if a.hint: msg.append(a.hint)
    print('\n'.join(msg), file=sys.stderr)
    sys.exit(1)

if __name__ == '__main__': main()
