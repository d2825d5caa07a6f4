"""Fuzzing the public entry points (`Sampling`, `speculate`, `flashspec.generate`, `generate_batch`)
with random prompts (ids, lengths, ways of passing them), `max_new_tokens`, trees, sampling
settings, seeds, EOS sets, batch mixes and admission settings, bad ones among them (NaN, negative,
wrong types).

Properties: an argument that is bad is refused with a `ValueError` with a message, one that is good
is not refused; nothing raises anything else; nothing hangs (an alarm per example); greedy output is
the target's own greedy output (Hugging Face's `generate`, as `test_lossless.py`), cut after EOS;
in a batch a bad request fails alone and the others decode as if alone. Short settings by default;
`pytest --slow` runs many more examples."""
import contextlib
import math
import signal

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings, strategies as st

from flashspec.api import generate
from flashspec.decode.batch import Request, generate_batch
from flashspec.decode.loop import speculate
from flashspec.drafters.slice import ModelDrafter, slice_draft
from flashspec.target import tiny_llama
from flashspec.tree import TreeConfig
from flashspec.verify import Sampling, probs

from test_lossless import closed_paths  # random index paths closed into a valid tree

V = 96  # the tiny target's vocabulary
TARGET = tiny_llama(n_layers=2, vocab_size=V, seed=5)
DRAFT = slice_draft(TARGET, 1)
CONFIG_EOS = {TARGET.generation_config.eos_token_id}  # what eos_token_id=None stands for
MAX_NEW = 12
ALARM_S = 60  # per example: far above what one takes; reached only by a hang


@pytest.fixture(autouse=True)
def one_thread():
    """One thread while these run (the C kernel's threads wait on each other on a busy 2-core
    machine, 3-6x slower there); the count the session had after."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@contextlib.contextmanager
def time_limit(seconds:float=ALARM_S):
    "Fail (TimeoutError) rather than hang, where the platform has SIGALRM."
    if not hasattr(signal, "SIGALRM"):
        yield
        return
    def hung(*_): raise TimeoutError(f"no answer in {seconds} s: a hang")
    old = signal.signal(signal.SIGALRM, hung)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try: yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


_REF = {}


def reference(prompt:list, n:int, eos:set) -> list:
    "The target's own greedy continuation of `prompt`: `n` tokens, cut right after an EOS id."
    key = tuple(prompt)
    if key not in _REF:  # greedy's first n tokens are a prefix of its first MAX_NEW
        ids = torch.tensor([prompt])  # (a mask of ones: id 0, the pad id, is a token here too)
        out = TARGET.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=MAX_NEW,
                              do_sample=False, eos_token_id=None, pad_token_id=0)
        _REF[key] = out[0, len(prompt):].tolist()
    ref = _REF[key][:n]
    hit = next((i for i, x in enumerate(ref) if x in eos), None)
    return ref if hit is None else ref[:hit + 1]


def refused(f):
    "`(f(), None)`, or `(None, the ValueError)` where f refuses; any other exception propagates."
    with time_limit():
        try: return f(), None
        except ValueError as e:
            assert str(e).strip(), "a ValueError without a message"
            return None, e


# --- arguments, each drawn as `(good, value, canonical)`: canonical is what a good one means
def good(strategy, canon=lambda x: x):
    "Good values of `strategy`, tagged."
    return strategy.map(lambda x: (True, x, canon(x)))


def bad(*values):
    "Bad values, tagged."
    return st.sampled_from(values).map(lambda x: (False, x, None))


ids_list = st.lists(st.integers(0, V - 1), min_size=1, max_size=10)
# the same ids passed as a list, a tuple, a (1, L) row, tensors and arrays of any integer dtype
PASSED = {
    "list": list, "tuple": tuple, "row": lambda l: [l],
    "int64": lambda l: torch.tensor(l), "int32": lambda l: torch.tensor(l, dtype=torch.int32),
    "int8": lambda l: torch.tensor(l, dtype=torch.int8),
    "uint8": lambda l: torch.tensor(l, dtype=torch.uint8),
    "row tensor": lambda l: torch.tensor([l]), "numpy": lambda l: np.array(l),
    "numpy uint16": lambda l: np.array(l, dtype=np.uint16)}
prompt_st = st.one_of(
    st.tuples(ids_list, st.sampled_from(sorted(PASSED))).map(
        lambda a: (True, PASSED[a[1]](a[0]), a[0])),
    bad([], [[]], [[1, 2], [3, 4]], [[1, 2], [3]], [1, V], [3, -1], [2.0, 3.0], [True, False],
        "abc", None, 7, [10**30], [1, None], torch.tensor([1, 2], dtype=torch.uint8)[:0],
        torch.tensor([1.0, 2.0]), np.array([3, V + 5], dtype=np.int16)))
max_new_st = st.one_of(
    good(st.integers(1, MAX_NEW)),
    good(st.integers(1, MAX_NEW).map(np.int64), int),
    bad(0, -3, 2.5, None, True, "4", float("nan"), [4], torch.tensor([4, 5])))
temperature_st = st.one_of(
    st.just(0.0), st.floats(1e-45, 4.0), st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-2, 3), st.booleans(), st.none(), st.text(max_size=2), st.just(np.float32(0.7)))
top_k_st = st.one_of(st.integers(-2, V + 10), st.floats(-1, 5), st.booleans(), st.none(),
                     st.just(np.int64(3)), st.just("3"))
top_p_st = st.one_of(st.floats(0, 1), st.floats(allow_nan=True, allow_infinity=True),
                     st.integers(-1, 2), st.none(), st.just("1"))


def make_sampling(t, k, p):
    "`(good, Sampling or None, the ValueError or None)` of these raw settings."
    s, e = refused(lambda: Sampling(t, k, p))
    return s is not None, s, e


# good settings (tiny temperatures, top-p and top-k at their edges, numpy's numbers among them); bad
# ones are refused when a Sampling is made (`test_sampling_made`), so here bad is not a Sampling
sampling_st = st.one_of(
    good(st.just(Sampling())), good(st.none()),  # None: greedy
    good(st.builds(
        Sampling, st.floats(1e-45, 4.0) | st.integers(0, 3) | st.just(np.float32(0.7)),
        st.integers(0, V + 10) | st.just(np.int64(3)),
        st.floats(0, 1, exclude_min=True) | st.just(1))),
    bad({}, "greedy", 0.7, (0.7, 0, 1.0)))
seed_st = st.one_of(
    good(st.none() | st.integers(-2**63, 2**64 - 1)), good(st.integers(0, 99).map(np.int32), int),
    bad("x", 1.5, 2**64, -2**63 - 1, True, [1]))
eos_st = st.one_of(
    good(st.none(), lambda _: CONFIG_EOS),
    good(st.integers(-3, V - 1), lambda x: {x}),
    good(st.lists(st.integers(0, V - 1), max_size=3), set),
    good(st.frozensets(st.integers(0, V - 1), max_size=3), set),
    st.lists(st.integers(0, V - 1), min_size=1, max_size=3).map(
        lambda l: (True, torch.tensor(l), set(l))),  # a 1D tensor of ids
    bad(2.5, "2", [1, None], True, [True], {1: 2}, [[1, 2]], float("nan")))


tree_st = st.one_of(
    good(st.none()),
    good(st.builds(TreeConfig, st.integers(0, 4), st.integers(1, 3))),
    good(st.lists(st.lists(st.integers(0, 2), min_size=1, max_size=3), min_size=1, max_size=6)
         .map(lambda raw: TreeConfig(paths=closed_paths(raw)))),
    bad([(0,)], "4x3", (4, 3), 5))


# --- Sampling and its distribution alone (cheap: many examples)
def check_sampling_made(t, k, p):
    "Made, a Sampling's settings are finite Python numbers in range; else a ValueError says why."
    ok, s, e = make_sampling(t, k, p)
    if not ok:
        assert isinstance(e, ValueError)
        return
    assert type(s.temperature) is float and math.isfinite(s.temperature) and s.temperature >= 0
    assert type(s.top_k) is int and s.top_k >= 0
    assert type(s.top_p) is float and 0 < s.top_p <= 1
    assert s == Sampling(s.temperature, s.top_k, s.top_p)  # made again from its own settings


logits_st = st.lists(st.floats(-1e4, 1e4), min_size=1, max_size=12)


def check_probs(t, k, p, logits):
    "Any sampled setting's distribution is one: finite, non-negative, summing to 1."
    ok, s, _ = make_sampling(t, k, p)
    if not ok or s.greedy: return
    q = probs(torch.tensor(logits), s)
    assert torch.isfinite(q).all() and (q >= 0).all(), (s, logits, q)
    assert abs(float(q.sum()) - 1) < 1e-4, (s, logits, q)


_cheap = dict(deadline=None, suppress_health_check=[  # (`one_thread`: once a test, as meant)
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
test_sampling_made = settings(max_examples=300, **_cheap)(
    given(temperature_st, top_k_st, top_p_st)(check_sampling_made))
test_probs = settings(max_examples=150, **_cheap)(
    given(temperature_st, top_k_st, top_p_st, logits_st)(check_probs))


# --- one request: `speculate` with a model drafter, or `generate` with the draft network
def check_one(how, prompt, max_new, sampling, seed, eos, tree):
    "Refused exactly when an argument is bad (ValueError); else the target's own greedy output."
    args = (prompt, max_new, sampling, seed, eos, tree)
    all_good = all(a[0] for a in args)
    kw = dict(input_ids=prompt[1], max_new_tokens=max_new[1], sampling=sampling[1], seed=seed[1],
              eos_token_id=eos[1], tree=tree[1])
    if how == "speculate": f = lambda: speculate(TARGET, DRAFT, **kw)
    elif how == "generate": f = lambda: generate(TARGET, DRAFT, **kw)
    else: f = lambda: speculate(TARGET, None, **kw)  # plain decoding
    got, err = refused(f)
    assert (err is None) == all_good, (err, [a[:2] for a in args])
    if err is not None: return
    out, stats = got
    n, s, e = max_new[2], sampling[1] or Sampling(), eos[2]
    assert 1 <= len(out) <= n and stats.new_tokens == len(out)
    assert all(0 <= x < V for x in out)
    # EOS ends the output: none before its last token, and one there if it stopped short
    assert not set(out[:-1]) & e and (len(out) == n or out[-1] in e)
    if s.greedy: assert out == reference(prompt[2], n, e)


_decode = dict(deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture])
_one = (st.sampled_from(["speculate", "generate", "plain"]), prompt_st, max_new_st, sampling_st,
        seed_st, eos_st, tree_st)
test_one_request = settings(max_examples=20, **_decode)(given(*_one)(check_one))
test_one_request_long = pytest.mark.slow(
    settings(max_examples=400, **_decode)(given(*_one)(check_one)))


# --- a batch: bad requests fail alone, the others decode as if alone
request_st = st.one_of(
    st.tuples(prompt_st, max_new_st, sampling_st, seed_st, eos_st, tree_st),
    st.sampled_from([7, None, 3.5, "abc"]))  # not a Request nor a prompt: refused as its prompt


# `category_acceptance`: {category: expected per-step acceptance}, each a finite number in [0, 1]
cats_st = st.one_of(
    good(st.none()),
    good(st.dictionaries(st.sampled_from(["all", "a"]) | st.text(max_size=3),
                         st.floats(0, 1) | st.integers(0, 1) | st.just(np.float32(0.5)),
                         max_size=3)),
    bad({"all": "high"}, [0.5], {"all": math.nan}, {"all": 1.5}, {"all": -0.1}, {"all": math.inf},
        {"all": True}, {"all": None}, {3: 0.5}, "0.6", 0.6))


def check_batch(reqs, batch_size, budget, cats, admission):
    """Every bad request gets its own error, every good one its tokens (greedy: the target's own);
    a bad `category_acceptance` is refused (ValueError) before any request decodes; nothing else
    raises."""
    requests = [Request(*(a[1] for a in r[:4]), eos_token_id=r[4][1], tree=r[5][1])
                if isinstance(r, tuple) else r for r in reqs]
    res, err = refused(lambda: generate_batch(
        TARGET, DRAFT, requests, batch_size=batch_size, node_budget=budget, admission=admission,
        category_acceptance=cats[1]))
    if not cats[0]:
        assert err is not None and "category_acceptance" in str(err), (err, cats[1])
        return
    assert err is None, err
    assert len(res) == len(requests)
    for r, x in zip(reqs, res):
        all_good = isinstance(r, tuple) and all(a[0] for a in r)
        assert (x.error is None) == all_good, (x.error, r if not isinstance(r, tuple)
                                               else [a[:2] for a in r])
        if not all_good:
            assert x.error.strip() and x.tokens == [] and x.stats is None
            continue
        n, s, e = r[1][2], r[2][1] or Sampling(), r[4][2]
        assert 1 <= len(x.tokens) <= n and not set(x.tokens[:-1]) & e
        assert len(x.tokens) == n or x.tokens[-1] in e
        if s.greedy: assert x.tokens == reference(r[0][2], n, e)


_batch = (st.lists(request_st, min_size=1, max_size=5), st.integers(1, 3),
          st.none() | st.integers(0, 8), cats_st, st.sampled_from(["order", "acceptance"]))
test_batch = settings(max_examples=8, **_decode)(given(*_batch)(check_batch))
test_batch_long = pytest.mark.slow(
    settings(max_examples=150, **_decode)(given(*_batch)(check_batch)))


_GOOD_REQUEST = ((True, [3, 4, 5], [3, 4, 5]), (True, 4, 4), (True, None, None), (True, None, None),
                 (True, [], set()), (True, None, None))


@pytest.mark.parametrize("cats", [{"all": "high"}, [0.5], {"all": math.nan}])
def test_batch_bad_category_acceptance(cats):
    """The three a review found (a `TypeError` and an `AttributeError` mid-batch, a NaN taken):
    refused before any request decodes, in a batch where admission reads them."""
    check_batch([_GOOD_REQUEST] * 4, 2, None, (False, cats, None), "acceptance")
