"""Training on several devices: `train_feature_drafter` (and so `flashspec distill`, whose trainers
share `train_draft`) launched as 2 processes by `torchrun` (gloo, the CPU) trains one drafter: both
processes end with bitwise the same weights (each took its half of every batch and the gradients
were averaged), the loss falls, the log is the whole batch's, and a checkpoint written by 2
processes is not resumed by 1.

Before the fix the losses called the draft's own modules rather than the DDP wrapper's forward, so
no gradient was ever averaged: the two processes drifted apart (0.026 in a weight after 8 steps) and
rank 0 saved its own half-trained weights."""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import torch

SCRIPT = textwrap.dedent('''
    import os, sys, json, torch, numpy as np
    from pathlib import Path
    from flashspec.target import tiny_llama, tiny_tokenizer
    from flashspec.train.features import extract_features, FeatureData
    from flashspec.train.ttt import train_feature_drafter
    from flashspec.util import quiet_hf
    quiet_hf()
    d, rank = Path(sys.argv[1]), int(os.environ.get("RANK", 0))
    tt = tiny_llama(n_layers=4, seed=3)
    own = d/f"data{rank}"; own.mkdir(parents=True, exist_ok=True)  # each process's own copy
    g_, tk_ = torch.Generator().manual_seed(0), tiny_tokenizer()
    H_, seqs = tk_.encode("<|im_start|>assistant\\n"), []
    for _ in range(16):
        pr = [4] + torch.randint(5, 100, (5,), generator=g_).tolist() + H_
        seqs.append(pr + tt.generate(torch.tensor([pr]), max_new_tokens=12, do_sample=False,
                                     eos_token_id=None, pad_token_id=0)[0, len(pr):].tolist())
    np.savez(own/"kd.npz", tokens=np.concatenate(seqs).astype(np.uint16),
             offsets=np.cumsum([0] + [len(s) for s in seqs]),
             n_prompt=np.full(16, len(seqs[0]) - 12), turn=np.zeros(16, np.int16),
             conv=np.arange(16, dtype=np.int32))
    data = FeatureData(extract_features(tt, tk_, own/"kd.npz", own/"c", k=4, progress=False))
    fd, log = train_feature_drafter(tt, data, d/"run", steps=8, batch_size=2, lr=3e-3, warmup=1,
                                    mixed_precision="no", progress=False)
    torch.save({n: p.detach().clone() for n, p in fd.named_parameters() if p.requires_grad},
               d/f"w{rank}.pt")
    (d/f"log{rank}.json").write_text(json.dumps(log))
''')


def _run(argv:list, d:Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.run(argv + [str(d/"train.py"), str(d)], env=env, capture_output=True,
                          text=True, timeout=600)


def test_two_processes_train_one_drafter(tmp_path):
    (tmp_path/"train.py").write_text(SCRIPT)
    r = _run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node",
              "2"], tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    w0, w1 = (torch.load(tmp_path/f"w{i}.pt") for i in (0, 1))
    assert w0.keys() == w1.keys() and all(torch.equal(w0[k], w1[k]) for k in w0), max(
        float((w0[k] - w1[k]).abs().max()) for k in w0)
    logs = [json.loads((tmp_path/f"log{i}.json").read_text()) for i in (0, 1)]
    assert logs[0] == logs[1]  # the averaged figures, the same in both
    assert len(logs[0]) == 8 and logs[0][-1]["loss"] < logs[0][0]["loss"], logs[0]
    st = torch.load(tmp_path/"run"/"checkpoint.pt", weights_only=True)
    assert st["settings"]["processes"] == 2
    # what rank 0 saved is the weights both hold
    from safetensors.torch import load_file
    saved = load_file(tmp_path/"run"/"draft.safetensors")
    assert saved.keys() == w0.keys()
    assert all(torch.equal(v, w0[k].to(v.dtype)) for k, v in saved.items())
    # one process does not resume two processes' checkpoint
    (tmp_path/"run"/"draft.safetensors").unlink()
    r1 = _run([sys.executable], tmp_path)
    assert r1.returncode != 0 and "processes: " in r1.stderr, r1.stderr[-3000:]
