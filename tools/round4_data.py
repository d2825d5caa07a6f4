"""The data of the feature drafter's fine-tuning round 4 (nbs/07b_eagle.ipynb, *Fine-tuning, round
4*).

    # the pool's unanswered translation, QA and chat conversations, answered:
    python tools/round4_data.py answer
    # those answers + N conversations of the shipped drafter's own data:
    python tools/round4_data.py merge N

`answer` has the embedded target answer, as the shared `kd_answers_smollm2-135m.npz` was made (bf16,
greedy, `answer_conversations`, 384 prompt tokens, 256 new tokens, batches of 64), every
conversation of the distillation pool that the shared file did not answer, of the kinds translation,
QA and chat, except the 40 that 07b holds for `chain_acceptance` (the first 8 unanswered ones of
each of its five kinds); interleaved by kind, and saved in the shared file's format after every 64
conversations (it can be stopped at any time).
`merge` writes one file of that format for `flashspec distill --kd`: the first N conversations of
the shipped cache's order (`capped_rows` with its caps), none of the shipped drafter's 200 held-out
rows, then the new conversations (last rows only: the feature cache reads each conversation's last
row).
Both write under `~/.cache/flashspec/round4/`.
"""

import itertools, json, sys, time
import numpy as np
import torch
from flashspec.models import cache_dir
from flashspec.data import read_prompts, data_dir
from flashspec.distill import save_answers  # the shared file's format

DIR = cache_dir()/"round4"
KD, POOL = data_dir()/"distill"/"kd_answers_smollm2-135m.npz", data_dir()/"distill"/"prompts.jsonl"
# 07b's chain_acceptance prompts
CATS = ("chat", "qa", "translation", "math_reasoning", "summarization")

def answer():
    from flashspec.models import load_target
    from flashspec.distill import answer_conversations
    answered = set(np.load(KD)["conv"].tolist())
    pool = read_prompts(POOL)
    held = {
        i
        for c in CATS
        for i in [i for i, q in enumerate(pool) if i not in answered and q["category"] == c][:8]}
    by = {
        c: [
            i
            for i, q in enumerate(pool)
            if i not in answered and i not in held and q["category"] == c]
        for c in ("translation", "qa", "chat")}
    # interleaved
    order = [i for grp in itertools.zip_longest(*by.values()) for i in grp if i is not None]
    print({c: len(v) for c, v in by.items()}, len(order), flush=True)
    t16, tok = load_target(dtype="bfloat16")
    rows, t0 = [], time.time()
    for s in range(0, len(order), 64):
        convs = [dict(pool[i], question_id=str(i)) for i in order[s:s + 64]]
        rows += answer_conversations(
            t16, tok, convs, max_prompt_tokens=384, max_new_tokens=256, batch_size=64)
        save_answers(
            DIR / "extra.npz", [np.asarray(r["input_ids"]) for r in rows],
            [r["n_prompt"] for r in rows], [r["turn"] for r in rows], [int(r["id"]) for r in rows])
        n = sum(len(r["input_ids"]) - r["n_prompt"] for r in rows)
        print(
            f"{s + len(convs)} convs, {len(rows)} rows, {n} answer tokens,"
            f" {time.time() - t0:.0f} s",
            flush=True)

def merge(n_replay:int, folder=DIR, name:str="round4.npz"):
    """`folder/name`: the first `n_replay` conversations of the shipped cache's order, then
    `folder/extra.npz`'s."""
    from safetensors import safe_open
    from flashspec.distill import WEIGHTS
    from flashspec.eagle import EAGLE_WEIGHTS, capped_rows, last_rows
    kd, ex = np.load(KD), np.load(folder/"extra.npz")
    # the shipped cache's rows, in order
    order = capped_rows(KD, POOL, {"gsm8k_train": 700, "mtbench101": 600})
    with safe_open(str(WEIGHTS/EAGLE_WEIGHTS), "pt") as f:
        held = set(json.loads(f.metadata()["held_out"]))
    replay = [r for i, r in enumerate(order) if i not in held][:n_replay]
    parts = [(kd, np.asarray(replay)), (ex, last_rows(ex["offsets"], ex["conv"]))]
    toks = [d["tokens"][d["offsets"][r]:d["offsets"][r + 1]] for d, rows in parts for r in rows]
    cols = {
        k: np.concatenate([d[k][rows] for d, rows in parts]) for k in ("n_prompt", "turn", "conv")}
    save_answers(folder/name, toks, **cols)
    print(
        f"replay {len(replay)} conversations, new {len(parts[1][1])}, {sum(map(len, toks))} tokens")

if __name__ == "__main__":
    DIR.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(2)
    if sys.argv[1:2] == ["answer"]: answer()
    elif sys.argv[1:2] == ["merge"] and len(sys.argv) == 3: merge(int(sys.argv[2]))
    else: sys.exit(__doc__)
