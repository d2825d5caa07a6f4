"""flashspec: lossless tree speculative decoding for Hugging Face causal LMs, with a draft cut from
the target.

The main API, importable from the top of the package (written by hand; the modules are exported from
`nbs/`): `load_target`, `slice_draft`, `load_distilled_draft`, `load_shipped_drafter` (the feature
drafter), `generate`, `TreeConfig`, `auto_tree`, `Sampling`, the drafters (adaptive too),
`generate_batch` with `Request`, `Conversation`, `monitor`, `quantize_target` and `bench`.
"""
__version__ = "0.1.0"

from .models import load_target, encode_chat, hardware
from .draft import slice_draft, check_compatible
from .tree import TreeConfig
from .verify import Sampling
from .decode import (generate, Draft, Drafter, ModelDrafter, PromptLookupDrafter, MergedDrafter,
                     DecodeStats)
from .distill import load_distilled_draft
from .quant import quantize_target, QUANT_METHODS
from .adaptive import AdaptiveConfig, AdaptiveDrafter
from .engine import auto_tree
from .eagle import load_shipped_drafter
from .batch import generate_batch, Request, Conversation, monitor
from .bench import bench

__all__ = ["load_target", "encode_chat", "hardware", "slice_draft", "check_compatible",
           "TreeConfig", "Sampling", "generate", "Draft", "Drafter", "ModelDrafter",
           "PromptLookupDrafter", "MergedDrafter", "DecodeStats", "load_distilled_draft",
           "quantize_target", "QUANT_METHODS", "bench", "AdaptiveConfig", "AdaptiveDrafter",
           "auto_tree", "load_shipped_drafter", "generate_batch", "Request", "Conversation",
           "monitor"]
