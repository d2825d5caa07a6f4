"""A helper of the multi-process tests: run a command that may hang, and kill all it started."""

import os, subprocess
from pathlib import Path
import psutil
import pytest


def launch(argv:list, cwd:Path, timeout:float, **env) -> tuple[int, str]:
    """Run `argv` (with `env` added, one OpenMP thread); (exit code, its output). A run past
    `timeout` seconds (a hang) is killed, the processes it started with it (torchrun's workers,
    which outlive it otherwise), and fails the test."""
    env = dict(os.environ, OMP_NUM_THREADS="1", **env)
    p = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try: out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        for q in psutil.Process(p.pid).children(recursive=True) + [psutil.Process(p.pid)]:
            try: q.kill()
            except psutil.NoSuchProcess: pass
        out, err = p.communicate()
        pytest.fail(f"hung: killed after {timeout:.0f} s; its output ends: {(out + err)[-2000:]}")
    return p.returncode, out + err
