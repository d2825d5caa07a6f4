"""A time limit in training on several processes (`train_draft(time_limit=...)`, `flashspec distill
--time-limit`): launched as 2 gloo processes by `torchrun`, the ranks take the same steps with the
same learning rates and stop together, however their clocks disagree, because rank 0 alone reads
the clock (`time.monotonic`) and sends its decisions to the others each step.

Before the fix each rank read its own `time.time()`: a wall-clock step on one rank (as NTP makes)
left rank 0 in the next step's `all_reduce` and rank 1 at the barrier of its final save, both hung
until killed, no `draft.safetensors`; and even without a clock step the ranks' learning rates (the
schedule follows the clock) and so their weights came apart.

The worker trains a tiny slice (CE on random tokens) twice: under a 3-second limit on many planned
steps, which stops it early, the clock driving the schedule; then 12 steps under a far limit while
rank 1's `time.time` and `time.monotonic` jump an hour ahead after step 3."""
import json
import sys
import textwrap

import torch
from procs import launch

WORKER = textwrap.dedent('''
    import json, os, sys, time, torch
    from pathlib import Path
    from flashspec.drafters.slice import make_draft
    from flashspec.target import tiny_llama
    from flashspec.train.distill import train_draft
    from flashspec.util import quiet_hf
    quiet_hf()
    d, rank = Path(sys.argv[1]), int(os.environ.get("RANK", 0))
    tgt = tiny_llama(n_layers=2, seed=1)
    g = torch.Generator().manual_seed(0)
    rows = [dict(input_ids=torch.randint(5, 100, (12,), generator=g).tolist(), n_prompt=4)
            for _ in range(16)]
    real_time, real_mono = time.time, time.monotonic
    def jump(s, rec):  # rank 1's clocks an hour ahead from step 3 on
        if rank == 1 and s == 3:
            time.time = lambda: real_time() + 3600
            time.monotonic = lambda: real_mono() + 3600
    for name, steps, limit, on_step in (("limit", 100000, 3.0, None), ("jump", 12, 1800.0, jump)):
        draft = make_draft(tgt, "frozen+1", 1)
        log = train_draft(draft, rows, d/name, steps=steps, batch_size=2, lr=3e-3, warmup=1,
                          ckpt_every=50, time_limit=limit, progress=False, on_step=on_step)
        torch.save({n: p.detach().clone() for n, p in draft.named_parameters() if p.requires_grad},
                   d/name/f"w{rank}.pt")
        (d/name/f"log{rank}.json").write_text(json.dumps(log))
        print(f"rank {rank}: {name} done, {len(log)} steps", file=sys.stderr, flush=True)
''')


def test_time_limit_two_processes(tmp_path):
    (tmp_path/"train.py").write_text(WORKER)
    rc, err = launch([sys.executable, "-m", "torch.distributed.run", "--standalone",
                      "--nproc_per_node", "2", str(tmp_path/"train.py"), str(tmp_path)],
                     tmp_path, timeout=120)
    assert rc == 0, err[-3000:]
    for name in ("limit", "jump"):
        run = tmp_path/name
        assert (run/"draft.safetensors").exists(), name
        w0, w1 = (torch.load(run/f"w{i}.pt") for i in (0, 1))
        assert w0.keys() == w1.keys() and all(torch.equal(w0[k], w1[k]) for k in w0), (name, max(
            float((w0[k] - w1[k]).abs().max()) for k in w0))
        logs = [json.loads((run/f"log{i}.json").read_text()) for i in (0, 1)]
        assert logs[0] == logs[1], name  # the same steps at the same learning rates
        if name == "limit":  # stopped by the limit, the schedule following rank 0's clock
            assert 1 < len(logs[0]) < 100000 and logs[0][-1]["lr"] < logs[0][0]["lr"], logs[0][-1]
        else:  # rank 0's clock is far from the limit: every step
            assert len(logs[0]) == 12, len(logs[0])
