"""Connections that are slow, silent, too many or do not read, against real server processes on raw sockets:
each must time out or be refused within its configured bound, and leave the server answering others."""

import json
import re
import socket
import time
from pathlib import Path

import httpx
import pytest

from .conftest import FIXTURE_MODEL, ServerProcess

TIMEOUT_S = 1.0  # the header, body and write timeouts these servers run with


@pytest.fixture(scope="module")
def guarded_server(tmp_path_factory: pytest.TempPathFactory):
    server = ServerProcess("--model", str(FIXTURE_MODEL), "--header-timeout", str(TIMEOUT_S), "--body-timeout",
                           str(TIMEOUT_S), "--limit-concurrency", "4",
                           log_path=tmp_path_factory.mktemp("guarded") / "log").start()
    yield server
    server.terminate()


def connect(server: ServerProcess, receive_buffer: int | None = None) -> socket.socket:
    client = socket.socket()
    if receive_buffer is not None:  # before connecting, so the TCP window stays small
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    client.settimeout(10)
    client.connect(("127.0.0.1", server.port))
    return client


def read_until_closed(client: socket.socket) -> tuple[bytes, float]:
    """Everything the server sends until it closes the connection, and when it closed it."""
    received = b""
    while True:
        try:
            chunk = client.recv(1 << 16)
        except ConnectionResetError:
            break
        if not chunk:
            break
        received += chunk
    return received, time.monotonic()


def post_head(content_length: int) -> bytes:
    return (b"POST /v1/embed HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % content_length)


def test_a_silent_connection_is_closed_after_the_header_timeout(guarded_server: ServerProcess) -> None:
    with connect(guarded_server) as client:
        opened = time.monotonic()
        received, closed = read_until_closed(client)
    assert received == b""  # nothing was asked, so nothing is answered
    assert TIMEOUT_S - 0.1 < closed - opened < TIMEOUT_S + 1.5


def test_a_half_sent_head_gets_408_and_the_connection_closed(guarded_server: ServerProcess) -> None:
    with connect(guarded_server) as client:
        opened = time.monotonic()
        client.sendall(b"POST /v1/embed HTTP/1.1\r\nHost: x\r\nContent-Le")
        received, closed = read_until_closed(client)
    assert received.startswith(b"HTTP/1.1 408 ")
    assert json.loads(received.split(b"\r\n\r\n", 1)[1])["error"]["code"] == "header_timeout"
    assert closed - opened < TIMEOUT_S + 1.5


def test_a_half_sent_body_gets_408_and_the_connection_closed(guarded_server: ServerProcess) -> None:
    with connect(guarded_server) as client:
        opened = time.monotonic()
        client.sendall(post_head(100) + b'{"sentences": ')  # 14 of the 100 bytes promised
        received, closed = read_until_closed(client)
    assert received.startswith(b"HTTP/1.1 408 ")
    assert json.loads(received.split(b"\r\n\r\n", 1)[1])["error"]["code"] == "body_timeout"
    assert closed - opened < TIMEOUT_S + 1.5
    assert httpx.post(f"{guarded_server.url}/v1/embed", json={"sentences": ["a b"]}).status_code == 200


def _requests_counted(server: ServerProcess, status: int) -> float:
    text = httpx.get(f"{server.url}/metrics").text
    found = re.search(rf'^elmo_requests_total{{endpoint="/v1/embed",status="{status}"}} (\S+)$', text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def test_a_client_that_leaves_while_sending_its_body_is_counted_as_499_not_as_a_server_error(
        guarded_server: ServerProcess) -> None:
    before = {status: _requests_counted(guarded_server, status) for status in (499, 500)}
    with connect(guarded_server) as client:
        client.sendall(post_head(100) + b'{"sentences": ')
    deadline = time.monotonic() + 5
    while _requests_counted(guarded_server, 499) == before[499]:
        assert time.monotonic() < deadline, "the request that lost its client was never counted"
        time.sleep(0.05)
    assert _requests_counted(guarded_server, 499) == before[499] + 1
    assert _requests_counted(guarded_server, 500) == before[500]


def test_a_body_sent_a_byte_at_a_time_is_cut_at_the_body_timeout(guarded_server: ServerProcess) -> None:
    body = json.dumps({"sentences": ["a b c"]}).encode()
    with connect(guarded_server) as client:
        client.sendall(post_head(len(body)))
        opened = time.monotonic()
        for byte in body:  # every byte is on time, the whole body is not
            try:
                client.sendall(bytes([byte]))
            except (BrokenPipeError, ConnectionResetError):
                break
            time.sleep(0.1)
        received, closed = read_until_closed(client)
    assert received.startswith(b"HTTP/1.1 408 ")
    assert closed - opened < TIMEOUT_S + 1.5


def test_connections_past_the_limit_get_503_until_idle_ones_time_out(guarded_server: ServerProcess) -> None:
    idle = [connect(guarded_server) for _ in range(4)]
    try:
        time.sleep(0.2)
        refused = httpx.get(f"{guarded_server.url}/healthz")
        assert refused.status_code == 503
        for client in idle:  # the header timeout closes them
            read_until_closed(client)
        assert httpx.get(f"{guarded_server.url}/healthz").status_code == 200
    finally:
        for client in idle:
            client.close()


def held_tokens(server: ServerProcess) -> float:
    text = httpx.get(f"{server.url}/metrics").text
    return float(re.search(r'^elmo_held_tokens\{model="elmo"\} (\S+)$', text, re.MULTILINE).group(1))


def rss_bytes(server: ServerProcess) -> int:
    status = Path(f"/proc/{server.process.pid}/status").read_text()
    return int(re.search(r"^VmRSS:\s+(\d+) kB", status, re.MULTILINE).group(1)) * 1024


BIG_TOKENS = 16_000  # with every layer: about 17 MB of JSON from the test model, more than the kernel buffers


def big_request() -> bytes:
    body = json.dumps({"sentences": ["w " * BIG_TOKENS], "layers": "all"}).encode()
    return post_head(len(body)) + body


@pytest.fixture
def big_answer_server(start_server) -> ServerProcess:
    """Answers of ~17 MB, a budget of two of them at once, and a 2 s write timeout."""
    return start_server("--model", str(FIXTURE_MODEL), "--max-request-tokens", str(BIG_TOKENS),
                        "--max-queue-tokens", str(2 * BIG_TOKENS), "--write-timeout", "2", "--max-wait-ms", "0")


def test_a_client_that_does_not_read_is_cut_off_and_its_tokens_given_back(big_answer_server: ServerProcess) -> None:
    with connect(big_answer_server, receive_buffer=4096) as client:
        client.sendall(big_request())
        sent = time.monotonic()
        deadline = sent + 5
        while held_tokens(big_answer_server) != BIG_TOKENS:  # admitted and answering
            assert time.monotonic() < deadline
            time.sleep(0.05)
        while held_tokens(big_answer_server) != 0:  # given back when the write timeout aborts the connection
            assert time.monotonic() - sent < 10, "the tokens of a client that reads nothing are never given back"
            time.sleep(0.1)
        received, _ = read_until_closed(client)
    head, _, body = received.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 ")
    length = int(re.search(rb"content-length: (\d+)", head).group(1))
    assert len(body) < length  # cut off, not answered in full
    with httpx.Client(timeout=30) as http:  # the whole budget is free again
        answers = [http.post(f"{big_answer_server.url}/v1/embed",
                             json={"sentences": ["w " * BIG_TOKENS], "layers": "all"}) for _ in range(2)]
    assert [answer.status_code for answer in answers] == [200, 200]


def test_clients_that_do_not_read_hold_at_most_the_token_budget(big_answer_server: ServerProcess) -> None:
    baseline = rss_bytes(big_answer_server)
    clients = [connect(big_answer_server, receive_buffer=4096) for _ in range(10)]
    try:
        for client in clients:
            client.sendall(big_request())
        peak = baseline
        deadline = time.monotonic() + 5  # the model embeds ~20k tokens/s: time enough to answer all ten
        while time.monotonic() < deadline:
            peak = max(peak, rss_bytes(big_answer_server))
            time.sleep(0.05)
        statuses = [client.recv(12)[9:12] for client in clients]
    finally:
        for client in clients:
            client.close()
    assert sorted(statuses) == [b"200"] * 2 + [b"503"] * 8  # two fit the budget, the others are refused
    # each answer is ~17 MB of JSON and ~6 MB of vectors: two of them and the model's own working memory fit
    # well under 100 MiB; answering all ten to clients that do not read would pin ~230 MB
    assert peak - baseline < 100 << 20, f"RSS grew {(peak - baseline) >> 20} MiB"


KEY = "guard-key"


@pytest.fixture(scope="module")
def keyed_server(tmp_path_factory: pytest.TempPathFactory):
    """Keys required, the 1 s body timeout, and room for two connections."""
    directory = tmp_path_factory.mktemp("keyed")
    (directory / "keys").write_text(KEY + "\n")
    server = ServerProcess("--model", str(FIXTURE_MODEL), "--api-key-file", str(directory / "keys"),
                           "--body-timeout", str(TIMEOUT_S), "--limit-concurrency", "2",
                           log_path=directory / "log").start()
    yield server
    server.terminate()


def trickle_until_closed(client: socket.socket, head: bytes, within_s: float) -> tuple[bytes, float | None]:
    """Send ``head`` and then a one-byte chunk every 0.2 s, as a client that never finishes its body: what the
    server answers, and how long after the head it closed the connection (None if it was still open)."""
    client.sendall(head)
    opened = time.monotonic()
    client.settimeout(0.2)
    received = b""
    while time.monotonic() - opened < within_s:
        try:
            chunk = client.recv(1 << 16)
        except TimeoutError:
            chunk = None
        except ConnectionResetError:
            return received, time.monotonic() - opened
        if chunk == b"":
            return received, time.monotonic() - opened
        received += chunk or b""
        try:
            client.sendall(b"1\r\n \r\n")
        except (BrokenPipeError, ConnectionResetError):
            return received, time.monotonic() - opened
    return received, None


def chunked_head(method: str, path: str, authorization: str | None = None) -> bytes:
    head = f"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
    if authorization is not None:
        head += f"Authorization: {authorization}\r\n"
    return (head + "\r\n").encode()


def test_tokenize_asks_for_a_key_as_embed_does(keyed_server: ServerProcess) -> None:
    body = {"sentences": ["The bank , of the river ."]}
    assert httpx.post(f"{keyed_server.url}/v1/tokenize", json=body).status_code == 401
    keyed = httpx.post(f"{keyed_server.url}/v1/tokenize", json=body, headers={"authorization": f"Bearer {KEY}"})
    assert keyed.status_code == 200 and keyed.json()["tokens"] == [["The", "bank", ",", "of", "the", "river", "."]]


def test_keyless_clients_trickling_a_body_are_closed_after_their_401_and_leave_room(
        keyed_server: ServerProcess) -> None:
    """BearerAuth answers without reading the body, so BodySizeLimit's deadline never ran: two keyless clients
    trickling bodies held both connections for ever, and a keyed request got 503."""
    clients = [connect(keyed_server) for _ in range(2)]
    try:
        for client in clients:
            received, closed_after = trickle_until_closed(client, chunked_head("POST", "/v1/embed"), 4 * TIMEOUT_S)
            assert received.startswith(b"HTTP/1.1 401 ") and b"connection: close" in received.lower()
            assert closed_after is not None and closed_after < TIMEOUT_S + 1.5, "its connection stayed open"
        keyed = httpx.post(f"{keyed_server.url}/v1/embed", json={"sentences": ["a b"]},
                           headers={"authorization": f"Bearer {KEY}"})
        assert keyed.status_code == 200
    finally:
        for client in clients:
            client.close()


@pytest.mark.parametrize(("path", "authorization"), [("/healthz", None), ("/v1/models", f"Bearer {KEY}")])
def test_a_get_trickling_a_body_is_cut_at_the_body_timeout(keyed_server: ServerProcess, path: str,
                                                           authorization: str | None) -> None:
    with connect(keyed_server) as client:
        received, closed_after = trickle_until_closed(client, chunked_head("GET", path, authorization), 4 * TIMEOUT_S)
    assert received.startswith(b"HTTP/1.1 408 ")
    assert json.loads(received.split(b"\r\n\r\n", 1)[1])["error"]["code"] == "body_timeout"
    assert closed_after is not None and TIMEOUT_S - 0.1 < closed_after < TIMEOUT_S + 1.5


def http_get(client: socket.socket, path: str) -> tuple[bytes, bytes]:
    """One keep-alive GET on ``client``: the answer's head and body (the head says how long the body is)."""
    client.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    received = b""
    while b"\r\n\r\n" not in received:
        received += client.recv(1 << 16)
    head, _, body = received.partition(b"\r\n\r\n")
    length = int(re.search(rb"content-length: (\d+)", head, re.IGNORECASE).group(1))
    while len(body) < length:
        body += client.recv(1 << 16)
    return head, body


def test_limit_concurrency_serves_that_many_connections_and_refuses_the_next(start_server) -> None:
    """uvicorn counts the new connection against its limit: given N it served N - 1."""
    limit = 3
    server = start_server("--model", str(FIXTURE_MODEL), "--limit-concurrency", str(limit))
    clients = [connect(server) for _ in range(limit)]
    try:
        for client in clients:  # all N open at once, each kept open for the next request
            assert http_get(client, "/healthz")[0].startswith(b"HTTP/1.1 200 ")
        clients.append(connect(server))
        assert http_get(clients[limit], "/healthz")[0].startswith(b"HTTP/1.1 503 ")
        read_until_closed(clients[limit])  # uvicorn closes it: N open again
        for client in clients[:limit]:  # the first N are still served
            assert http_get(client, "/healthz")[0].startswith(b"HTTP/1.1 200 ")
        head, body = http_get(clients[0], "/v1/models")
        assert head.startswith(b"HTTP/1.1 200 ") and json.loads(body)["limits"]["limit_concurrency"] == limit
    finally:
        for client in clients:
            client.close()
