"""Load limits against real server processes: a full queue answers 503 with Retry-After, a request that
times out leaves its batch intact, authentication, refused long sentences, and graceful shutdown. The
slowness comes from configuration (a long batching window), not from mocks."""

import json
import re
import signal
import socket
import subprocess
import sys
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
    """The offline embedder with the default windows these servers use."""
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


def test_client_that_gives_up_leaves_the_queue_and_its_batch_is_intact(slow_server: ServerProcess,
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
    # the two that stayed ran in one batch; the quitter's job left the queue when its connection closed
    assert metric(slow_server, 'elmo_batch_requests_count{model="elmo"}') - batches_before == 1
    assert metric(slow_server, 'elmo_batch_requests_sum{model="elmo"}') - requests_before == 2


def test_a_disconnected_client_leaves_the_queue_at_once(slow_server: ServerProcess) -> None:
    batches_before = metric(slow_server, 'elmo_batch_requests_count{model="elmo"}')
    body = json.dumps({"sentences": [["a", "b", "c"]]}).encode()
    with socket.create_connection(("127.0.0.1", slow_server.port)) as client:
        client.sendall(b"POST /v1/embed HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                       b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        wait_for_metric(slow_server, 'elmo_pending_requests{model="elmo"}', 1)
        assert metric(slow_server, 'elmo_held_tokens{model="elmo"}') == 3
    left = time.monotonic()
    wait_for_metric(slow_server, 'elmo_pending_requests{model="elmo"}', 0)
    assert time.monotonic() - left < 0.5  # long before its batching window (1.5 s) would have run it
    assert metric(slow_server, 'elmo_held_tokens{model="elmo"}') == 0
    time.sleep(1.6)
    assert metric(slow_server, 'elmo_batch_requests_count{model="elmo"}') == batches_before  # never run


def test_the_queue_is_bounded_in_tokens(start_server) -> None:
    server = start_server("--model", str(FIXTURE_MODEL), "--max-queue-tokens", "40", "--max-request-tokens", "40",
                          "--max-wait-ms", "1500", "--max-batch-tokens", "100000")
    with ThreadPoolExecutor(1) as pool:
        held = pool.submit(embed, server, ["w"] * 30)
        wait_for_metric(server, 'elmo_held_tokens{model="elmo"}', 30)
        refused = embed(server, ["w"] * 20)  # one request in the queue, but 50 tokens would pass 40
        assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
        assert refused.json()["error"]["code"] == "overloaded" and "--max-queue-tokens" in refused.text
        assert held.result().status_code == 200
    wait_for_metric(server, 'elmo_held_tokens{model="elmo"}', 0)
    assert embed(server, ["w"] * 20).status_code == 200


@pytest.fixture(scope="module")
def default_server(tmp_path_factory: pytest.TempPathFactory):
    """Every limit at its default."""
    server = ServerProcess("--model", str(FIXTURE_MODEL), log_path=tmp_path_factory.mktemp("default") / "log").start()
    yield server
    server.terminate()


@pytest.mark.parametrize(("sentences", "field"), [
    (["w " * 5000], "sentences[0]"),  # one long sentence, windowed if it were let in
    (["w " * 3000, "w " * 3000], "sentences[1]"),  # together past the limit
    (["w " * 500_000], "sentences[0]"),  # a 1 MB sentence: the model would take minutes on a real model
])
def test_tokens_per_request_are_capped_by_default(default_server: ServerProcess, sentences: list[str],
                                                  field: str) -> None:
    batches = metric(default_server, 'elmo_batch_requests_count{model="elmo"}')
    started = time.monotonic()
    response = httpx.post(f"{default_server.url}/v1/embed", json={"sentences": sentences, "layers": "all"},
                          timeout=10)
    assert response.status_code == 413, response.text[:200]
    error = response.json()["error"]
    assert (error["code"], error["field"]) == ("too_many_tokens", field) and "4096" in error["message"]
    assert time.monotonic() - started < 3
    assert metric(default_server, 'elmo_batch_requests_count{model="elmo"}') == batches  # no model time spent
    assert embed(default_server, ["w"] * 4096).status_code == 200  # at the limit is fine


def test_an_integer_too_long_to_convert_is_malformed_json_naming_the_body(default_server: ServerProcess) -> None:
    """Python refuses to convert an integer of over 4,300 digits with a plain ValueError, which the body limit lets
    through at its default; FastAPI's fallback answered a bare http_error."""
    body = b'{"sentences": ["a b"], "layers": ' + b"1" * 5000 + b"}"
    response = httpx.post(f"{default_server.url}/v1/embed", content=body,
                          headers={"content-type": "application/json"}, timeout=30)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "malformed_json" and response.json()["error"]["field"] == "body"


def test_a_npy_answer_counts_its_zero_padding_against_the_request_limit(default_server: ServerProcess) -> None:
    """One long sentence among short ones: 2,007 tokens, but 8 x 2,000 positions once padded for .npy."""
    sentences = ["w " * 2000, *(["w"] * 7)]
    batches = metric(default_server, 'elmo_batch_requests_count{model="elmo"}')
    for pooling, accept, status in (("none", "application/x-npy", 413), ("none", "application/json", 200),
                                    ("mean", "application/x-npy", 200)):
        response = httpx.post(f"{default_server.url}/v1/embed", json={"sentences": sentences, "layers": "top",
                                                                      "pooling": pooling},
                              headers={"accept": accept}, timeout=30)
        assert response.status_code == status, response.text[:200]
        if status == 413:
            error = response.json()["error"]
            assert (error["code"], error["field"]) == ("too_many_tokens", "sentences")
            assert "padded to the longest (2000 tokens) make 16000 token positions" in error["message"]
            assert metric(default_server, 'elmo_batch_requests_count{model="elmo"}') == batches  # no model time


def test_the_event_loop_answers_while_a_long_text_is_tokenized(default_server: ServerProcess) -> None:
    text = " ".join(f"w{i}" for i in range(120_000))  # under the 1 MiB body limit
    with ThreadPoolExecutor(1) as pool:
        long = pool.submit(httpx.post, f"{default_server.url}/v1/embed", json={"sentences": [text]}, timeout=10)
        slowest = 0.0
        while not long.done():
            started = time.monotonic()
            assert httpx.get(f"{default_server.url}/healthz", timeout=5).status_code == 200
            slowest = max(slowest, time.monotonic() - started)
        assert long.result().status_code == 413
    assert slowest < 0.5


def test_a_port_out_of_range_exits_2_before_any_model_loads() -> None:
    command = [sys.executable, "-m", "elmo.serve", "--model", str(FIXTURE_MODEL), "--port", "99999"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stderr
    assert "--port" in result.stderr and "1 to 65535" in result.stderr and "Traceback" not in result.stderr


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


@pytest.mark.parametrize(("flags", "message"), [
    (["--device", "bogus"], "expected cpu, cuda, cuda:N or mps"),
    (["--model", "second={empty}"], "options.json"),  # a second --model that is no model: found before the first loads
])
def test_a_bad_device_or_model_directory_exits_2_before_any_model_loads(
        flags: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from elmo.embedder import Embedder as LoadedEmbedder

    def no_load(*_, **__):
        raise AssertionError("a model loaded before the flags were checked")

    monkeypatch.setattr(LoadedEmbedder, "load", no_load)
    flags = [flag.format(empty=tmp_path) for flag in flags]
    try:
        code = serve_main(["--model", str(FIXTURE_MODEL), *flags])
    except SystemExit as exited:  # argparse's own refusal of a flag's value
        code = exited.code
    assert code == 2
    assert message in capsys.readouterr().err
