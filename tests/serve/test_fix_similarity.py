"""/v1/similarity and the sense page match a word as the model read the sentences: the word and the tokens are
cleaned alike (invisible formatting deleted, composed to NFC, spaces around dropped), and the page suggests the
words the server's tokenizer made, not the sentences' whitespace-separated pieces."""

import shutil
import tempfile
from collections import Counter
from pathlib import Path

import httpx
import numpy as np
import pytest

from elmo.embedder import Embedder
from elmo.similarity import find_occurrences
from elmo.tokenizers import word_key

from .conftest import FIXTURE_MODEL
from .test_page import CHROMIUM, CHROMIUM_FLAGS

NFD_CAFE = "cafe\u0301"  # e + combining acute: what a macOS keyboard or a decomposed file gives
BANK_SENTENCES = ["we sat on the bank of the river", "the Bank raised rates", ["a", "bank", "loan", "bank"]]
BANK_OCCURRENCES = [(0, 4), (1, 1), (2, 1), (2, 3)]


def _similarity(server, word: str, sentences: list, **options) -> httpx.Response:
    return httpx.post(f"{server.url}/v1/similarity", json={"model": "en", "word": word, "sentences": sentences,
                                                           **options}, timeout=30)


@pytest.mark.parametrize("word", [NFD_CAFE, "Cafe\u0301", " café ", "ca\u200bfé", "\u00adcafé\ufeff", "CAFÉ"])
def test_ignoring_case_a_typed_word_is_compared_as_its_cleaned_casefolded_form(word: str) -> None:
    assert word_key(word) == "café"


def test_a_decomposed_or_padded_word_finds_the_composed_tokens() -> None:
    token_lists = [["café", "Café"], [NFD_CAFE, "ca\u200bfé"], ["cafe"]]  # the second, as given pre-tokenized
    assert find_occurrences(token_lists, NFD_CAFE, match_case=False) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert find_occurrences(token_lists, " ca\u200bfé ", match_case=True) == [(0, 0), (1, 0), (1, 1)]
    assert find_occurrences(token_lists, "Café", match_case=True) == [(0, 1)]


@pytest.mark.parametrize("word", ["ba\u200bnk", " bank ", "BANK\u00ad", "ban" + "k\u200d"])
def test_served_similarity_finds_a_word_typed_with_invisible_characters_or_spaces(server, word: str) -> None:
    plain = _similarity(server, "bank", BANK_SENTENCES)
    typed = _similarity(server, word, BANK_SENTENCES)
    assert plain.status_code == typed.status_code == 200, typed.text
    assert [(o["sentence"], o["position"]) for o in typed.json()["occurrences"]] == BANK_OCCURRENCES
    assert typed.json()["similarity"] == plain.json()["similarity"]


def test_served_similarity_finds_a_decomposed_word_in_composed_text(server, embedder: Embedder) -> None:
    sentences = ["the café was closed", f"a {NFD_CAFE} opened", "the CAFÉ of the town"]
    response = _similarity(server, NFD_CAFE, sentences)
    assert response.status_code == 200, response.text
    assert [(o["sentence"], o["position"], o["token"]) for o in response.json()["occurrences"]] == [
        (0, 1, "café"), (1, 1, "café"), (2, 1, "CAFÉ")]
    vectors = np.stack([layers[:, 1] for layers in embedder.embed(sentences, "all")], axis=1).astype(np.float64)
    unit = vectors / np.linalg.norm(vectors, axis=-1, keepdims=True)
    np.testing.assert_allclose(response.json()["similarity"], np.einsum("lid,ljd->lij", unit, unit), atol=1e-6)


def test_a_word_of_only_invisible_characters_is_refused_before_the_sentences_are_read(server) -> None:
    response = _similarity(server, "\u200b \u00ad", ["   ", "a b"])  # the blank sentence would be refused too
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["field"] == "word" and "invisible" in error["message"]


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_the_page_suggests_the_repeated_words_of_the_models_tokenizer(start_server, tmp_path: Path) -> None:
    """A Moses model splits "bank," into "bank" and ","; NFC makes one "café" of two spellings. Each suggestion
    is a word the server finds at least twice, so picking it draws a comparison instead of a 422."""
    from playwright.sync_api import sync_playwright

    model = tmp_path / "moses-model"
    shutil.copytree(FIXTURE_MODEL, model)
    (model / "tokenizer.json").write_text('{"name": "english"}\n')
    sentences = ["we sat by the bank, near the café .", f"she went to the bank, then the {NFD_CAFE} .",
                 "no one banked there"]
    token_lists = [Embedder.load(str(model)).tokenize(sentence) for sentence in sentences]
    counts = Counter(token.lower() for tokens in token_lists for token in tokens)
    expected = sorted(word for word, count in counts.items() if count >= 2 and len(word) >= 3)
    assert expected == ["bank", "café", "the"]  # the tokenizer split off the commas

    server = start_server("--model", f"moses={model}")
    with sync_playwright() as playwright, tempfile.TemporaryDirectory() as profile:
        browser = playwright.chromium.launch_persistent_context(profile, executable_path=CHROMIUM, headless=True,
                                                                 args=CHROMIUM_FLAGS)
        page = browser.new_page()
        page.goto(f"{server.url}/")
        page.wait_for_selector("#model option[value='moses']", state="attached")
        page.fill("#sentences", "\n".join(sentences))
        page.wait_for_selector("#candidates button:text-is('café')")  # only the new sentences hold café
        suggested = sorted(page.locator("#candidates button").all_text_contents())
        page.click("#candidates button:text-is('bank')")
        page.wait_for_selector("body[data-ready='true']")
        marked = page.locator(".occurrences mark").all_text_contents()
        status_class = page.locator("#status").get_attribute("class")
        browser.close()
    assert suggested == expected
    assert marked == ["bank", "bank"] and status_class != "error"
