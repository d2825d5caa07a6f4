"""The prepared GPU run (`tools/gpu_session.py`): every `flashspec` command it plans is one the CLI
accepts."""
import importlib.util, sys
from pathlib import Path
import pytest

from flashspec.cli import parser

ROOT = Path(__file__).resolve().parents[1]


def session():
    spec = importlib.util.spec_from_file_location("gpu_session", ROOT/"tools"/"gpu_session.py")
    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("extra", [[], ["--fresh"]])
def test_planned_commands_parse(tmp_path, extra):
    gs = session()
    ap_args = ["--out", str(tmp_path), "--device", "cuda", *extra]  # planned for a GPU, nothing run
    steps = {}
    orig = gs.plan
    gs.plan = lambda args: steps.setdefault("plan", orig(args))
    # no time: every phase is skipped, nothing runs
    gs.main(ap_args + ["--phases", "bench-bf16", "--budget", "0"])
    plan = steps["plan"]
    assert list(plan) == list(gs.PHASES)
    # the shares split the whole budget
    assert abs(sum(share for _, share in plan.values()) - 1.0) < 1e-9
    n = 0
    for name, (cmds, _) in plan.items():
        for cmd in cmds:
            cmd = [str(c).replace("{minutes}", "1.5") for c in cmd]
            assert cmd[0] == sys.executable
            if cmd[1:3] == ["-m", "flashspec"]:
                args = parser().parse_args(cmd[3:])  # an unknown or renamed option exits here
                assert args.device == "cuda", (name, cmd)
                n += 1
    # bench-bf16, the two distill runs, bench-fp32, bench-compiled (batch runs in the script)
    assert n == 5
    assert (tmp_path/"session.json").exists()
