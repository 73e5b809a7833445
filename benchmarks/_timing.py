"""What the speed benchmarks share: waiting for a device's queued work before reading a timer, the median time
of one call, and the fp32 matrix-multiply peak their figures are reported against (measured in the same run, as
the host is noisy)."""

import time
from collections.abc import Callable

import torch

from elmo.modules import prepacked


def median_call_seconds(call: Callable[[], object], seconds: float) -> float:
    """The median time of one CPU call over ``seconds`` of calls, after a warm-up of 10."""
    for _ in range(10):
        call()
    times, deadline = [], time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


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


def matmul_peaks(device: torch.device, seconds: float = 3.0) -> dict[str, float]:
    """Best fp32 GEMM rates (GFLOP/s) on square matrices with the thread setting in force: ``torch.mm``'s and, on
    a CPU with oneDNN, oneDNN's product on a reordered weight (what the model's products run on; on this
    project's AMD host it gets 15-48 % more than ``torch.mm``, so a share of the larger is the stricter one)."""
    peaks = {"torch.mm": matmul_peak(device, seconds)}
    if device.type == "cpu" and prepacked.HAS_ONEDNN:
        size = 2048
        a, b = torch.randn(size, size), torch.randn(size, size)
        packed = torch.ops.mkldnn._reorder_linear_weight(b)
        peaks["oneDNN"] = best_rate(lambda: prepacked.prepacked_product(a, packed), 2 * size**3, seconds, device)
    return peaks
