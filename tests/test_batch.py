"""Batched decoding (`flashspec.batch`): whatever the mix of requests, each one's output is the one
it gets alone."""
import pytest
import torch
from hypothesis import given, settings, strategies as st, HealthCheck

from flashspec.target import tiny_llama
from flashspec.drafters.slice import slice_draft
from flashspec.tree import TreeConfig
from flashspec.verify import Sampling
from flashspec.decode.loop import speculate
from flashspec.drafters.slice import ModelDrafter
from flashspec.decode.batch import Request, generate_batch

TARGET = tiny_llama(n_layers=4, seed=21)
DRAFTS = {k: slice_draft(TARGET, k) for k in (1, 4)}

request_st = st.fixed_dictionaries(
    dict(
        n_prompt=st.integers(1, 20), max_new=st.integers(1, 24), depth=st.integers(0, 5),
        width=st.integers(1, 3), sampled=st.booleans(), seed=st.integers(0, 1000),
        eos_at=st.one_of(st.none(), st.integers(0, 23))))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    reqs=st.lists(request_st, min_size=1, max_size=7), batch_size=st.integers(1, 4),
    draft=st.sampled_from([1, 4]), budget=st.one_of(st.none(), st.integers(0, 16)),
    seed=st.integers(0, 10_000))
def test_each_request_as_if_alone(reqs, batch_size, draft, budget, seed):
    g = torch.Generator().manual_seed(seed)
    requests, alone = [], []
    for r in reqs:
        prompt = torch.randint(2, 128, (r["n_prompt"],), generator=g).tolist()
        tree = TreeConfig(r["depth"], r["width"])
        s = Sampling(0.9, top_p=0.95) if r["sampled"] else Sampling()
        eos = -1
        # an EOS the request's own output reaches (or not) at its own round
        if r["eos_at"] is not None:
            plain = speculate(TARGET, None, prompt, r["max_new"], eos_token_id=-1)[0]
            eos = plain[min(r["eos_at"], len(plain) - 1)]
        req = Request(prompt, r["max_new"], s, r["seed"], tree=tree, eos_token_id=eos)
        requests.append(req)
        if budget is None:
            alone.append(
                speculate(
                    TARGET, DRAFTS[draft], prompt, r["max_new"], sampling=s, tree=tree,
                    seed=r["seed"], eos_token_id=eos,
                )[0])
        elif s.greedy:  # budgets change the trees, so only greedy output is fixed: the target's own
            alone.append(speculate(TARGET, None, prompt, r["max_new"], eos_token_id=eos)[0])
        else:
            alone.append(None)
    res = generate_batch(TARGET, DRAFTS[draft], requests, batch_size=batch_size, node_budget=budget)
    for r, a in zip(res, alone):
        assert r.error is None
        if a is not None: assert r.tokens == a
        assert 1 <= len(r.tokens) <= r.request.max_new_tokens


def test_budget_bounds_every_round():
    g = torch.Generator().manual_seed(0)
    reqs = [
        Request(torch.randint(2, 128, (n,), generator=g).tolist(), 30, eos_token_id=-1)
        for n in (3, 8, 13, 5)]
    res = generate_batch(
        TARGET, lambda tree: ModelDrafter(DRAFTS[1], TreeConfig(5, 3)), reqs, batch_size=4,
        node_budget=7)
    per_round = {}
    for r in res:
        for j, n in enumerate(r.stats.nodes):
            per_round[r.rounds[0] + j] = per_round.get(r.rounds[0] + j, 0) + n - 1
    assert max(per_round.values()) <= 7
