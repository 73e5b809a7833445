"""The output softmax: full for evaluation, sampled for training, as TensorFlow's
``sampled_softmax_loss`` with its default log-uniform candidate sampler computes it.

Sampling (TF's ``LogUniformCandidateSampler``, ``unique=True``): class ``k`` is drawn with probability
``p(k) = (log(k + 2) - log(k + 1)) / log(V + 1)`` (Zipf over frequency ranks), draws repeat until
``n`` distinct classes are in hand, and each class's expected count over those ``n_tries`` draws is
``1 - (1 - p)^n_tries`` (or ``n * p`` when no draw repeated, as TF has it). The loss subtracts the log
expected count from every logit (true and sampled), drops sampled classes that equal a row's target
("accidental hits"), and takes the softmax cross-entropy with the target first. When ``n >= V`` every
class is sampled with certainty (expected count 1) and the loss is exactly the full softmax.
"""

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from elmo.modules.first_order import first_order_only
from elmo.modules.low_precision import WeightProduct, add_product

# Rows of the sampled logits handled at a time: 256 x 8,192 negatives are 8 MB, which stay in cache from the
# product to the sum (1.2-1.5x faster than whole, docs/training.md).
_BLOCK_ROWS = 256
# Bytes of the full softmax's logits computed at a time: under glibc's largest mmap threshold (32 MiB, elmo.memory),
# so that each block reuses the heap pages the one before it freed.
_FULL_SOFTMAX_BLOCK_BYTES = 16 * 2**20


@dataclass(frozen=True)
class Candidates:
    """The shared negatives of one step: ``ids`` ``(n,)``, drawn in ``n_tries`` draws from ``vocab_size``
    classes; ``n_tries == 0`` means every class, surely."""

    ids: torch.Tensor
    n_tries: int
    vocab_size: int

    def log_expected_count(self, class_ids: torch.Tensor) -> torch.Tensor:
        """``log E[times class k was drawn]`` for each id, float64 then float32 as TF does."""
        if self.n_tries == 0:
            return torch.zeros(class_ids.shape, dtype=torch.float32, device=class_ids.device)
        k = class_ids.to(torch.float64)
        p = (torch.log(k + 2.0) - torch.log(k + 1.0)) / math.log(self.vocab_size + 1.0)
        no_repeats = self.n_tries == len(self.ids)
        expected = p * len(self.ids) if no_repeats else -torch.expm1(self.n_tries * torch.log1p(-p))
        return torch.log(expected).to(torch.float32)


def sample_log_uniform(n_samples: int, vocab_size: int, generator: torch.Generator) -> Candidates:
    """``n_samples`` distinct classes, in order of first draw; all classes when ``n_samples >= vocab_size``."""
    if n_samples >= vocab_size:
        return Candidates(torch.arange(vocab_size), 0, vocab_size)
    log_range = math.log(vocab_size + 1.0)
    draws = np.empty(0, dtype=np.int64)
    chunk = 2 * n_samples
    while True:
        uniform = torch.rand(chunk, generator=generator, dtype=torch.float64).numpy()
        draws = np.concatenate([draws, (np.exp(uniform * log_range) - 1.0).astype(np.int64)])
        _, first_index = np.unique(draws, return_index=True)
        if len(first_index) >= n_samples:
            first_index.sort()
            chosen = first_index[:n_samples]
            return Candidates(torch.from_numpy(draws[chosen].copy()), int(chosen[-1]) + 1, vocab_size)
        chunk *= 2


def sampled_softmax_nll(hidden: torch.Tensor, targets: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
                        candidates: Candidates) -> torch.Tensor:
    """Per-position negative log-likelihood ``(N,)`` under the sampled softmax.

    ``hidden``: ``(N, dim)``; ``targets``: ``(N,)`` class ids; ``weight``: ``(V, dim)``; ``bias``: ``(V,)``.
    """
    sampled_ids = candidates.ids.to(targets.device)
    true_logits = (hidden * weight[targets]).sum(dim=1) + bias[targets]
    true_logits = true_logits - candidates.log_expected_count(targets)
    sampled_logits = hidden @ weight[sampled_ids].T + bias[sampled_ids]
    sampled_logits = sampled_logits - candidates.log_expected_count(sampled_ids)
    accidental_hits = targets[:, None] == sampled_ids[None, :]
    sampled_logits = sampled_logits.masked_fill(accidental_hits, float("-inf"))
    logits = torch.cat([true_logits[:, None], sampled_logits], dim=1)
    return torch.logsumexp(logits, dim=1) - true_logits


def full_softmax_nll(hidden: torch.Tensor, targets: torch.Tensor, weight: torch.Tensor,
                     bias: torch.Tensor) -> torch.Tensor:
    """Per-position negative log-likelihood ``(N,)`` over the whole vocabulary, a block of positions at a time: all
    at once, a validation batch's logits (5,120 positions x 64k words, 1.3 GB, and as much again for their log
    softmax) were blocks glibc maps on their own, so every batch faulted them in anew (docs/training.md)."""
    rows = max(1, _FULL_SOFTMAX_BLOCK_BYTES // (len(weight) * hidden.element_size()))
    return torch.cat([F.cross_entropy(F.linear(hidden[start : start + rows], weight, bias),
                                      targets[start : start + rows], reduction="none")
                      for start in range(0, len(hidden), rows)] or [hidden.new_zeros(0)])


class SampledSoftmaxNll(torch.autograd.Function):
    """``sampled_softmax_nll`` with a hand-written backward, for training.

    Autograd keeps four ``(N, n)`` temporaries alive (logits, their masked copy, the concatenation, the
    exponentials) and runs its backward through each; here the logits are exponentiated in place, a block of rows
    at a time, and the backward needs nothing more (``d logit = p - [is target]``, p the exponential over the
    normalizer). The weight's and bias's gradients are dense, as autograd's are, nonzero only at the sampled and
    target rows.
    """

    @staticmethod
    def forward(ctx, hidden: torch.Tensor, targets: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
                candidates: Candidates, product_dtype: torch.dtype | None = None) -> torch.Tensor:
        sampled_ids = candidates.ids.to(targets.device)
        sampled_weight = weight[sampled_ids]
        sampled_bias = bias[sampled_ids] - candidates.log_expected_count(sampled_ids).to(hidden.device)
        target_weight = weight[targets]
        true_logits = (hidden * target_weight).sum(dim=1) + bias[targets]
        true_logits = true_logits - candidates.log_expected_count(targets).to(hidden.device)
        hit_rows, hit_columns = _accidental_hits(targets, sampled_ids)
        largest, normalizer = torch.empty_like(true_logits), torch.empty_like(true_logits)
        product = WeightProduct(sampled_weight, product_dtype)
        unnormalized = []  # per block of rows; the backward divides by the normalizer
        for rows in _row_blocks(len(hidden)):  # each block's logits stay in cache from product to sum
            logits = product(hidden[rows], sampled_bias)
            hits = (hit_rows >= rows.start) & (hit_rows < rows.stop)
            logits[hit_rows[hits] - rows.start, hit_columns[hits]] = float("-inf")
            largest[rows] = torch.maximum(logits.amax(dim=1), true_logits[rows])
            logits.sub_(largest[rows, None]).exp_()
            normalizer[rows] = logits.sum(dim=1)
            unnormalized.append(logits)
        true_unnormalized = torch.exp(true_logits - largest)
        normalizer.add_(true_unnormalized)
        ctx.product_dtype = product_dtype
        ctx.save_for_backward(hidden, targets, weight, sampled_ids, sampled_weight, target_weight,
                              true_unnormalized, normalizer, *unnormalized)
        return torch.log(normalizer) + largest - true_logits

    @staticmethod
    def backward(ctx, d_nll: torch.Tensor):
        if getattr(ctx, "backward_done", False):
            raise RuntimeError(_SECOND_BACKWARD_REFUSED)
        ctx.backward_done = True
        saved = ctx.saved_tensors
        with torch.no_grad():
            gradients = SampledSoftmaxNll.first_order_backward(saved, d_nll, ctx.product_dtype)
        return first_order_only(gradients, [*saved, d_nll], _SECOND_ORDER_REFUSED)

    @staticmethod
    def first_order_backward(saved: tuple[torch.Tensor, ...], d_nll: torch.Tensor,
                             product_dtype: torch.dtype | None = None) -> tuple[torch.Tensor | None, ...]:
        """The gradients of ``forward``'s inputs from its saved tensors, computed without autograd; overwrites the
        saved logits."""
        (hidden, targets, weight, sampled_ids, sampled_weight, target_weight, true_unnormalized, normalizer,
         *unnormalized) = saved
        scale = d_nll / normalizer
        d_true = true_unnormalized * scale - d_nll
        d_hidden = torch.empty_like(hidden)
        d_sampled_weight = torch.zeros_like(sampled_weight)
        d_sampled_bias = hidden.new_zeros(len(sampled_ids))
        product_t = WeightProduct(sampled_weight.T, product_dtype)
        for rows, block in zip(_row_blocks(len(hidden)), unnormalized, strict=True):  # each block stays in cache
            d_logits = block.mul_(scale[rows, None])  # saved for this one backward: d logit = p d_nll
            d_hidden[rows] = product_t(d_logits)
            add_product(d_sampled_weight, d_logits.T, hidden[rows], product_dtype)
            d_sampled_bias.add_(d_logits.sum(dim=0))
        d_hidden.addcmul_(d_true[:, None], target_weight)
        # The sampled ids are distinct: their rows are written, not accumulated; targets repeat.
        d_weight = torch.zeros_like(weight)
        d_weight[sampled_ids] = d_sampled_weight
        d_weight.index_put_((targets,), d_true[:, None] * hidden, accumulate=True)
        d_bias = weight.new_zeros(weight.shape[0])
        d_bias[sampled_ids] = d_sampled_bias
        d_bias.index_put_((targets,), d_true, accumulate=True)
        return d_hidden, None, d_weight, d_bias, None, None


_SECOND_ORDER_REFUSED = (
    "the sampled softmax's hand-written backward (training/softmax.py) gives first-order gradients only; for "
    "gradients of gradients (create_graph=True) set reference_kernels = True on the LanguageModel to run autograd "
    "through sampled_softmax_nll")
_SECOND_BACKWARD_REFUSED = (
    "the sampled softmax's hand-written backward (training/softmax.py) runs once per forward (it overwrites the "
    "saved logits); for a second backward through the same graph (retain_graph=True) set reference_kernels = True "
    "on the LanguageModel")


def _row_blocks(n_rows: int) -> list[slice]:
    return [slice(start, min(start + _BLOCK_ROWS, n_rows)) for start in range(0, n_rows, _BLOCK_ROWS)]


def _accidental_hits(targets: torch.Tensor, sampled_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows and columns where a row's target is among the sampled classes (at most one column per row)."""
    sorted_ids, order = sampled_ids.sort()
    where = torch.searchsorted(sorted_ids, targets).clamp_(max=len(sorted_ids) - 1)
    found = sorted_ids[where] == targets
    return found.nonzero().squeeze(1), order[where[found]]
