"""The EAGLE-3 export as vLLM and SGLang read it (neither can run here): the config through
transformers 4, which both use (vLLM pins `transformers<5`), and every tensor name through their
loaders' mapping.

What the loaders do was read in their sources (vllm-project/vllm at 00bd1493,
sgl-project/sglang at 03d5a777; see the notes at `VLLM_PARAMS` and `SGLANG_PARAMS`). The
transformers-4 check needs an interpreter with `transformers<5` (config only, no torch): the one in
$FLASHSPEC_TF4_PYTHON, else /tmp/tf4venv/bin/python (`python3 -m venv /tmp/tf4venv &&
/tmp/tf4venv/bin/pip install "transformers<5"`); without one it is skipped."""
import json
import os
import subprocess
from pathlib import Path

import pytest
import torch

from flashspec.drafters.feature import FeatureDraft
from flashspec.target import tiny_llama
from flashspec.train.export import export_eagle3

# vllm/model_executor/models/llama_eagle3.py: Eagle3LlamaForCausalLM.load_weights skips "t2d",
# renames "d2t" to "draft_id_to_target_id", keeps "lm_head*" and prefixes every other name with
# "model."; LlamaModel.load_weights then replaces "midlayer." with "layers.0." and stacks
# q/k/v_proj into qkv_proj, gate/up_proj into gate_up_proj. Its parameters (embed_tokens is
# skipped when absent: it is the target's):
VLLM_PARAMS = {
    "draft_id_to_target_id", "lm_head.weight", "model.fc.weight", "model.norm.weight",
    "model.layers.0.input_layernorm.weight", "model.layers.0.hidden_norm.weight",
    "model.layers.0.post_attention_layernorm.weight", "model.layers.0.self_attn.qkv_proj.weight",
    "model.layers.0.self_attn.o_proj.weight", "model.layers.0.mlp.gate_up_proj.weight",
    "model.layers.0.mlp.down_proj.weight"}
# python/sglang/srt/models/llama_eagle3.py: LlamaForCausalLMEagle3.load_weights reads "d2t" as
# hot_token_id = d2t + arange, skips "t2d", stacks q/k/v and gate/up like vLLM, and loads a name
# (or "model." + it) only if it is a parameter: anything else is dropped silently. LlamaModel
# holds fc, midlayer (a decoder layer with hidden_norm) and norm; lm_head is top-level.
SGLANG_PARAMS = {
    "lm_head.weight", "model.fc.weight", "model.norm.weight",
    "model.midlayer.input_layernorm.weight", "model.midlayer.hidden_norm.weight",
    "model.midlayer.post_attention_layernorm.weight", "model.midlayer.self_attn.qkv_proj.weight",
    "model.midlayer.self_attn.o_proj.weight", "model.midlayer.mlp.gate_up_proj.weight",
    "model.midlayer.mlp.down_proj.weight"}
STACKED = ((".q_proj", ".qkv_proj"), (".k_proj", ".qkv_proj"), (".v_proj", ".qkv_proj"),
           (".gate_proj", ".gate_up_proj"), (".up_proj", ".gate_up_proj"))


def _stack(name):
    for shard, param in STACKED:
        if shard in name: return name.replace(shard, param)
    return name


def vllm_name(name):
    "The parameter vLLM's Eagle3LlamaForCausalLM loads `name` into (None: skipped)."
    if "t2d" in name: return None
    if "d2t" in name: return name.replace("d2t", "draft_id_to_target_id")
    if "lm_head" not in name: name = "model." + name
    return _stack(name.replace("midlayer.", "layers.0."))


def sglang_name(name):
    "The parameter SGLang's LlamaForCausalLMEagle3 loads `name` into (None: read or skipped)."
    if "d2t" in name or "t2d" in name: return None
    name = _stack(name)
    return name if name in SGLANG_PARAMS else f"model.{name}"


def tf4_python():
    p = os.environ.get("FLASHSPEC_TF4_PYTHON") or "/tmp/tf4venv/bin/python"
    if not Path(p).exists(): return None
    check = "import transformers as t; assert t.__version__.startswith('4.')"
    ok = subprocess.run([p, "-c", check], capture_output=True)
    return p if ok.returncode == 0 else None


def tf4_config(folder):
    "The exported config as transformers 4's AutoConfig reads it, as a dict."
    p = tf4_python()
    if p is None:
        pytest.skip(
            "no transformers-4 interpreter ($FLASHSPEC_TF4_PYTHON or /tmp/tf4venv/bin/python)")
    code = ("import json, sys; from transformers import AutoConfig; "
            "c = AutoConfig.from_pretrained(sys.argv[1]); g = lambda k: getattr(c, k, None); "
            "print(json.dumps(dict(v=__import__('transformers').__version__,"
            " rope_theta=g('rope_theta'), rope_scaling=g('rope_scaling'),"
            " aux=g('eagle_aux_hidden_state_layer_ids'), eagle_config=g('eagle_config'),"
            " arch=g('architectures'), vd=g('draft_vocab_size'), thd=g('target_hidden_size'))))")
    out = subprocess.run([p, "-c", code, str(folder)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


# Aux layer ids. vLLM (vllm/v1/worker/gpu_model_runner.py, _get_eagle3_aux_layers_from_config)
# takes the draft config's top-level eagle_aux_hidden_state_layer_ids first (eagle_config's only
# where those are absent), and its target (vllm/model_executor/models/llama.py, LlamaModel.forward)
# appends hidden_states + residual before layer idx for idx in those ids: id i = Hugging Face's
# hidden_states[i]. SGLang (python/sglang/srt/model_executor/model_runner.py) reads only
# eagle_config["eagle_aux_hidden_state_layer_ids"], and python/sglang/srt/models/llama.py
# (set_eagle3_layers_to_capture) captures before layer id + 1 ("we plus 1 here"): id i =
# hidden_states[i + 1]. Neither captures the last layer's output.
def test_transformers4_reads_the_rope_base_and_aux_layers(tmp_path):
    # SmolLM2's RoPE base; 8 layers: the default aux layers (2, 4, 5) are inside the stack
    fd = FeatureDraft(tiny_llama(n_layers=8, rope_theta=100000.0), vocab=torch.arange(3, 128, 3))
    c = tf4_config(export_eagle3(fd, tmp_path))
    assert c["v"].startswith("4.")
    assert c["rope_theta"] == 100000.0 and c["rope_scaling"] is None
    assert (c["arch"], c["vd"], c["thd"]) == (["LlamaForCausalLMEagle3"], 42, 64)
    assert c["aux"] == list(fd.layers) == [2, 4, 5]  # vLLM: the hidden-state indices
    # SGLang: one less (it captures the input of layer id + 1)
    assert [i + 1 for i in c["eagle_config"]["eagle_aux_hidden_state_layer_ids"]] == [2, 4, 5]


def test_transformers4_reads_llama3_rope_scaling(tmp_path):
    scaling = dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                   original_max_position_embeddings=2048)
    fd = FeatureDraft(tiny_llama(n_layers=8, rope_theta=500000.0, rope_scaling=dict(scaling)))
    c = tf4_config(export_eagle3(fd, tmp_path))
    assert c["rope_theta"] == 500000.0
    assert {k: c["rope_scaling"][k] for k in scaling} == scaling


def test_no_local_path_in_the_config(tmp_path):
    # a target loaded from disk: its config's _name_or_path is that folder
    tiny_llama(n_layers=8).save_pretrained(tmp_path/"target")
    from transformers import AutoModelForCausalLM
    target = AutoModelForCausalLM.from_pretrained(tmp_path/"target")
    assert str(tmp_path) in target.config._name_or_path
    text = (export_eagle3(FeatureDraft(target), tmp_path/"out")/"config.json").read_text()
    assert str(tmp_path) not in text and "_name_or_path" not in text


def test_every_tensor_name_maps_in_vllm_and_sglang(tmp_path):
    fd = FeatureDraft(tiny_llama(n_layers=8), vocab=torch.arange(3, 128, 3))
    from safetensors import safe_open
    with safe_open(str(export_eagle3(fd, tmp_path)/"model.safetensors"), "pt") as f:
        names = set(f.keys())
    vllm = {n: vllm_name(n) for n in names}
    assert {p for p in vllm.values() if p} == VLLM_PARAMS, vllm  # every parameter filled
    sglang = {n: sglang_name(n) for n in names}
    assert {p for p in sglang.values() if p} == SGLANG_PARAMS, sglang
    assert "d2t" in names and "t2d" in names  # read (d2t) or skipped (t2d) by name


def test_one_weights_file_beside_the_manifest(tmp_path):
    # vLLM and SGLang load every *.safetensors (or *.bin) of the folder: flashspec's manifest of
    # what it wrote (EXPORT_MANIFEST, json) is beside the one weights file, not another
    from flashspec.train.export import EXPORT_MANIFEST
    fd = FeatureDraft(tiny_llama(n_layers=8), vocab=torch.arange(3, 128, 3))
    folder = export_eagle3(fd, tmp_path/"out")
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        ["config.json", "model.safetensors", EXPORT_MANIFEST])
    assert EXPORT_MANIFEST.endswith(".json")
