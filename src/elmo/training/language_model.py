"""The biLM with its language-model heads, as bilm-tf trains it.

Each direction reads its own packed stream (rows of ``unroll_steps`` tokens that already hold ``<S>``
and ``</S>``), starting from the state the previous batch left. Dropout (training only) hits the input
of every LSTM layer, the skip connection included (bilm-tf wraps each cell in a DropoutWrapper around a
ResidualWrapper), and the top layer's output before the softmax. Both directions share one softmax
``(vocab_size, projection_dim)`` and its bias; the loss is the mean of the two directions' mean
per-token negative log-likelihoods.

All randomness of a step (negatives, dropout masks) comes from generators seeded by ``(seed, step)``
and drawn for the whole global batch, each process slicing its rows: so the step is the same whether
one process computes it or several, and a resumed run draws what the uninterrupted one drew.
"""

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from elmo.bilm import BiLM, BiLMState
from elmo.config import BiLMConfig
from elmo.modules.bidirectional import run_directions
from elmo.training.batches import NO_TARGET, ModelInputs
from elmo.training.softmax import (
    Candidates,
    SampledSoftmaxNll,
    full_softmax_nll,
    sample_log_uniform,
    sampled_softmax_nll,
)

_NEGATIVES_STREAM = 0
_DROPOUT_STREAM = 1
_RESET_STREAM = 2


def step_generator(seed: int, step: int, *stream: int) -> torch.Generator:
    """A generator for one purpose of one step, the same in every process."""
    words = np.random.SeedSequence([seed, step, *stream]).generate_state(2, dtype=np.uint32)
    return torch.Generator().manual_seed(int(words[0]) << 32 | int(words[1]))


@dataclass(frozen=True)
class StepNoise:
    """The randomness of one training step: this process owns global rows ``rows`` of ``n_rows``."""

    seed: int
    step: int
    dropout: float
    candidates: Candidates
    rows: range
    n_rows: int
    state_reset: float = 0.0

    @classmethod
    def draw(cls, seed: int, step: int, dropout: float, n_negatives: int, vocab_size: int, rows: range,
             n_rows: int, state_reset: float = 0.0) -> "StepNoise":
        generator = step_generator(seed, step, _NEGATIVES_STREAM)
        return cls(seed, step, dropout, sample_log_uniform(n_negatives, vocab_size, generator), rows, n_rows,
                   state_reset)

    def reset_rows(self, state: BiLMState) -> BiLMState:
        """``state`` with each row zeroed with probability ``state_reset`` (the same rows in every process).

        bilm-tf carries every row's state forever, so a model sees a zero state only at its first step, yet
        the embedder starts every sentence from zero: without resets a short run can learn dynamics that go
        wrong from zero (seen: a backward LM stuck on one rare word from a zero start).
        """
        if self.state_reset == 0.0:
            return state
        uniform = torch.rand(self.n_rows, generator=step_generator(self.seed, self.step, _RESET_STREAM))
        keep = (uniform[self.rows.start : self.rows.stop] >= self.state_reset).to(state.h.dtype)
        keep = keep.to(state.h.device)[None, None, :, None]
        return BiLMState(state.h * keep, state.c * keep)

    def apply_dropout(self, direction: int, layer: int, packed: torch.Tensor) -> torch.Tensor:
        """Dropout on a packed ``(steps * rows, dim)`` tensor with this process's slice of the global mask."""
        if self.dropout == 0.0:
            return packed
        n_steps = packed.shape[0] // len(self.rows)
        generator = step_generator(self.seed, self.step, _DROPOUT_STREAM, direction, layer)
        uniform = torch.rand((n_steps, self.n_rows, packed.shape[1]), generator=generator)
        keep = uniform[:, self.rows.start : self.rows.stop] >= self.dropout
        keep = keep.reshape(packed.shape).to(device=packed.device, dtype=packed.dtype)
        return packed * keep / (1.0 - self.dropout)


@dataclass
class LmOutput:
    """``nll_sums``: ``(2,)`` summed forward and backward negative log-likelihoods over ``n_targets``
    positions each; ``state``: where each row stopped, detached."""

    nll_sums: torch.Tensor
    n_targets: int
    state: BiLMState

    @property
    def loss(self) -> torch.Tensor:
        """The mean over both directions of the mean per-token loss."""
        return self.nll_sums.mean() / self.n_targets


class LanguageModel(nn.Module):
    """``bilm`` (token encoder + both LSTM stacks, the part that is exported) and the shared softmax."""

    def __init__(self, config: BiLMConfig, vocab_size: int) -> None:
        super().__init__()
        self.config = config
        self.bilm = BiLM(config)
        self.softmax_weight = nn.Parameter(torch.empty(vocab_size, config.lstm.projection_dim))
        self.softmax_bias = nn.Parameter(torch.zeros(vocab_size))
        nn.init.normal_(self.softmax_weight, 0.0, 1.0 / math.sqrt(config.lstm.projection_dim))
        self.reference_kernels = False
        self.product_dtype: torch.dtype | None = None  # the training kernels' products' (modules/low_precision.py)

    @property
    def vocab_size(self) -> int:
        return self.softmax_weight.shape[0]

    def forward(self, inputs: ModelInputs, state: BiLMState, noise: StepNoise | None = None) -> LmOutput:
        """One batch from ``state``; ``noise`` None means evaluation: full softmax, no dropout.

        Training runs the training kernels (``modules/bidirectional.py`` picks the paired LSTM layers, and the
        sampled softmax runs ``SampledSoftmaxNll``) unless ``reference_kernels`` is set: then autograd runs through
        each direction's step loop and ``sampled_softmax_nll``, the statement of the equations that the kernels are
        tested against. ``product_dtype`` (None, or bfloat16: ``modules/low_precision.py``) is the type the training
        kernels' matrix products run in; evaluation and the reference kernels run in the model's own.
        """
        n_rows, n_steps = inputs.forward_tokens.shape
        if noise is not None and bool((inputs.forward_targets == NO_TARGET).any()):
            raise ValueError("a training step needs full rows: these inputs hold padding targets (a Batcher made "
                             "with pad=True, for evaluation); the sampled softmax would score them as words")
        token_vectors = self.bilm.token_encoder(inputs.char_ids)
        # Time-major packing of full rows, one stream per direction: step t of row r sits at t * n_rows + r.
        positions = torch.stack([inputs.forward_tokens.T.reshape(-1), inputs.backward_tokens.T.reshape(-1)])
        targets = torch.stack([inputs.forward_targets.T.reshape(-1), inputs.backward_targets.T.reshape(-1)])
        dropout = noise.apply_dropout if noise is not None and noise.dropout > 0 else None
        run = run_directions(self.bilm.forward_lstm, self.bilm.backward_lstm, token_vectors[positions],
                             [n_rows] * n_steps, state.h, state.c, input_dropout=dropout,
                             reference=self.reference_kernels,
                             product_dtype=self.product_dtype if noise is not None else None)
        top = run.layers[-1]
        if dropout is not None:
            top = torch.stack([dropout(direction, len(run.layers), top[direction]) for direction in (0, 1)])
        weight, bias = self.softmax_weight, self.softmax_bias
        if noise is None:
            real = targets != NO_TARGET
            nll_sums = torch.stack([full_softmax_nll(top[d][real[d]], targets[d][real[d]], weight, bias).sum()
                                    for d in (0, 1)])
            n_targets = int(real[0].sum())
        elif self.reference_kernels:
            nll_sums = torch.stack([sampled_softmax_nll(top[d], targets[d], weight, bias, noise.candidates).sum()
                                    for d in (0, 1)])
            n_targets = targets.shape[1]
        else:
            nll = SampledSoftmaxNll.apply(top.reshape(-1, top.shape[2]), targets.reshape(-1), weight, bias,
                                          noise.candidates, self.product_dtype)
            nll_sums, n_targets = nll.view(2, -1).sum(dim=1), targets.shape[1]
        return LmOutput(nll_sums, n_targets, BiLMState(run.h, run.c).detach())


def initialize_like_bilm_tf(model: LanguageModel) -> None:
    """bilm-tf's initializers, so a fresh model starts where bilm-tf's would (in distribution)."""
    config = model.config
    encoder = model.bilm.token_encoder
    with torch.no_grad():
        nn.init.uniform_(encoder.char_embeddings, -1.0, 1.0)
        for (width, _), convolution in zip(config.char_cnn.filters, encoder.conv_layers(), strict=True):
            if config.char_cnn.activation == "relu":
                nn.init.uniform_(convolution.weight, -0.05, 0.05)  # Kim et al. 2015
            else:
                nn.init.normal_(convolution.weight, 0.0, math.sqrt(1.0 / (width * config.char_cnn.embedding_dim)))
            if convolution.bias is not None:  # TokenEncoder's convolutions all have one
                nn.init.zeros_(convolution.bias)
        n_filters = config.char_cnn.n_filters
        for highway in encoder.highway_layers():
            for linear in (highway.carry, highway.transform):
                nn.init.normal_(linear.weight, 0.0, math.sqrt(1.0 / n_filters))
            nn.init.constant_(highway.carry.bias, -2.0)  # start by mostly carrying the input through
            nn.init.zeros_(highway.transform.bias)
        if encoder.projection is not None:
            nn.init.normal_(encoder.projection.weight, 0.0, math.sqrt(1.0 / n_filters))
            nn.init.zeros_(encoder.projection.bias)
        for stack in (model.bilm.forward_lstm, model.bilm.backward_lstm):
            for layer in stack.projected_lstms():
                # TF's glorot_uniform over the stacked kernel [input; recurrent] of shape (in + proj, 4 * dim).
                fan_in = layer.input_weight.shape[1] + layer.recurrent_weight.shape[1]
                limit = math.sqrt(6.0 / (fan_in + 4 * layer.dim))
                nn.init.uniform_(layer.input_weight, -limit, limit)
                nn.init.uniform_(layer.recurrent_weight, -limit, limit)
                nn.init.zeros_(layer.bias)
                if layer.projection is not None:
                    nn.init.xavier_uniform_(layer.projection)
        nn.init.normal_(model.softmax_weight, 0.0, 1.0 / math.sqrt(config.lstm.projection_dim))
        nn.init.zeros_(model.softmax_bias)
