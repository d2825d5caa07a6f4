"""`flashspec distill` launched as 2 processes by `torchrun` (gloo, the CPU): rank 0 alone makes the
data (the target's answers, the feature cache) while the other waits, then both train on it; rank 0
alone measures the held-out acceptance, stores it in the weights it saved and writes `log.json`,
and both exit 0.

Before the fix every rank made the answers and the feature cache in the same `OUT`, and there was no
barrier after rank 0 saved the weights: rank 1 went on to `rank_acceptance`/`store_acceptance` and
failed with `FileNotFoundError: No weights file at .../draft.safetensors`.

The command runs through a small script that records which rank called the data makers
(`make_distill_data`, `extract_features`) and makes the final save 3 s slower (as a real draft's is
slower than a tiny one's), then runs `flashspec.cli.main.main`."""
import json
import sys
import textwrap
from pathlib import Path

import pytest

from procs import launch

SPY = textwrap.dedent('''
    import os, sys, time
    from pathlib import Path
    import flashspec.cli.distill as D
    import flashspec.train.distill as T
    from flashspec.cli.main import main
    rank = os.environ.get("RANK", "0")
    def spy(name, f):
        "`f`, leaving a file `name.RANK` in $SPY when called."
        def g(*a, **kw):
            (Path(os.environ["SPY"])/f"{name}.{rank}").touch()
            return f(*a, **kw)
        return g
    D.make_distill_data = spy("answers", D.make_distill_data)
    D.extract_features = spy("features", D.extract_features)
    save = T.save_draft_weights
    def slow_save(*a, **kw):
        "Rank 0's save, as slow as a real draft's: a rank that does not wait for it finds no file."
        time.sleep(3); return save(*a, **kw)
    T.save_draft_weights = slow_save
    raise SystemExit(main(sys.argv[1:]))
''')


def tiny_setup(d:Path) -> tuple[Path, Path]:
    "A tiny target saved in `d/m` and a pool of 8 one-turn conversations in 2 categories."
    from flashspec.target import tiny_llama, tiny_tokenizer
    tok = tiny_tokenizer()
    tgt = tiny_llama(n_layers=3, vocab_size=len(tok), seed=3)
    tgt.generation_config.eos_token_id = tok.convert_tokens_to_ids("<|im_end|>")
    tgt.save_pretrained(d/"m"); tok.save_pretrained(d/"m")
    pool = d/"pool.jsonl"
    pool.write_text("\n".join(json.dumps(dict(question_id=f"q{i}", category=f"c{i % 2}",
                                              source=f"c{i % 2}", turns=[f"w{i + 1} w{i + 2}"]))
                              for i in range(8)))
    return d/"m", pool


def distill(tmp_path:Path, *argv) -> tuple[int, str]:
    """`flashspec distill` of the tiny target on the pool's first 4 conversations, 2 steps, as 2
    processes, through `SPY` (which records its calls in `tmp_path/spy`); (exit code, output)."""
    m, pool = tiny_setup(tmp_path)
    (tmp_path/"spy.py").write_text(SPY)
    (tmp_path/"spy").mkdir()
    return launch(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
         str(tmp_path/"spy.py"), "distill", "--target", str(m), "--prompts", str(pool), "--out",
         str(tmp_path/"run"), "--data-dtype", "float32", "--n-prompts", "4", "--max-new-tokens",
         "6", "--batch-size", "4", "--steps", "2", "--train-batch-size", "1", "--warmup", "1",
         "--mixed-precision", "no", *argv],
        tmp_path, timeout=240, SPY=str(tmp_path/"spy"))


def distill_two(tmp_path:Path, *argv) -> tuple[Path, dict, list]:
    """`distill`, checking what both designs share. Returns `--out`, the weights' metadata and the
    data makers' calls (`NAME.RANK`)."""
    from safetensors import safe_open
    rc, said = distill(tmp_path, *argv)
    assert rc == 0, said[-3000:]
    spy, out = tmp_path/"spy", tmp_path/"run"
    # the data made once, by rank 0; the weights, the log and nothing else half-written
    made = sorted(p.name for p in spy.iterdir())
    assert all(p.endswith(".0") for p in made) and "answers.0" in made, made
    assert (out/"draft.safetensors").exists()
    assert len(json.loads((out/"log.json").read_text())) == 2
    assert not list(out.rglob(".*")), list(out.rglob(".*"))  # no temporaries left
    with safe_open(str(out/"draft.safetensors"), "pt") as f: meta = f.metadata()
    assert meta["steps"] == "2", meta
    assert said.count("trained") == 1, said[-3000:]  # one rank reports
    return out, meta, made


def test_distill_two_processes(tmp_path):
    """A feature drafter (the default design): its target answers the pool and its feature cache
    is made by rank 0; its held-out acceptance is stored once."""
    out, meta, made = distill_two(tmp_path, "--held-out", "1")
    assert made == ["answers.0", "features.0"], made
    P = json.loads(meta["rank_acceptance"])
    assert P and all(0 <= x <= 1 for row in P for x in row), P
    assert json.loads(meta["held_out"]) and meta["held_out_sha"], meta


@pytest.mark.slow
def test_distill_slice_two_processes(tmp_path):
    "A sliced draft on distill-data folders made in OUT, by rank 0."
    out, meta, made = distill_two(tmp_path, "--design", "slice", "--layers", "1", "--topk", "3")
    assert made == ["answers.0"], made
    assert meta["design"] == "slice", meta


def test_distill_error_in_rank0_stops_all(tmp_path):
    """An error in rank 0's data preparation (here: every conversation held out) is its one-line
    error, and the other process exits saying so instead of waiting for it forever."""
    rc, said = distill(tmp_path, "--held-out", "4")
    assert rc != 0 and "flashspec: error: Holding out 4 of 4" in said, said[-3000:]
    assert "process 1 stopped: process 0 failed (ValueError: Holding out" in said, said[-3000:]
    assert not (tmp_path/"spy"/"answers.1").exists() and not (tmp_path/"run"/"features").exists()
