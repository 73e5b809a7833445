"""The load benchmark end to end, small: every request answered 200 below the queue limit."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARK = Path(__file__).parents[2] / "benchmarks" / "serve_load.py"


@pytest.mark.slow
def test_load_benchmark_serves_every_request_without_errors() -> None:
    result = subprocess.run([sys.executable, str(BENCHMARK), "--requests", "300", "--clients", "16", "64"],
                            capture_output=True, text=True, timeout=600, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert result.returncode == 0, result.stderr
    rows = re.findall(r"(\d+) clients: .* errors (\d+), served/offline ([\d.]+)", result.stdout)
    assert [(clients, errors) for clients, errors, _ in rows] == [("16", "0"), ("64", "0")], result.stdout
    assert all(float(ratio) > 0 for _, _, ratio in rows)
