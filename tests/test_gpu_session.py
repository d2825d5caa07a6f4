"""The prepared GPU run (`tools/gpu_session.py`): every `flashspec` command it plans is one the CLI
accepts."""
import importlib.util, sys, tarfile
from pathlib import Path
import pytest

from flashspec.cli.main import parser

ROOT = Path(__file__).resolve().parents[1]


def session():
    spec = importlib.util.spec_from_file_location("gpu_session", ROOT/"tools"/"gpu_session.py")
    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("extra", [[], ["--fresh"]])
def test_planned_commands_parse(tmp_path, extra):
    gs = session()
    out, work = tmp_path/"out", tmp_path/"work"
    # planned for a GPU, nothing run
    ap_args = ["--out", str(out), "--work", str(work), "--device", "cuda", *extra]
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
    # the benches (bench-hf runs two, exact-bf16 two), the sampled answers and the two distill
    # runs (the batch and gap phases run in the script)
    assert n == 14
    # what comes back: the archive and a copy of session.json (a run returns at most 8 files)
    assert sorted(f.name for f in out.iterdir()) == ["gpu-session.tgz", "session.json"]
    with tarfile.open(out/"gpu-session.tgz") as t:
        assert "gpu-session/session.json" in t.getnames()


def test_pack_keeps_the_draft_and_drops_checkpoints(tmp_path):
    """After each phase the work folder is packed into one archive: the drafter's weights and its
    log go in, its checkpoints do not, and a second pack replaces the first whole."""
    gs, work, out = session(), tmp_path/"work", tmp_path/"out"
    (work/"train").mkdir(parents=True); out.mkdir()
    (work/"bench-bf16.json").write_text("{}")
    gs.pack(work, out)  # no draft yet: checkpoints stay
    (work/"train"/"ckpt.pt").write_bytes(b"c")
    gs.pack(work, out)
    with tarfile.open(out/"gpu-session.tgz") as t:
        assert "gpu-session/train/ckpt.pt" in t.getnames()
    for f in ("draft.safetensors", "log.json"): (work/"train"/f).write_bytes(b"w")
    gs.pack(work, out)
    with tarfile.open(out/"gpu-session.tgz") as t:
        names = set(t.getnames())
    assert {"gpu-session/bench-bf16.json", "gpu-session/train/draft.safetensors",
            "gpu-session/train/log.json"} <= names
    assert "gpu-session/train/ckpt.pt" not in names
    assert sorted(f.name for f in out.iterdir()) == ["gpu-session.tgz"]


def test_sigterm_packs_and_names_the_phase_it_stopped(tmp_path):
    """The run's limit (SIGTERM) in the middle of a phase: the results so far are packed,
    session.json names the phase that was stopped, and the run exits with 124."""
    import json, signal
    gs, out, work = session(), tmp_path/"out", tmp_path/"work"
    # one phase whose command signals this process, as `timeout` would, then waits to be killed
    cmd = [sys.executable, "-c",
           "import os, signal, time; os.kill(os.getppid(), signal.SIGTERM); time.sleep(30)"]
    gs.plan = lambda args: {name: ([cmd], 1 / len(gs.PHASES)) for name in gs.PHASES}
    old = signal.getsignal(signal.SIGTERM)
    try:
        with pytest.raises(SystemExit) as e:
            gs.main(["--out", str(out), "--work", str(work), "--device", "cpu",
                     "--phases", "bench-bf16", "--budget", "60"])
    finally:
        signal.signal(signal.SIGTERM, old)
    assert e.value.code == 124
    assert json.loads((out/"session.json").read_text()) == [
        dict(phase="bench-bf16", status="stopped by SIGTERM")]
    with tarfile.open(out/"gpu-session.tgz") as t:
        assert "gpu-session/bench-bf16.log" in t.getnames()
