"""ELMo: deep contextualized word representations from a bidirectional language model.

The public names load on first use (PEP 562), so ``import elmo`` and ``elmo --help`` do not import PyTorch.
"""

from typing import TYPE_CHECKING

from elmo.lazy import lazy_exports

__all__ = [
    "PRESETS",
    "BiLM",
    "BiLMConfig",
    "BiLMOutput",
    "BiLMState",
    "CharCNNConfig",
    "ConfigError",
    "Elmo",
    "ElmoMixes",
    "Embedder",
    "LSTMConfig",
    "StatefulEmbedder",
    "WeightFormatError",
    "batch_to_char_ids",
    "load_bilm",
    "save_bilm",
    "token_to_char_ids",
    "weights_changed",
]

__getattr__, __dir__ = lazy_exports(__name__, {
    "elmo.bilm": ("BiLM", "BiLMOutput", "BiLMState"),
    "elmo.characters": ("batch_to_char_ids", "token_to_char_ids"),
    "elmo.config": ("PRESETS", "BiLMConfig", "CharCNNConfig", "ConfigError", "LSTMConfig"),
    "elmo.embedder": ("Embedder",),
    "elmo.modules.weight_changes": ("weights_changed",),
    "elmo.stateful_embedder": ("StatefulEmbedder",),
    "elmo.task_module": ("Elmo", "ElmoMixes"),
    "elmo.weights": ("WeightFormatError", "load_bilm", "save_bilm"),
})

if TYPE_CHECKING:
    from elmo.bilm import BiLM, BiLMOutput, BiLMState
    from elmo.characters import batch_to_char_ids, token_to_char_ids
    from elmo.config import PRESETS, BiLMConfig, CharCNNConfig, ConfigError, LSTMConfig
    from elmo.embedder import Embedder
    from elmo.modules.weight_changes import weights_changed
    from elmo.stateful_embedder import StatefulEmbedder
    from elmo.task_module import Elmo, ElmoMixes
    from elmo.weights import WeightFormatError, load_bilm, save_bilm

