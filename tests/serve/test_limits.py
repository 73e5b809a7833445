"""Load limits against real server processes: a full queue answers 503 with Retry-After, a request that
times out leaves its batch intact, authentication, refused long sentences, and graceful shutdown. The
slowness comes from configuration (a long batching window), not from mocks."""

import re
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import numpy as np
import pytest

from elmo.embedder import Embedder
from elmo.serve.commands import main as serve_main

from .conftest import FIXTURE_MODEL, ServerProcess

TOLERANCE = {"rtol": 1e-6, "atol": 1e-6}
SENTENCES = [["the", "bank", "of", "the", "river"], ["she", "sat", "down"], ["a", "long", "and", "odd", "one"] * 6]


def embed(server: ServerProcess, tokens: list[str], timeout: float = 30, **headers: str) -> httpx.Response:
    return httpx.post(f"{server.url}/v1/embed", json={"sentences": [tokens], "layers": "all"}, headers=headers,
                      timeout=timeout)


def metric(server: ServerProcess, name: str, **headers: str) -> float:
    text = httpx.get(f"{server.url}/metrics", headers=headers).text
    match = re.search(rf"^{re.escape(name)} (\S+)$", text, re.MULTILINE)
    return float(match.group(1)) if match else 0.0


def wait_for_metric(server: ServerProcess, name: str, value: float, **headers: str) -> None:
    deadline = time.monotonic() + 10
    while metric(server, name, **headers) != value:
        assert time.monotonic() < deadline, f"{name} never reached {value}"
        time.sleep(0.02)


@pytest.fixture(scope="module")
def default_embedder(embedder: Embedder) -> Embedder:
    """The offline embedder with the default 256-token window these servers use."""
    return Embedder(embedder.bilm)


@pytest.fixture(scope="module")
def slow_server(tmp_path_factory: pytest.TempPathFactory):
    """Holds each request 1.5 s for others to join its batch, and at most 3 requests at once."""
    server = ServerProcess("--model", str(FIXTURE_MODEL), "--max-queue", "3", "--max-wait-ms", "1500",
                           "--max-batch-tokens", "100000", log_path=tmp_path_factory.mktemp("slow") / "log").start()
    yield server
    server.terminate()


def test_full_queue_answers_503_with_retry_after(slow_server: ServerProcess, default_embedder: Embedder) -> None:
    with ThreadPoolExecutor(3) as pool:
        held = [pool.submit(embed, slow_server, tokens) for tokens in SENTENCES]
        wait_for_metric(slow_server, 'elmo_pending_requests{model="elmo"}', 3)
        refused = embed(slow_server, ["one", "more"])
        assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
        assert refused.json()["error"]["code"] == "overloaded"
        responses = [future.result() for future in held]
    for response, expected in zip(responses, default_embedder.embed(SENTENCES, "all"), strict=True):
        assert response.status_code == 200
        np.testing.assert_allclose(np.array(response.json()["embeddings"][0]["vectors"]), expected, **TOLERANCE)
    assert embed(slow_server, ["room", "again"]).status_code == 200  # the queue drained: accepted again


def test_client_that_times_out_does_not_poison_its_batch(slow_server: ServerProcess,
                                                         default_embedder: Embedder) -> None:
    batches_before = metric(slow_server, 'elmo_batch_requests_count{model="elmo"}')
    requests_before = metric(slow_server, 'elmo_batch_requests_sum{model="elmo"}')
    with ThreadPoolExecutor(3) as pool:
        quitter = pool.submit(embed, slow_server, SENTENCES[2], 0.3)  # gives up long before the batch runs
        stayers = [pool.submit(embed, slow_server, tokens) for tokens in SENTENCES[:2]]
        with pytest.raises(httpx.ReadTimeout):
            quitter.result()
        responses = [future.result() for future in stayers]
    for response, expected in zip(responses, default_embedder.embed(SENTENCES[:2], "all"), strict=True):
        assert response.status_code == 200
        np.testing.assert_allclose(np.array(response.json()["embeddings"][0]["vectors"]), expected, **TOLERANCE)
    # all three ran in one batch: the quitter was in it and changed nobody's vectors
    assert metric(slow_server, 'elmo_batch_requests_count{model="elmo"}') - batches_before == 1
    assert metric(slow_server, 'elmo_batch_requests_sum{model="elmo"}') - requests_before == 3


def test_auth_refused_long_sentences_and_server_timeout(start_server, tmp_path: Path) -> None:
    key_file = tmp_path / "keys"
    key_file.write_text("# rotated monthly\nfirst-key\n\nsecond-key\n")
    server = start_server("--model", str(FIXTURE_MODEL), "--api-key-file", str(key_file), "--long-sentences",
                          "refuse", "--max-sentence-tokens", "8", "--request-timeout", "0.3", "--max-wait-ms", "1000")
    good = {"authorization": "Bearer second-key"}
    for headers in ({}, {"authorization": "Bearer wrong"}, {"authorization": "Basic first-key"},
                    {"authorization": "first-key"}):
        response = httpx.get(f"{server.url}/v1/models", headers=headers)
        assert response.status_code == 401 and response.headers["www-authenticate"] == "Bearer"
    assert embed(server, ["a"]).status_code == 401
    assert httpx.get(f"{server.url}/metrics").status_code == 401
    assert httpx.get(f"{server.url}/v1/models", headers={"authorization": "Bearer first-key"}).status_code == 200
    assert httpx.get(f"{server.url}/healthz").status_code == 200 and httpx.get(f"{server.url}/").status_code == 200

    too_long = httpx.post(f"{server.url}/v1/embed", json={"sentences": ["a b", "1 2 3 4 5 6 7 8 9"]}, headers=good)
    assert too_long.status_code == 413 and too_long.json()["error"]["field"] == "sentences[1]"

    started = time.monotonic()
    timed_out = embed(server, ["a", "b"], **good)  # the batching window (1 s) outlasts the timeout (0.3 s)
    assert timed_out.status_code == 504 and time.monotonic() - started < 0.9
    wait_for_metric(server, 'elmo_pending_requests{model="elmo"}', 0, **good)
    assert metric(server, 'elmo_batch_requests_count{model="elmo"}', **good) == 0  # skipped: no model time spent


def test_sigterm_finishes_in_flight_requests_and_refuses_new_ones(start_server, default_embedder: Embedder) -> None:
    server = start_server("--model", str(FIXTURE_MODEL), "--max-wait-ms", "1500", "--max-batch-tokens", "100000")
    with ThreadPoolExecutor(3) as pool:
        in_flight = [pool.submit(embed, server, tokens) for tokens in SENTENCES]
        wait_for_metric(server, 'elmo_pending_requests{model="elmo"}', 3)
        server.process.terminate()
        time.sleep(0.3)
        with pytest.raises(httpx.ConnectError):  # refused at once, never accepted and then dropped
            embed(server, ["late"])
        responses = [future.result() for future in in_flight]
    for response, expected in zip(responses, default_embedder.embed(SENTENCES, "all"), strict=True):
        assert response.status_code == 200
        np.testing.assert_allclose(np.array(response.json()["embeddings"][0]["vectors"]), expected, **TOLERANCE)
    # uvicorn re-raises the SIGTERM it caught once shutdown is complete, as a process killed by it would exit
    assert server.process.wait(timeout=30) == -signal.SIGTERM
    assert "Application shutdown complete" in server.log()


@pytest.mark.parametrize(("flags", "message"), [
    (["--host", "0.0.0.0"], "--api-key-file"),
    (["--host", "192.168.1.4", "--no-auth", "--api-key-file", "keys"], "contradict"),
    (["--model", str(FIXTURE_MODEL)], "same name"),
    (["--max-sentence-tokens", "8", "--window-context", "4"], "window_context"),
    (["--model", "no/such/dir"], "neither a directory"),
])
def test_bad_flags_exit_2_before_serving(flags: list[str], message: str, capsys: pytest.CaptureFixture) -> None:
    assert serve_main(["--model", str(FIXTURE_MODEL), *flags]) == 2
    assert message in capsys.readouterr().err


def test_empty_key_file_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    (tmp_path / "keys").write_text("# no key yet\n")
    assert serve_main(["--model", str(FIXTURE_MODEL), "--api-key-file", str(tmp_path / "keys")]) == 2
    assert "holds no API key" in capsys.readouterr().err
