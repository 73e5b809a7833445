"""The training processes: one, or several under torchrun with DistributedDataParallel. Each holds an equal
share of the batch's rows; rank 0 is the one that writes."""

import os
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from elmo.bilm import BiLMState
from elmo.training.corpus import RowPosition


@dataclass
class Processes:
    """This process's place among the training processes (one, or several under torchrun)."""

    rank: int
    world_size: int
    device: torch.device
    started_group: bool = False  # this object started the process group, so ``close`` ends it

    @classmethod
    def from_environment(cls) -> "Processes":
        world_size = int(os.environ.get("WORLD_SIZE", "1"))
        local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        device = torch.device(f"cuda:{local_rank}") if torch.cuda.is_available() else torch.device("cpu")
        started = world_size > 1 and not dist.is_initialized()
        if started:
            dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
        if device.type == "cuda":
            torch.cuda.set_device(device)
        return cls(dist.get_rank() if world_size > 1 else 0, world_size, device, started)

    def close(self) -> None:
        """Ends the process group this object started. Left to the interpreter's exit, a gloo group's threads
        were torn down while still running and aborted a process (SIGABRT) after its training had finished."""
        if self.started_group and dist.is_initialized():
            dist.destroy_process_group()

    @property
    def is_writer(self) -> bool:
        return self.rank == 0

    def rows(self, n_rows: int) -> range:
        if n_rows % self.world_size:
            raise ValueError(f"batch_size {n_rows} does not split evenly over {self.world_size} processes")
        share = n_rows // self.world_size
        return range(self.rank * share, (self.rank + 1) * share)

    def sum(self, tensor: torch.Tensor) -> torch.Tensor:
        if self.world_size > 1:
            tensor = tensor.clone()
            dist.all_reduce(tensor)
        return tensor

    def gather_rows(self, positions: list[RowPosition], state: BiLMState) -> tuple[list[RowPosition], BiLMState]:
        """Every rank's row positions and LSTM states, in global row order."""
        if self.world_size == 1:
            return positions, state
        gathered: list[Any] = [None] * self.world_size
        dist.all_gather_object(gathered, [position.to_json() for position in positions])
        all_positions = [RowPosition.from_json(p) for rank_positions in gathered for p in rank_positions]
        halves = []
        for tensor in (state.h, state.c):
            parts = [torch.empty_like(tensor) for _ in range(self.world_size)]
            dist.all_gather(parts, tensor.contiguous())
            halves.append(torch.cat(parts, dim=2))
        return all_positions, BiLMState(*halves)

    def barrier(self) -> None:
        if self.world_size > 1:
            dist.barrier()

    def any(self, flag: bool) -> bool:
        """Whether ``flag`` holds on any process, so that all stop at the same step."""
        if self.world_size == 1:
            return flag
        tensor = torch.tensor([int(flag)], device=self.device)
        dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
        return bool(tensor.item())
