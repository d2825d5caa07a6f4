"""One prepared run on a lent GPU: the H200 measurements the open issues ask for, under one
deadline.

A lent GPU gives a session 15 minutes of device time, one command at most 10 minutes, and the model
goes over in three copy runs first (`../shared/tools/device-prep` prints them). This script is the
fourth run: phases in priority order, each a `flashspec` command in its own process with a timeout
cut to the time left, everything written under `--work` as it finishes (a phase that fails or runs
out of time leaves its log and whatever it wrote, and the next phase starts). Rehearse it on the CPU
first (`--device cpu --tiny`).

What comes back: at most 8 files from `$OUT` (device README), and the phases write about twenty.
So after each phase the whole of `--work` is packed into one archive, `--out`/gpu-session.tgz (the
drafter's weights, 10 MB, included; the feature cache is not in it), beside a copy of session.json
(a line per phase); a SIGTERM packs too, and session.json then names the phase it stopped. Unpack
it here with `tar xzf gpu-session.tgz` (a folder `gpu-session/`).

Phases (`--phases`; by default all but `bench-fused`, `bench-compiled`, `bench-bf16` and `train`,
in this order; what the last run left owed first, the compiled phase last, its goal met on 13
questions):
  batch        issue 14: 16 requests at batch 8 and 16 in bf16: Hugging Face's batched `generate`
               with its static cache (left-padded) against the fused round's batches
               (`generate_fused_batch`: plain, and on the batch's own tree, `tree="auto"`: a round
               of B rows timed per tree size on its first call, cached), then at batch 8 the
               one-request tree (the eager cost model's), the batch's tree compiled, and the eager
               loop (`generate_batch`: the tree, per-request budgets); tokens/s, first calls, nodes
               and outputs compared with Hugging Face's, a JSON rewritten after every row. It
               measures the cost model's costs on a fresh machine (about 25 s, cached for the later
               phases). Its 65 s share in the second H200 run (the eager loop then) ended before
               its first row; on this CPU a batch of 8 picks plain rounds (07e, *The batch's own
               tree*), where one request picks 2 nodes
  fused-tree   the fused round's own cost model (`fused_costs`: a round of each tree size timed on
               the device, cached), first run on a GPU here, through one short answer; if it fails,
               the later phases verify the eager cost model's tree (their `--fused-tree` dropped)
  bench-sampled  the fused round sampling at T = 0.7 (its draws on the device, inside the graph;
               never run on a GPU before, and `generate` takes this path on CUDA) against hf-static
               sampling, bf16, 13 questions, the fused round's own tree
  bench-fp32   issue 12's 50-prompt check on the GPU: hf against the fused round
               (flashspec-fused-merged, the graph) in fp32, token for token, the first turns of 50
               questions, 64 new tokens, a fixed tree (no cost measurement); the second H200 run
               checked 2 questions
  batch-fp32   issue 14's lossless check: 16 first turns through fused batches of 8 in fp32, each
               output against Hugging Face `generate` on the request alone
  exact-bf16   issue 70 on the GPU: `forward_gap` of the bf16 target (fp32 beside it) through the
               native eager forward after 300 tokens, a token among 4 and 64 rows against alone
               and against alone padded to as many rows (fixed shapes), then the fused round's
               answers against its own plain decoding's (`ar-fused`) on 80 first turns in bf16,
               as it is and exact (`--exact-fused`: every forward at the largest tree's node
               count, each row over its own keys, 07a_half), the cost of exactness their ratio
  bench-hf     issue 12's table, bf16, one first turn, 48 tokens (eager hf costs about 109 ms a token
               there): hf and hf-assisted (its assistant the distilled slice: Hugging Face's assisted
               generation takes a causal LM), then hf, hf-static, ar-fused and flashspec-fused-merged
               on the fused round's tree, first calls included
  bench-fused-compiled  issue 12: hf-static against the fused round (`generate_fused`, one CUDA
               graph a round: the drafter's levels, the tree forward, acceptance and the commit)
               with `--compile` (the target's forward through inductor inside the round's graph),
               bf16, 26 questions, on the fused round's own measured tree (`--fused-tree`); the
               second H200 run (2026-12-04, 13 questions, the eager cost model's 32-node tree)
               measured flashspec-fused-merged at 2.11x hf-static there, each method compiling for
               37 s
  bench-fused  the same greedy without `--compile` (13 questions; 1.67x hf-static in that run)
  bench-compiled issue 12: hf-static, ar and flashspec-merged in bf16 with `--compile` (the
               target's forward alone under `torch.compile(mode="reduce-overhead")`; its cache is
               now marked static, without which CUDA graphs were skipped), first-call times; its
               45 s did not cover the compilation in the first H200 run
  bench-bf16   issue 12: hf-static, ar, flashspec, flashspec-merged in bf16, the cost model's
               tree; flashspec-adaptive-merged: EAGLE-2's dynamic tree of 64 nodes (`BEAM`) with
               lookup chains merged in (eager `hf` is left out: 109 ms a token there, measured)
  train        issue 11 (only when named): new answers first (`--sampled N`, default 4,000: N pool
               conversations, spread over its categories, answered by the target sampling at
               `--sampled-temperature` 0.7 with `--seed`, today's date by default, so each run's
               are new; round 6 found more distinct data the next lever), then features of those
               and the shared greedy answers on the GPU (`distill --kd` both: each file its own
               answer set), the feature drafter fine-tuned from the shipped weights (or trained
               afresh) until a time limit (by which the learning rate has annealed: `distill
               --time-limit`), its teacher-forced acceptance table stored in the weights; bring
               `train/draft.safetensors` and `sampled/answers.npz` back and measure the drafter at
               home (round 6, 2026-12-04, trained on the shared answers alone)

On the GPU machine, from the project root (after the three copy runs):
  . .dev/env.sh && python3 tools/gpu_session.py --out $OUT --budget 540
(carry: .dev/whl .dev/env.sh; timeout_s 600: the prompt sets ship inside the package now, so
`.dev/shared`, which device-prep still packs, need not travel: then `unset FLASHSPEC_DATA`, which
env.sh sets to it, after sourcing env.sh; the working tree is about 46 MiB). A phase that does not finish in its share
leaves what it wrote (bench: its journal, one line per answer; train: the draft, saved when its time
limit stops it, and its log; checkpoints are removed once a draft exists), and the archive holds
every phase that ended before the run's limit.
To give the training the whole run:
  . .dev/env.sh && python3 tools/gpu_session.py --out $OUT --budget 540 --phases train
Rehearsal here (2026-12-04, a 2-core AMD EPYC: the seven default phases all ended "ok" in 2.0 minutes
with this machine's costs cached; `--phases train --budget 600` ran the tiny sampled answers, features
and training to the end in 47 s; again 2026-12-06 on a 2-core Intel Xeon with that day's code: all
seven "ok" in 3.2 minutes, `batch` the longest at 83 of its 122 s, and the train phase in 60 s; and
that night with commit aba4983's code: all seven "ok" in 4.0 minutes, `batch` 123 of its 135 s, the
train phase 31 s; 2026-12-07 on an AMD EPYC with AVX-512, after `--exact-fused` joined `exact-bf16`:
seven "ok" in 6.6 minutes on a fresh machine, `batch` out of time at 130 s while it measured the costs,
so `bench-fp32` gave it 5 s back). A CPU cannot record a CUDA graph: the fused phases run eagerly here:
  .venv/bin/python tools/gpu_session.py --device cpu --tiny --out /tmp/gpu-rehearsal --budget 600
The first H200 run (2026-12-04) learned what the shares are now sized by: a fresh machine spends
about 35 s measuring the cost model's costs in the first bench, eager `hf` takes about 10 s an
answer, and the compiled bench needs more than 45 s for its first compilation.
The second (2026-12-04): the machine's Python has huggingface_hub 1.x, and the transformers wheel
that device-prep sends (5.25) needs 2.x, which needs httpx2 and more. Before the fourth run, send
the whole closure: here, `.venv/bin/python -m pip freeze > /tmp/cons.txt`, then
`.venv/bin/python -m pip download --only-binary=:all: --python-version 3.12 --implementation cp
--platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64
-c /tmp/cons.txt -d .dev/whl transformers==5.25.0 gguf==0.19.0` and remove numpy's wheel (the
machine has numpy; 16 MB over a 64 MiB transfer); since 2026-12-07 the prompt sets ship in the
package, so `.dev/shared` stays behind (see the carry line above). Begin the fourth run with `python3 -c "import flashspec"`: a missing module
then costs seconds, not the phases.
"""

import argparse, json, os, shutil, signal, subprocess, sys, tarfile, time
from pathlib import Path

PHASES = ("batch", "fused-tree", "bench-sampled", "bench-fp32", "batch-fp32", "exact-bf16",
          "bench-hf", "bench-fused-compiled", "bench-fused", "bench-compiled", "bench-bf16",
          "train")
# training ran once (2026-12-04); bench-compiled (the eager loop, its forward compiled) is superseded
# by the fused round's compiled phase, bench-fused and bench-bf16 were measured on 2026-12-04: name
# them to run them
DEFAULT_PHASES = tuple(
    p for p in PHASES if p not in ("train", "bench-compiled", "bench-fused", "bench-bf16"))
# flashspec-adaptive-merged in bench-bf16: EAGLE-2's dynamic tree of 64 nodes with lookup chains,
# the GPU budget measured on the CPU (09e_adaptive, *A GPU's budget*), timed where nodes cost
# about nothing
# (greedy rounds: the threshold plays no part)
BEAM = ("--adaptive", "--beam", 10, "--max-nodes", 64, "--max-width", 10, "--max-draft-length", 6)

def flashspec(*args) -> list[str]:
    "The command line of `flashspec ARGS` in this Python (the package as imported here)."
    return [sys.executable, "-m", "flashspec", *map(str, args)]

def plan(a) -> dict:
    "Each phase's commands and its share of the time (seconds at most), from the options."
    o, dev, tiny = Path(a.work), a.device, a.tiny
    n, new = (2, 8) if tiny else (a.prompts, a.max_new_tokens)
    bench = lambda name, dtype, methods, *more, limit=n: flashspec(
        "bench", "--device", dev, "--dtype", dtype, "--limit", limit, "--max-new-tokens", new,
        "--methods", *methods, "--out", o/f"{name}.json", "--plot", o/f"{name}.png", *more)
    feats = Path(a.features)
    # a few conversations of each source: the same code path at a size the CPU does in a minute
    if tiny:
        caps = [x for s in sources() for x in ("--cap", f"{s}=3")]
        held, size = 4, ["--steps", 6, "--train-batch-size", 2, "--ckpt-every", 3]
    else:
        caps = ["--cap", "gsm8k_train=2000"]  # maths would otherwise be 40% of the rows
        held, size = 200, ["--steps", a.steps, "--train-batch-size", a.batch, "--ckpt-every", 200]
    init = [] if a.fresh else ["--init", shipped()]
    fresh = [] if not a.fresh else ["--draft-vocab", 8192]
    # new answers first (`--sampled N`): N pool conversations answered by sampling, beside the
    # shared greedy ones (another seed each run, so each run's are new)
    n_s = 6 if tiny and a.sampled else a.sampled
    sampled = [flashspec(
        "distill-data", "--device", dev, "--out", o / "sampled", "--n-prompts", n_s, "--topk", 0,
        "--answer-temperature", a.sampled_temperature, "--answer-seed", a.seed,
        "--batch-size", 4 if tiny else 1024, "--shard-size", 8 if tiny else 4096,
        "--max-new-tokens", 16 if tiny else 256)] if n_s else []
    # {shared}: the shared answers file, found when the command runs (`main`)
    kd = ["--kd", "{shared}", o / "sampled" / "answers.npz"] if n_s else []
    steps = {
        # the fused round's own cost model (`fused_costs`, never run on a GPU before): measured and
        # cached by one short answer; if it fails, the later phases verify the eager cost model's
        # tree instead (`main` drops their --fused-tree)
        "fused-tree": (
            [flashspec(
                "bench", "--device", dev, "--dtype", "bfloat16", "--limit", 1, "--max-new-tokens",
                8, "--methods", "flashspec-fused", "--fused-tree", "--out", o/"fused-tree.json")],
            0.03),
        # the cost model's tree: the batch phase measures the eager costs (cached), the benches
        # read them, so all decode on one tree
        "bench-fused": (
            [bench("bench-fused", "bfloat16",
                   ["hf-static", "ar-fused", "flashspec-fused", "flashspec-fused-merged"],
                   limit=2 if tiny else 13)],
            0.02),
        "bench-sampled": (
            [bench("bench-sampled", "bfloat16",
                   ["hf-static", "ar-fused", "flashspec-fused-merged"], "--temperature", 0.7,
                   "--fused-tree", limit=2 if tiny else 13)],
            0.06),
        "bench-fused-compiled": (
            [bench("bench-fused-compiled", "bfloat16",
                   ["hf-static", "ar-fused", "flashspec-fused-merged"], "--compile",
                   "--fused-tree", limit=2 if tiny else 26)],
            0.09),
        # issue 12's table: eager hf (about 109 ms a token in bf16 there) and hf-assisted (its
        # assistant must be a causal LM: the distilled slice) in one run, then hf again beside
        # hf-static (compiled) and the fused round, each with its first call; one first turn each,
        # 48 new tokens
        "bench-hf": (
            [flashspec(
                "bench", "--device", dev, "--dtype", "bfloat16", "--limit", 1, "--first-turns",
                "--max-new-tokens", 8 if tiny else 48, "--methods", *methods,
                "--out", o/f"bench-hf-{i}.json", *more)
             for i, (methods, more) in enumerate((
                 (["hf", "hf-assisted"], ["--draft-design", "slice"]),
                 (["hf", "hf-static", "ar-fused", "flashspec-fused-merged"], ["--fused-tree"])))],
            0.08),
        "bench-compiled": (
            [bench("bench-compiled", "bfloat16", ["hf-static", "ar", "flashspec-merged"],
                   "--compile")],
            0.01),  # not run by default
        "bench-bf16": (
            [
                bench(
                    "bench-bf16", "bfloat16",
                    ["hf-static", "ar", "flashspec", "flashspec-merged",
                     "flashspec-adaptive-merged"], *BEAM)],
            0.02),
        # issue 12's 50-prompt check (10_decode's, on the fused round): the first turns of 50
        # questions, 64 new tokens, fp32, against hf token for token; a fixed tree needs no cost
        # measurement (24 s on a fresh machine); fp32 hf took 3.5 s a 96-token answer in the
        # second H200 run, the fused round 0.35 s
        "bench-fp32": (
            [flashspec(
                "bench", "--device", dev, "--dtype", "float32", "--limit", 2 if tiny else 50,
                "--first-turns", "--max-new-tokens", 8 if tiny else 64, "--methods", "hf",
                "flashspec-fused-merged", "--depth", 4, "--width", 3,
                "--out", o/"bench-fp32.json", "--plot", o/"bench-fp32.png")],
            0.13),
        "batch": (
            [
                [sys.executable, __file__, "--batch-phase", o / "batch.json", "--device", dev]
                + (["--tiny"] if tiny else [])],
            0.16),
        # issue 70 on the GPU: how far a bf16 row moves with the rows beside it (`forward_gap`,
        # natural and fixed shapes), then the fused round's answers against its own plain
        # decoding's in bf16 on 80 first turns, natural (what exactness must fix), then exact
        # (`--exact-fused`: fixed shapes, each row over its own keys; its cost: the tokens/s of
        # the two runs)
        "exact-bf16": (
            [[sys.executable, __file__, "--gap-phase", o / "gap-bf16.json", "--device", dev]
             + (["--tiny"] if tiny else [])]
            + [flashspec(
                "bench", "--device", dev, "--dtype", "bfloat16", "--limit", 2 if tiny else 80,
                "--first-turns", "--max-new-tokens", 8 if tiny else 64, "--methods", "ar-fused",
                "flashspec-fused-merged", "--fused-tree", "--out", o/f"exact-bf16{x}.json", *more)
               for x, more in (("", []), ("-fixed", ["--exact-fused"]))],
            0.11),
        # issue 14's "identical outputs in fp32": a fused batch of 8 against each request alone
        "batch-fp32": (
            [
                [sys.executable, __file__, "--batch-phase", o / "batch-fp32.json", "--device", dev,
                 "--fp32"] + (["--tiny"] if tiny else [])],
            0.05),
        # the cache first, so that training's time limit is set from the time left after it
        "train": (
            sampled + [
                flashspec(
                    "distill", "--design", "eagle3", "--device", dev, "--out", o / "train",
                    "--features", feats, *kd, *caps, "--features-only"),
                flashspec(
                    "distill", "--design", "eagle3", "--device", dev, "--out", o / "train",
                    "--features", feats, *init, *fresh, *size, "--held-out", held, "--lr", a.lr,
                    "--warmup", 20, "--ttt-steps", 3, "--w-kd", 0, "--time-limit", "{minutes}")],
            0.24)}
    return {name: steps[name] for name in PHASES}  # in the order they run

def sources() -> list[str]:
    "The distillation pool's sources (for the rehearsal's caps)."
    from flashspec.data import DISTILL, data_file
    from flashspec.train.features import pool_sources
    return sorted(set(pool_sources(data_file(DISTILL))) - {None})

def shared_answers() -> str:
    "Path of the shared answers file (the embedded target's greedy answers to the pool)."
    from flashspec.data import KD_ANSWERS, data_file
    return str(data_file(KD_ANSWERS))

def shipped() -> str:
    "Path of the feature drafter shipped in the package."
    from flashspec.drafters.weights import WEIGHTS
    from flashspec.drafters.weights import EAGLE_WEIGHTS
    return str(WEIGHTS/EAGLE_WEIGHTS)

def hf_batched(model, prompts:list, B:int, n:int, slots:int) -> tuple[list, float]:
    """Hugging Face greedy `generate` with its static cache of `slots` on left-padded batches of B:
    `(outputs, seconds)`."""
    from flashspec.bench import hf_generate_batched
    outs, _, secs = hf_generate_batched(model, prompts, B, n, static=True, cache_len=slots)
    return outs, secs

def first_turns(device:str, dtype:str, tiny:bool) -> tuple:
    """What both batch phases decode: the target in `dtype` on `device`, the shipped drafter, and
    the first turns of 16 Spec-Bench questions (4 in the rehearsal) with their new tokens:
    `(target, draft, questions, prompt ids, new tokens)`."""
    from flashspec.target import load_target, encode_chat
    from flashspec.data import read_prompts
    from flashspec.drafters.weights import load_shipped_drafter
    target, tok = load_target(dtype=dtype, device=device)
    qs = read_prompts(limit=4 if tiny else 16)
    ids = [encode_chat(tok, q["turns"][:1]) for q in qs]
    return target, load_shipped_drafter(target), qs, ids, 8 if tiny else 64

def batch_phase(path:Path, device:str, tiny:bool):
    """Issue 14's batch table on this device, bf16: Hugging Face batched static against the fused
    round's batches (`generate_fused_batch`: plain, and on each batch size's own measured tree,
    `tree="auto"`) and, at the first batch size, the one-request tree, the compiled round and
    `generate_batch`."""
    import datetime
    from flashspec.util import hardware
    from flashspec.tune import auto_tree
    from flashspec.decode.fused import fused_auto_tree, FUSED_SIZES
    from flashspec.decode.batch import generate_batch, generate_fused_batch, Request
    from flashspec.kvcache import bucket_slots
    target, draft, qs, ids, n = first_turns(device, "bfloat16", tiny)
    tree = auto_tree(target, draft)[0]  # the eager cost model's, for one request
    nodes = lambda t: len(t.index_paths()) + 1
    reqs = lambda: [Request(p, n, category=q["category"], id=q["question_id"])
                    for p, q in zip(ids, qs)]
    # one cache size for every batch and tree; Hugging Face compiles once per batch size (on CUDA),
    # so each size is warmed up on one batch of a few tokens before it is timed; the fused round
    # records its graph (and compiles) on its first call, warmed up the same way, and with
    # tree="auto" it first measures a round of B rows per tree size (cached: in the first call)
    slots = bucket_slots(max(map(len, ids)) + n + max(nodes(tree), max(FUSED_SIZES)))
    def timed(call):
        t0 = time.perf_counter(); res = call()
        return [r.tokens for r in res], time.perf_counter() - t0
    def fused(B, d, t, name, compile=False):
        call = lambda rs: generate_fused_batch(target, d, rs, batch_size=B, tree=t,
                                               max_len=slots, compile=compile)
        t0 = time.perf_counter(); call([Request(p, 4) for p in ids[:B]])
        first[f"fused {name}, B={B}"] = time.perf_counter() - t0
        return timed(lambda: call(reqs()))
    def eager(B, budget=None):
        return timed(lambda: generate_batch(target, draft, reqs(), batch_size=B, tree=tree,
                                            node_budget=budget))
    rows, first = [], {}
    def row(B, name, got, ref, t=None):
        outs, sec = got
        rows.append(dict(B=B, method=name, nodes=None if t is None else nodes(t),
                         tokens_per_s=sum(map(len, outs)) / sec,
                         same_as_hf=sum(o == r for o, r in zip(outs, ref)), requests=len(outs)))
        print(json.dumps(rows[-1]), flush=True)
        path.write_text(json.dumps(dict(
            label=(f"{datetime.date.today()}, {hardware(device)}, bf16, SmolLM2-135M-Instruct, "
                   f"shipped feature drafter, {len(ids)} Spec-Bench first turns, {n} new tokens;"
                   f" one request's tree (eager cost model): {nodes(tree)} nodes"),
            first_call_s=first, rows=rows), indent=1))  # rewritten after every row
    sizes, refs = ((1, 2) if tiny else (8, 16)), {}
    for B in sizes:  # batch 1 is the bench phases' (issue 14 asks for batch 8)
        t0 = time.perf_counter(); hf_batched(target, ids[:B], B, 4, slots)
        first[f"hf-static, B={B}"] = time.perf_counter() - t0
        ref = refs[B] = hf_batched(target, ids, B, n, slots)
        row(B, "hf-static, left-padded", ref, ref[0])
        row(B, "flashspec fused, plain", fused(B, None, None, "plain"), ref[0])
        # the rehearsal: a small table of B rows, cached where tree="auto" reads it
        if tiny: fused_auto_tree(target, draft, batch_size=B, sizes=(1, 2, 4), rounds=2)
        got = fused(B, draft, "auto", "the batch's tree")
        row(B, "flashspec fused, the batch's tree", got, ref[0],
            fused_auto_tree(target, draft, batch_size=B)[0])  # the pick, cached by the call
    B, ref = sizes[0], refs[sizes[0]][0]  # then, at batch 8: the rest
    row(B, "flashspec fused, one request's tree", fused(B, draft, tree, "tree"), ref, tree)
    row(B, "flashspec fused, the batch's tree, compiled",
        fused(B, draft, "auto", "the batch's tree compiled", compile=True), ref,
        fused_auto_tree(target, draft, batch_size=B)[0])
    row(B, "flashspec eager loop, one request's tree", eager(B), ref, tree)
    row(B, "flashspec eager loop, per-request budgets", eager(B, "auto"), ref)

def batch_fp32_phase(path:Path, device:str, tiny:bool):
    """Issue 14's lossless check on this device, fp32: 16 first turns through the fused round's
    batches of 8 (the shipped drafter, the fixed 4 x 3 tree with a lookup chain), each output
    against the same request decoded alone by Hugging Face `generate`."""
    import datetime
    from flashspec.util import hardware
    from flashspec.tree import TreeConfig
    from flashspec.decode.batch import generate_fused_batch, Request
    from flashspec.bench import hf_generate_batched
    from flashspec.decode.fused import FUSED_CHAIN
    target, draft, _, ids, n = first_turns(device, "float32", tiny)
    B = 2 if tiny else 8
    t0 = time.perf_counter()
    ref = hf_generate_batched(target, ids, 1, n)[0]  # one request at a time: no padding
    t_hf, t0 = time.perf_counter() - t0, time.perf_counter()
    got = generate_fused_batch(target, draft, [Request(p, n) for p in ids], batch_size=B,
                               tree=TreeConfig(4, 3), chain=FUSED_CHAIN)
    t_fused = time.perf_counter() - t0
    same = [r.tokens == x for r, x in zip(got, ref)]
    path.write_text(json.dumps(dict(
        label=(f"{datetime.date.today()}, {hardware(device)}, fp32, SmolLM2-135M-Instruct, "
               f"shipped feature drafter, {len(ids)} Spec-Bench first turns, {n} new tokens, "
               f"tree 4 x 3 and a lookup chain of {FUSED_CHAIN}, batch {B}"),
        identical=sum(same), requests=len(same), hf_alone_s=t_hf, fused_batch_s=t_fused,
        errors=[r.error for r in got if r.error],
        outputs=[dict(hf=x, fused=r.tokens) for r, x in zip(got, ref)]), indent=1))
    print(f"fused batch of {B} in fp32: {sum(same)}/{len(same)} identical to hf alone", flush=True)

def gap_phase(path:Path, device:str, tiny:bool):
    """Issue 70's first GPU measurement: `forward_gap` of the target in bf16 (and fp32 beside it)
    through the native eager forward, each token's row among 8 against alone (natural shapes) and
    alone padded to 8 rows (fixed shapes: the plain step run at the tree's row count)."""
    import datetime
    from flashspec.engine import forward_gap, make_forward
    from flashspec.target import load_target
    from flashspec.util import hardware
    rows = []
    for dtype in ("bfloat16", "float32"):
        target, _ = load_target(dtype=dtype, device=device)
        for n in ((4,) if tiny else (4, 64)):
            for pad in (False, True):
                gap = forward_gap(target, 12 if tiny else 300, n, 0, make_forward(target), pad=pad)
                rows.append(dict(dtype=dtype, rows=n, fixed_shapes=pad, gap=gap))
                print(rows[-1], flush=True)
    path.write_text(json.dumps(dict(
        label=(f"{datetime.date.today()}, {hardware(device)}, SmolLM2-135M-Instruct, native eager"
               " forward, random tokens after a random prompt"), gaps=rows), indent=1))

def pack(work:Path, out:Path):
    """Pack `work` into `out`/gpu-session.tgz (written beside, then renamed: a kill mid-write leaves
    the last whole archive) and copy its session.json into `out`: two files to bring back."""
    work, out = Path(work), Path(out)
    # the weights come back, not the checkpoints (removed once a draft exists)
    if (work/"train"/"draft.safetensors").exists():
        for f in (work/"train").iterdir():
            if f.name not in ("draft.safetensors", "log.json"): f.unlink()
    # the sampled answers come back as one file (answers.npz); their shards stay behind
    if (work/"sampled"/"answers.npz").exists(): shutil.rmtree(work/"sampled"/"answers", True)
    tmp = out/"gpu-session.tgz.part"
    with tarfile.open(tmp, "w:gz") as t: t.add(work, arcname="gpu-session")
    os.replace(tmp, out/"gpu-session.tgz")
    if (work/"session.json").exists():
        (out/"session.json").write_text((work/"session.json").read_text())

def main(argv=None):
    "Run the phases in order under the budget (or, with an internal option, one step of a phase)."
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--out", help="where the packed results go ($OUT on the GPU machine): two files")
    ap.add_argument(
        "--work", default="/tmp/gpu-session",
        help="where the phases write (emptied first), packed into --out after each phase")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--budget", type=float, default=540, help="seconds for all phases together")
    ap.add_argument("--phases", nargs="+", default=list(DEFAULT_PHASES), choices=PHASES)
    ap.add_argument(
        "--tiny", action="store_true",
        help="the rehearsal: every phase at a size the CPU runs quickly")
    ap.add_argument(
        "--prompts", type=int, default=4,
        help="Spec-Bench questions per bench phase (taken round-robin over the categories)")
    ap.add_argument("--max-new-tokens", type=int, default=96)
    ap.add_argument(
        "--features", default="/tmp/fs-features",
        help="feature cache folder (large: about 3.5 KB a token)")
    ap.add_argument(
        "--steps",
        type=int,
        default=20000,
        help=(
            "training steps at most (the time limit stops it first on a GPU; the rate anneals by"
            " then)"))
    ap.add_argument("--batch", type=int, default=32, help="training batch (conversations)")
    ap.add_argument("--lr", type=float, default=5e-4)
    ap.add_argument(
        "--fresh", action="store_true",
        help="train a new drafter instead of fine-tuning the shipped one")
    ap.add_argument(
        "--sampled", type=int, default=4000,
        help=("train: first answer this many pool conversations anew by sampling (their answers"
              " come back in the archive), and train on them beside the shared ones; 0: none"))
    ap.add_argument("--sampled-temperature", type=float, default=0.7)
    ap.add_argument(
        "--seed", type=int, default=int(time.strftime("%Y%m%d")),
        help="the sampled answers' seed (default: today's date, so each day's are new)")
    ap.add_argument("--batch-phase", help=argparse.SUPPRESS)  # internal: batch_phase into this JSON
    ap.add_argument("--gap-phase", help=argparse.SUPPRESS)  # internal: gap_phase into this JSON
    ap.add_argument("--fp32", action="store_true", help=argparse.SUPPRESS)  # with it: the fp32 check
    a = ap.parse_args(argv)
    if a.gap_phase: return gap_phase(Path(a.gap_phase), a.device, a.tiny)
    if a.batch_phase:
        return (batch_fp32_phase if a.fp32 else batch_phase)(Path(a.batch_phase), a.device, a.tiny)
    if not a.out: ap.error("--out is required")
    out, work = Path(a.out), Path(a.work)
    if work.resolve() == out.resolve(): ap.error("--work must be another folder than --out")
    out.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(work, ignore_errors=True); work.mkdir(parents=True)
    # a pack never runs inside another: two would write into one file, a corrupt archive
    # summary: a line per phase, the running one's status "running" until it ends
    state, summary = dict(packing=False, stop=False), []
    def pack_now():
        state["packing"] = True
        try:
            (work/"session.json").write_text(json.dumps(summary, indent=1))
            pack(work, out)
        finally: state["packing"] = False
        if state["stop"]: sys.exit(124)
    def on_term(*_):  # the run's limit: bring back what is there
        # once: `timeout` signals this process twice (itself, then its group)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        state["stop"] = True
        if summary and summary[-1]["status"] == "running":
            summary[-1]["status"] = "stopped by SIGTERM"
        if not state["packing"]: pack_now()  # else the pack under way ends, then exits
    signal.signal(signal.SIGTERM, on_term)
    t_end, steps = time.time() + a.budget, plan(a)
    chosen = sum(steps[name][1] for name in a.phases)  # the shares of the phases run split it all
    fused_tree = True  # False once the fused-tree phase failed: the eager cost model's tree after
    for name in a.phases:
        cmds, share = steps[name]
        if not fused_tree: cmds = [[c for c in cmd if c != "--fused-tree"] for cmd in cmds]
        left = t_end - time.time()
        # the last phase: all that is left
        limit = left if name == a.phases[-1] else min(share / chosen * a.budget, left)
        if limit < 20:
            summary.append(dict(phase=name, status="skipped: no time left"))
            pack_now(); continue
        t0, status = time.time(), "ok"
        summary.append(dict(phase=name, status="running"))
        with open(work/f"{name}.log", "w") as log:
            for cmd in cmds:
                rest = t0 + limit - time.time()
                # a training time limit leaves room for the table and the copy back
                minutes = f"{max(rest - 60, 10) / 60:.2f}"
                cmd = [shared_answers() if c == "{shared}" else str(c).replace("{minutes}", minutes)
                       for c in cmd]
                log.write("$ " + " ".join(cmd) + "\n"); log.flush()
                try:
                    rc = subprocess.run(
                        cmd, stdout=log, stderr=subprocess.STDOUT, timeout=max(rest, 1)
                    ).returncode
                except subprocess.TimeoutExpired:
                    rc, status = None, "timed out"
                if rc: status = f"failed (rc {rc})"
                if status != "ok": break
        # one update: a SIGTERM sees the phase running or ended, never both
        summary[-1].update(status=status, seconds=round(time.time() - t0, 1), limit=round(limit))
        if name == "fused-tree" and status != "ok":
            fused_tree = False; summary[-1]["then"] = "later phases without --fused-tree"
        print(json.dumps(summary[-1]), flush=True)
        pack_now()
    return 0

if __name__ == "__main__":
    sys.exit(main())
