"""Contextual search over HTTP, against a real ``elmo serve --index`` process: an index built by the real
``build_index`` with the fixture model on a small constructed corpus, and the served answers compared with what
``neighbors``, ``senses`` and ``plot_senses`` give in this process."""

import io
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import matplotlib.image
import numpy as np
import pytest
import torch

from elmo.search import ContextIndex, build_index, neighbors, plot_senses, senses
from elmo.serve import commands

from .conftest import FIXTURE_MODEL, STARTUP_TIMEOUT_S, ServerProcess, free_port

API_KEY = "search-test-key"
AUTH = {"authorization": f"Bearer {API_KEY}"}
MAX_BODY_BYTES = 4096
SEARCH_TIMEOUT_S = 300  # scikit-learn's first import and k-means take their time on a busy machine
# "play" in two senses, "bank" in two, "walk" only twice (too few uses to cluster), one capitalised "Play",
# "dock" three times in one line repeated (three uses, one vector).
CORPUS = [
    "the pitcher made a fine play in the ninth inning",
    "a spectacular play on the grounder ended the game",
    "that play in the inning won the title",
    "she wrote a play for broadway",
    "the actors rehearsed the play on the stage",
    "the curtain fell and the Play ended on broadway",
    "we sat on the bank of the river",
    "the bank raised its rates on loans",
    "children like to play outside",
    "a fine day for a walk",
    "a long walk by the river bank",
    *["they tied the boat to the dock"] * 3,
]


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("search")
    corpus = directory / "corpus.txt"
    corpus.write_text("\n".join(CORPUS) + "\n", encoding="utf-8")
    torch.set_num_threads(1)
    build_index(corpus, directory / "index", str(FIXTURE_MODEL), layers=[1, 2], progress=False)
    return directory / "index"


@pytest.fixture(scope="module")
def index(index_dir: Path) -> ContextIndex:
    """The index in this process, with the model it was built with (loaded from its meta.json)."""
    return ContextIndex.load(index_dir)


@pytest.fixture(scope="module")
def search_server(index_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    """The index served twice (``play``, and ``copy`` by NAME=DIR), behind a bearer key and a small body limit."""
    directory = tmp_path_factory.mktemp("search-server")
    shutil.copytree(index_dir, directory / "play")
    keys = directory / "keys.txt"
    keys.write_text(API_KEY + "\n")
    server = ServerProcess("--model", f"en={FIXTURE_MODEL}", "--index", str(directory / "play"),
                           "--index", f"copy={index_dir}", "--api-key-file", str(keys),
                           "--max-body-bytes", str(MAX_BODY_BYTES), "--request-timeout", str(SEARCH_TIMEOUT_S),
                           log_path=directory / "server.log").start()
    yield server
    server.terminate()


def post(server: ServerProcess, path: str, body, **headers: str) -> httpx.Response:
    return httpx.post(f"{server.url}{path}", json=body, headers={**AUTH, **headers}, timeout=SEARCH_TIMEOUT_S)


def assert_error(response: httpx.Response, status: int, code: str, field: str | None) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    error = response.json()["error"]
    assert (error["code"], error["field"]) == (code, field), error
    assert error["message"]


NEIGHBOR_QUERIES = [
    # a corpus sentence: its own "play" is left out of the answer
    {"index": "play", "sentence": "the actors rehearsed the play on the stage", "word": "play", "k": 5},
    # a token list, the word in another case, same-word search on the second indexed layer
    {"index": "copy", "sentence": ["He", "signed", "to", "do", "a", "Broadway", "play"], "word": "PLAY",
     "k": 4, "same_word": True, "layer": 2},
    # the second use of the word, brute force, the layer by name
    {"index": "play", "sentence": "play ball and then play the bank game", "word": "play", "occurrence": 1,
     "layer": "layer2", "exact": True, "k": 7},
    # the defaults: k = 10, the first indexed layer
    {"index": "play", "sentence": "money in the bank", "word": "bank"},
    # the top layer by the one layer choice's name for it
    {"index": "play", "sentence": "money in the bank", "word": "bank", "layer": "top", "k": 3},
]


@pytest.mark.parametrize("query", NEIGHBOR_QUERIES)
def test_neighbors_equal_the_index_answer_in_process(search_server, index: ContextIndex, query: dict) -> None:
    response = post(search_server, "/v1/neighbors", query)
    assert response.status_code == 200, response.text
    body = response.json()
    k = query.get("k", 10)
    expected = neighbors(index, query["sentence"], query["word"], k=k, layer=query.get("layer"),
                         same_word=query.get("same_word", False), exact=query.get("exact", False),
                         occurrence=query.get("occurrence", 0))
    assert len(expected) == k  # the corpus has enough tokens, so the comparison is of k hits
    got = body["neighbors"]
    assert [(n["sentence"], n["token_index"], n["token"]) for n in got] == \
        [(n.sentence, n.token_index, n.token) for n in expected]
    np.testing.assert_allclose([n["score"] for n in got], [n.score for n in expected], rtol=0, atol=1e-6)
    form = index.vocabulary_form(query["word"])
    assert body["static_word"] == form
    static = index.static_vectors.nearest(form, k)
    assert [item["word"] for item in body["static"]] == [word for word, _ in static]
    np.testing.assert_allclose([item["score"] for item in body["static"]], [score for _, score in static],
                               rtol=0, atol=1e-6)
    assert body["layer"] == index.layer(query.get("layer"))
    assert body["tokens"][body["token_index"]].casefold() == query["word"].casefold()


def test_same_word_neighbors_are_all_uses_of_that_word(search_server) -> None:
    body = post(search_server, "/v1/neighbors", {"index": "play", "sentence": "a new play opened",
                                                  "word": "play", "k": 6, "same_word": True}).json()
    assert {n["token"] for n in body["neighbors"]} == {"play", "Play"}
    assert len(body["neighbors"]) == 6


def test_the_query_sentence_is_embedded_through_the_model_batcher(search_server) -> None:
    def tokens_embedded() -> float:
        text = httpx.get(f"{search_server.url}/metrics", headers=AUTH).text
        match = re.search(r'^elmo_tokens_total\{model="en"\} (\S+)$', text, re.MULTILINE)
        return float(match.group(1)) if match else 0.0

    before = tokens_embedded()
    response = post(search_server, "/v1/neighbors", {"index": "play", "sentence": "one two play four five",
                                                     "word": "play", "k": 2})
    assert response.status_code == 200, response.text
    assert tokens_embedded() - before == 5


@pytest.mark.parametrize(("word", "clusters", "layer"), [("play", None, None), ("play", 2, 2), ("bank", 1, None)])
def test_senses_json_equals_senses_in_process(search_server, index: ContextIndex, word, clusters, layer) -> None:
    request = {"index": "play", "word": word, "clusters": clusters, "layer": layer}
    response = post(search_server, "/v1/senses", {key: value for key, value in request.items() if value is not None})
    assert response.status_code == 200, response.text
    body = response.json()
    expected = senses(index, word, clusters=clusters, layer=layer)
    assert (body["word"], body["layer"], body["occurrences"], body["total_occurrences"]) == \
        (word, expected.layer, len(expected.rows), expected.total_occurrences)
    assert body["silhouette"] == (None if expected.silhouette is None else pytest.approx(expected.silhouette, abs=1e-6))
    assert (body["silhouette"] is None) == (clusters == 1)  # undefined for one cluster: null, not a score of -1
    assert [(c["size"], c["sentence"], c["token_index"], c["token"], c["line"]) for c in body["clusters"]] == \
        [(size, e.sentence, e.token_index, e.token, e.line) for size, e in zip(expected.sizes, expected.examples,
                                                                                 strict=True)]
    if clusters is not None:
        assert len(body["clusters"]) == clusters


def test_senses_as_png_is_the_sense_map(search_server, index: ContextIndex, tmp_path: Path) -> None:
    response = post(search_server, "/v1/senses", {"index": "play", "word": "play", "clusters": 2},
                    accept="image/png")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "image/png"
    assert response.content[:8] == b"\x89PNG\r\n\x1a\n"
    image = matplotlib.image.imread(io.BytesIO(response.content), format="png")
    expected = matplotlib.image.imread(plot_senses(senses(index, "play", clusters=2), tmp_path / "play.png"))
    assert image.shape == expected.shape and np.ptp(image) > 0


def test_indexes_are_listed_with_their_model_and_sizes(search_server, index: ContextIndex) -> None:
    response = httpx.get(f"{search_server.url}/v1/indexes", headers=AUTH)
    assert response.status_code == 200, response.text
    listed = response.json()["indexes"]
    assert [(item["name"], item["model"], item["layers"]) for item in listed] == \
        [("play", "en", ["layer1", "layer2"]), ("copy", "en", ["layer1", "layer2"])]
    served = httpx.get(f"{search_server.url}/v1/models", headers=AUTH).json()["models"]
    assert [item["fingerprint"] for item in listed] == [served[0]["fingerprint"]] * 2 == \
        [index.meta["fingerprint"]] * 2
    meta = index.meta
    assert [(item["n_sentences"], item["n_tokens"], item["n_indexed"], item["dim"]) for item in listed] == \
        [(meta["n_sentences"], meta["n_tokens"], meta["n_indexed"], meta["dim"])] * 2


SENTENCE = "she wrote a play for broadway"


@pytest.mark.parametrize(("path", "body", "status", "code", "field"), [
    ("/v1/neighbors", {"index": "nope", "sentence": SENTENCE, "word": "play"}, 404, "index_not_found", "index"),
    ("/v1/neighbors", {"sentence": SENTENCE, "word": "play"}, 422, "invalid_request", "index"),  # two are served
    ("/v1/neighbors", {"index": "play", "sentence": SENTENCE, "word": "bank"}, 422, "word_not_in_sentence", "word"),
    ("/v1/neighbors", {"index": "play", "sentence": SENTENCE, "word": "play", "occurrence": 1}, 422,
     "invalid_request", "occurrence"),
    ("/v1/neighbors", {"index": "play", "sentence": "a zebra ran", "word": "zebra", "same_word": True}, 422,
     "word_not_indexed", "word"),
    ("/v1/neighbors", {"index": "play", "sentence": SENTENCE, "word": "play", "k": 0}, 422, "invalid_request", "k"),
    ("/v1/neighbors", {"index": "play", "sentence": SENTENCE, "word": "play", "k": 101}, 422, "invalid_request", "k"),
    ("/v1/neighbors", {"index": "play", "sentence": SENTENCE, "word": "play", "k": "5"}, 422, "invalid_request", "k"),
    ("/v1/neighbors", {"index": "play", "sentence": SENTENCE, "word": "play", "layer": 0}, 422, "invalid_request",
     "layer"),
    ("/v1/neighbors", {"index": "play", "sentence": SENTENCE, "word": "play", "layer": "all"}, 422,
     "invalid_request", "layer"),
    ("/v1/neighbors", {"index": "play", "sentence": SENTENCE, "word": "play", "layer": [0, 0, 1]}, 422,
     "invalid_request", "layer"),
    ("/v1/neighbors", {"index": "play", "sentence": SENTENCE, "word": "play", "layer": -3}, 422,
     "invalid_request", "layer"),
    ("/v1/neighbors", {"index": "play", "sentence": "  ", "word": "play"}, 422, "invalid_request", "sentence"),
    ("/v1/neighbors", {"index": "play", "sentence": SENTENCE, "word": ""}, 422, "invalid_request", "word"),
    ("/v1/neighbors", {"index": "play", "sentence": SENTENCE, "word": " "}, 422, "invalid_request", "word"),
    ("/v1/neighbors", {"index": "play", "sentence": ["a", "\u200b", "play"], "word": " "}, 422, "invalid_request",
     "sentence[1]"),  # a blank word matched this token, which reads as no word, and was searched as a word
    ("/v1/senses", {"index": "play", "word": "\u200b"}, 422, "invalid_request", "word"),
    ("/v1/neighbors", {"index": "play", "sentence": SENTENCE, "word": "play", "colour": "red"}, 422,
     "invalid_request", "colour"),
    ("/v1/senses", {"index": "nope", "word": "play"}, 404, "index_not_found", "index"),
    ("/v1/senses", {"index": "play", "word": "walk"}, 422, "too_few_occurrences", "word"),  # 2 uses
    ("/v1/senses", {"index": "play", "word": "zebra"}, 422, "too_few_occurrences", "word"),
    ("/v1/senses", {"index": "play", "word": "play", "clusters": 8}, 422, "invalid_request", "clusters"),  # 7 uses
    ("/v1/senses", {"index": "play", "word": "play", "clusters": 0}, 422, "invalid_request", "clusters"),
    ("/v1/senses", {"index": "play", "word": "play", "layer": "average"}, 422, "invalid_request", "layer"),
    ("/v1/senses", {"index": "play", "word": "dock", "clusters": 2}, 422, "invalid_request", "clusters"),
    ("/v1/senses", {"index": "play", "word": "play", "layer": "\uff12"}, 422, "invalid_request", "layer"),  # full-width
    ("/v1/neighbors", {"index": "play", "sentence": SENTENCE, "word": "play", "layer": "layer\uff12"}, 422,
     "invalid_request", "layer"),
])
def test_bad_search_requests_get_their_status_and_code(search_server, path, body, status, code, field) -> None:
    assert_error(post(search_server, path, body), status, code, field)


def test_senses_of_uses_with_one_vector_are_one_cluster(search_server) -> None:
    response = post(search_server, "/v1/senses", {"index": "play", "word": "dock"})
    assert response.status_code == 200, response.text
    assert [cluster["size"] for cluster in response.json()["clusters"]] == [3]


def test_a_lone_surrogate_in_a_search_sentence_is_refused(search_server) -> None:
    body = b'{"index": "play", "sentence": "a \\ud800 play", "word": "play"}'
    response = httpx.post(f"{search_server.url}/v1/neighbors", content=body,
                          headers={**AUTH, "content-type": "application/json"}, timeout=60)
    assert_error(response, 422, "invalid_request", "sentence")


def test_senses_refuse_an_accept_they_cannot_answer(search_server) -> None:
    assert_error(post(search_server, "/v1/senses", {"index": "play", "word": "play"}, accept="text/csv"), 406,
                 "not_acceptable", "Accept")


def test_search_endpoints_need_the_key_and_keep_the_body_limit(search_server) -> None:
    query = {"index": "play", "sentence": SENTENCE, "word": "play"}
    for method, path, body in [("POST", "/v1/neighbors", query), ("POST", "/v1/senses", {"word": "play"}),
                               ("GET", "/v1/indexes", None)]:
        response = httpx.request(method, f"{search_server.url}{path}", json=body, timeout=30)
        assert_error(response, 401, "unauthorized", None)
    oversized = {**query, "sentence": SENTENCE + " play" * MAX_BODY_BYTES}
    assert_error(post(search_server, "/v1/neighbors", oversized), 413, "body_too_large", None)


def _bad_index_flags(case: str, index_dir: Path, tmp_path: Path) -> list[str]:
    if case == "empty directory":
        return ["--index", str(tmp_path)]
    if case == "no directory":
        return ["--index", str(tmp_path / "missing")]
    if case == "unfinished build":
        (tmp_path / "half.partial").mkdir()
        return ["--index", str(tmp_path / "half")]
    if case in ("model not served", "model missing"):
        model = tmp_path / "other-model"  # the same weights in another directory are another model
        if case == "model not served":
            shutil.copytree(FIXTURE_MODEL, model)
        copy = tmp_path / "elsewhere"
        shutil.copytree(index_dir, copy)
        meta = json.loads((copy / "meta.json").read_text())
        meta["model"] = str(model)
        (copy / "meta.json").write_text(json.dumps(meta))
        return ["--index", str(copy)]
    if case == "same name twice":
        return ["--index", f"a={index_dir}", "--index", f"a={index_dir}"]
    assert case == "no name"
    return ["--index", f"={index_dir}"]


@pytest.mark.parametrize(("case", "message"), [
    ("empty directory", "is not a finished index"),
    ("no directory", "no such index directory"),
    ("unfinished build", "half.partial is an unfinished build"),
    ("model not served", "other-model; serve that model too (--model "),
    ("model missing", "other-model, which is not found here"),
    ("same name twice", "two --index flags"),
    ("no name", "expected NAME=DIR"),
])
def test_a_bad_index_flag_is_one_line_and_exit_2_before_any_model_loads(
        index_dir: Path, tmp_path: Path, monkeypatch, capsys, case: str, message: str) -> None:
    def started(*_):
        raise AssertionError("the server went on to load its models")

    monkeypatch.setattr(commands, "_run", started)
    flags = _bad_index_flags(case, index_dir, tmp_path)
    assert commands.main(["--model", f"en={FIXTURE_MODEL}", *flags]) == 2
    error = capsys.readouterr().err
    assert error.startswith("elmo serve: error: ") and message in error and error.count("\n") == 1, error


def test_an_index_of_another_model_stops_the_start_up(index_dir: Path, tmp_path: Path) -> None:
    copy = tmp_path / "index"
    shutil.copytree(index_dir, copy)
    meta = json.loads((copy / "meta.json").read_text())
    meta["fingerprint"] = "0" * 64  # as an index of another model of the same shape records
    (copy / "meta.json").write_text(json.dumps(meta))
    command = [sys.executable, "-m", "elmo.serve", "--model", f"en={FIXTURE_MODEL}", "--index", str(copy),
               "--port", str(free_port()), "--threads", "1"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=STARTUP_TIMEOUT_S)
    assert result.returncode == 2, result.stderr
    assert "differs from the one" in result.stderr and result.stderr.count("\n") == 1, result.stderr


def test_a_server_without_an_index_answers_search_with_404(server) -> None:
    response = httpx.post(f"{server.url}/v1/neighbors", json={"sentence": SENTENCE, "word": "play"}, timeout=30)
    assert_error(response, 404, "index_not_found", "index")
    assert httpx.get(f"{server.url}/v1/indexes").json() == {"indexes": []}


def test_an_index_of_a_shipped_model_is_matched_to_it_where_a_folder_has_its_name(tmp_path: Path,
                                                                                  monkeypatch: pytest.MonkeyPatch):
    """The recorded name "en" was looked up from the working directory, where a folder named en (the index itself,
    built with --out en) hid the shipped model: the server refused to start."""
    from elmo.model_dir import shipped_models_root
    from elmo.search import build_index
    from elmo.serve.config import IndexSpec, ModelSpec
    from elmo.serve.search import model_for_index
    from elmo.windows import MAX_WINDOW_TOKENS, WINDOW_CONTEXT

    (tmp_path / "corpus.txt").write_text("she saw a play\nthe play ended\nplay the game\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    build_index(tmp_path / "corpus.txt", tmp_path / "en", "en", progress=False)
    served = ModelSpec("english", str(shipped_models_root() / "en"))
    windows = {"max_window_tokens": MAX_WINDOW_TOKENS, "window_context": WINDOW_CONTEXT}  # elmo index's defaults
    assert model_for_index(IndexSpec("idx", tmp_path / "en"), [served], windows) == "english"


def test_an_index_read_otherwise_than_the_service_reads_queries_is_refused_before_any_model_loads(index_dir: Path):
    """Another tokenizer, or other windows, were found only after every model had loaded and warmed up."""
    from elmo.model_dir import ModelDir
    from elmo.serve.config import IndexSpec, ModelSpec
    from elmo.serve.search import model_for_index

    spec, served = IndexSpec("idx", index_dir), ModelSpec("fixture", str(FIXTURE_MODEL))
    window = json.loads((index_dir / "meta.json").read_text())["window"]
    assert model_for_index(spec, [served], window) == "fixture"
    other = {"max_window_tokens": window["max_window_tokens"] + 2, "window_context": window["window_context"]}
    with pytest.raises(ValueError, match=rf"cuts long sentences as {other}: give --max-sentence-tokens "
                                         rf"{window['max_window_tokens']} --window-context {window['window_context']}"):
        model_for_index(spec, [served], other)
    meta = json.loads((index_dir / "meta.json").read_text())
    tokenizer = ModelDir.find(str(FIXTURE_MODEL)).tokenizer
    meta["tokenizer"] = "english" if tokenizer != "english" else "whitespace"
    copy = index_dir.parent / "other-tokenizer"
    shutil.copytree(index_dir, copy)
    (copy / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match=rf"model 'fixture' splits text with the '{tokenizer}' tokenizer, .* was "
                                         rf"built with '{meta['tokenizer']}'"):
        model_for_index(IndexSpec("idx", copy), [served], window)
