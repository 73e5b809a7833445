"""The contextual encoders of the task models: a BiLSTM (the paper's choice) or a small Transformer.

Both map token features ``(B, T, input_dim)`` and the real lengths ``(B,)`` to ``(B, T, 2 * hidden)``, zero
at padding, so the heads above them (CRF, attention pooling, BiDAF attention flow) do not change with the
choice. ``EncoderChoice`` is the choice as a task spec stores it (``--encoder``).
"""

import math
from dataclasses import dataclass

import torch
from torch import nn

from elmo.tasks.options import ENCODER, ENCODER_HEADS, ENCODER_KINDS, ENCODER_LAYERS, EncoderKind


class BiLSTMEncoder(nn.Module):
    """``(B, T, input_dim)`` -> ``(B, T, 2 * hidden)``; packed, so the backward direction starts at each
    sentence's real last token, not at padding."""

    def __init__(self, input_dim: int, hidden: int) -> None:
        super().__init__()
        self.lstm = nn.LSTM(input_dim, hidden, batch_first=True, bidirectional=True)
        self.dim = 2 * hidden

    def forward(self, inputs: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        packed = nn.utils.rnn.pack_padded_sequence(inputs, lengths.cpu(), batch_first=True, enforce_sorted=False)
        output, _ = self.lstm(packed)
        output, _ = nn.utils.rnn.pad_packed_sequence(output, batch_first=True, total_length=inputs.shape[1])
        return output


def sinusoidal_positions(length: int, dim: int) -> torch.Tensor:
    """``(length, dim)``: Vaswani et al.'s encoding, sin on even and cos on odd dimensions. Computed for any
    length, so a passage longer than every training passage still gets positions the model has seen the
    pattern of (a learned table would have no row for it)."""
    position = torch.arange(length, dtype=torch.float32)[:, None]
    frequency = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * (-math.log(10000.0) / dim))
    table = torch.zeros(length, dim)
    table[:, 0::2] = torch.sin(position * frequency)
    table[:, 1::2] = torch.cos(position * frequency)[:, :dim // 2]
    return table


def check_transformer_width(hidden: int, heads: int) -> None:
    """ValueError when the Transformer's width ``2 * hidden`` does not split into ``heads`` heads (checked by
    ``elmo task train`` before any text is read or embedded, and by the encoder itself)."""
    if (2 * hidden) % heads:
        raise ValueError(f"the transformer's width 2 * hidden = {2 * hidden} is not divisible by {heads} heads "
                         "(--hidden, --encoder-heads)")


class TransformerEncoder(nn.Module):
    """``(B, T, input_dim)`` -> ``(B, T, 2 * hidden)``: a linear projection to ``d_model = 2 * hidden`` (the
    BiLSTM's output width), plus sinusoidal positions, then ``layers`` pre-norm self-attention blocks
    (``heads`` heads, feed-forward ``2 * d_model``, ``dropout`` inside the blocks) and a final layer norm.
    Padding is masked out of attention (``src_key_padding_mask``) and zeroed in the output, as the packed
    BiLSTM leaves it. Pre-norm trains without a learning-rate warm-up, which the task training (plain Adam)
    does not have."""

    def __init__(self, input_dim: int, hidden: int, layers: int = 2, heads: int = 4, dropout: float = 0.1) -> None:
        super().__init__()
        check_transformer_width(hidden, heads)
        self.dim = 2 * hidden
        self.projection = nn.Linear(input_dim, self.dim)
        block = nn.TransformerEncoderLayer(self.dim, heads, 2 * self.dim, dropout, batch_first=True, norm_first=True)
        # enable_nested_tensor: the nested fast path does not apply to pre-norm blocks; saying so keeps torch quiet.
        self.blocks = nn.TransformerEncoder(block, layers, norm=nn.LayerNorm(self.dim), enable_nested_tensor=False)

    def forward(self, inputs: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        time = inputs.shape[1]
        mask = torch.arange(time, device=inputs.device)[None, :] < lengths.to(inputs.device)[:, None]
        hidden = self.projection(inputs) + sinusoidal_positions(time, self.dim).to(inputs.device)
        output = self.blocks(hidden, src_key_padding_mask=~mask)
        return output.masked_fill(~mask[:, :, None], 0.0)


@dataclass(frozen=True)
class EncoderChoice:
    """Which encoder a task model uses (``kind``) and, for the Transformer, its ``layers`` and ``heads``."""

    kind: EncoderKind = ENCODER
    layers: int = ENCODER_LAYERS
    heads: int = ENCODER_HEADS

    def __post_init__(self) -> None:
        if self.kind not in ENCODER_KINDS:
            raise ValueError(f"encoder is {self.kind!r}; expected one of {', '.join(ENCODER_KINDS)}")

    def build(self, input_dim: int, hidden: int) -> BiLSTMEncoder | TransformerEncoder:
        """An encoder from ``input_dim`` features to ``2 * hidden``."""
        if self.kind == "transformer":
            return TransformerEncoder(input_dim, hidden, self.layers, self.heads)
        return BiLSTMEncoder(input_dim, hidden)


BILSTM = EncoderChoice()  # the task models' default: the paper's BiLSTM
