"""What the speed benchmarks share: waiting for a device's queued work before reading a timer, and the fp32
matrix-multiply peak their figures are reported against (measured in the same run, as the host is noisy)."""

import time
from collections.abc import Callable

import torch


def synchronize(device: torch.device) -> None:
    """Waits for the device's queued work, so that a timer read after it counts that work."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def best_rate(product: Callable[[], object], flops: float, seconds: float, device: torch.device) -> float:
    """The best GFLOP/s of ``product`` (``flops`` each call) over ``seconds`` of repeated calls, after one warm-up."""
    product()
    best, deadline = 0.0, time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        synchronize(device)
        start = time.perf_counter()
        product()
        synchronize(device)
        best = max(best, flops / (time.perf_counter() - start) / 1e9)
    return best


def matmul_peak(device: torch.device, seconds: float = 3.0) -> float:
    """The best fp32 ``torch.mm`` rate (GFLOP/s) on square matrices with the thread setting in force."""
    size = 8192 if device.type == "cuda" else 2048
    a, b = torch.randn(size, size, device=device), torch.randn(size, size, device=device)
    return best_rate(lambda: torch.mm(a, b), 2 * size**3, seconds, device)
