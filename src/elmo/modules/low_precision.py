"""Training's matrix products on bfloat16 copies of their operands (``elmo train --precision bfloat16``).

On a CPU with AMX or AVX-512 BF16 units (oneDNN runs bfloat16 products on them) a product of bfloat16 operands,
accumulated in float32, runs several times faster than the float32 one at a training step's shapes
(``benchmarks/bf16_products.py``; docs/training.md has the figures and what a whole step gains). Only the
products of the training kernels (the paired LSTM layers' forward and backward, the sampled softmax's) take the
copies; each result comes back as float32 (rounded to bfloat16's 8 significant bits on the way), or stays bfloat16
where a kernel keeps it for later (the paired layer's input products and gate gradients over all steps, which it
reads a step at a time), and the weights, optimizer state, cell state, a step's gates, char CNN and loss stay
float32. Where no such units exist bfloat16 is emulated
and slower: the choice is the user's, float32 by default.
"""

import torch
import torch.nn.functional as F

from elmo.modules.prepacked import ReorderedWeight

# --precision's names: the type a training kernel's products run in (None: the operands' own, float32)
PRODUCT_DTYPES: dict[str, torch.dtype | None] = {"float32": None, "bfloat16": torch.bfloat16}


def product(left: torch.Tensor, right: torch.Tensor, product_dtype: torch.dtype | None) -> torch.Tensor:
    """``left @ right`` (batched where they are 3-d), on ``product_dtype`` copies of both where given (an operand
    already of that type is used as it is); the result in the wider of the operands' types."""
    result_dtype = torch.promote_types(left.dtype, right.dtype)
    if product_dtype is None or product_dtype == result_dtype:
        return torch.matmul(left, right)
    return torch.matmul(left.to(product_dtype), right.to(product_dtype)).to(result_dtype)


def add_product(out: torch.Tensor, left: torch.Tensor, right: torch.Tensor, product_dtype: torch.dtype | None) -> None:
    """``out += left @ right`` (2-d), in place: on ``product_dtype`` copies where given, else one ``addmm_``."""
    if product_dtype is None or product_dtype == left.dtype:
        out.addmm_(left, right)
    else:
        out.add_(product(left, right, product_dtype))


class WeightProduct:
    """``inputs @ weight.T + bias`` for a weight a kernel multiplies by several times: its ``product_dtype`` copy
    made once, or without one ``ReorderedWeight`` (oneDNN's reordered float32 copy)."""

    def __init__(self, weight: torch.Tensor, product_dtype: torch.dtype | None) -> None:
        low_precision = product_dtype is not None and product_dtype != weight.dtype
        self.reordered = None if low_precision else ReorderedWeight(weight)
        self.low = weight.to(product_dtype) if low_precision else weight

    def __call__(self, inputs: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        if self.reordered is not None:
            return self.reordered(inputs, bias)
        result = F.linear(inputs.to(self.low.dtype), self.low).to(inputs.dtype)
        return result if bias is None else result.add_(bias)
