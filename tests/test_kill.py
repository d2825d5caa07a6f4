"""`flashspec distill` killed with SIGKILL at random moments, then run again until it finishes, ends as
an uninterrupted run does: the same draft weights (bitwise) and metadata, the same `log.json`, and the
same files in its folder (no temporaries a killed write left behind).

Each run is a child process of a fork server that has imported flashspec once (the command's own
imports take ~10 s on a 2-core CPU; the work itself takes seconds on the tiny target), one thread
each, so that the reference and the resumed runs compute alike. A kill lands anywhere in the run:
loading, the target's answers (shards, `data`, `answers.npz`), training (checkpoints), the weights
and the log. `pytest --slow` runs more kills, and the feature drafter's path (`--design eagle3`: the
feature cache, its training, the held-out acceptance) too."""
import json
import multiprocessing as mp
import os
import random
import sys
import time
from pathlib import Path

import pytest


def _child(argv:list, log:str):
    "One `flashspec` run, its output appended to `log`; exits with the command's code."
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    os.dup2(fd, 1); os.dup2(fd, 2)
    import torch
    torch.set_num_threads(1)
    from flashspec.cli.main import main
    code = main(argv)
    sys.stdout.flush(); sys.stderr.flush()
    os._exit(code)


def _noop(): pass


# what a run imports, imported once by the fork server
PRELOAD = ["flashspec.cli.main", "flashspec.train.answers", "flashspec.train.distill",
           "flashspec.train.features", "flashspec.train.ttt", "accelerate", "datasets",
           "safetensors.torch", "transformers.models.llama.modeling_llama"]


@pytest.fixture(scope="module")
def server():
    """A fork server with flashspec's command line imported, started: each run starts in a fraction
    of a second, so that a kill's moment falls in the run's own work."""
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    p = ctx.Process(target=_noop); p.start(); p.join()
    return ctx


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    "A 3-layer target on disk and a pool of 8 conversations (one or two turns, two sources)."
    from flashspec.target import tiny_llama, tiny_tokenizer
    d = tmp_path_factory.mktemp("kill")
    tok = tiny_tokenizer()
    m = tiny_llama(n_layers=3, vocab_size=len(tok), seed=5)
    m.generation_config.eos_token_id = tok.eos_token_id
    m.save_pretrained(d/"m"); tok.save_pretrained(d/"m")
    convs = [dict(source=f"s{i % 2}:{i}", category=f"c{i % 2}",
                  turns=[f"w{i} w{i + 1} w{i + 2}", f"w{i + 7}"][:1 + i % 2]) for i in range(8)]
    (d/"pool.jsonl").write_text("\n".join(json.dumps(c) for c in convs))
    return d


def _argv(tiny:Path, out:Path, design:str, steps:int) -> list:
    "A distill command small enough that a run takes seconds, checkpointing often."
    common = ["--target", str(tiny/"m"), "--prompts", str(tiny/"pool.jsonl"), "--out", str(out),
              "--max-new-tokens", "8", "--batch-size", "4", "--shard-size", "3", "--steps",
              str(steps), "--train-batch-size", "2", "--warmup", "2", "--ckpt-every", "2",
              "--mixed-precision", "no", "--data-dtype", "float32", "--draft-vocab", "40"]
    if design == "eagle3": return ["distill", "--design", "eagle3", "--held-out", "2", *common]
    return ["distill", "--design", "slice", "--layers", "1", "--topk", "4", *common]


def _run(ctx, argv, log, kill_after=None, timeout=600):
    """Run `argv` in a child; with `kill_after` seconds, SIGKILL it then if it still runs. Returns
    (exit code, seconds)."""
    p = ctx.Process(target=_child, args=(argv, str(log)))
    t0 = time.time(); p.start()
    p.join(kill_after if kill_after is not None else timeout)
    if p.is_alive():
        if kill_after is None: p.kill(); p.join(); raise AssertionError(f"{argv} timed out")
        p.kill(); p.join()
    return p.exitcode, time.time() - t0


def _files(folder:Path) -> set:
    "Every file and folder under `folder`, relative, hidden ones included."
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


def _weights(path:Path, out:Path) -> tuple:
    "(tensors, metadata with the run's folder written as OUT) of a weights file."
    from safetensors.torch import load_file
    from safetensors import safe_open
    with safe_open(str(path), "pt") as f: meta = dict(f.metadata())
    return load_file(str(path)), {k: v.replace(str(out), "OUT") for k, v in meta.items()}


def kill_and_resume(ctx, tiny:Path, work:Path, design:str, kills:int, steps:int, seed:int=0):
    """An uninterrupted run, then runs killed at random moments of it (`kills` of them) and one to
    the end; the two results compared."""
    import torch
    ref, out, log = work/"ref", work/"killed", work/f"{design}.log"
    code, t_ref = _run(ctx, _argv(tiny, ref, design, steps), log)
    assert code == 0, log.read_text()[-3000:]
    rng, moments = random.Random(seed), []
    for _ in range(kills):
        moments.append(round(rng.uniform(0, t_ref), 3))
        code, _ = _run(ctx, _argv(tiny, out, design, steps), log, kill_after=moments[-1])
        # killed (-9), or finished before the moment came (0): never an error
        assert code in (-9, 0), (moments, log.read_text()[-3000:])
    code, _ = _run(ctx, _argv(tiny, out, design, steps), log)
    assert code == 0, (moments, log.read_text()[-3000:])
    why = f"{design}, killed at {moments} s of a {t_ref:.1f} s run"
    (w_ref, m_ref), (w, m) = _weights(ref/"draft.safetensors", ref), _weights(out/"draft.safetensors", out)
    assert sorted(w) == sorted(w_ref), why
    assert all(torch.equal(w[k], w_ref[k]) for k in w), why
    assert m == m_ref, why
    assert json.loads((out/"log.json").read_text()) == json.loads((ref/"log.json").read_text()), why
    # the same files: none that a killed write left (temporaries are `.NAME...`)
    assert _files(out) == _files(ref), (why, sorted(_files(out) ^ _files(ref)))
    return moments


def test_killed_and_resumed(server, tiny, tmp_path):
    "A few kills of a short slice run: the resumed run's weights, log and files are the reference's."
    kill_and_resume(server, tiny, tmp_path, "slice", kills=3, steps=16)


@pytest.mark.slow
@pytest.mark.parametrize("design", ["slice", "eagle3"])
def test_killed_often(server, tiny, tmp_path, design):
    "Many kills, both designs (`pytest --slow`)."
    kill_and_resume(server, tiny, tmp_path, design, kills=12, steps=40, seed=1)
