import json
import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from elmo import BiLM, load_bilm
from elmo.embedder import Embedder

FIXTURE_DIR = Path(__file__).parent / "fixtures" / "elmo"


@pytest.fixture(scope="session")
def fixture_dir() -> Path:
    """AllenNLP's bilm-tf fixture: options.json, lm_weights.hdf5, sentences and reference outputs."""
    return FIXTURE_DIR


@pytest.fixture(scope="session")
def fixture_bilm(fixture_dir: Path) -> BiLM:
    """The fixture biLM; tests must not modify it."""
    return load_bilm(fixture_dir / "options.json", fixture_dir / "lm_weights.hdf5")


@pytest.fixture
def text(tmp_path: Path, request: pytest.FixtureRequest) -> Path:
    """``in.txt``: the test module's ``LINES``, one a line (the input of the ``elmo embed`` tests)."""
    path = tmp_path / "in.txt"
    path.write_text("\n".join(request.module.LINES) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def expected(fixture_dir: Path, request: pytest.FixtureRequest) -> list[np.ndarray]:
    """Every layer of every one of the test module's ``LINES`` from the fixture model's ``Embedder``, in one process:
    what ``elmo embed``'s outputs must hold, whatever the format, shard or engine."""
    return Embedder.load(str(fixture_dir)).embed(request.module.LINES, "all")


@pytest.fixture(scope="session")
def fixture_sentences(fixture_dir: Path) -> list[list[str]]:
    """The fixture's 30 sentences, tokenized, in file order."""
    batches = json.loads((fixture_dir / "sentences.json").read_text())
    return [sentence.split() for batch in batches for sentence in batch]


@pytest.fixture
def no_model_load(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fails the test if a model is loaded (``Embedder.load`` or ``Embedder(...)``): the checks under test must come
    first."""

    def load(*args, **kwargs):
        raise AssertionError("the model was loaded before the mistake was found")

    monkeypatch.setattr(Embedder, "load", load)
    monkeypatch.setattr(Embedder, "__init__", load)


@pytest.fixture
def interrupt_after() -> Iterator[Callable[[pytest.MonkeyPatch, int, int], None]]:
    """``interrupt_after(monkeypatch, n, signum)`` patches ``Embedder.iter_embed`` to deliver ``signum`` to this
    process once ``n`` sentences' vectors have been made (how the tests stop an embedding job part way). SIGINT
    raises KeyboardInterrupt meanwhile, as in a terminal: a shell without job control starts a background command
    (``make test &``) with SIGINT ignored, which Python then leaves ignored."""
    ignored_or_not = signal.signal(signal.SIGINT, signal.default_int_handler)

    def patch(monkeypatch: pytest.MonkeyPatch, sentences: int, signum: int) -> None:
        original = Embedder.iter_embed
        made = 0

        def iter_embed(self, *args, **kwargs):
            nonlocal made
            for vectors in original(self, *args, **kwargs):
                made += 1
                if made == sentences + 1:
                    os.kill(os.getpid(), signum)
                yield vectors

        monkeypatch.setattr(Embedder, "iter_embed", iter_embed)

    yield patch
    signal.signal(signal.SIGINT, ignored_or_not)
