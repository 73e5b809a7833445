"""The sense page in a real headless browser (Debian's chromium driven by Playwright): type sentences,
pick a word suggested from the tokenizer's tokens (POST /v1/tokenize), and check the drawn heat maps against cosines
computed here from the offline embedder."""

import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest

from elmo.embedder import Embedder

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SENTENCES = ["we sat on the bank of the river", "the boat drifted to the muddy bank",
             "she put the money in the bank", "the bank raised interest rates"]

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")


def test_page_draws_the_similarity_of_a_picked_word(server, embedder: Embedder, tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright, tempfile.TemporaryDirectory() as profile:
        browser = playwright.chromium.launch_persistent_context(
            profile, executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS,
            viewport={"width": 1280, "height": 900})
        page = browser.new_page()
        posted = []
        page.on("request", lambda request: posted.append(request.url) if request.method == "POST" else None)
        page.goto(f"{server.url}/")
        page.wait_for_selector("#model option[value='elmo']", state="attached")
        page.select_option("#model", "elmo")
        page.fill("#sentences", "\n".join(SENTENCES))
        page.fill("#word", "")
        page.click("#candidates button:text-is('bank')")  # picking a repeated word runs the comparison
        page.wait_for_selector("body[data-ready='true']")
        # the suggestions were asked of the tokenizer alone, never of the model (POST /v1/embed)
        assert f"{server.url}/v1/tokenize" in posted and f"{server.url}/v1/embed" not in posted
        layers = page.locator(".layer")
        assert layers.count() == 3
        drawn = np.array([[float(cell.get_attribute("data-value")) for cell in layers.nth(layer).locator("td").all()]
                          for layer in range(3)]).reshape(3, 4, 4)
        groups = [layers.nth(layer).locator(".group").evaluate_all("chips => chips.map(c => c.dataset.members)")
                  for layer in range(3)]
        screenshot = tmp_path / "serve-screenshot.png"
        page.screenshot(path=str(screenshot), full_page=True)
        browser.close()

    layer_vectors = embedder.embed(SENTENCES, "all")
    vectors = np.stack([all_layers[:, sentence.split().index("bank")] for all_layers, sentence in
                        zip(layer_vectors, SENTENCES, strict=True)], axis=1).astype(np.float64)
    unit = vectors / np.linalg.norm(vectors, axis=-1, keepdims=True)
    np.testing.assert_allclose(drawn, np.einsum("lid,ljd->lij", unit, unit), atol=1e-6)
    for layer_groups in groups:  # two groups that together hold the four occurrences
        members = sorted(int(m) for chip in layer_groups for m in chip.split(","))
        assert len(layer_groups) == 2 and members == [0, 1, 2, 3]
    assert screenshot.stat().st_size > 10_000
    if os.environ.get("ELMO_SCREENSHOT"):  # refresh docs/serve-screenshot.png on purpose
        shutil.copy(screenshot, os.environ["ELMO_SCREENSHOT"])
