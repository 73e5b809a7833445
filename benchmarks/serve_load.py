"""Load test of ``elmo serve`` on loopback: throughput and latency under concurrency, against the offline
embedder's tokens/s on the same sentences in the same run.

Usage: python benchmarks/serve_load.py [--model DIR | --preset small] [--clients 16 64] [--requests 2000]
       [--sentences-per-request 1] [--threads 1] [--max-wait-ms 5] [--binary]

It embeds all the requests' sentences offline first (``Embedder.embed``, layers=top, same batch size and
threads as the server), then starts ``elmo serve`` in a subprocess and, for each client count, sends the
requests from that many concurrent asyncio clients. It prints requests/s, tokens/s, p50/p95/p99 latency,
errors (any non-200 answer or transport failure; 0 is expected while clients <= the server's queue limit)
and served tokens/s over offline tokens/s. Client and server share the machine's cores, so on a small
machine the ratio also measures the client's own cost.
"""

import argparse
import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np
import torch

from elmo import BiLM, BiLMConfig, save_bilm
from elmo.embedder import Embedder

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "elmo"


def sentences_for(n: int) -> list[list[str]]:
    """The fixture's 30 real sentences, cycled to ``n``."""
    batches = json.loads((FIXTURE / "sentences.json").read_text())
    pool = [sentence.split() for batch in batches for sentence in batch]
    return [pool[i % len(pool)] for i in range(n)]


def offline_tokens_per_second(model_dir: str, token_lists: list[list[str]], batch_size: int) -> float:
    embedder = Embedder.load(model_dir)
    embedder.embed(token_lists[:batch_size], "top", batch_size=batch_size)  # warm-up
    started = time.perf_counter()
    embedder.embed(token_lists, "top", batch_size=batch_size)
    return sum(map(len, token_lists)) / (time.perf_counter() - started)


def start_server(model_dir: str, args: argparse.Namespace) -> tuple[subprocess.Popen, str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [sys.executable, "-m", "elmo.serve", "--model", f"bench={model_dir}", "--port", str(port),
               "--threads", str(args.threads), "--max-wait-ms", str(args.max_wait_ms), "--batch-size",
               str(args.batch_size), "--max-queue", str(args.max_queue), "--no-access-log", "--log-level", "warning"]
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads)}
    process = subprocess.Popen(command, env=env)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return process, url
        except httpx.TransportError:
            time.sleep(0.2)
    process.kill()
    raise RuntimeError("the server did not start")


class Connection:
    """A minimal keep-alive HTTP/1.1 client over asyncio streams. httpx spends about 6 ms of CPU per request
    here, more than the server does, so with it the benchmark would mostly measure its own client."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def post(self, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        head = [f"POST {path} HTTP/1.1", f"Host: {self.host}:{self.port}", "Content-Type: application/json",
                f"Content-Length: {len(body)}", *(f"{name}: {value}" for name, value in headers.items())]
        self.writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + body)
        status_line = await self.reader.readline()
        length = 0
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            if name.lower() == "content-length":
                length = int(value)
        if not status_line:
            raise ConnectionError("the server closed the connection")
        return int(status_line.split()[1]), await self.reader.readexactly(length)

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            await self.writer.wait_closed()


async def drive(url: str, bodies: list[bytes], clients: int, headers: dict[str, str]) -> tuple[list[float], int, float]:
    """Send every body once from ``clients`` concurrent connections: (latencies in s, errors, wall seconds)."""
    host, port = url.removeprefix("http://").split(":")
    latencies: list[float] = []
    errors = 0
    next_index = iter(range(len(bodies)))

    async def client() -> None:
        nonlocal errors
        connection = Connection(host, int(port))
        for index in next_index:
            started = time.perf_counter()
            try:
                status, _ = await connection.post("/v1/embed", bodies[index], headers)
                errors += status != 200
            except (OSError, ValueError, asyncio.IncompleteReadError):
                errors += 1
                await connection.close()
                connection = Connection(host, int(port))
            latencies.append(time.perf_counter() - started)
        await connection.close()

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    return latencies, errors, time.perf_counter() - started


def batch_summary(url: str) -> str:
    text = httpx.get(f"{url}/metrics").text
    values = {}
    for line in text.splitlines():
        for name in ("elmo_batch_requests_sum", "elmo_batch_requests_count", "elmo_batch_tokens_sum"):
            if line.startswith(name + "{"):
                values[name] = float(line.rsplit(" ", 1)[1])
    batches = values.get("elmo_batch_requests_count", 0) or 1
    return (f"{values.get('elmo_batch_requests_sum', 0) / batches:.1f} requests, "
            f"{values.get('elmo_batch_tokens_sum', 0) / batches:.0f} tokens per batch (cumulative)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=str(FIXTURE), help="model directory (default: the tiny test model)")
    parser.add_argument("--preset", help="instead of --model: random weights of a preset (small, medium, original)")
    parser.add_argument("--clients", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--sentences-per-request", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1, help="torch threads, offline and in the server")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-wait-ms", type=float, default=5.0)
    parser.add_argument("--max-queue", type=int, default=256)
    parser.add_argument("--binary", action="store_true", help="ask for .npy instead of JSON")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    with tempfile.TemporaryDirectory() as scratch:
        model_dir = args.model
        if args.preset:
            torch.manual_seed(0)
            model_dir = scratch
            save_bilm(BiLM(BiLMConfig.preset(args.preset)), Path(scratch) / "options.json",
                      Path(scratch) / "weights.hdf5")
        per_request = args.sentences_per_request
        token_lists = sentences_for(args.requests * per_request)
        bodies = [json.dumps({"model": "bench", "sentences": token_lists[i * per_request : (i + 1) * per_request],
                              "layers": "top"}).encode() for i in range(args.requests)]
        n_tokens = sum(map(len, token_lists))
        offline = offline_tokens_per_second(model_dir, token_lists, args.batch_size)
        print(f"model {args.preset or model_dir}; {args.requests} requests x {per_request} sentence(s), "
              f"{n_tokens} tokens; torch threads {args.threads}; {'npy' if args.binary else 'JSON'} answers")
        print(f"offline Embedder.embed: {offline:,.0f} tokens/s")
        headers = {"accept": "application/x-npy"} if args.binary else {}
        process, url = start_server(model_dir, args)
        try:
            asyncio.run(drive(url, bodies[: min(50, len(bodies))], 4, headers))  # warm-up
            for clients in args.clients:
                latencies, errors, seconds = asyncio.run(drive(url, bodies, clients, headers))
                p50, p95, p99 = np.percentile(np.array(latencies) * 1000, [50, 95, 99])
                served = n_tokens / seconds
                print(f"{clients:3d} clients: {args.requests / seconds:7.1f} requests/s, {served:9,.0f} tokens/s, "
                      f"latency p50 {p50:6.1f} ms  p95 {p95:6.1f} ms  p99 {p99:6.1f} ms, errors {errors}, "
                      f"served/offline {served / offline:.2f}")
            print(f"batches: {batch_summary(url)}")
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=60)


if __name__ == "__main__":
    main()
