"""Real server processes on loopback ports: ``python -m elmo.serve`` with one torch thread, so tests that
share the machine's cores do not slow each other down."""

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import torch

from elmo.embedder import Embedder

FIXTURE_MODEL = Path(__file__).parents[1] / "fixtures" / "elmo"
STARTUP_TIMEOUT_S = 300  # a niced server on a busy machine takes its time


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class ServerProcess:
    """One ``elmo serve`` process; ``url`` is where it listens once ``start`` returns."""

    def __init__(self, *flags: str, log_path: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.command = [sys.executable, "-m", "elmo.serve", "--port", str(self.port), "--threads", "1",
                        "--no-access-log", *flags]
        self.log_path = log_path
        self.process: subprocess.Popen | None = None

    def start(self) -> "ServerProcess":
        env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(self.command, stdout=log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited with {self.process.returncode}:\n{self.log()}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return self
            except httpx.TransportError:
                time.sleep(0.1)
        self.terminate()  # no fixture owns it yet, so nothing else would stop it
        raise RuntimeError(f"server did not answer /healthz within {STARTUP_TIMEOUT_S} s:\n{self.log()}")

    def terminate(self) -> int:
        """SIGTERM, as an orchestrator sends it, and wait for the exit code."""
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


@pytest.fixture
def start_server(tmp_path: Path) -> Iterator:
    """``start_server(*flags)`` starts a server for one test and stops it afterwards."""
    servers: list[ServerProcess] = []

    def start(*flags: str) -> ServerProcess:
        server = ServerProcess(*flags, log_path=tmp_path / f"server{len(servers)}.log")
        servers.append(server)
        return server.start()

    yield start
    for server in servers:
        server.terminate()


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """The fixture model served twice, as ``en`` (NAME=DIR) and as ``elmo`` (its directory name), with small
    limits the bad-input tests reach and a 50 ms batching window so concurrent requests merge."""
    process = ServerProcess(
        "--model", f"en={FIXTURE_MODEL}", "--model", str(FIXTURE_MODEL),
        "--max-sentences", "8", "--max-body-bytes", "4096", "--max-sentence-tokens", "12", "--window-context", "3",
        "--max-wait-ms", "50", log_path=tmp_path_factory.mktemp("server") / "server.log").start()
    yield process
    process.terminate()


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    """The offline embedder the served vectors must equal, windowed as the ``server`` fixture is."""
    torch.set_num_threads(1)
    return Embedder.load(str(FIXTURE_MODEL), max_window_tokens=12, window_context=3)
