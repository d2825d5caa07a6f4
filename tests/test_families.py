"""Every model family flashspec supports, tiny and random: both draft designs build on it and
greedy speculative decoding gives the target's own output, alone and in a batch; the feature
drafter exports in the EAGLE-3 layout where the target's norm has a weight."""
import json
import pytest
import torch
import transformers as T

from flashspec.target import SUPPORTED_MODEL_TYPES
from flashspec.drafters.slice import slice_draft
from flashspec.drafters.feature import FeatureDraft
from flashspec.train.export import export_eagle3
from flashspec.decode.loop import speculate
from flashspec.tree import TreeConfig
from flashspec.decode.batch import Request, generate_batch
from flashspec.engine import NATIVE_TYPES
from flashspec.decode.fused import generate_fused

CONFIGS = dict(
    llama=T.LlamaConfig, mistral=T.MistralConfig, qwen2=T.Qwen2Config, qwen3=T.Qwen3Config,
    olmo=T.OlmoConfig, olmo2=T.Olmo2Config, granite=T.GraniteConfig)


def tiny(family, **kw):
    """A tiny random causal LM of `family` (4 layers, 128 tokens); Mistral without its default
    4,096-token sliding window (which is refused) unless `kw` gives one."""
    if family == "mistral": kw = {"sliding_window": None, **kw}
    cfg = CONFIGS[family](
        vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=4,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
        head_dim=16, bos_token_id=0, eos_token_id=1, pad_token_id=0, **kw)
    torch.manual_seed(0)
    m = T.AutoModelForCausalLM.from_config(cfg).eval()
    m.requires_grad_(False)
    return m


def test_every_supported_family_is_tested():
    assert set(CONFIGS) == set(SUPPORTED_MODEL_TYPES)


@pytest.mark.parametrize("family", sorted(CONFIGS))
def test_both_designs_are_lossless(family):
    m = tiny(family)
    fd = FeatureDraft(m)
    # the drafter's own layer is a Llama layer, whatever the target's family
    assert (fd.config.model_type, fd.config.num_hidden_layers) == ("llama", 1)
    ids = torch.randint(2, 128, (12,), generator=torch.Generator().manual_seed(1)).tolist()
    plain = speculate(m, None, ids, 16, eos_token_id=-1)[0]
    for draft in (fd, slice_draft(m, 1)):
        assert speculate(m, draft, ids, 16, eos_token_id=-1, tree=TreeConfig(3, 2))[0] == plain


@pytest.mark.parametrize("family", sorted(CONFIGS))
def test_the_fused_round_is_lossless_or_refused(family):
    """The fused round (10b_fused) runs the native forward: on those families it gives the target's
    own output with and without a lookup chain; on the others it refuses, clearly."""
    m = tiny(family)
    fd = FeatureDraft(m)
    ids = torch.randint(2, 128, (12,), generator=torch.Generator().manual_seed(1)).tolist()
    if family not in NATIVE_TYPES:
        with pytest.raises(ValueError, match="native forward"): generate_fused(m, fd, ids, 8)
        return
    plain = speculate(m, None, ids, 16, eos_token_id=-1)[0]
    for chain in (0, 3):
        got = generate_fused(m, fd, ids, 16, tree=TreeConfig(3, 2), chain=chain, eos_token_id=-1)
        assert got[0] == plain


def test_a_sliding_window_is_refused():
    with pytest.raises(ValueError, match="sliding attention window"):
        FeatureDraft(tiny("mistral", sliding_window=8))


@pytest.mark.parametrize("family", sorted(CONFIGS))
def test_batched_requests_decode_as_alone(family):
    m = tiny(family)
    g = torch.Generator().manual_seed(2)
    prompts = [torch.randint(2, 128, (n,), generator=g).tolist() for n in (5, 9, 14)]
    alone = [speculate(m, None, p, 10, eos_token_id=-1)[0] for p in prompts]
    for draft in (FeatureDraft(m), slice_draft(m, 1)):
        got = generate_batch(
            m, draft, [Request(p, 10, eos_token_id=-1) for p in prompts], tree=TreeConfig(2, 2), node_budget=None)
        assert [r.tokens for r in got] == alone


@pytest.mark.parametrize("family", sorted(CONFIGS))
def test_export_in_the_eagle3_layout(family, tmp_path):
    # 4 layers: the default aux layers read the last output, which the layout refuses
    fd = FeatureDraft(tiny(family), layers=(1, 2, 3))
    if family == "olmo":  # a parameter-free final norm: nothing to put in `norm.weight`
        with pytest.raises(ValueError, match="cannot be exported"): export_eagle3(fd, tmp_path)
        return
    cfg = json.loads((export_eagle3(fd, tmp_path)/"config.json").read_text())
    assert (cfg["model_type"], cfg["architectures"], cfg["num_hidden_layers"]) == (
        "llama", ["LlamaForCausalLMEagle3"], 1)
    assert "layer_types" not in cfg
