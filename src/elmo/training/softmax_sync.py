"""The softmax's gradient across training processes, exchanged only where it is nonzero.

A step's softmax gradient lives in the rows of the shared negatives and of the step's targets; every other row
is zero in every process. DistributedDataParallel would all-reduce the whole ``(vocab, projection_dim)`` matrix
(1.6 GB a step for the published 793,471-word vocabulary); here the softmax is left out of DDP, the processes
gather each other's targets, and only the union of those rows (with their biases) is all-reduced. bilm-tf kept
this gradient sparse for the same reason. The result is DDP's: the average over processes, row by row.
"""

from dataclasses import dataclass

import torch
import torch.distributed as dist

SOFTMAX_PARAMETERS = ("softmax_weight", "softmax_bias")


@dataclass
class CommunicatedBytes:
    """What one step sent into collective operations from this process, by kind."""

    softmax_rows: int = 0  # the all-reduced rows of the softmax weight and bias
    targets: int = 0  # this process's target ids, gathered by every process
    dense: int = 0  # every other parameter's gradient, all-reduced by DDP


def dense_gradient_bytes(model: torch.nn.Module) -> int:
    """Bytes DDP all-reduces a step: every parameter's gradient but the softmax's."""
    return sum(parameter.numel() * parameter.element_size() for name, parameter in model.named_parameters()
               if name not in SOFTMAX_PARAMETERS)


def all_reduce_softmax_rows(weight: torch.nn.Parameter, bias: torch.nn.Parameter, sampled_ids: torch.Tensor,
                            targets: torch.Tensor, world_size: int) -> CommunicatedBytes:
    """Replace ``weight.grad`` and ``bias.grad`` by their average over the processes, exchanging only the rows of
    ``sampled_ids`` (the same in every process) and of every process's ``targets`` (equal counts everywhere)."""
    targets = targets.reshape(-1).to(weight.device)
    gathered = [torch.empty_like(targets) for _ in range(world_size)]
    dist.all_gather(gathered, targets)
    rows = torch.unique(torch.cat([sampled_ids.to(weight.device), *gathered]))
    rows = rows[rows >= 0]  # evaluation-style padding targets, if any, have no row
    weight_grad, bias_grad = weight.grad, bias.grad
    if weight_grad is None or bias_grad is None:
        raise ValueError("the softmax weight or bias has no gradient; call all_reduce_softmax_rows after backward()")
    values = torch.cat([weight_grad[rows], bias_grad[rows, None]], dim=1)
    dist.all_reduce(values)
    values.div_(world_size)
    weight_grad[rows] = values[:, :-1]
    bias_grad[rows] = values[:, -1]
    return CommunicatedBytes(softmax_rows=values.numel() * values.element_size(),
                             targets=targets.numel() * targets.element_size())
