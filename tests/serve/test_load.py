"""The load benchmark end to end, small: every request answered 200 below the queue limit, and concurrent
requests merged into shared model batches."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARK = Path(__file__).parents[2] / "benchmarks" / "serve_load.py"


@pytest.mark.slow
def test_load_benchmark_serves_every_request_without_errors_in_shared_batches() -> None:
    result = subprocess.run([sys.executable, str(BENCHMARK), "--requests", "300", "--clients", "16", "64"],
                            capture_output=True, text=True, timeout=600, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert result.returncode == 0, result.stderr
    rows = re.findall(r"(\d+) clients: .* errors (\d+), served/offline ([\d.]+)", result.stdout)
    assert [(clients, errors) for clients, errors, _ in rows] == [("16", "0"), ("64", "0")], result.stdout
    # 650 one-sentence requests (50 of them the warm-up's, from 4 clients) answered by far fewer model batches:
    # one batch a request would mean 1.0
    per_batch = re.search(r"batches: ([\d.]+) requests, ", result.stdout)
    assert per_batch is not None and float(per_batch.group(1)) >= 2.0, result.stdout
