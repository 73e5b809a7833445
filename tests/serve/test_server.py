"""Every endpoint and every bad-input case, against a real ``elmo serve`` process on a loopback port."""

import io
import json
import re
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
import pytest

from elmo.embedder import Embedder

SENTENCES = ["The bank of the river is muddy .", ["She", "sat", "down"], "A bank raised its rates on loans today ."]
TOLERANCE = {"rtol": 1e-6, "atol": 1e-6}  # merged batches change float32 summation order, nothing more


def post(server, path: str, body, **headers: str) -> httpx.Response:
    return httpx.post(f"{server.url}{path}", json=body, headers=headers, timeout=30)


def post_raw(server, path: str, content: bytes, content_type: str = "application/json") -> httpx.Response:
    return httpx.post(f"{server.url}{path}", content=content, headers={"content-type": content_type}, timeout=30)


def assert_error(response: httpx.Response, status: int, field: str | None) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    error = response.json()["error"]
    assert error["field"] == field and error["message"]


@pytest.mark.parametrize("layers", ["all", "top", "average", [0.2, 0.3, 0.5], [0.0, 1.0, 0.0]])
def test_embed_json_equals_offline_embedder(server, embedder: Embedder, layers) -> None:
    response = post(server, "/v1/embed", {"model": "en", "sentences": SENTENCES, "layers": layers})
    assert response.status_code == 200, response.text
    body = response.json()
    expected = embedder.embed(SENTENCES, layers)
    assert (body["model"], body["n_layers"], body["dim"]) == ("en", 3, 32)
    for sentence, item, vectors in zip(SENTENCES, body["embeddings"], expected, strict=True):
        assert item["tokens"] == embedder.tokenize(sentence)
        np.testing.assert_allclose(np.array(item["vectors"], np.float32), vectors, **TOLERANCE)


def test_mean_pooling_averages_tokens(server, embedder: Embedder) -> None:
    body = post(server, "/v1/embed", {"model": "elmo", "sentences": SENTENCES, "layers": "all",
                                      "pooling": "mean"}).json()
    for item, vectors in zip(body["embeddings"], embedder.embed(SENTENCES, "all"), strict=True):
        np.testing.assert_allclose(np.array(item["vectors"]), vectors.mean(axis=1), **TOLERANCE)


@pytest.mark.parametrize("accept", ["application/x-npy", "application/octet-stream", "application/json;q=0.5, "
                                    "application/x-npy"])
def test_npy_body_decodes_to_the_padded_vectors(server, embedder: Embedder, accept: str) -> None:
    response = post(server, "/v1/embed", {"model": "en", "sentences": SENTENCES, "layers": "top"}, accept=accept)
    assert response.status_code == 200
    assert response.headers["content-type"] == accept.split(", ")[-1]
    array = np.load(io.BytesIO(response.content), allow_pickle=False)
    lengths = [int(n) for n in response.headers["x-sentence-lengths"].split(",")]
    expected = embedder.embed(SENTENCES, "top")
    assert array.dtype == np.float32 and array.shape == (3, max(lengths), 32)
    assert lengths == [len(vectors) for vectors in expected]
    for row, vectors in zip(array, expected, strict=True):
        np.testing.assert_allclose(row[: len(vectors)], vectors, **TOLERANCE)
        assert not row[len(vectors) :].any()


def test_npy_with_mean_pooling_has_no_token_axis(server, embedder: Embedder) -> None:
    response = post(server, "/v1/embed", {"model": "en", "sentences": SENTENCES, "layers": "all", "pooling": "mean"},
                    accept="application/x-npy")
    array = np.load(io.BytesIO(response.content))
    expected = np.stack([vectors.mean(axis=1) for vectors in embedder.embed(SENTENCES, "all")])
    np.testing.assert_allclose(array, expected, **TOLERANCE)


def test_sentence_over_the_window_is_windowed_as_offline(server, embedder: Embedder) -> None:
    long_sentence = [f"w{i}" for i in range(40)]  # the server's window is 12 tokens with 3 of context
    body = post(server, "/v1/embed", {"model": "en", "sentences": [long_sentence], "layers": "all"}).json()
    expected = embedder.embed([long_sentence], "all")[0]
    unwindowed = Embedder(embedder.bilm, max_window_tokens=1000).embed([long_sentence], "all")[0]
    np.testing.assert_allclose(np.array(body["embeddings"][0]["vectors"]), expected, **TOLERANCE)
    assert np.abs(expected - unwindowed).max() > 1e-3  # so the comparison above does tell windows apart


def test_concurrent_requests_are_merged_and_each_gets_its_own_vectors(server, embedder: Embedder) -> None:
    token_lists = [[f"t{i}", "bank", f"x{i % 3}"] * (1 + i % 4) for i in range(24)]
    before = _metric_sums(server, "elmo_batch_requests", model="en")

    def one(tokens: list[str]) -> np.ndarray:
        response = post(server, "/v1/embed", {"model": "en", "sentences": [tokens], "layers": "average"})
        return np.array(response.json()["embeddings"][0]["vectors"], np.float32)

    with ThreadPoolExecutor(12) as pool:
        served = list(pool.map(one, token_lists))
    for got, expected in zip(served, embedder.embed(token_lists, "average"), strict=True):
        np.testing.assert_allclose(got, expected, **TOLERANCE)
    after = _metric_sums(server, "elmo_batch_requests", model="en")
    requests, batches = after[0] - before[0], after[1] - before[1]
    assert requests == 24 and batches < 24  # some model batches held several requests


def test_similarity_is_the_cosine_of_the_offline_vectors(server, embedder: Embedder) -> None:
    sentences = ["we sat on the bank of the river", "the Bank raised rates", ["a", "bank", "loan", "bank"]]
    body = post(server, "/v1/similarity", {"model": "en", "word": "bank", "sentences": sentences}).json()
    token_lists = [embedder.tokenize(s) for s in sentences]
    occurrences = [(0, 4), (1, 1), (2, 1), (2, 3)]  # "Bank" matches: case is ignored by default
    assert [(o["sentence"], o["position"]) for o in body["occurrences"]] == occurrences
    layers = embedder.embed(token_lists, "all")
    similarity = np.array(body["similarity"])
    assert similarity.shape == (3, 4, 4)
    for layer in range(3):
        for i, (s1, p1) in enumerate(occurrences):
            for j, (s2, p2) in enumerate(occurrences):
                a, b = layers[s1][layer, p1].astype(np.float64), layers[s2][layer, p2].astype(np.float64)
                assert similarity[layer, i, j] == pytest.approx(a @ b / np.linalg.norm(a) / np.linalg.norm(b), abs=1e-6)
    for groups in body["groups"]:  # each layer splits the 4 occurrences into 2 groups
        assert len(groups) == 2 and sorted(i for group in groups for i in group) == [0, 1, 2, 3]
    case_sensitive = post(server, "/v1/similarity", {"model": "en", "word": "bank", "sentences": sentences,
                                                     "match_case": True}).json()
    assert len(case_sensitive["occurrences"]) == 3


def test_tokenize_answers_the_offline_tokenizers_tokens_without_running_the_model(server, embedder: Embedder) -> None:
    """The page asked POST /v1/embed for its word suggestions, a model run per edit only to read the tokens back."""
    sentences = [*SENTENCES, "The bank, of the ri\u00adver.", "cafe\u0301  bank"]
    batches = _metric_sums(server, "elmo_batch_requests", model="en")[1]
    response = post(server, "/v1/tokenize", {"model": "en", "sentences": sentences})
    assert response.status_code == 200, response.text
    assert response.json() == {"model": "en", "tokenizer": embedder.tokenizer_name,
                               "tokens": [embedder.tokenize(sentence) for sentence in sentences]}
    assert response.json()["tokens"][1] == ["She", "sat", "down"]  # a token list is used as given
    assert _metric_sums(server, "elmo_batch_requests", model="en")[1] == batches  # no model run


@pytest.mark.parametrize(("body", "status", "field"), [
    ({"model": "en", "sentences": ["a"] * 9}, 413, "sentences"),
    ({"model": "en", "sentences": []}, 422, "sentences"),
    ({"model": "en", "sentences": ["a", "   "]}, 422, "sentences[1]"),
    ({"model": "en", "sentences": [["a", 3]]}, 422, "sentences[0][1]"),
    ({"model": "ru", "sentences": ["a"]}, 404, "model"),
    ({"sentences": ["a"]}, 422, "model"),  # two models served: which one?
    ({"model": "en", "sentences": ["a"], "layers": "top"}, 422, "layers"),
])
def test_bad_tokenize_requests_name_the_field_as_embed_does(server, body, status: int, field: str) -> None:
    assert_error(post(server, "/v1/tokenize", body), status, field)
    if field != "layers":  # an embed request may hold layers
        assert_error(post(server, "/v1/embed", body), status, field)


def test_models_healthz_docs(server, embedder: Embedder) -> None:
    models = httpx.get(f"{server.url}/v1/models").json()
    assert [(m["name"], m["n_layers"], m["dim"]) for m in models["models"]] == [("en", 3, 32), ("elmo", 3, 32)]
    assert [m["fingerprint"] for m in models["models"]] == [embedder.fingerprint] * 2  # one model, served twice
    assert models["limits"]["max_sentences"] == 8
    assert {"window_context", "limit_concurrency", "header_timeout_s", "body_timeout_s", "write_timeout_s",
            "keep_alive_s", "max_sentence_tokens", "request_timeout_s"} <= models["limits"].keys()
    assert httpx.get(f"{server.url}/healthz").json() == {"status": "ok", "models": ["en", "elmo"]}
    schema = httpx.get(f"{server.url}/openapi.json").json()
    assert {"/v1/embed", "/v1/tokenize", "/v1/similarity", "/v1/models", "/healthz", "/metrics"} <= set(
        schema["paths"])
    docs = httpx.get(f"{server.url}/docs").text
    script = re.search(r'src="(/docs-assets/[^"]+\.js)"', docs).group(1)  # served locally, no CDN
    assert httpx.get(f"{server.url}{script}").status_code == 200
    page = httpx.get(f"{server.url}/")
    assert page.status_code == 200 and "<title>elmo" in page.text


def test_metrics_count_requests_latency_batches_and_queue(server) -> None:
    before = _metric_sums(server, "elmo_request_duration_seconds", endpoint="/v1/embed")
    for _ in range(3):
        post(server, "/v1/embed", {"model": "en", "sentences": ["a b c"]})
    post(server, "/v1/embed", {"model": "nope", "sentences": ["a"]})
    text = httpx.get(f"{server.url}/metrics").text
    after = _metric_sums(server, "elmo_request_duration_seconds", endpoint="/v1/embed")
    assert after[1] - before[1] == 4  # every answer timed, refusals included
    assert re.search(r'elmo_requests_total\{endpoint="/v1/embed",status="404"\} [1-9]', text)
    assert 'elmo_queue_depth{model="en"} 0.0' in text and 'elmo_pending_requests{model="en"} 0.0' in text
    assert re.search(r'elmo_batch_tokens_count\{model="en"\} [1-9]', text)
    assert re.search(r'elmo_tokens_total\{model="en"\} [1-9]', text)


@pytest.mark.parametrize(("body", "status", "field"), [
    ({"model": "en", "sentences": [5, "x"]}, 422, "sentences[0]"),
    ({"model": "en", "sentences": [["a", 3]]}, 422, "sentences[0][1]"),
    ({"model": "en", "sentences": "one string"}, 422, "sentences"),
    ({"model": "en", "sentences": []}, 422, "sentences"),
    ({"model": "en"}, 422, "sentences"),
    ({"model": "en", "sentences": ["   "]}, 422, "sentences[0]"),
    ({"model": "en", "sentences": [["a", ""]]}, 422, "sentences[0][1]"),  # a token without text
    ({"model": "en", "sentences": ["b", ["a", " \t"]]}, 422, "sentences[1][1]"),
    ({"model": "en", "sentences": [["ok", "bell\u0007"]]}, 422, "sentences[0][1]"),  # refused as elmo embed does
    ({"model": "ru", "sentences": ["a"]}, 404, "model"),
    ({"model": 3, "sentences": ["a"]}, 422, "model"),
    ({"sentences": ["a"]}, 422, "model"),  # two models served: which one?
    ({"model": "en", "sentences": ["a"], "layers": "bottom"}, 422, "layers"),
    ({"model": "en", "sentences": ["a"], "layers": [1.0, 0.0]}, 422, "layers"),
    ({"model": "en", "sentences": ["a b"], "layers": [3e38, 3e38, 3e38]}, 422, "layers"),  # the sum overflows
    ({"model": "en", "sentences": ["a"], "pooling": "max"}, 422, "pooling"),
    ({"model": "en", "sentences": ["a"], "colour": "red"}, 422, "colour"),
    ({"model": "en", "sentences": ["a"] * 9}, 413, "sentences"),
    (["a", "b"], 422, "body"),
])
def test_bad_embed_requests_name_the_field(server, body, status: int, field: str) -> None:
    assert_error(post(server, "/v1/embed", body), status, field)


@pytest.mark.parametrize(("body", "status", "field"), [
    ({"model": "en", "word": "bank", "sentences": ["one bank only"]}, 422, "word"),
    ({"model": "en", "word": "", "sentences": ["a bank", "b bank"]}, 422, "word"),
    ({"model": "en", "word": "bank", "sentences": ["a bank", "b bank"], "n_groups": 0}, 422, "n_groups"),
    ({"model": "en", "word": "bank", "sentences": ["a bank", "b bank"], "match_case": "yes"}, 422, "match_case"),
])
def test_bad_similarity_requests_name_the_field(server, body, status: int, field: str) -> None:
    assert_error(post(server, "/v1/similarity", body), status, field)


def test_malformed_json_wrong_media_type_and_oversized_body(server) -> None:
    assert_error(post_raw(server, "/v1/embed", b'{"model": "en", "sentences": ['), 400, "body")
    assert_error(post_raw(server, "/v1/embed", b"sentences=a", "application/x-www-form-urlencoded"), 415,
                 "Content-Type")
    oversized = json.dumps({"model": "en", "sentences": ["word " * 1000]}).encode()  # over --max-body-bytes 4096
    assert_error(post_raw(server, "/v1/embed", oversized), 413, None)

    def chunks():  # no Content-Length: the limit holds on the bytes actually read
        yield oversized[:3000]
        yield oversized[3000:]

    chunked = httpx.post(f"{server.url}/v1/embed", content=chunks(), headers={"content-type": "application/json"})
    assert_error(chunked, 413, None)


@pytest.mark.parametrize("content_type", [None, "text/json", "text/plain", "application/jsonl"])
def test_a_json_body_sent_as_another_media_type_or_none_is_415_naming_content_type(server,
                                                                                  content_type: str | None) -> None:
    """FastAPI reads only application/json and application/*+json as JSON (none at all is refused on purpose: a
    browser may send it cross-site without asking first); the 422 "valid dictionary" it led to named the body."""
    body = json.dumps({"model": "en", "sentences": ["a b"]}).encode()
    headers = {} if content_type is None else {"content-type": content_type}
    response = httpx.post(f"{server.url}/v1/embed", content=body, headers=headers, timeout=30)
    if content_type is None:  # as requests.post(url, data=...) sends it
        assert "content-type" not in response.request.headers
    assert_error(response, 415, "Content-Type")
    error = response.json()["error"]
    assert error["code"] == "unsupported_media_type"
    assert (content_type or "no Content-Type") in error["message"]


@pytest.mark.parametrize("content_type", ["application/json; charset=utf-8", "application/vnd.elmo+json"])
def test_json_media_types_are_read_as_json(server, embedder: Embedder, content_type: str) -> None:
    body = json.dumps({"model": "en", "sentences": ["a b"], "layers": "top"}).encode()
    response = post_raw(server, "/v1/embed", body, content_type)
    assert response.status_code == 200, response.text
    vectors = np.array(response.json()["embeddings"][0]["vectors"], np.float32)
    np.testing.assert_allclose(vectors, embedder.embed(["a b"], "top")[0], **TOLERANCE)


def test_unacceptable_accept_header(server) -> None:
    assert_error(post(server, "/v1/embed", {"model": "en", "sentences": ["a"]}, accept="text/html"), 406, "Accept")


def _metric_sums(server, name: str, **labels: str) -> tuple[float, float]:
    """(``_sum``, ``_count``) of a histogram with these labels."""
    text = httpx.get(f"{server.url}/metrics").text
    selector = ",".join(f'{key}="{value}"' for key, value in labels.items())
    values = []
    for suffix in ("sum", "count"):
        match = re.search(rf"^{name}_{suffix}\{{{selector}\}} (\S+)$", text, re.MULTILINE)
        values.append(float(match.group(1)) if match else 0.0)
    return values[0], values[1]


@pytest.mark.parametrize(("layers", "field"), [("[NaN, 0, 1]", "layers[0]"), ("[0, Infinity, 1]", "layers[1]"),
                                               ("[0, 0, -Infinity]", "layers[2]"), ("[1e400, 0, 0]", "layers[0]")])
def test_non_finite_layer_weights_are_refused_naming_the_weight(server, layers: str, field: str) -> None:
    # not JSON by the RFC, but Python's parser (and so FastAPI's) reads them as floats: the model must refuse them
    body = b'{"model": "en", "sentences": ["a b"], "layers": %s}' % layers.encode()
    response = post_raw(server, "/v1/embed", body)
    assert_error(response, 422, field)
    assert response.json()["error"]["code"] == "invalid_request" and "finite" in response.json()["error"]["message"]


@pytest.mark.parametrize(("path", "body", "field"), [
    ("/v1/embed", b'{"model": "en", "sentences": ["a \\ud800 b"]}', "sentences[0]"),
    ("/v1/embed", b'{"model": "en", "sentences": [["a", "b\\udfff"]]}', "sentences[0][1]"),
    ("/v1/tokenize", b'{"model": "en", "sentences": ["a \\ud800 b"]}', "sentences[0]"),
    ("/v1/similarity", b'{"model": "en", "word": "a", "sentences": ["a b", "a \\ud800"]}', "sentences[1]"),
    ("/v1/similarity", b'{"model": "en", "word": "\\ud800", "sentences": ["a b", "a c"]}', "word"),
])
def test_a_lone_surrogate_is_refused_before_the_model_and_the_connection_lives_on(server, path: str, body: bytes,
                                                                                    field: str) -> None:
    batches = _metric_sums(server, "elmo_batch_requests", model="en")[1]
    with httpx.Client(timeout=30) as client:
        response = client.post(f"{server.url}{path}", content=body, headers={"content-type": "application/json"})
        assert_error(response, 422, field)
        message = response.json()["error"]["message"]
        assert "surrogate" in message or "unicode" in message, message
        # the keep-alive connection is still good for the next request
        assert client.post(f"{server.url}/v1/embed", json={"model": "en", "sentences": ["a b"]}).status_code == 200
    assert _metric_sums(server, "elmo_batch_requests", model="en")[1] == batches + 1  # only the good request ran


@pytest.mark.parametrize("body", [b'{"model": "en", "sentences": ["caf\xe9"]}',  # Latin-1, not UTF-8
                                  b'{"model": "en", "sentences": ' + b"[" * 1500 + b"]" * 1500 + b"}"])
def test_invalid_utf8_and_deep_nesting_are_malformed_json(server, body: bytes) -> None:
    response = post_raw(server, "/v1/embed", body)
    assert_error(response, 400, "body")
    assert response.json()["error"]["code"] == "malformed_json"


def test_a_client_that_sends_an_oversized_body_whole_reads_the_413(server) -> None:
    # urllib writes the whole body before reading: a server that answers and closes at once resets it mid-send
    oversized = json.dumps({"model": "en", "sentences": ["word " * 2_400_000]}).encode()  # 12 MB, limit 4096
    for _ in range(3):  # a reset depends on timing: each try must see the 413
        request = urllib.request.Request(f"{server.url}/v1/embed", data=oversized,
                                         headers={"content-type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=30)
        assert refused.value.code == 413
        assert json.loads(refused.value.read())["error"]["code"] == "body_too_large"
    assert post(server, "/v1/embed", {"model": "en", "sentences": ["a b"]}).status_code == 200
