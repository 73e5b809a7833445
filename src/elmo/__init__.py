"""ELMo: deep contextualized word representations from a bidirectional language model."""

from elmo.bilm import BiLM, BiLMOutput, BiLMState
from elmo.characters import batch_to_char_ids, token_to_char_ids
from elmo.config import PRESETS, BiLMConfig, CharCNNConfig, ConfigError, LSTMConfig
from elmo.embedder import Embedder
from elmo.stateful_embedder import StatefulEmbedder
from elmo.task_module import Elmo, ElmoMixes
from elmo.weights import WeightFormatError, load_bilm, save_bilm

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
