"""flashspec: lossless tree speculative decoding for Hugging Face causal LMs, with a draft cut from the
target or trained on its own features.

The main API, importable from the top of the package (written by hand; the modules are exported from
`nbs/`): `load_target`, `load_shipped_drafter` (the feature drafter), `slice_draft`,
`load_distilled_draft`, `generate` (the measured fast path by default), `speculate` (the loop with a ready
drafter), `TreeConfig`, `auto_tree`, `Sampling`, the drafters (adaptive too), `generate_batch` with
`Request`, `Conversation`, `monitor`, `quantize_target` and `bench`. How the code is laid out:
`nbs/index.ipynb`, *Where to start reading*.
"""
__version__ = "0.1.0"

from .target import load_target, encode_chat
from .util import hardware
from .tree import TreeConfig
from .verify import Sampling
from .quant import quantize_target, QUANT_METHODS
from .drafters.base import Draft, Drafter
from .drafters.slice import slice_draft, check_compatible, ModelDrafter
from .drafters.lookup import PromptLookupDrafter
from .drafters.merged import MergedDrafter
from .drafters.adaptive import AdaptiveConfig, AdaptiveDrafter
from .drafters.weights import load_distilled_draft, load_shipped_drafter
from .decode.loop import speculate, DecodeStats
from .decode.batch import generate_batch, Request, Conversation
from .decode.monitor import monitor
from .tune import auto_tree
from .api import generate
from .bench import bench

__all__ = ["load_target", "encode_chat", "hardware", "slice_draft", "check_compatible",
           "TreeConfig", "Sampling", "generate", "speculate", "Draft", "Drafter", "ModelDrafter",
           "PromptLookupDrafter", "MergedDrafter", "DecodeStats", "load_distilled_draft",
           "quantize_target", "QUANT_METHODS", "bench", "AdaptiveConfig", "AdaptiveDrafter",
           "auto_tree", "load_shipped_drafter", "generate_batch", "Request", "Conversation",
           "monitor"]
