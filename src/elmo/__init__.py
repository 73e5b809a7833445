"""ELMo: deep contextualized word representations from a bidirectional language model.

The public names load on first use (PEP 562), so ``import elmo`` and ``elmo --help`` do not import PyTorch.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

_HOMES = {
    "BiLM": "elmo.bilm", "BiLMOutput": "elmo.bilm", "BiLMState": "elmo.bilm",
    "batch_to_char_ids": "elmo.characters", "token_to_char_ids": "elmo.characters",
    "PRESETS": "elmo.config", "BiLMConfig": "elmo.config", "CharCNNConfig": "elmo.config",
    "ConfigError": "elmo.config", "LSTMConfig": "elmo.config",
    "Embedder": "elmo.embedder",
    "StatefulEmbedder": "elmo.stateful_embedder",
    "Elmo": "elmo.task_module", "ElmoMixes": "elmo.task_module",
    "WeightFormatError": "elmo.weights", "load_bilm": "elmo.weights", "save_bilm": "elmo.weights",
}
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
]

if TYPE_CHECKING:
    from elmo.bilm import BiLM, BiLMOutput, BiLMState
    from elmo.characters import batch_to_char_ids, token_to_char_ids
    from elmo.config import PRESETS, BiLMConfig, CharCNNConfig, ConfigError, LSTMConfig
    from elmo.embedder import Embedder
    from elmo.stateful_embedder import StatefulEmbedder
    from elmo.task_module import Elmo, ElmoMixes
    from elmo.weights import WeightFormatError, load_bilm, save_bilm


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'elmo' has no attribute {name!r}")
    value = getattr(import_module(_HOMES[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
