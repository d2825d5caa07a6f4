"""The data of the feature drafter's fine-tuning round 5 (nbs/07b_eagle.ipynb, *Fine-tuning, round
5*).

    # N summarization prompts over the target's own long answers, answered:
    python tools/round5_data.py answer N
    # those answers + N conversations of the shipped drafter's own data:
    python tools/round5_data.py merge N

Spec-Bench's summarization prompts ask for a summary of a long text, and the distillation pool has
almost none (20 CNN/DailyMail articles, 19 of them over its 384-token prompt limit). `answer` makes
such prompts from text at hand: the embedded target's own long answers in the shared file (chat,
Arena-Hard, OpenAssistant, Vicuna and self-instruct sources, 150 answer tokens or more, each used
once), after one of a few summarization instructions, plus the pool's CNN/DailyMail articles but the
8 that 07b holds for `chain_acceptance`. The target answers them as the shared file was made (bf16,
greedy, `answer_conversations`, batches of 32), with a 768-token prompt limit and 160 new tokens,
and the rows are saved in the shared file's format after every batch (it can be stopped at any
time). Conversation ids are 100,000 + k, outside the pool's line numbers.
`merge` writes one file for `flashspec distill --kd`: the first N conversations of the shipped
cache's order (none of the shipped drafter's 200 held-out rows), then the new ones.
Both write under `~/.cache/flashspec/round5/`.
"""

import json, random, sys, time
import numpy as np
import torch
from flashspec.models import cache_dir
from flashspec.data import read_prompts, data_dir
from flashspec.distill import save_answers  # the shared file's format
from round4_data import merge  # the same replay rows as round 4

DIR = cache_dir()/"round5"
KD, POOL = data_dir()/"distill"/"kd_answers_smollm2-135m.npz", data_dir()/"distill"/"prompts.jsonl"
# sources whose answers are prose
PROSE = ("oasst", "arena_hard", "vicuna", "self_instruct", "mtbench101")
ASK = (
    "Summarize the following text in a few sentences.", "Write a short summary of this text:",
    "Summarize the main points of the following passage.",
    "Give a brief summary of the text below.")

def prompts(n:int, tok) -> list[dict]:
    """The pool's CNN/DailyMail articles, then `n` summarization prompts over long prose answers
    (seeded)."""
    kd, pool = np.load(KD), read_prompts(POOL)
    src = [json.loads(l)["source"] for l in open(POOL)]
    answered = set(kd["conv"].tolist())
    summ = [i for i, q in enumerate(pool) if q["category"] == "summarization"]
    # 07b's chain_acceptance prompts: never trained on
    held = set([i for i in summ if i not in answered][:8])
    out = [dict(turns=[pool[i]["turns"][0]]) for i in summ if i not in held]
    rows = [i for i in range(len(kd["conv"])) if src[kd["conv"][i]].startswith(PROSE)
            and kd["offsets"][i + 1] - kd["offsets"][i] - kd["n_prompt"][i] >= 150]
    rng = random.Random(0); rng.shuffle(rows)
    for k, i in enumerate(rows[:n]):
        ans = kd["tokens"][kd["offsets"][i] + kd["n_prompt"][i]:kd["offsets"][i + 1]]
        text = tok.decode(ans.tolist(), skip_special_tokens=True).strip()
        out.append(dict(turns=[f"{ASK[k % len(ASK)]}\n\n{text}"]))
    return [dict(q, question_id=str(100_000 + k)) for k, q in enumerate(out)]

def answer(n:int):
    from flashspec.models import load_target
    from flashspec.distill import answer_conversations
    t16, tok = load_target(dtype="bfloat16")
    convs = prompts(n, tok)
    rows, t0 = [], time.time()
    for s in range(0, len(convs), 32):
        rows += answer_conversations(
            t16, tok, convs[s : s + 32], max_prompt_tokens=768, max_new_tokens=160, batch_size=32)
        save_answers(
            DIR / "extra.npz", [np.asarray(r["input_ids"]) for r in rows],
            [r["n_prompt"] for r in rows], [r["turn"] for r in rows], [int(r["id"]) for r in rows])
        a = sum(len(r["input_ids"]) - r["n_prompt"] for r in rows)
        print(
            f"{s + 32} prompts, {len(rows)} rows, {a} answer tokens, {time.time() - t0:.0f} s",
            flush=True)

if __name__ == "__main__":
    DIR.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(2)
    if sys.argv[1:2] == ["answer"] and len(sys.argv) == 3: answer(int(sys.argv[2]))
    elif sys.argv[1:2] == ["merge"] and len(sys.argv) == 3:
        merge(int(sys.argv[2]), DIR, "round5.npz")
    else: sys.exit(__doc__)
