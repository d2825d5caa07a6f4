"""Cross-notebook integration: speculative decoding reproduces the target, greedy token for token
and sampled in distribution."""
import itertools
import pytest
import torch
from hypothesis import given, settings, strategies as st, HealthCheck
from scipy.stats import chisquare

from flashspec.target import tiny_llama
from flashspec.drafters.slice import slice_draft
from flashspec.tree import TreeConfig, compile_tree
from flashspec.verify import Sampling, probs
from flashspec.decode.loop import speculate
from flashspec.drafters.base import Drafter, Draft
from flashspec.drafters.slice import ModelDrafter
from flashspec.drafters.lookup import PromptLookupDrafter, AnswerStore, StoreDrafter
from flashspec.drafters.merged import MergedDrafter, merge_drafts
from flashspec.drafters.feature import FeatureDraft
from flashspec.drafters.adaptive import AdaptiveConfig, AdaptiveDrafter


def hf_greedy(target, prompt, n):
    out = target.generate(
        torch.tensor([prompt]), max_new_tokens=n, do_sample=False, eos_token_id=None, pad_token_id=0
    )
    return out[0, len(prompt):].tolist()


@pytest.mark.parametrize("seed,tie,kv_heads", [(11, True, 2), (12, False, 4), (13, False, 1)])
def test_greedy_equals_target_across_models(seed, tie, kv_heads):
    target = tiny_llama(n_layers=5, seed=seed, tie=tie, kv_heads=kv_heads)
    g = torch.Generator().manual_seed(seed)
    for n in (2, 9, 23):
        prompt = torch.randint(2, 128, (n,), generator=g).tolist()
        ref = hf_greedy(target, prompt, 48)
        for k, shape in [(1, TreeConfig(5, 4)), (3, TreeConfig(3, 2)), (5, TreeConfig(8, 1))]:
            out, stats = speculate(
                target, slice_draft(target, k), prompt, 48, tree=shape, eos_token_id=-1)
            assert out == ref, (k, shape)
            assert stats.target_forwards <= 48 and stats.new_tokens == 48


paths_strategy = st.lists(
    st.lists(st.integers(0, 2), min_size=1, max_size=4), min_size=1, max_size=12)


def closed_paths(raw):
    """Close a random set of index paths under prefixes and lower sibling ranks, so it is a valid
    tree."""
    out = set()
    for p in raw:
        for i in range(1, len(p) + 1):
            q = tuple(p[:i])
            for r in range(q[-1] + 1): out.add(q[:-1] + (r,))
    return tuple(sorted(out, key=lambda p: (len(p), p)))


_target = tiny_llama(n_layers=3, seed=21)
_draft = slice_draft(_target, 1)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=paths_strategy, plen=st.integers(1, 12), seed=st.integers(0, 10_000))
def test_greedy_lossless_any_tree(raw, plen, seed):
    """Any tree shape, any prompt length: greedy speculative output equals the target's greedy
    output."""
    paths = closed_paths(raw)
    prompt = torch.randint(2, 128, (plen,), generator=torch.Generator().manual_seed(seed)).tolist()
    out, _ = speculate(
        _target, ModelDrafter(_draft, TreeConfig(paths=paths)), prompt, 20, eos_token_id=-1)
    ref = hf_greedy(_target, prompt, 20)
    assert out == ref
    # the same tree with prompt-lookup chains merged in, and drafting from a vocabulary subset
    sub = torch.randperm(128, generator=torch.Generator().manual_seed(seed))[:40]
    merged = MergedDrafter(
        ModelDrafter(_draft, TreeConfig(paths=paths), vocab=sub, min_prob=0.01 * (seed % 3)),
        PromptLookupDrafter(3, min_ngram=1))
    assert speculate(_target, merged, prompt, 20, eos_token_id=-1)[0] == ref
    # gated by a cost model: from flat (every chain merged whole) to steep (most left out or cut)
    costs = dict(verify={1: 10.0, 64: 10.0 + 63.0 * (seed % 5)}, round={0: 1.0, 4: 1.0 + seed % 3})
    gated = MergedDrafter(
        ModelDrafter(_draft, TreeConfig(paths=paths)), PromptLookupDrafter(3, min_ngram=1),
        costs=costs, pad_nodes={n: n + seed % 2 for n in range(1, 40)})
    assert speculate(_target, gated, prompt, 20, eos_token_id=-1)[0] == ref


def token_paths(d):
    return {tuple(int(d.tokens[j]) for j in d.tree.path_to(i)) for i in range(d.tree.n_nodes)}


@settings(max_examples=40, deadline=None)
@given(ra=paths_strategy, rb=paths_strategy, seed=st.integers(0, 10_000))
def test_merge_is_the_union_of_token_paths(ra, rb, seed):
    "Merging two token trees keeps every root-to-node token sequence of both, once, and adds none."
    g = torch.Generator().manual_seed(seed)
    def rand_draft(raw):
        t = compile_tree(closed_paths(raw))
        toks = torch.randint(0, 4, (t.n_nodes,), generator=g); toks[0] = 7
        for u in range(t.n_nodes):  # siblings distinct, as a drafter proposes them
            for j, c in enumerate(t.children[u]):
                toks[c] = j + 4 * int(torch.randint(0, 2, (1,), generator=g))
        return Draft(t, toks)
    a, b = rand_draft(ra), rand_draft(rb)
    m = merge_drafts(a, b)
    assert token_paths(m) == token_paths(a) | token_paths(b)
    assert m.tree.n_nodes == len(token_paths(m))  # no token path twice


@settings(max_examples=30, deadline=None)
@given(raw=paths_strategy)
def test_compiled_tree_invariants(raw):
    t = compile_tree(closed_paths(raw))
    assert (t.depth == t.mask.sum(-1) - 1).all()
    for i in range(1, t.n_nodes):
        assert t.depth[i] == t.depth[t.parent[i]] + 1  # position = parent's + 1
        assert t.mask[i].nonzero().flatten().tolist() == sorted(t.path_to(i))
    leaves = {i for i in range(t.n_nodes) if not t.children[i]}
    assert {int(r[r >= 0][-1]) for r in t.retrieve} == leaves


class NoisyDrafter(Drafter):
    "A drafter whose q is a fixed random distribution: sampled without replacement, as declared."
    proposal = "without_replacement"
    def __init__(self, V, tree, seed=0):
        self.tree = compile_tree(tree.index_paths())
        self.max_nodes = self.tree.n_nodes
        g = torch.Generator().manual_seed(seed)
        self.q = (torch.randn(V, generator=g) * 1.5).softmax(-1)
    def propose(self, context, sampling, generator=None, hidden=None):
        t = self.tree
        toks = torch.zeros(t.n_nodes, dtype=torch.long); toks[0] = context[-1]
        q = self.q.repeat(t.n_nodes, 1)
        for u in range(t.n_nodes):
            if t.children[u]:
                toks[list(t.children[u])] = torch.multinomial(
                    self.q, len(t.children[u]), replacement=False, generator=generator)
        return Draft(t, toks, q)


_STORE = AnswerStore(
    [[3, 4, 1, 2], [3, 4, 1, 0], [3, 4, 5, 5], [3, 4, 0, 1], [4, 1, 1]], ngrams=(2,))

def _two_token_chi2(target, drafter_fn, sampling, n, seed):
    "Decode 2 tokens n times; chi-square of their joint against the target's exact p(x1) p(x2|x1)."
    V = target.config.vocab_size
    prompt = [2, 3, 4]
    with torch.no_grad():
        p1 = probs(target(torch.tensor([prompt])).logits[0, -1], sampling)
        p2 = probs(target(torch.tensor([[*prompt, a] for a in range(V)])).logits[:, -1], sampling)
    exp = (p1[:, None] * p2).flatten().double()
    counts = torch.zeros(V * V)
    for i in range(n):
        out, _ = speculate(
            target, drafter_fn(), prompt, 2, sampling=sampling, seed=seed * 100_000 + i,
            eos_token_id=-1)
        counts[out[0] * V + out[1]] += 1
    impossible = exp == 0  # filtered out by top-k / top-p: must never be emitted
    assert counts[impossible].sum() == 0, "emitted a token the target's distribution excludes"
    keep = exp * n >= 5  # chi-square needs expected counts >= 5: pool the rare cells
    rare = ~keep & ~impossible
    obs = torch.cat([counts[keep], counts[rare].sum()[None]]) if rare.any() else counts[keep]
    e = torch.cat([exp[keep], exp[rare].sum()[None]]) if rare.any() else exp[keep]
    return chisquare(obs.tolist(), (e * n / e.sum()).tolist()).pvalue


@pytest.mark.parametrize(
    "kind",
    [
        "model tree", "model tree wider than top-k", "model tree, vocabulary subset",
        "adaptive model tree", "random q, 3 siblings", "prompt lookup", "answer store"])
def test_sampling_matches_target_distribution(kind):
    # spread-out p: a real test
    target = tiny_llama(n_layers=2, vocab_size=6, hidden=32, seed=5, tie=False)
    s = Sampling(temperature=1.0, top_k=3 if "top-k" in kind else 0)
    d = slice_draft(target, 1)  # one network; each decode gets a fresh drafter around it
    fns = {
        "model tree": lambda: ModelDrafter(d, TreeConfig(2, 2)),
        "model tree wider than top-k": lambda: ModelDrafter(d, TreeConfig(2, 4)),
        # the draft proposes from tokens {0, 2, 4} only: p's mass on 1, 3, 5 must come from the
        # residual
        "model tree, vocabulary subset": lambda: ModelDrafter(d, TreeConfig(2, 2), vocab=[0, 2, 4]),
        # children only where the draft's top probability is >= 0.4: some nodes expanded, some
        # not
        "adaptive model tree": lambda: ModelDrafter(d, TreeConfig(2, 2), min_prob=0.4),
        "random q, 3 siblings": lambda: NoisyDrafter(6, TreeConfig(2, 3)),
        "prompt lookup": lambda: PromptLookupDrafter(3),
        # after the prompt's "3 4": siblings 1, 5, 0 (a delta proposal: deterministic, distinct),
        # then a level below
        "answer store": lambda: StoreDrafter(_STORE, depth=2, nodes=6, min_count=1, min_frac=0.0)}
    pv = _two_token_chi2(target, fns[kind], s, n=1200, seed=1)
    assert pv > 1e-4, pv


# confidence-driven trees: nodes get children where their path probability clears 0.2 (some do, some
# do not at this spread-out p), and a window of 1 round moves the threshold after the first round,
# before the second token
_ADAPTIVE = AdaptiveConfig(
    confidence_threshold=0.2, max_draft_length=3, max_width=3, max_nodes=8, acceptance_window=1)


def _adaptive_case(kind):
    """A 4-layer target (the feature drafter reads 3 distinct layers) and a maker of the adaptive
    drafter `kind`."""
    target = tiny_llama(n_layers=4, vocab_size=6, hidden=32, seed=5, tie=False)
    fd = FeatureDraft(target)
    torch.manual_seed(0)
    # a feature drafter far from uniform, whose trees vary through its 4-bit copies as through fp32
    # (at std 0.3 its 4-bit copies made nearly every tree 3 nodes)
    for p in fd.parameters(): torch.nn.init.normal_(p, std=1.0)
    fixed_width = AdaptiveConfig(**{**vars(_ADAPTIVE), "dynamic_width": False, "max_width": 2})
    d = slice_draft(target, 1)  # one network; each decode gets a fresh drafter around it
    return (
        target,
        {
            "slice": lambda: AdaptiveDrafter(ModelDrafter(d), _ADAPTIVE),
            "slice, fixed width": lambda: AdaptiveDrafter(ModelDrafter(d), fixed_width),
            "feature drafter": lambda: AdaptiveDrafter(fd.drafter(), _ADAPTIVE),
        }[kind])


@pytest.mark.parametrize("kind", ["slice", "slice, fixed width", "feature drafter"])
@pytest.mark.parametrize("temperature,top_k", [(1.0, 0), (0.7, 4)])
def test_adaptive_sampling_matches_target_distribution(kind, temperature, top_k):
    """Adaptive trees decide every shape from q before drawing: the emitted tokens have the target's
    distribution."""
    target, fn = _adaptive_case(kind)
    pv = _two_token_chi2(target, fn, Sampling(temperature=temperature, top_k=top_k), n=1200, seed=4)
    assert pv > 1e-4, pv


@pytest.mark.parametrize("kind", ["slice", "feature drafter"])
def test_adaptive_trees_vary(kind):
    "The chi-square cases above draw trees of several sizes, not one fixed tree."
    target, fn = _adaptive_case(kind)
    sizes = set()
    for i in range(30):
        ad = fn()
        speculate(target, ad, [2, 3, 4], 2, sampling=Sampling(1.0), seed=i, eos_token_id=-1)
        sizes |= {h["nodes"] for h in ad.history}
    assert len(sizes) >= 3, sizes


def test_sampling_check_has_power(monkeypatch):
    "The same test fails for a drafter that misreports its q, and for a broken acceptance rule."
    import flashspec.verify as fv
    # spread-out p: a real test
    target = tiny_llama(n_layers=2, vocab_size=6, hidden=32, seed=5, tie=False)
    class WrongQ(NoisyDrafter):  # draws from q but reports a uniform q
        def propose(self, *a, **k):
            d = super().propose(*a, **k); d.q = torch.full_like(d.q, 1 / d.q.shape[-1]); return d
    pv = _two_token_chi2(
        target, lambda: WrongQ(6, TreeConfig(2, 3)), Sampling(temperature=1.0), n=1200, seed=2)
    assert pv < 1e-6, pv
    # bug: after a rejection, resample from p itself
    monkeypatch.setattr(fv, "residual", lambda p, q: p)
    pv = _two_token_chi2(
        target, lambda: NoisyDrafter(6, TreeConfig(2, 3)), Sampling(temperature=1.0), n=1200, seed=3
    )
    assert pv < 1e-6, pv
