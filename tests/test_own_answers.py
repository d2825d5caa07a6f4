"""`flashspec distill --design eagle3` for a target other than the embedded one: it trains on that
target's own answers (made first, `distill-data`'s way), never on the shared file of the embedded
model's answers; answers in another chat template are refused, not trained on as nothing."""
import argparse, contextlib, io, json
import numpy as np
import pytest
import torch

from flashspec.target import tiny_llama, tiny_tokenizer, load_target, encode_chat
from flashspec.cli.distill import add_distill
from flashspec.train.answers import save_answers
from flashspec.train.features import extract_features, FeatureData
from flashspec.drafters.weights import load_draft_file
from flashspec.decode.loop import speculate
from flashspec.drafters.weights import draft_acceptance


@pytest.fixture(scope="module")
def own(tmp_path_factory):
    """A 3-layer target on disk, a pool of 6 conversations, and `flashspec distill` run on them (the
    answers in fp32, so that they can be checked against `generate`)."""
    d = tmp_path_factory.mktemp("own")
    tok = tiny_tokenizer()
    m = tiny_llama(n_layers=3, vocab_size=len(tok), seed=5)
    m.generation_config.eos_token_id = tok.eos_token_id
    m.save_pretrained(d/"m"); tok.save_pretrained(d/"m")
    pool = d/"pool.jsonl"
    convs = [dict(source=f"s{i % 2}:{i}", turns=[f"w{i} w{i + 1}", f"w{i + 7}"][:1 + i % 2])
             for i in range(6)]
    pool.write_text("\n".join(json.dumps(c) for c in convs))
    ap = argparse.ArgumentParser(); add_distill(ap.add_subparsers())
    args = ap.parse_args([
        "distill", "--target", str(d/"m"), "--prompts", str(pool), "--out", str(d/"run"),
        "--design", "eagle3", "--max-new-tokens", "6", "--batch-size", "4", "--steps", "2",
        "--train-batch-size", "2", "--warmup", "1", "--mixed-precision", "no", "--held-out", "1",
        "--data-dtype", "float32"])
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        assert args.fn(args) == 0
    return d, tok, convs, err.getvalue()


def test_trains_on_the_targets_own_answers(own):
    d, tok, convs, err = own
    assert "answers the prompt pool first" in err
    kd = np.load(d/"run"/"answers.npz")
    # every turn of every conversation, in pool line order per conversation
    assert sorted(set(kd["conv"].tolist())) == list(range(6))
    assert len(kd["conv"]) == sum(len(c["turns"]) for c in convs)
    meta = FeatureData(d/"run"/"features").meta
    assert meta["source"] == str(d/"run"/"answers.npz")
    target, _ = load_target(d/"m")
    # every row's answer is the target's own greedy continuation of its prompt
    offs = kd["offsets"]
    for r in range(len(offs) - 1):
        ids, p = kd["tokens"][offs[r]:offs[r + 1]].astype(np.int64), int(kd["n_prompt"][r])
        want = speculate(target, None, ids[:p].tolist(), len(ids) - p,
                        eos_token_id=tok.eos_token_id)[0]
        assert ids[p:].tolist() == want[:len(ids) - p]


def test_the_trained_drafter_decodes_losslessly(own):
    d, tok, _, _ = own
    target, _ = load_target(d/"m")
    draft = load_draft_file(target, d/"run"/"draft.safetensors")
    # the held-out conversation's teacher-forced table is stored for the cost model (`auto_tree`)
    P = draft_acceptance(draft)
    # ranks 1-32 (fewer where the head has fewer tokens); a position has one rank at most
    k = min(32, len(draft.vocab))
    assert len(P) == 5 and all(len(row) == k and all(0 <= x <= 1 for x in row) for row in P)
    assert all(sum(row) <= 1 + 1e-6 for row in P)
    ids = encode_chat(tok, "w3 w4")
    plain = speculate(target, None, ids, 12, eos_token_id=-1)[0]
    assert speculate(target, draft, ids, 12, eos_token_id=-1)[0] == plain


def test_answers_in_another_template_are_refused(own, tmp_path):
    d, tok, _, _ = own
    target, _ = load_target(d/"m")
    # rows with no "<|im_start|> assistant" header: answers rendered some other way
    kd = save_answers(tmp_path/"other.npz", [[5, 6, 7, 8, 9]], [2], [0], [0])
    with pytest.raises(ValueError, match="holds no answer"):
        extract_features(target, tok, kd, tmp_path/"feats", progress=False)


def test_the_drafter_records_its_template(own):
    "The weights name the chat template the answers were rendered in: the same says nothing."
    from flashspec.drafters.weights import check_template, template_hash
    d, tok, _, _ = own
    target, _ = load_target(d/"m")
    draft = load_draft_file(target, d/"run"/"draft.safetensors")
    assert draft.trained_template == template_hash(tok) != "none"
    assert check_template(tok, draft) is None
    plain = tiny_tokenizer(); plain.chat_template = None  # prompts rendered as plain text
    assert "plain text" in check_template(plain, draft)
