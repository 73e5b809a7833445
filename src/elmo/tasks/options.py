"""The choices of a task model and of its training, with their defaults stated once for the library and for
``elmo task train``. No PyTorch here, so that ``elmo task train --help`` shows them at once."""

from dataclasses import dataclass
from typing import Literal, get_args

EncoderKind = Literal["bilstm", "transformer"]  # the contextual encoders of elmo.tasks.encoders
ENCODER_KINDS: tuple[EncoderKind, ...] = get_args(EncoderKind)
ENCODER: EncoderKind = "bilstm"  # the paper's
ENCODER_LAYERS = 2  # a Transformer encoder's self-attention blocks
ENCODER_HEADS = 4  # and its attention heads
HIDDEN = 64  # BiLSTM cells per direction (a Transformer encoder is 2 * HIDDEN wide)
DROPOUT = 0.5  # on the token features and on the encoder's output
MIX_L2 = 1e-3  # weight of the scalar mix's pull towards even weights (the paper's 0.001)
MAX_ANSWER_TOKENS = 30  # a QA model's longest answer span, in tokens


@dataclass(frozen=True)
class TrainOptions:
    max_epochs: int = 20
    patience: int = 3
    min_epochs: int = 1  # no early stop before this: a tagger's entity F1 sits at 0 for its first epochs
    batch_size: int = 32
    learning_rate: float = 1e-3
    clip_norm: float = 5.0
    seed: int = 0
